"""Which modules may import which: the product does not depend on its test rig, the CLI modules share a common
module instead of importing each other, and the RL modules form no import circle."""

from __future__ import annotations

import ast
from pathlib import Path

import drlsched

SRC = Path(drlsched.__file__).parent


def _imports() -> dict[str, set[str]]:
    """module -> drlsched modules it imports (anywhere in the file, type-checking blocks included)."""
    out: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC.parent).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("drlsched"):
                found.add(node.module)
                found.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("drlsched"))
        out[name] = found
    return out


IMPORTS = _imports()


def test_the_product_does_not_import_the_testbed() -> None:
    offenders = {m: sorted(i for i in deps if i.startswith("drlsched.testbed"))
                 for m, deps in IMPORTS.items()
                 if not m.startswith("drlsched.testbed") and m != "drlsched.cli"}
    assert not {m: d for m, d in offenders.items() if d}


def test_cli_modules_import_a_shared_module_not_each_other() -> None:
    cli = {"drlsched.cli_sim", "drlsched.cli_replay", "drlsched.cli_fill", "drlsched.rl.cli", "drlsched.traces.cli",
           "drlsched.k8s.cli"}
    for module in cli:
        assert not IMPORTS[module] & (cli - {module}), module


def test_rl_modules_form_no_import_circle() -> None:
    rl = {m for m in IMPORTS if m.startswith("drlsched.rl.")}
    graph = {m: {d for d in IMPORTS[m] if d in rl and d != m} for m in rl}
    seen: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        if seen.get(m) == 1:
            raise AssertionError(" -> ".join([*path, m]))
        if seen.get(m) == 2:
            return
        seen[m] = 1
        for d in graph[m]:
            visit(d, [*path, m])
        seen[m] = 2

    for m in sorted(rl):
        visit(m, [])


def _circle(modules: set[str]) -> list[str] | None:
    """An import circle among `modules` (as a path), or None."""
    graph = {m: {d for d in IMPORTS[m] if d in modules and d != m} for m in modules}
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> list[str] | None:
        if state.get(m) == 1:
            return [*path, m]
        if state.get(m) == 2:
            return None
        state[m] = 1
        for d in sorted(graph[m]):
            if (found := visit(d, [*path, m])) is not None:
                return found
        state[m] = 2
        return None

    for m in sorted(modules):
        if (found := visit(m, [])) is not None:
            return found
    return None


# The simulator's engine and rooms (issue 22): shared vocabulary every part may import, the engine that wires
# the rooms, and the rooms, each owning one concern's state.
SIM_SHARED = {"drlsched.sim", "drlsched.sim.config", "drlsched.sim.entities", "drlsched.sim.columns",
              "drlsched.sim.ports", "drlsched.sim.timeline"}
SIM_ENGINE = "drlsched.sim.engine"
SIM_ROOMS = {m for m in IMPORTS if m.startswith("drlsched.sim.")} - SIM_SHARED - {SIM_ENGINE}


def test_the_simulator_has_its_rooms() -> None:
    assert {"drlsched.sim.admission", "drlsched.sim.cycle", "drlsched.sim.runtime", "drlsched.sim.slots",
            "drlsched.sim.clocks", "drlsched.sim.usage", "drlsched.sim.qos", "drlsched.sim.traffic",
            "drlsched.sim.relocation", "drlsched.sim.accounting"} <= SIM_ROOMS


def test_rooms_reach_each_other_only_through_the_engine() -> None:
    for room in SIM_ROOMS:
        others = {d for d in IMPORTS[room] if d in SIM_ROOMS | {SIM_ENGINE} and d != room}
        assert not others, f"{room} imports {sorted(others)}: use an interface in drlsched.sim.ports"
    for shared in SIM_SHARED:
        assert not IMPORTS[shared] & (SIM_ROOMS | {SIM_ENGINE}), shared


def test_only_the_engine_wires_rooms() -> None:
    outside = {m for m in IMPORTS if not m.startswith("drlsched.sim.") and m != "drlsched.sim"}
    for m in outside:
        assert not IMPORTS[m] & SIM_ROOMS, f"{m} imports a room: go through drlsched.simulator"


def test_the_simulator_has_no_import_circle() -> None:
    """Lazy imports included (the walk covers function bodies): the facade, the engine and the rooms."""
    assert _circle({m for m in IMPORTS if m.startswith("drlsched.sim")} | {"drlsched.simulator"}) is None
