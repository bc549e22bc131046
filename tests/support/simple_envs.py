"""Learning-test tasks in the manner of ML-Agents' own (ml-agents' tests/simple_test_envs.py),
written here for ml_arl's tests.

``GoalReach``: each agent has one position per action dimension (continuous actions and
discrete branches of two actions each), starting at 0 on [-1, 1]. A goal of -1 or +1 is drawn
per episode and shown in every observation (a vector filled with it, or images filled with it).
Each step moves every position by the action clamped to [-step_size, step_size] (a discrete
action moves by -step_size or +step_size). The episode ends once every position is at -1 or +1,
with the reward ``SUCCESS_REWARD * mean(position * goal)``; every other step costs 0.01.
The best return is about 1.0 and a run succeeds when the mean of its last 5 episode returns is
above 0.9 (ML-Agents' criterion). Episodes longer than ``max_episode_steps`` are cut (interrupted).

``show_goal_steps`` > 0 is the memory variant (ML-Agents' MemoryEnvironment): the goal is shown only
in the observations of an episode's first ``show_goal_steps`` steps, then the observations are 0,
so an agent has to remember it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Optional

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

if TYPE_CHECKING:
    from ml_arl.training.callbacks import CallbackList

STEP_SIZE = 0.2
TIME_PENALTY = 0.01
MIN_STEPS = int(1.0 / STEP_SIZE) + 1
SUCCESS_REWARD = 1.0 + MIN_STEPS * TIME_PENALTY
SUCCESS_THRESHOLD = 0.9  # mean of the last 5 episode returns
IMAGE_SIZE = (20, 20, 3)
STOP_WINDOW = 20  # stop_when_solved's window: 5 lucky random episodes in a row must not stop a run


def last5(returns: list[float]) -> float:
    return float(np.mean(returns[-5:])) if len(returns) >= 5 else float("-inf")


def stop_when_solved(solved_at: float, behavior: str = "GoalReach") -> CallbackList:
    """``TrainerController(options, callbacks=stop_when_solved(0.9))``: the run stops (it saves, as
    Ctrl-C does) once the last ``STOP_WINDOW`` returns of ``behavior`` average ``solved_at``, instead
    of training on to max_steps (stricter than the tests' last-5 criterion, which random play can
    meet by luck)."""
    from ml_arl.training.callbacks import CallbackList, StopOnReward

    return CallbackList([StopOnReward(behavior, solved_at, STOP_WINDOW)])


class GoalReach(BaseEnv):
    def __init__(
        self,
        continuous: int = 1,
        discrete: int = 0,
        step_size: float = STEP_SIZE,
        vectors: int = 1,
        images: int = 0,
        image_size: tuple[int, int, int] = IMAGE_SIZE,
        n_agents: int = 1,
        max_episode_steps: int = 100,
        seed: int = 0,
        name: str = "GoalReach",
        show_goal_steps: int = 0,
    ):
        self.name = name
        self.show_goal_steps = show_goal_steps
        self.n_agents = n_agents
        self.step_size = step_size
        self.dims = continuous + discrete
        self.max_episode_steps = max_episode_steps
        shapes: list[tuple[int, ...]] = [(1,)] * vectors + [tuple(image_size)] * images
        obs_specs = [
            ObservationSpec(shape, (DimensionProperty.NONE,) * len(shape), ObservationType.DEFAULT, f"obs_{i}")
            for i, shape in enumerate(shapes)
        ]
        self.shapes = shapes
        self.spec = BehaviorSpec(obs_specs, ActionSpec(continuous, (2,) * discrete))
        self.rng = np.random.default_rng(seed)
        self.ids = np.arange(n_agents, dtype=np.int32)
        self.next_id = n_agents
        self.pos = np.zeros((n_agents, self.dims), np.float32)
        self.goal = np.ones(n_agents, np.float32)
        self.t = np.zeros(n_agents, np.int32)
        self.action: Optional[ActionTuple] = None
        self.result: tuple[DecisionSteps, TerminalSteps] = (DecisionSteps.empty(self.spec), TerminalSteps.empty(self.spec))

    def _observe(self, goal: np.ndarray, t: Optional[np.ndarray] = None) -> list[np.ndarray]:
        if self.show_goal_steps and t is not None:
            goal = np.where(t < self.show_goal_steps, goal, 0.0).astype(np.float32)
        return [np.ones((len(goal), *shape), np.float32) * goal.reshape((-1,) + (1,) * len(shape)) for shape in self.shapes]

    def _masks(self, n: int) -> Optional[list[np.ndarray]]:
        branches = self.spec.action_spec.discrete_branches
        return [np.zeros((n, b), bool) for b in branches] if branches else None

    @staticmethod
    def _groups(n: int) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros(n, np.int32), np.zeros(n, np.float32)  # no groups

    def _reset(self, idx: np.ndarray) -> None:
        self.pos[idx] = 0.0
        self.goal[idx] = self.rng.choice([-1.0, 1.0], len(idx))
        self.t[idx] = 0

    @property
    def behavior_specs(self) -> BehaviorMapping:
        return BehaviorMapping({self.name: self.spec})

    def reset(self) -> None:
        self._reset(np.arange(self.n_agents))
        n = self.n_agents
        self.result = (
            DecisionSteps(self._observe(self.goal, self.t), np.zeros(n, np.float32), self.ids.copy(), self._masks(n), *self._groups(n)),
            TerminalSteps.empty(self.spec),
        )

    def set_actions(self, behavior_name: str, action: ActionTuple) -> None:
        self.action = action

    def set_action_for_agent(self, behavior_name: str, agent_id: int, action: ActionTuple) -> None:
        raise NotImplementedError

    def get_steps(self, behavior_name: str) -> tuple[DecisionSteps, TerminalSteps]:
        return self.result

    def step(self) -> None:
        action = self.action or self.spec.action_spec.empty_action(self.n_agents)
        self.action = None
        deltas = []
        if self.spec.action_spec.continuous_size:
            deltas.append(np.asarray(action.continuous, np.float32))
        if self.spec.action_spec.discrete_branches:
            deltas.append(np.where(np.asarray(action.discrete) > 0, 1.0, -1.0).astype(np.float32))
        delta = np.clip(np.concatenate(deltas, axis=1), -self.step_size, self.step_size)
        self.pos = np.clip(self.pos + delta, -1.0, 1.0)
        self.t += 1
        finished = np.all(np.abs(self.pos) >= 1.0, axis=1)
        cut = ~finished & (self.t >= self.max_episode_steps)
        reward = np.where(finished, SUCCESS_REWARD * (self.pos * self.goal[:, None]).mean(axis=1), -TIME_PENALTY).astype(np.float32)
        ended = np.nonzero(finished | cut)[0]
        terminal = TerminalSteps.empty(self.spec)
        if len(ended):
            terminal = TerminalSteps(
                self._observe(self.goal[ended], self.t[ended]), reward[ended], cut[ended], self.ids[ended].copy(), *self._groups(len(ended))
            )
            self._reset(ended)
            self.ids[ended] = np.arange(self.next_id, self.next_id + len(ended), dtype=np.int32)  # a new agent, as ML-Agents' env
            self.next_id += len(ended)
            reward[ended] = 0.0
        decision = DecisionSteps(self._observe(self.goal, self.t), reward, self.ids.copy(), self._masks(self.n_agents), *self._groups(self.n_agents))
        self.result = (decision, terminal)

    def close(self) -> None:
        pass


def goal_reach(
    seed: Optional[int] = None,
    continuous: int = 1,
    discrete: int = 0,
    step_size: float = STEP_SIZE,
    vectors: int = 1,
    images: int = 0,
    image_size: Sequence[int] = IMAGE_SIZE,
    n_agents: int = 1,
    show_goal_steps: int = 0,
) -> GoalReach:
    """The env factory for ``env_path: tests.support.simple_envs:goal_reach`` (env_args pick the variant;
    ``image_size=[36, 36, 3]`` is height, width, channels)."""
    size = tuple(int(n) for n in image_size)
    if len(size) != 3:
        raise ValueError(f"image_size must be [height, width, channels], not {list(image_size)}")
    return GoalReach(
        continuous, discrete, step_size, vectors, images, (size[0], size[1], size[2]), n_agents=n_agents, seed=seed or 0,
        show_goal_steps=show_goal_steps,
    )


class EntityReach(GoalReach):
    """GoalReach whose goal is shown only as one entity of a variable-length observation (Unity's
    BufferSensor: shape (max_entities, 2), dimension properties (VARIABLE_SIZE, NONE)). At every
    step an agent sees 1 to ``max_entities`` entities, in random order and followed by all-zero
    padding rows: the goal [1, goal] and distractors [0, -1 or +1]. With ``vectors`` the agent also
    has a vector observation of the episode's elapsed fraction (its "self", which carries nothing
    about the goal)."""

    def __init__(self, continuous: int = 1, discrete: int = 0, vectors: int = 1, max_entities: int = 4, flat: bool = False,
                 grouped: bool = False, **kwargs: Any):
        super().__init__(continuous, discrete, vectors=vectors, images=0, name="EntityReach", **kwargs)
        self.max_entities = max_entities
        self.grouped = grouped  # every agent in group 1 (for POCA), each still reaching its own goal
        # flat: the buffer declared as one axis (max_entities * 2,), still VARIABLE_SIZE: what the trainer refuses
        shape, props = ((2 * max_entities,), (DimensionProperty.VARIABLE_SIZE,)) if flat else \
            ((max_entities, 2), (DimensionProperty.VARIABLE_SIZE, DimensionProperty.NONE))
        obs_specs = list(self.spec.observation_specs) + [ObservationSpec(shape, props, ObservationType.DEFAULT, "entities")]
        self.spec = BehaviorSpec(obs_specs, self.spec.action_spec)
        self.result = (DecisionSteps.empty(self.spec), TerminalSteps.empty(self.spec))

    def _groups(self, n: int) -> tuple[np.ndarray, np.ndarray]:  # type: ignore[override]
        return np.full(n, 1 if self.grouped else 0, np.int32), np.zeros(n, np.float32)

    def _observe(self, goal: np.ndarray, t: Optional[np.ndarray] = None) -> list[np.ndarray]:
        n = len(goal)
        elapsed = (t if t is not None else np.zeros(n)).astype(np.float32) / self.max_episode_steps
        vectors = [np.ones((n, *shape), np.float32) * elapsed.reshape(-1, 1) for shape in self.shapes]
        entities = np.zeros((n, self.max_entities, 2), np.float32)
        for row in range(n):
            count = int(self.rng.integers(1, self.max_entities + 1))
            rows = np.stack([np.zeros(count, np.float32), self.rng.choice([-1.0, 1.0], count).astype(np.float32)], axis=1)
            rows[0] = (1.0, goal[row])
            entities[row, :count] = rows[self.rng.permutation(count)]
        return vectors + [entities]


def entity_reach(
    seed: Optional[int] = None, continuous: int = 1, discrete: int = 0, vectors: int = 1, max_entities: int = 4,
    flat: bool = False, grouped: bool = False, n_agents: int = 1,
) -> EntityReach:
    """``env_path: tests.support.simple_envs:entity_reach`` (behavior "EntityReach")."""
    return EntityReach(continuous, discrete, vectors, max_entities, flat, grouped, seed=seed or 0, n_agents=n_agents)


GROUP_REACH_ENVS: list = []  # every GroupReach made by group_reach, newest last: tests read their final_rewards


class GroupsSolved:
    """A callback (ml_arl.training.callbacks): stops the run once the last ``STOP_WINDOW`` successes of the
    newest GroupReach (its ``final_rewards``: the run must be in-process) average above ``solved_at``."""

    def __init__(self, solved_at: float):
        self.solved_at = solved_at

    def on_episode(self, behavior: str, episode: Any) -> Optional[bool]:
        last = GROUP_REACH_ENVS[-1].final_rewards[-STOP_WINDOW:] if GROUP_REACH_ENVS else []
        return False if len(last) == STOP_WINDOW and float(np.mean(last)) > self.solved_at else None


def stop_when_groups_solved(solved_at: float) -> CallbackList:
    """``stop_when_solved`` for ``group_reach``, judged on each agent's success (ML-Agents' criterion)
    instead of its return: with ``solved_at=1.0`` (successes are +-1.06) all of the last 20 succeeded."""
    from ml_arl.training.callbacks import CallbackList

    return CallbackList([GroupsSolved(solved_at)])


def group_reach(seed: Optional[int] = None, variant: str = "continuous", n_groups: int = 4, num_areas: int = 1) -> BaseEnv:
    """``env_path: tests.support.simple_envs:group_reach``: the built-in GroupReach, kept where a test can
    read each agent's success (``final_rewards``, ML-Agents' criterion) during and after an in-process run."""
    from ml_arl.envs.games.builtin import GroupReach

    env = GroupReach(variant, n_groups=n_groups, seed=seed or 0, num_areas=num_areas)
    GROUP_REACH_ENVS.append(env)
    return env
