"""The house rules of labkit's imports (docs/DESIGN.md, "The house"): no import cycles anywhere, and
each folder imports only what its row of `ALLOWED` names. An import anywhere in a module counts,
including one deferred into a function or kept for type checking: deferring an import hides a
cycle from Python, not from a reader."""

from __future__ import annotations

import ast
import importlib
import re
from functools import cache
from pathlib import Path

import pytest

import labkit

PACKAGE = Path(__file__).resolve().parents[1] / "labkit"


def modules() -> dict[str, Path]:
    """Dotted name -> file, for every module of labkit."""
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The labkit modules `name` imports anywhere in its text (a name imported from a package counts
    as that submodule when it is one, else as the package)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


@cache
def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    for root, children in g.items():
        if root in index:
            continue
        work = [(root, iter(sorted(children)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
    return out


def test_no_import_cycles():
    found = cycles(graph())
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_cycle_finder_sees_a_cycle_through_a_deferred_import():
    """The rule's own check: a cycle closed only by an import inside a function is found."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    source = "import os\n\ndef f():\n    from .b import x\n"
    tree = ast.parse(source)
    assert any(isinstance(n, ast.ImportFrom) and n.module == "b" for n in ast.walk(tree))


# What each folder (or module) of labkit may import, besides itself. A module belongs to the longest
# entry that prefixes its name. Read top-down, this is the flow of docs/DESIGN.md ("The house"):
# spec -> workloads -> engine -> results -> analysis, and the real-cluster adapters beside the engine.
BASE = {"labkit.errors", "labkit.progress"}
SCENARIO = BASE | {"labkit.spec", "labkit.workloads"}
RECORDS = SCENARIO | {"labkit.results"}
CONTRACT = RECORDS | {"labkit.engine.problem", "labkit.engine.resources", "labkit.engine.framework",
                      "labkit.engine.events", "labkit.engine.quotas", "labkit.engine.hypernodes"}
NUMBA = {"labkit.engine.core_state", "labkit.engine.core_account", "labkit.engine.core_clock", "labkit.engine.core"}
ENGINE_SHARED = CONTRACT | NUMBA | {"labkit.engine.compile", "labkit.engine.records", "labkit.engine.clock"}
FAMILIES = {f"labkit.engine.{f}" for f in ("volcano", "kube", "kueue", "slurm")}
ENGINE = ENGINE_SHARED | FAMILIES | {"labkit.engine.families", "labkit.engine.simulate"}
ANALYSIS = ENGINE | {"labkit.metrics"}
ALLOWED = {
    "labkit.errors": set(),
    "labkit.progress": set(),
    "labkit.spec": {"labkit.errors"},
    "labkit.workloads": {"labkit.errors", "labkit.spec"},
    "labkit.results": SCENARIO,
    "labkit.engine.problem": SCENARIO,
    # The clock's event kinds and the ResourceQuota admission: shared by the reference clock and
    # the numba cores, below both.
    "labkit.engine.events": set(),
    "labkit.engine.quotas": SCENARIO,
    "labkit.engine.resources": SCENARIO | {"labkit.engine.problem"},
    "labkit.engine.framework": CONTRACT,
    "labkit.engine.hypernodes": SCENARIO | {"labkit.engine.problem"},
    # Volcano's reference engine builds on the framework alone (and gives the shared compile its
    # rules); its numba session on the shared state struct and books.
    "labkit.engine.volcano": CONTRACT | {"labkit.engine.compile", "labkit.engine.core_state",
                                         "labkit.engine.core_account"},
    # The other families' engines: the shared engine, their own folder, and Volcano's numba core,
    # whose state struct, clock and session helpers their cores run over (DESIGN.md).
    **{f: ENGINE_SHARED | {f, "labkit.engine.volcano"} for f in FAMILIES - {"labkit.engine.volcano"}},
    # The shared compile knows no family: each family's folder gives it its rules (families.py).
    "labkit.engine.compile": CONTRACT,
    "labkit.engine.records": CONTRACT | {"labkit.engine.compile"},
    "labkit.engine.clock": CONTRACT | {"labkit.engine.compile", "labkit.engine.records"},
    "labkit.engine.core_state": CONTRACT,
    "labkit.engine.core_account": CONTRACT | {"labkit.engine.core_state"},
    # The Volcano core's driver and clock, which the other cores share.
    "labkit.engine.core_clock": CONTRACT | {"labkit.engine.core_state", "labkit.engine.core_account",
                                            "labkit.engine.volcano"},
    "labkit.engine.core": ENGINE_SHARED | {"labkit.engine.volcano"},
    "labkit.engine.families": ENGINE_SHARED | FAMILIES,
    "labkit.engine.simulate": ENGINE,
    "labkit.engine": ENGINE,
    "labkit.metrics": ENGINE,
    "labkit.diagnose": ANALYSIS,
    "labkit.compare": ANALYSIS,
    "labkit.viz": ANALYSIS,
    "labkit.widgets": ANALYSIS | {"labkit.viz"},
    # replay judges the recorded real runs by compare's rules, with the real run's session latency
    # (k8s.observe's schedule period and the vcjob's two-session start)
    "labkit.conformance": ENGINE | {"labkit.compare", "labkit.k8s.observe"},
    "labkit.course": ANALYSIS | {"labkit.grading", "labkit.conformance"},
    "labkit.grading": ANALYSIS | {"labkit.course"},
    "labkit.bench": ENGINE,
    "labkit.k8s": RECORDS | {"labkit.commands", "labkit.slurm.conf"},
    "labkit.slurm": RECORDS | {"labkit.commands", "labkit.compare"},
    "labkit.commands": SCENARIO,
    "labkit.cli": {"labkit"},
    "labkit.__main__": {"labkit.cli"},
    "labkit": ANALYSIS,
}


def owner(name: str) -> str:
    """The longest `ALLOWED` entry that is `name` or a package above it."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        candidate = ".".join(parts[:n])
        if candidate in ALLOWED:
            return candidate
    raise KeyError(name)


def within(target: str, allowed: set[str]) -> bool:
    return any(target == a or target.startswith(a + ".") for a in allowed)


def test_every_module_has_a_row():
    missing = [name for name in graph() if not any(name == a or name.startswith(a + ".") for a in ALLOWED)]
    assert not missing, f"modules with no row in ALLOWED: {missing}"


@pytest.mark.parametrize("folder", sorted(ALLOWED))
def test_folder_imports_only_what_it_may(folder):
    wrong = []
    for name, targets in sorted(graph().items()):
        if owner(name) != folder:
            continue
        for target in sorted(targets):
            if owner(target) != folder and not within(target, ALLOWED[folder] | {folder}):
                wrong.append(f"{name} imports {target}")
    assert not wrong, "\n".join(wrong)


EVENT_KINDS = {"ARRIVAL", "RELEASED", "FINISH", "WAKE", "TIMEOUT", "TIMER", "RESYNC"}


def test_event_kinds_are_defined_once():
    """The clock's event kinds live in `engine/events.py`, below the reference clock and the numba
    cores; any other module imports them rather than numbering them again."""
    again = []
    for name, path in sorted(modules().items()):
        if name == "labkit.engine.events":
            continue
        for node in ast.parse(path.read_text(), str(path)).body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
            for target in targets:
                found = {n.id for n in ast.walk(target) if isinstance(n, ast.Name)} & EVENT_KINDS
                again += [f"{name}: {kind}" for kind in sorted(found)]
    assert not again, "event kinds numbered outside labkit.engine.events:\n" + "\n".join(again)


def test_every_jitted_module_is_in_the_core_stamp():
    """numba checks only a cached function's own file; core_state stamps every cached function with all
    the core modules, so a module of jitted functions left out (as the family folders once were) could
    load compiled code older than the functions it calls."""
    from labkit.engine import core_state

    engine = Path(labkit.__file__).parent / "engine"
    jitted = {path.resolve() for path in engine.rglob("*.py")
              if re.search(r"^@(jit|inlined|entry)\b|njit\(", path.read_text(encoding="utf-8"), re.MULTILINE)}
    assert jitted and jitted <= set(core_state.CORE_FILES)


def test_every_cached_core_function_reads_and_writes_its_cache_under_the_lock():
    """A function of the core jitted with numba's own cache (`njit(cache=True)`) would write its index
    unlocked, racing another process that compiles it at the same time (see test_core's cache test).
    The functions only jitted code calls are not cached on their own: their code is in their entry
    point's (core_state.jit)."""
    from numba.core.caching import NullCache
    from numba.core.dispatcher import Dispatcher

    from labkit.engine import core_state

    engine = Path(labkit.__file__).resolve().parent / "engine"
    unlocked = []
    for path in core_state.CORE_FILES:
        module = importlib.import_module("labkit." + ".".join(path.relative_to(engine.parent).with_suffix("").parts))
        for name, value in vars(module).items():
            if not isinstance(value, Dispatcher) or value.py_func.__module__ != module.__name__:
                continue
            callee = value._compiler.pipeline_class is core_state._CalleeCompiler  # cached in its entry point's code
            if not (isinstance(value._cache, core_state._CoreCache) or callee and isinstance(value._cache, NullCache)):
                unlocked.append(f"{module.__name__}.{name}")
    assert not unlocked, unlocked
