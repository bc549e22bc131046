"""The acting side of one environment: env + muscles + agent processors.

An ``EnvRunner`` steps its environment ``n`` times per request with the current muscles
(numpy copies of each behavior's actor) and returns a ``StepBatch``: finished trajectories,
finished episodes and counters. It runs inside a worker process (SubprocessEnvManager) or in
the main process (InProcessEnvManager). This module must not import torch.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

import numpy as np
from mlagents_envs.base_env import BaseEnv, BehaviorSpec
from mlagents_envs.exception import (
    UnityCommunicationException,
    UnityCommunicatorStoppedException,
    UnityEnvironmentException,
    UnityTimeOutException,
)

from ml_arl.agent_processor import AgentProcessor, EpisodeStat, Trajectory
from ml_arl.policy.muscle import Muscle, masks_allowed

logger = logging.getLogger(__name__)

# Failures a fresh environment may cure (as in ML-Agents); anything else stops the run.
RESTARTABLE_EXCEPTIONS: tuple[type[BaseException], ...] = (
    UnityCommunicationException,
    UnityTimeOutException,
    UnityEnvironmentException,
    UnityCommunicatorStoppedException,
)


class PolicyMessage(NamedTuple):
    version: int
    weights: dict[str, np.ndarray]
    time_horizon: int
    deterministic: bool


class StepBatch(NamedTuple):
    worker_id: int
    trajectories: list[Trajectory]
    episodes: list[EpisodeStat]
    env_steps: int
    entropy: dict[str, tuple[float, int]]  # behavior -> (sum of entropies, number of decisions)
    new_specs: dict[str, BehaviorSpec]  # behaviors that appeared since the last batch
    env_stats: dict[str, list[tuple[float, int]]]  # stats side channel: key -> [(value, aggregation)]


class EnvRunner:
    def __init__(self, env: BaseEnv, worker_id: int, seed: int):
        self.env = env
        self.worker_id = worker_id
        self.seed = seed
        self.env.reset()
        self.specs: dict[str, BehaviorSpec] = dict(self.env.behavior_specs)
        self._reported: set[str] = set()
        self.muscles: dict[str, Muscle] = {}
        self.processors: dict[str, AgentProcessor] = {}
        self._waiting: dict[str, PolicyMessage] = {}  # policies of behaviors this env has not shown yet

    def set_policy(self, behavior: str, msg: PolicyMessage) -> None:
        if behavior not in self.specs:
            self.specs = dict(self.env.behavior_specs)
            if behavior not in self.specs:  # not in this env (yet): act once it shows up
                self._waiting[behavior] = msg
                return
        muscle = self.muscles.get(behavior)
        if muscle is None:
            self.muscles[behavior] = Muscle(msg.weights, msg.deterministic, seed=self.seed * 7919 + len(self.muscles))
            self.processors[behavior] = AgentProcessor(behavior, self.specs[behavior], msg.time_horizon, self.worker_id)
        else:
            muscle.set_weights(msg.weights)
            muscle.deterministic = msg.deterministic
        self.processors[behavior].policy_version = msg.version

    def take_new_specs(self) -> dict[str, BehaviorSpec]:
        new = {k: v for k, v in self.specs.items() if k not in self._reported}
        self._reported.update(new)
        return new

    def run(self, n_steps: int) -> StepBatch:
        env = self.env
        entropy: dict[str, list[float]] = {b: [0.0, 0] for b in self.muscles}  # type: ignore[misc]
        for _ in range(n_steps):
            for behavior, muscle in self.muscles.items():
                decision, terminal = env.get_steps(behavior)
                info = None
                if len(decision):
                    allowed = masks_allowed(decision.action_mask, len(decision), muscle.branches)
                    info = muscle.act(decision.obs, allowed)
                    env.set_actions(behavior, info.env_action)
                    acc = entropy[behavior]
                    acc[0] += float(info.entropy.sum())
                    acc[1] += len(decision)
                self.processors[behavior].add_experiences(decision, terminal, info)
            env.step()
        if len(self.env.behavior_specs) != len(self.specs):
            self.specs = dict(self.env.behavior_specs)
            for behavior in [b for b in self._waiting if b in self.specs]:
                self.set_policy(behavior, self._waiting.pop(behavior))
        env_stats: dict[str, list[tuple[float, int]]] = {}
        take_stats = getattr(env, "take_environment_stats", None)  # Unity builds: the stats side channel
        if take_stats is not None:
            env_stats = {k: [(float(v), int(agg.value)) for v, agg in vals] for k, vals in take_stats().items()}
        trajectories: list[Trajectory] = []
        episodes: list[EpisodeStat] = []
        for proc in self.processors.values():
            t, e = proc.take()
            trajectories += t
            episodes += e
        return StepBatch(
            self.worker_id,
            trajectories,
            episodes,
            n_steps,
            {b: (float(v[0]), int(v[1])) for b, v in entropy.items()},
            self.take_new_specs(),
            env_stats,
        )

    def reset(self) -> None:
        self.env.reset()
        for proc in self.processors.values():
            proc.end_episodes()

    def close(self) -> None:
        self.env.close()
