"""The brains of a run: one trainer per behavior name, created when the environment first shows
the behavior, loaded from the right source, and saved at the end.

Unity's behavior ids "Name?team=N" of one Name share a brain. Where a brain's first weights come
from, in order: --resume (the newest readable checkpoint of the current phase, then of earlier
phases), a phase's ``load:``, --initialize-from, the behavior's ``init_path``; otherwise it
starts fresh.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection
from typing import Optional

import torch
from mlagents_envs.base_env import BehaviorSpec

from ml_arl.core.behavior_id import brain_name
from ml_arl.core.exceptions import ConfigError, RunDirectoryError
from ml_arl.demonstrations import check_demonstrations
from ml_arl.networks.attention import variable_length_problem
from ml_arl.networks.encoders import check_visual_support
from ml_arl.results.checkpoints import (
    CheckpointManager,
    TrainingStatus,
    checkpoint_problem,
    resume_candidates,
    save_torch,
)
from ml_arl.results.run_folder import resolve_load_path
from ml_arl.results.summary_writers import StatsReporter
from ml_arl.settings import RunOptions, bounds
from ml_arl.trainers.learner_group import learner_problem
from ml_arl.trainers.trainer import Trainer, trainer_class
from ml_arl.training.phases import PhaseSchedule

logger = logging.getLogger(__name__)


class Brains:
    def __init__(self, options: RunOptions, schedule: PhaseSchedule, device: torch.device, seed: int):
        self.options = options
        self.schedule = schedule
        self.device = device
        self.seed = seed
        self.train_model = not options.checkpoint_settings.inference
        self.trainers: dict[str, Trainer] = {}
        self.brain_of: dict[str, str] = {}  # behavior id ("Name?team=0") -> brain ("Name")
        self.behavior_ids: dict[str, list[str]] = {}  # brain -> its behavior ids

    def check(self, behavior: str, spec: BehaviorSpec) -> None:
        """Everything about a behavior the environment showed that can fail, before anything is written."""
        brain = brain_name(behavior)
        bad_name = bounds.behavior_name_problem(brain)
        if bad_name is not None:
            raise ConfigError([bad_name])
        settings = self.options.settings_for(behavior)
        problems = trainer_class(settings, brain).settings_problems(settings, behavior)
        if problems:
            raise ConfigError(problems)
        problem = variable_length_problem(spec, settings.network_settings.goal_conditioning_type)
        if problem is not None:
            raise ConfigError([f"behavior {brain}: {problem}"])
        problem = check_visual_support(spec, settings.network_settings)
        if problem is not None:
            raise ConfigError([f"behaviors.{brain}.{problem}"])
        demos = [("reward_signals.gail.demo_path", settings.reward_signals.gail), ("behavioral_cloning.demo_path", settings.behavioral_cloning)]
        for key, section in demos:
            if section is not None:
                problem = check_demonstrations(section.demo_path, spec, f"behaviors.{brain}.{key}", brain)
                if problem is not None:
                    raise ConfigError([problem])
        net = settings.network_settings
        too_big = bounds.behavior_memory_problem(
            spec, net.hidden_units, net.num_layers, self.options.env_settings.num_envs, net.goal_conditioning_type
        )
        if too_big is not None:
            raise ConfigError([f"behaviors.{brain}.network_settings: {too_big}"])
        for phase in self.options.phases or []:
            self.options.phase_settings_for(behavior, phase)
        if self.options.torch_settings.num_learners > 1:
            problem = learner_problem(settings, brain, self.device)
            if problem is not None:
                raise ConfigError([problem])

    def add_team(self, behavior_id: str, spec: BehaviorSpec) -> Optional[str]:
        """Another behavior id of a known brain: its brain (None if the brain is new)."""
        brain = brain_name(behavior_id)
        trainer = self.trainers.get(brain)
        if trainer is None:
            return None
        if trainer.spec != spec:
            raise ConfigError(
                [f"behavior '{behavior_id}' has other observations or actions than '{self.behavior_ids[brain][0]}'; "
                 "teams of one behavior name must share them"]
            )
        self.brain_of[behavior_id] = brain
        self.behavior_ids[brain].append(behavior_id)
        return brain

    def create(self, behavior_id: str, spec: BehaviorSpec, stats: StatsReporter, env_extras: Optional[bytes] = None) -> Trainer:
        """A new brain for ``behavior_id``, with its first weights loaded. ``env_extras``: what the
        environment told of the behavior beyond its spec (passed to trainers only when there is some,
        so a user trainer with an ``__init__`` of its own needs no new argument)."""
        brain = brain_name(behavior_id)
        settings = self.schedule.settings_for(brain)
        extra = {} if env_extras is None else {"env_extras": env_extras}
        trainer = trainer_class(settings, brain)(brain, settings, spec, stats, None, self.device, self.train_model,
                                                 self.seed, **extra)
        self.trainers[brain] = trainer
        self.brain_of[behavior_id] = brain
        self.behavior_ids[brain] = [behavior_id]
        if self.options.checkpoint_settings.resume:
            self._keep_initial(trainer)  # (written by the first session; if not, the weights the seed makes)
        self._load_initial_weights(trainer, brain, settings.init_path)
        self._keep_initial(trainer)
        if self.options.checkpoint_settings.resume and not self.schedule.resumed:
            self.load_phase_brain(trainer)  # --resume into a phase not begun yet: its load applies
        logger.info("Hyperparameters for behavior name %s: %s", brain, settings.model_dump(mode="json"))
        return trainer

    def assign_phase(self, trainer: Trainer, status: TrainingStatus) -> None:
        """Give a brain what the current phase asks of it."""
        brain = trainer.behavior
        learning = self.schedule.learns(brain)
        settings = self.schedule.settings_for(brain)
        checkpoints = (
            CheckpointManager(brain, os.path.join(self.schedule.write_path, brain), settings.keep_checkpoints, status)
            if self.train_model and learning else None
        )
        trainer.assign(self.schedule.assignment(brain, trainer, checkpoints))

    # ------------------------------------------------------------------ loading
    def initial_path(self, brain: str) -> str:
        """Where the brain as the run first made it is kept (for a phase's ``load: {initial: true}``)."""
        return os.path.join(self.options.checkpoint_settings.run_logs_dir, "initial", f"{brain}.pt")

    def _keep_initial(self, trainer: Trainer) -> None:
        """Write the new brain's state aside when a phase will start it afresh (kept across --resume)."""
        brain = trainer.behavior
        wanted = any((load := p.load.get(brain)) is not None and load.initial for p in self.options.phases or [])
        path = self.initial_path(brain)
        if wanted and not os.path.isfile(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            save_torch(path, trainer.state())

    def load_phase_brain(self, trainer: Trainer) -> bool:
        """A phase's ``load: {run, phase, behavior}`` or ``{initial: true}``; True if weights were loaded."""
        phase = self.schedule.phase
        brain = trainer.behavior
        load = phase.load.get(brain) if phase is not None else None
        if load is None:
            return False
        if load.initial:  # a fresh brain: first weights, optimizer and step (the policy version goes on: workers take it as new)
            version = trainer.policy_version
            trainer.load(self.initial_path(brain), resume=True)
            trainer.policy_version = version + 1
            logger.info("Phase %s: %s starts afresh from its first weights", phase.name, brain)  # type: ignore[union-attr]
            return True
        path = resolve_load_path(self.options, load, brain, self.schedule.index)
        trainer.load(path, resume=False)
        logger.info("Phase %s: %s loaded from %s", phase.name, brain, path)  # type: ignore[union-attr]
        return True

    def _load_initial_weights(self, trainer: Trainer, brain: str, init_path: Optional[str]) -> None:
        cp = self.options.checkpoint_settings
        if cp.resume:
            self._resume(trainer, brain)
            return
        if self.load_phase_brain(trainer):
            return
        source = None
        if cp.initialize_from is not None:
            source = os.path.join(cp.results_dir, cp.initialize_from, brain, "checkpoint.pt")
        elif init_path:
            source = init_path if os.path.isfile(init_path) else os.path.join(init_path, "checkpoint.pt")
        if source is not None:
            if not os.path.isfile(source):
                raise RunDirectoryError(f"{source}: no checkpoint to initialize behavior '{brain}' from")
            trainer.load(source, resume=False)
            logger.info("Initialized %s from %s", brain, source)

    def _resume(self, trainer: Trainer, brain: str) -> None:
        """The newest readable checkpoint: the current phase's (checkpoint.pt, then the listed and
        other step files, newest first), then the earlier phases' (newest phase first). A phase that
        was running with a ``load`` of this brain but saved none of it yet (the run was killed before
        its first checkpoint) starts again from its ``load``, as it first did."""
        unreadable: list[str] = []
        folders = self.schedule.folders()
        phase = self.schedule.phase
        load = phase.load.get(brain) if phase is not None else None
        if not self.schedule.resumed and load is not None and load.initial:
            # a phase not begun yet (killed before its state was saved) that starts the brain afresh:
            # create() applies that load next, so no earlier phase's checkpoint is read (nor logged) first
            return
        if self.schedule.resumed and load is not None and folders:
            status_path = os.path.join(folders[0], "run_logs", "training_status.json")
            own = [p for p in resume_candidates(os.path.join(folders[0], brain), brain, status_path) if checkpoint_problem(p) is None]
            if not own and self.load_phase_brain(trainer):
                return
        for folder in folders:
            status_path = os.path.join(folder, "run_logs", "training_status.json")
            for path in resume_candidates(os.path.join(folder, brain), brain, status_path):
                problem = checkpoint_problem(path)
                if problem is not None:  # damaged by hand or by the disk: the next older one
                    logger.warning("--resume: %s cannot be read (%s); trying an older checkpoint", path, problem)
                    unreadable.append(path)
                    continue
                trainer.load(path, resume=True)
                logger.info("Resuming %s from %s at step %d", brain, path, trainer.step)
                return
        if unreadable:
            raise RunDirectoryError(
                f"{unreadable[0]}: no checkpoint of behavior '{brain}' can be read ({len(unreadable)} tried); "
                "restore one, or start afresh with --force or a new --run-id"
            )
        logger.warning("--resume: no checkpoint for %s; it starts from scratch", brain)

    def saved_elo(self, brain: str) -> Optional[float]:
        """The ELO a self-play brain had when the run stopped (--resume); None otherwise."""
        if not self.options.checkpoint_settings.resume:
            return None
        for folder in self.schedule.folders():
            status = TrainingStatus(os.path.join(folder, "run_logs", "training_status.json"))
            status.load()
            elo = status.data.get(brain, {}).get("elo")
            if elo is not None:
                return float(elo)
        return None

    # ------------------------------------------------------------------ saving
    def save_final(self, status: TrainingStatus, elos: dict[str, float], skip: Collection[str]) -> None:
        """Final checkpoints of the brains that learned, except those in ``skip`` (a trainer that
        failed or did not stop: its state may be half-updated; the last good checkpoint stays)."""
        for brain, trainer in self.trainers.items():
            if brain in skip:
                logger.warning("%s: no final checkpoint (its trainer failed or did not stop)", brain)
                continue
            if trainer.checkpoints is None:
                continue
            if brain in elos:
                status.behavior(brain)["elo"] = elos[brain]
            if trainer.saved_step == trainer.step:
                trainer.checkpoints.mark_final(trainer.step)
            else:
                trainer.save_checkpoint(final=True)
