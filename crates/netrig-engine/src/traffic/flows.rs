//! Flow ranges: a stream's flows as the digits of a flow key, and the order frames visit them.
//!
//! A stream's flows are every combination of
//! `src_macs × dst_macs × vlans × src_ips × dst_ips × src_ports × dst_ports`, counting up from
//! the stream's base MACs, VLAN id, addresses and ports (the destination port varies fastest):
//! each range of more than one value is a digit of the key of its header stack, and its field a
//! [`Pattern::ByKey`] ([`FlowSpec::fields`]). With [`FlowOrder::Pseudorandom`] (RFC 4814 §4.5)
//! port numbers are spread pseudorandomly over 1..=65535 instead of counting up, and the frames
//! visit flows in a seeded pseudorandom order ([`FlowWalk`]); both are reproducible.
use std::sync::Arc;

use netrig_wire::ethernet::EthernetAddress;
use netrig_wire::frames::PerFlow;
use netrig_wire::pattern::Pattern;
use netrig_wire::stack::keys::gcd;
use netrig_wire::stack::KeyValues;
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

/// The first stride from `x mod len` up that is coprime with `len` (1 for one flow): every flow
/// once a cycle.
fn coprime_from(x: u64, len: u64) -> u64 {
    let mut stride = x % len.max(1);
    while len > 1 && (stride == 0 || gcd(stride, len) != 1) {
        stride = (stride + 1) % len;
    }
    stride.max(1)
}

/// The order frames visit a stream's flows in (flow = (j · stride + start) mod count), and the
/// values of its port ranges: counting up, or with [`FlowOrder::Pseudorandom`] both drawn from
/// the seed (RFC 4814 §4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowWalk {
    pub stride: u64,
    pub start: u64,
    port_mult: u32,
    port_seed: u32,
}

impl FlowWalk {
    /// The walk over `spec`'s flows.
    pub fn new(spec: &FlowSpec) -> FlowWalk {
        let count = spec.count();
        match spec.order {
            FlowOrder::Sequential => FlowWalk { stride: 1, start: 0, port_mult: 1, port_seed: 0 },
            FlowOrder::Pseudorandom { seed } => {
                let mut rng = crate::rng::XorShift::new(seed);
                let stride = coprime_from(if count > 1 { rng.next_u64() } else { 1 }, count);
                // 65535 = 3·5·17·257: pick a multiplier coprime with it.
                let mut m = (rng.next_u64() % 65535) as u32 | 1;
                while gcd(u64::from(m), 65535) != 1 {
                    m += 2;
                }
                let start = rng.next_u64() % count.max(1);
                FlowWalk { stride, start, port_mult: m, port_seed: (rng.next_u64() % 65535) as u32 }
            }
        }
    }

    /// The stride and start of this walk over a block of `len` of the flows (a TX queue's share):
    /// the stride moved up to the next one coprime with `len`, so each share still visits each
    /// of its flows once a cycle. Over all the flows, the walk's own.
    pub fn within(&self, len: u64) -> (u64, u64) {
        (coprime_from(self.stride, len), self.start % len.max(1))
    }

    /// Port `k` of a range starting at `base` (1..=65535: it wraps past 65535 to 1).
    pub fn port(&self, base: u16, k: u32) -> u16 {
        if self.port_mult == 1 && self.port_seed == 0 {
            ((u32::from(base) - 1 + k) % 65535 + 1) as u16
        } else {
            // A permutation of 1..=65535 (multiplier coprime with 65535).
            (((u64::from(k) * u64::from(self.port_mult) + u64::from(self.port_seed) + u64::from(base)) % 65535) + 1)
                as u16
        }
    }
}

impl FlowSpec {
    /// The per-flow fields of flows counting up from `base`, with `walk`'s port values: the key's
    /// digits (the destination port fastest, then the source port, the destination and source
    /// addresses, the VLAN id, the destination and source MACs) and a [`Pattern::ByKey`] for every
    /// range of more than one value.
    pub fn fields(&self, base: &FlowBase, walk: &FlowWalk) -> PerFlow {
        let mut out = PerFlow::default();
        let mut digit = |n: u32, values: &dyn Fn() -> KeyValues| {
            (n > 1).then(|| {
                out.keys.radices.push(n);
                Pattern::ByKey { digit: (out.keys.radices.len() - 1) as u8, values: values() }
            })
        };
        let ports = |b: u16, n: u32| KeyValues::Table((0..n).map(|k| walk.port(b.max(1), k)).collect::<Arc<[u16]>>());
        let (src, dst) = match base.ips {
            IpPair::V4 { src, dst } => (u128::from(u32::from(src)), u128::from(u32::from(dst))),
            IpPair::V6 { src, dst } => (u128::from(src), u128::from(dst)),
        };
        let dst_port = digit(self.dst_ports, &|| ports(base.dst_port, self.dst_ports));
        let src_port = digit(self.src_ports, &|| ports(base.src_port, self.src_ports));
        let dst_ip = digit(self.dst_ips, &|| KeyValues::Offset(dst));
        let src_ip = digit(self.src_ips, &|| KeyValues::Offset(src));
        let vlan = digit(self.vlans, &|| KeyValues::Offset(base.vlan.into()));
        let dst_mac = digit(self.dst_macs, &|| KeyValues::Offset(mac_u64(base.dst_mac).into()));
        let src_mac = digit(self.src_macs, &|| KeyValues::Offset(mac_u64(base.src_mac).into()));
        PerFlow { src_ip, dst_ip, src_port, dst_port, src_mac, dst_mac, vlan, ..out }
    }
}

fn mac_u64(m: EthernetAddress) -> u64 {
    m.0.iter().fold(0u64, |a, &b| a << 8 | u64::from(b))
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::net::Ipv4Addr;

    use super::*;

    fn base() -> FlowBase {
        FlowBase {
            ips: IpPair::V4 { src: Ipv4Addr::new(198, 18, 0, 1), dst: Ipv4Addr::new(198, 19, 0, 1) },
            src_port: 1024,
            dst_port: 2000,
            src_mac: EthernetAddress([2, 0, 0, 0, 0, 0xFF]),
            dst_mac: EthernetAddress([2, 0, 0, 0, 0, 2]),
            vlan: 100,
        }
    }

    fn by_key(p: &Option<Pattern>) -> (u8, KeyValues) {
        match p {
            Some(Pattern::ByKey { digit, values }) => (*digit, values.clone()),
            other => panic!("not a per-flow field: {other:?}"),
        }
    }

    /// Every range of more than one value is a digit, the destination port fastest, then the
    /// source port, the destination and source addresses, the VLAN id, the destination and source
    /// MACs; each counts up from the stream's own (ports wrap past 65535 to 1).
    #[test]
    fn ranges_are_the_keys_digits_in_order() {
        let spec = FlowSpec { src_ips: 4, dst_ips: 3, src_ports: 2, dst_ports: 5, ..FlowSpec::default() };
        let b = FlowBase { dst_port: 65534, ..base() };
        let f = spec.fields(&b, &FlowWalk::new(&spec));
        assert_eq!(f.keys.radices, [5, 2, 3, 4]);
        assert_eq!(f.keys.count(), spec.count());
        let (d, v) = by_key(&f.dst_port);
        assert_eq!((d, (0..5).map(|k| v.at(k)).collect::<Vec<_>>()), (0, vec![65534, 65535, 1, 2, 3]));
        assert_eq!(by_key(&f.src_port).0, 1);
        assert_eq!(by_key(&f.dst_ip), (2, KeyValues::Offset(0xC613_0001)));
        assert_eq!(by_key(&f.src_ip), (3, KeyValues::Offset(0xC612_0001)));
        assert!(f.vlan.is_none() && f.src_mac.is_none() && f.dst_mac.is_none(), "ranges of one are fixed");

        let spec = FlowSpec { src_macs: 3, dst_macs: 2, vlans: 4, dst_ports: 2, ..FlowSpec::default() };
        let f = spec.fields(&base(), &FlowWalk::new(&spec));
        assert_eq!(f.keys.radices, [2, 4, 2, 3]);
        assert_eq!(by_key(&f.vlan), (1, KeyValues::Offset(100)));
        assert_eq!(by_key(&f.dst_mac), (2, KeyValues::Offset(0x0200_0000_0002)));
        let (d, src_mac) = by_key(&f.src_mac);
        assert_eq!((d, src_mac.at(1)), (3, 0x0200_0000_0100), "a MAC carried into the next byte");
        assert_eq!(FlowSpec::default().fields(&base(), &FlowWalk::new(&FlowSpec::default())), PerFlow::default());
    }

    /// RFC 4814 §4.5: the pseudorandom walk visits every flow once a cycle, in an order that is
    /// not counting and is the same for the same seed; its ports are spread over 1..65535.
    #[test]
    fn the_pseudorandom_walk_is_a_reproducible_permutation() {
        let spec =
            FlowSpec { dst_ips: 10, src_ports: 100, order: FlowOrder::Pseudorandom { seed: 7 }, ..Default::default() };
        let walk = FlowWalk::new(&spec);
        assert_eq!(walk, FlowWalk::new(&spec));
        assert_ne!(walk, FlowWalk::new(&FlowSpec { order: FlowOrder::Pseudorandom { seed: 8 }, ..spec }));
        let keys = spec.fields(&base(), &walk).keys;
        let mut c = keys.cursor(0..1000, walk.stride, walk.start);
        let order: Vec<u64> = (0..1000)
            .map(|_| {
                let k = c.key();
                c.step();
                k
            })
            .collect();
        assert_eq!(order.iter().collect::<HashSet<_>>().len(), 1000, "every flow once a cycle");
        assert_ne!(order[..10], (0..10).collect::<Vec<_>>()[..]);
        let (_, ports) = by_key(&spec.fields(&base(), &walk).src_port);
        let ports: HashSet<u128> = (0..100).map(|k| ports.at(k)).collect();
        assert_eq!(ports.len(), 100);
        assert!(ports.iter().all(|&p| (1..=65535).contains(&p)));
        assert_eq!(
            FlowWalk::new(&FlowSpec::default()),
            FlowWalk::new(&FlowSpec { dst_ports: 9, ..FlowSpec::default() })
        );
    }

    /// A TX queue's block of the flows gets a stride coprime with its length: each share visits
    /// each of its flows once a cycle.
    #[test]
    fn a_walk_within_a_block_keeps_a_coprime_stride() {
        let spec = FlowSpec { dst_ports: 1000, order: FlowOrder::Pseudorandom { seed: 3 }, ..FlowSpec::default() };
        let walk = FlowWalk::new(&spec);
        assert_eq!(walk.within(1000), (walk.stride, walk.start), "over all the flows, the walk's own");
        for len in [1, 2, 333, 334, 500, 999] {
            let (stride, start) = walk.within(len);
            assert!(start < len && (len == 1 || gcd(stride, len) == 1), "{len}: {stride}");
        }
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
        assert_eq!(FlowSpec { vlans: 0, ..FlowSpec::default() }.validate().unwrap_err().field, "flows.vlans");
        assert_eq!(FlowSpec { vlans: 4095, ..FlowSpec::default() }.validate().unwrap_err().field, "flows.vlans");
        assert_eq!(FlowSpec { src_macs: 0, ..FlowSpec::default() }.validate().unwrap_err().field, "flows.src_macs");
    }
}
