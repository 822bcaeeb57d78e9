"""`--nodes N`: resizing a trace's cluster while keeping its mix of machine shapes.

Nodes are grouped by shape (CPU, memory, GPUs, GPU model, taints, pod limit); each shape gets its share of
N by largest remainder (ties to the more common shape), at least one node per shape while N allows. Within a
shape the trace's own nodes come first (so N below the trace size keeps real names); beyond them they are
replicated as `<name>-copy<k>`.
"""

from __future__ import annotations

from dataclasses import replace

from drlsched.errors import UserError
from drlsched.workload import NodeSpec


def _shape(node: NodeSpec) -> tuple[object, ...]:
    return (node.cpu_m, node.mem_mib, node.gpus, node.gpu_model, node.taints, node.max_pods)


def scale(nodes: list[NodeSpec], count: int | None) -> list[NodeSpec]:
    if count is None or count == len(nodes):
        return nodes
    if count <= 0:
        raise UserError(f"--nodes must be positive, got {count}")
    if not nodes:
        raise UserError("the trace defines no nodes to scale")
    groups: dict[tuple[object, ...], list[NodeSpec]] = {}
    for node in nodes:
        groups.setdefault(_shape(node), []).append(node)
    members = list(groups.values())
    exact = [len(group) * count / len(nodes) for group in members]
    quota = [int(share) for share in exact]
    if count >= len(members):
        quota = [max(1, q) for q in quota]
    order = sorted(range(len(members)), key=lambda i: (-(exact[i] - int(exact[i])), -len(members[i]), i))
    index = 0
    while sum(quota) < count:
        quota[order[index % len(order)]] += 1
        index += 1
    while sum(quota) > count:  # the minimum of one per shape overshot: trim the largest shapes
        largest = max(range(len(quota)), key=lambda i: (quota[i], -i))
        quota[largest] -= 1
    scaled: list[NodeSpec] = []
    for group, wanted in zip(members, quota, strict=True):
        for k in range(wanted):
            base = group[k % len(group)]
            copy = k // len(group)
            scaled.append(base if copy == 0 else replace(base, name=f"{base.name}-copy{copy}"))
    return scaled
