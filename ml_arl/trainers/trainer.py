"""The trainer (brain) interface, shared by PPO and by user trainers.

A user trainer is named in the config by import path (``trainer_type: pkg.module:Class``) and
subclasses ``Trainer``. The framework builds it as
``Class(behavior, settings, spec, stats, checkpoints, device, training, seed)``; for a user
trainer ``settings.hyperparameters`` is the config's mapping, unchanged. It implements:

- ``add_experience(trajectory)``: take one trajectory (``trajectory.rewards`` is the behavior's
  objective; ``trajectory.env_rewards`` the environment reward when an objective changed it;
  ``trajectory.episode_start`` marks the first of an agent's episode: an environment reset ends
  episodes without a ``done`` trajectory, so what a trainer keeps per agent id is dropped there);
- ``ready_to_update()`` and ``update()``: learn when enough was collected;
- ``policy_snapshot()``: what the workers act with (a ``PolicySnapshot``: the version, the
  weights as numpy data, and the import path of the muscle class that acts with them, ``None``
  for ml_arl's MLP muscle, which takes ``ActorWeights``; see ``ml_arl.acting.env_runner.muscle_class``);
- ``state()`` / ``load_state(state, resume)``: what a checkpoint holds (tensors, numbers,
  strings, lists and dicts: checkpoints are read with ``torch.load(weights_only=True)``).

Everything else (queues, step counting, summaries, checkpoint files) is done here. What a phase
or self-play changes arrives through ``assign(TrainerAssignment)``: the phase's settings,
whether the brain learns, its checkpoints and its step window; a trainer that keeps experience
overrides ``on_new_phase()`` to drop it. A trainer runs in the main process or in its own
thread (``threaded: true``); it must not touch the environment.
"""

from __future__ import annotations

import logging
import pickle
import queue
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Optional, TypeVar

import numpy as np
import torch
from mlagents_envs.base_env import BehaviorSpec

from ml_arl.core.actor_weights import PolicySnapshot
from ml_arl.core.behavior_specs import spec_to_plain
from ml_arl.core.exceptions import ConfigError, RunDirectoryError
from ml_arl.core.experience import Trajectory
from ml_arl.core.import_path import ImportPathError, resolve_class
from ml_arl.results.checkpoints import CheckpointManager, load_torch
from ml_arl.results.summary_writers import StatsReporter
from ml_arl.settings import TrainerSettings
from ml_arl.settings.trainer_settings import BUILTIN_TRAINERS
from ml_arl.trainers.queues import AgentManagerQueue
from ml_arl.trainers.returns import decayed

if TYPE_CHECKING:
    from ml_arl.networks.actor_critic import ActorCritic

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainerAssignment:
    """What a phase (or the run without phases) asks of one brain."""

    settings: TrainerSettings  # the behavior's settings with the phase's overrides
    learning: bool  # False: frozen in this phase (or a test phase); it still acts
    checkpoints: Optional[CheckpointManager]  # where it saves; None when it does not learn
    step_limit: int  # training stops at this step
    schedule_origin: int  # schedules (learning rate, epsilon, beta) decay from this step ...
    schedule_length: int  # ... over this many steps
    new_phase: bool = False  # experience collected before is not on-policy for this phase


HP = TypeVar("HP")  # a trainer's hyperparameters: its pydantic model, or a user trainer's mapping


class Trainer(ABC, Generic[HP]):
    def __init__(
        self,
        behavior: str,
        settings: TrainerSettings,
        spec: BehaviorSpec,
        stats: StatsReporter,
        checkpoints: Optional[CheckpointManager],
        device: torch.device,
        training: bool = True,
        seed: int = 0,
        env_extras: Optional[bytes] = None,
    ):
        self.behavior = behavior
        self.settings = settings
        self.hp: HP = settings.hyperparameters
        self.spec = spec
        self.stats = stats
        self.env_extras = env_extras  # what the environment told of this behavior beyond its spec (SpecsReply.extras)
        self.checkpoints = checkpoints
        self.device = device
        self.training = training  # False with --inference
        self.learning = True  # False in a phase where this behavior is frozen (or a test phase)
        self.step = 0
        self.acted = 0  # steps acted in this run (what --inference counts)
        self.saved_step = -1
        self.policy_version = 0
        self.step_limit = settings.max_steps  # training stops here (a phase moves it)
        self.schedule_origin = 0  # schedules decay from here ...
        self.schedule_length = settings.max_steps  # ... over this many steps
        self.trajectory_queues: list[AgentManagerQueue[Trajectory]] = []
        self.policy_queues: list[AgentManagerQueue[PolicySnapshot]] = []
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.on_checkpoint: Optional[Callable[[str], None]] = None  # train()'s callbacks: told each saved path
        self.build()

    @classmethod
    def settings_problems(cls, settings: TrainerSettings, behavior: str) -> list[str]:
        """What only this trainer can see is wrong with a behavior's settings (a class it names
        that does not import, say), one line each; checked once the environment has shown its
        behaviors and before the run writes anything. None by default."""
        return []

    def build(self) -> None:  # noqa: B027 - optional: a trainer with its own __init__ builds there
        """Make the networks, optimizers and buffers; the last step of ``__init__``, once every
        attribute above is set (``self.settings``, ``self.spec``, ``self.device``, ``self.rng``, ...)."""

    # ------------------------------------------------------------------ to implement
    @abstractmethod
    def add_experience(self, traj: Trajectory) -> None:
        """Keep a trajectory for the next update."""

    @abstractmethod
    def ready_to_update(self) -> bool: ...

    @abstractmethod
    def update(self) -> None:
        """Learn from what was collected (runs in the trainer's thread)."""

    @abstractmethod
    def policy_snapshot(self) -> PolicySnapshot:
        """The current policy, as the workers act with it (``self.policy_version`` as its version)."""

    @abstractmethod
    def state(self) -> dict[str, Any]:
        """Everything a checkpoint holds; must include "global_step"."""

    @abstractmethod
    def load_state(self, state: dict[str, Any], resume: bool) -> None:
        """Restore from ``state()``: everything on --resume, the weights only otherwise."""

    def onnx_actor(self) -> Optional[ActorCritic]:
        """The actor that checkpoints export as <Behavior>-<step>.onnx for Unity (ml_arl.networks.onnx_export),
        or None for a trainer without one (the default: a user trainer's checkpoints are .pt only)."""
        return None

    def export_onnx(self, path: str) -> None:
        """Write this trainer's actor to ``path`` as the ONNX model Unity runs."""
        from ml_arl.networks.onnx_export import export_onnx

        actor = self.onnx_actor()
        if actor is None:
            raise ValueError(f"{self.behavior}: this trainer has no actor to export")
        export_onnx(actor, path)

    def on_new_phase(self) -> None:  # noqa: B027 - optional hook
        """A new phase begins: drop experience that is not on-policy for it (optional)."""

    # ------------------------------------------------------------------ wiring
    def assign(self, assignment: TrainerAssignment) -> None:
        """Take on a phase: its settings, learning or frozen, checkpoints and step window."""
        self.settings = assignment.settings
        self.hp = assignment.settings.hyperparameters
        self.learning = assignment.learning
        self.checkpoints = assignment.checkpoints
        self.saved_step = -1
        self.step_limit = assignment.step_limit
        self.schedule_origin = assignment.schedule_origin
        self.schedule_length = assignment.schedule_length
        if assignment.new_phase:
            self.on_new_phase()

    def subscribe_trajectory_queue(self, q: AgentManagerQueue[Trajectory]) -> None:
        self.trajectory_queues.append(q)

    def publish_policy_queue(self, q: AgentManagerQueue[PolicySnapshot]) -> None:
        self.policy_queues.append(q)

    @property
    def should_still_train(self) -> bool:
        return self.training and self.learning and self.step < self.step_limit

    @property
    def finished(self) -> bool:
        """Training reached max_steps (or, with --inference, max_steps were acted in this run)."""
        if not self.training:
            return self.acted >= self.settings.max_steps
        return self.step >= self.step_limit

    def scheduled(self, initial: float, floor: float, schedule: str) -> float:
        """A hyperparameter on ML-Agents' linear / constant schedule, over this phase's steps."""
        return decayed(initial, floor, self.step - self.schedule_origin, max(1, self.schedule_length), schedule)

    # ------------------------------------------------------------------ the loop
    def advance(self, block_timeout: float = 0.0) -> int:
        """Process queued trajectories (waiting up to ``block_timeout`` s for the first one),
        then update if ready. Returns the number of trajectories processed."""
        processed = 0
        for q in self.trajectory_queues:
            items = q.drain()
            if not items and block_timeout > 0 and processed == 0:
                try:
                    items = [q.get(timeout=block_timeout)]
                except queue.Empty:
                    items = []
            for traj in items:
                self.process_trajectory(traj)
                processed += 1
        if self.should_still_train and self.ready_to_update():
            started = time.perf_counter()
            self.update()
            self.policy_version += 1
            logger.debug("%s: update %d took %.3f s", self.behavior, self.policy_version, time.perf_counter() - started)
            self._publish()
        elif processed and self.should_still_train and self.statistics_moved():
            self._publish()  # the same weights, newer observation statistics: acted with from the next step
        return processed

    def _publish(self) -> None:
        snapshot = self.policy_snapshot()  # taken here, in the trainer's thread, never mid-update
        for pq in self.policy_queues:
            pq.put(snapshot)

    def statistics_moved(self) -> bool:
        """Between updates: whether what the workers act with is stale enough to publish again
        (an on-policy trainer's observation normaliser); never by default."""
        return False

    def process_trajectory(self, traj: Trajectory) -> None:
        if not self.training:  # --inference: count what was acted, learn nothing
            before = self.step
            self.step += len(traj)
            self.acted += len(traj)
            self._maybe_summarize(before)
            return
        if not self.should_still_train:
            return
        self.add_experience(traj)
        before = self.step
        self.step += len(traj)
        self._maybe_summarize(before)
        if self.checkpoints is not None and self.step // self.settings.checkpoint_interval > before // self.settings.checkpoint_interval:
            self.save_checkpoint()

    def _maybe_summarize(self, before: int) -> None:
        freq = self.settings.summary_freq
        if self.step // freq > before // freq:
            self.write_summary((self.step // freq) * freq)

    def write_summary(self, step: int) -> None:
        self.stats.set_stat("Is Training", 1.0 if self.training and self.learning else 0.0)
        self.stats.write_stats(step)

    # ------------------------------------------------------------------ persistence
    def save_checkpoint(self, final: bool = False) -> Optional[str]:
        if self.checkpoints is None:
            return None
        state = self.state()
        # what ml_arl.load_policy needs to rebuild the actor from this file alone
        state.setdefault("Behavior", {"name": self.behavior, "spec": spec_to_plain(self.spec),
                                      "settings": self.settings.model_dump(mode="json")})
        path = self.checkpoints.save(
            self.step, state, self.stats.take_mean_episode_reward(), final=final, export=self.export_onnx if self.onnx_actor() is not None else None
        )
        self.saved_step = self.step
        logger.info("Saved checkpoint %s", path)
        if self.on_checkpoint is not None:
            self.on_checkpoint(path)
        return path

    def load(self, path: str, resume: bool) -> None:
        """--resume: weights, optimizer and step; otherwise (--initialize-from, a phase's load) weights only."""
        try:
            self.load_state(load_torch(path, str(self.device)), resume)
        except (RuntimeError, ValueError, KeyError, EOFError, pickle.UnpicklingError) as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise RunDirectoryError(
                f"{path}: cannot load this checkpoint into behavior '{self.behavior}' ({first}); does "
                "network_settings match the run it came from? Use a new --run-id or --force to start afresh"
            ) from None


def trainer_class(settings: TrainerSettings, brain: str) -> type[Trainer]:
    """PPO, SAC, POCA, or the user trainer named by trainer_type (a subclass of ml_arl.trainers.trainer.Trainer)."""
    if settings.trainer_type in BUILTIN_TRAINERS:
        return resolve_class(BUILTIN_TRAINERS[settings.trainer_type][1], Trainer)
    where = f"behaviors.{brain}.trainer_type: {settings.trainer_type}"
    try:
        cls = resolve_class(settings.trainer_type, Trainer)
    except ImportPathError as err:
        raise ConfigError([f"behaviors.{brain}.trainer_type: {err}"]) from None
    renamed = {"policy_message": "policy_snapshot", "clear_experience": "on_new_phase"}  # ml_arl 0.1 names
    for old, new in renamed.items():
        if hasattr(cls, old):
            raise ConfigError([f"{where} defines {old}(); the Trainer interface calls it {new}() now; rename it"])
    missing = sorted(getattr(cls, "__abstractmethods__", ()))
    if missing:
        raise ConfigError([f"{where} does not implement {', '.join(missing)} (see ml_arl.trainers.trainer.Trainer)"])
    return cls
