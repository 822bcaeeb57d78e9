"""`drlsched train-scaler`: PPO for the learned replica scaler, in one file (CleanRL's ppo.py as the model).

Each env is a `Driver` run as a generator (`Driver.decisions`): one decision per HPA sync (15 s), the observation
the `scaler_obs` window, the action an index into `MULTIPLIERS` (`actions` absolute) or a step of one level
(`actions` step: down, keep, up; keep starts at p ≈ 0.9 so an explored level lasts). An episode is a `days`-day
flash-sale of a training seed (`seed_base` + a counter: 1000 and up by default, apart from the evaluation seeds 0-99
and validation 100-999) on `nodes` nodes with the node autoscaler of the settings, or with `window_h` a window of
its last day (`sale_window`). The reward of a decision covers the interval to the
next one and uses the seed's terms with a preset's weights (`drlsched.rl.reward.PRESETS`):

    r = α·utilisation − β·violation − γ·churn
    utilisation = core-seconds used / core-seconds requested by the bound pods (what replica-hours pay for)
    violation   = share of the interval's requests that violated the SLA (the dense form: β is the preset's
                  violation + saturation weight, both of which stand for SLA violations)
    churn       = 1 when the sync changed the replica count (the scaler's "migration")

and with `minute_weight` δ > 0 also − δ when more than 1% of the interval's requests violated: the shape of the
violation-minutes metric, which the share alone prices at a few hundredths per such interval.

Settings in `ScalerTrainSettings`; GAE, clipped surrogate, per-minibatch advantage normalisation, linear LR
annealing, entropy decaying linearly from `ent_coef` to `ent_coef_end`, rewards scaled by the running std of the
return (`drlsched.rl.scaling`).
"""

from __future__ import annotations

import math
import resource
import time
from collections.abc import Callable, Generator
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from drlsched.autoscale.driver import VIOLATION_MINUTE_SHARE, Driver, DriverConfig, RunResult
from drlsched.autoscale.flash_sale import flash_sale
from drlsched.autoscale.learned import ScalerNet, ScalerNetConfig
from drlsched.autoscale.load import LoadCurve
from drlsched.autoscale.scaler_obs import ACTIONS, MULTIPLIERS, OPENING_LEVEL
from drlsched.autoscale.services import ServiceSpec
from drlsched.errors import UserError
from drlsched.rl.reward import PRESETS
from drlsched.rl.scaling import RunningStd

SCALER_PRESETS = ("ecommerce", "batch")
KEEP_PRIOR = (-1.5, 1.5, -1.5)  # step actions' initial logits: p(keep) ≈ 0.91


@dataclass
class ScalerTrainSettings:
    reward_preset: str = "ecommerce"
    encoder: str = "lstm"
    actions: str = "absolute"
    """absolute: a multiplier per sync; step: down / keep / up one level of the multipliers"""
    minutes: float = 20.0
    total_steps: int = 400_000
    num_envs: int = 8
    num_steps: int = 64
    lr: float = 3e-4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    update_epochs: int = 4
    num_minibatches: int = 4
    clip_coef: float = 0.2
    ent_coef: float = 0.02
    ent_coef_end: float = 0.001
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    nodes: int = 100
    node_autoscaler: str = "cluster-autoscaler"
    days: int = 2
    step_s: float = 5.0
    seed: int = 0
    seed_base: int = 1000
    bc_episodes: int = 4
    """warm start: episodes of the tuned `predictive` scaler (60%, 300 s) imitated before PPO (0: none)"""
    bc_epochs: int = 8
    bc_lr: float = 1e-3
    minute_weight: float = 0.0
    """δ: the reward's penalty for a decision whose interval had more than 1% of its requests violating (0: none)"""
    window_h: float = 0.0
    """0: whole episodes; else each episode is this many hours of its last day (the days before are read as history
    by the observer, not simulated), half of them opening 10-50% of a window before that day's sale"""

    def validate(self) -> None:
        if self.reward_preset not in SCALER_PRESETS:
            raise UserError(f"--reward-preset for a scaler: one of {', '.join(SCALER_PRESETS)}, "
                            f"got {self.reward_preset!r}")
        if self.encoder not in ("lstm", "none"):
            raise UserError(f"--encoder: lstm or none, got {self.encoder!r}")
        if self.actions not in ACTIONS:
            raise UserError(f"--actions: {' or '.join(ACTIONS)}, got {self.actions!r}")
        if not (self.minutes > 0 and self.total_steps > 0 and self.num_envs > 0 and self.num_steps > 1):
            raise UserError("train-scaler: minutes, steps and envs must be positive")
        if not (math.isfinite(self.minute_weight) and 0 <= self.minute_weight <= 100):
            raise UserError(f"--violation-minute-weight must be between 0 and 100, got {self.minute_weight:g}")
        if not 1 <= self.days <= 7:
            raise UserError(f"--days must be between 1 and 7, got {self.days}")
        if not (self.window_h == 0 or 1 <= self.window_h <= 24) or (self.window_h and self.days < 2):
            raise UserError(f"--window-hours: 0 (whole episodes) or 1 to 24 with --days 2 or more, got "
                            f"{self.window_h:g} with {self.days} days")

    def weights(self) -> tuple[float, float, float]:
        w = PRESETS[self.reward_preset]
        return w.utilization, w.violation + w.saturation, w.migration


class _Env:
    """One driver at a time, restarted on the next training seed when its episode ends."""

    def __init__(self, s: ScalerTrainSettings, index: int) -> None:
        self.s, self.index, self.episode = s, index, 0
        self.weights = s.weights()
        self.returns: list[dict[str, float]] = []
        self.obs = self._reset()
        self.level = OPENING_LEVEL  # the level the last decision set (the mean multiplier of the curve)

    def _reset(self) -> np.ndarray:
        s = self.s
        seed = s.seed_base + self.episode * s.num_envs + self.index
        self.episode += 1
        cfg = DriverConfig(scaler="hpa", node_autoscaler=s.node_autoscaler, nodes=s.nodes, step_s=s.step_s,
                           actions=s.actions)
        self.driver = _episode(s, seed, cfg)
        self.loop: Generator[np.ndarray, int, RunResult] = self.driver.decisions()
        self._mark = self._sums()
        self.ep_reward = 0.0
        return next(self.loop).copy()

    def _sums(self) -> tuple[float, float, float, float, int]:
        d = self.driver
        return d.requests, d.violating, d.used_core_s, d.requested_core_s, d.scale_actions

    def step(self, action: int) -> tuple[np.ndarray, float, bool]:
        try:
            obs = self.loop.send(action).copy()
            done = False
        except StopIteration as stop:
            result: RunResult = stop.value
            obs, done = np.zeros_like(self.obs), True
            self.returns.append({"reward": self.ep_reward, **{k: float(result.metrics[k] or 0.0) for k in (
                "sla_violation_rate", "replica_hours", "violation_minutes")}})
        assert self.driver.observer is not None  # made at the first decision
        self.level = self.driver.observer.level
        now = self._sums()
        req, bad, used, asked, acts = (a - b for a, b in zip(now, self._mark, strict=True))
        self._mark = now
        alpha, beta, gamma = self.weights
        share = bad / req if req > 0 else 0.0
        reward = alpha * (used / asked if asked > 0 else 0.0) - beta * share - gamma * acts
        if share > VIOLATION_MINUTE_SHARE:
            reward -= self.s.minute_weight
        self.ep_reward += reward
        if done:
            obs = self._reset()
        self.obs = obs
        return obs, reward, done


def train_scaler(s: ScalerTrainSettings, log: Callable[[dict[str, float]], None] | None = None
                 ) -> tuple[ScalerNet, dict[str, Any]]:
    """Trains until `total_steps` decisions or `minutes` of wall time; returns the network and the facts of the run
    (curve rows included)."""
    s.validate()
    torch.manual_seed(s.seed)
    torch.set_num_threads(1)
    rng = np.random.default_rng(s.seed)
    net = ScalerNet(ScalerNetConfig(encoder=s.encoder), s.actions)
    if s.actions == "step":
        with torch.no_grad():
            net.actor[-1].bias.copy_(torch.tensor(KEEP_PRIOR))
    t0 = time.perf_counter()
    bc = behaviour_clone(net, s, rng) if s.bc_episodes else {}
    opt = torch.optim.Adam(net.parameters(), lr=s.lr, eps=1e-5)
    envs = [_Env(s, i) for i in range(s.num_envs)]
    scale = RunningStd(s.num_envs, s.gamma)
    n, t = s.num_envs, s.num_steps
    obs_buf = np.zeros((t, n, *envs[0].obs.shape), dtype=np.float32)
    act_buf = np.zeros((t, n), dtype=np.int64)
    logp_buf = np.zeros((t, n), dtype=np.float32)
    rew_buf = np.zeros((t, n), dtype=np.float32)
    done_buf = np.zeros((t, n), dtype=np.float32)
    val_buf = np.zeros((t, n), dtype=np.float32)
    level_buf = np.zeros((t, n), dtype=np.int64)
    updates = max(1, s.total_steps // (n * t))
    curve: list[dict[str, float]] = []
    steps = 0
    for update in range(updates):
        frac = update / updates
        for g in opt.param_groups:
            g["lr"] = s.lr * (1.0 - frac)
        ent = s.ent_coef + (s.ent_coef_end - s.ent_coef) * frac
        for k in range(t):
            obs = np.stack([e.obs for e in envs])
            with torch.no_grad():
                logits, value = net(torch.from_numpy(obs))
            probs = torch.softmax(logits, -1).numpy().astype(np.float64)
            actions = np.array([rng.choice(probs.shape[1], p=p / p.sum()) for p in probs])
            obs_buf[k], act_buf[k], val_buf[k] = obs, actions, value.numpy()
            logp_buf[k] = torch.log_softmax(logits, -1).numpy()[np.arange(n), actions]
            out = [e.step(int(a)) for e, a in zip(envs, actions, strict=True)]
            rewards = np.array([o[1] for o in out])
            dones = np.array([o[2] for o in out])
            level_buf[k] = [e.level for e in envs]
            rew_buf[k] = scale.scale(rewards, dones)
            done_buf[k] = dones
        steps += n * t
        with torch.no_grad():
            _, last_value = net(torch.from_numpy(np.stack([e.obs for e in envs])))
        adv = np.zeros((t, n), dtype=np.float32)
        gae = np.zeros(n, dtype=np.float32)
        next_value = last_value.numpy()
        for k in reversed(range(t)):
            live = 1.0 - done_buf[k]
            delta = rew_buf[k] + s.gamma * next_value * live - val_buf[k]
            gae = delta + s.gamma * s.gae_lambda * live * gae
            adv[k] = gae
            next_value = val_buf[k]
        returns = adv + val_buf
        stats = _update(net, opt, s, obs_buf.reshape(t * n, *obs_buf.shape[2:]), act_buf.reshape(-1),
                        logp_buf.reshape(-1), adv.reshape(-1), returns.reshape(-1), ent, rng)
        finished = [r for e in envs for r in e.returns]
        for e in envs:
            e.returns = []
        row = {"step": steps, "wall_s": time.perf_counter() - t0, "reward": float(rew_buf.mean()),
               "mean_multiplier": float(np.asarray(MULTIPLIERS)[level_buf].mean()), **stats}
        if finished:
            row.update({f"episode_{k}": float(np.mean([r[k] for r in finished])) for k in finished[0]})
        curve.append(row)
        if log:
            log(row)
        if time.perf_counter() - t0 > 60.0 * s.minutes:
            break
    facts = {"settings": asdict(s), "behaviour_clone": bc, "steps": steps, "updates": len(curve),
             "wall_s": time.perf_counter() - t0,
             "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, "curve": curve}
    return net, facts


def _episode(s: ScalerTrainSettings, seed: int, config: DriverConfig, windowed: bool = True) -> Driver:
    per_node = 8
    peak = 0.5 * per_node * s.nodes * 0.8 * 1000 / 10.0  # as `simulate --scaler`'s default peak
    curve = flash_sale(seed, s.days, 15.0, peak)
    spec = ServiceSpec(max_replicas=per_node * s.nodes)
    if not (windowed and s.window_h):
        return Driver(spec, curve, config, seed)
    history, window = sale_window(curve, s.window_h * 3600.0, np.random.default_rng([seed, 0x3A1E]))
    return Driver(spec, window, config, seed, history=history)


def sale_window(curve: LoadCurve, length_s: float, rng: np.random.Generator) -> tuple[LoadCurve, LoadCurve]:
    """(history, window): a `length_s` window of the curve's last day, with absolute times (the hour of day is an
    observation), and everything before it. Half the windows open 10-50% of their length before the last day's
    sale: a sale is about 20 of a day's 5760 decisions, too rare in whole days for PPO to learn what the window
    shows before and during one (docs/autoscaling.md)."""
    day = 86_400.0
    last = day * (round(curve.duration_s / day) - 1)
    sales = [a for a, _ in curve.bursts if a >= last]
    if sales and rng.random() < 0.5:
        start = sales[0] - rng.uniform(0.1, 0.5) * length_s
    else:
        start = last + rng.uniform(0.0, day - length_s)
    lo = int(min(max(start, last), curve.duration_s - length_s) // curve.step_s)
    hi = lo + int(length_s // curve.step_s)
    t0, t1 = lo * curve.step_s, hi * curve.step_s
    bursts = tuple((max(a, t0), min(b, t1)) for a, b in curve.bursts if b > t0 and a < t1)
    return (LoadCurve(curve.rate[:lo], curve.step_s, 0.0, ()),
            LoadCurve(curve.rate[lo:hi], curve.step_s, t0, bursts))


def behaviour_clone(net: ScalerNet, s: ScalerTrainSettings, rng: np.random.Generator) -> dict[str, float]:
    """Cross-entropy on the actions nearest to what the tuned `predictive` scaler did on `bc_episodes` training
    episodes (seeds after PPO's range of the first updates); returns the imitation accuracy."""
    windows, labels = [], []
    expert = DriverConfig(scaler="predictive", target_utilization=60, lead_s=300.0, node_autoscaler=s.node_autoscaler,
                          nodes=s.nodes, step_s=s.step_s, actions=s.actions)
    for i in range(s.bc_episodes):
        driver = _episode(s, s.seed_base + 500_000 + i, expert, windowed=False)
        driver.expert_log = []
        driver.run()
        windows += [w for w, _ in driver.expert_log]
        labels += [a for _, a in driver.expert_log]
    x, y = torch.from_numpy(np.stack(windows)), torch.tensor(labels)
    opt = torch.optim.Adam(net.parameters(), lr=s.bc_lr)
    for _ in range(s.bc_epochs):
        for i in torch.from_numpy(rng.permutation(len(y))).split(512):
            logits, _ = net(x[i])
            loss = torch.nn.functional.cross_entropy(logits, y[i])
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        accuracy = float((net(x)[0].argmax(-1) == y).float().mean())
    return {"decisions": len(y), "accuracy": accuracy, "loss": float(loss.detach())}


def _update(net: ScalerNet, opt: torch.optim.Optimizer, s: ScalerTrainSettings, obs: np.ndarray,
            actions: np.ndarray, logp_old: np.ndarray, adv: np.ndarray, returns: np.ndarray, ent_coef: float,
            rng: np.random.Generator) -> dict[str, float]:
    b_obs, b_act = torch.from_numpy(obs), torch.from_numpy(actions)
    b_logp, b_adv, b_ret = torch.from_numpy(logp_old), torch.from_numpy(adv), torch.from_numpy(returns)
    size = b_act.numel()
    mb = max(1, size // s.num_minibatches)
    kls, clips = [], []
    for _ in range(s.update_epochs):
        order = torch.from_numpy(rng.permutation(size))
        for start in range(0, size, mb):
            i = order[start:start + mb]
            logits, value = net(b_obs[i])
            logp_all = torch.log_softmax(logits, -1)
            logp = logp_all.gather(1, b_act[i][:, None]).squeeze(1)
            ratio = (logp - b_logp[i]).exp()
            a = b_adv[i]
            a = (a - a.mean()) / (a.std() + 1e-8)
            pg = torch.max(-a * ratio, -a * ratio.clamp(1 - s.clip_coef, 1 + s.clip_coef)).mean()
            vloss = 0.5 * ((value - b_ret[i]) ** 2).mean()
            entropy = -(logp_all.exp() * logp_all).sum(-1).mean()
            loss = pg - ent_coef * entropy + s.vf_coef * vloss
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), s.max_grad_norm)
            opt.step()
            with torch.no_grad():
                kls.append(float(((ratio - 1) - (logp - b_logp[i])).mean()))
                clips.append(float(((ratio - 1).abs() > s.clip_coef).float().mean()))
    return {"approx_kl": float(np.mean(kls)), "clip_frac": float(np.mean(clips)),
            "entropy": float(entropy.detach()), "value_loss": float(vloss.detach()), "ent_coef": ent_coef,
            "lr": float(opt.param_groups[0]["lr"])}
