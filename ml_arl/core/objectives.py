"""Objectives: what an agent wants, computed from what the environment rewards.

The environment rates the state (its reward); an objective turns that rating into one agent's
own goal, as palaestrAI keeps them apart. An attacker's objective can be the negated reward of
the defender it plays against. Objectives run where trajectories are assembled (in the
worker), once per behavior and step, vectorised over the agents that received a reward.

A user objective is a class named by import path (``objective: {name: pkg.module:Class,
params: {...}}``); it is built with ``Class(**params)`` and called with an ``ObjectiveBatch``;
it returns one float per row. This module must not import torch.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional, Protocol

import numpy as np

from ml_arl.core.import_path import ImportPathError, is_import_path, resolve


class ObjectiveBatch(NamedTuple):
    """One step of one behavior: a row per agent that received a reward."""

    obs: list[np.ndarray]  # the observations that came with the reward, one [n, *shape] array per observation
    continuous: np.ndarray  # [n, n_cont] the actions that led to this reward (raw policy output)
    discrete: np.ndarray  # [n, n_branches]
    reward: np.ndarray  # [n] float32 environment reward
    group_reward: np.ndarray  # [n] float32 group reward (0 without groups)
    terminated: np.ndarray  # [n] bool: the episode ended in a terminal state
    interrupted: np.ndarray  # [n] bool: the episode was cut (max steps)
    agent_id: np.ndarray  # [n] int


class Objective(Protocol):
    def __call__(self, batch: ObjectiveBatch) -> np.ndarray: ...


class EnvironmentReward:
    """The environment reward as it is (the default; a defender's objective)."""

    def __call__(self, batch: ObjectiveBatch) -> np.ndarray:
        return batch.reward


class NegatedReward:
    """Minus the environment reward: an attacker playing against the environment's defender."""

    def __call__(self, batch: ObjectiveBatch) -> np.ndarray:
        return -batch.reward


class ScaledSum:
    """``scale * (reward_weight * reward + group_reward_weight * group_reward) + offset``."""

    def __init__(self, scale: float = 1.0, reward_weight: float = 1.0, group_reward_weight: float = 0.0, offset: float = 0.0):
        self.scale = float(scale)
        self.reward_weight = float(reward_weight)
        self.group_reward_weight = float(group_reward_weight)
        self.offset = float(offset)

    def __call__(self, batch: ObjectiveBatch) -> np.ndarray:
        total = self.reward_weight * batch.reward + self.group_reward_weight * batch.group_reward
        return (self.scale * total + self.offset).astype(np.float32)


BUILTIN_OBJECTIVES: dict[str, type] = {
    "reward": EnvironmentReward,
    "negated_reward": NegatedReward,
    "scaled_sum": ScaledSum,
}
ROLE_OBJECTIVES = {"defender": "reward", "attacker": "negated_reward"}


class ObjectiveError(ValueError):
    """The objective named in the config cannot be built; the message is one line."""


def objective_class(name: str) -> type:
    if name in BUILTIN_OBJECTIVES:
        return BUILTIN_OBJECTIVES[name]
    if not is_import_path(name):
        raise ObjectiveError(
            f"{name!r} is neither a built-in objective ({', '.join(BUILTIN_OBJECTIVES)}) nor an import path pkg.module:Class"
        )
    try:
        cls = resolve(name)
    except ImportPathError as err:
        raise ObjectiveError(str(err)) from None
    if not callable(cls):
        raise ObjectiveError(f"{name} is not a class")
    return cls  # type: ignore[no-any-return]


def build_objective(name: str, params: Optional[dict[str, Any]] = None) -> Objective:
    cls = objective_class(name)
    try:
        objective = cls(**(params or {}))
    except TypeError as err:
        raise ObjectiveError(f"{name}: bad params ({err})") from None
    if not callable(objective):
        raise ObjectiveError(f"{name}: instances are not callable; an objective implements __call__(batch)")
    return objective  # type: ignore[no-any-return]


def evaluate(objective: Objective, batch: ObjectiveBatch) -> np.ndarray:
    """Run an objective and check that it returned one finite-or-not float per row."""
    out = np.asarray(objective(batch), dtype=np.float32).reshape(-1)
    if out.shape[0] != batch.reward.shape[0]:
        raise ValueError(
            f"objective {type(objective).__name__} returned {out.shape[0]} values for {batch.reward.shape[0]} agents"
        )
    return out
