"""Reward normalisation for on-policy trainers (``reward_signals.<signal>.normalize: true``, an
ml_arl extension): a stream's rewards divided by the running standard deviation of its discounted
return, then clipped to +-10, as Stable-Baselines3's VecNormalize and CleanRL's MuJoCo PPO do.

ML-Agents has no such option; its ``strength`` scales by a fixed factor. A fixed factor suits one
stage of training only: returns grow by orders of magnitude while an agent learns to walk, and the
critic, which moves a little per update, lags behind targets that large. The running scale keeps
the returns the critic fits near one throughout.

Per agent, the discounted return runs across the trajectories of an episode (``time_horizon``
cuts) and restarts when an episode ends. The variance comes from every step's running return,
updated one trajectory at a time (Chan et al.'s parallel update), then the trajectory's rewards are
divided by the new standard deviation. The mean is not subtracted: the sign of a reward stays.
"""

from __future__ import annotations

from typing import Any

import numpy as np

CLIP = 10.0  # CleanRL's and SB3's clip of the normalised reward
EPS = 1e-8


class ReturnScaler:
    def __init__(self, gamma: float) -> None:
        self.gamma = float(gamma)
        self.count = 1e-4  # a prior of variance 1, as gymnasium's RunningMeanStd: the first short trajectory is not blown up
        self.mean = 0.0
        self.var = 1.0
        self._running: dict[str, float] = {}  # agent id -> its discounted return so far this episode

    def scale(self, agent_id: str, rewards: np.ndarray, episode_start: bool, done: bool) -> np.ndarray:
        """``rewards`` [T] of one trajectory of ``agent_id``, divided by the running standard
        deviation of the discounted return (after this trajectory's steps joined it) and clipped."""
        running = 0.0 if episode_start else self._running.get(agent_id, 0.0)
        returns = np.empty(len(rewards), np.float64)
        for i, reward in enumerate(np.asarray(rewards, np.float64)):
            running = running * self.gamma + reward
            returns[i] = running
        if done:
            self._running.pop(agent_id, None)
        else:
            self._running[agent_id] = running
        self._update(returns)
        scaled = np.asarray(rewards, np.float64) / np.sqrt(self.var + EPS)
        return np.clip(scaled, -CLIP, CLIP).astype(np.float32)

    def _update(self, x: np.ndarray) -> None:
        n = float(len(x))
        if n == 0:
            return
        mean, var = float(x.mean()), float(x.var())
        total = self.count + n
        delta = mean - self.mean
        m2 = self.var * self.count + var * n + delta * delta * self.count * n / total
        self.mean += delta * n / total
        self.var = m2 / total
        self.count = total

    def state(self) -> dict[str, Any]:
        return {"count": self.count, "mean": self.mean, "var": self.var}

    def load_state(self, state: dict[str, Any]) -> None:
        self.count, self.mean, self.var = float(state["count"]), float(state["mean"]), float(state["var"])
