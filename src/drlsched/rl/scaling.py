"""Reward scaling shared by PPO and DQN: rewards divided by the running standard deviation of the discounted
return (the return-based scaling of "Implementation Matters in Deep RL", Engstrom et al. 2020)."""

from __future__ import annotations

import math

import numpy as np


class RunningStd:
    """Running variance of the discounted return per env, for reward scaling."""

    def __init__(self, n: int, gamma: float) -> None:
        self.ret = np.zeros(n)
        self.gamma = gamma
        self.count, self.mean, self.m2 = 1e-4, 0.0, 0.0

    def scale(self, reward: np.ndarray, done: np.ndarray) -> np.ndarray:
        self.ret = self.ret * self.gamma + reward
        for x in self.ret:
            self.count += 1
            d = x - self.mean
            self.mean += d / self.count
            self.m2 += d * (x - self.mean)
        self.ret[done] = 0.0
        return reward / math.sqrt(self.m2 / self.count + 1e-8)
