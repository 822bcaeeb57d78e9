"""The extender wire format (k8s.io/kube-scheduler/extender/v1): request validation and response bodies.

The Go structs carry no json tags: keys are the Go field names ("Pod", "NodeNames", "Host", "Score") and Go
decodes them case-insensitively, so we accept any case too. Embedded Pod and Node objects are ordinary
camelCase Kubernetes JSON. Anything malformed raises WireError, which the server answers with HTTP 400.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii as _escape  # type: ignore[attr-defined]
from typing import Any

from drlsched.k8s.objects import ObjectError, pod_spec
from drlsched.workload import PodSpec


class WireError(ValueError):
    """A request that does not follow the extender protocol (answered with HTTP 400 and this message)."""


@dataclass(frozen=True, slots=True)
class PodRef:
    namespace: str
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class ExtenderArgs:
    pod: PodSpec
    ref: PodRef
    nodes: list[dict[str, Any]] | None  # full Node objects (nodeCacheCapable: false)
    node_names: list[str] | None  # names only (nodeCacheCapable: true)

    def names(self) -> list[str]:
        if self.node_names is not None:
            return self.node_names
        assert self.nodes is not None
        return [n["metadata"]["name"] for n in self.nodes]


@dataclass(frozen=True, slots=True)
class BindingArgs:
    ref: PodRef
    node: str


def decode(body: bytes) -> dict[str, Any]:
    """The JSON object of a request body, with its top-level keys folded to lower case (Go's matching)."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as err:  # ValueError: bad UTF-8 or JSON, an integer over 4,300 digits
        raise WireError(f"body is not JSON: {str(err)[:200]}") from None
    if not isinstance(data, dict):
        raise WireError(f"body must be a JSON object, not {type(data).__name__}")
    return {str(k).lower(): v for k, v in data.items()}


def _string(data: dict[str, Any], key: str, field: str, required: bool = True) -> str:
    value = data.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise WireError(f"{field} must be a non-empty string")
    return value


def extender_args(body: bytes, max_nodes: int = 1 << 30) -> ExtenderArgs:
    """The arguments of a filter or prioritize call; more than `max_nodes` nodes are refused before any
    per-node work."""
    data = decode(body)
    raw_pod = data.get("pod")
    if not isinstance(raw_pod, dict):
        raise WireError("Pod must be a Pod object")
    try:
        pod = pod_spec(raw_pod)
    except ObjectError as err:
        raise WireError(f"Pod: {err}") from None
    meta = raw_pod["metadata"]
    ns, uid = meta.get("namespace") or "default", meta.get("uid") or ""
    if not isinstance(ns, str) or not isinstance(uid, str):
        raise WireError("Pod.metadata.namespace and .uid must be strings")
    ref = PodRef(ns, meta["name"], uid)

    nodes, names = data.get("nodes"), data.get("nodenames")
    if names is not None:
        # Set-of-types and `in` run in C: this list has one entry per node, thousands of them.
        if not isinstance(names, list) or not set(map(type, names)) <= {str} or "" in names:
            raise WireError("NodeNames must be a list of non-empty strings")
        _count(names, max_nodes, "NodeNames")
        _unique(names, "NodeNames")
        return ExtenderArgs(pod, ref, None, names)
    if nodes is None:
        raise WireError("one of Nodes (a NodeList) or NodeNames must be given")
    if not isinstance(nodes, dict) or not isinstance(nodes.get("items", []), list):
        raise WireError("Nodes must be a NodeList object with an items list")
    items = nodes.get("items") or []
    _count(items, max_nodes, "Nodes.items")
    for i, node in enumerate(items):
        meta = node.get("metadata") if isinstance(node, dict) else None
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
            raise WireError(f"Nodes.items[{i}] must be a Node with metadata.name")
    _unique([node["metadata"]["name"] for node in items], "Nodes.items")
    return ExtenderArgs(pod, ref, items, None)


def _count(nodes: list[Any], limit: int, field: str) -> None:
    if len(nodes) > limit:
        raise WireError(f"{field} lists {len(nodes)} nodes, more than the limit of {limit}")


def _unique(names: list[str], field: str) -> None:
    """A node listed twice would be scored twice and come back twice: kube-scheduler never sends that."""
    if len(set(names)) != len(names):
        twice = next(name for name, count in Counter(names).items() if count > 1)
        raise WireError(f"{field} lists node {twice[:100]!r} more than once")


def binding_args(body: bytes) -> BindingArgs:
    data = decode(body)
    ref = PodRef(
        _string(data, "podnamespace", "PodNamespace"),
        _string(data, "podname", "PodName"),
        _string(data, "poduid", "PodUID", required=False),
    )
    return BindingArgs(ref, _string(data, "node", "Node"))


def filter_result(
    args: ExtenderArgs, passed: list[str], failed: dict[str, str], error: str = ""
) -> dict[str, Any]:
    """ExtenderFilterResult in the form of the request: names for a cache-capable call, Node objects otherwise."""
    result: dict[str, Any] = {"Nodes": None, "NodeNames": None, "FailedNodes": failed,
                              "FailedAndUnresolvableNodes": {}, "Error": error}
    if args.node_names is not None:
        result["NodeNames"] = passed
    else:
        keep = set(passed)
        assert args.nodes is not None
        result["Nodes"] = {"metadata": {}, "items": [n for n in args.nodes if n["metadata"]["name"] in keep]}
    return result


def host_priority_list(scores: list[tuple[str, int]]) -> RawJson:
    """HostPriorityList, encoded directly: json.dumps of thousands of small dicts dominated prioritize."""
    return RawJson(
        "[" + ",".join(f'{{"Host":{_escape(host)},"Score":{score}}}' for host, score in scores) + "]"
    )


class RawJson(str):
    """A payload already encoded as JSON (sent as is)."""
