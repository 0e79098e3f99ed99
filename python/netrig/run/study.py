"""Studies: one file, a matrix of DUT variants × methods, run as one resumable run and reported as
one comparison against a baseline (the service-cost and host-tuning lab reports).

A study file (TOML, YAML or JSON)::

    [study]
    name = "service-cost"            # the default output directory: results/<name>
    title = "What each router service costs"
    baseline = "routing"             # a variant's name; default: the first variant

    [base]                           # a netrig config (docs/methodology.md) every variant starts from
    frames = { sizes = [64, 1518] }
    methods = [ { tcp = { streams = 5 } }, { rfc2544_throughput = {} } ]

    [[variant]]
    name = "routing"
    testbed = { name = "router" }

    [[variant]]
    name = "acl-100"
    description = "100 stateless rules"
    testbed = { name = "acl", options = { rules = 100 } }

Each variant's config is ``base`` with the variant's keys merged in (tables merged key by key, anything
else replaced), and ``name`` set to the variant's name; every one is validated before anything runs.

A scalability sweep (methodology §6) is a study whose variants differ in one config key, made from a
``[sweep]`` table instead of ``[[variant]]`` tables; the comparison then draws every headline number
against the swept value, with the scale-up ratio of each step::

    [sweep]
    over = "flows"                   # a dimension (SWEEP_DIMENSIONS) or any config key path
    values = [1, 16, 256, 4096, 65536, 1048576]

Variants are named ``<label>-<value>`` (``flows-256``); the first value is the baseline.

Data flow::

    study file ── Study (variants validated) ── OUT/study.json (the study as run)
        ── per variant, baseline first: OUT/<variant>/ — a netrig run (Runner): skipped when its
           result.json is complete, resumed when it holds trials, else started
        ── OUT/<variant>/report.html ── OUT/compare.html: every finished variant against the baseline

Running the same study into the same directory continues it; a different study there is refused.
A variant that fails (its test bed cannot be built, say) is recorded with its error and the study
goes on; one the machine cannot run (a kernel feature or a tool it lacks: ``CapabilityError``) is
skipped with the reason; Ctrl-C stops the study, keeps what finished, and the next run continues it.
"""
from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netrig.errors import INTERRUPTS, CapabilityError, ConfigError, InterruptedTrial, NetrigError, ResultError
from netrig.results import RESULT_FILE, dumps, utc_now, write_text_atomic
from netrig.run.config import TestConfig, config_from_dict, read_document

STUDY_FILE = "study.json"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_STUDY_KEYS = ("name", "title", "description", "baseline")
_KEY_RE = re.compile(r"^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*$")
_SWEEP_KEYS = ("over", "values", "label")
#: Most points of one sweep.
MAX_SWEEP_POINTS = 32

#: The stateful method's connections: swept in every stateful method of the base config.
CONNECTIONS_KEY = "methods.stateful.connections"

#: The routing test beds' host routes: swept with the traffic's destinations spread over them.
ROUTES_KEY = "testbed.options.routes"
#: The router test bed's tester hosts on the DUT's receiving link: the same, over its neighbours.
HOSTS_KEY = "testbed.options.hosts"

#: Named sweep dimensions: (config key path, what it means). Any other dotted config key path
#: (``testbed.options.cap``) can be swept too.
SWEEP_DIMENSIONS: dict[str, tuple[str, str]] = {
    "flows": ("ports.flows", "flows per stream, each counted apart (the source port varies; past 65535: 1024 "
                             "source × N destination ports)"),
    "queues": ("ports.queues", "queues and TX/RX workers per tester port"),
    "rules": ("testbed.options.rules", "stateless ACL rules on the DUT (the acl test bed)"),
    "dut-cpus": ("testbed.options.dut_cpus", "CPUs the DUT's forwarding may use (a count N: CPUs 0..N-1)"),
    "frame-size": ("frames.sizes", "frame size, bytes (one size per point)"),
    "routes": (ROUTES_KEY, "host routes in the DUT's FIB (router, firewall, nat … test beds), the traffic's "
                           "destinations spread over them in pseudorandom order (RFC 4814)"),
    "hosts": (HOSTS_KEY, "tester hosts on the DUT's receiving link, each an ARP neighbour the DUT resolved (router "
                         "test bed), the traffic's destinations spread over them in pseudorandom order (RFC 4814)"),
    "connections": (CONNECTIONS_KEY, "connections established through the DUT (RFC 9693): the stateful "
                                     "method's connections, its throughput measured with that state"),
}


@dataclass(frozen=True)
class Sweep:
    """One dimension of a scalability sweep: the config ``key`` set to each of ``values``."""

    key: str
    label: str
    values: tuple[Any, ...]

    def to_dict(self) -> dict:
        return {"key": self.key, "label": self.label, "values": list(self.values)}


def sweep_from_dict(d: Any) -> Sweep:
    """The ``[sweep]`` table; errors name ``sweep.<key>``."""
    if not isinstance(d, dict):
        raise ConfigError("sweep", "must be a table: over = DIMENSION or KEY.PATH, values = [...]")
    for k in d:
        if k not in _SWEEP_KEYS:
            raise ConfigError(f"sweep.{k}", f"unknown key; allowed: {', '.join(_SWEEP_KEYS)}")
    over = d.get("over")
    if not isinstance(over, str) or not (over in SWEEP_DIMENSIONS or _KEY_RE.match(over)):
        raise ConfigError("sweep.over", f"{over!r}: give a dimension ({', '.join(SWEEP_DIMENSIONS)}) or a config "
                                        "key path such as testbed.options.cap")
    key = SWEEP_DIMENSIONS[over][0] if over in SWEEP_DIMENSIONS else over
    if key.split(".")[0] in ("name", "methods") and key != CONNECTIONS_KEY:
        raise ConfigError("sweep.over", f"{over!r}: sweep a config value, not the run's {key.split('.')[0]}")
    values = d.get("values")
    if not isinstance(values, list) or len(values) < 2:
        raise ConfigError("sweep.values", "give a list of at least two values to sweep over")
    if len(values) > MAX_SWEEP_POINTS:
        raise ConfigError("sweep.values", f"{len(values)} values: at most {MAX_SWEEP_POINTS} points in one sweep "
                                          "(split it into several sweeps)")
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            raise ConfigError(f"sweep.values[{i}]", f"{v!r}: each value must be a number or a string")
    if len({str(v) for v in values}) != len(values):
        raise ConfigError("sweep.values", "a value is given twice: give each point once")
    label = d.get("label", over.rsplit(".", 1)[-1].replace("_", "-"))
    if not isinstance(label, str) or not _NAME_RE.match(label):
        raise ConfigError("sweep.label", f"{label!r}: letters, digits, '_', '-' and '.' (it names the variants)")
    return Sweep(key, label, tuple(values))


def sweep_value(key: str, value: Any) -> Any:
    """What the config gets for one point: a frame size is a one-size list; a DUT CPU count N is
    CPUs 0..N-1."""
    if key == "frames.sizes":
        return [value]
    if key == "testbed.options.dut_cpus" and isinstance(value, int) and not isinstance(value, bool):
        return list(range(value)) if value > 0 else value
    return value


def nest(key: str, value: Any) -> dict:
    """``"a.b.c", v`` → ``{"a": {"b": {"c": v}}}``."""
    out: Any = value
    for part in reversed(key.split(".")):
        out = {part: out}
    return out


#: Flows one port range holds; a flows sweep past it spreads them over source × destination ports.
PORT_RANGE_FLOWS = 65_535


def sweep_patch(sweep: Sweep, i: int, base: dict) -> dict:
    """The config keys point ``i`` of ``sweep`` sets. Past one port range of flows (65 535), the flows
    are 1024 source ports × N destination ports (``stream.flows``): a multiple of 1024. Connections
    are set in every stateful method of ``base`` (its methods list, copied)."""
    v = sweep.values[i]
    if sweep.key == CONNECTIONS_KEY:
        methods = copy.deepcopy(base.get("methods") or [])
        stateful = [m for m in methods if isinstance(m, dict) and "stateful" in m]
        if not stateful:
            raise ConfigError("sweep.over", "connections are the stateful method's: add a stateful method to the "
                                            "base config (netrig sweep --method stateful)")
        for m in stateful:
            m["stateful"] = {**(m["stateful"] or {}), "connections": v}
        return {"methods": methods}
    if sweep.key in (ROUTES_KEY, HOSTS_KEY) and isinstance(v, int) and not isinstance(v, bool) and v > 0:
        # every route (neighbour) carries traffic: one destination address each, in RFC 4814's order
        return merge(nest(sweep.key, v), {"stream": {"flows": {"dst_ips": v}, "flow_order": "pseudorandom"}})
    if sweep.key == "ports.flows" and isinstance(v, int) and v > PORT_RANGE_FLOWS:
        if v % 1024:
            raise ConfigError(f"sweep.values[{i}]", f"{v}: past {PORT_RANGE_FLOWS} flows the flows are 1024 source "
                                                    "ports × N destination ports: give a multiple of 1024")
        return {"stream": {"flows": {"src_ports": 1024, "dst_ports": v // 1024}}}
    return nest(sweep.key, sweep_value(sweep.key, v))


def sweep_variants(sweep: Sweep, base: dict) -> list[dict]:
    """The ``[[variant]]`` tables a sweep stands for (``base``: the config every variant starts from)."""
    out = []
    for i, v in enumerate(sweep.values):
        text = re.sub(r"[^A-Za-z0-9_.-]", "_", str(v))
        out.append({"name": f"{sweep.label}-{text}"[:64], "description": f"{sweep.key} = {v}",
                    **sweep_patch(sweep, i, base)})
    return out


@dataclass(frozen=True)
class Variant:
    name: str
    description: str
    config: TestConfig


@dataclass(frozen=True)
class Study:
    name: str
    title: str
    description: str
    #: Baseline first.
    variants: tuple[Variant, ...]
    #: The study as given (normalised): what a continued run must match.
    source: dict = field(repr=False, default_factory=dict)

    @property
    def baseline(self) -> Variant:
        return self.variants[0]


def merge(base: Any, over: Any) -> Any:
    """``over`` merged into ``base``: mappings key by key (recursively), anything else replaced."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = merge(base.get(k), v) if k in base else copy.deepcopy(v)
        return out
    return copy.deepcopy(over)


def study_from_dict(data: Any) -> Study:
    """Validate a parsed study file; every problem is a ``ConfigError`` naming the key."""
    if not isinstance(data, dict):
        raise ConfigError("study", "a study file holds a table at the top level")
    for key in data:
        if key not in ("study", "base", "variant", "sweep"):
            raise ConfigError(str(key), "unknown key; a study file has [study], [base] and [[variant]] (or [sweep]) "
                                        "tables")
    head = data.get("study") or {}
    if not isinstance(head, dict):
        raise ConfigError("study", "must be a table (name, title, description, baseline)")
    for key in head:
        if key not in _STUDY_KEYS:
            raise ConfigError(f"study.{key}", f"unknown key; allowed: {', '.join(_STUDY_KEYS)}")
    name = head.get("name", "study")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ConfigError("study.name", f"{name!r}: letters, digits, '_', '-' and '.', at most 64 (it names the "
                                        "output directory)")
    base = data.get("base") or {}
    if not isinstance(base, dict):
        raise ConfigError("base", "must be a table: the netrig config every variant starts from")
    sweep = None
    if "sweep" in data:
        if "variant" in data:
            raise ConfigError("sweep", "a sweep makes the variants: leave out the [[variant]] tables (or the [sweep])")
        sweep = sweep_from_dict(data["sweep"])
        if "baseline" in head:
            raise ConfigError("study.baseline", "a sweep's baseline is its first value: leave it out")
    raw = sweep_variants(sweep, base) if sweep is not None else data.get("variant")
    if not isinstance(raw, list) or not raw:
        raise ConfigError("variant", "needs at least one [[variant]] table (name plus the config keys it changes)")
    variants: list[Variant] = []
    for i, v in enumerate(raw):
        path = f"variant[{i}]"
        if not isinstance(v, dict):
            raise ConfigError(path, "must be a table: name, description and the config keys it changes")
        vname = v.get("name")
        if not isinstance(vname, str) or not _NAME_RE.match(vname):
            raise ConfigError(f"{path}.name", f"{vname!r}: every variant needs a name of letters, digits, '_', '-' "
                                              "and '.' (it names its output directory)")
        if any(x.name == vname for x in variants):
            raise ConfigError(f"{path}.name", f"{vname!r} is used twice; variant names must differ")
        desc = v.get("description", "")
        if not isinstance(desc, str):
            raise ConfigError(f"{path}.description", "must be a string")
        over = {k: x for k, x in v.items() if k not in ("name", "description")}
        merged = merge(base, over)
        merged["name"] = vname
        try:
            cfg = config_from_dict(merged)
        except ConfigError as e:
            if sweep is not None:
                raise ConfigError(f"sweep.values[{i}] ({sweep.key} = {sweep.values[i]!r}): {e.field}",
                                  e.message) from None
            raise ConfigError(f"{path} ({vname}).{e.field}", e.message) from None
        variants.append(Variant(vname, desc, cfg))
    baseline = head.get("baseline", variants[0].name)
    idx = next((i for i, v in enumerate(variants) if v.name == baseline), None)
    if idx is None:
        raise ConfigError("study.baseline", f"{baseline!r} is no variant; variants: "
                                            f"{', '.join(v.name for v in variants)}")
    variants.insert(0, variants.pop(idx))
    title = head.get("title", name)
    if not isinstance(title, str):
        raise ConfigError("study.title", "must be a string")
    source = {"study": {"name": name, "title": title, "baseline": variants[0].name},
              "variants": [{"name": v.name, "description": v.description, "config": v.config.to_dict()}
                           for v in variants]}
    if sweep is not None:
        source["sweep"] = sweep.to_dict()
    return Study(name, title, str(head.get("description", "")), tuple(variants), source)


def load_study(path: str | Path) -> Study:
    try:
        return study_from_dict(read_document(path))
    except ConfigError as e:
        if e.field.startswith(str(path)):
            raise
        raise ConfigError(f"{path}: {e.field}", e.message) from None


@dataclass
class VariantOutcome:
    name: str
    dir: Path
    #: done (finished now), kept (finished earlier), skipped (the machine lacks what it needs: a
    #: kernel feature, a tool), failed, interrupted, pending
    state: str = "pending"
    error: str | None = None
    complete: bool = False

    def to_dict(self) -> dict:
        return {"name": self.name, "dir": self.dir.name, "state": self.state, "error": self.error,
                "complete": self.complete}


#: ``run_variant(config, out_dir, resume) -> None``: runs one variant (the CLI passes one with a
#: console); raises like ``Runner.run``.
RunVariant = Callable[[TestConfig, Path, bool], Any]


def _default_run(config: TestConfig, out: Path, resume: bool) -> Any:
    from netrig.run.runner import Runner
    return Runner(config, out, resume=resume).run()


def _finished(d: Path) -> bool:
    try:
        return bool(json.loads((d / RESULT_FILE).read_text(encoding="utf-8")).get("complete"))
    except (OSError, ValueError, AttributeError):
        return False


def _has_trials(d: Path) -> bool:
    from netrig.results import TRIAL_LOG, read_trial_log
    if not (d / TRIAL_LOG).exists():
        return False
    try:
        return bool(read_trial_log(d)[1]) or (d / TRIAL_LOG).stat().st_size > 0
    except ResultError:
        return True


class StudyRunner:
    """Runs ``study`` into ``out_dir`` (continuing what an earlier run of the same study left)."""

    def __init__(self, study: Study, out_dir: str | Path | None = None, *, run_variant: RunVariant | None = None,
                 notify: Callable[[str], None] | None = None):
        self.study = study
        self.out = Path(out_dir or Path("results") / study.name)
        self.run_variant = run_variant or _default_run
        self.notify = notify or (lambda msg: None)
        self.outcomes = [VariantOutcome(v.name, self.out / v.name) for v in study.variants]
        self.started_at = utc_now()

    def _check_dir(self) -> None:
        f = self.out / STUDY_FILE
        if not f.exists():
            if self.out.exists() and any(self.out.iterdir()):
                raise ResultError(f"{self.out}: not empty and no study was run there; choose another --out")
            return
        try:
            old = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ResultError(f"{f}: cannot read ({e}); remove it, or choose another --out") from None
        if old.get("source") != json.loads(dumps(self.study.source)):
            raise ResultError(f"{self.out}: holds a different study (or this one changed); choose another --out, "
                              "or run the study file it was started with")
        self.started_at = old.get("started_at", self.started_at)

    def _save(self, complete: bool) -> None:
        doc = {"study": self.study.name, "title": self.study.title, "started_at": self.started_at,
               "updated_at": utc_now(), "complete": complete, "baseline": self.study.baseline.name,
               "variants": [o.to_dict() for o in self.outcomes], "source": self.study.source}
        write_text_atomic(self.out / STUDY_FILE, dumps(doc, indent=1) + "\n")

    def run(self) -> list[VariantOutcome]:
        self._check_dir()
        self.out.mkdir(parents=True, exist_ok=True)
        self._save(False)
        for v, o in zip(self.study.variants, self.outcomes):
            if _finished(o.dir):
                o.state, o.complete = "kept", True
                self.notify(f"variant {v.name}: finished earlier, kept ({o.dir}/{RESULT_FILE})")
                continue
            resume = _has_trials(o.dir)
            self.notify(f"variant {v.name}: {'continuing' if resume else 'running'}"
                        + (f" — {v.description}" if v.description else ""))
            try:
                self.run_variant(v.config, o.dir, resume)
                o.complete = _finished(o.dir)
                o.state = "done" if o.complete else "failed"
                if not o.complete:
                    o.error = "the run did not finish (see its result.json)"
            except (*INTERRUPTS, InterruptedTrial):
                o.state = "interrupted"
                self._save(False)
                raise
            except CapabilityError as e:
                o.state, o.error = "skipped", " ".join(str(e).split())
                self.notify(f"variant {v.name}: skipped: {o.error}")
            except (NetrigError, OSError) as e:
                o.state, o.error = "failed", " ".join(str(e).split())
                self.notify(f"variant {v.name}: failed: {o.error}")
            self._save(False)
        self._save(all(o.complete or o.state == "skipped" for o in self.outcomes))
        return self.outcomes

    def results(self) -> list[Path]:
        """The result files to compare: the baseline first, then every other variant that has one."""
        return [o.dir / RESULT_FILE for o in self.outcomes if (o.dir / RESULT_FILE).exists()]
