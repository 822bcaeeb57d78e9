"""An in-memory apiserver for Leases (coordination.k8s.io/v1): GET, POST (409 when it exists) and PUT with
resourceVersion preconditions (409 when stale), as the real one answers the leader elector's calls."""

from __future__ import annotations

import copy
import json
from typing import Any

import kubernetes


class FakeLeases:
    def __init__(self) -> None:
        self.leases: dict[str, dict[str, Any]] = {}
        self.version = 0
        self.down = False  # every call fails as if the apiserver were unreachable
        self.writes: list[tuple[str, str]] = []  # (method, holderIdentity written)

    def __call__(self, api: object, method: str, path: str, body: Any = None, content_type: str = "",
                 gated: bool = True) -> bytes:
        del api, content_type, gated
        if self.down:
            raise ConnectionRefusedError("connection refused")
        if method == "GET":
            if path not in self.leases:
                raise kubernetes.client.ApiException(status=404, reason="Not Found")
            return json.dumps(self.leases[path]).encode()
        body = copy.deepcopy(body)
        if method == "POST":
            key = f"{path}/{body['metadata']['name']}"
            if key in self.leases:
                raise kubernetes.client.ApiException(status=409, reason="AlreadyExists")
        elif method == "PUT":
            key = path
            current = self.leases.get(key)
            if current is None:
                raise kubernetes.client.ApiException(status=404, reason="Not Found")
            if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                raise kubernetes.client.ApiException(status=409, reason="Conflict")
        else:
            raise AssertionError(f"unexpected {method} {path}")
        self.version += 1
        body["metadata"]["resourceVersion"] = str(self.version)
        self.leases[key] = body
        self.writes.append((method, body["spec"].get("holderIdentity", "")))
        return json.dumps(body).encode()

    def holder(self) -> str:
        (lease,) = self.leases.values()
        return str(lease["spec"].get("holderIdentity") or "")
