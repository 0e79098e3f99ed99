//! When a trial is valid: the rules, as a table of named rules applied in order.
//!
//! A trial's numbers are the DUT's only if the tester neither lost nor made any of them. The
//! trial's collect step gathers what the rules read ([`TrialFacts`]: the counts and facts of one
//! trial), and [`judge`] applies [`RULES`] to them in the table's order: every rule that fires adds
//! its sentence to the trial's `invalid_reason`. docs/methodology.md lists the same table
//! ([`markdown_table`], between the `validity-rules` markers; a test keeps the two equal).
use crate::traffic::pacing::Pacing;

/// A trial in which the tester sent less than this share of the intended frames is invalid.
pub const MIN_ACHIEVED_RATIO: f64 = 0.999;
/// A count-stopped stream may take this much longer than its frames at the rate (the TX workers
/// send frames due before a duration stop's end up to this late, too).
pub const COUNT_STOP_GRACE_NS: u64 = 2_000_000;

/// What a rule is applied to: the trial once, every stream, or every port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Trial,
    Stream,
    Port,
}

/// What a rule that fires does to the trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// The trial is invalid; the rule's sentence is one of its reasons.
    Invalid,
    /// The trial is invalid, and the rule's sentence is its only reason.
    Overrides,
    /// Read only when an earlier rule made the trial invalid: adds a likely cause.
    Explains,
}

/// One validity rule: its name, what it is applied to, and its check (the sentence it adds when
/// it fires, for one subject: the stream or port index; 0 for the trial).
pub struct Rule {
    pub name: &'static str,
    pub scope: Scope,
    pub effect: Effect,
    /// When the rule fires (docs/methodology.md).
    pub when: &'static str,
    /// Why that is the tester's failure, not the DUT's (docs/methodology.md).
    pub why: &'static str,
    pub check: fn(&TrialFacts, usize) -> Option<String>,
}

/// What the rules read of one stream.
#[derive(Debug, Clone, Default)]
pub struct StreamFacts {
    pub name: String,
    /// Stopped after a frame count.
    pub count_stopped: bool,
    /// Sent at a finite rate (`rate_pps`).
    pub paced: bool,
    /// Configured at the maximum rate (`Rate::Max`).
    pub unbounded: bool,
    pub rate_pps: f64,
    pub intended_frames: u64,
    pub tx_frames: u64,
    /// TX stamps of its first and last frame apart, seconds.
    pub own_window_s: f64,
}

/// A flow that received sequence numbers it never sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeqBeyond {
    pub flow: usize,
    pub received: u64,
    pub sent: u64,
    /// The highest sequence number received, plus one.
    pub next_seq: u64,
}

/// What the rules read of one port's link (watched: its state was read before and after).
#[derive(Debug, Clone, Copy, Default)]
pub struct LinkFacts {
    /// Carrier losses during the trial (at least 1 when a read found the link down).
    pub down_events: u64,
    pub up_at_start: bool,
    pub up_at_end: bool,
}

/// What the rules read of one port.
#[derive(Debug, Clone, Default)]
pub struct PortFacts {
    pub name: String,
    /// The port's backend (`Backend::as_str`).
    pub backend: &'static str,
    /// Frames the port's own receive ring dropped.
    pub ring_drops: u64,
    /// Frames the port's kernel dropped on transmit at the receive ring of its veth's other end,
    /// itself a port of the trial (that port's name, the frames).
    pub tx_drops_at_tester: Option<(String, u64)>,
    /// Signed frames of a trial this process is not running.
    pub other_trial: u64,
    /// None when the link was not watched.
    pub link: Option<LinkFacts>,
    /// Ids of netrig steering XDP programs seen on the interface of a receiving port that is
    /// not AF_XDP.
    pub steering_xdp: Vec<u32>,
}

/// Everything the rules read of one trial.
#[derive(Debug, Clone, Default)]
pub struct TrialFacts {
    pub interrupted: bool,
    pub pacing: Pacing,
    pub max_stretch_ratio: f64,
    pub streams: Vec<StreamFacts>,
    pub ports: Vec<PortFacts>,
    /// Flows that received sequence numbers they never sent, by flow id.
    pub beyond: Vec<SeqBeyond>,
    /// The workers' I/O errors.
    pub errors: Vec<String>,
    /// A stream of the trial is stopped after bursts (their schedule is per burst).
    pub bursts: bool,
    /// The paced TX worker stretched the most beyond the tolerance: (stretch, planned) ns.
    pub over_stretched: Option<(u64, u64)>,
    /// Longest a TX worker fell behind its schedule, ns.
    pub max_lag_ns: u64,
}

impl TrialFacts {
    fn subjects(&self, scope: Scope) -> usize {
        match scope {
            Scope::Trial => 1,
            Scope::Stream => self.streams.len(),
            Scope::Port => self.ports.len(),
        }
    }
}

/// The rules, in the order they are applied (and their sentences joined).
pub const RULES: &[Rule] = &[
    Rule {
        name: "interrupted",
        scope: Scope::Trial,
        effect: Effect::Overrides,
        when: "the trial was interrupted (a stop request, Ctrl-C)",
        why: "its counts are of a part of the trial; the reason is then this one alone",
        check: interrupted,
    },
    Rule {
        name: "count_stop_slow",
        scope: Scope::Stream,
        effect: Effect::Invalid,
        when: "a count-stopped stream took longer than its frames at the rate allow: its send window (the TX \
               stamps of its own first and last frame) is longer than `(frames − 1) / rate` by more than the \
               stretch tolerance (`max_stretch_pct`, 2 %; at least 2 ms)",
        why: "the same rule as smooth pacing's stretch for `frames=` stops: all frames go out in the end, but \
              not at the rate (the 2 ms are the grace a duration stop gives frames due before its end)",
        check: count_stop_slow,
    },
    Rule {
        name: "sent_short",
        scope: Scope::Stream,
        effect: Effect::Invalid,
        when: "a stream (not at the maximum rate) sent less than 99.9 % of its intended frames (`rate × \
               duration` for a duration stop)",
        why: "the tester did not send the load",
        check: sent_short,
    },
    Rule {
        name: "sequence_never_sent",
        scope: Scope::Trial,
        effect: Effect::Invalid,
        when: "a flow received a sequence number it never sent (more unique frames than it sent, or a highest \
               sequence number beyond its count)",
        why: "frames that were not this flow's were counted: mutated on the way or forged with this trial's \
              tag. The DUT's duplicates are counted apart and cannot cause it; the TX workers' per-flow \
              counts are the sequence numbers they wrote, so it is not a tester miscount either. `received > \
              sent` is never clamped away silently",
        check: sequence_never_sent,
    },
    Rule {
        name: "ring_drops",
        scope: Scope::Port,
        effect: Effect::Invalid,
        when: "a receiving port's own ring dropped frames (`tester_rx_drops`)",
        why: "the tester lost them, not the DUT",
        check: ring_drops,
    },
    Rule {
        name: "tx_drops_at_tester",
        scope: Scope::Port,
        effect: Effect::Invalid,
        when: "a sending port's kernel dropped frames it had taken (`ports[].tx_errors`) at the receive ring of \
               its veth's other end, a port of the same trial",
        why: "the frames never left the tester: on a pair of tester ports the ring that was full is the \
              tester's own, so the loss is the tester's, not the DUT's (a drop at a DUT's end is the DUT's \
              ingress, and stays its loss)",
        check: tx_drops_at_tester,
    },
    Rule {
        name: "other_trial",
        scope: Scope::Port,
        effect: Effect::Invalid,
        when: "frames of another trial arrived that are not late frames of an earlier trial of this process",
        why: "another tester (or a concurrent trial) loaded the DUT with traffic this trial did not send",
        check: other_trial,
    },
    Rule {
        name: "link_down",
        scope: Scope::Port,
        effect: Effect::Invalid,
        when: "a port's link went down during the trial (its carrier-down counter grew, or a read every 50 ms \
               found it down) or was down at its start or end",
        why: "frames lost on a tester link that went down are the tester's; read over netlink in the port's \
              namespace (`ports[].link_down_events`, `link_up`)",
        check: link_down,
    },
    Rule {
        name: "foreign_steering",
        scope: Scope::Port,
        effect: Effect::Invalid,
        when: "a non-AF_XDP receiving port's interface carried another netrig trial's XDP steering program",
        why: "that program takes every netrig frame before this port's socket sees it",
        check: foreign_steering,
    },
    Rule {
        name: "io_error",
        scope: Scope::Trial,
        effect: Effect::Invalid,
        when: "a TX or RX worker had an I/O error",
        why: "the tester's queue failed: what it did not send or receive is not the DUT's",
        check: io_error,
    },
    Rule {
        name: "stretched",
        scope: Scope::Trial,
        effect: Effect::Invalid,
        when: "a paced worker's sending was stretched by tester stalls beyond the tolerance \
               (`max_stretch_pct`, 2 % of its planned length; not for burst trials: see *How the tester offers \
               its load*)",
        why: "smooth pacing sends the frames a stall delayed later, giving back at most 2 % of the time as it \
              goes; beyond the tolerance the tester did not achieve the rate",
        check: stretched,
    },
    Rule {
        name: "tx_lag",
        scope: Scope::Trial,
        effect: Effect::Explains,
        when: "(only added to a trial another rule made invalid) a TX worker fell behind its schedule",
        why: "names the likely cause: the tester's CPU was busy or it was descheduled",
        check: tx_lag,
    },
];

/// The verdict of the rules on one trial.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub valid: bool,
    /// The sentences of the rules that fired, joined with "; " (None when valid).
    pub reason: Option<String>,
}

/// Apply [`RULES`] in order: consecutive rules of one scope are applied subject by subject (for
/// each stream, its rules in order).
pub fn judge(facts: &TrialFacts) -> Verdict {
    let mut reasons: Vec<String> = Vec::new();
    for group in RULES.chunk_by(|a, b| a.scope == b.scope) {
        for subject in 0..facts.subjects(group[0].scope) {
            for rule in group {
                if rule.effect == Effect::Explains && reasons.is_empty() {
                    continue;
                }
                let Some(sentence) = (rule.check)(facts, subject) else { continue };
                if rule.effect == Effect::Overrides {
                    return Verdict { valid: false, reason: Some(sentence) };
                }
                reasons.push(sentence);
            }
        }
    }
    Verdict { valid: reasons.is_empty(), reason: (!reasons.is_empty()).then(|| reasons.join("; ")) }
}

fn interrupted(f: &TrialFacts, _: usize) -> Option<String> {
    f.interrupted.then(|| "interrupted by the user".to_string())
}

fn count_stop_slow(f: &TrialFacts, i: usize) -> Option<String> {
    let s = &f.streams[i];
    if !s.count_stopped || f.interrupted || !s.paced {
        return None;
    }
    // Its frames at the rate take (n - 1) / rate from the first to the last; beyond the stretch
    // tolerance (at least the grace a duration stop has) the tester fell behind.
    let planned_s = s.tx_frames.saturating_sub(1) as f64 / s.rate_pps;
    let allowed_s = (planned_s * f.max_stretch_ratio).max(COUNT_STOP_GRACE_NS as f64 / 1e9);
    (s.tx_frames > 1 && s.own_window_s > planned_s + allowed_s).then(|| {
        format!(
            "stream {} ({}): the tester took {:.3} s to send {} frames, {:.2} % of the intended rate of {:.0} fps \
             (tolerance {:.3} s): the tester could not keep the rate",
            i,
            s.name,
            s.own_window_s,
            s.tx_frames,
            100.0 * planned_s / s.own_window_s,
            s.rate_pps,
            allowed_s
        )
    })
}

fn sent_short(f: &TrialFacts, i: usize) -> Option<String> {
    let s = &f.streams[i];
    let short = (s.tx_frames as f64) < s.intended_frames as f64 * MIN_ACHIEVED_RATIO;
    (!f.interrupted && s.intended_frames > 0 && short && !s.unbounded).then(|| {
        format!(
            "stream {} ({}): the tester sent {} of {} intended frames ({:.2} %): the tester could not keep the intended rate of {:.0} fps",
            i,
            s.name,
            s.tx_frames,
            s.intended_frames,
            100.0 * s.tx_frames as f64 / s.intended_frames as f64,
            s.rate_pps
        )
    })
}

fn sequence_never_sent(f: &TrialFacts, _: usize) -> Option<String> {
    let b = f.beyond.first()?;
    Some(format!(
        "{} flow(s) received sequence numbers they never sent (flow {}: {} frames received of {} sent, sequence \
         numbers up to {}): frames mutated on the way or forged with this trial's tag were counted; the DUT's \
         duplicates are counted apart and cannot cause this",
        f.beyond.len(),
        b.flow,
        b.received,
        b.sent,
        b.next_seq.saturating_sub(1)
    ))
}

fn ring_drops(f: &TrialFacts, p: usize) -> Option<String> {
    let r = &f.ports[p];
    (r.ring_drops > 0).then(|| {
        format!(
            "port {}: the tester's receive ring dropped {} frames (the receiver could not keep up, or was kept from \
             its CPU longer than the ring holds): the tester's loss, not the DUT's; a larger ring (the port's \
             ring_frames) holds longer stalls",
            r.name, r.ring_drops
        )
    })
}

fn tx_drops_at_tester(f: &TrialFacts, p: usize) -> Option<String> {
    let r = &f.ports[p];
    r.tx_drops_at_tester.as_ref().map(|(peer, n)| {
        format!(
            "port {}: its kernel dropped {n} frames it had taken, at the receive ring of port {peer} (its veth's \
             other end): the tester's loss, not the DUT's",
            r.name
        )
    })
}

fn other_trial(f: &TrialFacts, p: usize) -> Option<String> {
    let r = &f.ports[p];
    (r.other_trial > 0).then(|| {
        format!(
            "port {}: {} frames of another netrig trial arrived (another tester on these ports, or forged): the \
             DUT carried traffic this trial did not send",
            r.name, r.other_trial
        )
    })
}

fn link_down(f: &TrialFacts, p: usize) -> Option<String> {
    let r = &f.ports[p];
    let l = r.link.filter(|l| l.down_events > 0)?;
    let state = |up: bool| if up { "up" } else { "down" };
    Some(format!(
        "port {}: the link went down during the trial ({} carrier loss(es); {} at the start, {} at the end): frames \
         lost on it are the tester's, not the DUT's",
        r.name,
        l.down_events,
        state(l.up_at_start),
        state(l.up_at_end)
    ))
}

fn foreign_steering(f: &TrialFacts, p: usize) -> Option<String> {
    let r = &f.ports[p];
    let sentences: Vec<String> = r
        .steering_xdp
        .iter()
        .map(|id| {
            format!(
                "port {}: another netrig trial's XDP program (id {id}) steered the netrig frames on this interface \
                 to its own AF_XDP sockets: this {} port did not see them",
                r.name, r.backend
            )
        })
        .collect();
    (!sentences.is_empty()).then(|| sentences.join("; "))
}

fn io_error(f: &TrialFacts, _: usize) -> Option<String> {
    (!f.errors.is_empty()).then(|| format!("I/O error: {}", f.errors.join("; ")))
}

fn stretched(f: &TrialFacts, _: usize) -> Option<String> {
    let (stretch_ns, planned_ns) = f.over_stretched?;
    (!f.interrupted && !f.bursts).then(|| {
        format!(
            "the tester's sending was stretched by {:.2} ms ({:.2} % of the planned {:.3} s, tolerance {:.2} %): it fell behind its schedule and, pacing {}, sent its frames later rather than in a burst",
            stretch_ns as f64 / 1e6,
            100.0 * stretch_ns as f64 / planned_ns as f64,
            planned_ns as f64 / 1e9,
            100.0 * f.max_stretch_ratio,
            f.pacing.as_str()
        )
    })
}

fn tx_lag(f: &TrialFacts, _: usize) -> Option<String> {
    (f.max_lag_ns > 0).then(|| {
        format!(
            "the TX workers fell up to {:.2} ms behind their schedule (CPU busy or descheduled: pin the tester to a quiet CPU)",
            f.max_lag_ns as f64 / 1e6
        )
    })
}

/// The rules as the Markdown table of docs/methodology.md.
pub fn markdown_table() -> String {
    let mut out = String::from("| rule | the trial is invalid when | why |\n|------|------|-----|\n");
    for r in RULES {
        let scope = match r.scope {
            Scope::Trial => "",
            Scope::Stream => " (per stream)",
            Scope::Port => " (per port)",
        };
        out.push_str(&format!("| `{}`{} | {} | {} |\n", r.name, scope, r.when, r.why));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEGIN: &str = "<!-- validity-rules: begin (generated from crates/netrig-engine/src/run/validity.rs) -->\n";
    const END: &str = "<!-- validity-rules: end -->";

    fn stream(tx_frames: u64, intended_frames: u64) -> StreamFacts {
        StreamFacts {
            name: "s".into(),
            paced: true,
            rate_pps: 1000.0,
            intended_frames,
            tx_frames,
            own_window_s: tx_frames as f64 / 1000.0,
            ..Default::default()
        }
    }

    fn facts() -> TrialFacts {
        TrialFacts {
            max_stretch_ratio: 0.02,
            streams: vec![stream(1000, 1000), stream(1000, 1000)],
            ports: vec![PortFacts { name: "a".into(), ..Default::default() }, PortFacts::default()],
            ..Default::default()
        }
    }

    /// docs/methodology.md lists the table between its markers; `NETRIG_UPDATE_DOCS=1` rewrites it.
    #[test]
    fn methodology_lists_the_rules() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/methodology.md");
        let doc = std::fs::read_to_string(&path).unwrap();
        let (head, rest) = doc.split_once(BEGIN).expect("docs/methodology.md has the validity-rules markers");
        let (listed, tail) = rest.split_once(END).expect("the validity-rules end marker");
        let table = markdown_table();
        if std::env::var_os("NETRIG_UPDATE_DOCS").is_some() {
            std::fs::write(&path, format!("{head}{BEGIN}{table}{END}{tail}")).unwrap();
            return;
        }
        assert_eq!(listed, table, "docs/methodology.md differs from RULES: run with NETRIG_UPDATE_DOCS=1");
    }

    #[test]
    fn names_are_unique_and_scopes_grouped_as_documented() {
        let mut names: Vec<&str> = RULES.iter().map(|r| r.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), RULES.len());
        assert_eq!(RULES[0].effect, Effect::Overrides, "an overriding rule comes first");
    }

    #[test]
    fn a_clean_trial_is_valid() {
        assert_eq!(judge(&facts()), Verdict { valid: true, reason: None });
    }

    #[test]
    fn stream_rules_go_stream_by_stream_then_ports() {
        let mut f = facts();
        f.streams[0].tx_frames = 10;
        f.streams[1].tx_frames = 10;
        f.ports[0].ring_drops = 3;
        let reason = judge(&f).reason.unwrap();
        let s0 = reason.find("stream 0").unwrap();
        let s1 = reason.find("stream 1").unwrap();
        let ring = reason.find("port a: the tester's receive ring dropped 3 frames").unwrap();
        assert!(s0 < s1 && s1 < ring, "{reason}");
    }

    #[test]
    fn interruption_is_the_only_reason() {
        let mut f = facts();
        f.streams[0].tx_frames = 10;
        f.errors.push("boom".into());
        f.interrupted = true;
        assert_eq!(judge(&f), Verdict { valid: false, reason: Some("interrupted by the user".into()) });
    }

    #[test]
    fn lag_only_explains_an_invalid_trial() {
        let mut f = facts();
        f.max_lag_ns = 5_000_000;
        assert!(judge(&f).valid, "a lag alone does not invalidate");
        f.errors.push("boom".into());
        let v = judge(&f);
        assert_eq!(
            v.reason.unwrap(),
            "I/O error: boom; the TX workers fell up to 5.00 ms behind their schedule (CPU busy or descheduled: \
             pin the tester to a quiet CPU)"
        );
    }

    #[test]
    fn each_rule_fires_on_its_fact() {
        type Case = (&'static str, fn(&mut TrialFacts));
        let cases: [Case; 10] = [
            ("count_stop_slow", |f| {
                f.streams[0].count_stopped = true;
                f.streams[0].own_window_s = 2.0;
            }),
            ("sent_short", |f| f.streams[1].tx_frames = 998),
            ("sequence_never_sent", |f| f.beyond.push(SeqBeyond { flow: 3, received: 5, sent: 4, next_seq: 5 })),
            ("ring_drops", |f| f.ports[1].ring_drops = 1),
            ("tx_drops_at_tester", |f| f.ports[0].tx_drops_at_tester = Some(("rx".into(), 5))),
            ("other_trial", |f| f.ports[0].other_trial = 1),
            ("link_down", |f| f.ports[0].link = Some(LinkFacts { down_events: 1, up_at_start: true, up_at_end: true })),
            ("foreign_steering", |f| f.ports[0].steering_xdp.push(7)),
            ("io_error", |f| f.errors.push("x".into())),
            ("stretched", |f| f.over_stretched = Some((30_000_000, 1_000_000_000))),
        ];
        for (name, set) in cases {
            let mut f = facts();
            set(&mut f);
            let rule = RULES.iter().find(|r| r.name == name).unwrap();
            let fired: Vec<usize> = (0..f.subjects(rule.scope)).filter(|&i| (rule.check)(&f, i).is_some()).collect();
            assert_eq!(fired.len(), 1, "{name}");
            assert!(!judge(&f).valid, "{name}");
        }
        let mut f = facts();
        f.streams[0].unbounded = true;
        f.streams[0].tx_frames = 1;
        assert!(judge(&f).valid, "a stream at the maximum rate cannot fall short");
    }
}
