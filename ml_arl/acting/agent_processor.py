"""From environment steps to trajectories, in the worker (the acting side: no torch).

``AgentProcessor`` turns the DecisionSteps / TerminalSteps of one behavior in one environment
into per-agent experience and cuts it into ``Trajectory`` objects at ``time_horizon`` or at the
end of an episode. It runs where the environment runs (in the worker process, or in the main
process for the in-process manager), so a worker that dies takes its half-built trajectories
with it: they can never be mixed into training. The main-process end of a behavior is
ml_arl.training.router.

An experience is (obs_t, action_t, reward_{t+1}); the reward arrives with the next step of the
same agent. ``interrupted`` (a max-step cut) is kept apart from a true termination, so the
trainer bootstraps the value of the last observation only for interrupted or cut trajectories.
An agent that finishes its episode and reappears in the same step (as Unity agents do) starts
a fresh trajectory. The first trajectory of each episode is marked ``episode_start``: a reset
(``end_episodes``), a switch of ``collect`` or a new worker drops episodes without a terminal
step, and the mark tells the trainer that what it kept for the agent id belongs to another one.

Groups (``group_id`` > 0), as ML-Agents' AgentProcessor gathers them for POCA: at every step,
each agent of a group that acted before leaves a status (the observation it acted on, its
action, whether its episode just ended); each agent's experience of that step carries its
groupmates' statuses, and a trajectory's end carries the groupmates' current observations.
An agent that ends its episode stays in its group's statuses until the step is processed, so
its groupmates see it leave; ``Groupmates.all_done`` tells the trainer whether the whole group
had ended when the trajectory did (an agent that leaves early bootstraps from its group's value).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

import numpy as np
from mlagents_envs.base_env import BehaviorSpec, DecisionSteps, TerminalSteps

from ml_arl.acting.muscle import ActionInfo
from ml_arl.acting.observation_slots import SharedFiles, SlotPool, Slots, write_rows
from ml_arl.core.experience import EpisodeStat, Groupmates, Trajectory
from ml_arl.core.objectives import Objective, ObjectiveBatch, evaluate


class _Decision(NamedTuple):
    """What an agent decided at one step, kept until its reward arrives with the next; the
    observation it acted on is in its slot, at the row after its completed steps."""

    continuous: np.ndarray
    discrete: np.ndarray
    allowed: Optional[np.ndarray]  # the action mask row, None without discrete actions
    log_prob: np.ndarray  # [D] per-dimension log-probabilities
    memory: Optional[np.ndarray]  # the actor's memory before the step (with an LSTM)
    extra: Any = None  # what a user muscle hands its trainer with the step (ActionInfo.extras)


class _AgentState:
    __slots__ = (
        "steps", "rewards", "env_rewards", "group_rewards", "group_id", "pending", "ep_reward", "ep_objective", "ep_length",
        "mates", "first", "pool", "slot",
    )

    def __init__(self) -> None:
        self.steps: list[_Decision] = []  # per step
        self.rewards: list[float] = []
        self.env_rewards: list[float] = []
        self.group_rewards: list[float] = []
        self.mates: list[list[_MateStatus]] = []  # per step, the groupmates' statuses
        self.group_id = 0
        self.pending: Optional[_Decision] = None  # the last decision, waiting for its reward
        self.ep_reward = 0.0
        self.ep_objective = 0.0
        self.ep_length = 0
        self.first = True  # no trajectory of this episode emitted yet
        self.pool: Optional[SlotPool] = None  # where this trajectory's observations are written (collecting)
        self.slot = 0


class _MateStatus(NamedTuple):
    """A groupmate's part of one step (ML-Agents' AgentStatus, without the reward)."""

    obs: list[np.ndarray]  # the observation rows it acted on
    continuous: np.ndarray
    discrete: np.ndarray
    done: bool


def _rows(obs: list[np.ndarray]) -> list[list[np.ndarray]]:
    """Per agent, the list of its observation rows (one per observation spec). The arrays are
    copied first: an environment may reuse its observation buffers on the next step."""
    if len(obs) == 1:
        return [[row] for row in np.array(obs[0])]
    return [list(agent_obs) for agent_obs in zip(*(np.array(o) for o in obs))]


class AgentProcessor:
    """Assembles trajectories of one behavior in one environment (one worker).

    ``objective`` (optional) turns the environment reward into the behavior's own reward; it is
    called once per step with every agent that received a reward. With ``collect`` off (a frozen
    behavior, a self-play ghost) only episode statistics are kept: no trajectory is built.
    """

    def __init__(
        self, behavior: str, spec: BehaviorSpec, time_horizon: int, worker_id: int, objective: Optional[Objective] = None,
        shared: Optional[SharedFiles] = None,
    ):
        self.behavior = behavior
        self.spec = spec
        self.time_horizon = time_horizon
        self.worker_id = worker_id
        self.objective = objective
        self.collect = True
        self.branches = tuple(spec.action_spec.discrete_branches)
        self.agents: dict[int, _AgentState] = {}
        self.trajectories: list[Trajectory] = []
        self.episodes: list[EpisodeStat] = []
        self.policy_version = 0
        # group id -> agent id -> its status in the latest step / its latest observation rows
        self.group_status: dict[int, dict[int, _MateStatus]] = {}
        self.group_obs: dict[int, dict[int, list[np.ndarray]]] = {}
        self.shared = shared  # a worker process's shared files (ml_arl.acting.observation_slots); None: the heap
        self._slots: Optional[Slots] = None
        self._compact: list[int] = []  # trajectories (by index) to copy out of their heap slots when taken

    def _take_slot(self, state: _AgentState, agents: int) -> None:
        slots = self._slots
        if slots is None or slots.rows != self.time_horizon + 1:  # (a new time horizon: new slots; the old drain)
            slots = self._slots = Slots([tuple(o.shape) for o in self.spec.observation_specs], self.time_horizon + 1, self.shared)
        state.pool, state.slot = slots.take(agents)

    def _drop(self, states: Any) -> None:
        """These agents' half-built trajectories are dropped: their slots are free again."""
        for state in states:
            if state.pool is not None:
                state.pool.release(state.slot)
                state.pool = None

    def set_collect(self, collect: bool) -> None:
        if collect != self.collect:
            self._drop(self.agents.values())
            self.agents.clear()  # half-built experience of the other kind is dropped
            self.group_status.clear()
            self.group_obs.clear()
            self.collect = collect

    def _objective_of(
        self, obs: list[np.ndarray], agent_ids: list[int], reward: np.ndarray, group_reward: np.ndarray,
        terminated: np.ndarray, interrupted: np.ndarray,
    ) -> np.ndarray:
        assert self.objective is not None
        n = len(agent_ids)
        action_spec = self.spec.action_spec
        cont = np.zeros((n, action_spec.continuous_size), np.float32)
        disc = np.zeros((n, len(self.branches)), np.int32)
        for i, agent_id in enumerate(agent_ids):
            state = self.agents.get(agent_id)
            if state is not None and state.pending is not None:
                cont[i], disc[i] = state.pending.continuous, state.pending.discrete
        batch = ObjectiveBatch(
            list(obs), cont, disc, np.asarray(reward, np.float32), np.asarray(group_reward, np.float32),
            np.asarray(terminated, bool), np.asarray(interrupted, bool), np.asarray(agent_ids),
        )
        return evaluate(self.objective, batch)

    def add_experiences(
        self, decision_steps: DecisionSteps, terminal_steps: TerminalSteps, action_info: Optional[ActionInfo]
    ) -> None:
        """Record one environment step; ``action_info`` holds the actions taken for ``decision_steps``."""
        collect = self.collect
        if len(terminal_steps):
            ids = terminal_steps.agent_id.tolist()
            group_rewards = np.asarray(terminal_steps.group_reward)
            interrupted_all = np.asarray(terminal_steps.interrupted, bool)
            objectives = (
                self._objective_of(terminal_steps.obs, ids, terminal_steps.reward, group_rewards, ~interrupted_all, interrupted_all)
                if self.objective is not None else terminal_steps.reward
            )
            t_groups = np.asarray(terminal_steps.group_id)
            if collect and (t_groups > 0).any():
                self._add_group_status(ids, t_groups.tolist(), _rows(terminal_steps.obs), True)
            if collect and len(decision_steps) and action_info is not None:
                self._gather_decision_statuses(decision_steps, set(ids))
            for i, (agent_id, reward, objective, interrupted, group_id, group_reward) in enumerate(
                zip(
                    ids, terminal_steps.reward.tolist(), np.asarray(objectives).tolist(), interrupted_all.tolist(),
                    np.asarray(terminal_steps.group_id).tolist(), group_rewards.tolist(),
                )
            ):
                state = self.agents.pop(agent_id, None)
                if state is None:
                    continue
                mates = self._mates_of(agent_id, group_id)
                if state.pending is not None:
                    state.group_id = group_id
                    self._complete(state, reward, objective, group_reward, mates)
                    if collect and state.pool is not None:
                        write_rows([(state.pool, state.slot, len(state.steps), i)], terminal_steps.obs)  # what followed
                        self._emit(state, agent_id, True, bool(interrupted))
                self._drop((state,))
                if state.ep_length > 0:
                    self.episodes.append(
                        EpisodeStat(
                            self.behavior, state.ep_reward, state.ep_length, bool(interrupted), state.ep_objective,
                            f"{self.worker_id}-{agent_id}", objective + group_reward, all(m.done for m in mates),
                        )
                    )
        elif collect and len(decision_steps) and action_info is not None:
            self._gather_decision_statuses(decision_steps, set())
        self._add_decisions(decision_steps, action_info)
        for agent_id, group_id in zip(terminal_steps.agent_id.tolist(), np.asarray(terminal_steps.group_id).tolist()):
            self._leave_group(agent_id, group_id)  # after every groupmate's step saw it end

    def _add_decisions(self, decision_steps: DecisionSteps, action_info: Optional[ActionInfo]) -> None:
        collect = self.collect
        n = len(decision_steps)
        if not n or action_info is None:
            return
        ids = decision_steps.agent_id.tolist()
        rewards = decision_steps.reward
        group_rewards = np.asarray(decision_steps.group_reward)
        if self.objective is not None:
            none = np.zeros(n, bool)
            objectives = self._objective_of(decision_steps.obs, ids, rewards, group_rewards, none, none).tolist()
        else:
            objectives = rewards.tolist()
        allowed = action_info.allowed  # the masks the muscle acted under
        allowed_rows = list(allowed) if allowed is not None else [None] * n
        agents = self.agents
        horizon = self.time_horizon
        writes: list[tuple[SlotPool, int, int, int]] = []  # (pool, slot, row, agent index): observation rows to write
        for i, (agent_id, reward, objective, group_id, group_reward, cont, disc, mask, logp, memory, extra) in enumerate(zip(
            ids,
            rewards.tolist(),
            objectives,
            np.asarray(decision_steps.group_id).tolist(),
            group_rewards.tolist(),
            list(action_info.continuous),
            list(action_info.discrete),
            allowed_rows,
            list(action_info.log_prob),  # [D] rows: per-dimension log-probabilities
            list(action_info.memory) if action_info.memory is not None else [None] * n,
            action_info.extras if action_info.extras is not None else [None] * n,
        )):
            state = agents.get(agent_id)
            if state is None:
                state = agents[agent_id] = _AgentState()
            elif state.pending is not None:
                self._complete(state, reward, objective, group_reward, self._mates_of(agent_id, group_id) if collect else [])
                if state.pool is not None and len(state.rewards) >= min(horizon, state.pool.rows - 1):
                    writes.append((state.pool, state.slot, len(state.steps), i))  # what followed the cut trajectory
                    self._emit(state, agent_id, False, False)
            if collect:
                if state.pool is None:
                    self._take_slot(state, n)
                assert state.pool is not None
                writes.append((state.pool, state.slot, len(state.steps), i))
            state.group_id = group_id
            state.pending = _Decision(cont, disc, mask, logp, memory, extra)
        if writes:
            write_rows(writes, decision_steps.obs)

    # ------------------------------------------------------------------ groups
    def _gather_decision_statuses(self, decision_steps: DecisionSteps, ended: set[int]) -> None:
        groups = np.asarray(decision_steps.group_id).tolist()
        if not any(g > 0 for g in groups):
            return
        ids = decision_steps.agent_id.tolist()
        keep = [i for i, agent_id in enumerate(ids) if agent_id not in ended]  # an agent that ended and restarted: its end counts
        rows = _rows(decision_steps.obs)
        self._add_group_status([ids[i] for i in keep], [groups[i] for i in keep], [rows[i] for i in keep], False)

    def _add_group_status(self, ids: list[int], groups: list[int], obs_rows: list[list[np.ndarray]], done: bool) -> None:
        """Each grouped agent that acted before: its status of this step and its current observation."""
        for agent_id, group_id, rows in zip(ids, groups, obs_rows):
            state = self.agents.get(agent_id)
            if group_id <= 0 or state is None or state.pending is None:
                continue
            pending = state.pending
            acted_on = [block[state.slot, len(state.steps)].copy() for block in state.pool.blocks] if state.pool is not None else []
            self.group_status.setdefault(group_id, {})[agent_id] = _MateStatus(acted_on, pending.continuous, pending.discrete, done)
            self.group_obs.setdefault(group_id, {})[agent_id] = rows

    def _mates_of(self, agent_id: int, group_id: int) -> list[_MateStatus]:
        if group_id <= 0:
            return []
        return [status for other, status in self.group_status.get(group_id, {}).items() if other != agent_id]

    def _leave_group(self, agent_id: int, group_id: int) -> None:
        for table in (self.group_status, self.group_obs):
            members = table.get(group_id)
            if members is not None:
                members.pop(agent_id, None)
                if not members:
                    del table[group_id]

    def _groupmates(self, state: _AgentState, agent_id: int) -> Optional[Groupmates]:
        """The groupmates' part of the trajectory being emitted, padded to its most groupmates."""
        if state.group_id <= 0:
            return None
        next_rows = [rows for other, rows in self.group_obs.get(state.group_id, {}).items() if other != agent_id]
        slots = max([len(m) for m in state.mates] + [len(next_rows)])
        steps = len(state.mates)
        specs = self.spec.observation_specs
        obs = [np.zeros((steps, slots, *spec.shape), np.float32) for spec in specs]
        cont = np.zeros((steps, slots, self.spec.action_spec.continuous_size), np.float32)
        disc = np.zeros((steps, slots, len(self.branches)), np.int32)
        present = np.zeros((steps, slots), bool)
        for t, mates in enumerate(state.mates):
            for m, status in enumerate(mates):
                for k, row in enumerate(status.obs):
                    obs[k][t, m] = row
                cont[t, m], disc[t, m], present[t, m] = status.continuous, status.discrete, True
        next_obs = [np.zeros((slots, *spec.shape), np.float32) for spec in specs]
        for m, rows in enumerate(next_rows):
            for k, row in enumerate(rows):
                next_obs[k][m] = row
        next_present = np.arange(slots) < len(next_rows)
        all_done = all(status.done for status in state.mates[-1]) if state.mates else True
        return Groupmates(obs, cont, disc, present, next_obs, next_present, all_done)

    def _complete(
        self, state: _AgentState, reward: float, objective: float, group_reward: float, mates: list[_MateStatus]
    ) -> None:
        assert state.pending is not None
        if self.collect:
            state.steps.append(state.pending)
            state.mates.append(mates)
            state.rewards.append(objective)
            state.env_rewards.append(reward)
            state.group_rewards.append(group_reward)
        state.pending = None
        state.ep_reward += reward
        state.ep_objective += objective
        state.ep_length += 1

    def _emit(self, state: _AgentState, agent_id: int, done: bool, interrupted: bool) -> None:
        """The trajectory so far, its observations the views of its slot (the row after its last step
        written, or about to be, with what followed)."""
        cont, disc, allowed, logp, memories, extras = zip(*state.steps)
        assert state.pool is not None
        obs, next_obs = state.pool.views(state.slot, len(state.steps))
        if not state.pool.shared and 2 * len(state.steps) < state.pool.rows:
            self._compact.append(len(self.trajectories))
        state.pool = None
        traj = Trajectory(
            behavior=self.behavior,
            agent_id=f"{self.worker_id}-{agent_id}",
            obs=obs,
            next_obs=next_obs,
            continuous=np.stack(cont),
            discrete=np.stack(disc),
            allowed=np.stack(allowed) if allowed[0] is not None else None,
            log_prob=np.asarray(logp, np.float32),
            rewards=np.asarray(state.rewards, np.float32),
            group_rewards=np.asarray(state.group_rewards, np.float32),
            group_id=state.group_id,
            done=done,
            interrupted=interrupted,
            policy_version=self.policy_version,
            env_rewards=np.asarray(state.env_rewards, np.float32) if self.objective is not None else None,
            groupmates=self._groupmates(state, agent_id),
            memories=np.stack(memories) if memories[0] is not None else None,
            episode_start=state.first,
            extras=list(extras) if any(e is not None for e in extras) else None,
        )
        state.first = False
        self.trajectories.append(traj)
        state.steps, state.rewards, state.env_rewards, state.group_rewards, state.mates = [], [], [], [], []

    def end_episodes(self) -> None:
        """Drop every half-built trajectory (after a forced reset); nothing reaches training."""
        self._drop(self.agents.values())
        self.agents.clear()
        self.group_status.clear()
        self.group_obs.clear()

    def take(self) -> tuple[list[Trajectory], list[EpisodeStat]]:
        """What was emitted since the last call. A trajectory of a heap slot that fills less than half
        of it leaves it as copies, so the slot is free at once (a shared slot stays: it is not copied)."""
        for k in self._compact:
            traj = self.trajectories[k]
            traj.obs[:] = [o.copy() for o in traj.obs]  # (in place: a Trajectory's len() is its steps, which _replace trips on)
            traj.next_obs[:] = [o.copy() for o in traj.next_obs]
        self._compact = []
        out = (self.trajectories, self.episodes)
        self.trajectories, self.episodes = [], []
        return out
