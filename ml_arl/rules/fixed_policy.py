"""The built-in fixed policies (ml_arl.rules): any behavior's ``no_op`` and ``random``, and
GridDefense's ``volt_var_droop`` defender and ``greedy`` attacker. Runs in the workers: no torch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
from mlagents_envs.base_env import ActionTuple

from ml_arl.acting.muscle import ActionInfo


@dataclass(frozen=True)
class PolicyWeights:
    """What a fixed policy is built with: its name, its params and the behavior's action spec."""

    name: str
    continuous: int
    branches: tuple[int, ...]
    params: dict[str, Any] = field(default_factory=dict)


class FixedPolicy:
    """The shared part: the action spec, the params, and turning chosen actions into an ActionInfo."""

    def __init__(self, weights: PolicyWeights, deterministic: bool = False, seed: int = 0):
        self.deterministic = deterministic
        self.rng = np.random.default_rng(seed)
        self.set_weights(weights)

    def set_weights(self, weights: PolicyWeights) -> None:
        self.weights = weights
        self.n_cont = int(weights.continuous)
        self.branches = tuple(int(b) for b in weights.branches)
        self.configure(dict(weights.params))

    def configure(self, params: dict[str, Any]) -> None:
        if params:
            raise ValueError(f"policy {self.weights.name}: takes no params (got {', '.join(params)})")

    def info(self, cont: np.ndarray, disc: np.ndarray, allowed: Optional[np.ndarray]) -> ActionInfo:
        n = cont.shape[0]
        cont = np.clip(cont, -1.0, 1.0).astype(np.float32)
        zeros = np.zeros(n, np.float32)
        logp = np.zeros((n, self.n_cont + len(self.branches)), np.float32)
        return ActionInfo(cont, disc.astype(np.int32), logp, zeros, allowed, ActionTuple(continuous=cont.copy(),
                                                                                     discrete=disc.astype(np.int32)))


class NoOp(FixedPolicy):
    """Does nothing: every continuous action 0, every branch its first allowed choice."""

    def act(self, obs: list[np.ndarray], allowed: Optional[np.ndarray]) -> ActionInfo:
        n = obs[0].shape[0]
        disc = np.zeros((n, len(self.branches)), np.int32)
        at = 0
        for i, size in enumerate(self.branches):
            if allowed is not None:
                disc[:, i] = np.argmax(allowed[:, at: at + size], axis=1)
            at += size
        return self.info(np.zeros((n, self.n_cont), np.float32), disc, allowed)


class Random(FixedPolicy):
    """Uniform continuous actions in [-1, 1] and uniform allowed choices on every branch."""

    def act(self, obs: list[np.ndarray], allowed: Optional[np.ndarray]) -> ActionInfo:
        n = obs[0].shape[0]
        cont = self.rng.uniform(-1.0, 1.0, (n, self.n_cont)).astype(np.float32)
        disc = np.zeros((n, len(self.branches)), np.int32)
        at = 0
        for i, size in enumerate(self.branches):
            ok = allowed[:, at: at + size] if allowed is not None else np.ones((n, size), bool)
            for row in range(n):
                choices = np.flatnonzero(ok[row])
                disc[row, i] = self.rng.choice(choices) if choices.size else 0
            at += size
        return self.info(cont, disc, allowed)
