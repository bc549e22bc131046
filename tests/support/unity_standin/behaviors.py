"""The stand-in's behaviors and their agents (standin.py's docstring says what each one is): each
answers a RESET and a STEP of its agents with their AgentInfo bytes."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from tests.support.unity_standin.options import CROWD, MATES, PICKER, RECALL, SEEKER, Options
from tests.support.unity_standin.wire import (
    AVERAGE,
    HISTOGRAM,
    NONE,
    SUM,
    VARIABLE_SIZE,
    InfoEncoder,
    action_mask,
    agent_info,
    brain_parameters_bytes,
    camera_observation,
    decode_action,
    float_bytes,
    float_observation,
    vector,
    vector_observation,
)

if TYPE_CHECKING:
    from tests.support.unity_standin.standin import World

PICKER_EPISODE = 5


class Seeker:
    name = SEEKER

    def __init__(self, world: World, n: int, per_area: int, episode_length: int, opts: Options) -> None:
        self.world = world
        self.n = n
        self.episode_length = episode_length
        self.visual = opts.visual
        self.visual_only = opts.visual_only
        self.layout = opts.visual_layout
        self.compression = opts.visual_compression
        self.height, self.width = opts.image_height, opts.image_width
        self.x = np.zeros(n)
        self.g = np.zeros(n)
        self.steps = np.zeros(n, dtype=np.int64)
        self.enc = InfoEncoder(n, [i // per_area + 1 for i in range(n)])
        self.obs_head, self.obs_tail = vector_observation("VectorSensor", 2)
        self.group_reward = struct.pack("<f", 0.5)
        self.camera_cache: dict[tuple[int, int], bytes] = {}
        self.image_module: Any = None
        if self.visual and self.compression == "png":
            from PIL import Image  # only for PNG images

            self.image_module = Image

    def brain_parameters(self) -> bytes:
        return brain_parameters_bytes(self.name, continuous=1, branches=[])

    def _start(self, idx: np.ndarray) -> None:
        rng = self.world.rng
        r_values = self.world.parameter("target_range", len(idx), 1.0)
        self.world.stats.add_many("Standin/target_range", r_values, AVERAGE)
        r = np.minimum(np.abs(r_values), 1.0)
        self.g[idx] = rng.uniform(-r, r)
        self.x[idx] = rng.uniform(-1.0, 1.0, len(idx))
        self.steps[idx] = 0

    def _observations(self, x: np.ndarray, g: np.ndarray) -> list[bytes]:
        floats = float_bytes(np.stack([x, g], axis=1))
        head, tail = self.obs_head, self.obs_tail
        vectors = [head + floats[8 * i : 8 * i + 8] + tail for i in range(len(x))]
        if not self.visual:
            return vectors
        if self.visual_only:
            vectors = [b""] * len(x)
        cx = np.rint((np.clip(x, -1, 1) + 1.0) * (self.width - 1) / 2).astype(int).tolist()
        cg = np.rint((np.clip(g, -1, 1) + 1.0) * (self.width - 1) / 2).astype(int).tolist()
        return [v + self._camera(a, b) for v, a, b in zip(vectors, cx, cg)]

    def _camera(self, cx: int, cg: int) -> bytes:
        """Column cx (the agent) red, column cg (the goal) green."""
        cached = self.camera_cache.get((cx, cg))
        if cached is None:
            image = np.zeros((self.height, self.width, 3), dtype=np.uint8)
            image[:, cx, 0] = 255
            image[:, cg, 1] = 255
            cached = camera_observation("CameraSensor", image, self.layout, self.compression, self.image_module)
            self.camera_cache[(cx, cg)] = cached
        return cached

    def reset(self) -> bytes:
        self._start(np.arange(self.n))
        return self._decisions(np.zeros(self.n, dtype=np.float32))

    def _decisions(self, rewards: np.ndarray) -> bytes:
        rb = float_bytes(rewards)
        obs = self._observations(self.x, self.g)
        info = self.enc.info
        return b"".join([info(i, rb[4 * i : 4 * i + 4], obs[i]) for i in range(self.n)])

    def step(self, actions: list[bytes]) -> bytes:
        a = np.zeros(self.n)
        for i, raw in enumerate(actions[: self.n]):
            cont, _ = decode_action(raw)
            if cont:
                a[i] = cont[0]
        a = np.clip(np.nan_to_num(a), -1.0, 1.0)
        self.x = np.clip(self.x + 0.25 * a, -1.0, 1.0)
        self.steps += 1
        distance = np.abs(self.g - self.x)
        reached = distance < 0.15
        rewards = np.where(reached, 1.0, -0.1 * distance).astype(np.float32)
        cut = ~reached & (self.steps >= self.episode_length)
        done = np.flatnonzero(reached | cut)
        terminal = b""
        if len(done):
            rb = float_bytes(rewards[done])
            obs = self._observations(self.x[done], self.g[done])
            info = self.enc.info
            terminal = b"".join([
                info(i, rb[4 * j : 4 * j + 4], obs[j], done=True, max_step=bool(cut[i]),
                     group_reward=self.group_reward if reached[i] else b"")
                for j, i in enumerate(done.tolist())
            ])
            self.world.episodes += len(done)
            self.world.stats.add_many("Standin/Goal Distance", distance[done], HISTOGRAM)
            self._start(done)
            rewards[done] = 0.0
        return terminal + self._decisions(rewards)


class Picker:
    name = PICKER

    def __init__(self, world: World, n: int) -> None:
        self.world = world
        self.n = n
        self.steps = np.zeros(n, dtype=np.int64)
        self.cue = np.zeros(n, dtype=np.int64)
        self.flag = np.zeros(n, dtype=np.int64)
        self.disabled = np.zeros(n, dtype=np.int64)
        self.enc = InfoEncoder(n, [0] * n)
        self.obs_head, self.obs_tail = vector_observation("VectorSensor", 4)
        self.masks = [action_mask([b == d for b in range(3)] + [False, False]) for d in range(3)]  # branch 0 then 1
        self.eye = np.eye(3)

    def brain_parameters(self) -> bytes:
        return brain_parameters_bytes(self.name, continuous=0, branches=[3, 2])

    def _draw(self) -> None:
        rng = self.world.rng
        self.cue = rng.integers(0, 3, self.n)
        self.flag = rng.integers(0, 2, self.n)
        self.disabled = (self.cue + rng.integers(1, 3, self.n)) % 3

    def _observations(self, idx: np.ndarray) -> list[bytes]:
        obs = np.concatenate([self.eye[self.cue[idx]], self.flag[idx, None]], axis=1)
        floats = float_bytes(obs)
        return [self.obs_head + floats[16 * j : 16 * j + 16] + self.obs_tail for j in range(len(idx))]

    def reset(self) -> bytes:
        self.steps[:] = 0
        self._draw()
        self.world.stats.add("Standin/Masked Actions Taken", 0.0, SUM)
        return self._decisions(np.zeros(self.n, dtype=np.float32))

    def _decisions(self, rewards: np.ndarray) -> bytes:
        rb = float_bytes(rewards)
        obs = self._observations(np.arange(self.n))
        info, masks, disabled = self.enc.info, self.masks, self.disabled.tolist()
        return b"".join([info(i, rb[4 * i : 4 * i + 4], obs[i], mask=masks[disabled[i]]) for i in range(self.n)])

    def step(self, actions: list[bytes]) -> bytes:
        b0 = np.zeros(self.n, dtype=np.int64)
        b1 = np.zeros(self.n, dtype=np.int64)
        for i, raw in enumerate(actions[: self.n]):
            _, disc = decode_action(raw)
            if disc:
                b0[i] = disc[0]
                if len(disc) > 1:
                    b1[i] = disc[1]
        masked = b0 == self.disabled
        rewards = (0.5 * (b0 == self.cue) + 0.5 * (b1 == self.flag)).astype(np.float32)
        rewards[masked] = -1.0
        self.world.stats.add("Standin/Masked Actions Taken", float(masked.sum()), SUM)
        self.steps += 1
        self._draw()
        done = np.flatnonzero(self.steps >= PICKER_EPISODE)
        terminal = b""
        if len(done):
            rb = float_bytes(rewards[done])
            obs = self._observations(done)
            terminal = b"".join([
                self.enc.info(i, rb[4 * j : 4 * j + 4], obs[j], done=True) for j, i in enumerate(done.tolist())
            ])
            self.world.episodes += len(done)
            self.steps[done] = 0
            rewards[done] = 0.0
        return terminal + self._decisions(rewards)


# Behaviors of issue 13: groups (Mates), memory (Recall), a buffer sensor (Crowd). Unlike Seeker
# and Picker their agents get a new id every episode, as Unity's episode ids.

MOVE = 0.2
TIME_PENALTY = 0.01
SUCCESS = 1.0 + 6 * TIME_PENALTY  # the best return of a reach from 0 to +-1 is about 1.0
RECALL_SHOW_STEPS = 2
CROWD_ENTITIES, CROWD_ENTITY_SIZE = 4, 3
GROUP_ID_BASE = 1000


class _Episodic:
    """Agents that each get a new id when a new episode starts."""

    def __init__(self, world: World, n: int) -> None:
        self.world = world
        self.n = n
        self.ids = np.zeros(n, dtype=np.int64)  # every episode (a RESET's too) gets new ids: 0, 1, ...
        self.next_id = 0

    def _new_ids(self, idx: np.ndarray) -> None:
        self.ids[idx] = np.arange(self.next_id, self.next_id + len(idx))
        self.next_id += len(idx)

    @staticmethod
    def _moves(actions: list[bytes], n: int) -> np.ndarray:
        a = np.zeros(n)
        for i, raw in enumerate(actions[:n]):
            cont, _ = decode_action(raw)
            if cont:
                a[i] = cont[0]
        return np.clip(np.nan_to_num(a), -1.0, 1.0)


class Mates(_Episodic):
    """Groups of two 1-D reaches with a group reward (see the module docstring)."""

    name = MATES
    GROUP = 2

    def __init__(self, world: World, n_groups: int, episode_length: int) -> None:
        super().__init__(world, n_groups * self.GROUP)
        self.n_groups = n_groups
        self.episode_length = episode_length
        self.group_ids = GROUP_ID_BASE + 1 + np.arange(self.n) // self.GROUP
        self.x = np.zeros(self.n)
        self.goal = np.ones(self.n)
        self.success = np.zeros(self.n)
        self.active = np.ones(self.n, dtype=bool)
        self.t = np.zeros(n_groups, dtype=np.int64)

    def brain_parameters(self) -> bytes:
        return brain_parameters_bytes(self.name, continuous=1, branches=[])

    def _start(self, groups: np.ndarray) -> None:
        idx = (groups[:, None] * self.GROUP + np.arange(self.GROUP)).ravel()
        self.x[idx] = 0.0
        self.goal[idx] = self.world.rng.choice([-1.0, 1.0], len(idx))
        self.success[idx] = 0.0
        self.active[idx] = True
        self.t[groups] = 0
        self._new_ids(idx)

    def _info(self, i: int, reward: float, **kw: Any) -> bytes:
        obs = vector("VectorSensor", np.array([self.goal[i], self.x[i]]))
        return agent_info(int(self.ids[i]), reward, obs, group_id=int(self.group_ids[i]), **kw)

    def reset(self) -> bytes:
        self._start(np.arange(self.n_groups))
        return b"".join(self._info(i, 0.0) for i in range(self.n))

    def step(self, actions: list[bytes]) -> bytes:
        acting = np.flatnonzero(self.active)  # the agents asked for a decision last time, in that order
        self.x[acting] = np.clip(self.x[acting] + np.clip(self._moves(actions, len(acting)), -MOVE, MOVE), -1.0, 1.0)
        self.t += 1
        ended = self.active & (np.abs(self.x) >= 1.0 - 1e-6)
        self.success[ended] = SUCCESS * np.sign(self.x[ended]) * self.goal[ended]
        still = (self.active & ~ended).reshape(self.n_groups, self.GROUP)
        group_over = ~still.any(axis=1)
        cut = ~group_over & (self.t >= self.episode_length)
        group_of = np.arange(self.n) // self.GROUP
        terminal: list[bytes] = []
        for i in np.flatnonzero(ended).tolist():
            g = group_of[i]
            if group_over[g]:  # AddGroupReward(mean success), then EndGroupEpisode
                mean = float(self.success[g * self.GROUP : (g + 1) * self.GROUP].mean())
                terminal.append(self._info(i, 0.0, done=True, group_reward=mean))
            else:  # leaves its group early
                terminal.append(self._info(i, min(-TIME_PENALTY, float(self.success[i])), done=True))
        for i in np.flatnonzero(still.ravel() & cut[group_of]).tolist():  # GroupEpisodeInterrupted
            terminal.append(self._info(i, -TIME_PENALTY, done=True, max_step=True))
        interrupted = still.ravel() & cut[group_of]
        self.world.record(self.name, self.success[ended].tolist() + [0.0] * int(interrupted.sum()))  # cut: no success
        self.world.episodes += int(ended.sum()) + int(interrupted.sum())
        self.active &= ~ended
        restart = np.flatnonzero(group_over | cut)
        if len(restart):
            self._start(restart)
        fresh = np.isin(group_of, restart)
        decisions = [self._info(i, 0.0 if fresh[i] else -TIME_PENALTY) for i in np.flatnonzero(self.active).tolist()]
        return b"".join(terminal + decisions)


class _Reach(_Episodic):
    """A one-dimensional reach per agent (Recall, Crowd): position x moves by the action clamped to
    +-MOVE; at -1 or +1 the episode ends with SUCCESS * sign(x) * goal; each other step costs
    TIME_PENALTY; an episode is cut after ``episode_length`` steps. Subclasses set up an episode in
    ``_start`` and say what an agent observes in ``_info``."""

    x: np.ndarray
    t: np.ndarray
    goal: np.ndarray
    returns: np.ndarray
    episode_length: int
    _start: Callable[[np.ndarray], None]  # set up the episodes of these agents
    _info: Callable[..., bytes]  # (agent, reward, **agent_info keywords): its AgentInfo bytes

    def reset(self) -> bytes:
        self._start(np.arange(self.n))
        return b"".join(self._info(i, 0.0) for i in range(self.n))

    def step(self, actions: list[bytes]) -> bytes:
        self.x = np.clip(self.x + np.clip(self._moves(actions, self.n), -MOVE, MOVE), -1.0, 1.0)
        self.t += 1
        finished = np.abs(self.x) >= 1.0 - 1e-6
        rewards = np.where(finished, SUCCESS * np.sign(self.x) * self.goal, -TIME_PENALTY)
        self.returns += rewards
        cut = ~finished & (self.t >= self.episode_length)
        done = np.flatnonzero(finished | cut)
        terminal = [self._info(i, float(rewards[i]), done=True, max_step=bool(cut[i])) for i in done.tolist()]
        self.world.record(self.name, self.returns[done].tolist())
        self.world.episodes += len(done)
        self._start(done)
        rewards[done] = 0.0
        return b"".join(terminal + [self._info(i, float(rewards[i])) for i in range(self.n)])


class Recall(_Reach):
    """The goal is shown only in an episode's first decisions (see the module docstring)."""

    name = RECALL

    def __init__(self, world: World, n: int, episode_length: int) -> None:
        super().__init__(world, n)
        self.episode_length = episode_length
        self.x = np.zeros(n)
        self.goal = np.ones(n)
        self.t = np.zeros(n, dtype=np.int64)
        self.returns = np.zeros(n)

    def brain_parameters(self) -> bytes:
        return brain_parameters_bytes(self.name, continuous=1, branches=[])

    def _start(self, idx: np.ndarray) -> None:
        self.x[idx] = 0.0
        self.goal[idx] = self.world.rng.choice([-1.0, 1.0], len(idx))
        self.t[idx] = 0
        self.returns[idx] = 0.0
        self._new_ids(idx)

    def _info(self, i: int, reward: float, **kw: Any) -> bytes:
        cue = self.goal[i] if self.t[i] < RECALL_SHOW_STEPS else 0.0
        return agent_info(int(self.ids[i]), reward, vector("VectorSensor", np.array([cue])), **kw)


class Crowd(_Reach):
    """A reach to the one goal among 1 to 4 entities of a buffer sensor (see the module docstring)."""

    name = CROWD

    def __init__(self, world: World, n: int, episode_length: int) -> None:
        super().__init__(world, n)
        self.episode_length = episode_length
        self.x = np.zeros(n)
        self.goal = np.zeros(n)
        self.places = np.zeros((n, CROWD_ENTITIES))  # entity positions, in row order
        self.kinds = np.zeros((n, CROWD_ENTITIES, 2))  # rows [is_goal, is_decoy]; padding rows all 0
        self.t = np.zeros(n, dtype=np.int64)
        self.returns = np.zeros(n)

    def brain_parameters(self) -> bytes:
        return brain_parameters_bytes(self.name, continuous=1, branches=[])

    def _start(self, idx: np.ndarray) -> None:
        rng = self.world.rng
        for i in idx.tolist():
            count = int(rng.integers(1, CROWD_ENTITIES + 1))  # appended in a random order, one of them the goal
            self.places[i] = 0.0
            self.places[i, :count] = rng.choice([-1.0, 1.0], count)
            self.kinds[i] = 0.0
            self.kinds[i, :count, 1] = 1.0
            goal = int(rng.integers(0, count))
            self.kinds[i, goal] = (1.0, 0.0)
            self.goal[i] = self.places[i, goal]
        self.x[idx] = 0.0
        self.t[idx] = 0
        self.returns[idx] = 0.0
        self._new_ids(idx)

    def entities(self, i: int) -> np.ndarray:
        """The buffer: rows [p / 2, is_goal, is_decoy], then rows of zeros (a present row sums to
        0.5 or 1.5: never all zeros, nor summing to 0 as padding rows do)."""
        return np.concatenate([self.places[i, :, None] / 2.0, self.kinds[i]], axis=1)

    def _info(self, i: int, reward: float, **kw: Any) -> bytes:
        obs = vector("VectorSensor", np.array([self.x[i]])) + float_observation(
            "BufferSensor", self.entities(i), (VARIABLE_SIZE, NONE)
        )
        return agent_info(int(self.ids[i]), reward, obs, **kw)
