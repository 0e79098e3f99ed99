//! Header stacks: frames of any order of Ethernet, VLAN, IPv4, IPv6, UDP, TCP, ICMP and ICMPv6
//! echo, VXLAN, GRE, MPLS, ARP and custom bytes, each field fixed, derived or varying per frame.
//!
//! [`compile`] lays the headers out, writes a template at the largest frame length (fixed
//! values, derived values, then the payload pattern) and turns everything that changes between
//! frames into a short program ([`CompiledStack::fill`]):
//!
//! 1. copy the template up to the frame's length;
//! 2. write the derived lengths for that length (IPv4 total length, IPv6 payload length, UDP
//!    length, outer and inner alike);
//! 3. write every varying field's value ([`crate::pattern`]);
//! 4. write the signature at the spec's [`Site`]: after the headers (netrig's streams), or in the
//!    frame's last 18 bytes, where the receiver finds it whatever headers a DUT added or removed
//!    (OTG stacks); [`crate::dissect::locate`] finds it at either;
//! 5. write the checksums, innermost first: each is a per-length base (the ones'-complement sum of
//!    its region with every varying part zeroed, precomputed) plus the sums of the varying
//!    fields, the signature and the inner checksums in their byte lanes. No frame is summed whole.
//!
//! Derived ("auto", or a length/type/checksum field left unset): EtherType and VLAN TPID, IPv4
//! protocol and IPv6 next header, GRE protocol from the next header; IPv4 header length and TCP
//! data offset (no options); lengths from the frame length; MPLS bottom of stack; the IPv4 header,
//! UDP, TCP, ICMP, ICMPv6 and GRE checksums (UDP, TCP and ICMPv6 with the pseudo-header of the
//! nearest IP header before them). A field nothing derives takes the pattern's fallback.
use std::fmt;

use crate::pattern::{fold, span_sum, value_sum, write_bits, BitSpan, Cursor, Pattern, Stepper};
pub use crate::signature::Site;

/// The kinds of header a stack is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HeaderKind {
    Ethernet,
    Vlan,
    Ipv4,
    Ipv6,
    Udp,
    Tcp,
    Icmp,
    Icmpv6,
    Vxlan,
    Gre,
    Mpls,
    Arp,
    Custom,
}

/// One field of a header: its name, bit offset from the header's start, and width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldDef {
    pub name: &'static str,
    pub bit: u16,
    pub bits: u8,
}

const fn f(name: &'static str, bit: u16, bits: u8) -> FieldDef {
    FieldDef { name, bit, bits }
}

/// A header's layout: its name, length in bytes (GRE: without the optional checksum word; custom:
/// its bytes) and fields. Fields may overlap (IPv4's `tos` and its parts): a stack sets one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderDef {
    pub kind: HeaderKind,
    pub name: &'static str,
    pub len: usize,
    pub fields: &'static [FieldDef],
}

/// Every header kind's layout (the field names are OTG's, flattened where OTG nests: IPv4's
/// priority is `tos` whole, or `dscp` and `ecn`, or `precedence` … `unused`).
pub const HEADERS: &[HeaderDef] = &[
    HeaderDef {
        kind: HeaderKind::Ethernet,
        name: "ethernet",
        len: 14,
        fields: &[f("dst", 0, 48), f("src", 48, 48), f("ether_type", 96, 16)],
    },
    HeaderDef {
        kind: HeaderKind::Vlan,
        name: "vlan",
        len: 4,
        fields: &[f("priority", 0, 3), f("cfi", 3, 1), f("id", 4, 12), f("tpid", 16, 16)],
    },
    HeaderDef {
        kind: HeaderKind::Ipv4,
        name: "ipv4",
        len: 20,
        fields: &[
            f("version", 0, 4),
            f("header_length", 4, 4),
            f("tos", 8, 8),
            f("dscp", 8, 6),
            f("ecn", 14, 2),
            f("precedence", 8, 3),
            f("delay", 11, 1),
            f("throughput", 12, 1),
            f("reliability", 13, 1),
            f("monetary", 14, 1),
            f("unused", 15, 1),
            f("total_length", 16, 16),
            f("identification", 32, 16),
            f("reserved", 48, 1),
            f("dont_fragment", 49, 1),
            f("more_fragments", 50, 1),
            f("fragment_offset", 51, 13),
            f("time_to_live", 64, 8),
            f("protocol", 72, 8),
            f("header_checksum", 80, 16),
            f("src", 96, 32),
            f("dst", 128, 32),
        ],
    },
    HeaderDef {
        kind: HeaderKind::Ipv6,
        name: "ipv6",
        len: 40,
        fields: &[
            f("version", 0, 4),
            f("traffic_class", 4, 8),
            f("flow_label", 12, 20),
            f("payload_length", 32, 16),
            f("next_header", 48, 8),
            f("hop_limit", 56, 8),
            f("src", 64, 128),
            f("dst", 192, 128),
        ],
    },
    HeaderDef {
        kind: HeaderKind::Udp,
        name: "udp",
        len: 8,
        fields: &[f("src_port", 0, 16), f("dst_port", 16, 16), f("length", 32, 16), f("checksum", 48, 16)],
    },
    HeaderDef {
        kind: HeaderKind::Tcp,
        name: "tcp",
        len: 20,
        fields: &[
            f("src_port", 0, 16),
            f("dst_port", 16, 16),
            f("seq_num", 32, 32),
            f("ack_num", 64, 32),
            f("data_offset", 96, 4),
            f("ecn_ns", 103, 1),
            f("ecn_cwr", 104, 1),
            f("ecn_echo", 105, 1),
            f("ctl_urg", 106, 1),
            f("ctl_ack", 107, 1),
            f("ctl_psh", 108, 1),
            f("ctl_rst", 109, 1),
            f("ctl_syn", 110, 1),
            f("ctl_fin", 111, 1),
            f("window", 112, 16),
            f("checksum", 128, 16),
        ],
    },
    HeaderDef { kind: HeaderKind::Icmp, name: "icmp", len: 8, fields: ICMP_ECHO },
    HeaderDef { kind: HeaderKind::Icmpv6, name: "icmpv6", len: 8, fields: ICMP_ECHO },
    HeaderDef {
        kind: HeaderKind::Vxlan,
        name: "vxlan",
        len: 8,
        fields: &[f("flags", 0, 8), f("reserved0", 8, 24), f("vni", 32, 24), f("reserved1", 56, 8)],
    },
    HeaderDef {
        kind: HeaderKind::Gre,
        name: "gre",
        len: 4,
        fields: &[
            f("checksum_present", 0, 1),
            f("reserved0", 1, 12),
            f("version", 13, 3),
            f("protocol", 16, 16),
            f("checksum", 32, 16),
            f("reserved1", 48, 16),
        ],
    },
    HeaderDef {
        kind: HeaderKind::Mpls,
        name: "mpls",
        len: 4,
        fields: &[f("label", 0, 20), f("traffic_class", 20, 3), f("bottom_of_stack", 23, 1), f("time_to_live", 24, 8)],
    },
    HeaderDef {
        kind: HeaderKind::Arp,
        name: "arp",
        len: 28,
        fields: &[
            f("hardware_type", 0, 16),
            f("protocol_type", 16, 16),
            f("hardware_length", 32, 8),
            f("protocol_length", 40, 8),
            f("operation", 48, 16),
            f("sender_hardware_addr", 64, 48),
            f("sender_protocol_addr", 112, 32),
            f("target_hardware_addr", 144, 48),
            f("target_protocol_addr", 192, 32),
        ],
    },
    HeaderDef { kind: HeaderKind::Custom, name: "custom", len: 0, fields: &[] },
];

const ICMP_ECHO: &[FieldDef] =
    &[f("type", 0, 8), f("code", 8, 8), f("checksum", 16, 16), f("identifier", 32, 16), f("sequence_number", 48, 16)];

impl HeaderKind {
    /// The layout of this kind.
    pub fn def(self) -> &'static HeaderDef {
        HEADERS.iter().find(|h| h.kind == self).unwrap_or(&HEADERS[HEADERS.len() - 1])
    }

    /// A kind by name (`"ipv4"`).
    pub fn parse(name: &str) -> Option<HeaderKind> {
        HEADERS.iter().find(|h| h.name == name).map(|h| h.kind)
    }

    pub fn name(self) -> &'static str {
        self.def().name
    }
}

/// What fills a frame after its headers (under the signature, at its site).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// `pattern` once (then zeros), or repeated to the end.
    Fixed { pattern: Vec<u8>, repeat: bool },
    /// 00 01 02 … ff 00 …
    IncrementByte,
    /// ff fe … 00 ff …
    DecrementByte,
    /// 0000 0001 … ffff 0000 …
    IncrementWord,
    /// ffff fffe … 0000 ffff …
    DecrementWord,
}

impl Payload {
    /// All zeros: netrig's padding.
    pub fn zeros() -> Payload {
        Payload::Fixed { pattern: vec![0], repeat: true }
    }

    fn write(&self, out: &mut [u8]) {
        for (i, b) in out.iter_mut().enumerate() {
            *b = match self {
                Payload::Fixed { pattern, repeat } if *repeat => {
                    pattern.get(i % pattern.len().max(1)).copied().unwrap_or(0)
                }
                Payload::Fixed { pattern, .. } => pattern.get(i).copied().unwrap_or(0),
                Payload::IncrementByte => i as u8,
                Payload::DecrementByte => 0xFF - i as u8,
                Payload::IncrementWord => ((i / 2) as u16).to_be_bytes()[i % 2],
                Payload::DecrementWord => (0xFFFF - (i / 2) as u16).to_be_bytes()[i % 2],
            };
        }
    }
}

/// One header of a stack: its kind, the fields it sets (by name; the others are 0, or derived
/// where the stack derives them), and for `custom` its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderSpec {
    pub kind: HeaderKind,
    pub fields: Vec<(String, Pattern)>,
    pub bytes: Vec<u8>,
}

/// A header stack and its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackSpec {
    pub headers: Vec<HeaderSpec>,
    pub payload: Payload,
    /// Where the frames carry the signature.
    pub site: Site,
    /// The flow key's digits, which [`Pattern::ByKey`] fields read (none: one flow).
    pub keys: KeySpec,
}

/// A stack that cannot be built: `field` is its path (`packet[1].ipv4.src`), `message` the
/// reason and remedy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackError {
    pub field: String,
    pub message: String,
}

impl StackError {
    fn new(field: impl Into<String>, message: impl Into<String>) -> StackError {
        StackError { field: field.into(), message: message.into() }
    }
}

impl fmt::Display for StackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for StackError {}

/// Most checksums one stack computes.
pub const MAX_CHECKSUMS: usize = 8;

mod compile;
mod fill;
pub mod keys;

pub use compile::compile;
pub use fill::{CompiledStack, FillState};
pub use keys::{KeyCursor, KeySpec, KeyValues};

/// A header laid out in a stack.
#[derive(Debug, Clone, Copy)]
struct Placed {
    kind: HeaderKind,
    /// Offset in the frame and length.
    at: usize,
    len: usize,
}

/// A field that changes from frame to frame.
#[derive(Debug, Clone)]
struct Varying {
    span: BitSpan,
    stepper: Stepper,
    /// Checksums whose region (or pseudo-header) holds it, and whether it sits in an odd lane.
    contribs: Vec<(usize, bool)>,
    /// A per-flow field ([`Pattern::ByKey`]): the key digit it reads.
    digit: Option<usize>,
    /// A field of whole bytes: where they start and how many (0: a field of bits).
    at: usize,
    bytes: usize,
}

impl Varying {
    fn new(span: BitSpan, stepper: Stepper) -> Varying {
        let digit = match stepper.pattern() {
            Pattern::ByKey { digit, .. } => Some(usize::from(*digit)),
            _ => None,
        };
        let bytes = if span.aligned() { span.bits as usize / 8 } else { 0 };
        Varying { span, stepper, contribs: Vec::new(), digit, at: span.first_byte(), bytes }
    }

    /// Write `value` into `out` and return its ones'-complement partial sum (as
    /// [`crate::pattern::span_sum`] reads it back).
    #[inline(always)]
    fn put(&self, out: &mut [u8], value: u128) -> u64 {
        let at = self.at;
        match self.bytes {
            2 => {
                out[at..at + 2].copy_from_slice(&(value as u16).to_be_bytes());
                u64::from(value as u16)
            }
            4 => {
                let v = value as u32;
                out[at..at + 4].copy_from_slice(&v.to_be_bytes());
                u64::from(v >> 16) + u64::from(v & 0xFFFF)
            }
            0 => {
                write_bits(out, &self.span, value);
                span_sum(out, &self.span)
            }
            n => {
                out[at..at + n].copy_from_slice(&value.to_be_bytes()[16 - n..]);
                value_sum(value, n)
            }
        }
    }
}

/// A length field derived from the frame length: `len - minus`.
#[derive(Debug, Clone, Copy)]
struct LengthFix {
    at: usize,
    minus: usize,
}

/// A checksum the stack computes.
#[derive(Debug, Clone)]
struct Csum {
    /// Where the checksum field is.
    at: usize,
    /// Its region: from `start` to `end`, or to the frame's end (but the signature's bytes: their
    /// sum is added per frame).
    start: usize,
    end: Option<usize>,
    /// UDP: a computed 0 is sent as 0xFFFF.
    udp: bool,
    bad: bool,
    /// Outer checksums that cover this one's field, and the lane it is in there.
    outer: Vec<(usize, bool)>,
}

/// Run the cursors of a stack's varying fields to frame 0.
fn start_cursors(varying: &[Varying]) -> Vec<Cursor> {
    varying.iter().map(|v| v.stepper.start()).collect()
}

/// The value for a checksum field from its accumulated sum.
#[inline(always)]
fn checksum_value(acc: u64, udp: bool, bad: bool) -> u16 {
    let mut v = !fold(acc);
    if udp && v == 0 {
        v = 0xFFFF;
    }
    if bad {
        v = if v == 0xFFFF { 1 } else { v + 1 };
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum;
    use crate::dissect::locate;
    use crate::frames::{FrameSpec, L3Spec};
    use crate::signature::{self, Signature};
    use crate::EthernetAddress;

    fn end_sig(frame: &[u8]) -> Option<Signature> {
        locate(frame, Site::End)
    }

    fn h(kind: HeaderKind, fields: &[(&str, Pattern)]) -> HeaderSpec {
        HeaderSpec { kind, fields: fields.iter().map(|(n, p)| (n.to_string(), p.clone())).collect(), bytes: Vec::new() }
    }

    fn spec(headers: Vec<HeaderSpec>) -> StackSpec {
        StackSpec { headers, payload: Payload::zeros(), site: Site::End, keys: KeySpec::default() }
    }

    fn auto_all(kind: HeaderKind) -> Vec<(&'static str, Pattern)> {
        const TOS_PARTS: &[&str] = &["tos", "precedence", "delay", "throughput", "reliability", "monetary", "unused"];
        kind.def().fields.iter().filter(|f| !TOS_PARTS.contains(&f.name)).map(|f| (f.name, Pattern::Auto(0))).collect()
    }

    /// Verify every checksum of `frame` from scratch: each region (with its pseudo-header) sums to
    /// 0xFFFF. Independent of the compiled program: it walks the stack's kinds itself.
    fn verify(frame: &[u8], kinds: &[HeaderKind], customs: &[usize]) {
        let mut at = 0;
        let mut ip: Option<(HeaderKind, usize)> = None;
        let mut custom = customs.iter();
        for k in kinds {
            let len = match k {
                HeaderKind::Custom => *custom.next().unwrap(),
                HeaderKind::Gre if frame[at] & 0x80 != 0 => 8,
                _ => k.def().len,
            };
            let seg = &frame[at..];
            let pseudo = |proto: u8| match ip {
                Some((HeaderKind::Ipv4, o)) => checksum::pseudo_header_v4(
                    frame[o + 12..o + 16].try_into().unwrap(),
                    frame[o + 16..o + 20].try_into().unwrap(),
                    proto,
                    seg.len() as u16,
                ),
                Some((_, o)) => checksum::pseudo_header_v6(
                    frame[o + 8..o + 24].try_into().unwrap(),
                    frame[o + 24..o + 40].try_into().unwrap(),
                    proto,
                    seg.len() as u32,
                ),
                None => 0,
            };
            let ok = match k {
                HeaderKind::Ipv4 => checksum::fold(checksum::sum(&frame[at..at + 20])) == 0,
                HeaderKind::Udp => checksum::fold(checksum::sum(seg) + pseudo(17)) == 0,
                HeaderKind::Tcp => checksum::fold(checksum::sum(seg) + pseudo(6)) == 0,
                HeaderKind::Icmpv6 => checksum::fold(checksum::sum(seg) + pseudo(58)) == 0,
                HeaderKind::Icmp => checksum::fold(checksum::sum(seg)) == 0,
                HeaderKind::Gre if len == 8 => checksum::fold(checksum::sum(seg)) == 0,
                _ => true,
            };
            assert!(ok, "{k:?} checksum at {at} in {frame:02x?}");
            if matches!(k, HeaderKind::Ipv4 | HeaderKind::Ipv6) {
                ip = Some((*k, at));
            }
            at += len;
        }
    }

    fn sig(seq: u64) -> Signature {
        Signature { trial: 0x12345, warmup: false, flow_id: 7, seq, tx_ts_ns: 0xAB_CDEF_0123 + seq * 977 }
    }

    #[test]
    fn plain_udp_has_the_stream_frames_headers() {
        let s = spec(vec![
            h(
                HeaderKind::Ethernet,
                &[("dst", Pattern::Fixed(0x0200_0000_0002)), ("src", Pattern::Fixed(0x0200_0000_0001))],
            ),
            h(
                HeaderKind::Ipv4,
                &[
                    ("version", Pattern::Fixed(4)),
                    ("time_to_live", Pattern::Fixed(64)),
                    ("src", Pattern::Fixed(0xC612_0001)),
                    ("dst", Pattern::Fixed(0xC613_0001)),
                    ("total_length", Pattern::Auto(46)),
                    ("protocol", Pattern::Auto(61)),
                    ("header_checksum", Pattern::Auto(0)),
                    ("header_length", Pattern::Auto(5)),
                ],
            ),
            h(
                HeaderKind::Udp,
                &[
                    ("src_port", Pattern::Fixed(1024)),
                    ("dst_port", Pattern::Fixed(2000)),
                    ("length", Pattern::Auto(0)),
                    ("checksum", Pattern::Auto(0)),
                ],
            ),
        ]);
        let c = compile(&s, &[60, 100]).unwrap();
        let mut t = FrameSpec::udp(
            EthernetAddress([2, 0, 0, 0, 0, 1]),
            EthernetAddress([2, 0, 0, 0, 0, 2]),
            L3Spec::V4 { src: [198, 18, 0, 1].into(), dst: [198, 19, 0, 1].into(), ttl: 64, dscp: 0 },
            1024,
            2000,
        );
        t.udp_checksum = true;
        for (size, len) in [(0, 60), (1, 100)] {
            let f = c.frame(size, 3, &sig(3));
            assert_eq!(f.len(), len);
            assert_eq!(end_sig(&f), Some(sig(3)));
            let want = t.frame(len, &sig(3)).unwrap();
            // Same headers; a stream's frame has the signature after UDP, this one at the end.
            assert_eq!(f[..40], want[..40], "headers up to the UDP checksum, {len} B");
            verify(&f, c.kinds(), &[]);
        }
    }

    #[test]
    fn every_header_kind_with_varying_fields_keeps_every_checksum_right() {
        use HeaderKind::*;
        let stacks: Vec<Vec<HeaderKind>> = vec![
            vec![Ethernet, Vlan, Vlan, Ipv4, Udp],
            vec![Ethernet, Ipv6, Tcp],
            vec![Ethernet, Ipv4, Icmp],
            vec![Ethernet, Ipv6, Icmpv6],
            vec![Ethernet, Ipv4, Udp, Vxlan, Ethernet, Ipv4, Tcp],
            vec![Ethernet, Ipv4, Gre, Ipv6, Udp],
            vec![Ethernet, Mpls, Mpls, Ipv4, Udp],
            vec![Ethernet, Arp],
            vec![Ethernet, Custom, Ipv4, Udp],
        ];
        for kinds in stacks {
            let headers: Vec<HeaderSpec> = kinds
                .iter()
                .map(|&k| {
                    let mut fields = auto_all(k);
                    for (name, p) in fields.iter_mut() {
                        *p = match (k, *name) {
                            (Ipv4, "src") => Pattern::Counter { start: 0xC612_0001, step: 3, count: 7, down: false },
                            (Ipv6, "dst") => Pattern::Counter { start: 1 << 100, step: 1 << 70, count: 5, down: true },
                            (Ipv6, "flow_label") => Pattern::Random { min: 1, max: 0xFFFFF, count: 9, seed: 4 },
                            (Udp | Tcp, "src_port") => Pattern::List(vec![1, 2, 65535, 7]),
                            (Vlan, "id") => Pattern::Counter { start: 4094, step: 1, count: 3, down: false },
                            (Vlan, "priority") => Pattern::List(vec![7, 0, 5]),
                            (Tcp, "ctl_syn") => Pattern::List(vec![0, 1]),
                            (Icmp | Icmpv6, "identifier") => Pattern::Random { min: 0, max: 65535, count: 11, seed: 1 },
                            (Mpls, "label") => Pattern::Counter { start: 100, step: 1, count: 4, down: false },
                            (Arp, "target_protocol_addr") => Pattern::List(vec![1, 0xFFFF_FFFF]),
                            (Gre, "checksum_present") => Pattern::Fixed(1),
                            (Ipv4, "version") => Pattern::Fixed(4),
                            (Ipv6, "version") => Pattern::Fixed(6),
                            _ => p.clone(),
                        };
                    }
                    HeaderSpec {
                        kind: k,
                        fields: fields.into_iter().map(|(n, p)| (n.to_string(), p)).collect(),
                        bytes: if k == Custom { vec![0xDE, 0xAD, 0xBE] } else { Vec::new() },
                    }
                })
                .collect();
            // Both sites, with a payload pattern around the signature, at odd and even offsets.
            for site in [Site::End, Site::Payload] {
                let payload = Payload::Fixed { pattern: vec![0x5A, 0x01, 0xC3], repeat: true };
                let spec = StackSpec { headers: headers.clone(), payload, site, keys: KeySpec::default() };
                let c = compile(&spec, &[150, 151, 152, 153, 400]).unwrap();
                assert!(c.varying_fields() > 0);
                let mut cur = c.start();
                let mut buf = [0u8; 512];
                for j in 0..40u64 {
                    let size = (j % 5) as usize;
                    let len = c.fill(&mut buf, size, &mut cur, &sig(j));
                    let frame = &buf[..len];
                    let at = if site == Site::End { len - signature::LEN } else { c.headers_len() };
                    assert_eq!(Signature::parse(&frame[at..]), Some(sig(j)), "{kinds:?} {site:?} frame {j}");
                    verify(frame, c.kinds(), &[3]);
                }
            }
        }
    }

    #[test]
    fn a_buffer_that_holds_its_template_gets_the_frame_a_fresh_one_gets() {
        use HeaderKind::*;
        let headers: Vec<HeaderSpec> = [Ethernet, Ipv4, Udp]
            .iter()
            .map(|&k| {
                let mut fields = auto_all(k);
                for (name, p) in fields.iter_mut() {
                    match (k, *name) {
                        (Ipv4, "src") => *p = Pattern::Counter { start: 0xC612_0001, step: 3, count: 7, down: false },
                        (Ipv4, "version") => *p = Pattern::Fixed(4),
                        (Udp, "src_port") => *p = Pattern::List(vec![1, 2, 65535, 7]),
                        _ => {}
                    }
                }
                h(k, &fields)
            })
            .collect();
        let payload = Payload::Fixed { pattern: vec![0x5A, 0x01, 0xC3], repeat: true };
        let compiled = |site, lens: &[usize]| {
            compile(
                &StackSpec { headers: headers.clone(), payload: payload.clone(), site, keys: KeySpec::default() },
                lens,
            )
            .unwrap()
        };
        // Two stacks (both sites), each size in runs of 8 frames, filled round robin into four
        // marked buffers of stale bytes as a queue's ring hands its buffers out, every 7th buffer
        // first overwritten by another writer (a plain send: mark 0): every frame is byte for byte
        // the one a zeroed buffer gets, and a buffer holding its template is not copied again.
        let stacks = [compiled(Site::End, &[64, 65, 1514]), compiled(Site::Payload, &[64, 1514])];
        assert_ne!(stacks[0].id, stacks[1].id);
        let mut held_at = [stacks[0].start(), stacks[1].start()];
        let mut fresh_at = held_at.clone();
        let (mut bufs, mut marks, mut kept) = (vec![[0xEEu8; 1600]; 4], [0u64; 4], 0);
        for j in 0..240u64 {
            let (k, b) = (((j / 40) % 2) as usize, (j % 4) as usize);
            let size = ((j / 8) % stacks[k].lens().len() as u64) as usize;
            if j % 7 == 0 {
                (bufs[b], marks[b]) = ([0x11; 1600], 0);
            }
            let before = marks[b];
            let n = stacks[k].fill_held(&mut bufs[b], &mut marks[b], size, &mut held_at[k], &sig(j));
            kept += usize::from(before == marks[b]);
            let mut fresh = [0u8; 1600];
            let m = stacks[k].fill(&mut fresh, size, &mut fresh_at[k], &sig(j));
            assert_eq!(&bufs[b][..n], &fresh[..m], "frame {j}");
            verify(&fresh[..m], stacks[k].kinds(), &[]);
        }
        assert!(kept >= 60, "{kept} frames written over their template");
    }

    #[test]
    fn derived_fields_follow_the_next_header_and_the_length() {
        use HeaderKind::*;
        let headers = [Ethernet, Vlan, Ipv6, Gre, Ethernet, Mpls, Mpls, Ipv4, Udp]
            .iter()
            .map(|&k| HeaderSpec {
                kind: k,
                fields: auto_all(k).into_iter().map(|(n, p)| (n.into(), p)).collect(),
                bytes: vec![],
            })
            .collect();
        let c = compile(&spec(headers), &[200]).unwrap();
        let f = c.frame(0, 0, &sig(0));
        assert_eq!(&f[12..14], &[0x81, 0x00], "ethernet → vlan");
        assert_eq!(&f[16..18], &[0x86, 0xDD], "vlan → ipv6");
        assert_eq!(u16::from_be_bytes([f[22], f[23]]), 200 - 18 - 40, "ipv6 payload length");
        assert_eq!(f[24], 47, "ipv6 → gre");
        assert_eq!(&f[60..62], &[0x65, 0x58], "gre → ethernet");
        assert_eq!(&f[74..76], &[0x88, 0x47], "ethernet → mpls");
        assert_eq!(f[78] & 1, 0, "not the bottom of the stack");
        assert_eq!(f[82] & 1, 1, "the bottom of the stack");
        assert_eq!(f[84] >> 4, 0, "the version was left at 0");
        assert_eq!(f[84] & 0x0F, 5, "IHL");
        assert_eq!(u16::from_be_bytes([f[86], f[87]]), 200 - 84, "ipv4 total length");
        assert_eq!(f[93], 17, "ipv4 → udp");
        assert_eq!(u16::from_be_bytes([f[108], f[109]]), 200 - 104, "udp length");
    }

    #[test]
    fn tunnelled_lengths_count_from_their_own_header() {
        use HeaderKind::*;
        let kinds = [Ethernet, Ipv4, Udp, Vxlan, Ethernet, Ipv4, Udp];
        let headers: Vec<HeaderSpec> = kinds.iter().map(|&k| h(k, &[])).collect();
        let c = compile(&spec(headers), &[1514]).unwrap();
        let f = c.frame(0, 0, &sig(0));
        let be = |at: usize| usize::from(u16::from_be_bytes([f[at], f[at + 1]]));
        assert_eq!((be(14 + 2), be(34 + 4)), (1514 - 14, 1514 - 34), "outer ipv4 total, udp length");
        assert_eq!((be(64 + 2), be(84 + 4)), (1514 - 64, 1514 - 84), "inner ipv4 total, udp length");
    }

    #[test]
    fn a_frame_without_room_for_the_signature_is_sent_whole_and_untracked() {
        use HeaderKind::*;
        // 64 B (60 without FCS) of VLAN + IPv4 + TCP: 58 B of headers leave 2, not the 18 of the
        // signature. Sizes 64..=80 by 4: only 80 B (76) holds it.
        let kinds = [Ethernet, Vlan, Ipv4, Tcp];
        let mut headers: Vec<HeaderSpec> = kinds.iter().map(|&k| h(k, &[])).collect();
        headers[3] = h(Tcp, &[("src_port", Pattern::Counter { start: 1, step: 1, count: 9, down: false })]);
        let c = compile(&spec(headers), &[60, 64, 68, 72, 76]).unwrap();
        assert_eq!((0..5).map(|i| c.signed(i)).collect::<Vec<_>>(), [false, false, false, false, true]);
        let (mut cur, mut buf) = (c.start(), [0u8; 128]);
        for j in 0..20u64 {
            let size = (j % 5) as usize;
            let len = c.fill(&mut buf, size, &mut cur, &sig(j));
            let frame = &buf[..len];
            assert_eq!(len, 60 + 4 * size);
            assert_eq!(usize::from(u16::from_be_bytes([frame[20], frame[21]])), len - 18, "ipv4 total length");
            assert_eq!(end_sig(frame), (size == 4).then(|| sig(j)), "frame {j}");
            verify(frame, c.kinds(), &[]);
        }
        let e = compile(&spec(kinds.iter().map(|&k| h(k, &[])).collect()), &[56]).unwrap_err();
        assert!(e.field == "size" && e.message.contains("cannot hold these headers (58 B)"), "{e}");
    }

    #[test]
    fn per_flow_fields_follow_the_key_and_keep_every_checksum() {
        use std::sync::Arc;
        use HeaderKind::*;
        // Three source addresses (digit 1) × four destination ports from a table (digit 0), over
        // IPv4 + UDP under a tag whose id also varies per frame: keys visited by stride 5 from 7.
        let ports: Arc<[u16]> = Arc::from(vec![65535u16, 1, 2, 9]);
        let by = |digit, values| Pattern::ByKey { digit, values };
        let headers = vec![
            h(Ethernet, &[]),
            h(Vlan, &[("id", Pattern::Counter { start: 10, step: 1, count: 3, down: false })]),
            h(Ipv4, &[("version", Pattern::Fixed(4)), ("src", by(1, KeyValues::Offset(0xC612_00FE)))]),
            h(Udp, &[("dst_port", by(0, KeyValues::Table(ports.clone())))]),
        ];
        let keys = KeySpec { radices: vec![4, 3] };
        let c = compile(&StackSpec { keys: keys.clone(), ..spec(headers.clone()) }, &[100, 127]).unwrap();
        let mut st = c.start_with(keys.cursor(0..12, 5, 7));
        let mut buf = [0u8; 128];
        for j in 0..30u64 {
            let key = (7 + 5 * j) % 12;
            assert_eq!((st.key.key(), st.key.cycle()), (key, j / 12));
            let len = c.fill(&mut buf, (j % 2) as usize, &mut st, &sig(j));
            let f = &buf[..len];
            let src = u32::from_be_bytes([f[30], f[31], f[32], f[33]]);
            assert_eq!(src, 0xC612_00FE + (key / 4) as u32, "frame {j}: the address of key {key}");
            assert_eq!(u16::from_be_bytes([f[40], f[41]]), ports[(key % 4) as usize], "frame {j}: the port");
            assert_eq!(u16::from_be_bytes([f[14], f[15]]) & 0xFFF, 10 + (j % 3) as u16, "the per-frame id");
            verify(f, c.kinds(), &[]);
        }
        // Refused: a digit the key lacks, a table shorter than its digit, values past the width.
        let refuse = |fields: &[(&str, Pattern)], radices: Vec<u32>| {
            let mut hs = headers.clone();
            hs[3] = h(Udp, fields);
            compile(&StackSpec { keys: KeySpec { radices }, ..spec(hs) }, &[100]).unwrap_err().to_string()
        };
        let e = refuse(&[("src_port", by(2, KeyValues::Offset(1)))], vec![4, 3]);
        assert!(e.contains("packet[3].udp.src_port") && e.contains("digit 2 of a flow key with 2 digits"), "{e}");
        let e = refuse(&[("src_port", by(0, KeyValues::Table(ports.clone())))], vec![5, 3]);
        assert!(e.contains("fewer values than its 5 flows"), "{e}");
        let e = refuse(&[("src_port", by(0, KeyValues::Offset(65534)))], vec![3, 3]);
        assert!(e.contains("run to 65536, past the field's 16 bits"), "{e}");
    }

    #[test]
    fn errors_name_the_field() {
        let bad = |headers: Vec<HeaderSpec>, lens: &[usize]| compile(&spec(headers), lens).unwrap_err();
        let e = bad(vec![h(HeaderKind::Ethernet, &[("nope", Pattern::Fixed(1))])], &[60]);
        assert_eq!(e.field, "packet[0].ethernet.nope");
        let e = bad(vec![h(HeaderKind::Ethernet, &[]), h(HeaderKind::Vlan, &[("id", Pattern::Fixed(4096))])], &[60]);
        assert!(e.field == "packet[1].vlan.id" && e.message.contains("12 bits"), "{e}");
        let e = bad(vec![h(HeaderKind::Ethernet, &[]), h(HeaderKind::Ipv6, &[]), h(HeaderKind::Tcp, &[])], &[60]);
        assert!(e.field == "size" && e.message.contains("at least 78 B"), "{e}");
        let e = bad(vec![h(HeaderKind::Ipv4, &[("tos", Pattern::Fixed(1)), ("dscp", Pattern::Fixed(1))])], &[60]);
        assert!(e.message.contains("overlaps tos"), "{e}");
        let e = bad(vec![h(HeaderKind::Ethernet, &[("src", Pattern::BadChecksum)])], &[60]);
        assert!(e.message.contains("not a checksum"), "{e}");
        let e = bad(vec![h(HeaderKind::Gre, &[("checksum_present", Pattern::List(vec![0, 1]))])], &[60]);
        assert_eq!(e.field, "packet[0].gre.checksum_present");
    }

    #[test]
    fn bad_checksums_never_verify() {
        let headers = vec![
            h(HeaderKind::Ethernet, &[]),
            h(HeaderKind::Ipv4, &[("header_checksum", Pattern::BadChecksum), ("version", Pattern::Fixed(4))]),
            h(HeaderKind::Udp, &[("checksum", Pattern::Fixed(0x1234))]),
        ];
        let c = compile(&spec(headers), &[80]).unwrap();
        for j in 0..5 {
            let f = c.frame(0, j, &sig(j));
            assert_ne!(checksum::fold(checksum::sum(&f[14..34])), 0);
            assert_eq!(&f[40..42], &[0x12, 0x34], "a custom checksum is written as given");
        }
    }
}
