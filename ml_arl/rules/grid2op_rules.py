"""Grid2Op's own baseline players for ``--env grid2op:<name>`` (ml_arl.envs.adapters.grid2op_env;
docs/grid2op.md), as fixed policies on the adapter's discrete actions:

``grid2op_do_nothing`` (Operator): grid2op's DoNothingAgent, always action 0.
``grid2op_reconnect`` (Operator): grid2op's RecoPowerlineAgent rule: reconnect a disconnected line
as soon as its cooldown is over (the first allowed of actions 1..``lines``), else do nothing.
``lines`` (param, default 20: case14) is the grid's number of lines.
``grid2op_greedy`` (Operator, ``simulate=true``): the one-step greedy teacher of the L2RPN agents: the action
whose forecast highest line load (the ``simulated_rho`` observation) is lowest, unless it is not lower than the
reconnect rule's choice by ``margin`` (param, default 0.001), then the rule's choice; ``lines`` as above.
``random_line_attack`` (Opponent): grid2op's RandomLineOpponent: whenever an attack is allowed
(the adapter's mask: budget, cooldown, no attack running) it disconnects one of the allowed lines,
drawn uniformly; ``probability`` (param, default 1) of attacking when it may.

They read only the action mask, not the observation (``grid2op_greedy``: the forecasts). Runs in the workers: no torch, no grid2op.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ml_arl.acting.muscle import ActionInfo
from ml_arl.rules.fixed_policy import FixedPolicy


def _one_branch_problem(spec: Any, name: str, role: str, least: int) -> Optional[str]:
    action = spec.action_spec
    branches = tuple(action.discrete_branches)
    if action.continuous_size or len(branches) != 1 or branches[0] < least:
        return (f"policy {name} plays a Grid2Op {role} (one discrete branch of at least {least} actions, "
                f"--env grid2op:...); this behavior has {action.continuous_size} continuous actions and branches "
                f"{list(branches)}")
    return None


class DoNothing(FixedPolicy):
    """Always action 0 (do nothing)."""

    @classmethod
    def check(cls, spec: Any) -> Optional[str]:
        return _one_branch_problem(spec, "grid2op_do_nothing", "Operator", 1)

    def act(self, obs: list[np.ndarray], allowed: Optional[np.ndarray]) -> ActionInfo:
        n = obs[0].shape[0]
        return self.info(np.zeros((n, 0), np.float32), np.zeros((n, 1), np.int32), allowed)


class ReconnectLines(FixedPolicy):
    """Reconnects the first line it may (actions 1..lines), else does nothing."""

    @classmethod
    def check(cls, spec: Any) -> Optional[str]:
        return _one_branch_problem(spec, "grid2op_reconnect", "Operator", 2)

    def configure(self, params: dict[str, Any]) -> None:
        unknown = sorted(set(params) - {"lines"})
        if unknown:
            raise ValueError(f"policy grid2op_reconnect: unknown params {', '.join(unknown)}; it takes lines")
        self.lines = int(params.get("lines", 20))
        if self.branches and not 1 <= self.lines < self.branches[0]:
            raise ValueError(f"policy {self.weights.name}: lines={self.lines}, but the behavior has {self.branches[0]} "
                             "actions (do nothing, then one reconnection a line)")

    def act(self, obs: list[np.ndarray], allowed: Optional[np.ndarray]) -> ActionInfo:
        n = obs[0].shape[0]
        disc = np.zeros((n, 1), np.int32)
        if allowed is not None:
            reco = allowed[:, 1: 1 + self.lines]
            disc[:, 0] = np.where(reco.any(axis=1), 1 + np.argmax(reco, axis=1), 0)
        return self.info(np.zeros((n, 0), np.float32), disc, allowed)


class Greedy(ReconnectLines):
    """The allowed action with the lowest forecast line load, where it beats the reconnect rule's by ``margin``."""

    @classmethod
    def check(cls, spec: Any) -> Optional[str]:
        problem = _one_branch_problem(spec, "grid2op_greedy", "Operator", 2)
        names = [o.name for o in spec.observation_specs]
        if problem is None and (len(names) != 2 or names[1] != "simulated_rho"):
            problem = (f"policy grid2op_greedy plays on the forecasts of a Grid2Op Operator with simulate=true "
                       f"(observations vector and simulated_rho); this behavior's observations are {names}")
        return problem

    def configure(self, params: dict[str, Any]) -> None:
        unknown = sorted(set(params) - {"lines", "margin"})
        if unknown:
            raise ValueError(f"policy grid2op_greedy: unknown params {', '.join(unknown)}; it takes lines and margin")
        params = dict(params)
        self.margin = float(params.pop("margin", 0.001))
        if not self.margin >= 0.0:
            raise ValueError(f"policy grid2op_greedy: margin={self.margin} is below 0")
        super().configure(params)

    def act(self, obs: list[np.ndarray], allowed: Optional[np.ndarray]) -> ActionInfo:
        rule = super().act(obs, allowed).discrete.copy()
        forecast = np.asarray(obs[1], np.float64)
        n = forecast.shape[0]
        ok = allowed[:, : forecast.shape[1]] if allowed is not None else np.ones(forecast.shape, bool)
        scores = np.where(ok, forecast, np.inf)
        best = np.argmin(scores, axis=1)
        rows = np.arange(n)
        better = scores[rows, best] < scores[rows, rule[:, 0]] - self.margin
        rule[:, 0] = np.where(better, best, rule[:, 0])
        return self.info(np.zeros((n, 0), np.float32), rule, allowed)


class RandomLineAttack(FixedPolicy):
    """Attacks an allowed line, drawn uniformly, whenever an attack is allowed."""

    @classmethod
    def check(cls, spec: Any) -> Optional[str]:
        return _one_branch_problem(spec, "random_line_attack", "Opponent", 2)

    def configure(self, params: dict[str, Any]) -> None:
        unknown = sorted(set(params) - {"probability"})
        if unknown:
            raise ValueError(f"policy random_line_attack: unknown params {', '.join(unknown)}; it takes probability")
        self.probability = float(params.get("probability", 1.0))
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError(f"policy random_line_attack: probability={self.probability} is not in [0, 1]")

    def act(self, obs: list[np.ndarray], allowed: Optional[np.ndarray]) -> ActionInfo:
        n = obs[0].shape[0]
        size = self.branches[0] if self.branches else 1
        ok = allowed[:, :size] if allowed is not None else np.ones((n, size), bool)
        disc = np.zeros((n, 1), np.int32)
        for row in range(n):
            lines = np.flatnonzero(ok[row, 1:]) + 1
            if lines.size and self.rng.random() < self.probability:
                disc[row, 0] = self.rng.choice(lines)
        return self.info(np.zeros((n, 0), np.float32), disc, allowed)
