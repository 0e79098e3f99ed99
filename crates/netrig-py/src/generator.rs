//! The generator from Python: spec classes of its flows (header stacks with field patterns,
//! payload, duration) and captures, and `Generator`, whose ports open when it is made.
use netrig_engine::port::PortSpec;
use netrig_engine::run::generator::{self as gen, GenConfig, GenDuration, GenFlowConfig, LatencyMode};
use netrig_engine::EngineError;
use netrig_wire::pattern::{Pattern, Stepper};
use std::sync::Arc;

use netrig_wire::stack::{CompiledStack, HeaderKind, HeaderSpec as WireHeader, Payload, Site, StackSpec, HEADERS};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};

use crate::args::{instance, opt, req, Arg};
use crate::errors::{config, Result};
use crate::results::{GenFlowStats, GenPortStats, GenTxPacing, PinFailure};
use crate::specs::{FrameSizeSpec, Port, RateSpec};

/// The values one header field takes, frame after frame.
#[pyclass(frozen, module = "netrig._native")]
#[derive(Debug, Clone)]
pub struct FieldPattern(pub Pattern);

impl Arg for FieldPattern {
    fn from_arg(v: &Bound<'_, PyAny>, field: &str) -> Result<Self> {
        instance(v, field)
    }
}

#[pymethods]
impl FieldPattern {
    /// One value in every frame.
    #[staticmethod]
    fn fixed(value: &Bound<'_, PyAny>) -> Result<Self> {
        Ok(FieldPattern(Pattern::Fixed(req(value, "value")?)))
    }

    /// Derived from the stack (lengths, types, checksums), else `fallback`.
    #[staticmethod]
    fn auto(fallback: &Bound<'_, PyAny>) -> Result<Self> {
        Ok(FieldPattern(Pattern::Auto(req(fallback, "auto")?)))
    }

    /// These values in turn.
    #[staticmethod]
    fn values(values: &Bound<'_, PyAny>) -> Result<Self> {
        let v: Vec<u128> = req(values, "values")?;
        if v.is_empty() {
            return Err(config("values", "give at least one value"));
        }
        Ok(FieldPattern(Pattern::List(v)))
    }

    /// `start`, `start ± step`, … `count` values, then again.
    #[staticmethod]
    #[pyo3(signature = (start, step, count, down=false))]
    fn counter(
        start: &Bound<'_, PyAny>,
        step: &Bound<'_, PyAny>,
        count: &Bound<'_, PyAny>,
        down: bool,
    ) -> Result<Self> {
        let count: u32 = req(count, "count")?;
        if count == 0 {
            return Err(config("count", "must be at least 1"));
        }
        Ok(FieldPattern(Pattern::Counter { start: req(start, "start")?, step: req(step, "step")?, count, down }))
    }

    /// `count` seeded pseudo-random values in `[min, max]`, then again.
    #[staticmethod]
    fn random(
        min: &Bound<'_, PyAny>,
        max: &Bound<'_, PyAny>,
        count: &Bound<'_, PyAny>,
        seed: &Bound<'_, PyAny>,
    ) -> Result<Self> {
        let (min, max): (u64, u64) = (req(min, "min")?, req(max, "max")?);
        let count: u32 = req(count, "count")?;
        if min > max || count == 0 {
            return Err(config("random", format!("needs min <= max and count >= 1 (got {min}, {max}, {count})")));
        }
        Ok(FieldPattern(Pattern::Random { min, max, count, seed: req(seed, "seed")? }))
    }

    /// The values of frames 0..`n` in a field of `bits` bits (what the stack writes there).
    fn values_at(&self, bits: u32, n: u32) -> Result<Vec<u128>> {
        if !(1..=128).contains(&bits) {
            return Err(config("bits", "must be 1..128"));
        }
        let st = Stepper::new(self.0.clone(), bits);
        let mut c = st.start();
        let mut out = Vec::with_capacity(n as usize);
        for _ in 0..n {
            out.push(c.value);
            st.step(&mut c);
        }
        Ok(out)
    }

    /// Frames before the values repeat.
    #[getter]
    fn period(&self) -> u64 {
        self.0.period()
    }

    /// A checksum field's value that never verifies.
    #[staticmethod]
    fn bad_checksum() -> Self {
        FieldPattern(Pattern::BadChecksum)
    }

    fn __repr__(&self) -> String {
        format!("FieldPattern({:?})", self.0)
    }
}

/// One header of a stack: its kind (see `STACK_HEADERS`), the fields it sets, a custom header's
/// bytes.
#[pyclass(frozen, module = "netrig._native")]
#[derive(Debug, Clone)]
pub struct HeaderSpec(pub WireHeader);

impl Arg for HeaderSpec {
    fn from_arg(v: &Bound<'_, PyAny>, field: &str) -> Result<Self> {
        instance(v, field)
    }
}

#[pymethods]
impl HeaderSpec {
    #[new]
    #[pyo3(signature = (kind, fields=None, data=None))]
    fn new(
        kind: &Bound<'_, PyAny>,
        fields: Option<&Bound<'_, PyAny>>,
        data: Option<&Bound<'_, PyAny>>,
    ) -> Result<Self> {
        let name: String = req(kind, "kind")?;
        let kind = HeaderKind::parse(&name).ok_or_else(|| {
            let names: Vec<&str> = HEADERS.iter().map(|h| h.name).collect();
            config("kind", format!("{name:?} is not a header: use one of {}", names.join(", ")))
        })?;
        let fields: Vec<(String, FieldPattern)> = opt(fields, "fields", Vec::new())?;
        let bytes = match data {
            None => Vec::new(),
            Some(d) => d.downcast::<PyBytes>().map_err(|_| config("data", "must be bytes"))?.as_bytes().to_vec(),
        };
        Ok(HeaderSpec(WireHeader { kind, fields: fields.into_iter().map(|(n, p)| (n, p.0)).collect(), bytes }))
    }

    #[getter]
    fn kind(&self) -> &'static str {
        self.0.kind.name()
    }

    fn __repr__(&self) -> String {
        format!("HeaderSpec({:?})", self.0)
    }
}

/// What fills a frame after its headers: `fixed` (a byte pattern, repeated or then zeros),
/// `increment_byte`, `decrement_byte`, `increment_word`, `decrement_word`.
#[pyclass(frozen, module = "netrig._native")]
#[derive(Debug, Clone)]
pub struct PayloadSpec(pub Payload);

#[pymethods]
impl PayloadSpec {
    #[new]
    #[pyo3(signature = (kind, pattern=None, repeat=true))]
    fn new(kind: &Bound<'_, PyAny>, pattern: Option<&Bound<'_, PyAny>>, repeat: bool) -> Result<Self> {
        let kind: String = req(kind, "payload")?;
        Ok(PayloadSpec(match kind.as_str() {
            "fixed" => {
                let p = match pattern {
                    Some(b) => b
                        .downcast::<PyBytes>()
                        .map_err(|_| config("payload", "pattern must be bytes"))?
                        .as_bytes()
                        .to_vec(),
                    None => vec![0],
                };
                if p.is_empty() {
                    return Err(config("payload", "give at least one byte of pattern"));
                }
                Payload::Fixed { pattern: p, repeat }
            }
            "increment_byte" => Payload::IncrementByte,
            "decrement_byte" => Payload::DecrementByte,
            "increment_word" => Payload::IncrementWord,
            "decrement_word" => Payload::DecrementWord,
            _ => {
                return Err(config(
                    "payload",
                    format!("{kind:?}: use fixed, increment_byte, decrement_byte, increment_word or decrement_word"),
                ))
            }
        }))
    }
}

/// How long a flow sends once started.
#[pyclass(frozen, module = "netrig._native")]
#[derive(Debug, Clone)]
pub struct GenDurationSpec(pub GenDuration);

#[pymethods]
impl GenDurationSpec {
    #[staticmethod]
    fn continuous() -> Self {
        GenDurationSpec(GenDuration::Continuous)
    }

    #[staticmethod]
    fn frames(count: &Bound<'_, PyAny>) -> Result<Self> {
        Ok(GenDurationSpec(GenDuration::Frames(req(count, "duration")?)))
    }

    #[staticmethod]
    fn seconds(seconds: &Bound<'_, PyAny>) -> Result<Self> {
        Ok(GenDurationSpec(GenDuration::Seconds(req(seconds, "duration")?)))
    }

    /// `count` bursts (0: until stopped) of `packets` frames, `gap_s` between them.
    #[staticmethod]
    fn bursts(packets: &Bound<'_, PyAny>, count: &Bound<'_, PyAny>, gap_s: &Bound<'_, PyAny>) -> Result<Self> {
        let gap_ns =
            netrig_engine::traffic::stream::seconds_to_ns("duration", req(gap_s, "duration")?, true, 604_800.0)?;
        Ok(GenDurationSpec(GenDuration::Bursts {
            packets: req(packets, "duration")?,
            count: req(count, "duration")?,
            gap_ns,
        }))
    }
}

/// One generator flow, validated as far as it can be without its ports (fields are the flow's:
/// `size`, `packet[1].ipv4.src`, `rate`, `duration`).
#[pyclass(frozen, module = "netrig._native")]
#[derive(Debug, Clone)]
pub struct GenFlowSpec(pub GenFlowConfig, pub Arc<CompiledStack>);

#[pymethods]
impl GenFlowSpec {
    #[new]
    #[pyo3(signature = (name, tx_port, rx_ports, headers, frame_size, rate, duration, *, payload=None, delay_s=0.0, gap_bytes=12, latency="store_forward", tag_period=0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        name: &Bound<'_, PyAny>,
        tx_port: &Bound<'_, PyAny>,
        rx_ports: &Bound<'_, PyAny>,
        headers: &Bound<'_, PyAny>,
        frame_size: &Bound<'_, PyAny>,
        rate: &Bound<'_, PyAny>,
        duration: &Bound<'_, PyAny>,
        payload: Option<&Bound<'_, PyAny>>,
        delay_s: f64,
        gap_bytes: u32,
        latency: &str,
        tag_period: u32,
    ) -> Result<Self> {
        let headers: Vec<HeaderSpec> = req(headers, "packet")?;
        let payload = match payload {
            Some(p) => instance::<PayloadSpec>(p, "payload")?.0,
            None => Payload::zeros(),
        };
        let latency = match latency {
            "store_forward" => LatencyMode::StoreForward,
            "cut_through" => LatencyMode::CutThrough,
            _ => return Err(config("latency", "use store_forward or cut_through")),
        };
        let f = GenFlowConfig {
            name: req(name, "name")?,
            tx_port: req(tx_port, "tx_port")?,
            rx_ports: req(rx_ports, "rx_ports")?,
            stack: StackSpec {
                headers: headers.into_iter().map(|h| h.0).collect(),
                payload,
                site: Site::End,
                keys: Default::default(),
            },
            frame_size: instance::<FrameSizeSpec>(frame_size, "size")?.0,
            rate: instance::<RateSpec>(rate, "rate")?.0,
            duration: instance::<GenDurationSpec>(duration, "duration")?.0,
            delay_ns: netrig_engine::traffic::stream::seconds_to_ns("delay", delay_s, true, 604_800.0)?,
            gap_bytes,
            latency,
            tag_period,
        };
        let stack = f.validate()?;
        Ok(GenFlowSpec(f, stack))
    }

    #[getter]
    fn name(&self) -> &str {
        &self.0.name
    }

    /// The flow's frame sizes (with FCS) without room for the signature after its headers: sent
    /// untracked, counted per port and never per flow.
    #[getter]
    fn untracked_sizes(&self) -> Vec<usize> {
        let sizes = self.0.frame_size.sizes();
        sizes.iter().enumerate().filter(|&(i, _)| !self.1.signed(i)).map(|(_, &s)| s).collect()
    }
}

impl Arg for GenFlowSpec {
    fn from_arg(v: &Bound<'_, PyAny>, field: &str) -> Result<Self> {
        instance(v, field)
    }
}

/// A capture on one port.
#[pyclass(frozen, module = "netrig._native")]
#[derive(Debug, Clone)]
pub struct CaptureSpec(pub gen::CaptureConfig);

impl Arg for CaptureSpec {
    fn from_arg(v: &Bound<'_, PyAny>, field: &str) -> Result<Self> {
        instance(v, field)
    }
}

#[pymethods]
impl CaptureSpec {
    #[new]
    /// `filter`: `(byte offset, value, care bits, negate)` terms a frame must all match to be kept.
    #[pyo3(signature = (port, snaplen=65535, overwrite=true, buffer_bytes=67_108_864, filter=Vec::new()))]
    fn new(
        port: usize,
        snaplen: usize,
        overwrite: bool,
        buffer_bytes: usize,
        filter: Vec<(usize, Vec<u8>, Vec<u8>, bool)>,
    ) -> Result<Self> {
        if snaplen == 0 {
            return Err(config("packet_size", "must be at least 1 byte"));
        }
        let mut terms = Vec::with_capacity(filter.len());
        for (k, (at, value, care, negate)) in filter.into_iter().enumerate() {
            if value.is_empty() || value.len() != care.len() {
                return Err(config(format!("filter[{k}]"), "give a value and care bits of one length"));
            }
            terms.push(gen::CaptureTerm { at, value, care, negate });
        }
        Ok(CaptureSpec(gen::CaptureConfig { port, snaplen, overwrite, buffer_bytes, filter: terms }))
    }
}

/// Flows on ports kept open: start, pause, resume, stop by index; counters at any time;
/// captures. Made with its ports opened (each passes the transmit guard) and every flow compiled;
/// nothing is sent until a flow starts. `close()` (or the end of the object)
/// stops everything and closes the ports. `reuse`: the generator this one replaces; its ports
/// stay open for this one where they are what this one would open (see `reuse_ports`), and it
/// is closed.
#[pyclass(frozen, module = "netrig._native")]
pub struct Generator(gen::Generator, Vec<PortSpec>);

#[pymethods]
impl Generator {
    #[new]
    #[pyo3(signature = (ports, flows, captures=None, line_rates=None, tx_cpus=None, rx_cpus=None, reuse=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        ports: &Bound<'_, PyAny>,
        flows: &Bound<'_, PyAny>,
        captures: Option<&Bound<'_, PyAny>>,
        line_rates: Option<&Bound<'_, PyAny>>,
        tx_cpus: Option<&Bound<'_, PyAny>>,
        rx_cpus: Option<&Bound<'_, PyAny>>,
        reuse: Option<&Bound<'_, Generator>>,
    ) -> Result<Self> {
        let ports: Vec<Port> = crate::specs::items(ports, "ports")?
            .iter()
            .enumerate()
            .map(|(i, p)| instance::<Port>(p, &format!("ports[{i}]")))
            .collect::<Result<_>>()?;
        let flows: Vec<GenFlowSpec> = req(flows, "flows")?;
        let captures: Vec<CaptureSpec> = opt(captures, "captures", Vec::new())?;
        let rates: Vec<Option<f64>> = opt(line_rates, "line_rates", Vec::new())?;
        let stacks: Vec<Option<Arc<CompiledStack>>> = flows.iter().map(|f| Some(f.1.clone())).collect();
        let cfg = GenConfig {
            flows: flows.into_iter().map(|f| f.0).collect(),
            captures: captures.into_iter().map(|c| c.0).collect(),
            line_rates: rates.into_iter().map(|r| r.map(|b| b.round() as u64)).collect(),
            tx_cpus: opt(tx_cpus, "tx_cpus", Vec::new())?,
            rx_cpus: opt(rx_cpus, "rx_cpus", Vec::new())?,
        };
        let specs: Vec<PortSpec> = ports.into_iter().enumerate().map(|(i, p)| port_spec(i, p.0, &cfg)).collect();
        let old = reuse.map(|r| r.get());
        let g = py.allow_threads(|| -> std::result::Result<gen::Generator, EngineError> {
            let open = match old.and_then(|o| reuse_ports(o, &specs)) {
                Some(open) => open,
                None => gen::OpenPorts::new(crate::open_ports(&specs)?),
            };
            gen::Generator::open_on(open, cfg, &stacks)
        })?;
        Ok(Generator(g, specs))
    }

    /// Start these flows (those stopped or done), together: returns the ones started. `tags`
    /// (one per flow, below 2^23): the tags to send under instead of fresh ones.
    #[pyo3(signature = (flows, tags=None))]
    fn start(&self, flows: &Bound<'_, PyAny>, tags: Option<&Bound<'_, PyAny>>) -> Result<Vec<usize>> {
        let flows = req::<Vec<usize>>(flows, "flows")?;
        let tags: Option<Vec<u32>> = tags.map(|t| req(t, "tags")).transpose()?;
        Ok(self.0.start_tagged(&flows, tags.as_deref())?)
    }

    /// Count these flows' frames sent under `tags` (one per flow) from now on, sending nothing:
    /// the receive side of flows another agent sends.
    fn expect(&self, flows: &Bound<'_, PyAny>, tags: &Bound<'_, PyAny>) -> Result<()> {
        Ok(self.0.expect(&req::<Vec<usize>>(flows, "flows")?, &req::<Vec<u32>>(tags, "tags")?)?)
    }

    /// Change these flows' rate and frame sizes in place (`specs[k]` for `flows[k]`, as the flow
    /// was configured but for its rate and size): their counters, sequence and tag go on.
    fn update(&self, flows: &Bound<'_, PyAny>, specs: &Bound<'_, PyAny>) -> Result<()> {
        let flows = req::<Vec<usize>>(flows, "flows")?;
        let specs: Vec<GenFlowSpec> = req(specs, "specs")?;
        if flows.len() != specs.len() {
            return Err(config("specs", format!("{} specs for {} flows: one per flow", specs.len(), flows.len())));
        }
        Ok(self.0.update(flows.into_iter().zip(specs).map(|(f, s)| (f, s.0, Some(s.1))).collect())?)
    }

    fn stop(&self, flows: &Bound<'_, PyAny>) -> Result<()> {
        Ok(self.0.stop(&req::<Vec<usize>>(flows, "flows")?)?)
    }

    fn pause(&self, flows: &Bound<'_, PyAny>) -> Result<()> {
        Ok(self.0.pause(&req::<Vec<usize>>(flows, "flows")?)?)
    }

    fn resume(&self, flows: &Bound<'_, PyAny>) -> Result<()> {
        Ok(self.0.resume(&req::<Vec<usize>>(flows, "flows")?)?)
    }

    /// The counts now (each flow's current start's) of flows `which` (None: every flow), in order.
    #[pyo3(signature = (which=None))]
    fn flow_stats(&self, py: Python<'_>, which: Option<&Bound<'_, PyAny>>) -> Result<Vec<GenFlowStats>> {
        let all = py.allow_threads(|| self.0.flow_stats());
        let Some(which) = which else { return Ok(all.iter().map(GenFlowStats::from).collect()) };
        let which: Vec<usize> = req(which, "which")?;
        which
            .iter()
            .enumerate()
            .map(|(k, &f)| {
                all.get(f).map(GenFlowStats::from).ok_or_else(|| config(format!("which[{k}]"), format!("no flow {f}")))
            })
            .collect()
    }

    /// Flow `flow`'s frames per frame index modulo its tag period, `(sent, received)` (its current
    /// start's); None for a flow without tags.
    fn flow_tags(&self, py: Python<'_>, flow: usize) -> Option<(Vec<u64>, Vec<u64>)> {
        py.allow_threads(|| self.0.flow_tags(flow))
    }

    /// Every flow's latency and |IPDV| distributions, ns, over its current start's unique frames:
    /// each `(value, count)` pairs, lowest first, each value the highest of its bucket (3 and 2
    /// significant digits: their quantiles are a histogram's, and the pairs of two receivers add);
    /// None for a flow beyond the first 256, which has no histograms.
    #[allow(clippy::type_complexity)]
    fn flow_latency(&self, py: Python<'_>) -> Vec<Option<(Vec<(u64, u64)>, Vec<(u64, u64)>)>> {
        py.allow_threads(|| self.0.flow_latency()).into_iter().map(|b| b.map(|b| (b.latency, b.ipdv))).collect()
    }

    /// Every flow's state: `stopped`, `running`, `paused` or `done`.
    fn flow_states(&self) -> Vec<&'static str> {
        self.0.flow_states().into_iter().map(|s| s.as_str()).collect()
    }

    /// Every port's counts since the generator was made.
    fn port_stats(&self) -> Vec<GenPortStats> {
        self.0.port_stats().iter().map(GenPortStats::from).collect()
    }

    /// Per port, how its TX workers kept their schedule since its flows last started from idle
    /// (None: the port sends nothing).
    fn tx_pacing(&self) -> Vec<Option<GenTxPacing>> {
        self.0.tx_pacing().iter().map(|p| p.as_ref().map(GenTxPacing::from)).collect()
    }

    /// Start or stop the capture of `port` (starting clears the earlier one).
    fn set_capture(&self, py: Python<'_>, port: usize, on: bool) -> Result<()> {
        Ok(py.allow_threads(|| self.0.set_capture(port, on))?)
    }

    /// The frames `port` captured (stopped), FCS included, as pcapng or classic pcap bytes.
    fn capture_file<'py>(
        &self,
        py: Python<'py>,
        port: usize,
        pcapng: bool,
        if_name: &str,
    ) -> Result<Bound<'py, PyBytes>> {
        let data = py.allow_threads(|| self.0.capture_file(port, pcapng, if_name))?;
        Ok(PyBytes::new(py, &data))
    }

    /// Frames the capture of `port` could not keep.
    fn capture_dropped(&self, port: usize) -> u64 {
        self.0.capture_dropped(port)
    }

    /// Per port: (name, backend, notes, line rate in bit/s or None).
    fn ports(&self) -> Vec<(String, String, String, Option<u64>)> {
        self.0
            .port_caps()
            .iter()
            .zip(self.0.line_rates())
            .map(|(c, r)| (c.name.clone(), c.backend.as_str().to_string(), c.notes.clone(), *r))
            .collect()
    }

    /// Add to an engine-clock time (ns) for the realtime clock (ns since the Unix epoch).
    #[getter]
    fn realtime_offset_ns(&self) -> i128 {
        self.0.realtime_offset_ns()
    }

    /// Errors of the workers (a queue that failed), oldest first.
    fn errors(&self) -> Vec<String> {
        self.0.errors()
    }

    /// Workers that do not run on their CPU: the kernel refused the pin (each worker pins itself
    /// when it starts, so a failure shows from then on). Empty when every worker was pinned.
    fn pin_failures(&self) -> Vec<PinFailure> {
        self.0.pin_failures().iter().map(PinFailure::from).collect()
    }

    /// Stop every flow and worker, close the ports. Idempotent.
    fn close(&self, py: Python<'_>) {
        py.allow_threads(|| self.0.close())
    }
}

/// How port `i` opens for `cfg`: as a port that may transmit (any flow may start on it: the
/// transmit guard checks every port, with or without flows), receiving every frame (signatures
/// sit at the frames' ends, where the AF_XDP steering program does not look), carrying the largest
/// frame of its flows.
/// `old`'s ports, open with their queues, when they are what `specs` would open
/// ([`crate::ports_fit`]). Either way `old` is closed.
fn reuse_ports(old: &Generator, specs: &[PortSpec]) -> Option<gen::OpenPorts> {
    if crate::ports_fit(&old.1, old.0.port_caps(), specs) {
        old.0.release()
    } else {
        old.0.close();
        None
    }
}

fn port_spec(i: usize, p: PortSpec, cfg: &GenConfig) -> PortSpec {
    let mine = cfg.flows.iter().filter(|f| f.tx_port == i || f.rx_ports.contains(&i));
    let max_frame_len = mine.map(|f| f.largest_frame_len()).max().unwrap_or(0);
    PortSpec { receive: true, transmit: true, rx_all: true, max_frame_len, ..p }
}

/// `STACK_HEADERS`: per header kind, its length in bytes and its fields (name, bit offset, bits).
pub fn stack_headers(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    for h in HEADERS {
        let fields: Vec<Bound<'_, PyTuple>> = h
            .fields
            .iter()
            .map(|f| {
                PyTuple::new(
                    py,
                    [
                        f.name.into_pyobject(py)?.into_any(),
                        f.bit.into_pyobject(py)?.into_any(),
                        f.bits.into_pyobject(py)?.into_any(),
                    ],
                )
            })
            .collect::<PyResult<_>>()?;
        d.set_item(h.name, (h.len, PyTuple::new(py, fields)?))?;
    }
    Ok(d)
}
