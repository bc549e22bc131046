"""The run loop: start, loop over the phases, shut down.

One trainer per behavior name, each in its own thread when ``threaded: true`` (else advanced
inline after every env step). The env side hands finished trajectories to each behavior's
AgentManagerQueue; trainers announce new policies on their policy queue, and the env side passes
the new actor weights to the muscles with the next step request. The parts, one job each, live in
``ml_arl.training``: brains (create, load, save), phases (the schedule), curriculum (environment
parameters and their lessons), selfplay (opponents, swaps, ELO), router (each step batch to where
its parts go, each new policy back to the workers), outputs (results folder, summaries, store,
run logs) and threads (trainer threads). docs/ARCHITECTURE.md draws the whole path.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import Any, Optional, Union

import numpy as np
import torch
from mlagents_envs.base_env import BehaviorSpec

from ml_arl.core.behavior_id import brain_name
from ml_arl.core.exceptions import ConfigError
from ml_arl.envs.backends.env_manager import EnvManager
from ml_arl.envs.backends.factory import create_env_manager
from ml_arl.results.run_folder import release_run_lock, resolve_seed
from ml_arl.results.summary_writers import StepCounter
from ml_arl.results.timers import Timers
from ml_arl.settings import PhaseSettings, RunOptions
from ml_arl.trainers.learner_group import LearnerGroup
from ml_arl.trainers.on_policy import OnPolicyTrainer
from ml_arl.trainers.trainer import Trainer
from ml_arl.training.brains import Brains
from ml_arl.training.callbacks import CallbackList, StopTraining
from ml_arl.training.curriculum import Curriculum, check_curriculum_behaviors
from ml_arl.training.demo_recording import DemoRecorder
from ml_arl.training.phases import PhaseSchedule
from ml_arl.training.quick_start import QuickStart
from ml_arl.training.router import AgentManager, Router
from ml_arl.training.run_outputs import PROCESS_START, ProgressBar, RunOutputs
from ml_arl.training.selfplay import SelfPlay
from ml_arl.training.threads import TrainerThreads

logger = logging.getLogger(__name__)


def choose_device(requested: Optional[str]) -> torch.device:
    name = requested or ("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError([f"torch_settings.device: {name!r} is not a torch device; use cpu, cuda or cuda:N"]) from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError([f"torch_settings.device: {name!r} requested but CUDA is not available; use --torch-device cpu"])
    return device


def set_torch_threads() -> None:
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 1
    torch.set_num_threads(max(min(cpus // 2, 4), 1))


class TrainerController:
    def __init__(self, options: RunOptions, env_manager: Optional[EnvManager] = None, seed: Optional[int] = None,
                 callbacks: Optional[Union[CallbackList, Iterable[Any]]] = None, quick: Optional[QuickStart] = None):
        self.options = options
        self.quick = quick  # stepping the environments already (ml_arl.training.quick_start); take() hands over
        self.learners: Optional[LearnerGroup] = None  # --num-learners > 1 (ml_arl.trainers.learner_group)
        self.callbacks = callbacks if isinstance(callbacks, CallbackList) else CallbackList(callbacks or ())
        self.train_model = not options.checkpoint_settings.inference
        self.timers = Timers()
        self.seed = resolve_seed(options) if seed is None else seed
        np.random.seed(self.seed)
        torch.manual_seed(self.seed)
        device = choose_device(options.torch_settings.device)
        set_torch_threads()
        self.env_manager = env_manager if env_manager is not None else create_env_manager(options, self.seed)
        self.schedule = PhaseSchedule(options)
        self.outputs = RunOutputs(options, self.timers, [self.callbacks] if self.callbacks.callbacks else [])
        self.brains = Brains(options, self.schedule, device, self.seed)
        self.selfplay = SelfPlay(self.seed)
        deterministic = options.env_settings.deterministic
        self._was_deterministic = torch.are_deterministic_algorithms_enabled()  # restored at shutdown
        if deterministic:
            torch.use_deterministic_algorithms(True, warn_only=True)
            if any(b.threaded for b in options.behaviors.values()):
                logger.info("--deterministic: threaded trainers advance in the main loop instead")
        self.threads = TrainerThreads(self.timers, allowed=not deterministic)
        self.progress = ProgressBar()
        demo_dir = options.checkpoint_settings.record_demo
        self.demos = DemoRecorder(demo_dir, options) if demo_dir is not None else None
        self.curriculum = Curriculum(None, self.seed, self.env_manager)  # each phase has its own
        self.router = Router(options, self.env_manager, self.brains, self.schedule, self.outputs, self.selfplay,
                             self.threads, self.callbacks, self.demos, self.curriculum)

    @property
    def trainers(self) -> dict[str, Trainer]:
        return self.brains.trainers

    @property
    def managers(self) -> dict[str, AgentManager]:
        return self.router.managers

    @property
    def env_steps(self) -> StepCounter:
        return self.outputs.env_steps

    # ------------------------------------------------------------------ start / loop / shutdown
    def start_learning(self) -> bool:
        """Run every pending phase; True when Ctrl-C interrupted it (a checkpoint is saved then, as
        when a callback stops the run)."""
        interrupted = False
        try:
            with self.timers.timed("env_start"):
                specs = self.quick.take() if self.quick is not None else self.env_manager.start()
            logger.debug("Environments ready; behaviors: %s", ", ".join(specs))
            for behavior, spec in specs.items():
                self.brains.check(behavior, spec)  # every check comes before any write
            check_curriculum_behaviors(self.options, specs)
            self.outputs.prepare()
            self.env_manager.run_logs_ready()  # worker tracebacks may be written there now
            for index, phase in self.schedule.pending():
                if self.callbacks.stop_requested:  # asked for as the phase before ended: the next does not begin
                    raise StopTraining(f"Stopped by a callback ({self.callbacks.reason})")
                self._run_phase(index, phase, specs)
        except KeyboardInterrupt:
            interrupted = True
            logger.info("Learning was interrupted; saving a final checkpoint.")
        except StopTraining as stop:
            logger.info("%s; saving a final checkpoint.", stop)
        finally:
            self._shutdown()
        if not interrupted and not self.callbacks.stop_requested:
            logger.info("Training finished after %d environment steps.", self.env_steps.total)
        return interrupted

    def _shutdown(self) -> None:
        """Stop the trainers, save what is safe to save, write the run logs, close everything."""
        self.progress.close()
        if self.quick is not None:
            self.quick.halt()  # the env manager is closed below: nothing else may step it
        self.threads.stop()
        if self.callbacks.stop_requested and self.schedule.begun and not self.schedule.ended:
            self._last_summaries()  # a callback stopped the run: what it reached is in TensorBoard and Run.stats
        try:
            if self.train_model and self.outputs.ready and self.schedule.begun and not self.schedule.ended:
                self.brains.save_final(self.outputs.status, self._elos(), self.threads.unsafe())
        finally:
            if self.outputs.ready:
                self.schedule.save_progress()
                self.outputs.write_run_logs(self._elos())
            if self.learners is not None:
                self.learners.close()  # before the environments: closing Ray's would take learner actors with it
            try:
                self.env_manager.close()
            except Exception:  # noqa: BLE001 - the run's own outcome matters more than a close error
                logger.warning("closing the environments raised", exc_info=True)
            try:
                self.outputs.close()
            finally:
                try:
                    if self.demos is not None:
                        self.demos.close()  # each .demo file holds every episode that finished
                    if torch.are_deterministic_algorithms_enabled() != self._was_deterministic:
                        # only when the run changed it: the call imports torch._dynamo and sympy (2 s, 60 MB)
                        torch.use_deterministic_algorithms(self._was_deterministic)
                finally:
                    release_run_lock(self.options.checkpoint_settings.write_path)  # the folder is free for the next run

    def _elos(self) -> dict[str, float]:
        return self.selfplay.elos(self.trainers)

    def _run_phase(self, index: int, phase: Optional[PhaseSettings], specs: dict[str, BehaviorSpec]) -> None:
        schedule = self.schedule
        schedule.begin(index, phase)
        self.outputs.open_phase(schedule.write_path, schedule.run_logs)
        self.curriculum = Curriculum(schedule.environment_parameters(), self.seed, self.env_manager)
        self.router.curriculum = self.curriculum
        params = self.curriculum.start(self.outputs.status, self.options.checkpoint_settings.resume)
        if params or index > 0:
            self.env_manager.set_environment_parameters(params)  # resets every environment
        for brain, trainer in self.trainers.items():
            if not schedule.resumed or index > 0:
                self.brains.load_phase_brain(trainer)
            self.brains.assign_phase(trainer, self.outputs.status)
            self.router.live[brain] = trainer.policy_snapshot()
        self.selfplay.new_phase(self.trainers, self.brains.behavior_ids, self.router.live, self.brains.saved_elo)
        schedule.save_log()
        self.outputs.record_phase(schedule.name, index, schedule.mode, "running")
        self.callbacks.phase(schedule.name)
        for brain, trainer in self.trainers.items():
            self.router.push(brain)
            self.threads.start(brain, trainer)
        for behavior, spec in specs.items():
            self._add_behavior(behavior, spec)
        self._route_quick_start()
        self.progress.open(self.trainers)
        while not schedule.done(self.trainers):
            if self.callbacks.stop_requested:
                raise StopTraining(f"Stopped by a callback ({self.callbacks.reason})")
            self.advance()
            self.progress.update(self.trainers)
        self._end_phase()

    def _end_phase(self) -> None:
        """Stop the trainer threads, write the last summaries and checkpoints of the phase."""
        if self.schedule.has_next:
            self.outputs.switch_begins()  # until the next phase's first steps arrive
        self.progress.close()
        self.threads.stop()
        self._last_summaries()
        if not self.schedule.has_next:
            self.env_manager.finish_stepping()  # the workers' memory goes while the models are exported (issue 49)
        if self.train_model:
            self.brains.save_final(self.outputs.status, self._elos(), self.threads.unsafe())
        self.schedule.end()
        self.outputs.record_phase(self.schedule.name, self.schedule.index, self.schedule.mode, "done")
        self.threads.rearm()

    def _last_summaries(self) -> None:
        """The last partial period's summary of each trainer: every episode reaches TensorBoard."""
        for trainer in self.trainers.values():
            if trainer.step % trainer.settings.summary_freq or not trainer.step:
                trainer.write_summary(trainer.step)

    def _route_quick_start(self) -> None:
        """The steps the quick start took, routed as if this loop had stepped them (once)."""
        if self.quick is None:
            return
        first, batches = self.quick.first_step_time, self.quick.held()
        if first is not None:
            self.outputs.first_step_time = first
            logger.debug("Quick start: first environment steps %.3f s after start; %d steps held",
                         first - PROCESS_START, sum(b.env_steps for b in batches))
        for batch in batches:
            for behavior, spec in batch.new_specs.items():
                self._add_behavior(behavior, spec)
            self.router.route(batch)

    # ------------------------------------------------------------------ brains appear
    def _add_behavior(self, behavior_id: str, spec: BehaviorSpec) -> None:
        """A behavior id the environment shows: a new team of a known brain, or a new brain."""
        if behavior_id in self.brains.brain_of:
            return
        brain = self.brains.add_team(behavior_id, spec)
        if brain is not None:
            if not self.selfplay.team_added(brain, behavior_id):
                logger.warning(
                    "%s: the environment has several teams (%s); without self_play they share one policy.",
                    brain, ", ".join(self.brains.behavior_ids[brain]),
                )
            self.router.push(brain)
            return
        stats = self.outputs.reporter(brain_name(behavior_id))
        trainer = self.brains.create(behavior_id, spec, stats, self.env_manager.extras.get(behavior_id))
        brain = trainer.behavior
        first = self.quick.weights.get(brain) if self.quick is not None else None
        if first is not None and isinstance(trainer, OnPolicyTrainer):
            trainer.load_first_actor(first)  # the actor the quick start acted with: its steps are on-policy
        if self.options.torch_settings.num_learners > 1 and hasattr(trainer, "learners") and self.train_model:
            trainer.learners = self._learner_group()  # PPO's, SAC's (ml_arl.trainers.learner_group)
        self.brains.assign_phase(trainer, self.outputs.status)
        if self.callbacks.callbacks:
            trainer.on_checkpoint = self.callbacks.checkpoint
        self.router.add_brain(trainer, stats)
        self.selfplay.brain_added(brain, trainer, behavior_id, self.router.live[brain], self.brains.saved_elo)
        self.router.push(brain)
        logger.debug("Trainer of %s ready; its first policy is on the way to the workers", brain)
        self.threads.start(brain, trainer)

    def _learner_group(self) -> LearnerGroup:
        """The run's learner processes (``--num-learners``), started with its first brain."""
        if self.learners is None:
            self.learners = LearnerGroup(self.options.torch_settings.num_learners, self.options.checkpoint_settings.run_logs_dir,
                                         on_ray=self.options.env_settings.manager == "ray")
        return self.learners

    # ------------------------------------------------------------------ the loop
    def advance(self) -> None:
        with self.timers.timed("env_step"):
            batches = self.env_manager.step()
        with self.timers.timed("process_steps"):
            for batch in batches:
                for behavior, spec in batch.new_specs.items():
                    self._add_behavior(behavior, spec)
                self.router.route(batch)
        self.threads.check()
        for brain, trainer in self.trainers.items():
            if not self.threads.runs(brain) and (trainer.learning or not self.train_model):
                with self.timers.timed("trainer_advance"):
                    trainer.advance()
            self.router.collect_policies(brain, trainer)
        self.curriculum.update(self.trainers, self.selfplay.elo)
        reset = self.selfplay.take_reset()
        if reset:
            self.env_manager.reset()  # the learning team changed: every game starts afresh
            for brain in reset:
                self.router.push(brain)
