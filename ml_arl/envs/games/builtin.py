"""Built-in environments, written against mlagents_envs' BaseEnv so they run like Unity builds.

``Reach`` is a fast 1-D reach-the-goal task with several agents per environment, in a
continuous, a discrete (with action masks) and a hybrid variant. Each agent starts at a random
position on [-1, 1] and must reach a random goal; it observes ``[position, goal - position]``.
Reward: -0.01 per step, +1 when within ``goal_radius`` of the goal (the episode then ends).
``goal_radius`` is also an environment parameter (a number or a sampler, from each agent's next
episode on), so a curriculum can shrink it.
Episodes are cut after ``max_episode_steps`` (reported as interrupted, not terminated).
An agent that ends its episode shows up in the TerminalSteps of that step and again, with a
new episode, in the DecisionSteps of the same step, as Unity agents do.

``env_settings.num_areas`` multiplies the agents of an environment (``n_agents`` per area).

``GroupReach`` (and ``GroupReachDiscrete``): two-agent groups, each agent a 1-D reach, with a
group reward when the group's last agent ends; agents that end early leave their group (the
cooperative task of ``trainer_type: poca``).

``SoccerLine`` (ml_arl.envs.games.soccer): two teams of two push a ball along a line, each team a group
with a group reward of +1 / -1 per goal (POCA with self-play, as ML-Agents' SoccerTwos).

``Trivial`` observes 8 floats and takes 2 continuous actions with fixed-length episodes:
the benchmark workload, whose step cost is close to nothing.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
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
from ml_arl.envs.games.grid_defense import GridDefense
from ml_arl.envs.games.soccer import SoccerLine
from ml_arl.envs.games.tag import Tag
from ml_arl.envs.parameter_values import draw, is_value
from ml_arl.envs.single_behavior import SingleBehaviorEnv


class _VectorBatchEnv(SingleBehaviorEnv):
    """Shared machinery: one behavior, ``n_agents`` agents, numpy state, auto-reset per agent."""

    behavior_name = "Env"

    def __init__(self, action_spec: ActionSpec, obs_size: int, n_agents: int, max_episode_steps: int, seed: int):
        self._spec = BehaviorSpec([vector_obs_spec(obs_size)], action_spec)
        self.n_agents = n_agents
        self.max_episode_steps = max_episode_steps
        self.rng = np.random.default_rng(seed)
        self.agent_ids = np.arange(n_agents, dtype=np.int32)
        self.t = np.zeros(n_agents, dtype=np.int32)
        self._decision: DecisionSteps = DecisionSteps.empty(self._spec)
        self._no_terminal = TerminalSteps.empty(self._spec)
        self._terminal: TerminalSteps = self._no_terminal
        self._zero_group = np.zeros(n_agents, dtype=np.int32)
        self._zero_group_reward = np.zeros(n_agents, dtype=np.float32)
        self.parameters: dict[str, float] = {}

    # --- to be provided by subclasses
    @abstractmethod
    def _reset_agents(self, idx: np.ndarray) -> None:
        """Start a new episode for the agents at ``idx``."""

    @abstractmethod
    def _observe(self) -> np.ndarray:
        """A fresh [n_agents, obs_size] float32 array of observations."""

    @abstractmethod
    def _advance(self, actions: ActionTuple) -> tuple[np.ndarray, np.ndarray]:
        """Apply actions; return (reward, terminated) for every agent."""

    def _masks(self) -> Optional[list[np.ndarray]]:
        return None

    # --- BaseEnv
    def reset(self) -> None:
        self.t[:] = 0
        self._reset_agents(self.agent_ids)
        self._decision = DecisionSteps(
            [self._observe()], np.zeros(self.n_agents, np.float32), self.agent_ids, self._masks(),
            self._zero_group, self._zero_group_reward,
        )
        self._terminal = TerminalSteps.empty(self._spec)

    def step(self) -> None:
        reward, terminated = self._advance(self._take_actions())
        self.t += 1
        truncated = (self.t >= self.max_episode_steps) & ~terminated
        done = terminated | truncated
        if done.any():
            idx = np.nonzero(done)[0]
            final_obs = self._observe()[idx]
            self._terminal = TerminalSteps(
                [final_obs], reward[idx], truncated[idx], self.agent_ids[idx],
                self._zero_group[idx], self._zero_group_reward[idx],
            )
            self.t[idx] = 0
            self._reset_agents(idx)
            reward = reward.copy()
            reward[idx] = 0.0
        else:
            self._terminal = self._no_terminal
        self._decision = DecisionSteps(
            [self._observe()], reward, self.agent_ids, self._masks(), self._zero_group, self._zero_group_reward
        )

class Reach(_VectorBatchEnv):
    """1-D reach-the-goal. ``variant``: "continuous", "discrete" (3 moves, masked at the walls) or "hybrid"."""

    STEP = 0.2

    def __init__(
        self,
        variant: str = "continuous",
        n_agents: int = 4,
        max_episode_steps: int = 25,
        goal_radius: float = 0.1,
        seed: int = 0,
        num_areas: int = 1,
    ):
        n_agents *= num_areas  # env_settings.num_areas: more copies of the area = more agents
        specs = {
            "continuous": ActionSpec(1, ()),
            "discrete": ActionSpec(0, (3,)),
            "hybrid": ActionSpec(1, (2,)),
        }
        if variant not in specs:
            raise ValueError(f"Reach variant must be one of {sorted(specs)}, got {variant!r}")
        self.variant = variant
        self.behavior_name = {"continuous": "Reach", "discrete": "ReachDiscrete", "hybrid": "ReachHybrid"}[variant]
        self.goal_radius: Any = goal_radius  # a number, or a sampler drawn per episode (environment parameter)
        self.radius = np.full(n_agents, goal_radius, np.float64)  # each agent's, for its episode
        self.pos = np.zeros(n_agents, np.float32)
        self.goal = np.zeros(n_agents, np.float32)
        super().__init__(specs[variant], 2, n_agents, max_episode_steps, seed)

    def set_environment_parameters(self, params: dict[str, Any]) -> None:
        """``goal_radius``: a number or a sampler (ml_arl.envs.parameter_values), from each agent's next episode on."""
        for key, value in params.items():
            if key != "goal_radius":
                raise ValueError(f"Reach: unknown environment parameter {key!r}; valid: goal_radius")
            if not is_value(value):
                raise ValueError(f"Reach: environment parameter goal_radius={value!r} is neither a number nor a sampler")
            self.goal_radius = value

    def _reset_agents(self, idx: np.ndarray) -> None:
        if isinstance(self.goal_radius, dict):
            self.radius[idx] = [max(0.0, draw(self.goal_radius, self.rng)) for _ in idx]
        else:
            self.radius[idx] = self.goal_radius
        self.pos[idx] = self.rng.uniform(-1.0, 1.0, len(idx))
        goal = self.rng.uniform(-1.0, 1.0, len(idx))
        # Keep the goal out of reach of the start, so every episode needs a decision.
        too_close = np.abs(goal - self.pos[idx]) < 2 * self.radius[idx]
        goal[too_close] = -self.pos[idx][too_close]
        self.goal[idx] = goal

    def _observe(self) -> np.ndarray:
        return np.stack([self.pos, self.goal - self.pos], axis=1).astype(np.float32)

    def _masks(self) -> Optional[list[np.ndarray]]:
        if self.variant != "discrete":
            return None
        # Branch 0: 0 = left, 1 = stay, 2 = right. True = not allowed (mlagents_envs convention).
        mask = np.zeros((self.n_agents, 3), dtype=bool)
        mask[:, 0] = self.pos <= -1.0 + 1e-6
        mask[:, 2] = self.pos >= 1.0 - 1e-6
        return [mask]

    def _advance(self, actions: ActionTuple) -> tuple[np.ndarray, np.ndarray]:
        if self.variant == "continuous":
            move = np.clip(actions.continuous[:, 0], -1.0, 1.0) * self.STEP
        elif self.variant == "discrete":
            move = (actions.discrete[:, 0].astype(np.float32) - 1.0) * self.STEP
        else:
            # Hybrid: the discrete branch picks the direction, the continuous action the speed.
            direction = np.where(actions.discrete[:, 0] == 0, -1.0, 1.0)
            speed = (np.clip(actions.continuous[:, 0], -1.0, 1.0) + 1.0) * 0.5
            move = direction * (0.25 + 0.75 * speed) * self.STEP
        self.pos = np.clip(self.pos + move, -1.0, 1.0).astype(np.float32)
        reached = np.abs(self.goal - self.pos) < self.radius.astype(np.float32)  # compared in float32, as always
        reward = np.where(reached, 1.0, -0.01).astype(np.float32)
        return reward, reached


class Trivial(_VectorBatchEnv):
    """8 observed floats, 2 continuous actions, fixed-length episodes: a near-zero-cost env."""

    behavior_name = "Trivial"

    def __init__(self, n_agents: int = 4, max_episode_steps: int = 100, seed: int = 0, num_areas: int = 1):
        n_agents *= num_areas
        super().__init__(ActionSpec(2, ()), 8, n_agents, max_episode_steps, seed)
        self.state = np.zeros((n_agents, 8), np.float32)

    def _reset_agents(self, idx: np.ndarray) -> None:
        self.state[idx] = 0.0

    def _observe(self) -> np.ndarray:
        return self.state.copy()

    def _advance(self, actions: ActionTuple) -> tuple[np.ndarray, np.ndarray]:
        self.state[:, :2] += actions.continuous
        reward = -np.abs(self.state[:, 0]).astype(np.float32)
        return reward, np.zeros(self.n_agents, dtype=bool)


class GroupReach(BaseEnv):
    """A cooperative group task in the manner of ML-Agents' MultiAgentEnvironment (its POCA test):
    groups of two agents (group ids 1, 2, ...), each agent a 1-D reach: it starts at 0, observes
    ``[goal, position]`` with a goal of -1 or +1 of its own, and moves by its action clamped to
    +-0.2 (discrete: branch of 2, left or right). An agent is done once at -1 or +1; its success
    is ``SUCCESS * position * goal``. Each step costs 0.01. An agent that ends while its groupmate
    goes on leaves the group with ``min(-0.01, success)`` (a wrong end is punished at once, a right
    one is worth only what the group gets later); when the group's last agent ends, the agents
    ending then get the group reward, the mean success of the whole group. A group is cut
    (interrupted) after ``max_episode_steps``, then starts again with new agent ids.
    ``final_rewards`` keeps each agent's success, as ML-Agents' test environment does."""

    STEP = 0.2
    TIME_PENALTY = 0.01
    SUCCESS = 1.0 + 6 * TIME_PENALTY  # the best return of a lone reach is about 1.0
    GROUP_SIZE = 2

    def __init__(self, variant: str = "continuous", n_groups: int = 4, max_episode_steps: int = 20, seed: int = 0, num_areas: int = 1):
        if variant not in ("continuous", "discrete"):
            raise ValueError(f"GroupReach variant must be 'continuous' or 'discrete', got {variant!r}")
        self.behavior_name = "GroupReach" if variant == "continuous" else "GroupReachDiscrete"
        self.variant = variant
        self.n_groups = n_groups * num_areas
        self.max_episode_steps = max_episode_steps
        self.spec = BehaviorSpec([vector_obs_spec(2)], ActionSpec(1, ()) if variant == "continuous" else ActionSpec(0, (2,)))
        self.rng = np.random.default_rng(seed)
        shape = (self.n_groups, self.GROUP_SIZE)
        self.pos = np.zeros(shape, np.float32)
        self.goal = np.ones(shape, np.float32)
        self.success = np.zeros(shape, np.float32)
        self.active = np.ones(shape, bool)
        self.ids = np.arange(self.n_groups * self.GROUP_SIZE, dtype=np.int32).reshape(shape)
        self.next_id = self.ids.size
        self.t = np.zeros(self.n_groups, np.int32)
        self.final_rewards: list[float] = []
        self._actions: Optional[ActionTuple] = None
        self._result = (DecisionSteps.empty(self.spec), TerminalSteps.empty(self.spec))

    @property
    def behavior_specs(self) -> BehaviorMapping:
        return BehaviorMapping({self.behavior_name: self.spec})

    def _reset_group(self, g: int) -> None:
        self.pos[g] = 0.0
        self.success[g] = 0.0
        self.goal[g] = self.rng.choice([-1.0, 1.0], self.GROUP_SIZE)
        self.active[g] = True
        self.t[g] = 0
        self.ids[g] = np.arange(self.next_id, self.next_id + self.GROUP_SIZE, dtype=np.int32)
        self.next_id += self.GROUP_SIZE

    def _steps(self, where: np.ndarray, reward: np.ndarray, group_reward: np.ndarray) -> tuple[list[np.ndarray], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        g, j = np.nonzero(where)
        obs = np.stack([self.goal[g, j], self.pos[g, j]], axis=1).astype(np.float32)
        return [obs], reward[g, j].astype(np.float32), self.ids[g, j].copy(), (g + 1).astype(np.int32), group_reward[g, j].astype(np.float32)

    def reset(self) -> None:
        for g in range(self.n_groups):
            self._reset_group(g)
        zeros = np.zeros_like(self.pos)
        obs, reward, ids, groups, group_reward = self._steps(self.active, zeros, zeros)
        self._result = (DecisionSteps(obs, reward, ids, None, groups, group_reward), TerminalSteps.empty(self.spec))

    def step(self) -> None:
        n_active = int(self.active.sum())
        actions = self._actions if self._actions is not None else self.spec.action_spec.empty_action(n_active)
        self._actions = None
        if self.variant == "continuous":
            move = np.clip(np.asarray(actions.continuous, np.float32)[:, 0], -self.STEP, self.STEP)
        else:
            move = np.where(np.asarray(actions.discrete)[:, 0] > 0, self.STEP, -self.STEP)
        self.pos[self.active] = np.clip(self.pos[self.active] + move, -1.0, 1.0)  # rows in DecisionSteps order
        self.t += 1
        ended = self.active & (np.abs(self.pos) >= 1.0)
        self.success = np.where(ended, self.SUCCESS * self.pos * self.goal, self.success)
        still = self.active & ~ended
        group_over: np.ndarray = np.logical_not(still.any(axis=1))
        cut = ~group_over & (self.t >= self.max_episode_steps)
        reward = np.full(self.pos.shape, -self.TIME_PENALTY, np.float32)
        group_reward = np.zeros(self.pos.shape, np.float32)
        # leaving early: min(-0.01, success); ending with the group: 0 and the group's mean success
        leaving, last = ended & ~group_over[:, None], ended & group_over[:, None]
        reward[leaving] = np.minimum(-self.TIME_PENALTY, self.success)[leaving]
        reward[last] = 0.0
        group_reward[last] = np.broadcast_to(self.success.mean(axis=1, keepdims=True), self.pos.shape)[last]
        self.final_rewards += self.success[ended].tolist()
        terminal_where = ended | (still & cut[:, None])
        interrupted = (still & cut[:, None])[terminal_where]
        obs, t_reward, t_ids, t_groups, t_group_reward = self._steps(terminal_where, reward, group_reward)
        terminal = TerminalSteps(obs, t_reward, interrupted, t_ids, t_groups, t_group_reward)
        self.active &= ~ended
        for g in np.nonzero(group_over | cut)[0]:
            self._reset_group(int(g))
            reward[g] = 0.0
        obs, d_reward, d_ids, d_groups, d_group_reward = self._steps(self.active, reward, np.zeros_like(group_reward))
        self._result = (DecisionSteps(obs, d_reward, d_ids, None, d_groups, d_group_reward), terminal)

    def get_steps(self, behavior_name: str) -> tuple[DecisionSteps, TerminalSteps]:
        return self._result

    def set_actions(self, behavior_name: str, action: ActionTuple) -> None:
        self._actions = action

    def set_action_for_agent(self, behavior_name: str, agent_id: int, action: ActionTuple) -> None:
        raise NotImplementedError("GroupReach takes the actions of all its agents at once")

    def close(self) -> None:
        pass


BUILTIN_ENVS: dict[str, Callable[..., BaseEnv]] = {
    "Reach": lambda seed, **kw: Reach("continuous", seed=seed, **kw),
    "ReachDiscrete": lambda seed, **kw: Reach("discrete", seed=seed, **kw),
    "ReachHybrid": lambda seed, **kw: Reach("hybrid", seed=seed, **kw),
    "Trivial": lambda seed, **kw: Trivial(seed=seed, **kw),
    "GridDefense": lambda seed, **kw: GridDefense(seed=seed, **kw),
    "Tag": lambda seed, **kw: Tag(seed=seed, **kw),
    "SoccerLine": lambda seed, **kw: SoccerLine(seed=seed, **kw),
    "GroupReach": lambda seed, **kw: GroupReach("continuous", seed=seed, **kw),
    "GroupReachDiscrete": lambda seed, **kw: GroupReach("discrete", seed=seed, **kw),
}
