"""GridDefense's rule-based players (ml_arl.envs.games.grid_defense): what a feeder operator uses today,
and the simple attack a learned attacker must beat.

Both read the bus voltages of the observation: its first 32 values are (v - 1) / VOLT_SCALE of
buses 1..32. Runs in the workers: no torch.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ml_arl.acting.muscle import ActionInfo
from ml_arl.envs.games.grid_defense import ATTACK_BUSES, PV_BUSES, VOLT_SCALE
from ml_arl.rules.fixed_policy import FixedPolicy

N_BUSES = 32


def _voltages(obs: list[np.ndarray]) -> np.ndarray:
    """[n, 32] bus voltages (p.u.) of buses 1..32."""
    return 1.0 + obs[0][:, :N_BUSES].astype(np.float64) * VOLT_SCALE


def _grid_problem(spec: Any, name: str, role: str, actions: int) -> Optional[str]:
    shapes = [tuple(o.shape) for o in spec.observation_specs]
    if spec.action_spec.continuous_size != actions or spec.action_spec.discrete_branches or not shapes or shapes[0][0] < N_BUSES:
        return (f"policy {name} plays GridDefense's {role} ({actions} continuous actions, an observation of the 32 bus "
                f"voltages first); this behavior has {spec.action_spec.continuous_size} continuous actions, "
                f"{len(spec.action_spec.discrete_branches)} branches and observations {shapes}")
    return None


class VoltVarDroop(FixedPolicy):
    """The IEEE 1547-2018 default Category B volt-var curve on each PV inverter, from the voltage of
    its own bus: reactive power +q_max (per unit of the inverter's nameplate) at or below v1, 0
    between v2 and v3, -q_max at or above v4, linear between. Params (the standard's defaults):
    ``v1`` 0.92, ``v2`` 0.98, ``v3`` 1.02, ``v4`` 1.08, ``q_max`` 0.44, and ``action_per_pu`` 2.0,
    GridDefense's action for 1 p.u. of nameplate reactive power (its inverters are rated 1.2 x the
    panels and the action's full scale is 0.6 x the panels)."""

    @classmethod
    def check(cls, spec: Any) -> Optional[str]:
        return _grid_problem(spec, "volt_var_droop", "Defender", len(PV_BUSES))

    def configure(self, params: dict[str, Any]) -> None:
        known = {"v1": 0.92, "v2": 0.98, "v3": 1.02, "v4": 1.08, "q_max": 0.44, "action_per_pu": 2.0}
        unknown = sorted(set(params) - set(known))
        if unknown:
            raise ValueError(f"policy volt_var_droop: unknown params {', '.join(unknown)}; it takes {', '.join(known)}")
        p = {**known, **{k: float(v) for k, v in params.items()}}
        if not p["v1"] < p["v2"] <= p["v3"] < p["v4"]:
            raise ValueError("policy volt_var_droop: needs v1 < v2 <= v3 < v4")
        self.p = p

    def act(self, obs: list[np.ndarray], allowed: Optional[np.ndarray]) -> ActionInfo:
        p = self.p
        v = _voltages(obs)[:, PV_BUSES - 1]
        q = np.interp(v, [p["v1"], p["v2"], p["v3"], p["v4"]], [p["q_max"], 0.0, 0.0, -p["q_max"]])
        n = v.shape[0]
        return self.info(q * p["action_per_pu"], np.zeros((n, 0), np.int32), allowed)


class GreedyAttacker(FixedPolicy):
    """Pushes the feeder's weakest voltage further out of its band [``low``, ``high``] (0.95, 1.05):
    when the lowest voltage is nearer its bound than the highest is to its own, every compromised
    load draws its most (+1, lowering voltages), else its least (-1, raising them)."""

    @classmethod
    def check(cls, spec: Any) -> Optional[str]:
        return _grid_problem(spec, "greedy", "Attacker", len(ATTACK_BUSES))

    def configure(self, params: dict[str, Any]) -> None:
        unknown = sorted(set(params) - {"low", "high"})
        if unknown:
            raise ValueError(f"policy greedy: unknown params {', '.join(unknown)}; it takes low, high")
        self.low, self.high = float(params.get("low", 0.95)), float(params.get("high", 1.05))

    def act(self, obs: list[np.ndarray], allowed: Optional[np.ndarray]) -> ActionInfo:
        v = _voltages(obs)
        below = self.low - v.min(axis=1)  # how far the lowest voltage is past (> 0) or inside (< 0) its bound
        above = v.max(axis=1) - self.high
        direction = np.where(below >= above, 1.0, -1.0)
        cont = np.repeat(direction[:, None], len(ATTACK_BUSES), axis=1)
        return self.info(cont, np.zeros((v.shape[0], 0), np.int32), allowed)
