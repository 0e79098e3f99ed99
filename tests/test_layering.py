"""The layering of ``docs/architecture.md`` holds: no upward import, no import cycle, every module
placed — in ``python/netrig`` (every import, at module level or inside a function) and in
``crates/`` (every ``use``/path of a crate's own modules, test code aside) — and nothing above the
measurer seam (the method framework, the view, the methods) imports the infrastructure."""
from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PY = ROOT / "python"
DOC = ROOT / "docs" / "architecture.md"


# --------------------------------------------------------------------------------------------- #
# The rule, as the document states it

def layer_table() -> dict[str, int]:
    """``{module prefix: layer}`` from the table after the ``<!-- layers`` marker."""
    text = DOC.read_text()
    block = text[text.index("<!-- layers"):]
    out: dict[str, int] = {}
    for line in block.splitlines()[1:]:
        if line.startswith("|---") or line.startswith("| layer"):
            continue
        if not line.startswith("|"):
            if out:
                break
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        level = int(cells[0].split()[0])
        for mod in re.findall(r"`([\w.]+)`", cells[1]):
            out[mod] = level
    return out


LAYERS = layer_table()


def seam_rule() -> tuple[frozenset[int], int]:
    """``(layers, layer)``: the layers that import nothing of ``layer``, from the ``<!-- seam``
    marker under the table (the method framework, the view and the methods see the infrastructure
    only through the measurer)."""
    m = re.search(r"<!-- seam: layers ([\d ]+) import nothing of layer (\d+) -->", DOC.read_text())
    assert m, "docs/architecture.md has no <!-- seam: layers … import nothing of layer … --> rule"
    return frozenset(int(x) for x in m.group(1).split()), int(m.group(2))


SEAM = seam_rule()


def layer_of(module: str) -> int | None:
    best = None
    for prefix, level in LAYERS.items():
        matches = module == prefix or module.startswith(prefix + ".")
        if matches and (best is None or len(prefix) > len(best[0])):
            best = (prefix, level)
    return best[1] if best else None


# --------------------------------------------------------------------------------------------- #
# Python imports

def python_modules() -> dict[str, Path]:
    out = {}
    for p in (PY / "netrig").rglob("*.py"):
        parts = list(p.relative_to(PY).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    out["netrig._native"] = PY / "netrig" / "_native.pyi"
    return out


MODULES = python_modules()


def _resolve(name: str) -> str | None:
    """The netrig module ``name`` refers to (an attribute of a module resolves to that module)."""
    while name and name not in MODULES:
        if "." not in name:
            return None
        name = name.rsplit(".", 1)[0]
    return name or None


def python_imports(module: str, path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            # ``from pkg import mod`` depends on the module; ``from mod import name`` on the module
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "import_module" and node.args and isinstance(node.args[0], ast.Constant):
            targets = [str(node.args[0].value)]  # importlib.import_module("netrig.x")
        for t in targets:
            r = _resolve(t)
            if r is not None and r != module:
                out.add(r)
    return out


def python_graph() -> dict[str, set[str]]:
    return {m: python_imports(m, p) for m, p in MODULES.items() if p.suffix == ".py"}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_every_python_module_has_a_layer():
    missing = sorted(m for m in MODULES if layer_of(m) is None)
    assert not missing, f"modules without a layer in docs/architecture.md: {missing}"


def test_no_python_module_imports_a_layer_above_it():
    bad = []
    for m, deps in python_graph().items():
        for d in deps:
            if layer_of(d) > layer_of(m):  # type: ignore[operator]
                bad.append(f"{m} (layer {layer_of(m)}) imports {d} (layer {layer_of(d)})")
    assert not bad, "upward imports:\n" + "\n".join(sorted(bad))


def seam_violations(graph: dict[str, set[str]]) -> list[str]:
    above, below = SEAM
    return sorted(f"{m} (layer {layer_of(m)}) imports {d} (layer {below})" for m, deps in graph.items()
                  if layer_of(m) in above for d in deps if layer_of(d) == below)


def test_methods_and_the_view_reach_the_infrastructure_only_through_the_measurer():
    bad = seam_violations(python_graph())
    assert not bad, "imports past the measurer seam:\n" + "\n".join(bad)


def test_no_python_import_cycle():
    found = cycles(python_graph())
    assert not found, f"import cycles: {found}"


# --------------------------------------------------------------------------------------------- #
# Rust modules

def rust_modules(crate: Path) -> dict[str, Path]:
    src = crate / "src"
    out = {}
    for p in src.rglob("*.rs"):
        parts = list(p.relative_to(src).with_suffix("").parts)
        if parts == ["lib"]:
            continue  # the crate root: modules and re-exports only
        if parts[-1] == "mod":
            parts = parts[:-1]
        out["::".join(parts)] = p
    return out


_CFG_TEST = re.compile(r"^\s*#\[cfg\(test\)\]", re.M)
_PATH = re.compile(r"\b(crate|super)((?:::[a-z_][a-z0-9_]*)+)")


def rust_uses(module: str, path: Path, modules: Iterable[str]) -> set[str]:
    text = path.read_text()
    m = _CFG_TEST.search(text)
    if m:  # tests sit at the bottom of each file; test code is not counted
        text = text[:m.start()]
    text = re.sub(r"//.*", "", text)
    known = set(modules)
    parent = module.rsplit("::", 1)[0] if "::" in module else ""
    if path.name == "mod.rs":
        parent = module
    out = set()
    # `use crate::sys;` then `sys::af_xdp::open(..)`: names bound to modules by `use`
    aliases: dict[str, str] = {}
    for root, rest in _PATH.findall(text):
        segs = rest.strip(":").split("::")
        base = [] if root == "crate" else ([parent] if parent else [])
        full = "::".join([*base, *segs]).strip(":")
        while full and full not in known:
            full = full.rsplit("::", 1)[0] if "::" in full else ""
        if full and full != module:
            out.add(full)
            aliases[full.rsplit("::", 1)[-1]] = full
    for name, target in aliases.items():
        for sub in re.findall(rf"\b{name}((?:::[a-z_][a-z0-9_]*)+)", text):
            full = target + sub
            while full not in known and "::" in full:
                full = full.rsplit("::", 1)[0]
            if full in known and full != module:
                out.add(full)
    return out


@pytest.mark.parametrize("crate", sorted(p.name for p in (ROOT / "crates").iterdir() if (p / "src").is_dir()))
def test_no_rust_module_cycle(crate):
    mods = rust_modules(ROOT / "crates" / crate)
    graph = {m: rust_uses(m, p, mods) for m, p in mods.items()}
    found = cycles(graph)
    assert not found, f"{crate}: module cycles: {found}"


def engine_uses_of_run(graph: dict[str, set[str]]) -> list[str]:
    """``module -> used`` for every engine module outside ``run`` (the entry points) that uses one
    inside it: the traffic pipeline and the ports are the building blocks, the entry points their
    compositions (docs/architecture.md, "The engine")."""
    def inside(m: str) -> bool:
        return m == "run" or m.startswith("run::")

    return sorted(f"{m} -> {u}" for m, used in graph.items() if not inside(m) for u in used if inside(u))


def test_no_engine_building_block_uses_an_entry_point():
    mods = rust_modules(ROOT / "crates" / "netrig-engine")
    assert "run::trial" in mods and "traffic::tx" in mods, sorted(mods)
    graph = {m: rust_uses(m, p, mods) for m, p in mods.items()}
    assert engine_uses_of_run(graph) == []


def test_the_rule_catches_a_cycle_and_an_upward_import():
    """The checks can fail: a made-up cycle and a made-up upward import are found."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]
    assert engine_uses_of_run({"traffic::tx": {"run::trial", "port"}, "run::listen": {"run::trial"}}) == [
        "traffic::tx -> run::trial"]
    assert layer_of("netrig.methods.throughput") > layer_of("netrig.measure.seam")  # type: ignore[operator]
    assert layer_of("netrig.cli.main") == max(LAYERS.values())
    assert seam_violations({"netrig.methods.stateful": {"netrig.testbed.conntrack", "netrig.measure.seam"},
                            "netrig.view.run_view": {"netrig.monitor.monitor"},
                            "netrig.run.session": {"netrig.testbed.testbed"}}) == [
        "netrig.methods.stateful (layer 6) imports netrig.testbed.conntrack (layer 3)",
        "netrig.view.run_view (layer 5) imports netrig.monitor.monitor (layer 3)"]
