"""A PettingZoo environment seen through mlagents_envs' BaseEnv.

Agents map to behaviors by name prefix: ``adversary_0`` -> ``adversary``, ``agent_2`` -> ``agent``
(the name up to its last ``_`` when what follows is a number; otherwise the whole name). A
behavior's agents share its policy and must share their spaces; an agent's id is its index
among the behavior's agents in ``possible_agents``. Each behavior is its own self-play team
(ml_arl.core.behavior_id.team_of's rule for a behavior without ``?team=``).

A parallel env is stepped with every live agent's action. An AEC env is converted by PettingZoo:
``aec_to_parallel`` when its metadata says ``is_parallelizable``, otherwise
``turn_based_aec_to_parallel``, and then only the agent whose turn it is asks for a decision
(the others' rewards add up until their next decision or the end of their episode, as a Unity
agent's do between decisions).

An agent whose ``terminated`` or ``truncated`` is set leaves in that step's TerminalSteps
(``interrupted`` when truncated and not terminated, so the trainer bootstraps its value); when
no agent is left, the env resets and every agent's new episode begins in the same step.

Observations: a Box is flattened to float32, except an image (3 dims, uint8, at most 4
channels last: height x width x channels), which stays an image scaled to [0, 1]; a Discrete
is one-hot. A Dict with ``observation`` and ``action_mask`` (PettingZoo's convention, 1 =
allowed) gives its observation and masks the discrete actions; a mask that allows nothing (an
agent waiting for its turn) allows everything. Actions: Box -> continuous, mapped from [-1, 1]
onto finite bounds; Discrete / MultiDiscrete -> discrete branches.

``rewards_from: {behavior: other}`` (ours, not PettingZoo's) gives ``behavior`` the mean reward
that ``other``'s agents got in the same step instead of its own: with ``role: attacker`` (the
negated reward) that behavior then plays against ``other`` as an ARL attacker against a defender.

This module runs in worker processes: no torch.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Optional

import numpy as np
from mlagents_envs.base_env import (
    ActionTuple,
    BaseEnv,
    BehaviorMapping,
    DecisionSteps,
    TerminalSteps,
)

from ml_arl.envs.adapters.space_codec import SpaceCodec

_NUMBERED = re.compile(r"^(.+)_(\d+)$")


def behavior_of(agent: str) -> str:
    """``adversary_0`` -> ``adversary``; ``agent_2`` -> ``agent``; ``pursuer`` -> ``pursuer``."""
    match = _NUMBERED.match(str(agent))
    return match.group(1) if match else str(agent)


class PettingZooEnv(BaseEnv):
    """``env`` is a PettingZoo ParallelEnv; ``turns`` the AEC env behind a turn-based conversion
    (its ``agent_selection`` is the one agent that decides), None for a parallel game."""

    def __init__(
        self,
        env: Any,
        seed: Optional[int] = None,
        turns: Any = None,
        rewards_from: Optional[Mapping[str, str]] = None,
    ):
        self.env = env
        self.turns = turns
        self._seed = seed
        agents = list(getattr(env, "possible_agents", None) or [])
        if not agents:
            raise ValueError("the environment lists no possible_agents")
        self.members: dict[str, list[str]] = {}
        for agent in agents:
            self.members.setdefault(behavior_of(agent), []).append(agent)
        self.behavior_of = {a: behavior_of(a) for a in agents}
        self.id_of = {a: i for members in self.members.values() for i, a in enumerate(members)}
        self.codecs: dict[str, SpaceCodec] = {}
        for behavior, members in self.members.items():
            first = members[0]
            for other in members[1:]:
                if env.observation_space(other) != env.observation_space(first) or env.action_space(other) != env.action_space(first):
                    raise ValueError(
                        f"agents {first!r} and {other!r} share the behavior {behavior!r} but not their spaces; "
                        "agents of one name prefix must have the same observation and action spaces"
                    )
            self.codecs[behavior] = SpaceCodec(behavior, env.observation_space(first), env.action_space(first))
        self.rewards_from = dict(rewards_from or {})
        for behavior, source in self.rewards_from.items():
            if behavior not in self.members or source not in self.members:
                raise ValueError(f"rewards_from: {behavior!r}: {source!r} names an unknown behavior; "
                                 f"behaviors are {', '.join(self.members)}")
        self._obs: dict[str, Any] = {}
        self._pending: dict[str, float] = dict.fromkeys(agents, 0.0)
        self._live: list[str] = []
        self._deciding: dict[str, list[str]] = {b: [] for b in self.members}
        self._actions: dict[str, Optional[ActionTuple]] = dict.fromkeys(self.members)
        self._steps: dict[str, tuple[DecisionSteps, TerminalSteps]] = {
            b: (DecisionSteps.empty(c.spec), TerminalSteps.empty(c.spec)) for b, c in self.codecs.items()
        }

    # -- BaseEnv ----------------------------------------------------------------------------

    @property
    def behavior_specs(self) -> BehaviorMapping:
        return BehaviorMapping({b: c.spec for b, c in self.codecs.items()})

    def reset(self) -> None:
        self._begin(ended={})

    def step(self) -> None:
        actions: dict[str, Any] = {}
        for behavior, deciding in self._deciding.items():
            if not deciding:
                continue
            codec = self.codecs[behavior]
            act = self._actions[behavior]
            if act is None:
                act = codec.spec.action_spec.empty_action(len(deciding))
            for i, agent in enumerate(deciding):
                actions[agent] = codec.env_action(act, i)
        self._actions = dict.fromkeys(self.members)
        if self.turns is None:  # a parallel env wants an action from every live agent
            for agent in self._live:
                if agent not in actions:
                    behavior = self.behavior_of[agent]
                    actions[agent] = self.codecs[behavior].env_action(self.codecs[behavior].spec.action_spec.empty_action(1), 0)
        obs, rewards, terminated, truncated, _ = self.env.step(actions)
        self._add_rewards(rewards)
        self._obs.update(obs)
        ended = {a: bool(truncated.get(a, False) and not terminated.get(a, False))
                 for a in self._live if terminated.get(a, False) or truncated.get(a, False)}
        live = [a for a in self.env.agents if a not in ended]
        if live:
            self._emit(live, ended)
        else:
            self._begin(ended)

    def get_steps(self, behavior_name: str) -> tuple[DecisionSteps, TerminalSteps]:
        return self._steps[behavior_name]

    def set_actions(self, behavior_name: str, action: ActionTuple) -> None:
        self._actions[behavior_name] = action

    def set_action_for_agent(self, behavior_name: str, agent_id: int, action: ActionTuple) -> None:
        deciding = self._deciding[behavior_name]
        spec = self.codecs[behavior_name].spec.action_spec
        current = self._actions[behavior_name]
        if current is None:
            current = self._actions[behavior_name] = spec.empty_action(len(deciding))
        row = [self.id_of[a] for a in deciding].index(int(agent_id))
        current.continuous[row] = action.continuous[0]
        current.discrete[row] = action.discrete[0]

    def close(self) -> None:
        self.env.close()

    # -- internals --------------------------------------------------------------------------

    def _add_rewards(self, rewards: Mapping[str, float]) -> None:
        if self.rewards_from:
            means: dict[str, list[float]] = {b: [] for b in self.members}
            for agent, r in rewards.items():
                means[self.behavior_of[agent]].append(float(r))
            for agent in rewards:
                source = self.rewards_from.get(self.behavior_of[agent])
                if source is not None:
                    got = means[source]
                    self._pending[agent] += float(np.mean(got)) if got else 0.0
                else:
                    self._pending[agent] += float(rewards[agent])
            return
        for agent, r in rewards.items():
            self._pending[agent] += float(r)

    def _begin(self, ended: Mapping[str, bool]) -> None:
        """Reset (after ``ended``'s final steps are kept) and show every agent's first decision."""
        terminal = self._terminal_steps(ended)
        obs, _ = self.env.reset(seed=self._seed)
        self._seed = None  # seed once; later resets continue the same random streams
        self._obs = dict(obs)
        self._pending = dict.fromkeys(self._pending, 0.0)
        self._emit(list(self.env.agents), {}, terminal)

    def _terminal_steps(self, ended: Mapping[str, bool]) -> dict[str, TerminalSteps]:
        out: dict[str, TerminalSteps] = {}
        for behavior, codec in self.codecs.items():
            agents = [a for a in self.members[behavior] if a in ended]
            if not agents:
                out[behavior] = TerminalSteps.empty(codec.spec)
                continue
            n = len(agents)
            obs = np.empty((n, *codec.obs_shape), np.float32)
            for i, agent in enumerate(agents):
                codec.obs_into(obs, i, self._obs[agent])
            reward = np.array([self._pending[a] for a in agents], np.float32)
            for agent in agents:
                self._pending[agent] = 0.0
            ids = np.array([self.id_of[a] for a in agents], np.int32)
            out[behavior] = TerminalSteps([obs], reward, np.array([ended[a] for a in agents]), ids,
                                          np.zeros(n, np.int32), np.zeros(n, np.float32))
        return out

    def _emit(self, live: list[str], ended: Mapping[str, bool],
              terminal: Optional[dict[str, TerminalSteps]] = None) -> None:
        if terminal is None:
            terminal = self._terminal_steps(ended)
        self._live = live
        if self.turns is not None:
            turn = self.turns.agent_selection
            deciding_set = {turn} if turn in live else set()
        else:
            deciding_set = set(live)
        for behavior, codec in self.codecs.items():
            deciding = [a for a in self.members[behavior] if a in deciding_set]
            self._deciding[behavior] = deciding
            n = len(deciding)
            obs = np.empty((n, *codec.obs_shape), np.float32)
            forbidden: list[Optional[np.ndarray]] = [codec.obs_into(obs, i, self._obs[a]) for i, a in enumerate(deciding)]
            reward = np.array([self._pending[a] for a in deciding], np.float32)
            for agent in deciding:
                self._pending[agent] = 0.0
            mask = None
            if codec.masked and n:
                rows = np.stack([f if f is not None else np.zeros(sum(codec.branches), bool) for f in forbidden])
                mask = list(np.split(rows, np.cumsum(codec.branches)[:-1], axis=1))
            ids = np.array([self.id_of[a] for a in deciding], np.int32)
            self._steps[behavior] = (
                DecisionSteps([obs], reward, ids, mask, np.zeros(n, np.int32), np.zeros(n, np.float32)),
                terminal[behavior],
            )


def env_constructor(target: str) -> tuple[Callable[..., Any], str]:
    """``pkg.module`` (its ``parallel_env``, else its AEC ``env``) or ``pkg.module:attr`` -> (callable, what it is).
    ValueError with a one-line message when the target is missing."""
    from ml_arl.core.import_path import ImportPathError, load_module, resolve

    if ":" in target:
        try:
            fn = resolve(target)
        except ImportPathError as err:
            raise ValueError(str(err)) from None
        if not callable(fn):
            raise ValueError(f"{target} is not callable; it must return a PettingZoo ParallelEnv or AECEnv")
        return fn, target
    try:
        module = load_module(target)
    except ImportPathError as err:
        raise ValueError(str(err)) from None
    for name in ("parallel_env", "env"):
        fn = getattr(module, name, None)
        if callable(fn):
            return fn, f"{target}.{name}"
    raise ValueError(f"module {target!r} has neither parallel_env nor env; is it a PettingZoo environment module?")


def to_parallel(env: Any) -> tuple[Any, Any]:
    """(parallel env, the AEC env deciding turns or None) from a ParallelEnv or an AECEnv."""
    from pettingzoo import AECEnv, ParallelEnv
    from pettingzoo.utils.conversions import aec_to_parallel, turn_based_aec_to_parallel

    if isinstance(env, ParallelEnv):
        return env, None
    if isinstance(env, AECEnv):
        if env.metadata.get("is_parallelizable", False):
            return aec_to_parallel(env), None
        return turn_based_aec_to_parallel(env), env
    raise TypeError(f"got {type(env).__name__}, expected a PettingZoo ParallelEnv or AECEnv")


def make_pettingzoo_env(
    target: str, seed: Optional[int] = None, rewards_from: Optional[Mapping[str, str]] = None, **kwargs: Any
) -> PettingZooEnv:
    """The PettingZoo env ``target`` names (see ``env_constructor``), built with ``kwargs``."""
    fn, _ = env_constructor(target)
    parallel, turns = to_parallel(fn(**kwargs))
    return PettingZooEnv(parallel, seed, turns, rewards_from)
