//! OTG field patterns to the engine's ([`PatternForm`]): the step of `netrig.otg.headers` that
//! runs for every field of every flow (32 768 times for a 4096-flow config with eight patterned
//! fields each), in one pass over the parsed JSON. `headers._info` makes one form per OTG pattern
//! class from the model's tables (value format, bounds, defaults, properties: never restated
//! here). What is not plain — the choices that warn or refuse (`auto`, a checksum's `generated`,
//! metric tags) and an object the model would not accept — is left to Python (`convert` gives
//! `None`); a plain choice with a bad value is a `ValueError`, which Python turns into the model's
//! error for the field's path.
use std::hash::{BuildHasher, Hasher};
use std::net::{Ipv4Addr, Ipv6Addr};

use netrig_wire::pattern::Pattern;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt, PyString};

use crate::generator::{FieldPattern, HeaderSpec};

/// How a pattern class writes its values (the model's `format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Int,
    Mac,
    Ipv4,
    Ipv6,
}

/// Bounds of counts and seeds (uint32).
const COUNT_MAX: u128 = u32::MAX as u128;

/// How the values of one OTG pattern class convert (see the module doc).
#[pyclass(frozen, module = "netrig._native")]
#[derive(Debug)]
pub struct PatternForm {
    format: Format,
    /// Bounds of an integer value (addresses are bounded by their format).
    lo: u128,
    hi: u128,
    /// Defaults: `value`, `values`; the counter's start, step, count; random's min, max, count, seed.
    value: u128,
    values: Vec<u128>,
    counter: (u128, u128, u128),
    random: (u128, u128, u128, u128),
    /// The properties an `increment`/`decrement`/`random` object may have.
    sub_keys: Vec<String>,
    /// The class's properties, its choice's members, the choice when none is given.
    keys: Vec<String>,
    members: Vec<String>,
    default_choice: String,
}

/// The choices converted here.
const PLAIN: [&str; 5] = ["value", "values", "increment", "decrement", "random"];

fn bad(message: String) -> PyErr {
    PyValueError::new_err(message)
}

fn int_in(v: &Bound<'_, PyAny>, lo: u128, hi: u128) -> PyResult<u128> {
    let n = if v.is_exact_instance_of::<PyInt>() { v.extract::<u128>().ok() } else { None };
    n.filter(|n| (lo..=hi).contains(n)).ok_or_else(|| bad(format!("{v} is not an integer in {lo}..{hi}")))
}

impl PatternForm {
    /// One value in the class's format.
    fn conv(&self, v: &Bound<'_, PyAny>) -> PyResult<u128> {
        if self.format == Format::Int {
            return int_in(v, self.lo, self.hi);
        }
        let s: String = v.extract().map_err(|_| bad(format!("{v} is not a string")))?;
        let n = match self.format {
            Format::Mac => u128::from_str_radix(&s.replace(':', ""), 16).ok().filter(|&n| n >> 48 == 0),
            Format::Ipv4 => s.parse::<Ipv4Addr>().ok().map(|a| u128::from(u32::from(a))),
            _ => s.parse::<Ipv6Addr>().ok().map(u128::from),
        };
        n.ok_or_else(|| bad(format!("{s:?} is not a {:?} address", self.format).to_lowercase()))
    }

    /// A value as the class writes it.
    fn show(&self, n: u128) -> String {
        match self.format {
            Format::Int => n.to_string(),
            Format::Mac => (0..6).rev().map(|i| format!("{:02x}", (n >> (8 * i)) & 0xff)).collect::<Vec<_>>().join(":"),
            Format::Ipv4 => Ipv4Addr::from(n as u32).to_string(),
            Format::Ipv6 => Ipv6Addr::from(n).to_string(),
        }
    }

    /// `d[key]` in the class's format, else the default.
    fn field(&self, d: &Bound<'_, PyDict>, key: &str, default: u128) -> PyResult<u128> {
        d.get_item(key)?.map_or(Ok(default), |v| self.conv(&v))
    }

    /// `d[key]` as a count or seed, else the default.
    fn count(d: &Bound<'_, PyDict>, key: &str, default: u128) -> PyResult<u128> {
        d.get_item(key)?.map_or(Ok(default), |v| int_in(&v, 0, COUNT_MAX))
    }

    /// The `increment`, `decrement` or `random` object of `d` (none: every default).
    fn sub<'py>(&self, d: &Bound<'py, PyDict>, choice: &str) -> PyResult<Bound<'py, PyDict>> {
        let py = d.py();
        let sub = match d.get_item(choice)? {
            Some(v) if v.is_truthy()? => {
                v.downcast_into::<PyDict>().map_err(|_| bad(format!("{choice} is not an object")))?
            }
            _ => PyDict::new(py),
        };
        for k in sub.keys() {
            let k: String = k.extract()?;
            if !self.sub_keys.contains(&k) {
                return Err(bad(format!("{choice} has no property {k:?}")));
            }
        }
        Ok(sub)
    }

    fn counter(&self, d: &Bound<'_, PyDict>, choice: &str) -> PyResult<Pattern> {
        let sub = self.sub(d, choice)?;
        let (start, step) = (self.field(&sub, "start", self.counter.0)?, self.field(&sub, "step", self.counter.1)?);
        let count = Self::count(&sub, "count", self.counter.2)?;
        if count == 0 {
            return Err(bad("count must be at least 1".into()));
        }
        Ok(Pattern::Counter { start, step, count: count as u32, down: choice == "decrement" })
    }

    /// The choice `d` makes, when it is plain and `d` is what the model accepts; else `None`.
    fn plain_choice(&self, d: &Bound<'_, PyDict>) -> PyResult<Option<String>> {
        let (mut given, mut member, mut members) = (None, None, 0);
        for (k, v) in d.iter() {
            let Ok(k) = k.downcast_into::<PyString>() else { return Ok(None) };
            let k = k.to_str()?;
            if k == "choice" {
                if !v.is_none() {
                    given = Some(
                        v.extract::<String>()
                            .ok()
                            .filter(|c| !c.is_empty())
                            .ok_or_else(|| bad(format!("choice {v}")))?,
                    );
                }
            } else if k == "metric_tags" && v.is_truthy()? || !self.keys.iter().any(|x| x == k) {
                return Ok(None);
            } else if self.members.iter().any(|x| x == k) {
                (member, members) = (Some(k.to_string()), members + 1);
            }
        }
        let choice = match (given, member) {
            _ if members > 1 => return Ok(None),
            (Some(g), Some(m)) if g != m => return Ok(None),
            (Some(c), _) | (None, Some(c)) => c,
            (None, None) => self.default_choice.clone(),
        };
        Ok(PLAIN.contains(&choice.as_str()).then_some(choice))
    }

    fn random(&self, d: &Bound<'_, PyDict>) -> PyResult<Pattern> {
        let sub = self.sub(d, "random")?;
        let (min, max) = (self.field(&sub, "min", self.random.0)?, self.field(&sub, "max", self.random.1)?);
        if min > max {
            return Err(bad(format!("min {} is above max {}: swap them", self.show(min), self.show(max))));
        }
        let wide =
            |n: u128| u64::try_from(n).map_err(|_| bad(format!("random values above 2^64 ({n}): narrow the range")));
        let (min, max) = (wide(min)?, wide(max)?);
        let count = Self::count(&sub, "count", self.random.2)?;
        if count == 0 {
            return Err(bad("count must be at least 1".into()));
        }
        let seed = match Self::count(&sub, "seed", self.random.3)? {
            // OTG's seed 0 asks for values that differ from run to run.
            0 => std::collections::hash_map::RandomState::new().build_hasher().finish() & 0xFFFF_FFFF,
            s => s as u64,
        };
        Ok(Pattern::Random { min, max, count: count as u32, seed })
    }
}

#[pymethods]
impl PatternForm {
    /// `format`: `int`, `mac`, `ipv4` or `ipv6`; the defaults converted already.
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        format: &str,
        lo: u128,
        hi: u128,
        value: u128,
        values: Vec<u128>,
        counter: (u128, u128, u128),
        random: (u128, u128, u128, u128),
        sub_keys: Vec<String>,
        keys: Vec<String>,
        members: Vec<String>,
        default_choice: String,
    ) -> PyResult<Self> {
        let format = match format {
            "int" => Format::Int,
            "mac" => Format::Mac,
            "ipv4" => Format::Ipv4,
            "ipv6" => Format::Ipv6,
            f => return Err(bad(format!("format {f:?}: int, mac, ipv4 or ipv6"))),
        };
        Ok(PatternForm { format, lo, hi, value, values, counter, random, sub_keys, keys, members, default_choice })
    }

    /// The OTG pattern object `d` as the engine's pattern; `None` when it is not plain (see the
    /// module doc).
    fn convert(&self, d: &Bound<'_, PyAny>) -> PyResult<Option<FieldPattern>> {
        let Ok(d) = d.downcast::<PyDict>() else { return Ok(None) };
        let Some(choice) = self.plain_choice(d)? else { return Ok(None) };
        let p = match choice.as_str() {
            "value" => Pattern::Fixed(self.field(d, "value", self.value)?),
            "values" => {
                let v = match d.get_item("values")? {
                    Some(l) => l.try_iter()?.map(|x| self.conv(&x?)).collect::<PyResult<Vec<u128>>>()?,
                    None => self.values.clone(),
                };
                if v.is_empty() {
                    return Err(bad("give at least one value".into()));
                }
                Pattern::List(v)
            }
            "increment" | "decrement" => self.counter(d, &choice)?,
            "random" => self.random(d)?,
            c => return Err(bad(format!("choice {c:?}"))),
        };
        Ok(Some(FieldPattern(p)))
    }
}

/// What one property of an OTG header body (at a path inside it) maps to.
#[derive(Debug)]
enum Prop {
    /// The header's own `choice`: nothing to map.
    Skip,
    /// A field pattern: its class's form and the engine's field name.
    Pattern(Py<PatternForm>, String),
    /// A nested object walked into (IPv4's `priority`, ICMP's `echo`).
    Nest,
}

/// How one OTG header kind's body converts to the engine's header: a walk over its properties,
/// each field pattern through its [`PatternForm`], the model's non-zero defaults added for the
/// fields left unset. Whatever is not plain — a refused property, a pattern the form leaves to
/// Python, a bad value — gives `None`, and Python maps the header (naming the path of an error).
#[pyclass(frozen, module = "netrig._native")]
#[derive(Debug)]
pub struct HeaderForm {
    kind: netrig_wire::stack::HeaderKind,
    /// By the property's path inside the body, joined with `.`.
    props: std::collections::HashMap<String, Prop>,
    defaults: Vec<(String, Pattern)>,
    /// Fields that share bits: setting one leaves the defaults of all of them out.
    overlaps: Vec<String>,
}

impl HeaderForm {
    fn walk(&self, obj: &Bound<'_, PyDict>, at: &str, out: &mut Vec<(String, Pattern)>) -> PyResult<bool> {
        for (k, v) in obj.iter() {
            let Ok(k) = k.downcast_into::<PyString>() else { return Ok(false) };
            let path = if at.is_empty() { k.to_str()?.to_string() } else { format!("{at}.{}", k.to_str()?) };
            match self.props.get(&path) {
                Some(Prop::Skip) => {}
                Some(Prop::Pattern(form, name)) => match form.get().convert(&v) {
                    Ok(Some(p)) => out.push((name.clone(), p.0)),
                    _ => return Ok(false),
                },
                Some(Prop::Nest) => match v.downcast::<PyDict>() {
                    Ok(d) if self.walk(d, &path, out)? => {}
                    _ => return Ok(false),
                },
                None => return Ok(false),
            }
        }
        Ok(true)
    }
}

#[pymethods]
impl HeaderForm {
    /// `props`: (path inside the body, `skip` | `pattern` | `nest`, the pattern's form, the
    /// engine's field name); `defaults`: the engine's fields whose model default is not 0.
    #[new]
    fn new(
        kind: &str,
        props: Vec<(String, String, Option<Py<PatternForm>>, String)>,
        defaults: Vec<(String, FieldPattern)>,
        overlaps: Vec<String>,
    ) -> PyResult<Self> {
        let kind =
            netrig_wire::stack::HeaderKind::parse(kind).ok_or_else(|| bad(format!("{kind:?} is not a header")))?;
        let mut map = std::collections::HashMap::new();
        for (path, what, form, name) in props {
            let prop = match (what.as_str(), form) {
                ("skip", _) => Prop::Skip,
                ("nest", _) => Prop::Nest,
                ("pattern", Some(f)) => Prop::Pattern(f, name),
                _ => continue, // refused, or a checksum's: Python's
            };
            map.insert(path, prop);
        }
        Ok(HeaderForm { kind, props: map, defaults: defaults.into_iter().map(|(n, p)| (n, p.0)).collect(), overlaps })
    }

    /// The header body `body` as the engine's header; `None` when it is not plain (see the type).
    fn convert(&self, body: &Bound<'_, PyAny>) -> PyResult<Option<HeaderSpec>> {
        let Ok(body) = body.downcast::<PyDict>() else { return Ok(None) };
        let mut fields = Vec::with_capacity(body.len() + self.defaults.len());
        if !self.walk(body, "", &mut fields)? {
            return Ok(None);
        }
        let overlapped = fields.iter().any(|(n, _)| self.overlaps.contains(n));
        for (n, p) in &self.defaults {
            let taken = fields.iter().any(|(f, _)| f == n) || (overlapped && self.overlaps.contains(n));
            if !taken {
                fields.push((n.clone(), p.clone()));
            }
        }
        Ok(Some(HeaderSpec(netrig_wire::stack::HeaderSpec { kind: self.kind, fields, bytes: Vec::new() })))
    }
}
