//! Flow ranges: mapping a flow index to its addresses and ports, and the order flows are used.
//!
//! A stream's flows are every combination of `src_ips × dst_ips × src_ports × dst_ports`
//! counting up from the stream's base addresses and ports. With [`FlowOrder::Pseudorandom`]
//! (RFC 4814 §4.5) port numbers are spread pseudorandomly over 1..=65535 instead of counting up,
//! and the frames visit flows in a seeded pseudorandom order; both are reproducible.
use std::net::{Ipv4Addr, Ipv6Addr};

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
    pub order: FlowOrder,
}

impl Default for FlowSpec {
    fn default() -> Self {
        FlowSpec { src_ips: 1, dst_ips: 1, src_ports: 1, dst_ports: 1, order: FlowOrder::Sequential }
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
        self.src_ips as u64 * self.dst_ips as u64 * self.src_ports as u64 * self.dst_ports as u64
    }

    /// Every range has at least one value, port ranges fit the port space, and the flows fit
    /// the per-stream limit. Fields are named as in a stream: `flows.src_ports`, `flows`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (name, n) in [
            ("src_ips", self.src_ips),
            ("dst_ips", self.dst_ips),
            ("src_ports", self.src_ports),
            ("dst_ports", self.dst_ports),
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

pub type FlowTuple = (IpPair, u16, u16);

#[derive(Debug, Clone)]
pub struct FlowTable {
    spec: FlowSpec,
    base: IpPair,
    src_port: u16,
    dst_port: u16,
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
    pub fn new(spec: &FlowSpec, base: IpPair, src_port: u16, dst_port: u16) -> Result<Self, String> {
        let count = spec.count();
        // Check the address ranges stay within the address space.
        match base {
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
        let mut t = FlowTable {
            spec: *spec,
            base,
            src_port,
            dst_port,
            count,
            table: Vec::new(),
            stride,
            offset,
            port_mult,
            port_seed,
        };
        if count <= PRECOMPUTE_MAX && count > 1 {
            t.table = (0..count).map(|i| t.compute(i)).collect();
        }
        Ok(t)
    }

    pub fn count(&self) -> u64 {
        self.count
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

    fn compute(&self, i: u64) -> FlowTuple {
        let s = &self.spec;
        let dp = (i % s.dst_ports as u64) as u32;
        let r = i / s.dst_ports as u64;
        let sp = (r % s.src_ports as u64) as u32;
        let r = r / s.src_ports as u64;
        let di = (r % s.dst_ips as u64) as u32;
        let si = (r / s.dst_ips as u64) as u32;
        let ips = match self.base {
            IpPair::V4 { src, dst } => IpPair::V4 {
                src: Ipv4Addr::from(u32::from(src).wrapping_add(si)),
                dst: Ipv4Addr::from(u32::from(dst).wrapping_add(di)),
            },
            IpPair::V6 { src, dst } => IpPair::V6 {
                src: Ipv6Addr::from(u128::from(src).wrapping_add(si as u128)),
                dst: Ipv6Addr::from(u128::from(dst).wrapping_add(di as u128)),
            },
        };
        let sport = if s.src_ports == 1 { self.src_port } else { self.port(self.src_port.max(1), sp) };
        let dport = if s.dst_ports == 1 { self.dst_port } else { self.port(self.dst_port.max(1), dp) };
        (ips, sport, dport)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn base() -> IpPair {
        IpPair::V4 { src: Ipv4Addr::new(198, 18, 0, 1), dst: Ipv4Addr::new(198, 19, 0, 1) }
    }

    #[test]
    fn sequential_flows_are_distinct_and_ordered() {
        let spec = FlowSpec { src_ips: 4, dst_ips: 3, src_ports: 2, dst_ports: 5, order: FlowOrder::Sequential };
        let t = FlowTable::new(&spec, base(), 1024, 2000).unwrap();
        assert_eq!(t.count(), 120);
        let all: HashSet<_> = (0..120).map(|i| t.tuple(i)).collect();
        assert_eq!(all.len(), 120);
        assert_eq!(t.tuple(0), (base(), 1024, 2000));
        assert_eq!(t.tuple(1).2, 2001);
        assert_eq!((0..5).map(|j| t.flow_for_frame(j)).collect::<Vec<_>>(), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn pseudorandom_order_is_a_reproducible_permutation() {
        let spec = FlowSpec {
            src_ips: 1,
            dst_ips: 10,
            src_ports: 100,
            dst_ports: 1,
            order: FlowOrder::Pseudorandom { seed: 7 },
        };
        let t = FlowTable::new(&spec, base(), 1024, 1024).unwrap();
        let order: Vec<u64> = (0..1000).map(|j| t.flow_for_frame(j)).collect();
        let set: HashSet<_> = order.iter().collect();
        assert_eq!(set.len(), 1000, "every flow visited once per cycle");
        assert_ne!(order[..10], (0..10).collect::<Vec<_>>()[..]);
        let t2 = FlowTable::new(&spec, base(), 1024, 1024).unwrap();
        assert_eq!(order, (0..1000).map(|j| t2.flow_for_frame(j)).collect::<Vec<_>>());
        let ports: HashSet<u16> = (0..1000).map(|i| t.tuple(i).1).collect();
        assert_eq!(ports.len(), 100);
        assert!(ports.iter().all(|&p| p >= 1));
    }

    #[test]
    fn large_tables_compute_on_the_fly() {
        let spec = FlowSpec { src_ips: 1000, dst_ips: 1000, src_ports: 1, dst_ports: 1, order: FlowOrder::Sequential };
        let t = FlowTable::new(&spec, base(), 9, 9).unwrap();
        let (ips, _, _) = t.tuple(999_999);
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
}
