"""Fixed policies that play a behavior instead of its trainer: baselines to compare learned
agents with (a phase's ``play``; docs/arl.md).

A policy is a muscle (ml_arl.acting.muscle's ``Acting`` contract): built in the workers as
``Class(weights, deterministic, seed)`` with ``weights`` a ``PolicyWeights`` (its name, params and
the behavior's action spec), acting with ``act(obs, allowed)``. Built in: ``no_op`` and
``random`` for any behavior; for GridDefense (ml_arl.envs.games.grid_defense), ``volt_var_droop`` (the
IEEE 1547-2018 Category B volt-var curve on each inverter, a defender) and ``greedy`` (an attacker
that pushes the feeder's weakest voltage further out of its band). Your own: ``pkg.module:Class``
with the same constructor and ``act``; it may define ``check(spec)`` (a class method returning the
problem with the behavior's BehaviorSpec in one line, or None), which runs before it plays.
No torch here: policies run in the workers.
"""

from __future__ import annotations

from typing import Any, Optional

from ml_arl.core.import_path import resolve
from ml_arl.rules.fixed_policy import PolicyWeights
from ml_arl.settings.run import BUILTIN_POLICIES, policy_path

__all__ = ["BUILTIN_POLICIES", "PolicyWeights", "policy_path", "policy_problem"]


def policy_problem(name: str, spec: Any) -> Optional[str]:
    """What keeps policy ``name`` from playing a behavior of ``spec`` (one line), or None."""
    cls = resolve(policy_path(name))
    check = getattr(cls, "check", None)
    return check(spec) if callable(check) else None
