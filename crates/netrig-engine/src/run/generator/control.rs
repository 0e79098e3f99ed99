//! Controlling a generator and reading it: flow start/stop/pause/resume, counters, captures.
//! Every command checks all its flow indices before it changes anything.
use std::sync::atomic::Ordering;
use std::sync::Arc;

use netrig_wire::signature::TRIAL_MASK;
use netrig_wire::stack::CompiledStack;
use netrig_wire::{capfile, fcs};

use super::capring::out_records;
use super::stats::{FlowState, FlowStats, PortStats, TxPacing};
use super::FlowBuckets;
use super::CAPTURE_ACK_NS;
use super::{claim_tag, compile_flow_with, post, Cmd, GenDuration, GenFlowConfig, Generator, OpenPorts, Queue};
use crate::clock;
use crate::error::ConfigError;
use crate::port::PortCaps;

/// A start command's flows begin this long after it, together.
const START_LEAD_NS: u64 = 1_000_000;

impl Generator {
    fn check(&self, flows: &[usize], field: &str) -> Result<(), ConfigError> {
        match flows.iter().position(|&f| f >= self.ctl.len()) {
            Some(k) => Err(ConfigError::new(
                format!("{field}[{k}]"),
                format!("flow {} does not exist (the generator has {})", flows[k], self.ctl.len()),
            )),
            None => Ok(()),
        }
    }

    /// Commands per TX worker, posted together.
    fn post_all(&self, cmds: Vec<(usize, Cmd)>) {
        let mut per: Vec<Vec<Cmd>> = self.mailboxes.iter().map(|_| Vec::new()).collect();
        for (f, c) in cmds {
            per[self.worker_of[f]].push(c);
        }
        for ((mb, th), c) in self.mailboxes.iter().zip(per) {
            if !c.is_empty() {
                post(mb, th, c);
            }
        }
    }

    /// Start `flows` that are stopped or done (others are left alone), together, each under a new
    /// tag: their counters start from zero. Returns the flows started.
    pub fn start(&self, flows: &[usize]) -> Result<Vec<usize>, ConfigError> {
        self.start_tagged(flows, None)
    }

    /// [`Generator::start`] under tags the caller chose (`tags[k]` for `flows[k]`; a distributed
    /// controller gives the same tag to the agent that sends a flow and to those that receive it).
    pub fn start_tagged(&self, flows: &[usize], tags: Option<&[u32]>) -> Result<Vec<usize>, ConfigError> {
        self.check(flows, "flows")?;
        check_tags(flows, tags)?;
        let _g = self.control.lock().unwrap_or_else(|e| e.into_inner());
        let at_ns = clock::now_ns() + START_LEAD_NS;
        let mut claims = self.claims.lock().unwrap_or_else(|e| e.into_inner());
        let mut cmds = Vec::new();
        for (k, &f) in flows.iter().enumerate() {
            if matches!(self.ctl[f].state(), FlowState::Running | FlowState::Paused) {
                continue;
            }
            let tag = match tags {
                Some(t) => {
                    claims[f] = None;
                    t[k]
                }
                None => {
                    let (claim, ident) = claim_tag();
                    claims[f] = Some(claim);
                    ident.tag
                }
            };
            self.ctl[f].tag.store(tag, Ordering::Release);
            self.ctl[f].set_state(FlowState::Running);
            cmds.push((f, Cmd::Start { flow: f, tag, at_ns }));
        }
        let started = cmds.iter().map(|(f, _)| *f).collect();
        self.post_all(cmds);
        Ok(started)
    }

    /// Count `flows`' frames tagged `tags[k]` from now on without sending them: the receive side of
    /// flows another agent sends. Their counters start from zero; their state is unchanged.
    pub fn expect(&self, flows: &[usize], tags: &[u32]) -> Result<(), ConfigError> {
        self.check(flows, "flows")?;
        check_tags(flows, Some(tags))?;
        let _g = self.control.lock().unwrap_or_else(|e| e.into_inner());
        for (&f, &tag) in flows.iter().zip(tags) {
            self.ctl[f].tag.store(tag, Ordering::Release);
        }
        Ok(())
    }

    /// Change flows' rate, frame sizes and headers in place (OTG `update_flows`; a flow over
    /// devices given its next hop's MAC): `updates[k]` is a flow, its new configuration and its
    /// stack when compiled already. Only the rate, the frame size and the header stack may differ
    /// from the flow's configuration; a `Seconds` flow's frame count is its rate's, so
    /// its rate stays. Every update is checked before any applies. A flow's counters, sequence and
    /// tag go on: a running flow's next frame leaves at the new rate (never before the old
    /// schedule's next one), so no frame is lost or counted twice.
    pub fn update(&self, updates: Vec<(usize, GenFlowConfig, Option<Arc<CompiledStack>>)>) -> Result<(), ConfigError> {
        let flows: Vec<usize> = updates.iter().map(|u| u.0).collect();
        self.check(&flows, "flows")?;
        let _g = self.control.lock().unwrap_or_else(|e| e.into_inner());
        let mut current = self.flows.lock().unwrap_or_else(|e| e.into_inner());
        let mut compiled = Vec::with_capacity(updates.len());
        for (f, cfg, stack) in updates {
            let old = &current[f].config;
            let same = GenFlowConfig {
                rate: old.rate,
                frame_size: old.frame_size.clone(),
                stack: old.stack.clone(),
                ..cfg.clone()
            };
            if same != *old {
                return Err(ConfigError::new(
                    format!("flows[{f}]"),
                    "only its rate, frame size and headers can change in place",
                ));
            }
            if matches!(old.duration, GenDuration::Seconds(_)) && cfg.rate != old.rate {
                return Err(ConfigError::new(
                    format!("flows[{f}].rate"),
                    "a fixed-seconds flow's frame count is its rate × its time: stop it and set the config",
                ));
            }
            let caps = &self.caps[cfg.tx_port];
            let speed = self.line_rates[cfg.tx_port];
            compiled.push(Arc::new(compile_flow_with(f, &cfg, caps.max_frame_len, speed, stack)?));
        }
        let cmds = compiled.iter().map(|c| (c.index, Cmd::Update { flow: c.index, compiled: c.clone() })).collect();
        for c in compiled {
            let f = c.index;
            current[f] = c;
        }
        self.post_all(cmds);
        Ok(())
    }

    /// Change running/paused flows: stop (counters kept), pause or resume.
    fn change(
        &self,
        flows: &[usize],
        from: &[FlowState],
        to: FlowState,
        cmd: impl Fn(usize) -> Cmd,
    ) -> Result<(), ConfigError> {
        self.check(flows, "flows")?;
        let _g = self.control.lock().unwrap_or_else(|e| e.into_inner());
        let mut cmds = Vec::new();
        for &f in flows {
            let st = self.ctl[f].state();
            if from.contains(&st) {
                self.ctl[f].set_state(to);
                if st != FlowState::Done {
                    cmds.push((f, cmd(f)));
                }
            }
        }
        self.post_all(cmds);
        Ok(())
    }

    pub fn stop(&self, flows: &[usize]) -> Result<(), ConfigError> {
        let from = [FlowState::Running, FlowState::Paused, FlowState::Done];
        self.change(flows, &from, FlowState::Stopped, Cmd::Stop)
    }

    pub fn pause(&self, flows: &[usize]) -> Result<(), ConfigError> {
        self.change(flows, &[FlowState::Running], FlowState::Paused, Cmd::Pause)
    }

    pub fn resume(&self, flows: &[usize]) -> Result<(), ConfigError> {
        let at_ns = clock::now_ns();
        self.change(flows, &[FlowState::Paused], FlowState::Running, |flow| Cmd::Resume { flow, at_ns })
    }

    /// Every flow's counts now (the current start's). Waits for every RX worker's snapshot
    /// (an idle one is woken for it), then reads the transmit counters: a TX
    /// worker counts a frame before it sends it, so every frame a snapshot holds is in them and a
    /// running flow never reads as more received than sent.
    pub fn flow_stats(&self) -> Vec<FlowStats> {
        let tags: Vec<u32> = self.ctl.iter().map(|c| c.tag.load(Ordering::Acquire)).collect();
        let mut out: Vec<FlowStats> = self.ctl.iter().map(|_| FlowStats::default()).collect();
        let asked: Vec<u64> = self.rx_snaps.iter().map(|s| s.ask()).collect();
        for (snaps, &a) in self.rx_snaps.iter().zip(&asked) {
            let got = snaps.wait(a);
            for ((s, r), &tag) in out.iter_mut().zip(&got.flows).zip(&tags) {
                if r.tag == tag {
                    s.add_rx(r);
                }
            }
        }
        for (f, s) in out.iter_mut().enumerate() {
            s.state = self.ctl[f].state() as u8;
            if self.tx_pubs[f].tag.load(Ordering::Acquire) == tags[f] {
                s.add_tx(&self.tx_pubs[f]);
            }
        }
        out
    }

    /// Flow `flow`'s frames per frame index modulo its tag period, sent and received (the current
    /// start's; sent read after received, as [`Self::flow_stats`]); `None` for a flow without a tag
    /// period or out of range.
    pub fn flow_tags(&self, flow: usize) -> Option<(Vec<u64>, Vec<u64>)> {
        let c = self.ctl.get(flow)?;
        let n = self.tx_pubs[flow].tags.len();
        if n == 0 {
            return None;
        }
        let tag = c.tag.load(Ordering::Acquire);
        let (mut tx, mut rx) = (vec![0; n], vec![0; n]);
        let asked: Vec<u64> = self.rx_snaps.iter().map(|s| s.ask()).collect();
        for (snaps, &a) in self.rx_snaps.iter().zip(&asked) {
            let got = snaps.wait(a);
            if got.flows.get(flow).is_some_and(|r| r.tag == tag) {
                for (x, v) in rx.iter_mut().zip(got.tags[flow].iter()) {
                    *x += v;
                }
            }
        }
        if self.tx_pubs[flow].tag.load(Ordering::Acquire) == tag {
            self.tx_pubs[flow].add_tags(&mut tx);
        }
        Some((tx, rx))
    }

    /// Every flow's latency and |IPDV| distributions (the current start's unique frames, ns) as
    /// `(value, count)` pairs, lowest first, summed over the RX workers: each value the highest of
    /// its bucket (3 and 2 significant digits), so quantiles of them are a histogram's. `None` for
    /// a flow beyond the first [`crate::traffic::analyze::PER_FLOW_HIST_LIMIT`], which has no histograms.
    pub fn flow_latency(&self) -> Vec<Option<FlowBuckets>> {
        type Sum = std::collections::BTreeMap<u64, u64>;
        let tags: Vec<u32> = self.ctl.iter().map(|c| c.tag.load(Ordering::Acquire)).collect();
        let mut sums: Vec<Option<(Sum, Sum)>> = vec![None; tags.len()];
        let asked: Vec<u64> = self.rx_snaps.iter().map(|s| s.ask_latency()).collect();
        for (snaps, &a) in self.rx_snaps.iter().zip(&asked) {
            let got = snaps.wait_latency(a);
            for ((sum, (tag, b)), &want) in sums.iter_mut().zip(&got.lat).zip(&tags) {
                let (lat, ipdv) = sum.get_or_insert_with(Default::default);
                if *tag == want {
                    b.latency.iter().for_each(|&(v, n)| *lat.entry(v).or_default() += n);
                    b.ipdv.iter().for_each(|&(v, n)| *ipdv.entry(v).or_default() += n);
                }
            }
        }
        let pairs = |m: Sum| m.into_iter().collect();
        sums.into_iter().map(|s| s.map(|(l, d)| FlowBuckets { latency: pairs(l), ipdv: pairs(d) })).collect()
    }

    /// Every flow's state (what [`Self::flow_stats`] says, without the counts).
    pub fn flow_states(&self) -> Vec<FlowState> {
        self.ctl.iter().map(|c| c.state()).collect()
    }

    /// Every port's counts since the generator opened.
    pub fn port_stats(&self) -> Vec<PortStats> {
        let mut out: Vec<PortStats> = self
            .links
            .iter()
            .zip(&self.captures)
            .map(|(l, c)| PortStats {
                link_up: l.as_ref().and_then(|l| l.state()).map(|s| s.oper_up),
                capturing: c.ctl.on.load(Ordering::Relaxed),
                ..Default::default()
            })
            .collect();
        for (p, c) in &self.tx_ports {
            out[*p].add(c, false);
        }
        for (p, c) in &self.rx_ports {
            out[*p].add(c, true);
        }
        out
    }

    /// Every port's schedule keeping since its flows last started from idle ([`TxPacing`]; `None`:
    /// the port sends nothing).
    pub fn tx_pacing(&self) -> Vec<Option<TxPacing>> {
        let mut out: Vec<Option<TxPacing>> = vec![None; self.links.len()];
        for (p, c) in &self.tx_ports {
            let mine = *c.pacing.lock().unwrap_or_else(|e| e.into_inner());
            out[*p] = Some(out[*p].map_or(mine, |o| o.merge(mine)));
        }
        out
    }

    /// Start (`on`) or stop the capture of `port`; waits until its receivers acted on it. Starting
    /// clears what an earlier capture kept.
    pub fn set_capture(&self, port: usize, on: bool) -> Result<(), ConfigError> {
        let c = self.capture(port)?;
        let _g = self.control.lock().unwrap_or_else(|e| e.into_inner());
        c.ctl.on.store(on, Ordering::Release);
        let epoch = c.ctl.epoch.fetch_add(1, Ordering::AcqRel) + 1;
        let deadline = clock::now_ns() + CAPTURE_ACK_NS;
        while c.rings.iter().any(|(_, acked)| acked.load(Ordering::Acquire) < epoch) {
            if clock::now_ns() > deadline {
                return Err(ConfigError::new("capture", format!("port {port}: the receivers did not answer in 2 s")));
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        Ok(())
    }

    fn capture(&self, port: usize) -> Result<&super::PortCapture, ConfigError> {
        match self.captures.get(port) {
            Some(c) if c.configured => Ok(c),
            _ => Err(ConfigError::new("capture", format!("port {port} has no capture configured: add one for it"))),
        }
    }

    /// The frames `port` captured, oldest first, with their FCS, as pcapng or classic pcap.
    /// Refused while the capture runs.
    pub fn capture_file(&self, port: usize, pcapng: bool, if_name: &str) -> Result<Vec<u8>, ConfigError> {
        let c = self.capture(port)?;
        if c.ctl.on.load(Ordering::Acquire) {
            return Err(ConfigError::new("capture", format!("port {port}: the capture is running: stop it first")));
        }
        let mut frames = Vec::new();
        let mut snaplen = 0;
        for (ring, _) in &c.rings {
            let r = ring.lock().unwrap_or_else(|e| e.into_inner());
            snaplen = snaplen.max(r.snaplen());
            frames.extend(r.frames(fcs::fcs));
        }
        frames.sort_by_key(|(ts, _, _)| *ts);
        let records = out_records(&frames, self.realtime_offset_ns);
        let snap = u32::try_from(snaplen).unwrap_or(u32::MAX);
        Ok(if pcapng { capfile::pcapng(&records, snap, 4, if_name) } else { capfile::pcap(&records, snap) })
    }

    /// Frames a capture of `port` could not keep (its buffer was full).
    pub fn capture_dropped(&self, port: usize) -> u64 {
        self.captures.get(port).map_or(0, |c| c.rings.iter().map(|(r, _)| r.try_lock().map_or(0, |g| g.dropped)).sum())
    }

    /// Number of flows.
    pub fn flows(&self) -> usize {
        self.ctl.len()
    }

    /// The opened ports' capabilities (backend, notes, speed).
    pub fn port_caps(&self) -> &[PortCaps] {
        &self.caps
    }

    /// The line rate each port is run at (its own or the configured one), bit/s.
    pub fn line_rates(&self) -> &[Option<u64>] {
        &self.line_rates
    }

    /// Add to an engine-clock time to get the realtime clock (ns since the Unix epoch).
    pub fn realtime_offset_ns(&self) -> i128 {
        self.realtime_offset_ns
    }

    /// Errors of workers (a queue that failed), oldest first.
    pub fn errors(&self) -> Vec<String> {
        self.errors.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Workers that do not run on their CPU: the kernel refused the pin (see `crate::pin`); empty
    /// when every worker was pinned.
    pub fn pin_failures(&self) -> Vec<crate::pin::PinFailure> {
        self.pins.failures()
    }

    /// Stop every flow and worker and close the ports (XDP programs detached). Idempotent.
    pub fn close(&self) {
        drop(self.shutdown());
        self.ports.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// Stop every flow and worker, and hand back the ports with every queue open, for the next
    /// generator on the same ports ([`Generator::open_on`]). `None` (everything closed) when a
    /// worker failed or ended early: its queue is not to be trusted. Frames still in flight
    /// carry this generator's tags: the next one never counts them.
    pub fn release(&self) -> Option<OpenPorts> {
        let queues = self.shutdown();
        let ports = std::mem::take(&mut *self.ports.lock().unwrap_or_else(|e| e.into_inner()));
        if !self.errors.lock().unwrap_or_else(|e| e.into_inner()).is_empty() || ports.is_empty() {
            return None;
        }
        let mut open = OpenPorts::new(ports);
        for q in queues {
            match q.ok()? {
                Queue::Tx(p, i, q) => open.tx.push((p, i, q)),
                Queue::Rx(p, i, q) => open.rx.push((p, i, q)),
            }
        }
        Some(open)
    }

    /// Stop every flow and worker; each worker's queue, as it ended.
    fn shutdown(&self) -> Vec<std::thread::Result<Queue>> {
        let all: Vec<usize> = (0..self.ctl.len()).collect();
        let _ = self.stop(&all);
        self.stop.store(true, Ordering::SeqCst);
        for (mb, th) in &self.mailboxes {
            post(mb, th, [Cmd::Shutdown]);
        }
        let handles = std::mem::take(&mut *self.handles.lock().unwrap_or_else(|e| e.into_inner()));
        handles.into_iter().map(|h| h.join()).collect()
    }
}

impl Drop for Generator {
    fn drop(&mut self) {
        self.close();
    }
}

/// Given tags: one per flow, each a trial tag (below 2^23).
fn check_tags(flows: &[usize], tags: Option<&[u32]>) -> Result<(), ConfigError> {
    let Some(tags) = tags else { return Ok(()) };
    if tags.len() != flows.len() {
        return Err(ConfigError::new(
            "tags",
            format!("{} tags for {} flows: give one per flow", tags.len(), flows.len()),
        ));
    }
    match tags.iter().position(|&t| t > TRIAL_MASK) {
        Some(k) => Err(ConfigError::new(format!("tags[{k}]"), format!("{} is above {TRIAL_MASK}", tags[k]))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_tags_one_per_flow_below_the_mask() {
        assert!(check_tags(&[0, 1], None).is_ok());
        assert!(check_tags(&[0, 1], Some(&[5, TRIAL_MASK])).is_ok());
        assert!(check_tags(&[0, 1], Some(&[5])).unwrap_err().to_string().contains("tags"));
        assert!(check_tags(&[0], Some(&[TRIAL_MASK + 1])).unwrap_err().to_string().contains("tags[0]"));
    }
}
