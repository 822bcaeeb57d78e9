"""Reader of Spark stage profiles in the tpch format (../shared/traces/tpch/README.md).

A directory holds one or more JSON files whose keys are `tpch_q<Q>_<SIZE>g_maxCores_<C>`, each a list of stages
`{stage_id, stage_name, num_tasks, average_runtime_ms}`, and `queries.yaml` with each query's stage DAG
(`graphs[].graph[]`: `name` = stage_id, `children`). Any subset of queries, sizes and core limits is read. Bad
input is one line naming the file and the entry (UserError, exit 2).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from drlsched.errors import UserError

KEY = re.compile(r"^tpch_q(\d+)_(\d+)g(?:_maxCores_(\d+))?$")
DAG_FILE = "queries.yaml"


@dataclass(frozen=True)
class ProfiledStage:
    stage_id: int
    tasks: int
    runtime_s: float  # mean task run time in that run


@dataclass(frozen=True)
class ProfileSet:
    """cells[(query, size_gb)][cores] = the stages of that run; dags[query][stage_id] = its children."""

    source: str
    cells: dict[tuple[str, int], dict[int, tuple[ProfiledStage, ...]]]
    dags: dict[str, dict[int, tuple[int, ...]]]

    def parents(self, query: str) -> dict[int, tuple[int, ...]]:
        dag = self.dags[query]
        out: dict[int, list[int]] = {s: [] for s in dag}
        for s, children in dag.items():
            for c in children:
                out[c].append(s)
        return {s: tuple(sorted(p)) for s, p in out.items()}


def embedded_dir() -> Path:
    """The packaged tpch profiles (erdos-scheduling-simulator, MIT; licence beside them)."""
    return Path(str(resources.files("drlsched.jobs") / "data" / "tpch"))


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _read_dags(path: Path) -> dict[str, dict[int, tuple[int, ...]]]:
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as err:
        raise UserError(f"cannot read {path}: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise UserError(f"{path}: not YAML ({str(err).splitlines()[0]})") from None
    graphs = doc.get("graphs") if isinstance(doc, dict) else None
    if not isinstance(graphs, list):
        raise UserError(f"{path}: expected a top-level 'graphs' list")
    dags: dict[str, dict[int, tuple[int, ...]]] = {}
    for g in graphs:
        name = str(g.get("name", "")) if isinstance(g, dict) else ""
        if not re.fullmatch(r"Q\d+", name) or not isinstance(g.get("graph"), list):
            raise UserError(f"{path}: graph entry {g!r:.60}: expected name Q<n> and a 'graph' list")
        dag: dict[int, tuple[int, ...]] = {}
        for node in g["graph"]:
            sid = node.get("name") if isinstance(node, dict) else None
            children = node.get("children") or [] if isinstance(node, dict) else None
            if not isinstance(sid, int) or not isinstance(children, list) or not all(
                    isinstance(c, int) for c in children):
                raise UserError(f"{path}: {name}: stage entry {node!r:.60}: expected name <int>, children [<int>]")
            if sid in dag:
                raise UserError(f"{path}: {name}: stage {sid} listed twice")
            dag[sid] = tuple(children)
        for sid, children in dag.items():
            for c in children:
                if c not in dag:
                    raise UserError(f"{path}: {name}: stage {sid} has child {c}, which is not in the DAG")
        cycle = _cycle(dag)
        if cycle is not None:
            raise UserError(f"{path}: {name}: the DAG has a cycle through stage {cycle}")
        dags[name[1:]] = dag
    return dags


def _cycle(dag: dict[int, tuple[int, ...]]) -> int | None:
    """A stage on a cycle, or None (iterative DFS, colours 0 new / 1 on path / 2 done)."""
    colour = dict.fromkeys(dag, 0)
    for root in dag:
        if colour[root]:
            continue
        stack = [(root, iter(dag[root]))]
        colour[root] = 1
        while stack:
            node, it = stack[-1]
            child = next(it, None)
            if child is None:
                colour[node] = 2
                stack.pop()
            elif colour[child] == 1:
                return child
            elif colour[child] == 0:
                colour[child] = 1
                stack.append((child, iter(dag[child])))
    return None


def _stages(path: Path, key: str, entry: object) -> tuple[ProfiledStage, ...]:
    if not isinstance(entry, list) or not entry:
        raise UserError(f"{path}: {key}: expected a non-empty list of stages")
    out: list[ProfiledStage] = []
    for st in entry:
        if not isinstance(st, dict):
            raise UserError(f"{path}: {key}: stage entry {st!r:.60} is not an object")
        sid, tasks, ms = st.get("stage_id"), _number(st.get("num_tasks")), _number(st.get("average_runtime_ms"))
        if not isinstance(sid, int) or isinstance(sid, bool):
            raise UserError(f"{path}: {key}: stage entry without an integer stage_id")
        if tasks is None or tasks <= 0 or tasks != int(tasks):
            raise UserError(f"{path}: {key}: stage {sid}: num_tasks must be a positive whole number, got "
                            f"{st.get('num_tasks')!r}")
        if ms is None or not ms > 0 or ms == float("inf"):
            raise UserError(f"{path}: {key}: stage {sid}: average_runtime_ms must be positive, got "
                            f"{st.get('average_runtime_ms')!r}")
        out.append(ProfiledStage(sid, int(tasks), ms / 1000.0))
    if len({s.stage_id for s in out}) != len(out):
        raise UserError(f"{path}: {key}: a stage_id is listed twice")
    return tuple(sorted(out, key=lambda s: s.stage_id))


def load_profiles(directory: str | Path | None = None) -> ProfileSet:
    """Every profile in `directory` (default: the embedded tpch set), checked against its query's DAG."""
    root = embedded_dir() if directory is None else Path(directory)
    if not root.is_dir():
        raise UserError(f"{root}: not a directory of Spark profiles (expected *.json and {DAG_FILE})")
    dag_path = root / DAG_FILE
    if not dag_path.is_file():
        raise UserError(f"{root}: no {DAG_FILE} (the stage DAGs) in the profile directory")
    dags = _read_dags(dag_path)
    files = sorted(root.glob("*.json"))
    if not files:
        raise UserError(f"{root}: no *.json profile files")
    cells: dict[tuple[str, int], dict[int, tuple[ProfiledStage, ...]]] = {}
    for path in files:
        try:
            doc = json.loads(path.read_text())
        except OSError as err:
            raise UserError(f"cannot read {path}: {err.strerror}") from None
        except json.JSONDecodeError as err:
            raise UserError(f"{path} is not JSON: {err.msg} at line {err.lineno}") from None
        if not isinstance(doc, dict):
            raise UserError(f"{path}: expected an object of tpch_q<Q>_<SIZE>g_maxCores_<C> entries")
        for key, entry in doc.items():
            m = KEY.match(key)
            if m is None:
                raise UserError(f"{path}: entry {key!r}: expected a key tpch_q<Q>_<SIZE>g_maxCores_<C>")
            query, size = m.group(1), int(m.group(2))
            if m.group(3) is None:
                raise UserError(f"{path}: entry {key}: no core limit (expected ..._maxCores_<C>)")
            cores = int(m.group(3))
            if cores <= 0 or size <= 0:
                raise UserError(f"{path}: entry {key}: size and core limit must be positive")
            if query not in dags:
                raise UserError(f"{path}: entry {key}: query Q{query} has no DAG in {dag_path}")
            stages = _stages(path, key, entry)
            dag = dags[query]
            for s in stages:
                if s.stage_id not in dag:
                    raise UserError(f"{path}: entry {key}: stage {s.stage_id} is missing from Q{query}'s DAG in "
                                    f"{DAG_FILE}")
            missing = sorted(set(dag) - {s.stage_id for s in stages})
            if missing:
                raise UserError(f"{path}: entry {key}: Q{query}'s DAG has stage {missing[0]}, which the profile "
                                "lacks")
            cell = cells.setdefault((query, size), {})
            if cores in cell:
                raise UserError(f"{path}: entry {key}: listed twice")
            cell[cores] = stages
    if not cells:
        raise UserError(f"{root}: the profile files hold no entries")
    return ProfileSet(str(root), cells, dags)
