//! A stream as a header stack (`netrig_wire::frames`, `netrig_wire::stack`): the one
//! description of traffic that the OTG generator's flows use too (docs/pipeline.md).
//!
//! The stream's frame ([`FrameSpec`]) with every range of `flows` as a digit of the flow key
//! ([`FlowSpec::fields`]), walked in the stream's order ([`FlowWalk`]). The frames are byte for
//! byte those of the template builder this replaced (frozen in `frames.frozen`, tested below).
use netrig_wire::frames::FrameSpec;
use netrig_wire::stack::StackSpec;

use super::StreamConfig;
use crate::error::ConfigError;
use crate::traffic::flows::{FlowBase, FlowWalk};

impl StreamConfig {
    /// The flows' base values: the stream's own addresses, ports, MACs and VLAN id.
    pub(crate) fn flow_base(&self, t: &FrameSpec) -> FlowBase {
        FlowBase {
            ips: t.l3.ip_pair(),
            src_port: self.src_port,
            dst_port: self.dst_port,
            src_mac: self.src_mac,
            dst_mac: self.dst_mac,
            vlan: self.vlan.unwrap_or(0),
        }
    }

    /// This stream's frames as a header stack whose flow key walks its flows; `walk` gives the
    /// order and the port values (see [`FlowWalk::new`]).
    pub fn stack_spec(&self) -> Result<(StackSpec, FlowWalk), ConfigError> {
        let t = self.frame_spec()?;
        let walk = FlowWalk::new(&self.flows);
        Ok((t.stack(&self.flows.fields(&self.flow_base(&t), &walk)), walk))
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use netrig_wire::dissect::locate;
    use netrig_wire::frames::{min_frame_len, Proto};
    use netrig_wire::signature::{self, Signature};
    use netrig_wire::stack::{self, Site};
    use netrig_wire::EthernetAddress;

    use crate::traffic::flows::{FlowOrder, FlowSpec};
    use crate::traffic::stream::{StreamConfig, FCS_LEN};

    const FLOW_BASE: u32 = 1000;
    /// What the template builder sent for the grids below (FNV-1a 64 of every frame, per stream
    /// and size), frozen before it was deleted, when the stack's frames were compared with its
    /// byte for byte.
    const FROZEN: &str = include_str!("frames.frozen");

    fn fnv(h: &mut u64, bytes: &[u8]) {
        for &b in bytes {
            *h = (*h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3);
        }
    }

    /// Send `cfg`'s frames at each of `sizes` for two cycles of its flows and three frames more,
    /// checking each frame's flow against the walk's formula and its signature; returns each
    /// size's hash of the frames.
    fn frame_hashes(cfg: &StreamConfig, sizes: &[usize]) -> Vec<u64> {
        let (spec, walk) = cfg.stack_spec().unwrap();
        let lens: Vec<usize> = sizes.iter().map(|s| s - FCS_LEN).collect();
        let c = stack::compile(&spec, &lens).unwrap();
        let n = cfg.flows.count();
        let mut hashes = Vec::new();
        for (si, &len) in lens.iter().enumerate() {
            let mut h = 0xCBF2_9CE4_8422_2325u64;
            let mut st = c.start_with(spec.keys.cursor(0..n, walk.stride, walk.start));
            let mut buf = vec![0u8; len];
            for j in 0..2 * n + 3 {
                let i = (u128::from(j % n) * u128::from(walk.stride) + u128::from(walk.start)) as u64 % n;
                assert_eq!((st.key.key(), st.key.cycle()), (i, j / n), "{cfg:?}: frame {j}'s flow");
                let sig = Signature {
                    trial: 0xABCDE,
                    warmup: j % 2 == 1,
                    flow_id: FLOW_BASE + i as u32,
                    seq: j / n,
                    tx_ts_ns: signature::MASK_40 - j,
                };
                c.fill(&mut buf, si, &mut st, &sig);
                assert_eq!(locate(&buf, Site::Payload), Some(sig));
                fnv(&mut h, &buf);
            }
            hashes.push(h);
        }
        hashes
    }

    fn frozen(kind: &str, k: usize) -> Vec<u64> {
        let line = FROZEN.lines().find(|l| l.starts_with(&format!("{kind} {k} "))).expect("a frozen line");
        line.split(' ').skip(2).map(|h| u64::from_str_radix(h, 16).unwrap()).collect()
    }

    fn protocols() -> [Proto; 4] {
        use netrig_wire::tcp::flags;
        [
            Proto::Udp,
            Proto::Tcp { flags: flags::SYN | flags::ECE, seq: 0x0102_0304, ack: 7, window: 0xFFFF },
            Proto::IcmpEcho,
            Proto::Raw { ethertype: 0x88B5 },
        ]
    }

    /// The streams of the grid: every protocol, IPv4 and IPv6, no tag, one and two tags, the UDP
    /// checksum on and off.
    fn grid() -> Vec<StreamConfig> {
        let mut out = Vec::new();
        for proto in protocols() {
            for (src, dst) in [("198.18.0.1", "198.19.255.254"), ("2001:2::1", "2001:2:0:ffff::fe")] {
                for (tags, udp_checksum) in (0..3).flat_map(|n| [(n, false), (n, true)]) {
                    let mut c = StreamConfig::new("s");
                    (c.protocol, c.udp_checksum, c.ttl) = (proto, udp_checksum, 9);
                    (c.src_ip, c.dst_ip) = (src.parse::<IpAddr>().unwrap(), dst.parse::<IpAddr>().unwrap());
                    (c.src_port, c.dst_port) = (0xBEEF, 53);
                    c.dst_mac = EthernetAddress([2, 0xAB, 0xCD, 0xEF, 0x12, 0x34]);
                    (c.outer_vlan, c.vlan) = [(None, None), (None, Some(100)), (Some(4000), Some(1))][tags];
                    out.push(c);
                }
            }
        }
        out
    }

    /// Two thirds of the grid with ranges in every field its protocol has (ports past 65535
    /// wrapping to 1, MACs carried across bytes), sequential and pseudorandom in turn.
    fn flow_grid() -> Vec<(usize, StreamConfig)> {
        let mut out = Vec::new();
        for (k, c) in grid().into_iter().enumerate().filter(|(k, _)| k % 3 != 1) {
            let raw = matches!(c.protocol, Proto::Raw { .. });
            let order = if k % 2 == 0 { FlowOrder::Sequential } else { FlowOrder::Pseudorandom { seed: k as u64 } };
            let ip = if raw { 1 } else { 3 };
            let flows = FlowSpec {
                src_ips: ip,
                dst_ips: ip.min(2),
                src_ports: ip,
                dst_ports: if raw { 1 } else { 5 },
                src_macs: 2,
                dst_macs: 1 + u32::from(raw),
                vlans: if c.vlan.is_some() { 3 } else { 1 },
                order,
            };
            let c = StreamConfig { flows, src_mac: EthernetAddress([2, 0, 0, 0, 0, 0xFF]), src_port: 65534, ..c };
            out.push((k, c));
        }
        out
    }

    /// The smallest frame with FCS, one byte more, and the largest standard one.
    fn sizes(c: &StreamConfig) -> [usize; 3] {
        let min = min_frame_len(&c.frame_spec().unwrap()) + FCS_LEN;
        [min, min + 1, 1518]
    }

    #[test]
    fn one_flow_streams_send_the_frozen_frames() {
        let grid = grid();
        assert_eq!(grid.len(), 48);
        for (k, c) in grid.iter().enumerate() {
            assert_eq!(frame_hashes(c, &sizes(c)), frozen("one", k), "{:?} {:?} {:?}", c.protocol, c.src_ip, c.vlan);
        }
    }

    /// Every range, in both orders: the key walks the flows in the walk's order, and every flow's
    /// frames are the frozen ones.
    #[test]
    fn every_flow_of_every_range_in_both_orders_sends_the_frozen_frames() {
        let grid = flow_grid();
        assert_eq!(grid.len(), 32);
        for (k, c) in grid {
            assert_eq!(frame_hashes(&c, &sizes(&c)[..2]), frozen("flows", k), "{:?} {:?}", c.protocol, c.flows);
        }
    }
}
