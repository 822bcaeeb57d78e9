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
