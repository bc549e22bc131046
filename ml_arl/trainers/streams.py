"""A behavior's reward streams: one per configured reward signal (extrinsic, curiosity, GAIL,
RND), each with its gamma, strength and value head, as ML-Agents keeps them.

The extrinsic stream is the behavior's objective (the environment reward unless an objective
changes it); the others come from reward providers (``ml_arl.trainers.reward_signals``) that
score a trajectory on the trainer side. Each stream's rewards are summed per episode and
reported as ``Policy/<Signal> Reward`` when the episode ends, as ML-Agents does.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Optional

import numpy as np
import torch
from mlagents_envs.base_env import BehaviorSpec

from ml_arl.messages import Trajectory
from ml_arl.settings import TrainerSettings
from ml_arl.stats import StatsReporter

# ML-Agents' tag names: the provider's class name without "RewardProvider", capitalised
TAGS = {"extrinsic": "Extrinsic", "curiosity": "Curiosity", "gail": "Gail", "rnd": "Rnd"}
IGNORE_DONE = {"curiosity", "rnd"}  # these signals bootstrap past an episode's end


class RewardStreams:
    def __init__(self, behavior: str, settings: TrainerSettings, spec: BehaviorSpec, device: torch.device):
        signals = settings.reward_signals.items()
        self.names = tuple(name for name, _ in signals)
        self.tags = tuple(TAGS[name] for name in self.names)
        self.gammas = tuple(float(s.gamma) for _, s in signals)
        self.strengths = np.array([s.strength for _, s in signals], np.float32)
        self.ignore_done = tuple(name in IGNORE_DONE for name in self.names)
        self.providers: dict[str, object] = {}
        self._episode_sums: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(len(self.names), np.float64))

    def rewards(self, traj: Trajectory, stats: Optional[StatsReporter] = None) -> np.ndarray:
        """[T, streams]: each stream's reward for the trajectory's steps, times its strength; the
        episode sums go to ``stats`` when the trajectory ends an episode."""
        columns = []
        for name in self.names:
            if name == "extrinsic":
                columns.append(np.asarray(traj.rewards, np.float32))
            else:  # pragma: no cover - wired with the reward providers
                raise NotImplementedError(name)
        rewards = np.stack(columns, axis=1) * self.strengths[None, :]
        sums = self._episode_sums[traj.agent_id]
        sums += rewards.sum(axis=0)
        if traj.done:
            if stats is not None:
                for tag, total in zip(self.tags, sums):
                    stats.add_stat(f"Policy/{tag} Reward", float(total))
            del self._episode_sums[traj.agent_id]
        return rewards
