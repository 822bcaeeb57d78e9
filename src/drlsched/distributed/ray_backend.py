"""Ray backend: PPO rollout workers as Ray actors, and evaluation runs as Ray tasks.

Imported only for `--backend ray` (see `drlsched.distributed.load_ray_backend()`); it imports Ray at module level.
Results equal the local backend's: actors run the same `RolloutWorker` on slices of the envs (the rollout is
independent of the split, see `drlsched.rl.rollout`) and tasks run the same `run_one`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
from collections.abc import Callable, Iterator
from functools import partial

import numpy as np
import ray
import torch

from drlsched.errors import UserError
from drlsched.evaluate import RunSpec, run_one
from drlsched.rl.env import EnvConfig
from drlsched.rl.network import NetConfig, SchedulerNet
from drlsched.rl.rollout import RolloutSettings, RolloutWorker, Trajectory, concat, split_envs


@contextlib.contextmanager
def session(address: str | None, num_cpus: int) -> Iterator[None]:
    """Connect to the Ray cluster at `address`, or start a local one with `num_cpus` CPUs; shut down only what
    this call started (a session already open in this process, e.g. a test's, is used as it is)."""
    if ray.is_initialized():
        yield
        return
    quiet = {"logging_level": logging.ERROR, "log_to_driver": False}
    if address:
        _check_reachable(address)
    try:
        if address:
            ray.init(address=address, **quiet)
        else:
            ray.init(num_cpus=num_cpus, include_dashboard=False, **quiet)
    except (ConnectionError, RuntimeError, ValueError) as err:
        where = f"at {address}" if address else "locally"
        raise UserError(f"cannot start Ray {where}: {str(err).splitlines()[0] if str(err) else type(err).__name__}"
                        ) from None
    try:
        yield
    finally:
        ray.shutdown()


def _check_reachable(address: str) -> None:
    """Ray retries an unreachable head for minutes; a HOST:PORT (or ray://HOST:PORT) that refuses a TCP connection
    is one clear error instead. `auto` and other forms go to Ray as they are."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit() or not host:
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as err:
        raise UserError(f"cannot reach a Ray cluster at {address}: {err.strerror or err}") from None


def require_cpus(n: int, what: str) -> None:
    """Actors that cannot be placed wait forever; say so up front instead."""
    have = ray.cluster_resources().get("CPU", 0)
    if have < n:
        raise UserError(f"{what} need {n} CPUs but the Ray cluster has {have:g}")


def get(refs: list[ray.ObjectRef]) -> list[object]:
    """ray.get, re-raising a user error from a worker as itself (one clear line, not a remote traceback)."""
    try:
        return ray.get(refs)
    except ray.exceptions.RayTaskError as err:
        if isinstance(err.cause, UserError):
            raise err.cause from None
        raise


# --- training -----------------------------------------------------------------------------------------------


@ray.remote(num_cpus=1)
class RolloutActor:
    """A `RolloutWorker` over global envs first .. first+count-1, with its own copy of the network."""

    def __init__(self, env_cfg: EnvConfig, net_cfg: NetConfig, s: RolloutSettings, first: int, count: int) -> None:
        torch.set_num_threads(s.threads)  # as in the learner's process; several threads only contend here
        self.net = SchedulerNet(net_cfg)
        self.worker = RolloutWorker(env_cfg, seed=s.seed, num_envs=s.num_envs, first=first, count=count,
                                    shared=s.shared_workload, num_steps=s.num_steps)

    def collect(self, weights: dict[str, np.ndarray]) -> tuple[Trajectory, float]:
        """The trajectory, and the seconds spent on it here (the rest of the learner's wait is overhead)."""
        t0 = time.perf_counter()
        # The arrays arrive read-only from the object store; torch.tensor copies them.
        self.net.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
        return self.worker.collect(self.net), time.perf_counter() - t0

    def close(self) -> None:
        self.worker.close()


class RayRollouts:
    """PPO rollouts on `workers` Ray actors, each owning a contiguous slice of the envs. Each iteration the
    learner's weights go to the object store once (`ray.put`) and every actor reads them from there; the
    trajectories come back and are joined in env order."""

    def __init__(self, env_cfg: EnvConfig, net_cfg: NetConfig, s: RolloutSettings, workers: int) -> None:
        if workers > s.num_envs:
            raise UserError(f"--workers {workers} is more than --envs {s.num_envs}: each worker needs an env")
        require_cpus(workers, f"{workers} rollout workers")
        self.actors = [RolloutActor.remote(env_cfg, net_cfg, s, a, b - a)  # type: ignore[attr-defined]
                       for a, b in split_envs(s.num_envs, workers)]
        # Per-iteration costs, for the benchmark and the scaling model in docs/ray.md.
        self.stats: dict[str, float] = {}

    def collect(self, net: SchedulerNet) -> Trajectory:
        t0 = time.perf_counter()
        weights = ray.put({k: v.detach().numpy() for k, v in net.state_dict().items()})
        t1 = time.perf_counter()
        parts: list[tuple[Trajectory, float]] = get([a.collect.remote(weights) for a in self.actors])  # type: ignore[assignment]
        t2 = time.perf_counter()
        traj = concat([p[0] for p in parts])
        self.stats = {"put_s": t1 - t0, "wait_s": t2 - t1, "worker_s": max(p[1] for p in parts),
                      "concat_s": time.perf_counter() - t2, "trajectory_bytes": float(traj.nbytes())}
        return traj

    def close(self) -> None:
        with contextlib.suppress(ray.exceptions.RayError):
            ray.get([a.close.remote() for a in self.actors])
        for a in self.actors:
            ray.kill(a)


def rollouts_factory(workers: int) -> Callable[[EnvConfig, NetConfig, RolloutSettings], RayRollouts]:
    """For `train_ppo(..., rollouts=...)`."""
    return partial(RayRollouts, workers=workers)


# --- evaluation ---------------------------------------------------------------------------------------------


@ray.remote(num_cpus=1)
def _run_one(spec: RunSpec, cwd: str) -> dict[str, object]:
    # Relative paths (ppo:DIR/policy.pt, --trace FILE) mean the caller's directory, where it exists on this node.
    if os.path.isdir(cwd):
        os.chdir(cwd)
    return run_one(spec)


def run_all(specs: list[RunSpec], on_done: Callable[[RunSpec], None] | None = None) -> list[dict[str, object]]:
    """Like `drlsched.evaluate.run_all`, with one Ray task per run (inside a `session`); results in spec order."""
    cwd = os.getcwd()
    refs = [_run_one.remote(spec, cwd) for spec in specs]  # type: ignore[attr-defined]
    index = {ref: i for i, ref in enumerate(refs)}
    results: list[dict[str, object] | None] = [None] * len(specs)
    pending = list(refs)
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        for ref in done:
            i = index[ref]
            results[i] = get([ref])[0]  # type: ignore[assignment]
            if on_done:
                on_done(specs[i])
    return [r for r in results if r is not None]
