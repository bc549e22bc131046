"""User extensions as a user would write them, loaded by import path in the tests:
a trainer that never learns and acts uniformly at random (with its own muscle), and an objective."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
from mlagents_envs.base_env import ActionTuple

from ml_arl.acting.muscle import ActionInfo
from ml_arl.core.actor_weights import PolicySnapshot
from ml_arl.core.experience import Trajectory
from ml_arl.core.objectives import ObjectiveBatch
from ml_arl.trainers.trainer import Trainer


class RandomMuscle:
    """Uniform actions in [-1, 1] and uniform allowed discrete choices."""

    def __init__(self, weights: dict[str, np.ndarray], deterministic: bool, seed: int):
        self.rng = np.random.default_rng(seed)
        self.deterministic = deterministic
        self.set_weights(weights)

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        self.n_cont = int(weights["n_cont"])
        self.branches = tuple(int(b) for b in weights["branches"])

    def act(self, obs: list[np.ndarray], allowed: Optional[np.ndarray]) -> ActionInfo:
        n = obs[0].shape[0]
        cont = self.rng.uniform(-1.0, 1.0, (n, self.n_cont)).astype(np.float32)
        disc = np.zeros((n, len(self.branches)), np.int32)
        offset = 0
        for i, size in enumerate(self.branches):
            ok = allowed[:, offset : offset + size] if allowed is not None else np.ones((n, size), bool)
            for row in range(n):
                disc[row, i] = self.rng.choice(np.flatnonzero(ok[row]))
            offset += size
        zeros = np.zeros(n, np.float32)
        return ActionInfo(cont, disc, zeros, zeros, allowed, ActionTuple(continuous=cont, discrete=disc))


class RandomTrainer(Trainer):
    """Never learns; counts what it was given."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.trajectories_seen = 0
        self.updates = 0
        self.actions_seen: list[np.ndarray] = []

    def add_experience(self, traj: Trajectory) -> None:
        self.trajectories_seen += 1
        self.actions_seen.append(traj.continuous)

    def ready_to_update(self) -> bool:
        return False

    def update(self) -> None:  # pragma: no cover - never ready
        self.updates += 1

    def policy_snapshot(self) -> PolicySnapshot:
        action_spec = self.spec.action_spec
        weights = {"n_cont": np.array(action_spec.continuous_size), "branches": np.array(action_spec.discrete_branches)}
        return PolicySnapshot(self.policy_version, weights, muscle="tests.support.plugins:RandomMuscle")

    def state(self) -> dict[str, Any]:
        return {"global_step": self.step, "note": str(self.hp.get("note", ""))}

    def load_state(self, state: dict[str, Any], resume: bool) -> None:
        if resume:
            self.step = int(state["global_step"])


class ClippedReward:
    """A user objective: the environment reward clipped to [low, high], plus a bonus at terminal steps."""

    def __init__(self, low: float = -1.0, high: float = 1.0, terminal_bonus: float = 0.0):
        self.low, self.high, self.terminal_bonus = low, high, terminal_bonus

    def __call__(self, batch: ObjectiveBatch) -> np.ndarray:
        return np.clip(batch.reward, self.low, self.high) + self.terminal_bonus * batch.terminated


class GoalExpertMuscle:
    """The expert of tests.support.simple_envs.GoalReach: every action moves towards the goal its
    observations show (the first observation's mean is the goal's sign). Continuous actions are
    kept as 3 x the sent action, as ml_arl's muscle keeps raw samples whose clamp(a, -3, 3) / 3 is sent."""

    def __init__(self, weights: dict[str, np.ndarray], deterministic: bool, seed: int):
        self.set_weights(weights)

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        self.n_cont = int(weights["n_cont"])
        self.branches = tuple(int(b) for b in weights["branches"])

    def direction(self, obs: list[np.ndarray]) -> np.ndarray:
        """[n] -1 or +1: where each agent's goal is."""
        n = obs[0].shape[0]
        return np.sign(obs[0].reshape(n, -1).mean(axis=1)).astype(np.float32)

    def act(self, obs: list[np.ndarray], allowed: Optional[np.ndarray]) -> ActionInfo:
        n = obs[0].shape[0]
        goal = self.direction(obs)
        sent = np.repeat(goal[:, None], self.n_cont, axis=1)
        disc = np.repeat((goal[:, None] > 0).astype(np.int32), len(self.branches), axis=1)
        zeros = np.zeros(n, np.float32)
        return ActionInfo(3.0 * sent, disc, zeros, zeros, allowed, ActionTuple(continuous=sent, discrete=disc))


class GoalExpertTrainer(RandomTrainer):
    """Acts with GoalExpertMuscle; never learns."""

    muscle = "tests.support.plugins:GoalExpertMuscle"

    def policy_snapshot(self) -> PolicySnapshot:
        snapshot = super().policy_snapshot()
        return PolicySnapshot(snapshot.version, snapshot.weights, muscle=self.muscle)


class KeyboardMuscle(GoalExpertMuscle):
    """A keyboard heuristic on ml_arl's builtin Reach (observations [position, goal - position]):
    the arrow towards the goal held down, so every continuous action is exactly -1 or +1, as
    Unity's ``Input.GetAxis`` records them."""

    def direction(self, obs: list[np.ndarray]) -> np.ndarray:
        return np.where(obs[0][:, 1] >= 0, 1.0, -1.0).astype(np.float32)


class KeyboardTrainer(GoalExpertTrainer):
    """Acts with KeyboardMuscle; never learns."""

    muscle = "tests.support.plugins:KeyboardMuscle"
