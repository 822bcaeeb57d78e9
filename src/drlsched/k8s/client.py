"""Kubernetes API clients for drlsched's long-running services, and the calls they make without client models."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes

from drlsched.errors import UserError

# Binds and events run from a pool of threads; urllib3's default of 10 connections per host would make them
# queue for (and discard) connections.
POOL_SIZE = 32
LOOPBACK = "127.0.0.1"  # where services listen unless told otherwise


def api_client(kubeconfig: Path | None) -> kubernetes.client.ApiClient:
    """A client from a kubeconfig file, or from the pod's service account when `kubeconfig` is None."""
    config = kubernetes.client.Configuration()
    try:
        if kubeconfig is not None:
            if not kubeconfig.is_file():
                raise UserError(f"kubeconfig {kubeconfig} does not exist")
            kubernetes.config.load_kube_config(config_file=str(kubeconfig), client_configuration=config)
        else:
            kubernetes.config.load_incluster_config(client_configuration=config)
    except kubernetes.config.ConfigException as err:
        raise UserError(f"cannot load the Kubernetes configuration: {err}") from None
    config.connection_pool_maxsize = POOL_SIZE
    return kubernetes.client.ApiClient(config)


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
    content_type: str = "application/json",
) -> bytes:
    """One API call by path, below the generated methods: their per-call argument validation costs more than
    the HTTP round trip on loopback, and the second scheduler makes two calls per pod. Raises ApiException
    for non-2xx answers, as the generated methods do."""
    method, url, headers, body, _ = api.param_serialize(
        method, path, header_params={"Content-Type": content_type, "Accept": "application/json"}, body=body,
        auth_settings=["BearerToken"],
    )
    response = api.call_api(method, url, headers, body, _request_timeout=(5, 30))
    data = bytes(response.read())
    if not 200 <= response.status <= 299:
        raise kubernetes.client.ApiException(status=response.status, reason=response.reason, body=data.decode())
    return data
