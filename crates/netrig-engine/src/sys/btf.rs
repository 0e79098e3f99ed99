//! The running kernel's own description of its types (BTF, `/sys/kernel/btf/vmlinux`): where a
//! member lies in a kernel struct, read at run time rather than compiled in. The stall watch's tick
//! program reads two fields of the `struct hrtimer` it is handed this way (`sys::stalls`).
//!
//! The format (the kernel's `Documentation/bpf/btf.rst`): a header, then type records, each a
//! 12-byte `btf_type` (name offset, info: kind, member count and kind flag; size or type id)
//! followed by its kind's own data; type ids count the records from 1. Only what finding a member
//! needs is read; any other record is stepped over by its kind's length.
use std::io;

const MAGIC: u16 = 0xeb9f;
const TYPE_LEN: usize = 12;

const KIND_INT: u32 = 1;
const KIND_PTR: u32 = 2;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_FWD: u32 = 7;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_FUNC: u32 = 12;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_VAR: u32 = 14;
const KIND_DATASEC: u32 = 15;
const KIND_FLOAT: u32 = 16;
const KIND_DECL_TAG: u32 = 17;
const KIND_TYPE_TAG: u32 = 18;
const KIND_ENUM64: u32 = 19;

/// Bytes of a record's own data after its `btf_type`, by kind and member count; None for a kind
/// this reader does not know (a newer kernel's).
fn extra_len(kind: u32, vlen: usize) -> Option<usize> {
    Some(match kind {
        KIND_INT | KIND_VAR | KIND_DECL_TAG => 4,
        KIND_ARRAY => 12,
        KIND_STRUCT | KIND_UNION | KIND_DATASEC | KIND_ENUM64 => 12 * vlen,
        KIND_ENUM | KIND_FUNC_PROTO => 8 * vlen,
        KIND_PTR | KIND_FWD | KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_FUNC | KIND_FLOAT
        | KIND_TYPE_TAG => 0,
        _ => return None,
    })
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("BTF: {what}"))
}

/// One kernel's types.
pub struct Btf {
    data: Vec<u8>,
    /// Where the strings are.
    strings: std::ops::Range<usize>,
    /// Where each type's record starts, by type id (id 0, `void`, has none: 0).
    types: Vec<usize>,
}

/// A record's `btf_type`: its kind, member count, kind flag, and its size or the type it refers to.
#[derive(Clone, Copy)]
struct Head {
    name: u32,
    kind: u32,
    vlen: usize,
    kflag: bool,
    size_or_type: u32,
}

impl Btf {
    /// The running kernel's types.
    pub fn vmlinux() -> io::Result<Btf> {
        Btf::parse(std::fs::read("/sys/kernel/btf/vmlinux")?)
    }

    /// Index the records of a BTF blob (native byte order, as the kernel exports it).
    pub fn parse(data: Vec<u8>) -> io::Result<Btf> {
        let u32_at = |off: usize| data.get(off..off + 4).map(|b| u32::from_ne_bytes(b.try_into().expect("4 bytes")));
        if data.len() < 24 || u16::from_ne_bytes([data[0], data[1]]) != MAGIC {
            return Err(bad("not a BTF blob (magic)"));
        }
        let [hdr, type_off, type_len, str_off, str_len] = [4, 8, 12, 16, 20].map(|o| u32_at(o).unwrap_or(0) as usize);
        let (types_at, strings_at) = (hdr + type_off, hdr + str_off);
        if types_at + type_len > data.len() || strings_at + str_len > data.len() {
            return Err(bad("sections beyond the blob"));
        }
        let mut types = vec![0];
        let mut at = types_at;
        while at + TYPE_LEN <= types_at + type_len {
            let info = u32_at(at + 4).unwrap_or(0);
            let extra = extra_len((info >> 24) & 0x1f, (info & 0xffff) as usize).ok_or_else(|| bad("unknown kind"))?;
            types.push(at);
            at += TYPE_LEN + extra;
        }
        Ok(Btf { data, strings: strings_at..strings_at + str_len, types })
    }

    fn u32_at(&self, off: usize) -> u32 {
        u32::from_ne_bytes(self.data[off..off + 4].try_into().expect("4 bytes"))
    }

    fn head(&self, id: u32) -> Option<Head> {
        let at = *self.types.get(id as usize).filter(|&&at| at != 0)?;
        let info = self.u32_at(at + 4);
        Some(Head {
            name: self.u32_at(at),
            kind: (info >> 24) & 0x1f,
            vlen: (info & 0xffff) as usize,
            kflag: info >> 31 == 1,
            size_or_type: self.u32_at(at + 8),
        })
    }

    fn name(&self, off: u32) -> &[u8] {
        let s = &self.data[self.strings.clone()];
        let from = (off as usize).min(s.len());
        let end = s[from..].iter().position(|&b| b == 0).map_or(s.len(), |n| from + n);
        &s[from..end]
    }

    /// The type `id` refers to through typedefs and qualifiers.
    fn resolved(&self, mut id: u32) -> Option<(u32, Head)> {
        for _ in 0..32 {
            let h = self.head(id)?;
            match h.kind {
                KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => id = h.size_or_type,
                _ => return Some((id, h)),
            }
        }
        None
    }

    /// Bytes of type `id`.
    fn size(&self, id: u32) -> Option<u32> {
        let (_, h) = self.resolved(id)?;
        match h.kind {
            KIND_PTR => Some(std::mem::size_of::<usize>() as u32),
            KIND_INT | KIND_STRUCT | KIND_UNION | KIND_ENUM | KIND_ENUM64 | KIND_FLOAT => Some(h.size_or_type),
            _ => None,
        }
    }

    /// Member `name` of struct or union `id`: its byte offset and type (None for a bitfield).
    fn member(&self, id: u32, name: &str) -> Option<(u32, u32)> {
        let (id, h) = self.resolved(id)?;
        if h.kind != KIND_STRUCT && h.kind != KIND_UNION {
            return None;
        }
        let at = self.types[id as usize] + TYPE_LEN;
        (0..h.vlen).map(|i| at + 12 * i).find(|&m| self.name(self.u32_at(m)) == name.as_bytes()).and_then(|m| {
            let off = self.u32_at(m + 8);
            let (bits, width) = if h.kflag { (off & 0xff_ffff, off >> 24) } else { (off, 0) };
            (width == 0 && bits % 8 == 0).then(|| (bits / 8, self.u32_at(m + 4)))
        })
    }

    /// Where `path` (a member, then members of it) lies in struct `name`: its byte offset from the
    /// struct's start and its size in bytes.
    pub fn offset_of(&self, name: &str, path: &[&str]) -> Option<(u32, u32)> {
        let id = (1..self.types.len() as u32).find(|&id| {
            self.head(id).is_some_and(|h| h.kind == KIND_STRUCT && h.vlen > 0 && self.name(h.name) == name.as_bytes())
        })?;
        let (mut off, mut ty) = (0, id);
        for m in path {
            let (o, t) = self.member(ty, m)?;
            (off, ty) = (off + o, t);
        }
        Some((off, self.size(ty)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A blob of `types` (each a `btf_type` and its data, as u32 words) and `strings`.
    fn blob(types: &[Vec<u32>], strings: &[u8]) -> Vec<u8> {
        let words: Vec<u8> = types.iter().flatten().flat_map(|w| w.to_ne_bytes()).collect();
        let mut b = Vec::new();
        b.extend(MAGIC.to_ne_bytes());
        b.extend([1u8, 0]);
        for w in [24u32, 0, words.len() as u32, words.len() as u32, strings.len() as u32] {
            b.extend(w.to_ne_bytes());
        }
        b.extend(words);
        b.extend(strings);
        b
    }

    fn info(kind: u32, vlen: u32, kflag: bool) -> u32 {
        (u32::from(kflag) << 31) | (kind << 24) | vlen
    }

    #[test]
    fn a_nested_member_is_found_through_typedefs_and_a_bitfield_is_not() {
        // names: 1 "s64", 5 "ktime_t", 13 "inner", 19 "expires", 27 "outer", 33 "node", 38 "soft",
        // 43 "u8", 46 "bits"
        let strings = b"\0s64\0ktime_t\0inner\0expires\0outer\0node\0soft\0u8\0bits\0";
        #[rustfmt::skip]
        let types = vec![
            vec![1, info(KIND_INT, 0, false), 8, 64],                         // 1: s64
            vec![5, info(KIND_TYPEDEF, 0, false), 1],                         // 2: ktime_t
            vec![13, info(KIND_STRUCT, 1, false), 32, 19, 2, 192],            // 3: inner { expires @ 24 }
            vec![43, info(KIND_INT, 0, false), 1, 8],                         // 4: u8
            vec![0, info(KIND_CONST, 0, false), 4],                           // 5: const u8
            vec![0, info(KIND_PTR, 0, false), 3],                             // 6: inner *
            vec![
                27, info(KIND_STRUCT, 4, true), 64,
                33, 3, 0,                // node @ 0
                38, 5, 58 * 8,           // soft @ 58
                46, 4, (3 << 24) | 472,  // bits: a 3-bit field @ bit 472
                0, 6, 384,               // an unnamed pointer @ 48
            ],                                                                // 7: outer
        ];
        let btf = Btf::parse(blob(&types, strings)).unwrap();
        assert_eq!(btf.offset_of("outer", &["node", "expires"]), Some((24, 8)));
        assert_eq!(btf.offset_of("outer", &["soft"]), Some((58, 1)));
        assert_eq!(btf.offset_of("inner", &[]), Some((0, 32)));
        assert_eq!(btf.offset_of("outer", &["bits"]), None);
        assert_eq!(btf.offset_of("outer", &["node", "missing"]), None);
        assert_eq!(btf.offset_of("absent", &["node"]), None);
    }

    #[test]
    fn a_blob_that_is_not_btf_or_has_an_unknown_kind_is_refused() {
        assert!(Btf::parse(vec![0; 64]).is_err());
        assert!(Btf::parse(blob(&[vec![1, info(30, 0, false), 0]], b"\0x\0")).is_err());
    }

    #[test]
    fn the_running_kernel_describes_its_timers() {
        let Ok(btf) = Btf::vmlinux() else {
            eprintln!("skipped: /sys/kernel/btf/vmlinux is not readable here");
            return;
        };
        let (expires, size) = btf.offset_of("hrtimer", &["node", "expires"]).expect("struct hrtimer's expiry");
        assert_eq!(size, 8);
        let (soft, size) = btf.offset_of("hrtimer", &["is_soft"]).expect("struct hrtimer's is_soft");
        assert_eq!(size, 1);
        assert!(expires < soft && soft < 256, "{expires} {soft}");
    }
}
