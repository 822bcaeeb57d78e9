"""Kubernetes API clients for drlsched's long-running services, and the calls they make without client models.

Writes can be gated (`gate_writes`): a controller running with leader election attaches its elector's
`is_leader`, and every non-GET `request` on that client raises `NotLeading` while the lease is not held, so a
standby replica can never patch, evict or record an event, whatever its code path."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes
import urllib3
import yaml

from drlsched.errors import UserError

# Binds and events run from a pool of threads; urllib3's default of 10 connections per host would make them
# queue for (and discard) connections.
POOL_SIZE = 32
LOOPBACK = "127.0.0.1"  # where services listen unless told otherwise
_GATE = "_drlsched_may_write"
_READS = frozenset({"GET", "HEAD"})


class NotLeading(RuntimeError):
    """A write refused locally: this replica does not hold the leader lease."""


def check_kubeconfig(path: Path) -> None:
    """What `kubernetes.config` would trip over with a traceback (or, for a missing server, not at all until the
    first call), as one UserError line: not a file, not UTF-8, not YAML, not a mapping, no usable context, a
    cluster without a server."""
    if not path.exists():
        raise UserError(f"kubeconfig {path} does not exist")
    if not path.is_file():
        raise UserError(f"kubeconfig {path} is not a file")
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as err:
        raise UserError(f"cannot read kubeconfig {path}: {err.strerror or err}") from None
    except UnicodeDecodeError:
        raise UserError(f"kubeconfig {path} is not text (not UTF-8)") from None
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise UserError(f"kubeconfig {path} is not valid YAML{where}: {getattr(err, 'problem', None) or err}") \
            from None
    if not isinstance(config, dict):
        raise UserError(f"kubeconfig {path} is not a YAML mapping (found {type(config).__name__})")
    contexts = _named(config, "contexts", path)
    clusters = _named(config, "clusters", path)
    current = config.get("current-context")
    if not current or current not in contexts:
        raise UserError(f"kubeconfig {path} has no current-context naming one of its contexts")
    context = contexts[current].get("context")
    cluster_name = context.get("cluster") if isinstance(context, dict) else None
    if cluster_name not in clusters:
        raise UserError(f"kubeconfig {path}: context {current!r} names no cluster of the file")
    cluster = clusters[cluster_name].get("cluster")
    server = cluster.get("server") if isinstance(cluster, dict) else None
    if not isinstance(server, str) or not server.startswith(("https://", "http://")):
        raise UserError(f"kubeconfig {path}: cluster {cluster_name!r} has no server URL (https://HOST:PORT)")


def _named(config: dict[str, Any], key: str, path: Path) -> dict[str, dict[str, Any]]:
    entries = config.get(key) or []
    if not isinstance(entries, list) or not all(isinstance(e, dict) and isinstance(e.get("name"), str)
                                                for e in entries):
        raise UserError(f"kubeconfig {path}: {key} must be a list of entries with a name")
    return {e["name"]: e for e in entries}


def api_client(kubeconfig: Path | None, retry_connections: bool = True) -> kubernetes.client.ApiClient:
    """A client from a kubeconfig file, or from the pod's service account when `kubeconfig` is None.

    `retry_connections=False` (the controllers): urllib3 does not retry a refused connection itself (three times,
    with a WARNING line each); the caller backs off and logs once (drlsched.k8s.backoff)."""
    config = kubernetes.client.Configuration()
    try:
        if kubeconfig is not None:
            check_kubeconfig(kubeconfig)
            kubernetes.config.load_kube_config(config_file=str(kubeconfig), client_configuration=config)
        else:
            kubernetes.config.load_incluster_config(client_configuration=config)
    except kubernetes.config.ConfigException as err:
        raise UserError(f"cannot load the Kubernetes configuration: {str(err).splitlines()[0]}") from None
    except (OSError, ValueError, TypeError, KeyError, AttributeError, yaml.YAMLError) as err:
        # What the library trips over beyond check_kubeconfig (an unreadable certificate file, a bad field).
        raise UserError(f"cannot load the Kubernetes configuration: {type(err).__name__}: "
                        f"{str(err).splitlines()[0] if str(err) else ''}") from None
    config.connection_pool_maxsize = POOL_SIZE
    if not retry_connections:
        config.retries = False
        logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    return kubernetes.client.ApiClient(config)


def gate_writes(api: kubernetes.client.ApiClient, may_write: Callable[[], bool] | None) -> None:
    """From now on `request` refuses writes on `api` (NotLeading) whenever `may_write()` is false; None lifts it."""
    setattr(api, _GATE, may_write)


def may_write(api: object) -> bool:
    gate = getattr(api, _GATE, None)
    return gate is None or bool(gate())


def call_raw(method: Callable[..., Any], *args: Any, **kwargs: Any) -> bytes:
    """Calls a client method without deserialising the answer, and reads it whole: a connection released with
    its response unread goes back to the pool broken. Non-2xx answers raise ApiException as usual."""
    response = method(*args, _preload_content=False, _request_timeout=(5, 30), **kwargs)
    try:
        return bytes(response.data)
    finally:
        response.release_conn()


def request(
    api: kubernetes.client.ApiClient, method: str, path: str, body: Any = None,
    content_type: str = "application/json", gated: bool = True,
) -> bytes:
    """One API call by path, below the generated methods: their per-call argument validation costs more than
    the HTTP round trip on loopback, and the second scheduler makes two calls per pod. Raises ApiException
    for non-2xx answers, as the generated methods do, and NotLeading for a write on a gated client that may not
    write now (`gated=False`: the leader elector's own Lease writes)."""
    if gated and method not in _READS and not may_write(api):
        raise NotLeading(f"{method} {path} refused: this replica does not hold the leader lease")
    method, url, headers, body, _ = api.param_serialize(
        method, path, header_params={"Content-Type": content_type, "Accept": "application/json"}, body=body,
        auth_settings=["BearerToken"],
    )
    response = api.call_api(method, url, headers, body, _request_timeout=(5, 30))
    data = bytes(response.read())
    if not 200 <= response.status <= 299:
        raise kubernetes.client.ApiException(status=response.status, reason=response.reason, body=data.decode())
    return data


def connection_error(err: BaseException) -> bool:
    """True for a failure to reach the apiserver at all (refused, reset, timed out, TLS), not an HTTP answer."""
    return isinstance(err, urllib3.exceptions.HTTPError | ConnectionError | TimeoutError) or (
        isinstance(err, OSError) and not isinstance(err, FileNotFoundError))
