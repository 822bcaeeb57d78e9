"""Alibaba v2018 DAG task names: `M5_3_4` is task 5 of its job and depends on tasks 3 and 4.

Only the numbers matter (the leading letters M/R/J do not), and names that do not have this form
(`task_Nzg3…`, `MergeTask`) are independent tasks. A parent number may match several tasks of the job; all
are parents. A number that matches no task of the job is dropped (the simulator would otherwise wait for it
forever) and counted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_DAG_NAME = re.compile(r"[A-Za-z]+(\d+)((?:_\d+)*)")


def parse(name: str) -> tuple[str, list[str]] | None:
    """(task number, parent numbers) of a DAG name; None for a non-DAG name."""
    match = _DAG_NAME.fullmatch(name)
    if match is None:
        return None
    return match.group(1), [n for n in match.group(2).split("_") if n]


def job_parents(tasks: Iterable[str]) -> tuple[dict[str, str], int]:
    """For one job's task names: task name → '|'-joined parent task names, and the dangling references."""
    parsed = {name: parse(name) for name in tasks}
    by_number: dict[str, list[str]] = {}
    for name, dag in parsed.items():
        if dag is not None:
            by_number.setdefault(dag[0], []).append(name)
    parents: dict[str, str] = {}
    dangling = 0
    for name, dag in parsed.items():
        found: list[str] = []
        for number in dag[1] if dag is not None else ():
            names = [parent for parent in by_number.get(number, ()) if parent != name]
            if not names:
                dangling += 1
            found.extend(names)
        parents[name] = "|".join(sorted(set(found)))
    return parents, dangling
