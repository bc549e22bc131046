"""A Grid2Op environment seen through mlagents_envs' BaseEnv (docs/grid2op.md).

Behaviors, one agent each (id 0), deciding every step:

``Operator``: one discrete branch (``operator_actions``): 0 do nothing; 1..n_line reconnect line
i; then the unitary ``set_bus`` topologies (grid2op's ``get_all_unitary_topologies_set`` with
``add_alone_line=False``) of the substations with at most ``topology_max_elements`` elements,
each substation's reference topology (all on bus 1) added when missing; then, with ``redispatch``,
+step and -step on each redispatchable generator (step = ``redispatch_step`` x its max ramp).
Masked (not allowed): reconnecting a connected line or one in cooldown; a topology at a
substation in cooldown, with a disconnected element, or that is already its topology.

``Opponent`` (``opponent=true``): one branch, 0 no attack, k attack (disconnect) the k-th of
``attack_lines``. Grid2Op's own opponent machinery (``OpponentSpace``) enforces the budget, the
cooldown and the duration: the adapter plugs the behavior's choice in through
``ExternalLineOpponent``, a grid2op ``BaseOpponent`` that returns it. Masked: every attack while
grid2op would refuse one at this step (an attack still running, the cooldown, a budget below an
attack's cost), and lines already disconnected.

Observations (float32): ``observation=subset`` (default) is, in this order, rho (n_line, clipped
to [0, 10]), line_status (n_line, 0/1), topo_vect (dim_topo: 0 bus 1, 1 bus 2, -1 disconnected),
gen_p / gen_pmax (n_gen), load_p / 100 MW (n_load), actual_dispatch / gen_pmax (n_gen),
time_before_cooldown_line / 12 (n_line), time_before_cooldown_sub / 12 (n_sub), and the time of
day as sin and cos (2); ``observation=vect`` is ``obs.to_vect()``. The Opponent's has three more
values: its budget / attack_duration, the steps its attack still runs / attack_duration, and its
cooldown / attack_cooldown.

With ``safe_max_rho`` the Operator decides only when the highest line load is at or above it (and
at an episode's first step): below it the expert rule plays the steps (reconnect a line when one
may be, else do nothing), and the next decision's reward is the sum over the steps in between. With
no Opponent behavior the adapter plays those steps within one ``step()``; with one (``opponent=true``),
each ``step()`` is one grid2op step, the Opponent decides at each, and the Operator has no decision
step (ML-Agents' agents that request no decision) until the line load reaches the threshold again.

Rewards: ``survival`` +1 each step after which the grid still runs (0 on the step that ends it
in a game over), ``grid2op`` the environment's reward class as given. The Opponent gets the
Operator's reward (an attacker's objective is its negation: ``role: attacker``). A game over
ends the episode (terminated); the end of the chronic ends it as interrupted, so the value is
bootstrapped. The environment then resets on its own, in the same step.

Seeding (a worker's ``seed``): episode k after a ``reset()`` plays chronic (seed + k) mod the number of
chronics, with grid2op seeded (the opponent's draws, the forecasts' noise) by seed + k x 10,007. A phase
switch resets every environment, so each phase, and each cell of a test matrix, replays the same
episodes: two players compared there face the same chronics and the same attacks until they act apart.
"""

from __future__ import annotations

import logging
import os
import warnings
from typing import Any, Optional

import numpy as np
from mlagents_envs.base_env import (
    ActionSpec,
    ActionTuple,
    BaseEnv,
    BehaviorMapping,
    BehaviorSpec,
    DecisionSteps,
    DimensionProperty,
    ObservationSpec,
    ObservationType,
    TerminalSteps,
)

from ml_arl.envs.adapters.grid2op_env import DEFAULT_ATTACK_LINES, check_options, import_grid2op
from ml_arl.envs.adapters.grid2op_env.actions import OperatorActions

logger = logging.getLogger(__name__)

OPERATOR, OPPONENT = "Operator", "Opponent"
RHO_MAX = 10.0
COOLDOWN_SCALE = 12.0
LOAD_SCALE = 100.0
SIMULATED = "simulated_rho"  # the name of the Operator's second observation with simulate=true


def _spec(size: int, branch: int, simulated: bool = False) -> BehaviorSpec:
    obs = [ObservationSpec((size,), (DimensionProperty.NONE,), ObservationType.DEFAULT, "vector")]
    if simulated:  # one forecast line load per action (simulate=true)
        obs.append(ObservationSpec((branch,), (DimensionProperty.NONE,), ObservationType.DEFAULT, SIMULATED))
    return BehaviorSpec(obs, ActionSpec(0, (branch,)))


def _backend(choice: str) -> Any:
    if choice == "lightsim":
        try:
            from lightsim2grid import LightSimBackend

            return LightSimBackend()
        except ImportError:
            logger.info("lightsim2grid does not import; Grid2Op runs on its PandaPowerBackend (slower)")
    from grid2op.Backend import PandaPowerBackend

    return PandaPowerBackend()


def opponent_class() -> type:
    """grid2op's BaseOpponent that attacks with what the Opponent behavior chose (``pending``)."""
    from grid2op.Opponent import BaseOpponent

    class ExternalLineOpponent(BaseOpponent):
        def init(self, partial_env: Any, lines_attacked: Any = (), **kwargs: Any) -> None:
            self._set_line_id(lines_attacked)
            self._prebuild_action()
            self.pending: Optional[int] = None

        def reset(self, initial_budget: Any) -> None:
            self.pending = None

        def attack(self, observation: Any, agent_action: Any, env_action: Any, budget: Any, previous_fails: Any) -> Any:
            k, self.pending = self.pending, None
            if observation is None or k is None:
                return None, 0
            return self._attacks[k], None  # None: grid2op's attack_duration

    return ExternalLineOpponent


_EXTERNAL: Optional[type] = None


def external_opponent() -> type:
    global _EXTERNAL
    if _EXTERNAL is None:
        _EXTERNAL = opponent_class()
    return _EXTERNAL


class Grid2OpEnv(BaseEnv):
    def __init__(self, name: str = "l2rpn_case14_sandbox", seed: Optional[int] = None, **options: Any):
        o = self.options = check_options(options)
        grid2op = import_grid2op()
        from grid2op.Action import PowerlineSetAction
        from grid2op.Opponent import BaseActionBudget, RandomLineOpponent

        self.name = name
        self.mode = o["opponent"]
        make_kwargs: dict[str, Any] = {"backend": _backend(o["backend"])}
        if self.mode != "none":
            make_kwargs.update({
                "opponent_attack_cooldown": o["attack_cooldown"],
                "opponent_attack_duration": o["attack_duration"],
                "opponent_budget_per_ts": o["attack_budget_per_step"],
                "opponent_init_budget": o["attack_budget"],
                "opponent_action_class": PowerlineSetAction,
                "opponent_class": external_opponent() if self.mode == "agent" else RandomLineOpponent,
                "opponent_budget_class": BaseActionBudget,
                "kwargs_opponent": {"lines_attacked": []},  # set below, once the grid's line names are known
            })
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.env = grid2op.make(name, **make_kwargs) if os.path.isdir(name) else grid2op.make(name, test=True, **make_kwargs)
            self.attack_lines: list[str] = []
            if self.mode != "none":
                self.attack_lines = resolve_attack_lines(o["attack_lines"], [str(n) for n in self.env.name_line])
                self.env._kwargs_opponent = {"lines_attacked": list(self.attack_lines)}
                self.env._oppSpace.init_opponent(partial_env=self.env, lines_attacked=list(self.attack_lines))
                self.env._oppSpace.reset()
        env = self.env
        self.n_line, self.n_sub, self.n_gen = int(env.n_line), int(env.n_sub), int(env.n_gen)
        self.gen_pmax = np.maximum(np.asarray(env.gen_pmax, np.float64), 1e-6)
        self.line_ids = [int(np.flatnonzero(env.name_line == n)[0]) for n in self.attack_lines]
        self.actions = OperatorActions(env, o)
        self.operator_actions = self.actions.actions
        self._seed = seed
        self._episode = 0  # episodes begun since the last reset(): the next one's place in the seed sequence
        self._operator_decides = True  # False: below safe_max_rho with an Opponent behavior, the rule plays
        self._operator_reward = 0.0  # the Operator's reward since its last decision (the same case)
        self._resets = 0
        self._n_chronics = max(1, _count_chronics(env))
        size = self._features(env.get_obs()).shape[0]
        self._specs = {OPERATOR: _spec(size, len(self.operator_actions), o["simulate"])}
        if self.mode == "agent":
            self._specs[OPPONENT] = _spec(size + 3, 1 + len(self.line_ids))
        self._actions: dict[str, Optional[ActionTuple]] = dict.fromkeys(self._specs)
        self._steps = {b: (DecisionSteps.empty(s), TerminalSteps.empty(s)) for b, s in self._specs.items()}
        self.obs: Any = None
        self.steps_survived = 0
        self.last_info: dict[str, Any] = {}

    # -- set-up -----------------------------------------------------------------------------

    # -- BaseEnv ----------------------------------------------------------------------------

    @property
    def behavior_specs(self) -> BehaviorMapping:
        return BehaviorMapping(dict(self._specs))

    def reset(self) -> None:
        self._episode = 0  # a phase switch: its episodes replay the seed sequence from its start
        self._begin({})

    def step(self) -> None:
        op = self._actions[OPERATOR]
        choice = int(op.discrete[0, 0]) if op is not None and len(op.discrete) else 0
        if not self._operator_decides:  # below safe_max_rho with an Opponent behavior: the rule plays this step
            choice = self.rule_choice()
        action = self.operator_actions[choice if 0 <= choice < len(self.operator_actions) else 0]
        if self.mode == "agent":
            att = self._actions[OPPONENT]
            k = int(att.discrete[0, 0]) if att is not None and len(att.discrete) else 0
            self.env._opponent.pending = k - 1 if 1 <= k <= len(self.line_ids) else None
        self._actions = dict.fromkeys(self._specs)
        r, ended, end_of_chronic = self._advance(action)
        guard = self.options["safe_max_rho"]
        if self.mode == "agent":
            self.env._opponent.pending = None
            if guard is not None:  # one grid2op step a call; the Operator's reward sums the steps since its decision
                self._operator_reward += r
                if ended:
                    self._begin({OPERATOR: (self._operator_reward, end_of_chronic), OPPONENT: (r, end_of_chronic)})
                else:
                    self._operator_decides = float(np.max(self.obs.rho)) >= guard
                    self._emit({OPERATOR: self._operator_reward, OPPONENT: r})
                return
        while guard is not None and not ended and float(np.max(self.obs.rho)) < guard:  # the rule's steps
            more, ended, end_of_chronic = self._advance(self.operator_actions[self.rule_choice()])
            r += more
        if ended:
            self._begin({b: (r, end_of_chronic) for b in self._specs})
        else:
            self._emit({b: r for b in self._specs})

    def _advance(self, action: Any) -> tuple[float, bool, bool]:
        """One grid2op step: (reward, ended, ended by the chronic's end)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            obs, reward, done, info = self.env.step(action)
        self.last_info = info
        ended = bool(done)
        end_of_chronic = ended and self.env.nb_time_step >= self.env.max_episode_duration()
        game_over = ended and not end_of_chronic
        if not game_over:
            self.steps_survived += 1
        self.obs = obs
        r = (0.0 if game_over else 1.0) if self.options["reward"] == "survival" else float(reward)
        return r, ended, end_of_chronic

    def rule_choice(self) -> int:
        """The expert rule's action (grid2op's RecoPowerlineAgent): reconnect the first line that may
        be, else do nothing."""
        allowed = ~self.operator_mask()[1: 1 + self.n_line]
        return 1 + int(np.argmax(allowed)) if allowed.any() else 0

    def get_steps(self, behavior_name: str) -> tuple[DecisionSteps, TerminalSteps]:
        return self._steps[behavior_name]

    def set_actions(self, behavior_name: str, action: ActionTuple) -> None:
        self._actions[behavior_name] = action

    def set_action_for_agent(self, behavior_name: str, agent_id: int, action: ActionTuple) -> None:
        self._actions[behavior_name] = action

    def close(self) -> None:
        self.env.close()

    # -- internals --------------------------------------------------------------------------

    def _begin(self, ended: dict[str, tuple[float, bool]]) -> None:
        terminal: dict[str, TerminalSteps] = {}
        for behavior, spec in self._specs.items():
            if behavior in ended:
                r, interrupted = ended[behavior]
                terminal[behavior] = TerminalSteps(
                    [x[None] for x in self._observe(behavior, final=True)], np.array([r], np.float32), np.array([interrupted]),
                    np.zeros(1, np.int32), np.zeros(1, np.int32), np.zeros(1, np.float32))
            else:
                terminal[behavior] = TerminalSteps.empty(spec)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if self._seed is not None:  # episode k: chronic seed + k, the opponent's draws from seed + k * stride
                self.env.seed(int(self._seed) + EPISODE_SEED_STRIDE * self._episode)
                chronic = (int(self._seed) + self._episode) % self._n_chronics
                self.obs = self.env.reset(options={"time serie id": chronic})
            else:
                self.obs = self.env.reset()
        self._episode += 1
        self.steps_survived = 0
        self._resets += 1
        self._operator_decides = True  # an episode's first step is the Operator's
        self._emit(dict.fromkeys(self._specs, 0.0), terminal)

    def _emit(self, rewards: dict[str, float], terminal: Optional[dict[str, TerminalSteps]] = None) -> None:
        """Each behavior's steps: a decision with its reward (none for an Operator the rule stands in for)."""
        for behavior, spec in self._specs.items():
            ended = terminal[behavior] if terminal is not None else TerminalSteps.empty(spec)
            if behavior == OPERATOR and not self._operator_decides:
                self._steps[behavior] = (DecisionSteps.empty(spec), ended)
                continue
            if behavior == OPERATOR:
                self._operator_reward = 0.0
            forbidden = self.operator_mask() if behavior == OPERATOR else self.opponent_mask()
            self._steps[behavior] = (
                DecisionSteps([x[None] for x in self._observe(behavior, forbidden=forbidden)], np.array([rewards[behavior]], np.float32),
                              np.zeros(1, np.int32), [forbidden[None]], np.zeros(1, np.int32), np.zeros(1, np.float32)),
                ended,
            )

    def _features(self, o: Any) -> np.ndarray:
        if self.options["observation"] == "vect":
            return np.nan_to_num(np.asarray(o.to_vect(), np.float32), nan=0.0, posinf=0.0, neginf=0.0)
        topo = np.asarray(o.topo_vect, np.float64)
        minutes = float(o.hour_of_day) * 60.0 + float(o.minute_of_hour)
        angle = 2.0 * np.pi * minutes / 1440.0
        parts = [
            np.clip(np.asarray(o.rho, np.float64), 0.0, RHO_MAX),
            np.asarray(o.line_status, np.float64),
            np.where(topo > 0, topo - 1.0, -1.0),
            np.asarray(o.gen_p, np.float64) / self.gen_pmax,
            np.asarray(o.load_p, np.float64) / LOAD_SCALE,
            np.asarray(o.actual_dispatch, np.float64) / self.gen_pmax,
            np.asarray(o.time_before_cooldown_line, np.float64) / COOLDOWN_SCALE,
            np.asarray(o.time_before_cooldown_sub, np.float64) / COOLDOWN_SCALE,
            np.array([np.sin(angle), np.cos(angle)]),
        ]
        return np.nan_to_num(np.concatenate(parts).astype(np.float32), nan=0.0, posinf=RHO_MAX, neginf=-RHO_MAX)

    def _observe(self, behavior: str, final: bool = False, forbidden: Optional[np.ndarray] = None) -> list[np.ndarray]:
        """The behavior's observations; ``final``: an episode's last, where nothing is forecast; ``forbidden``:
        the Operator's mask when the caller has it."""
        base = self._features(self.obs)
        if behavior != OPPONENT:
            if not self.options["simulate"]:
                return [base]
            return [base, np.full(len(self.operator_actions), RHO_MAX, np.float32) if final else self.simulated_rho(forbidden)]
        space = self.env._oppSpace
        o = self.options
        extra = np.array([
            space.budget / max(o["attack_duration"], 1),
            space.current_attack_duration / max(o["attack_duration"], 1),
            space.current_attack_cooldown / max(o["attack_cooldown"], 1),
        ], np.float32)
        return [np.concatenate([base, extra])]

    def simulated_rho(self, forbidden: Optional[np.ndarray] = None) -> np.ndarray:
        """Each Operator action's forecast highest line load one step on (grid2op's ``obs.simulate``);
        RHO_MAX where the action is not allowed now (``forbidden``: operator_mask(), computed when not given)
        or its forecast is a game over (or fails)."""
        out = np.full(len(self.operator_actions), RHO_MAX, np.float32)
        if forbidden is None:
            forbidden = self.operator_mask()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for i in np.flatnonzero(~forbidden):
                try:
                    sim, _, done, info = self.obs.simulate(self.operator_actions[i])
                except Exception as err:  # grid2op raises its own errors on an observation it cannot forecast from
                    logger.debug("simulate failed for action %d: %s", i, err)
                    continue
                if not done and not info.get("exception"):
                    out[i] = min(float(np.max(sim.rho)), RHO_MAX)
        return out

    def operator_mask(self) -> np.ndarray:
        """The Operator's forbidden actions now (True = not allowed)."""
        return self.actions.mask(self.obs)

    def opponent_mask(self) -> np.ndarray:
        """The Opponent's forbidden actions now: every attack when grid2op would refuse one this step."""
        forbidden = np.zeros(1 + len(self.line_ids), bool)
        if not self.can_attack():
            forbidden[1:] = True
            return forbidden
        status = np.asarray(self.obs.line_status, bool)
        forbidden[1:] = ~status[self.line_ids]
        if forbidden[1:].all():
            forbidden[1:] = True
        return forbidden

    def can_attack(self) -> bool:
        """Whether grid2op's OpponentSpace would take an attack at the next step (its own rules,
        as OpponentSpace.attack applies them: no attack running, the cooldown over, the budget
        enough for an attack of one line for attack_duration steps)."""
        space = self.env._oppSpace
        duration = max(0, space.current_attack_duration - 1)
        cooldown = max(0, space.current_attack_cooldown - 1)
        budget = space.budget + space.budget_per_timestep
        return duration == 0 and cooldown <= space.attack_cooldown and budget >= space.attack_max_duration


EPISODE_SEED_STRIDE = 10_007  # a prime above any num_envs: worker w's seed (seed + w) never meets another's sequence


def _count_chronics(env: Any) -> int:
    try:
        return int(len(env.chronics_handler.real_data.subpaths))
    except Exception:  # a chronics class without folders
        return 1


def resolve_attack_lines(option: Any, names: list[str]) -> list[str]:
    """The lines an opponent attacks: ``option`` (a list of names or line ids, or ``all``), else
    case14's six when the grid has them, else all; ValueError naming the grid's lines on an unknown one."""
    if option == "all":
        return list(names)
    if option is None:
        return list(DEFAULT_ATTACK_LINES) if set(DEFAULT_ATTACK_LINES) <= set(names) else list(names)
    out: list[str] = []
    for x in option:
        if isinstance(x, int) and 0 <= x < len(names):
            out.append(names[x])
        elif isinstance(x, str) and x in names:
            out.append(x)
        else:
            quote = (" (YAML reads 1_3_3 as the number 133: quote line names, attack_lines=\"['1_3_3']\")"
                     if isinstance(x, int) else "")
            raise ValueError(f"attack_lines: no line {x!r} on this grid{quote}; its lines are {', '.join(names)} "
                             f"(or their ids 0..{len(names) - 1})")
    return out


def make_grid2op_env(name: str = "l2rpn_case14_sandbox", seed: Optional[int] = None, **options: Any) -> Grid2OpEnv:
    """The Grid2Op environment ``name`` (test data, no download) as a BaseEnv; see the module doc."""
    return Grid2OpEnv(name, seed, **options)
