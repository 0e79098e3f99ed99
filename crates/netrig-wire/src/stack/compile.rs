//! Compiling a [`StackSpec`]: layout, template, derived fields, varying fields, checksums and
//! their per-length bases. Runs once per flow, never per frame.
use super::fill::Sized;
use super::KeySpec;
use super::{
    checksum_value, CompiledStack, Csum, HeaderDef, HeaderKind, HeaderSpec, LengthFix, Placed, StackError, StackSpec,
    Varying, MAX_CHECKSUMS,
};
use crate::pattern::{bytes_sum, lane, write_bits, BitSpan, Pattern, Stepper};
use crate::signature::{self, Site};

/// What the stack derives for a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Derived {
    Const(u128),
    /// The frame length less this many bytes.
    Length(usize),
    Checksum,
}

/// The EtherType announcing `next` (Ethernet's type, a VLAN tag's TPID field).
fn ethertype_of(next: HeaderKind) -> Option<u128> {
    Some(match next {
        HeaderKind::Vlan => 0x8100,
        HeaderKind::Ipv4 => 0x0800,
        HeaderKind::Ipv6 => 0x86DD,
        HeaderKind::Arp => 0x0806,
        HeaderKind::Mpls => 0x8847,
        _ => return None,
    })
}

/// The IP protocol number of `next` (IPv4 protocol, IPv6 next header).
fn ip_proto_of(next: HeaderKind) -> Option<u128> {
    Some(match next {
        HeaderKind::Udp => 17,
        HeaderKind::Tcp => 6,
        HeaderKind::Icmp => 1,
        HeaderKind::Icmpv6 => 58,
        HeaderKind::Gre => 47,
        HeaderKind::Ipv4 => 4,
        HeaderKind::Ipv6 => 41,
        HeaderKind::Mpls => 137,
        _ => return None,
    })
}

/// The GRE protocol type of `next` (transparent Ethernet bridging for Ethernet).
fn gre_proto_of(next: HeaderKind) -> Option<u128> {
    match next {
        HeaderKind::Ethernet => Some(0x6558),
        k => ethertype_of(k).filter(|_| k != HeaderKind::Vlan),
    }
}

/// What the stack derives for field `name` of header `i`, if anything.
fn derive(placed: &[Placed], i: usize, name: &str) -> Option<Derived> {
    let h = placed[i];
    let next = placed.get(i + 1).map(|p| p.kind);
    let via = |f: fn(HeaderKind) -> Option<u128>| next.and_then(f).map(Derived::Const);
    match (h.kind, name) {
        (HeaderKind::Ethernet, "ether_type") | (HeaderKind::Vlan, "tpid") => via(ethertype_of),
        (HeaderKind::Ipv4, "header_length") => Some(Derived::Const(5)),
        (HeaderKind::Ipv4, "total_length") | (HeaderKind::Udp, "length") => Some(Derived::Length(h.at)),
        (HeaderKind::Ipv6, "payload_length") => Some(Derived::Length(h.at + 40)),
        (HeaderKind::Ipv4, "protocol") | (HeaderKind::Ipv6, "next_header") => via(ip_proto_of),
        (HeaderKind::Gre, "protocol") => via(gre_proto_of),
        (HeaderKind::Tcp, "data_offset") => Some(Derived::Const(5)),
        (HeaderKind::Mpls, "bottom_of_stack") => Some(Derived::Const(u128::from(next != Some(HeaderKind::Mpls)))),
        (HeaderKind::Ipv4, "header_checksum")
        | (HeaderKind::Udp | HeaderKind::Tcp | HeaderKind::Icmp | HeaderKind::Icmpv6 | HeaderKind::Gre, "checksum") => {
            Some(Derived::Checksum)
        }
        _ => None,
    }
}

fn path(i: usize, h: &HeaderDef, field: &str) -> String {
    format!("packet[{i}].{}.{field}", h.name)
}

/// Lay the headers out: offsets, lengths (GRE 8 bytes with `checksum_present` 1).
fn layout(spec: &StackSpec) -> Result<(Vec<Placed>, usize), StackError> {
    if spec.headers.is_empty() {
        return Err(StackError::new("packet", "a flow needs at least one header: start with ethernet"));
    }
    let mut at = 0;
    let mut placed = Vec::with_capacity(spec.headers.len());
    for (i, h) in spec.headers.iter().enumerate() {
        let def = h.kind.def();
        let len = match h.kind {
            HeaderKind::Custom if h.bytes.is_empty() => {
                return Err(StackError::new(format!("packet[{i}].custom.bytes"), "give at least one byte"));
            }
            HeaderKind::Custom => h.bytes.len(),
            HeaderKind::Gre => match h.fields.iter().find(|(n, _)| n == "checksum_present").map(|(_, p)| p) {
                None | Some(Pattern::Fixed(0) | Pattern::Auto(0)) => 4,
                Some(Pattern::Fixed(1) | Pattern::Auto(1)) => 8,
                Some(_) => {
                    return Err(StackError::new(
                        path(i, def, "checksum_present"),
                        "must be one value, 0 or 1: it sets the header's length",
                    ))
                }
            },
            _ => def.len,
        };
        placed.push(Placed { kind: h.kind, at, len });
        at += len;
    }
    Ok((placed, at))
}

/// Check a pattern against its field's width (and a per-flow one against the key's digits).
fn check_pattern(p: &Pattern, bits: u32, at: &str, keys: &KeySpec) -> Result<(), StackError> {
    let max = if bits >= 128 { u128::MAX } else { (1u128 << bits) - 1 };
    let err = |m: String| Err(StackError::new(at, m));
    match p {
        Pattern::ByKey { digit, values } => match keys.radices.get(usize::from(*digit)) {
            None => err(format!("reads digit {digit} of a flow key with {} digits", keys.radices.len())),
            Some(&r) => match values.max_value(r) {
                Some(v) if v <= max => Ok(()),
                Some(v) => err(format!("its {r} flows run to {v}, past the field's {bits} bits (at most {max})")),
                None => err(format!("has fewer values than its {r} flows")),
            },
        },
        Pattern::List(v) if v.is_empty() => err("give at least one value".into()),
        Pattern::Counter { count: 0, .. } | Pattern::Random { count: 0, .. } => err("count must be at least 1".into()),
        Pattern::Random { min, max: hi, .. } if min > hi => err(format!("min {min} is above max {hi}")),
        Pattern::Random { .. } if bits > 64 => err(format!("random values are for fields of at most 64 bits ({bits})")),
        Pattern::Counter { step, .. } if *step > max => err(format!("step {step} does not fit {bits} bits")),
        _ => match p.max_value() {
            Some(v) if v > max => err(format!("{v} does not fit the field's {bits} bits (at most {max})")),
            _ => Ok(()),
        },
    }
}

/// The fields of one header as (definition, pattern), checked: known names, no field twice, no
/// two overlapping, values within the width; fields beyond a short GRE header only when 0.
fn header_fields(
    i: usize,
    h: &HeaderSpec,
    len: usize,
    keys: &KeySpec,
) -> Result<Vec<(super::FieldDef, Pattern)>, StackError> {
    let def = h.kind.def();
    let mut out: Vec<(super::FieldDef, Pattern)> = Vec::with_capacity(h.fields.len());
    for (name, p) in &h.fields {
        let Some(fd) = def.fields.iter().find(|f| f.name == name) else {
            let known: Vec<&str> = def.fields.iter().map(|f| f.name).collect();
            return Err(StackError::new(
                path(i, def, name),
                format!("{} has no such field: use one of {}", def.name, known.join(", ")),
            ));
        };
        let at = path(i, def, name);
        if usize::from(fd.bit) + usize::from(fd.bits) > len * 8 {
            if matches!(p, Pattern::Fixed(0) | Pattern::Auto(_)) {
                continue;
            }
            return Err(StackError::new(at, "is not in this header (GRE: only with checksum_present 1)"));
        }
        let overlaps = |o: &super::FieldDef| o.bit < fd.bit + u16::from(fd.bits) && fd.bit < o.bit + u16::from(o.bits);
        if let Some((o, _)) = out.iter().find(|(o, _)| overlaps(o)) {
            return Err(StackError::new(at, format!("overlaps {} set in the same header: set one of them", o.name)));
        }
        check_pattern(p, u32::from(fd.bits), &at, keys)?;
        out.push((*fd, p.clone()));
    }
    // Fields not given are derived where the stack derives them, else 0 (of overlapping ones, the
    // first in the table that overlaps nothing given).
    for fd in def.fields {
        let free = |o: &(super::FieldDef, Pattern)| {
            o.0.bit >= fd.bit + u16::from(fd.bits) || fd.bit >= o.0.bit + u16::from(o.0.bits)
        };
        if usize::from(fd.bit) + usize::from(fd.bits) <= len * 8 && out.iter().all(free) {
            out.push((*fd, Pattern::Auto(0)));
        }
    }
    Ok(out)
}

/// Compile `spec` for frames of lengths `lens` (without FCS): every length must hold the headers.
/// A length that also holds the signature carries it at the spec's site; a shorter one (the
/// smallest legal frame of a deep stack: 64 B of VLAN + IPv4 + TCP) is sent without it, untracked
/// ([`CompiledStack::signed`]).
pub fn compile(spec: &StackSpec, lens: &[usize]) -> Result<CompiledStack, StackError> {
    let (placed, headers_len) = layout(spec)?;
    let (lo, hi) = (lens.iter().copied().min().unwrap_or(0), lens.iter().copied().max().unwrap_or(0));
    if lens.is_empty() || lo < headers_len {
        return Err(StackError::new(
            "size",
            format!(
                "{} B (with FCS) cannot hold these headers ({headers_len} B): use frames of at least {} B",
                lo + 4,
                headers_len + 4
            ),
        ));
    }
    let mut b = Builder::new(placed, hi);
    for (i, h) in spec.headers.iter().enumerate() {
        if h.kind == HeaderKind::Custom {
            let at = b.placed[i].at;
            b.template[at..at + h.bytes.len()].copy_from_slice(&h.bytes);
            continue;
        }
        let len = b.placed[i].len;
        for (fd, p) in header_fields(i, h, len, &spec.keys)? {
            b.field(i, fd, p)?;
        }
    }
    if b.csums.len() > MAX_CHECKSUMS {
        return Err(StackError::new("packet", format!("at most {MAX_CHECKSUMS} checksums in one stack")));
    }
    if spec.keys.radices.contains(&0) {
        return Err(StackError::new("keys", "every digit of a flow key needs at least one value"));
    }
    spec.payload.write(&mut b.template[headers_len..]);
    Ok(b.finish(headers_len, lens, spec))
}

/// Where a frame of `len` bytes with `headers_len` bytes of headers carries the signature, and how
/// many bytes of it: all, at the site, or none (at the frame's end) when it has no room or the
/// stack has none (the frame is then untracked).
fn sig_place(site: Site, len: usize, headers_len: usize) -> (usize, usize) {
    match site {
        _ if len < headers_len + signature::LEN => (len, 0),
        Site::Payload => (headers_len, signature::LEN),
        Site::End => (len - signature::LEN, signature::LEN),
        Site::None => (len, 0),
    }
}

/// A stack being compiled.
struct Builder {
    placed: Vec<Placed>,
    template: Vec<u8>,
    varying: Vec<Varying>,
    lengths: Vec<LengthFix>,
    csums: Vec<Csum>,
    /// Per computed checksum: its pseudo-header (the IP header's index, the transport protocol).
    pseudo: Vec<Option<(usize, u8)>>,
}

impl Builder {
    fn new(placed: Vec<Placed>, max_len: usize) -> Builder {
        Builder {
            placed,
            template: vec![0; max_len],
            varying: Vec::new(),
            lengths: Vec::new(),
            csums: Vec::new(),
            pseudo: Vec::new(),
        }
    }

    fn span(&self, i: usize, fd: super::FieldDef) -> BitSpan {
        BitSpan { bit: self.placed[i].at * 8 + usize::from(fd.bit), bits: u32::from(fd.bits) }
    }

    /// Place one field: written into the template (fixed, derived, or a varying field's first
    /// value), and recorded when it changes per frame.
    fn field(&mut self, i: usize, fd: super::FieldDef, p: Pattern) -> Result<(), StackError> {
        let span = self.span(i, fd);
        let derived = derive(&self.placed, i, fd.name);
        match (&p, derived) {
            (Pattern::Auto(_) | Pattern::BadChecksum, Some(Derived::Checksum)) => {
                self.checksum(i, span, matches!(p, Pattern::BadChecksum));
            }
            (Pattern::Auto(_), Some(Derived::Const(v))) => write_bits(&mut self.template, &span, v),
            (Pattern::Auto(_), Some(Derived::Length(minus))) => {
                self.lengths.push(LengthFix { at: span.first_byte(), minus });
            }
            (Pattern::Fixed(v) | Pattern::Auto(v), _) => write_bits(&mut self.template, &span, *v),
            (Pattern::BadChecksum, _) => {
                let def = self.placed[i].kind.def();
                return Err(StackError::new(path(i, def, fd.name), "is not a checksum: give it a value"));
            }
            _ => {
                let stepper = Stepper::new(p, span.bits);
                write_bits(&mut self.template, &span, stepper.start().value);
                self.varying.push(Varying::new(span, stepper));
            }
        }
        Ok(())
    }

    fn checksum(&mut self, i: usize, span: BitSpan, bad: bool) {
        let h = self.placed[i];
        let (end, proto) = match h.kind {
            HeaderKind::Ipv4 => (Some(h.at + h.len), None),
            HeaderKind::Udp => (None, Some(17)),
            HeaderKind::Tcp => (None, Some(6)),
            HeaderKind::Icmpv6 => (None, Some(58)),
            _ => (None, None),
        };
        let ip = proto.and_then(|p| {
            self.placed[..i].iter().rposition(|x| matches!(x.kind, HeaderKind::Ipv4 | HeaderKind::Ipv6)).map(|k| (k, p))
        });
        self.csums.push(Csum {
            at: span.first_byte(),
            start: h.at,
            end,
            udp: h.kind == HeaderKind::Udp,
            bad,
            outer: Vec::new(),
        });
        self.pseudo.push(ip);
    }

    /// Order the checksums innermost first, work out who covers whom, and the bases.
    fn finish(mut self, headers_len: usize, lens: &[usize], spec: &StackSpec) -> CompiledStack {
        let site = spec.site;
        let mut order: Vec<usize> = (0..self.csums.len()).collect();
        order.sort_by_key(|&k| std::cmp::Reverse(self.csums[k].start));
        self.csums = order.iter().map(|&k| self.csums[k].clone()).collect();
        self.pseudo = order.iter().map(|&k| self.pseudo[k]).collect();
        let covers = |c: &Csum, at: usize, last: usize| at >= c.start && c.end.is_none_or(|e| last < e);
        for k in 0..self.csums.len() {
            let at = self.csums[k].at;
            self.csums[k].outer = (k + 1..self.csums.len())
                .filter(|&o| covers(&self.csums[o], at, at + 1))
                .map(|o| (o, (at - self.csums[o].start) % 2 == 1))
                .collect();
        }
        for v in &mut self.varying {
            let (b0, b1) = (v.span.first_byte(), v.span.last_byte());
            for (c, cs) in self.csums.iter().enumerate() {
                if covers(cs, b0, b1) {
                    v.contribs.push((c, (b0 - cs.start) % 2 == 1));
                } else if let Some((ip, _)) = self.pseudo[c] {
                    if Self::is_address(&self.placed[ip], b0, b1) {
                        v.contribs.push((c, false));
                    }
                }
            }
        }
        let zeroed = self.zeroed();
        let places: Vec<(usize, usize)> = lens.iter().map(|&l| sig_place(site, l, headers_len)).collect();
        let (bases, sig_odd) = self.bases(&zeroed, lens, &places);
        let dynamic = self.dynamic();
        let (sized, sizes, bases) = self.sized(lens, &places, &bases, &dynamic);
        let n = self.csums.len();
        let sig_odd = (0..lens.len() * n).filter(|i| dynamic[i % n]).map(|i| sig_odd[i]).collect();
        let (csums, varying) = self.only_dynamic(&dynamic);
        CompiledStack {
            id: CompiledStack::next_id(),
            sized,
            sizes,
            lens: lens.to_vec(),
            headers_len,
            kinds: self.placed.iter().map(|p| p.kind).collect(),
            sig_summed: csums.iter().any(|c| c.end.is_none()),
            varying,
            csums,
            bases,
            sig_odd,
            keys: spec.keys.clone(),
        }
    }

    /// Which checksums a frame's own values change: those a varying field contributes to, those
    /// over the signature and the payload (to the frame's end), and those over such a checksum.
    fn dynamic(&self) -> Vec<bool> {
        let mut dynamic: Vec<bool> = self.csums.iter().map(|c| c.end.is_none()).collect();
        for v in &self.varying {
            for &(c, _) in &v.contribs {
                dynamic[c] = true;
            }
        }
        for k in 0..self.csums.len() {
            if dynamic[k] {
                for &(o, _) in &self.csums[k].outer {
                    dynamic[o] = true;
                }
            }
        }
        dynamic
    }

    /// Per length: the template with its lengths and the checksums that never change written
    /// (innermost first), and the bases of the others with those values in their lanes.
    fn sized(
        &self,
        lens: &[usize],
        places: &[(usize, usize)],
        bases: &[u64],
        dynamic: &[bool],
    ) -> (Vec<u8>, Vec<Sized>, Vec<u64>) {
        let n = self.csums.len();
        let (mut sized, mut sizes, mut dyn_bases) = (Vec::new(), Vec::new(), Vec::new());
        for (size, (&len, &(sig_at, sig_len))) in lens.iter().zip(places).enumerate() {
            let at = sized.len();
            sized.extend_from_slice(&self.template[..len]);
            let t = &mut sized[at..];
            for l in &self.lengths {
                t[l.at..l.at + 2].copy_from_slice(&((len - l.minus) as u16).to_be_bytes());
            }
            let mut acc = bases[size * n..size * n + n].to_vec();
            for (c, cs) in self.csums.iter().enumerate().filter(|(c, _)| !dynamic[*c]) {
                let v = checksum_value(acc[c], cs.udp, cs.bad);
                t[cs.at..cs.at + 2].copy_from_slice(&v.to_be_bytes());
                for &(o, odd) in &cs.outer {
                    acc[o] += lane(u64::from(v), odd);
                }
            }
            // Innermost first: every static checksum inside a dynamic one is in its base now.
            dyn_bases.extend((0..n).filter(|&c| dynamic[c]).map(|c| acc[c]));
            sizes.push(Sized { at, len, sig_at, sig_len });
        }
        (sized, sizes, dyn_bases)
    }

    /// The dynamic checksums alone, renumbered, and the varying fields' contributions to them.
    fn only_dynamic(&self, dynamic: &[bool]) -> (Vec<Csum>, Vec<Varying>) {
        let mut index = vec![usize::MAX; dynamic.len()];
        for (new, old) in (0..dynamic.len()).filter(|&c| dynamic[c]).enumerate() {
            index[old] = new;
        }
        let csums = (self.csums.iter().enumerate())
            .filter(|(c, _)| dynamic[*c])
            .map(|(_, cs)| Csum { outer: cs.outer.iter().map(|&(o, odd)| (index[o], odd)).collect(), ..cs.clone() })
            .collect();
        let varying = (self.varying.iter())
            .map(|v| Varying { contribs: v.contribs.iter().map(|&(c, odd)| (index[c], odd)).collect(), ..v.clone() })
            .collect();
        (csums, varying)
    }

    /// The bytes `[b0, b1]` are the source or destination address of the IP header `ip`.
    fn is_address(ip: &Placed, b0: usize, b1: usize) -> bool {
        let (src, n) = if ip.kind == HeaderKind::Ipv4 { (ip.at + 12, 4) } else { (ip.at + 8, 16) };
        (b0 == src || b0 == src + n) && b1 == b0 + n - 1
    }

    /// The template with everything that changes per frame zeroed: varying fields' bits, derived
    /// lengths and computed checksums.
    fn zeroed(&self) -> Vec<u8> {
        let mut z = self.template.clone();
        for v in &self.varying {
            write_bits(&mut z, &v.span, 0);
        }
        for at in self.lengths.iter().map(|l| l.at).chain(self.csums.iter().map(|c| c.at)) {
            z[at..at + 2].copy_from_slice(&[0, 0]);
        }
        z
    }

    /// Per frame length and checksum: the base sum (its region but the signature's bytes) and
    /// whether the signature is in an odd lane (an untracked length's payload is all in the base).
    fn bases(&self, z: &[u8], lens: &[usize], places: &[(usize, usize)]) -> (Vec<u64>, Vec<bool>) {
        // Lane-aware prefix sums: pe counts even offsets as high bytes, po odd ones.
        let mut pe = vec![0u64; z.len() + 1];
        let mut po = vec![0u64; z.len() + 1];
        for (k, &b) in z.iter().enumerate() {
            let (hi, lo) = (u64::from(b) << 8, u64::from(b));
            pe[k + 1] = pe[k] + if k % 2 == 0 { hi } else { lo };
            po[k + 1] = po[k] + if k % 2 == 1 { hi } else { lo };
        }
        // Bytes [a, b) in the lanes of a region that starts at `origin`.
        let region = |origin: usize, a: usize, b: usize| {
            if origin.is_multiple_of(2) {
                pe[b] - pe[a]
            } else {
                po[b] - po[a]
            }
        };
        let mut bases = Vec::with_capacity(lens.len() * self.csums.len());
        let mut sig_odd = Vec::with_capacity(bases.capacity());
        for (&len, &(sig_at, sig_len)) in lens.iter().zip(places) {
            for (c, cs) in self.csums.iter().enumerate() {
                let end = cs.end.unwrap_or(sig_at);
                let mut acc = region(cs.start, cs.start, end);
                if cs.end.is_none() {
                    acc += region(cs.start, sig_at + sig_len, len); // the payload after the signature
                }
                for l in self.lengths.iter().filter(|l| l.at >= cs.start && l.at + 2 <= end) {
                    acc += lane(((len - l.minus) as u16).into(), (l.at - cs.start) % 2 == 1);
                }
                if let Some((ip, proto)) = self.pseudo[c] {
                    acc += Self::pseudo_sum(z, &self.placed[ip], proto, len - cs.start);
                }
                bases.push(acc);
                sig_odd.push(cs.end.is_none() && (sig_at - cs.start) % 2 == 1);
            }
        }
        (bases, sig_odd)
    }

    /// The pseudo-header's sum (addresses as in `z`: a varying address adds its own per frame).
    fn pseudo_sum(z: &[u8], ip: &Placed, proto: u8, l4_len: usize) -> u64 {
        let (addrs, len_sum) = if ip.kind == HeaderKind::Ipv4 {
            (&z[ip.at + 12..ip.at + 20], l4_len as u64)
        } else {
            (&z[ip.at + 8..ip.at + 40], (l4_len as u64 >> 16) + (l4_len as u64 & 0xFFFF))
        };
        bytes_sum(addrs) + u64::from(proto) + len_sum
    }
}
