"""The acting side of one environment: env + muscles + agent processors.

An ``EnvRunner`` steps its environment ``n`` times per request with the current muscles
(numpy copies of each behavior's actor) and returns a ``StepBatch``: finished trajectories,
finished episodes and counters. It runs inside a worker process (SubprocessEnvManager) or in
the main process (InProcessEnvManager). This module must not import torch.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from typing import Any, Optional

from mlagents_envs.base_env import ActionTuple, BaseEnv, BehaviorSpec

from ml_arl.acting.agent_processor import AgentProcessor
from ml_arl.acting.muscle import ACTING_NEEDS, Acting, Muscle, masks_allowed
from ml_arl.acting.observation_slots import SharedFiles
from ml_arl.acting.worker_protocol import (
    ActCommand,
    ObservationReply,
    ResetCommand,
    ResetReply,
    SetParametersCommand,
    StepCommand,
    StepReply,
    WorkerCommand,
    WorkerFailure,
    WorkerReply,
)
from ml_arl.core.actor_weights import PolicyMessage
from ml_arl.core.exceptions import RESTARTABLE_EXCEPTIONS, ArlError
from ml_arl.core.experience import EnvStatAggregation, EpisodeStat, StepBatch, Trajectory
from ml_arl.core.import_path import resolve
from ml_arl.core.objectives import build_objective

logger = logging.getLogger(__name__)

def muscle_class(path: Optional[str]) -> Callable[..., Acting]:
    """The class that acts: ml_arl's numpy MLP, or a user class ``pkg.module:Class`` that keeps
    the ``Acting`` contract (ml_arl.acting.muscle)."""
    if path is None:
        return Muscle
    return resolve(path)  # type: ignore[no-any-return]


def build_muscle(path: Optional[str], weights: Any, deterministic: bool, seed: int) -> tuple[Acting, bool]:
    """A muscle and whether it is recurrent; a user class that misses part of the contract is a
    one-line error naming it and what it lacks."""
    muscle = muscle_class(path)(weights, deterministic, seed)
    missing = [name for name in ACTING_NEEDS if not hasattr(muscle, name)]
    recurrent = int(getattr(muscle, "memory_size", 0) or 0) > 0
    if recurrent and not hasattr(muscle, "forget"):
        missing.append("forget (it has a memory_size)")
    if missing:
        raise TypeError(f"muscle {path}: has no {', '.join(missing)}; see ml_arl.acting.muscle.Acting")
    return muscle, recurrent


class EnvRunner:
    def __init__(self, env: BaseEnv, worker_id: int, seed: int, shared: Optional[SharedFiles] = None):
        """``shared``: a worker process's files in shared memory, where its trajectories' observations
        are written (ml_arl.acting.observation_slots); None keeps them on the heap."""
        self.env = env
        self.shared = shared
        self.worker_id = worker_id
        self.seed = seed
        self.env.reset()
        self.specs: dict[str, BehaviorSpec] = dict(self.env.behavior_specs)
        self._reported: set[str] = set()
        self.muscles: dict[str, Acting] = {}
        self._recurrent: dict[str, bool] = {}
        self.processors: dict[str, AgentProcessor] = {}
        self._waiting: dict[str, PolicyMessage] = {}  # policies of behaviors this env has not shown yet
        self._muscle_paths: dict[str, Optional[str]] = {}
        self._objectives: dict[str, Optional[tuple[str, dict[str, Any]]]] = {}

    def set_policy(self, behavior: str, msg: PolicyMessage) -> None:
        if behavior not in self.specs:
            self.specs = dict(self.env.behavior_specs)
            if behavior not in self.specs:  # not in this env (yet): act once it shows up
                self._waiting[behavior] = msg
                return
        muscle = self.muscles.get(behavior)
        if muscle is None or self._muscle_paths.get(behavior) != msg.muscle:
            seed = self.seed * 7919 + len(self.muscles)
            self.muscles[behavior], self._recurrent[behavior] = build_muscle(msg.muscle, msg.weights, msg.deterministic, seed)
            self._muscle_paths[behavior] = msg.muscle
        else:
            muscle.set_weights(msg.weights)
            muscle.deterministic = msg.deterministic
        proc = self.processors.get(behavior)
        if proc is None:
            proc = self.processors[behavior] = AgentProcessor(
                behavior, self.specs[behavior], msg.time_horizon, self.worker_id, shared=self.shared
            )
        if self._objectives.get(behavior) != msg.objective:
            self._objectives[behavior] = msg.objective
            proc.objective = None if msg.objective is None else build_objective(*msg.objective)
            bind = getattr(proc.objective, "bind", None)
            if callable(bind):  # an objective computed by its environment (ml_arl.palaestrai.objective)
                bind(self.env, behavior)
        proc.time_horizon = msg.time_horizon
        proc.set_collect(msg.collect)
        proc.policy_version = msg.version

    def set_environment_parameters(self, params: dict[str, Any]) -> None:
        """Environments that take parameters get them (``env.set_environment_parameters(params)``:
        a number or a sampler dict per name; see ml_arl.envs.parameter_values). The caller resets the
        environment afterwards, or not (a lesson changed: the env applies them as it does)."""
        setter = getattr(self.env, "set_environment_parameters", None)
        if setter is None:
            if params:
                logger.warning("worker %d: the environment takes no environment_parameters; %s ignored",
                               self.worker_id, ", ".join(params))
            return
        setter(params)

    def behavior_extras(self) -> dict[str, bytes]:
        """What the environment tells the trainers beyond the specs (``env.behavior_extras()``:
        behavior -> pickled bytes), if it tells anything."""
        extras = getattr(self.env, "behavior_extras", None)
        return dict(extras()) if callable(extras) else {}

    def take_new_specs(self) -> dict[str, BehaviorSpec]:
        new = {k: v for k, v in self.specs.items() if k not in self._reported}
        self._reported.update(new)
        return new

    def run(self, n_steps: int) -> StepBatch:
        env = self.env
        entropy: dict[str, list[float]] = {b: [0.0, 0] for b in self.muscles}  # type: ignore[misc]
        stepped = 0  # the steps that did something: an environment may say it is idle (a palaestrAI worker past its episodes)
        for _ in range(n_steps):
            stepped += not getattr(env, "idle", False)
            for behavior, muscle in self.muscles.items():
                decision, terminal = env.get_steps(behavior)
                info = None
                recurrent = self._recurrent[behavior]
                if recurrent and len(terminal):
                    muscle.forget(terminal.agent_id)  # an agent that restarts in this step starts from zeros
                if len(decision):
                    allowed = masks_allowed(decision.action_mask, len(decision), muscle.branches)
                    info = muscle.act(decision.obs, allowed, decision.agent_id) if recurrent else muscle.act(decision.obs, allowed)
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
        env_stats: dict[str, list[tuple[float, EnvStatAggregation]]] = {}
        take_stats = getattr(env, "take_environment_stats", None)  # Unity builds: the stats side channel
        if take_stats is not None:
            env_stats = {k: [(float(v), EnvStatAggregation(agg.value)) for v, agg in vals] for k, vals in take_stats().items()}
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
            stepped,
            {b: (float(v[0]), int(v[1])) for b, v in entropy.items()},
            self.take_new_specs(),
            env_stats,
        )

    def act(self, actions: dict[str, ActionTuple]) -> ObservationReply:
        """Outside actions (ml_arl.api.vector_env): set them (empty ones for a deciding behavior without
        any), step once if any were given, and hand back every behavior's steps."""
        env = self.env
        if actions:
            for behavior, spec in dict(env.behavior_specs).items():
                action = actions.get(behavior)
                if action is None:
                    decision, _ = env.get_steps(behavior)
                    if not len(decision):
                        continue
                    action = spec.action_spec.empty_action(len(decision))
                env.set_actions(behavior, action)
            env.step()
        return ObservationReply(self.worker_id, {b: env.get_steps(b) for b in env.behavior_specs})

    def reset(self) -> None:
        self.env.reset()
        for proc in self.processors.values():
            proc.end_episodes()
        for behavior, muscle in self.muscles.items():
            if self._recurrent[behavior]:
                muscle.forget()

    def close(self) -> None:
        self.env.close()


def answer(runner: EnvRunner, command: WorkerCommand, steps_per_message: int) -> Optional[WorkerReply]:
    """The worker protocol on the worker's side, whatever carries it (a pipe, a Ray actor call):
    the reply to ``command``, or None for a CloseCommand (the caller closes and says so).
    Exceptions propagate; ``failure_of`` turns them into the FailedReply's WorkerFailure."""
    if isinstance(command, StepCommand):
        if command.parameters is not None:
            runner.set_environment_parameters(command.parameters)
        for behavior, msg in command.policies.items():
            runner.set_policy(behavior, msg)
        return StepReply(runner.worker_id, runner.run(steps_per_message))
    if isinstance(command, ActCommand):
        return runner.act(command.actions)
    if isinstance(command, ResetCommand):
        runner.reset()
        return ResetReply(runner.worker_id)
    if isinstance(command, SetParametersCommand):
        runner.set_environment_parameters(command.parameters)
        runner.reset()
        return ResetReply(runner.worker_id)
    return None


def failure_of(exc: BaseException) -> WorkerFailure:
    """What a worker ships about an exception; call it in the ``except`` block (for the traceback)."""
    return WorkerFailure(
        type(exc).__name__, str(exc) or type(exc).__name__, traceback.format_exc(),
        isinstance(exc, RESTARTABLE_EXCEPTIONS), getattr(exc, "exit_code", 1), isinstance(exc, ArlError),
    )
