//! Flow ranges: mapping a flow index to its addresses and ports, and the order flows are used.
//!
//! A stream's flows are every combination of
//! `src_macs × dst_macs × vlans × src_ips × dst_ips × src_ports × dst_ports`, counting up from
//! the stream's base MACs, VLAN id, addresses and ports (the destination port varies fastest).
//! With [`FlowOrder::Pseudorandom`] (RFC 4814 §4.5) port numbers are spread pseudorandomly over
//! 1..=65535 instead of counting up, and the frames visit flows in a seeded pseudorandom order;
//! both are reproducible.
use std::net::{Ipv4Addr, Ipv6Addr};

use netrig_wire::builder::{self, TemplateInfo};
use netrig_wire::ethernet::EthernetAddress;
use netrig_wire::IpPair;

use crate::error::ConfigError;

/// How flows are enumerated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowOrder {
    /// Round-robin over flows; addresses and ports increment.
    Sequential,
    /// RFC 4814 §4.5: pseudorandom ports and pseudorandom flow order from a seed.
    Pseudorandom { seed: u64 },
}

/// Flow ranges: the stream's flows are every combination of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowSpec {
    pub src_ips: u32,
    pub dst_ips: u32,
    pub src_ports: u32,
    pub dst_ports: u32,
    /// Source / destination MAC addresses, counting up from the stream's.
    pub src_macs: u32,
    pub dst_macs: u32,
    /// 802.1Q VLAN ids (the inner tag under QinQ), counting up from the stream's `vlan`.
    pub vlans: u32,
    pub order: FlowOrder,
}

impl Default for FlowSpec {
    fn default() -> Self {
        FlowSpec {
            src_ips: 1,
            dst_ips: 1,
            src_ports: 1,
            dst_ports: 1,
            src_macs: 1,
            dst_macs: 1,
            vlans: 1,
            order: FlowOrder::Sequential,
        }
    }
}

/// Most flows one stream may have: every flow has receive state (and a trial at most 2^24).
pub const MAX_FLOWS: u64 = 1 << 24;

/// Names of the flow orders, as [`FlowOrder::parse`] takes them.
pub const FLOW_ORDERS: &[&str] = &["sequential", "pseudorandom"];

impl FlowOrder {
    /// `"sequential"` or `"pseudorandom"` (with `seed`); errors name the field `flows.order`.
    pub fn parse(name: &str, seed: u64) -> Result<Self, ConfigError> {
        match name {
            "sequential" => Ok(FlowOrder::Sequential),
            "pseudorandom" => Ok(FlowOrder::Pseudorandom { seed }),
            _ => Err(ConfigError::new(
                "flows.order",
                format!("{name:?} is not a flow order: use one of {}", FLOW_ORDERS.join(", ")),
            )),
        }
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            FlowOrder::Sequential => "sequential",
            FlowOrder::Pseudorandom { .. } => "pseudorandom",
        }
    }

    /// The seed of a pseudorandom order (1, the default, for sequential).
    pub fn seed(&self) -> u64 {
        match self {
            FlowOrder::Sequential => 1,
            FlowOrder::Pseudorandom { seed } => *seed,
        }
    }
}

impl FlowSpec {
    pub fn count(&self) -> u64 {
        [self.src_ips, self.dst_ips, self.src_ports, self.dst_ports, self.src_macs, self.dst_macs, self.vlans]
            .iter()
            .fold(1u64, |n, &k| n.saturating_mul(k as u64))
    }

    /// Every range has at least one value, port ranges fit the port space, and the flows fit
    /// the per-stream limit. Fields are named as in a stream: `flows.src_ports`, `flows`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (name, n) in [
            ("src_ips", self.src_ips),
            ("dst_ips", self.dst_ips),
            ("src_ports", self.src_ports),
            ("dst_ports", self.dst_ports),
            ("src_macs", self.src_macs),
            ("dst_macs", self.dst_macs),
            ("vlans", self.vlans),
        ] {
            if n == 0 {
                return Err(ConfigError::new(
                    format!("flows.{name}"),
                    "must be at least 1 (got 0): every range needs one value; use 1 for a single address or port",
                ));
            }
        }
        for (name, n) in [("src_ports", self.src_ports), ("dst_ports", self.dst_ports)] {
            if n > 65535 {
                return Err(ConfigError::new(
                    format!("flows.{name}"),
                    format!("{n} ports do not fit the port space: a port range holds at most 65535 ports"),
                ));
            }
        }
        if self.vlans > 4094 {
            return Err(ConfigError::new(
                "flows.vlans",
                format!("{} VLAN ids do not fit: VLAN ids are 1..4094", self.vlans),
            ));
        }
        let n = self.count();
        if n > MAX_FLOWS {
            return Err(ConfigError::new(
                "flows",
                format!("{n} flows is above the limit of {MAX_FLOWS} per stream: use fewer addresses or ports"),
            ));
        }
        Ok(())
    }
}

/// Flows precomputed up to this count; beyond it tuples are computed per frame.
const PRECOMPUTE_MAX: u64 = 1 << 16;

/// What one flow's frames carry: addresses, ports (ICMP: echo identifier and sequence
/// number), MACs and VLAN id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowTuple {
    pub ips: IpPair,
    pub src_port: u16,
    pub dst_port: u16,
    pub src_mac: EthernetAddress,
    pub dst_mac: EthernetAddress,
    pub vlan: u16,
}

/// The base values flows count up from: the stream's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowBase {
    pub ips: IpPair,
    pub src_port: u16,
    pub dst_port: u16,
    pub src_mac: EthernetAddress,
    pub dst_mac: EthernetAddress,
    /// VLAN id (0 when untagged).
    pub vlan: u16,
}

#[derive(Debug, Clone)]
pub struct FlowTable {
    spec: FlowSpec,
    base: FlowBase,
    count: u64,
    table: Vec<FlowTuple>,
    /// Visiting order: flow = (j * stride + offset) mod count.
    stride: u64,
    offset: u64,
    port_mult: u32,
    port_seed: u32,
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl FlowTable {
    pub fn new(spec: &FlowSpec, base: FlowBase) -> Result<Self, String> {
        let count = spec.count();
        for (mac, n, what) in [(base.src_mac, spec.src_macs, "source"), (base.dst_mac, spec.dst_macs, "destination")] {
            if mac_u64(mac) + n as u64 - 1 > 0xFFFF_FFFF_FFFF {
                return Err(format!("the {what} MAC range runs past ff:ff:ff:ff:ff:ff"));
            }
        }
        if spec.vlans > 1 && (base.vlan == 0 || base.vlan as u64 + spec.vlans as u64 - 1 > 4094) {
            return Err("the VLAN id range must lie within 1..4094 (and needs a VLAN tag)".into());
        }
        // Check the address ranges stay within the address space.
        match base.ips {
            IpPair::V4 { src, dst } => {
                if u32::from(src) as u64 + spec.src_ips as u64 - 1 > u32::MAX as u64
                    || u32::from(dst) as u64 + spec.dst_ips as u64 - 1 > u32::MAX as u64
                {
                    return Err("the address range runs past 255.255.255.255".into());
                }
            }
            IpPair::V6 { .. } => {}
        }
        let (stride, offset, port_mult, port_seed) = match spec.order {
            FlowOrder::Sequential => (1, 0, 1, 0),
            FlowOrder::Pseudorandom { seed } => {
                let mut rng = crate::rng::XorShift::new(seed);
                let mut stride = if count > 1 { rng.next_u64() % count } else { 1 };
                while count > 1 && (stride == 0 || gcd(stride, count) != 1) {
                    stride = (stride + 1) % count;
                }
                // 65535 = 3·5·17·257: pick a multiplier coprime with it.
                let mut m = (rng.next_u64() % 65535) as u32 | 1;
                while gcd(m as u64, 65535) != 1 {
                    m += 2;
                }
                (stride.max(1), rng.next_u64() % count.max(1), m, (rng.next_u64() % 65535) as u32)
            }
        };
        let mut t = FlowTable { spec: *spec, base, count, table: Vec::new(), stride, offset, port_mult, port_seed };
        if count <= PRECOMPUTE_MAX && count > 1 {
            t.table = (0..count).map(|i| t.compute(i)).collect();
        }
        Ok(t)
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// `count` flows whose frames are not built from a template (a replay's): only their number
    /// and the order `flow_for_frame` visits them mean anything; `apply` must not be used.
    pub fn opaque(count: u64) -> Self {
        let a = std::net::Ipv4Addr::UNSPECIFIED;
        let mac = EthernetAddress([0; 6]);
        let base = FlowBase {
            ips: IpPair::V4 { src: a, dst: a },
            src_port: 0,
            dst_port: 0,
            src_mac: mac,
            dst_mac: mac,
            vlan: 0,
        };
        FlowTable {
            spec: FlowSpec::default(),
            base,
            count: count.max(1),
            table: Vec::new(),
            stride: 1,
            offset: 0,
            port_mult: 1,
            port_seed: 0,
        }
    }

    /// The flow used by the `j`-th frame of the stream.
    #[inline]
    pub fn flow_for_frame(&self, j: u64) -> u64 {
        if self.count == 1 {
            0
        } else if self.stride == 1 && self.offset == 0 {
            j % self.count
        } else {
            (((j % self.count) as u128 * self.stride as u128 + self.offset as u128) % self.count as u128) as u64
        }
    }

    /// Addresses and ports of flow `i`.
    #[inline]
    pub fn tuple(&self, i: u64) -> FlowTuple {
        if let Some(t) = self.table.get(i as usize) {
            *t
        } else {
            self.compute(i)
        }
    }

    fn port(&self, base: u16, k: u32) -> u16 {
        if self.port_mult == 1 && self.port_seed == 0 {
            ((base as u32 - 1 + k) % 65535 + 1) as u16
        } else {
            // A permutation of 1..=65535 (multiplier coprime with 65535).
            (((k as u64 * self.port_mult as u64 + self.port_seed as u64 + base as u64) % 65535) + 1) as u16
        }
    }

    /// Patch flow `i` into a frame built from `info`: only what varies between this table's
    /// flows (addresses, ports, MACs, VLAN id), with incremental checksum updates.
    #[inline]
    pub fn apply(&self, buf: &mut [u8], info: &TemplateInfo, i: u64) {
        let f = self.tuple(i);
        let s = &self.spec;
        // Each call only fails on a buffer shorter than the template (ruled out by the TX path)
        // or on a field the template lacks (ruled out by stream validation).
        if s.src_ips > 1 || s.dst_ips > 1 {
            let _ = builder::set_l3_addrs(buf, info, &f.ips);
        }
        if s.src_ports > 1 || s.dst_ports > 1 {
            let _ = builder::set_ports(buf, info, f.src_port, f.dst_port);
        }
        if s.src_macs > 1 || s.dst_macs > 1 {
            let _ = builder::set_macs(buf, info, f.src_mac, f.dst_mac);
        }
        if s.vlans > 1 {
            let _ = builder::set_vlan_id(buf, info, f.vlan);
        }
    }

    fn compute(&self, i: u64) -> FlowTuple {
        let s = &self.spec;
        let dp = (i % s.dst_ports as u64) as u32;
        let r = i / s.dst_ports as u64;
        let sp = (r % s.src_ports as u64) as u32;
        let r = r / s.src_ports as u64;
        let di = (r % s.dst_ips as u64) as u32;
        let r = r / s.dst_ips as u64;
        let si = (r % s.src_ips as u64) as u32;
        let r = r / s.src_ips as u64;
        let vi = (r % s.vlans as u64) as u16;
        let r = r / s.vlans as u64;
        let dm = r % s.dst_macs as u64;
        let sm = r / s.dst_macs as u64;
        let ips = match self.base.ips {
            IpPair::V4 { src, dst } => IpPair::V4 {
                src: Ipv4Addr::from(u32::from(src).wrapping_add(si)),
                dst: Ipv4Addr::from(u32::from(dst).wrapping_add(di)),
            },
            IpPair::V6 { src, dst } => IpPair::V6 {
                src: Ipv6Addr::from(u128::from(src).wrapping_add(si as u128)),
                dst: Ipv6Addr::from(u128::from(dst).wrapping_add(di as u128)),
            },
        };
        let b = &self.base;
        let src_port = if s.src_ports == 1 { b.src_port } else { self.port(b.src_port.max(1), sp) };
        let dst_port = if s.dst_ports == 1 { b.dst_port } else { self.port(b.dst_port.max(1), dp) };
        FlowTuple {
            ips,
            src_port,
            dst_port,
            src_mac: mac_from(mac_u64(b.src_mac) + sm),
            dst_mac: mac_from(mac_u64(b.dst_mac) + dm),
            vlan: b.vlan + vi,
        }
    }
}

fn mac_u64(m: EthernetAddress) -> u64 {
    m.0.iter().fold(0u64, |a, &b| a << 8 | u64::from(b))
}

fn mac_from(v: u64) -> EthernetAddress {
    let b = v.to_be_bytes();
    EthernetAddress([b[2], b[3], b[4], b[5], b[6], b[7]])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn base() -> IpPair {
        IpPair::V4 { src: Ipv4Addr::new(198, 18, 0, 1), dst: Ipv4Addr::new(198, 19, 0, 1) }
    }

    fn fb(ips: IpPair, src_port: u16, dst_port: u16) -> FlowBase {
        FlowBase {
            ips,
            src_port,
            dst_port,
            src_mac: EthernetAddress([2, 0, 0, 0, 0, 1]),
            dst_mac: EthernetAddress([2, 0, 0, 0, 0, 2]),
            vlan: 0,
        }
    }

    #[test]
    fn sequential_flows_are_distinct_and_ordered() {
        let spec = FlowSpec { src_ips: 4, dst_ips: 3, src_ports: 2, dst_ports: 5, ..FlowSpec::default() };
        let t = FlowTable::new(&spec, fb(base(), 1024, 2000)).unwrap();
        assert_eq!(t.count(), 120);
        let all: HashSet<_> = (0..120).map(|i| t.tuple(i)).collect();
        assert_eq!(all.len(), 120);
        assert_eq!(t.tuple(0), FlowTuple { ..t.tuple(0) });
        assert_eq!((t.tuple(0).ips, t.tuple(0).src_port, t.tuple(0).dst_port), (base(), 1024, 2000));
        assert_eq!(t.tuple(1).dst_port, 2001);
        assert_eq!((0..5).map(|j| t.flow_for_frame(j)).collect::<Vec<_>>(), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn pseudorandom_order_is_a_reproducible_permutation() {
        let spec =
            FlowSpec { dst_ips: 10, src_ports: 100, order: FlowOrder::Pseudorandom { seed: 7 }, ..FlowSpec::default() };
        let t = FlowTable::new(&spec, fb(base(), 1024, 1024)).unwrap();
        let order: Vec<u64> = (0..1000).map(|j| t.flow_for_frame(j)).collect();
        let set: HashSet<_> = order.iter().collect();
        assert_eq!(set.len(), 1000, "every flow visited once per cycle");
        assert_ne!(order[..10], (0..10).collect::<Vec<_>>()[..]);
        let t2 = FlowTable::new(&spec, fb(base(), 1024, 1024)).unwrap();
        assert_eq!(order, (0..1000).map(|j| t2.flow_for_frame(j)).collect::<Vec<_>>());
        let ports: HashSet<u16> = (0..1000).map(|i| t.tuple(i).src_port).collect();
        assert_eq!(ports.len(), 100);
        assert!(ports.iter().all(|&p| p >= 1));
    }

    #[test]
    fn large_tables_compute_on_the_fly() {
        let spec = FlowSpec { src_ips: 1000, dst_ips: 1000, ..FlowSpec::default() };
        let t = FlowTable::new(&spec, fb(base(), 9, 9)).unwrap();
        let ips = t.tuple(999_999).ips;
        assert_eq!(ips, IpPair::V4 { src: Ipv4Addr::new(198, 18, 3, 232), dst: Ipv4Addr::new(198, 19, 3, 232) });
    }

    #[test]
    fn flow_spec_and_order_validation() {
        FlowSpec::default().validate().unwrap();
        let e = FlowSpec { dst_ips: 0, ..FlowSpec::default() }.validate().unwrap_err();
        assert_eq!(e.field, "flows.dst_ips");
        let e = FlowSpec { src_ports: 65536, ..FlowSpec::default() }.validate().unwrap_err();
        assert_eq!(e.field, "flows.src_ports");
        let e = FlowSpec { src_ips: 4096, dst_ips: 4097, ..FlowSpec::default() }.validate().unwrap_err();
        assert_eq!(e.field, "flows");
        assert!(e.message.contains("16777216"), "{e}");
        assert_eq!(FlowOrder::parse("pseudorandom", 9).unwrap(), FlowOrder::Pseudorandom { seed: 9 });
        assert_eq!(FlowOrder::parse("random", 1).unwrap_err().field, "flows.order");
    }

    /// MACs and VLAN ids vary like addresses and ports: every combination once, counting up from
    /// the stream's own, MACs carried across bytes; the pseudorandom order visits them all.
    #[test]
    fn macs_and_vlans_are_flow_dimensions() {
        let spec = FlowSpec { src_macs: 3, dst_macs: 2, vlans: 4, dst_ports: 2, ..FlowSpec::default() };
        spec.validate().unwrap();
        assert_eq!(spec.count(), 48);
        let b = FlowBase { src_mac: EthernetAddress([2, 0, 0, 0, 0, 0xFF]), vlan: 100, ..fb(base(), 1024, 2000) };
        let t = FlowTable::new(&spec, b).unwrap();
        let all: Vec<FlowTuple> = (0..48).map(|i| t.tuple(i)).collect();
        assert_eq!(all.iter().collect::<HashSet<_>>().len(), 48);
        // dst port fastest, then VLAN, then dst MAC, then src MAC.
        assert_eq!((all[1].dst_port, all[1].vlan), (2001, 100));
        assert_eq!((all[2].dst_port, all[2].vlan), (2000, 101));
        assert_eq!(all[8].dst_mac, EthernetAddress([2, 0, 0, 0, 0, 3]));
        assert_eq!(all[16].src_mac, EthernetAddress([2, 0, 0, 0, 1, 0]), "carry into the next byte");
        let vlans: HashSet<u16> = all.iter().map(|f| f.vlan).collect();
        assert_eq!(vlans, (100..104).collect());
        assert!(all.iter().all(|f| f.ips == base() && f.src_port == 1024));
        let shuffled = FlowTable::new(&FlowSpec { order: FlowOrder::Pseudorandom { seed: 3 }, ..spec }, b).unwrap();
        let order: Vec<u64> = (0..48).map(|j| shuffled.flow_for_frame(j)).collect();
        assert_eq!(order.iter().collect::<HashSet<_>>().len(), 48);
        assert_ne!(order, (0..48).collect::<Vec<_>>());
        let macs: HashSet<_> = (0..48).map(|i| shuffled.tuple(i).src_mac).collect();
        assert_eq!(macs.len(), 3);
        // Ranges that run out of their space.
        let top = FlowBase { dst_mac: EthernetAddress([0xFF; 6]), ..b };
        assert!(FlowTable::new(&spec, top).unwrap_err().contains("MAC"));
        assert!(FlowTable::new(&spec, FlowBase { vlan: 4092, ..b }).unwrap_err().contains("VLAN"));
        assert!(FlowTable::new(&spec, FlowBase { vlan: 0, ..b }).is_err(), "VLAN ids need a tag");
        assert_eq!(FlowSpec { vlans: 0, ..spec }.validate().unwrap_err().field, "flows.vlans");
        assert_eq!(FlowSpec { vlans: 4095, ..spec }.validate().unwrap_err().field, "flows.vlans");
        assert_eq!(FlowSpec { src_macs: 0, ..spec }.validate().unwrap_err().field, "flows.src_macs");
    }

    /// Patching a flow into a tagged TCP frame: the bytes are the flow's, the checksums hold.
    #[test]
    fn apply_patches_what_varies() {
        use netrig_wire::builder::{build_frame, L3Spec, Proto, TemplateSpec};
        use netrig_wire::{tcp, vlan};
        let spec = FlowSpec { src_ips: 2, dst_ports: 3, dst_macs: 2, vlans: 2, ..FlowSpec::default() };
        let b = FlowBase { vlan: 10, ..fb(base(), 1024, 2000) };
        let t = FlowTable::new(&spec, b).unwrap();
        let mut ts = TemplateSpec::udp(
            b.src_mac,
            b.dst_mac,
            L3Spec::V4 { src: Ipv4Addr::new(198, 18, 0, 1), dst: Ipv4Addr::new(198, 19, 0, 1), ttl: 64, dscp: 0 },
            1024,
            2000,
        );
        ts.vlan = Some(vlan::Repr { pcp: 0, dei: false, vid: 10, inner_ethertype: 0 });
        ts.proto = Proto::Tcp { flags: tcp::flags::ACK, seq: 1, ack: 0, window: 1000 };
        let mut tmpl = vec![0u8; 100];
        let info = build_frame(&ts, 100, &mut tmpl).unwrap();
        for i in 0..t.count() {
            let mut buf = tmpl.clone();
            t.apply(&mut buf, &info, i);
            let f = t.tuple(i);
            let IpPair::V4 { src, dst } = f.ips else { unreachable!() };
            let mut want_spec = ts;
            want_spec.dst_mac = f.dst_mac;
            want_spec.vlan = Some(vlan::Repr { vid: f.vlan, ..ts.vlan.unwrap() });
            want_spec.l3 = L3Spec::V4 { src, dst, ttl: 64, dscp: 0 };
            want_spec.dst_port = f.dst_port;
            let mut want = vec![0u8; 100];
            build_frame(&want_spec, 100, &mut want).unwrap();
            assert_eq!(buf, want, "flow {i}");
        }
    }
}
