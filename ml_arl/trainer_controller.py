"""The run loop: env manager <-> agent managers <-> trainers.

One trainer per behavior, each in its own thread when ``threaded: true`` (else advanced inline
after every env step). The env side hands finished trajectories to each behavior's
AgentManagerQueue; trainers announce new policies on their policy queue, and the env side
passes the new actor weights to the muscles with the next step request.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys
import threading
import time
import traceback
from typing import Any, Optional

import numpy as np
import torch
from mlagents_envs.base_env import BehaviorSpec

import ml_arl
from ml_arl import limits
from ml_arl.agent_processor import AgentManager, Trajectory
from ml_arl.checkpoints import (
    CheckpointManager,
    TrainingStatus,
    checkpoint_problem,
    metadata,
    remove_stale_temp_files,
    resume_candidates,
    write_json,
    write_yaml,
)
from ml_arl.envs.env_manager import EnvManager
from ml_arl.envs.env_runner import PolicyMessage, StepBatch
from ml_arl.envs.managers import create_env_manager
from ml_arl.exceptions import ConfigError, ResultsWriteError, RunDirectoryError, TrainerThreadError
from ml_arl.policy.networks import check_visual_support
from ml_arl.results_dir import prepare_results_dir, resolve_load_path, resolve_seed
from ml_arl.settings import PhaseSettings, RunOptions, TrainerSettings, resolve_parameter_seeds
from ml_arl.stats import (
    ConsoleWriter,
    GaugeWriter,
    StatsReporter,
    StatsWriter,
    StepCounter,
    TensorboardWriter,
    repair_event_files,
)
from ml_arl.store import STORE_FILENAME, ResultsStore
from ml_arl.timers import Timers
from ml_arl.trainers.base import Trainer
from ml_arl.trainers.ghost import GhostController, GhostTrainer
from ml_arl.trainers.ppo import PPOTrainer

logger = logging.getLogger(__name__)

TRAINER_JOIN_TIMEOUT_S = 30.0
PROCESS_START = time.time()  # about when the interpreter started (set at import)


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


UNLIMITED_STEPS = 2**62


def trainer_class(settings: TrainerSettings, brain: str) -> type[Trainer]:
    """PPO, or the user trainer named by trainer_type (a subclass of ml_arl.trainers.base.Trainer)."""
    if settings.trainer_type == "ppo":
        return PPOTrainer
    module_name, _, attr = settings.trainer_type.partition(":")
    cls = getattr(importlib.import_module(module_name), attr, None)
    if not (isinstance(cls, type) and issubclass(cls, Trainer)):
        raise ConfigError(
            [f"behaviors.{brain}.trainer_type: {settings.trainer_type} is not a subclass of ml_arl.trainers.base.Trainer"]
        )
    return cls


class PhaseLog:
    """run_logs/phases.json: which phases are done, and where the running one stands (--resume)."""

    def __init__(self, path: str):
        self.path = path
        self.data: dict[str, Any] = {"phases": {}}

    def load(self) -> None:
        if not os.path.exists(self.path):
            return
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError) as err:
            raise RunDirectoryError(f"{self.path}: cannot read the phase log ({err}); --resume needs it intact") from None
        if not isinstance(data, dict) or not isinstance(data.get("phases"), dict):
            raise RunDirectoryError(f"{self.path}: not a phase log; --resume needs it intact")
        self.data = data

    def entry(self, name: str) -> dict[str, Any]:
        return self.data["phases"].setdefault(name, {"state": "pending"})

    def save(self) -> None:
        write_json(self.path, self.data)


class TrainerController:
    def __init__(self, options: RunOptions, env_manager: Optional[EnvManager] = None, seed: Optional[int] = None):
        self.options = options
        cp = options.checkpoint_settings
        self.run_path = cp.write_path
        self.write_path = cp.write_path  # the current phase's folder (the run's own without phases)
        self.train_model = not cp.inference
        self.timers = Timers()
        self.seed = resolve_seed(options) if seed is None else seed
        np.random.seed(self.seed)
        torch.manual_seed(self.seed)
        self.device = choose_device(options.torch_settings.device)
        set_torch_threads()
        self.env_manager = env_manager if env_manager is not None else create_env_manager(options, self.seed)
        self.phased = options.phases is not None
        self.phases: list[Optional[PhaseSettings]] = list(options.phases) if options.phases else [None]
        self.phase: Optional[PhaseSettings] = None
        self.phase_index = 0
        self.phase_log = PhaseLog(os.path.join(cp.run_logs_dir, "phases.json"))
        self.status = TrainingStatus(os.path.join(cp.run_logs_dir, "training_status.json"))
        self.writers: list[StatsWriter] = []
        self.trainers: dict[str, Trainer] = {}
        self.managers: dict[str, AgentManager] = {}
        self.ghosts: dict[str, GhostTrainer] = {}
        self.ghost_controller = GhostController()
        self.brain_of: dict[str, str] = {}  # behavior id ("Name?team=0") -> trainer key ("Name")
        self.behavior_ids: dict[str, list[str]] = {}  # trainer key -> its behavior ids
        self.live: dict[str, PolicyMessage] = {}  # brain -> its newest policy
        self.stop_event = threading.Event()
        self.threads: dict[str, threading.Thread] = {}
        self.thread_errors: list[tuple[str, BaseException, str]] = []
        self.env_steps = StepCounter()
        self.store: Optional[ResultsStore] = None
        self.phase_acted: dict[str, int] = {}
        self.phase_episodes: dict[str, int] = {}
        self.agent_episodes: dict[tuple[str, str], list[int]] = {}  # (brain, agent) -> [episode, step in it]
        self.first_step_time: Optional[float] = None
        self._phase_saved = False  # the current phase ended and saved its brains
        self._switch_started: Optional[float] = None
        self._phase_resumed = False  # the current phase was running when the run stopped (--resume)
        self.phase_switch_seconds: list[float] = []
        self._progress: Any = None
        self._log_redirect: Any = None

    # ------------------------------------------------------------------ phases
    @property
    def phase_name(self) -> str:
        if self.phase is not None:
            return self.phase.name
        return "train" if self.train_model else "inference"

    @property
    def phase_mode(self) -> str:
        if self.phase is not None:
            return self.phase.mode
        return "train" if self.train_model else "test"

    def learns(self, brain: str) -> bool:
        return self.train_model and (self.phase is None or self.phase.learns(brain))

    def _open_phase_outputs(self) -> None:
        """TensorBoard, checkpoints and training_status of the current phase (its own folder)."""
        cp = self.options.checkpoint_settings
        self.write_path = os.path.join(self.run_path, self.phase.name) if self.phase is not None else self.run_path
        for writer in self.writers:
            writer.close()
        resume = cp.resume
        self.writers[:] = [  # reporters hold this list: replaced in place
            TensorboardWriter(self.write_path, clear_past_data=not resume and not cp.inference),
            GaugeWriter(self.timers),
            ConsoleWriter(),
        ]
        run_logs = os.path.join(self.write_path, "run_logs") if self.phase is not None else cp.run_logs_dir
        self.status = TrainingStatus(os.path.join(run_logs, "training_status.json"))
        if resume:
            self.status.load()
            self.status.prune_missing()  # it never names a missing file, unless someone removed one

    def _checkpoint_sources(self, brain: str) -> list[str]:
        """Checkpoint files this brain may continue from on --resume, best first: the current
        phase's (checkpoint.pt, then the listed and other step files, newest first), then the
        earlier phases' (newest phase first)."""
        folders = [self.run_path] if self.phase is None else [
            os.path.join(self.run_path, p.name) for p in reversed(self.phases[: self.phase_index + 1]) if p is not None
        ]
        return [
            path for folder in folders
            for path in resume_candidates(
                os.path.join(folder, brain), brain, os.path.join(folder, "run_logs", "training_status.json")
            )
        ]

    def _status_elo(self, brain: str) -> Optional[float]:
        folders = [self.run_path] if self.phase is None else [
            os.path.join(self.run_path, p.name) for p in reversed(self.phases[: self.phase_index + 1]) if p is not None
        ]
        for folder in folders:
            status = TrainingStatus(os.path.join(folder, "run_logs", "training_status.json"))
            status.load()
            elo = status.data.get(brain, {}).get("elo")
            if elo is not None:
                return float(elo)
        return None

    def _configure_trainer(self, brain: str, trainer: Trainer, entry: dict[str, Any]) -> None:
        """Apply the current phase to a trainer: settings, learning, step window, checkpoints."""
        phase = self.phase
        settings = self.options.phase_settings_for(brain, phase)
        trainer.settings = settings
        trainer.hp = settings.hyperparameters
        trainer.learning = self.learns(brain)
        trainer.checkpoints = (
            CheckpointManager(brain, os.path.join(self.write_path, brain), settings.keep_checkpoints, self.status)
            if self.train_model and trainer.learning else None
        )
        trainer.saved_step = -1
        if phase is None:
            trainer.step_limit, trainer.schedule_origin, trainer.schedule_length = settings.max_steps, 0, settings.max_steps
            return
        origin = int(entry.setdefault("origin", {}).setdefault(brain, trainer.step))
        trainer.schedule_origin = origin
        if phase.max_steps is not None:
            trainer.step_limit = origin + phase.max_steps
            trainer.schedule_length = phase.max_steps
        else:
            trainer.step_limit = UNLIMITED_STEPS
            trainer.schedule_length = settings.max_steps
        clear = getattr(trainer, "clear_experience", None)
        if clear is not None:
            clear()

    def _load_phase_brain(self, brain: str, trainer: Trainer) -> bool:
        """A phase's ``load: {run, phase, behavior}``; True if weights were loaded."""
        phase = self.phase
        load = phase.load.get(brain) if phase is not None else None
        if load is None:
            return False
        path = resolve_load_path(self.options, load, brain, self.phase_index)
        trainer.load(path, resume=False)
        logger.info("Phase %s: %s loaded from %s", phase.name, brain, path)  # type: ignore[union-attr]
        return True

    # ------------------------------------------------------------------ set-up
    def _create_trainer(self, behavior_id: str, spec: BehaviorSpec) -> None:
        """A trainer per brain: Unity's behavior ids "Name?team=N" of one Name share it."""
        brain = behavior_id.split("?", 1)[0]
        if behavior_id in self.brain_of:
            return
        trainer = self.trainers.get(brain)
        if trainer is not None:
            if trainer.spec != spec:
                raise ConfigError(
                    [f"behavior '{behavior_id}' has other observations or actions than '{self.behavior_ids[brain][0]}'; "
                     "teams of one behavior name must share them"]
                )
            self.brain_of[behavior_id] = brain
            self.behavior_ids[brain].append(behavior_id)
            ghost = self.ghosts.get(brain)
            if ghost is not None:
                ghost.add_behavior(behavior_id)
            else:
                logger.warning(
                    "%s: the environment has several teams (%s); without self_play they share one policy.",
                    brain, ", ".join(self.behavior_ids[brain]),
                )
            self._push_policies(brain)
            return
        settings = self.options.phase_settings_for(brain, self.phase)
        stats = StatsReporter(brain, self.writers, self.env_steps)
        cls = trainer_class(settings, brain)
        trainer = cls(brain, settings, spec, stats, None, self.device, self.train_model, self.seed)
        self.trainers[brain] = trainer
        self.brain_of[behavior_id] = brain
        self.behavior_ids[brain] = [behavior_id]
        entry = self.phase_log.entry(self.phase_name)
        self._load_initial_weights(trainer, brain, settings.init_path)
        if self.options.checkpoint_settings.resume and not self._phase_resumed:
            self._load_phase_brain(brain, trainer)  # --resume into a phase not begun yet: its load applies
        self._configure_trainer(brain, trainer, entry)
        logger.info("Hyperparameters for behavior name %s: %s", brain, settings.model_dump(mode="json"))
        manager = AgentManager(brain, stats, settings.threaded, self.stop_event)
        trainer.subscribe_trajectory_queue(manager.trajectory_queue)
        trainer.publish_policy_queue(manager.policy_queue)
        self.managers[brain] = manager
        self.live[brain] = trainer.policy_message()
        self._setup_ghost(brain, trainer)
        if brain in self.ghosts:
            self.ghosts[brain].add_behavior(behavior_id)
            self.ghosts[brain].start(self.live[brain], trainer.step)
        self._push_policies(brain)
        logger.debug("Trainer of %s ready; its first policy is on the way to the workers", brain)
        self._start_thread(brain)

    def _setup_ghost(self, brain: str, trainer: Trainer) -> None:
        if trainer.settings.self_play is None or not trainer.learning or brain in self.ghosts:
            return
        ghost = GhostTrainer(brain, trainer.settings.self_play, self.ghost_controller, trainer.stats, self.seed + len(self.ghosts))
        if self.options.checkpoint_settings.resume:
            elo = self._status_elo(brain)
            if elo is not None:
                ghost.elo = elo
                logger.info("Self-play: %s continues at ELO %.1f", brain, elo)
        self.ghosts[brain] = ghost

    def _start_thread(self, brain: str) -> None:
        trainer = self.trainers[brain]
        if trainer.settings.threaded and trainer.learning and brain not in self.threads:
            thread = threading.Thread(target=self._trainer_loop, args=(brain, trainer), name=f"trainer-{brain}", daemon=True)
            self.threads[brain] = thread
            thread.start()

    def _load_initial_weights(self, trainer: Trainer, behavior: str, init_path: Optional[str]) -> None:
        cp = self.options.checkpoint_settings
        if cp.resume:
            unreadable: list[str] = []
            for path in self._checkpoint_sources(behavior):
                problem = checkpoint_problem(path)
                if problem is not None:  # damaged by hand or by the disk: the next older one
                    logger.warning("--resume: %s cannot be read (%s); trying an older checkpoint", path, problem)
                    unreadable.append(path)
                    continue
                trainer.load(path, resume=True)
                logger.info("Resuming %s from %s at step %d", behavior, path, trainer.step)
                return
            if unreadable:
                raise RunDirectoryError(
                    f"{unreadable[0]}: no checkpoint of behavior '{behavior}' can be read ({len(unreadable)} tried); "
                    "restore one, or start afresh with --force or a new --run-id"
                )
            logger.warning("--resume: no checkpoint for %s; it starts from scratch", behavior)
            return
        if self._load_phase_brain(behavior, trainer):
            return
        source = None
        if cp.initialize_from is not None:
            source = os.path.join(cp.results_dir, cp.initialize_from, behavior, "checkpoint.pt")
        elif init_path:
            source = init_path if os.path.isfile(init_path) else os.path.join(init_path, "checkpoint.pt")
        if source is not None:
            if not os.path.isfile(source):
                raise RunDirectoryError(f"{source}: no checkpoint to initialize behavior '{behavior}' from")
            trainer.load(source, resume=False)
            logger.info("Initialized %s from %s", behavior, source)

    def _trainer_loop(self, behavior: str, trainer: Trainer) -> None:
        try:
            while not self.stop_event.is_set():
                with self.timers.timed("trainer_advance"):
                    trainer.advance(block_timeout=0.05)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread with its traceback
            self.thread_errors.append((behavior, exc, traceback.format_exc()))

    def _check_threads(self) -> None:
        if self.thread_errors:
            behavior, exc, tb = self.thread_errors[0]
            if isinstance(exc, ResultsWriteError):
                raise exc  # a full disk, not a bug: its one line says it all
            logger.error("trainer thread of %s raised:\n%s", behavior, tb.rstrip())
            raise TrainerThreadError(behavior, f"trainer of {behavior} failed: {type(exc).__name__}: {exc}", tb) from exc

    # ------------------------------------------------------------------ policies
    def _decorate(self, brain: str, msg: PolicyMessage, learning_team: bool) -> PolicyMessage:
        settings = self.trainers[brain].settings
        name, params = settings.objective_spec()
        deterministic = settings.network_settings.deterministic or (self.phase is not None and self.phase.deterministic)
        collect = (learning_team and self.trainers[brain].learning) or not self.train_model
        collect = collect or self.options.results_store.record_steps
        return msg._replace(
            collect=collect and msg.collect,
            objective=None if (name, params) == ("reward", {}) else (name, params),
            deterministic=deterministic,
        )

    def _push_policies(self, brain: str) -> None:
        ghost = self.ghosts.get(brain)
        for behavior_id in self.behavior_ids[brain]:
            if ghost is not None:
                msg = ghost.policy_for(behavior_id)
                if msg is None:
                    continue
                learning_team = ghost.is_learning(behavior_id)
            else:
                msg, learning_team = self.live[brain], True
            self.env_manager.set_policy(behavior_id, self._decorate(brain, msg, learning_team or not msg.collect))

    # ------------------------------------------------------------------ the loop
    def _phase_done(self) -> bool:
        if not self.trainers:
            return False
        phase = self.phase
        if phase is None:
            return all(t.finished for t in self.trainers.values())
        learning = [b for b, t in self.trainers.items() if t.learning]
        counting = learning or list(self.trainers)
        if phase.episodes is not None:
            return all(self.phase_episodes.get(b, 0) >= phase.episodes for b in counting)
        assert phase.max_steps is not None
        if learning:
            return all(self.trainers[b].step >= self.trainers[b].step_limit for b in learning)
        return all(self.phase_acted.get(b, 0) >= phase.max_steps for b in counting)

    def _handle_batch(self, batch: StepBatch) -> None:
        for behavior, spec in batch.new_specs.items():
            self._create_trainer(behavior, spec)
        if self.first_step_time is None:
            self.first_step_time = time.time()
            logger.debug("First environment steps arrived %.3f s after start", time.time() - PROCESS_START)
        if self._switch_started is not None:  # the first steps of a new phase
            self.phase_switch_seconds.append(time.monotonic() - self._switch_started)
            logger.debug("Phase switch took %.3f s", self.phase_switch_seconds[-1])
            self._switch_started = None
        self.env_steps.total += batch.env_steps
        brain_of = self.brain_of
        by_brain: dict[str, list] = {}
        record_steps = self.store is not None and self.options.results_store.record_steps
        for traj in batch.trajectories:
            brain = brain_of[traj.behavior]
            if record_steps:
                self._record_steps(brain, traj, batch.worker_id)
            ghost = self.ghosts.get(brain)
            if self.train_model and (not self.trainers[brain].learning or (ghost is not None and not ghost.is_learning(traj.behavior))):
                continue  # frozen in this phase, or a ghost team: acted, not learned from
            by_brain.setdefault(brain, []).append(traj)
        for brain, trajectories in by_brain.items():
            self.managers[brain].add_trajectories(trajectories, self._check_threads)
        for ep in batch.episodes:
            brain = brain_of[ep.behavior]
            ghost = self.ghosts.get(brain)
            if ghost is not None and not ghost.is_learning(ep.behavior):
                continue  # a snapshot played it: not this brain's episode (nor in TensorBoard, nor in the store)
            self.managers[brain].record_episodes([ep])
            self.phase_episodes[brain] = self.phase_episodes.get(brain, 0) + 1
            if ghost is not None and not ep.interrupted:
                ghost.record_game(ep.final)
            if self.store is not None:
                self.store.record_episode(
                    phase=self.phase_name, mode=self.phase_mode, behavior=brain, agent=ep.agent_id,
                    worker=batch.worker_id, episode=self.phase_episodes[brain], length=ep.length,
                    env_reward=ep.reward, objective=ep.objective, elo=ghost.elo if ghost is not None else None,
                    wall_time=time.time(),
                )
        swaps: set[str] = set()
        for behavior, (total, count) in batch.entropy.items():
            brain = brain_of[behavior]
            self.managers[brain].record_entropy(total, count)
            self.phase_acted[brain] = self.phase_acted.get(brain, 0) + count
            ghost = self.ghosts.get(brain)
            if ghost is not None and not ghost.is_learning(behavior) and ghost.count_ghost_steps(count):
                swaps.add(brain)
        for brain in swaps:
            self.ghosts[brain].swap()
            self._push_policies(brain)
        if batch.env_stats:
            for manager in self.managers.values():
                manager.record_environment_stats(batch.env_stats, batch.worker_id)

    def _record_steps(self, brain: str, traj: Trajectory, worker_id: int) -> None:
        assert self.store is not None
        key = (brain, traj.agent_id)
        episode, first = self.agent_episodes.get(key, [0, 0])
        env_rewards = traj.env_rewards if traj.env_rewards is not None else traj.rewards
        self.store.record_steps(
            phase=self.phase_name, behavior=brain, agent=traj.agent_id, worker=worker_id, episode=episode,
            first_step=first, env_rewards=env_rewards.tolist(), objectives=traj.rewards.tolist(),
        )
        self.agent_episodes[key] = [episode + 1, 0] if traj.done else [episode, first + len(traj)]

    def advance(self) -> None:
        with self.timers.timed("env_step"):
            batches = self.env_manager.step()
        with self.timers.timed("process_steps"):
            for batch in batches:
                self._handle_batch(batch)
        self._check_threads()
        for brain, trainer in self.trainers.items():
            if brain not in self.threads and (trainer.learning or not self.train_model):
                with self.timers.timed("trainer_advance"):
                    trainer.advance()
            newest = self.managers[brain].policy_queue.drain()
            ghost = self.ghosts.get(brain)
            if newest:
                self.live[brain] = newest[-1]
                if ghost is not None:
                    ghost.on_policy(newest[-1])
                self._push_policies(brain)
            if ghost is not None:
                ghost.after_trainer_step(trainer.step, trainer.step >= trainer.step_limit)
        if self.ghost_controller.reset_pending:
            self.ghost_controller.reset_pending = False
            self.env_manager.reset()  # the learning team changed: every game starts afresh
            for brain, ghost in self.ghosts.items():
                ghost.swap()
                self._push_policies(brain)

    def start_learning(self) -> None:
        interrupted = False
        output_ready = False
        try:
            with self.timers.timed("env_start"):
                specs = self.env_manager.start()
            logger.debug("Environments ready; behaviors: %s", ", ".join(specs))
            for behavior in specs:
                brain = behavior.split("?", 1)[0]
                bad_name = limits.behavior_name_problem(brain)
                if bad_name is not None:
                    raise ConfigError([bad_name])
                settings = self.options.settings_for(behavior)  # every check here comes before any write
                trainer_class(settings, brain)
                check = check_visual_support(specs[behavior], settings.network_settings)
                if check is not None:
                    raise ConfigError([f"behaviors.{brain}.{check}"])
                net = settings.network_settings
                too_big = limits.behavior_memory_problem(
                    specs[behavior], net.hidden_units, net.num_layers, self.options.env_settings.num_envs
                )
                if too_big is not None:
                    raise ConfigError([f"behaviors.{brain}.network_settings: {too_big}"])
                for each in self.options.phases or []:
                    self.options.phase_settings_for(behavior, each)
            prepare_results_dir(self.options)  # --force removes the old run only now that all is checked
            if self.options.checkpoint_settings.resume:
                self._tidy_killed_run()
            try:
                os.makedirs(self.options.checkpoint_settings.run_logs_dir, exist_ok=True)
            except OSError as err:
                raise ResultsWriteError(
                    f"{self.options.checkpoint_settings.run_logs_dir}: cannot create ({err.strerror or err}); "
                    "free disk space or make the results folder writable"
                ) from None
            self.env_manager.run_logs_ready()  # worker tracebacks may be written there now
            write_yaml(os.path.join(self.run_path, "configuration.yaml"), self.options.as_dict())
            output_ready = True
            self._open_store()
            if self.options.checkpoint_settings.resume:
                self.phase_log.load()
            for index, phase in enumerate(self.phases):
                if phase is not None and self.phase_log.entry(phase.name).get("state") == "done":
                    logger.info("Phase %s is done already; skipping it", phase.name)
                    continue
                self._run_phase(index, phase, specs)
        except KeyboardInterrupt:
            interrupted = True
            logger.info("Learning was interrupted; saving a final checkpoint.")
        finally:
            self._close_progress()
            self._stop_threads()
            try:
                if self.train_model and output_ready and not self._phase_saved:
                    self._save_models()
            finally:
                if output_ready:
                    self._write_run_logs()
                self._close_env()
                for writer in self.writers:
                    writer.close()
                if self.store is not None:
                    self.store.close()
        if not interrupted:
            logger.info("Training finished after %d environment steps.", self.env_steps.total)

    def _tidy_killed_run(self) -> None:
        """--resume after a run that was killed: remove the temporary files of writes it did not
        finish and cut torn last records off its TensorBoard event files. Every other file was
        written whole (atomically) or is SQLite's, which recovers by itself."""
        for path in remove_stale_temp_files(self.run_path):
            logger.info("Removed %s, an unfinished write of an interrupted run", path)
        repair_event_files(self.run_path)

    def _open_store(self) -> None:
        settings = self.options.results_store
        if settings.enabled:
            self.store = ResultsStore(
                os.path.join(self.run_path, STORE_FILENAME), self.options.checkpoint_settings.run_id,
                settings.batch_size, settings.record_steps,
            )

    def _run_phase(self, index: int, phase: Optional[PhaseSettings], specs: dict[str, BehaviorSpec]) -> None:
        self.phase, self.phase_index = phase, index
        self._phase_saved = False
        entry = self.phase_log.entry(self.phase_name)
        resumed = entry.get("state") == "running"
        self._phase_resumed = resumed
        entry["state"] = "running"
        self.phase_acted = dict(entry.get("acted", {})) if resumed else {}
        self.phase_episodes = dict(entry.get("episodes", {})) if resumed else {}
        self._open_phase_outputs()
        if phase is not None:
            logger.info("Phase %s (%s, %s) begins", phase.name, phase.mode,
                        f"{phase.max_steps} steps" if phase.max_steps is not None else f"{phase.episodes} episodes")
            params = resolve_parameter_seeds(
                {**(self.options.environment_parameters or {}), **(phase.environment_parameters or {})}, self.seed
            )
            if index > 0 or params:
                self.env_manager.set_environment_parameters(params)  # resets every environment
        self.ghost_controller = GhostController()
        for brain, trainer in self.trainers.items():
            if not resumed or index > 0:
                self._load_phase_brain(brain, trainer)
            self._configure_trainer(brain, trainer, entry)
            self.live[brain] = trainer.policy_message()
        self._rebuild_ghosts()
        if self.phased:
            self.phase_log.save()
        if self.store is not None:
            self.store.record_phase(phase=self.phase_name, index=index, mode=self.phase_mode, state="running", wall_time=time.time())
        for brain in self.trainers:
            self._push_policies(brain)
            self._start_thread(brain)
        for behavior, spec in specs.items():
            self._create_trainer(behavior, spec)
        self._open_progress()
        last_progress = time.monotonic()
        while not self._phase_done():
            self.advance()
            if self._progress is not None and time.monotonic() - last_progress >= 0.5:
                last_progress = time.monotonic()
                self._update_progress()
        self._end_phase()

    def _rebuild_ghosts(self) -> None:
        """Self-play teams of the brains that learn in this phase (ELO and snapshots carry over)."""
        controller = self.ghost_controller
        for brain, existing in list(self.ghosts.items()):
            trainer = self.trainers[brain]
            if not trainer.learning:
                del self.ghosts[brain]  # frozen: it acts with its own weights, no ghosts
                continue
            existing.controller = controller
            existing.teams = {}
            for behavior_id in self.behavior_ids[brain]:
                existing.add_behavior(behavior_id)
        for brain, trainer in self.trainers.items():
            self._setup_ghost(brain, trainer)
            ghost = self.ghosts.get(brain)
            if ghost is not None:
                for behavior_id in self.behavior_ids[brain]:
                    if behavior_id not in ghost.teams:
                        ghost.add_behavior(behavior_id)
                ghost.start(self.live[brain], trainer.step)

    def _end_phase(self) -> None:
        """Stop the trainer threads, write the last summaries and checkpoints of the phase."""
        if self.phase is not None and self.phase_index + 1 < len(self.phases):
            self._switch_started = time.monotonic()  # until the next phase's first steps arrive
        self._close_progress()
        self._stop_threads()
        for trainer in self.trainers.values():
            if trainer.step % trainer.settings.summary_freq or not trainer.step:
                trainer.write_summary(trainer.step)  # the last partial period: every episode reaches TensorBoard
        if self.train_model:
            self._save_models()
        self._phase_saved = True
        entry = self.phase_log.entry(self.phase_name)
        entry["state"] = "done"
        entry["acted"], entry["episodes"] = dict(self.phase_acted), dict(self.phase_episodes)
        if self.phased:
            self.phase_log.save()
        if self.store is not None:
            self.store.record_phase(phase=self.phase_name, index=self.phase_index, mode=self.phase_mode, state="done", wall_time=time.time())
            self.store.flush()
        if self.phase is not None:
            logger.info("Phase %s done", self.phase.name)
        self.stop_event = threading.Event()
        for manager in self.managers.values():
            manager.stop_event = self.stop_event
        self.threads = {}

    def _stop_threads(self) -> None:
        self.stop_event.set()
        for behavior, thread in self.threads.items():
            thread.join(timeout=TRAINER_JOIN_TIMEOUT_S)
            if thread.is_alive():
                logger.warning("trainer thread of %s did not stop within %.0f s", behavior, TRAINER_JOIN_TIMEOUT_S)

    def _save_models(self) -> None:
        crashed = {behavior for behavior, _, _ in self.thread_errors}
        for behavior, trainer in self.trainers.items():
            thread = self.threads.get(behavior)
            if behavior in crashed or (thread is not None and thread.is_alive()):
                # its state may be half-updated; keep the last good checkpoint.pt
                logger.warning("%s: no final checkpoint (its trainer failed or did not stop)", behavior)
                continue
            if trainer.checkpoints is None:
                continue
            ghost = self.ghosts.get(behavior)
            if ghost is not None:
                self.status.behavior(behavior)["elo"] = ghost.elo
            if trainer.saved_step == trainer.step:
                trainer.checkpoints.mark_final(trainer.step)
            else:
                trainer.save_checkpoint(final=True)

    def _close_env(self) -> None:
        try:
            self.env_manager.close()
        except Exception:  # noqa: BLE001 - the run's own outcome matters more than a close error
            logger.warning("closing the environments raised", exc_info=True)

    def _write_run_logs(self) -> None:
        run_logs = self.options.checkpoint_settings.run_logs_dir
        for brain, ghost in self.ghosts.items():
            if brain in self.trainers and self.trainers[brain].checkpoints is not None:
                self.status.behavior(brain)["elo"] = ghost.elo
        self.status.save()
        if self.phased:
            entry = self.phase_log.entry(self.phase_name)
            if entry.get("state") != "done":
                entry["acted"], entry["episodes"] = dict(self.phase_acted), dict(self.phase_episodes)
            self.phase_log.save()
        meta = metadata()
        meta.update(
            {
                "timer_format_version": "0.1.0",
                "start_time_seconds": str(int(self.timers.start)),
                "end_time_seconds": str(int(time.time())),
                "command_line_arguments": " ".join(sys.argv),
                "ml_arl_version": ml_arl.__version__,
                "process_start_time": repr(PROCESS_START),
                "first_step_time": repr(self.first_step_time),
                "phase_switch_seconds": json.dumps(self.phase_switch_seconds),
            }
        )
        write_json(os.path.join(run_logs, "timers.json"), self.timers.as_dict(meta))
        write_yaml(os.path.join(self.run_path, "configuration.yaml"), self.options.as_dict())


    # ------------------------------------------------------------------ progress bar
    def _open_progress(self) -> None:
        if not sys.stdout.isatty():
            return
        from tqdm import tqdm
        from tqdm.contrib.logging import logging_redirect_tqdm

        total = sum(min(t.step_limit - t.schedule_origin, t.settings.max_steps) for t in self.trainers.values())
        self._progress = tqdm(total=total, unit="step", dynamic_ncols=True, file=sys.stdout)
        self._log_redirect = logging_redirect_tqdm()  # log lines print above the bar
        self._log_redirect.__enter__()

    def _update_progress(self) -> None:
        if self._progress is not None:
            done = sum(
                min(t.step - t.schedule_origin, t.step_limit - t.schedule_origin, t.settings.max_steps) for t in self.trainers.values()
            )
            self._progress.update(done - self._progress.n)

    def _close_progress(self) -> None:
        if self._progress is not None:
            self._log_redirect.__exit__(None, None, None)
            self._progress.close()
            self._progress = None
