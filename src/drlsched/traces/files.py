"""Finding a format's tables in a trace directory, or naming the one table a single file holds.

Each format lists its roles (pods, nodes, usage, …) with file-name patterns; a trailing `.gz` is ignored, so
compressed and plain copies are found alike. Roles marked `many` collect every matching shard, sorted by name.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path

from drlsched.errors import UserError


@dataclass(frozen=True, slots=True)
class Role:
    name: str
    patterns: tuple[str, ...]  # tried in order: the first pattern with matches wins
    many: bool = False


def _stem(path: Path) -> str:
    return path.name[:-3] if path.name.endswith(".gz") else path.name


def discover(path: Path, roles: tuple[Role, ...], fmt: str) -> dict[str, list[Path]]:
    """Role name → files. A single file is matched to its role by name; a directory is searched."""
    if not path.exists():
        raise UserError(f"trace path {path} does not exist")
    if path.is_file():
        for role in roles:
            if any(fnmatch.fnmatch(_stem(path), pattern) for pattern in role.patterns):
                return {role.name: [path]}
        expected = ", ".join(pattern for role in roles for pattern in role.patterns)
        raise UserError(f"{path}: not a {fmt} table (expected a name like {expected}, optionally .gz)")
    entries = sorted(p for p in path.iterdir() if p.is_file())
    found: dict[str, list[Path]] = {}
    for role in roles:
        for pattern in role.patterns:
            matches = [p for p in entries if fnmatch.fnmatch(_stem(p), pattern)]
            if not matches:
                continue
            if len(matches) > 1 and not role.many:
                names = ", ".join(p.name for p in matches)
                raise UserError(f"{path}: several files could be the {role.name} table ({names}); pass the "
                                f"one you mean as --trace FILE or keep one in the directory")
            found[role.name] = matches
            break
    if not found:
        expected = ", ".join(pattern for role in roles for pattern in role.patterns)
        raise UserError(f"{path}: no {fmt} tables found (expected files like {expected}, optionally .gz)")
    return found


def need(found: dict[str, list[Path]], role: str, fmt: str, why: str) -> list[Path]:
    if role not in found:
        raise UserError(f"the {fmt} trace has no {role} table; {why}")
    return found[role]
