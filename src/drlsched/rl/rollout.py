"""PPO rollout collection: a worker that owns a slice of the envs and returns their trajectories.

Both training backends use it: the local backend runs one worker over all envs in the learner's process, the Ray
backend (`drlsched.distributed.ray_backend`) one per actor. Results must not depend on how the envs are split over
workers, so that one seed gives the same weights on either backend and for any worker count:
- each env is reset with its own seed, by global env index (`reset_seeds`), so shared-workload groups survive
  any split;
- each env samples actions from its own generator, seeded from (seed, global env index), by Gumbel-max;
- every row of a forward pass gets the same numbers whatever batch it is in: CPU matmul kernels (MKL/oneDNN) work
  on rows in blocks and compute leftover rows by another path that rounds differently (measured: with AVX2 a
  row's logits differ in the last bits between batches of 3 and 4, never between multiples of 4; with AVX-512
  between batches of 4 and 8, never between multiples of 8), so rollout batches are padded to a multiple of
  `ROW_BLOCK`, a multiple of both.
The learner (reward scaling, GAE, update) gets the concatenated trajectories in env order: see `drlsched.rl.ppo`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Protocol

import numpy as np
import torch
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from drlsched.rl.env import EnvConfig
from drlsched.rl.network import NetConfig, SchedulerNet

ROW_BLOCK = 8
EPISODE_METRICS = ("cpu_util", "jct_p99_s", "sla_violation_rate", "cross_node_traffic_gb", "anomaly_rate")


@dataclass(frozen=True)
class RolloutSettings:
    """What rollout collection needs of the training run's settings."""

    seed: int
    num_envs: int
    num_steps: int  # per env and update
    shared_workload: int = 1  # groups of envs replaying the same workloads
    threads: int = 1  # torch threads in a worker process


def make_envs(env_cfg: EnvConfig, n: int) -> SyncVectorEnv:
    return SyncVectorEnv([lambda: replace(env_cfg).make_env() for _ in range(n)],
                         autoreset_mode=AutoresetMode.SAME_STEP)


def reset_seeds(seed: int, n: int, shared: int) -> list[int]:
    """Per-env reset seeds; envs of one shared-workload group get the same one (same workload sequence)."""
    return [seed * 10_007 + i // max(1, shared) for i in range(n)]


def obs_to_torch(obs: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    return {k: torch.as_tensor(v) for k, v in obs.items()}


@torch.no_grad()
def forward_rows(net: SchedulerNet, obs: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits and values for a batch, each row computed as in any other batch (padded to a multiple of ROW_BLOCK
    by repeating the last row; see the module docstring)."""
    t = obs_to_torch(obs)
    n = t["pod"].shape[0]
    pad = -n % ROW_BLOCK
    if pad:
        t = {k: torch.cat([v, v[-1:].expand(pad, *v.shape[1:])]) for k, v in t.items()}
    logits, value = net(t)
    return logits[:n], value[:n]


def split_envs(num_envs: int, workers: int) -> list[tuple[int, int]]:
    """[first, end) global env indices per worker: contiguous slices, sizes differing by at most one."""
    base, extra = divmod(num_envs, workers)
    bounds, first = [], 0
    for w in range(workers):
        end = first + base + (w < extra)
        bounds.append((first, end))
        first = end
    return bounds


@dataclass
class Trajectory:
    """One rollout of `T` steps over `n` envs (arrays are [T, n, ...] unless noted), in global env order."""

    obs: dict[str, np.ndarray]
    """observation each step acted on"""
    actions: np.ndarray
    logps: np.ndarray
    values: np.ndarray
    rewards: np.ndarray
    """raw (unscaled) env rewards, float64"""
    dones: np.ndarray
    """the episode ended at this step (terminated or truncated)"""
    truncs: np.ndarray
    trunc_values: np.ndarray
    """V(final observation) where the episode was truncated at this step, else 0 (for bootstrapping)"""
    next_value: np.ndarray
    """[n]: V(observation after the last step)"""
    finished: list[tuple[int, int, dict[str, float]]]
    """(step, global env index, episode stats) of every episode that ended"""

    def nbytes(self) -> int:
        """Bytes of array data: what a remote worker sends to the learner."""
        return sum(v.nbytes for v in self.obs.values()) + sum(
            getattr(self, f.name).nbytes for f in fields(self) if f.name not in ("obs", "finished"))


def concat(parts: list[Trajectory]) -> Trajectory:
    """Join trajectories of consecutive env slices along the env axis; episodes ordered by (step, env) as one
    worker over all envs would list them. Always copies: arrays from Ray's object store are read-only."""
    arrays = {f.name: np.concatenate([getattr(p, f.name) for p in parts], axis=-1 if f.name == "next_value" else 1)
              for f in fields(Trajectory) if f.name not in ("obs", "finished")}
    obs = {k: np.concatenate([p.obs[k] for p in parts], axis=1) for k in parts[0].obs}
    finished = sorted((e for p in parts for e in p.finished), key=lambda e: (e[0], e[1]))
    return Trajectory(obs=obs, finished=finished, **arrays)


class RolloutWorker:
    """Owns envs `first .. first+count-1` of `num_envs` and collects `num_steps` steps from them per call."""

    def __init__(self, env_cfg: EnvConfig, *, seed: int, num_envs: int, first: int, count: int, shared: int,
                 num_steps: int) -> None:
        self.first, self.count, self.num_steps = first, count, num_steps
        self.envs = make_envs(env_cfg, count)
        self.obs, _ = self.envs.reset(seed=reset_seeds(seed, num_envs, shared)[first:first + count])
        # One generator per global env index: sampling does not depend on which worker owns the env.
        self.rngs = [np.random.default_rng([seed, first + i]) for i in range(count)]
        self.n_actions = int(self.envs.single_action_space.n)  # type: ignore[attr-defined]
        self.ep_ret = np.zeros(count)
        self.ep_len = np.zeros(count, dtype=np.int64)

    def _sample(self, logits: torch.Tensor) -> np.ndarray:
        """Gumbel-max over the masked logits (float64: masked entries at -1e8 never win)."""
        noise = np.stack([rng.gumbel(size=self.n_actions) for rng in self.rngs])
        return np.argmax(logits.double().numpy() + noise, axis=1)

    def collect(self, net: SchedulerNet) -> Trajectory:
        n, steps = self.count, self.num_steps
        space = self.envs.single_observation_space
        obs_buf = {k: np.zeros((steps, n, *sp.shape), dtype=sp.dtype) for k, sp in space.spaces.items()}  # type: ignore[attr-defined]
        actions = np.zeros((steps, n), dtype=np.int64)
        logps = np.zeros((steps, n), dtype=np.float32)
        values = np.zeros((steps, n), dtype=np.float32)
        rewards = np.zeros((steps, n))
        dones = np.zeros((steps, n), dtype=bool)
        truncs = np.zeros((steps, n), dtype=bool)
        trunc_values = np.zeros((steps, n), dtype=np.float32)
        finished: list[tuple[int, int, dict[str, float]]] = []
        obs = self.obs
        for t in range(steps):
            for k in obs_buf:
                obs_buf[k][t] = obs[k]
            logits, value = forward_rows(net, obs)
            action = self._sample(logits)
            logp = torch.log_softmax(logits, -1).gather(1, torch.as_tensor(action)[:, None]).squeeze(1)
            actions[t], logps[t], values[t] = action, logp.numpy(), value.numpy()
            obs, reward, term, trunc, info = self.envs.step(action)
            done = term | trunc
            rewards[t], dones[t], truncs[t] = reward, done, trunc
            if trunc.any():  # the learner bootstraps a cut episode with the value of its last observation
                idx = np.flatnonzero(trunc)
                final = {k: np.stack([info["final_obs"][i][k] for i in idx]) for k in obs}
                trunc_values[t, idx] = forward_rows(net, final)[1].numpy()
            self.ep_ret += reward
            self.ep_len += 1
            for i in np.flatnonzero(done):
                row = {"return": float(self.ep_ret[i]), "length": float(self.ep_len[i])}
                fi = info.get("final_info", {})
                if term[i] and "metrics" in fi and fi["_metrics"][i]:
                    for key in EPISODE_METRICS:
                        value = fi["metrics"].get(key, [None] * (i + 1))[i]
                        # null (an empty sample: no job finished, no LS pod) is missing, not 0: left out of the mean
                        if value is not None and not math.isnan(float(value)):
                            row[key] = float(value)
                finished.append((t, self.first + int(i), row))
                self.ep_ret[i], self.ep_len[i] = 0.0, 0
        self.obs = obs
        next_value = forward_rows(net, obs)[1].numpy()
        return Trajectory(obs=obs_buf, actions=actions, logps=logps, values=values, rewards=rewards, dones=dones,
                          truncs=truncs, trunc_values=trunc_values, next_value=next_value, finished=finished)

    def close(self) -> None:
        self.envs.close()


class Rollouts(Protocol):
    """A rollout backend, made by `factory(env_cfg, net_cfg, settings)`: `collect` runs every env `num_steps` steps
    under the given weights and returns one trajectory over all envs, in env order."""

    def collect(self, net: SchedulerNet) -> Trajectory: ...

    def close(self) -> None: ...


class LocalRollouts:
    """The default backend: one worker over all envs, in the learner's process."""

    def __init__(self, env_cfg: EnvConfig, net_cfg: NetConfig, s: RolloutSettings) -> None:
        self.worker = RolloutWorker(env_cfg, seed=s.seed, num_envs=s.num_envs, first=0, count=s.num_envs,
                                    shared=s.shared_workload, num_steps=s.num_steps)

    def collect(self, net: SchedulerNet) -> Trajectory:
        return self.worker.collect(net)

    def close(self) -> None:
        self.worker.close()
