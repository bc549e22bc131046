"""Experience, from the acting side to the trainers, as plain typed data (numpy and mlagents_envs
types only, never torch, so worker processes stay light): ``Trajectory`` (cut at time_horizon or
at an episode's end) and ``EpisodeStat``; a worker's reply to one step request is a ``StepBatch``.
The other two kinds of message are ``ml_arl.core.actor_weights`` (policies, to the workers) and
``ml_arl.acting.worker_protocol`` (commands and replies)."""

from __future__ import annotations

from enum import IntEnum
from typing import Any, NamedTuple, Optional

import numpy as np
from mlagents_envs.base_env import BehaviorSpec


class Groupmates(NamedTuple):
    """What an agent's groupmates did at each step of its trajectory (ML-Agents' GroupmateStatus),
    for a centralised critic (POCA). Slots are padded to the most groupmates seen in the
    trajectory; ``present[t, m]`` says whether slot m holds a groupmate at step t (padding is 0).
    A groupmate's entry at step t is the observation it acted on and the action it took, in the
    same environment step as the agent's own step t."""

    obs: list[np.ndarray]  # one [T, M, *shape] float32 array per observation
    continuous: np.ndarray  # [T, M, n_cont] raw sampled actions
    discrete: np.ndarray  # [T, M, n_branches] int32
    present: np.ndarray  # [T, M] bool
    next_obs: list[np.ndarray]  # one [M, *shape] array per observation: the groupmates' observations after the last step
    next_present: np.ndarray  # [M] bool
    all_done: bool  # every groupmate of the last step had ended its episode too (ML-Agents' all_group_dones_reached)


class Trajectory(NamedTuple):
    behavior: str
    agent_id: str  # "<worker>-<agent id>"
    obs: list[np.ndarray]  # one [T, *shape] float32 array per observation
    next_obs: list[np.ndarray]  # one [*shape] array per observation: what followed the last step
    continuous: np.ndarray  # [T, n_cont] raw sampled actions
    discrete: np.ndarray  # [T, n_branches] int32
    allowed: Optional[np.ndarray]  # [T, sum(branches)] bool action masks (True = allowed)
    log_prob: np.ndarray  # [T, D] log-probability under the acting policy of each continuous dimension and discrete branch
    rewards: np.ndarray  # [T] the behavior's objective after each action (the environment reward by default)
    group_rewards: np.ndarray  # [T] the agent's group reward received with it (0 without groups)
    group_id: int  # the agent's group (MultiAgentGroup in Unity; 0 = none), as of its last step
    done: bool  # the episode ended with the last step
    interrupted: bool  # ... because of a max-step cut, not a terminal state
    policy_version: int
    env_rewards: Optional[np.ndarray] = None  # [T] the environment reward, when an objective changed it
    groupmates: Optional[Groupmates] = None  # the groupmates' steps, for agents in a group (group_id > 0)
    memories: Optional[np.ndarray] = None  # [T, memory_size] float32: the actor's LSTM memory (h, c) before each step
    # the agent's first trajectory of this episode (an agent starts one when it first acts, after its last
    # episode ended, after an environment reset, in a new or restarted worker): whatever a trainer kept for
    # this agent id from an earlier trajectory (running totals, critic memories) belongs to another episode
    episode_start: bool = False
    # [T] what a user muscle handed its trainer with each step (ActionInfo.extras; palaestrAI's
    # data_for_brain), plain picklable values; None when the muscle hands nothing
    extras: Optional[list[Any]] = None

    def __len__(self) -> int:  # type: ignore[override]
        return int(self.rewards.shape[0])


class EpisodeStat(NamedTuple):
    behavior: str
    reward: float  # return in environment reward
    length: int
    interrupted: bool
    objective: float = 0.0  # return in the behavior's objective
    agent_id: str = ""  # "<worker>-<agent id>"
    final: float = 0.0  # objective + group reward of the last step: who won (self-play ELO)
    group_done: bool = True  # every groupmate ended with it (ML-Agents' all_group_dones_reached; True without a group)


class StepBatch(NamedTuple):
    """What one environment produced for one step request."""

    worker_id: int
    trajectories: list[Trajectory]
    episodes: list[EpisodeStat]
    env_steps: int
    entropy: dict[str, tuple[float, int]]  # behavior -> (sum of entropies, number of decisions)
    new_specs: dict[str, BehaviorSpec]  # behaviors that appeared since the last batch
    env_stats: dict[str, list[tuple[float, EnvStatAggregation]]]  # stats side channel: key -> [(value, how)]


class EnvStatAggregation(IntEnum):
    """How a stats side-channel record is summarised: the values of mlagents_envs'
    StatsAggregationMethod, which the trainer process does not import (it loads the side channels)."""

    AVERAGE = 0
    MOST_RECENT = 1
    SUM = 2
    HISTOGRAM = 3
