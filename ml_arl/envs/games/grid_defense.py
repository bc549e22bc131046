"""GridDefense: volt/var defence of a distribution feeder against a load-shifting attacker.

Feeder: the 33-bus radial test feeder of Baran & Wu (M. E. Baran, F. F. Wu, "Network
reconfiguration in distribution systems for loss reduction and load balancing", IEEE Trans.
Power Delivery 4(2), 1989), 12.66 kV, line impedances and bus loads as published (the five tie
switches open). Bus 0 is the substation (slack, 1.0 p.u.).

Each of ``num_areas`` independent copies of the feeder has one "Defender" agent and one
"Attacker" agent. One episode is one day of ``steps_per_day`` steps starting at 0:00 (decision
``k`` is at hour ``24 k / steps_per_day``); it ends for both behaviors at the same step,
reported as interrupted (a time cut). Per episode and area, the synthetic load and PV curves
(``load_profile``, ``pv_profile``) get a random day factor and a small per-step, per-bus noise.

- Defender (6 continuous actions): reactive power of the PV inverters at ``PV_BUSES``,
  action ``a`` in [-1, 1] -> ``a * Q_MAX_MVAR`` injected (+1 raises the voltage).
- Attacker (3 continuous actions): active power shift of the compromised loads at
  ``ATTACK_BUSES``, ``a`` -> ``+a * ATTACK_LIMIT_MW * attack_strength`` extra consumption
  (+1 lowers the voltage).

Actions are set-points held until the next decision; a behavior that sets no action in a step
gets zeros. The action of decision ``k`` acts at hour ``h_k``; the observation that follows
shows the voltages at ``h_{k+1}`` with those set-points still in place.

Observations (``VOLT_SCALE`` = 0.05 p.u.):
  Defender (42): (v - 1) / VOLT_SCALE of buses 1..32, sin and cos of the hour, the load level
  (mean fraction of peak load) and PV level (mean fraction of rating), the held inverter
  set-points (6).
  Attacker (39): the same first 36 values, then the held attack set-points (3).

Sizing: six PV units (4.4 MW in all) make voltages rise above 1.05 around noon, and the evening
peak pulls the feeder end below 0.95; the inverters (0.6 x panel rating of reactive power) can
correct both. The attacker shifts up to 0.4 MW at each of three loads at the ends of the feeder.

Reward (the same for both behaviors, per step, over the 32 non-slack buses ``b``)::

    r = mean_b[0.95 <= v_b <= 1.05] - penalty * sum_b (max(0, v_b - 1.05) + max(0, 0.95 - v_b))

Voltages come from the DistFlow branch-flow equations (exact for a radial feeder), solved by a
few fixed-point iterations starting from the linearised DistFlow solution, vectorised over areas.

Environment parameters (constructor keywords, ``--env-args``, or ``set_environment_parameters``,
the latter applied from the next episode on; ``environment_parameters`` in the config, curricula
included, arrive through it): ``load_scale`` (1.0, sensible 0.8..1.2), ``pv_scale`` (1.0,
sensible 0.5..1.5), ``attack_strength`` (1.0; 0 disables the attacker), ``penalty`` (2.0),
``noise`` (1.0, scales the random variation) and ``steps_per_day``. Each is a number or a
sampler (``ml_arl.envs.parameter_values``), drawn once per day for every area.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
from mlagents_envs.base_env import (
    ActionSpec,
    ActionTuple,
    BaseEnv,
    BehaviorMapping,
    BehaviorSpec,
    DecisionSteps,
    TerminalSteps,
)

from ml_arl.core.behavior_specs import vector_obs_spec
from ml_arl.envs.parameter_values import draw, is_value

V_BASE_KV = 12.66
S_BASE_MVA = 1.0
Z_BASE_OHM = V_BASE_KV**2 / S_BASE_MVA

# Baran & Wu (1989): (from bus, to bus, R ohm, X ohm) per line; line l feeds bus l + 1.
LINES: tuple[tuple[int, int, float, float], ...] = (
    (0, 1, 0.0922, 0.0470), (1, 2, 0.4930, 0.2511), (2, 3, 0.3660, 0.1864), (3, 4, 0.3811, 0.1941),
    (4, 5, 0.8190, 0.7070), (5, 6, 0.1872, 0.6188), (6, 7, 0.7114, 0.2351), (7, 8, 1.0300, 0.7400),
    (8, 9, 1.0440, 0.7400), (9, 10, 0.1966, 0.0650), (10, 11, 0.3744, 0.1238), (11, 12, 1.4680, 1.1550),
    (12, 13, 0.5416, 0.7129), (13, 14, 0.5910, 0.5260), (14, 15, 0.7463, 0.5450), (15, 16, 1.2890, 1.7210),
    (16, 17, 0.7320, 0.5740), (1, 18, 0.1640, 0.1565), (18, 19, 1.5042, 1.3554), (19, 20, 0.4095, 0.4784),
    (20, 21, 0.7089, 0.9373), (2, 22, 0.4512, 0.3083), (22, 23, 0.8980, 0.7091), (23, 24, 0.8960, 0.7011),
    (5, 25, 0.2030, 0.1034), (25, 26, 0.2842, 0.1447), (26, 27, 1.0590, 0.9337), (27, 28, 0.8042, 0.7006),
    (28, 29, 0.5075, 0.2585), (29, 30, 0.9744, 0.9630), (30, 31, 0.3105, 0.3619), (31, 32, 0.3410, 0.5302),
)
# Baran & Wu (1989): peak (P kW, Q kvar) of buses 1..32.
LOADS_KW: tuple[tuple[float, float], ...] = (
    (100, 60), (90, 40), (120, 80), (60, 30), (60, 20), (200, 100), (200, 100), (60, 20),
    (60, 20), (45, 30), (60, 35), (60, 35), (120, 80), (60, 10), (60, 20), (60, 20),
    (90, 40), (90, 40), (90, 40), (90, 40), (90, 40), (90, 50), (420, 200), (420, 200),
    (60, 25), (60, 25), (60, 20), (120, 70), (200, 600), (150, 70), (210, 100), (60, 40),
)
N_BUS = len(LOADS_KW) + 1

PARENT = np.array([f for f, _, _, _ in LINES])
R_PU = np.array([r for _, _, r, _ in LINES]) / Z_BASE_OHM
X_PU = np.array([x for _, _, _, x in LINES]) / Z_BASE_OHM
LOAD_P_MW = np.concatenate([[0.0], [p / 1000 for p, _ in LOADS_KW]])
LOAD_Q_MVAR = np.concatenate([[0.0], [q / 1000 for _, q in LOADS_KW]])


def _path_matrix() -> np.ndarray:
    """[k, l] = 1 when line l lies on the path from the substation to bus k + 1."""
    path = np.zeros((N_BUS - 1, N_BUS - 1))
    for k in range(N_BUS - 1):
        bus = k + 1
        while bus != 0:
            path[k, bus - 1] = 1.0
            bus = int(PARENT[bus - 1])
    return path


PATH = _path_matrix()

# PV units (bus, rated MW); each inverter may exchange up to Q_MAX_MVAR at any time of day.
PV_BUSES = np.array([13, 17, 21, 24, 29, 32])
PV_RATING_MW = np.array([0.8, 0.8, 0.6, 0.9, 0.8, 0.8])
Q_MAX_MVAR = 0.6 * PV_RATING_MW  # half of an inverter rated 1.2 x the panels
# Compromised flexible loads and their active power shift limit.
ATTACK_BUSES = np.array([17, 24, 32])
ATTACK_LIMIT_MW = np.array([0.4, 0.4, 0.4])

V_MIN, V_MAX = 0.95, 1.05
VOLT_SCALE = 0.05


def _bump(hour: np.ndarray, centre: float, width: float) -> np.ndarray:
    d = (hour - centre + 12.0) % 24.0 - 12.0
    return np.exp(-0.5 * (d / width) ** 2)


def _raw_load(hour: np.ndarray) -> np.ndarray:
    return 0.25 * _bump(hour, 8.0, 1.5) + 0.1 * _bump(hour, 13.0, 3.0) + 0.65 * _bump(hour, 19.5, 2.2)


_RAW_GRID = _raw_load(np.linspace(0.0, 24.0, 24 * 60, endpoint=False))
_RAW_MIN, _RAW_MAX = float(_RAW_GRID.min()), float(_RAW_GRID.max())


def load_profile(hour: np.ndarray | float) -> np.ndarray:
    """Residential load (fraction of peak, 0.4..1.0): morning peak ~8h, evening peak ~19:30."""
    raw = _raw_load(np.asarray(hour, dtype=np.float64))
    return 0.4 + 0.6 * (raw - _RAW_MIN) / (_RAW_MAX - _RAW_MIN)


def pv_profile(hour: np.ndarray | float) -> np.ndarray:
    """Clear-sky PV output (fraction of rating): a bell from 6h to 20h, peak at 13h."""
    h = np.asarray(hour, dtype=np.float64) % 24.0
    return np.where((h > 6.0) & (h < 20.0), np.sin(np.pi * (h - 6.0) / 14.0) ** 2, 0.0)


def _distflow_matrices() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """DistFlow as affine maps of the bus loads x = [p, q] and the line losses ell (see distflow_voltages).

    Columns of ``bias + x @ W_LOAD + ell @ W_LOSS``: line flows P (32), Q (32), squared voltages of buses
    1..32 (32), and a constant 1 (the substation's squared voltage). ``FROM_COL``: the column of each
    line's sending-end squared voltage."""
    n = N_BUS - 1
    d_r, d_x = np.diag(R_PU), np.diag(X_PU)
    zero = np.zeros((n, n))
    w_load = np.block([
        [PATH, zero, -2.0 * PATH @ d_r @ PATH.T, np.zeros((n, 1))],
        [zero, PATH, -2.0 * PATH @ d_x @ PATH.T, np.zeros((n, 1))],
    ])
    loss_drop = 2.0 * d_r @ PATH @ d_r @ PATH.T + 2.0 * d_x @ PATH @ d_x @ PATH.T - np.diag(R_PU**2 + X_PU**2) @ PATH.T
    w_loss = np.concatenate([d_r @ PATH, d_x @ PATH, -loss_drop, np.zeros((n, 1))], axis=1)
    bias = np.concatenate([np.zeros(2 * n), np.ones(n + 1)])
    from_col = np.where(PARENT == 0, 3 * n, 2 * n + PARENT - 1)
    return w_load, w_loss, bias, from_col


W_LOAD, W_LOSS, _BIAS, _FROM_COL = _distflow_matrices()


def distflow_voltages(p_load_mw: np.ndarray, q_load_mvar: np.ndarray, iterations: int = 3) -> np.ndarray:
    """Bus voltage magnitudes (p.u.) for net bus loads [..., N_BUS] (MW, MVAr, consumption positive; bus 0,
    the substation, is ignored and held at 1.0 p.u.).

    DistFlow (branch flow, exact for a radial feeder): the flow into line l is the sum, over the buses
    it feeds, of their load plus the losses of the lines on the way, P_l = sum (p + r ell), likewise Q;
    v_to^2 = v_from^2 - 2 (r P + x Q) + (r^2 + x^2) ell, with losses ell = (P^2 + Q^2) / v_from^2.
    The first pass (ell = 0) is LinDistFlow; each further pass updates the losses (fixed point)."""
    p = np.asarray(p_load_mw, dtype=np.float64)
    q = np.asarray(q_load_mvar, dtype=np.float64)
    shape = p.shape
    x = np.concatenate([p.reshape(-1, N_BUS)[:, 1:], q.reshape(-1, N_BUS)[:, 1:]], axis=1) / S_BASE_MVA
    base = _BIAS + x @ W_LOAD
    state = base
    n = N_BUS - 1
    for _ in range(iterations):
        ell = (state[:, :n] ** 2 + state[:, n : 2 * n] ** 2) / state[:, _FROM_COL]
        state = base + ell @ W_LOSS
    vm = np.sqrt(np.maximum(state[:, 2 * n :], 1e-6))
    return np.concatenate([vm[:, -1:], vm[:, :-1]], axis=1).reshape(shape)


def voltage_reward(vm: np.ndarray, penalty: float) -> np.ndarray:
    """Share of buses 1..N inside [V_MIN, V_MAX] minus ``penalty`` x the summed excursion outside it."""
    v = vm[..., 1:]
    inside = ((v >= V_MIN) & (v <= V_MAX)).mean(axis=-1)
    excursion = (np.maximum(v - V_MAX, 0.0) + np.maximum(V_MIN - v, 0.0)).sum(axis=-1)
    return inside - penalty * excursion


PARAMETER_DEFAULTS: dict[str, float] = {
    "load_scale": 1.0,
    "pv_scale": 1.0,
    "attack_strength": 1.0,
    "penalty": 2.0,
    "noise": 1.0,
    "steps_per_day": 24.0,
}


def _lowest(key: str) -> float:
    return 1.0 if key == "steps_per_day" else 0.0


def check_parameters(params: dict[str, Any]) -> dict[str, Any]:
    """Validated copy of ``params``: keys of PARAMETER_DEFAULTS, each a number (non-negative;
    steps_per_day >= 1) or a sampler (ml_arl.envs.parameter_values; drawn every day, raised to that
    lower bound)."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        if key not in PARAMETER_DEFAULTS:
            raise ValueError(f"GridDefense: unknown environment parameter {key!r}; valid: {', '.join(PARAMETER_DEFAULTS)}")
        if not is_value(value):
            raise ValueError(f"GridDefense: environment parameter {key}={value!r} is neither a number nor a sampler")
        if not isinstance(value, dict):
            value = float(value)
            if not np.isfinite(value) or value < _lowest(key):
                raise ValueError(f"GridDefense: environment parameter {key}={value} out of range")
        out[key] = value
    return out


DEFENDER = "Defender"
ATTACKER = "Attacker"


def _vector_spec(obs_size: int, action_size: int) -> BehaviorSpec:
    obs = vector_obs_spec(obs_size)
    return BehaviorSpec([obs], ActionSpec(action_size, ()))


class GridDefense(BaseEnv):
    """``num_areas`` copies of the feeder, each with one Defender and one Attacker agent (see the module doc).

    Defender agent ids are 0..num_areas-1, Attacker ids num_areas..2*num_areas-1 (agent ``i`` of each
    behavior is area ``i``). All areas start and end their episodes together."""

    def __init__(self, seed: int = 0, num_areas: int = 1, steps_per_day: int = 24, **params: Any):
        self.num_areas = num_areas
        self.rng = np.random.default_rng(seed)
        self._pending: dict[str, Any] = {**PARAMETER_DEFAULTS, "steps_per_day": float(steps_per_day), **check_parameters(params)}
        self.params: dict[str, float] = {}  # this day's values (set by _new_day)
        n_def, n_att = len(PV_BUSES), len(ATTACK_BUSES)
        self._specs = {
            DEFENDER: _vector_spec(N_BUS - 1 + 4 + n_def, n_def),
            ATTACKER: _vector_spec(N_BUS - 1 + 4 + n_att, n_att),
        }
        self._ids = {
            DEFENDER: np.arange(num_areas, dtype=np.int32),
            ATTACKER: np.arange(num_areas, 2 * num_areas, dtype=np.int32),
        }
        self._zero_i = np.zeros(num_areas, np.int32)
        self._zero_f = np.zeros(num_areas, np.float32)
        self._held = {DEFENDER: np.zeros((num_areas, n_def)), ATTACKER: np.zeros((num_areas, n_att))}
        self._pending_actions: dict[str, Optional[np.ndarray]] = {DEFENDER: None, ATTACKER: None}
        self._steps: dict[str, tuple[DecisionSteps, TerminalSteps]] = {}
        self.k = 0  # decision index within the day
        self.steps_per_day = steps_per_day
        self._op: tuple[np.ndarray, np.ndarray, np.ndarray] = (np.zeros((num_areas, N_BUS)),) * 3
        self._no_terminal = {name: TerminalSteps.empty(spec) for name, spec in self._specs.items()}
        self._new_day()

    # --- environment parameters
    def set_environment_parameters(self, params: dict[str, Any]) -> None:
        """Change parameters (keys of PARAMETER_DEFAULTS; numbers or samplers) from the next episode on."""
        self._pending.update(check_parameters(params))

    # --- physics
    def _new_day(self) -> None:
        """Apply pending parameters (a sampler is drawn: one value per day for every area) and
        draw the day's loads and PV output of every area."""
        self.params = prm = {
            key: max(_lowest(key), draw(value, self.rng)) if isinstance(value, dict) else value
            for key, value in self._pending.items()
        }
        self.steps_per_day = max(1, int(round(prm["steps_per_day"])))
        n, s, sd = self.num_areas, self.steps_per_day + 1, 0.05 * prm["noise"]
        hours = 24.0 * np.arange(s) / self.steps_per_day
        day_load = self.rng.normal(1.0, sd, (n, 1, 1))
        day_pv = 1.0 - self.rng.uniform(0.0, 4.0 * sd, (n, 1, 1))  # clouds: up to 20% less at noise=1
        load_mult = np.clip(day_load * self.rng.normal(1.0, 0.5 * sd, (n, s, N_BUS)), 0.0, None)
        pv_mult = np.clip(day_pv * self.rng.normal(1.0, 0.5 * sd, (n, s, len(PV_BUSES))), 0.0, None)
        # [area, decision, ...]: load level per bus, PV output (MW), and the observed context.
        self._level = prm["load_scale"] * load_profile(hours)[None, :, None] * load_mult
        self._pv_mw = prm["pv_scale"] * pv_profile(hours)[None, :, None] * PV_RATING_MW * pv_mult
        angle = 2.0 * np.pi * hours / 24.0
        self._context = np.concatenate([
            np.broadcast_to(np.stack([np.sin(angle), np.cos(angle)], 1), (n, s, 2)),
            self._level.mean(axis=2, keepdims=True),
            (self._pv_mw / PV_RATING_MW).mean(axis=2, keepdims=True),
        ], axis=2)
        for held in self._held.values():
            held[:] = 0.0
        self.k = 0

    def net_load(self, k: int, defend: np.ndarray, attack: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Net bus loads (MW, MVAr; consumption positive; [num_areas, N_BUS]) at decision ``k`` of the day
        for held set-points ``defend`` [num_areas, 6] and ``attack`` [num_areas, 3] in [-1, 1]."""
        level = self._level[:, k]
        p = level * LOAD_P_MW
        q = level * LOAD_Q_MVAR
        p[:, PV_BUSES] -= self._pv_mw[:, k]
        q[:, PV_BUSES] -= defend * Q_MAX_MVAR
        p[:, ATTACK_BUSES] += attack * (ATTACK_LIMIT_MW * self.params["attack_strength"])
        return p, q

    def operating_point(self, area: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(net P MW, net Q MVAr, voltages p.u.), each [N_BUS], of ``area`` in the last step's reward."""
        p, q, vm = self._op
        return p[area].copy(), q[area].copy(), vm[area].copy()

    def _observe(self, k: int, vm: np.ndarray) -> dict[str, np.ndarray]:
        common = np.concatenate([(vm[:, 1:] - 1.0) / VOLT_SCALE, self._context[:, k]], axis=1)
        return {name: np.concatenate([common, held], 1).astype(np.float32) for name, held in self._held.items()}

    def _decisions(self, obs: dict[str, np.ndarray], reward: np.ndarray) -> dict[str, DecisionSteps]:
        return {
            name: DecisionSteps([obs[name]], reward, self._ids[name], None, self._zero_i, self._zero_f)
            for name in self._specs
        }

    def _start_observation(self) -> dict[str, np.ndarray]:
        p, q = self.net_load(0, self._held[DEFENDER], self._held[ATTACKER])
        return self._observe(0, distflow_voltages(p, q))

    # --- BaseEnv
    @property
    def behavior_specs(self) -> BehaviorMapping:
        return BehaviorMapping(dict(self._specs))

    def reset(self) -> None:
        self._new_day()
        self._pending_actions = {DEFENDER: None, ATTACKER: None}
        decisions = self._decisions(self._start_observation(), self._zero_f)
        self._steps = {name: (decisions[name], self._no_terminal[name]) for name in self._specs}

    def step(self) -> None:
        if not self._steps:
            self.reset()
        for name, act in self._pending_actions.items():
            self._held[name] = np.zeros_like(self._held[name]) if act is None else np.clip(act, -1.0, 1.0)
        self._pending_actions = {DEFENDER: None, ATTACKER: None}
        k, n = self.k, self.num_areas
        defend, attack = self._held[DEFENDER], self._held[ATTACKER]
        # The set-points act now (reward) and stay in place for the next observation: one batched solve.
        p_now, q_now = self.net_load(k, defend, attack)
        p_next, q_next = self.net_load(k + 1, defend, attack)
        vm = distflow_voltages(np.concatenate([p_now, p_next]), np.concatenate([q_now, q_next]))
        self._op = (p_now, q_now, vm[:n])
        reward = voltage_reward(vm[:n], self.params["penalty"]).astype(np.float32)
        obs = self._observe(k + 1, vm[n:])
        self.k = k + 1
        if self.k < self.steps_per_day:
            decisions = self._decisions(obs, reward)
            self._steps = {name: (decisions[name], self._no_terminal[name]) for name in self._specs}
            return
        interrupted = np.ones(n, dtype=bool)
        terminals = {
            name: TerminalSteps([obs[name]], reward, interrupted, self._ids[name], self._zero_i, self._zero_f)
            for name in self._specs
        }
        self._new_day()
        decisions = self._decisions(self._start_observation(), self._zero_f)
        self._steps = {name: (decisions[name], terminals[name]) for name in self._specs}

    def get_steps(self, behavior_name: str) -> tuple[DecisionSteps, TerminalSteps]:
        self._check(behavior_name)
        if not self._steps:
            self.reset()
        return self._steps[behavior_name]

    def set_actions(self, behavior_name: str, action: ActionTuple) -> None:
        self._check(behavior_name)
        self._pending_actions[behavior_name] = np.asarray(action.continuous, dtype=np.float64).reshape(
            self._held[behavior_name].shape
        )

    def set_action_for_agent(self, behavior_name: str, agent_id: int, action: ActionTuple) -> None:
        self._check(behavior_name)
        current = self._pending_actions[behavior_name]
        if current is None:
            current = self._pending_actions[behavior_name] = np.zeros_like(self._held[behavior_name])
        current[int(agent_id) - int(self._ids[behavior_name][0])] = np.asarray(action.continuous).reshape(-1)

    def _check(self, behavior_name: str) -> None:
        if behavior_name not in self._specs:
            raise KeyError(f"GridDefense has no behavior {behavior_name!r}; behaviors: {', '.join(self._specs)}")

    def close(self) -> None:
        pass
