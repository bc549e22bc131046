"""The run loop: env manager <-> agent managers <-> trainers.

One trainer per behavior, each in its own thread when ``threaded: true`` (else advanced inline
after every env step). The env side hands finished trajectories to each behavior's
AgentManagerQueue; trainers announce new policies on their policy queue, and the env side
passes the new actor weights to the muscles with the next step request.
"""

from __future__ import annotations

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
from ml_arl.agent_processor import AgentManager
from ml_arl.checkpoints import CheckpointManager, TrainingStatus, metadata, write_json, write_yaml
from ml_arl.envs.env_manager import EnvManager
from ml_arl.envs.env_runner import StepBatch
from ml_arl.envs.managers import create_env_manager
from ml_arl.exceptions import ConfigError, RunDirectoryError, TrainerThreadError
from ml_arl.policy.networks import check_visual_support
from ml_arl.results_dir import prepare_results_dir, resolve_seed
from ml_arl.settings import RunOptions
from ml_arl.stats import ConsoleWriter, GaugeWriter, StatsReporter, StatsWriter, StepCounter, TensorboardWriter
from ml_arl.timers import Timers
from ml_arl.trainers.ppo import PPOTrainer

logger = logging.getLogger(__name__)

TRAINER_JOIN_TIMEOUT_S = 30.0


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
    def __init__(self, options: RunOptions, env_manager: Optional[EnvManager] = None, seed: Optional[int] = None):
        self.options = options
        cp = options.checkpoint_settings
        self.write_path = cp.write_path
        self.train_model = not cp.inference
        self.timers = Timers()
        self.seed = resolve_seed(options) if seed is None else seed
        np.random.seed(self.seed)
        torch.manual_seed(self.seed)
        self.device = choose_device(options.torch_settings.device)
        set_torch_threads()
        self.env_manager = env_manager if env_manager is not None else create_env_manager(options, self.seed)
        self.status = TrainingStatus(os.path.join(cp.run_logs_dir, "training_status.json"))
        if cp.resume:
            self.status.load()
        self.writers: list[StatsWriter] = [
            TensorboardWriter(self.write_path, clear_past_data=not cp.resume and not cp.inference),
            GaugeWriter(self.timers),
            ConsoleWriter(),
        ]
        self.trainers: dict[str, PPOTrainer] = {}
        self.managers: dict[str, AgentManager] = {}
        self.brain_of: dict[str, str] = {}  # behavior id ("Name?team=0") -> trainer key ("Name")
        self.behavior_ids: dict[str, list[str]] = {}  # trainer key -> its behavior ids
        self.stop_event = threading.Event()
        self.threads: dict[str, threading.Thread] = {}
        self.thread_errors: list[tuple[str, BaseException, str]] = []
        self.env_steps = StepCounter()
        self._progress: Any = None
        self._log_redirect: Any = None

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
            logger.warning(
                "%s: the environment has several teams (%s); PPO does not train adversarial games, so they "
                "share one policy. Self-play trains them against each other.", brain,
                ", ".join(self.behavior_ids[brain] + [behavior_id]),
            )
            self.brain_of[behavior_id] = brain
            self.behavior_ids[brain].append(behavior_id)
            self.env_manager.set_policy(behavior_id, trainer.policy_message())
            return
        settings = self.options.settings_for(brain)
        stats = StatsReporter(brain, self.writers, self.env_steps)
        checkpoints = (
            CheckpointManager(brain, os.path.join(self.write_path, brain), settings.keep_checkpoints, self.status)
            if self.train_model
            else None
        )
        trainer = PPOTrainer(brain, settings, spec, stats, checkpoints, self.device, self.train_model, self.seed)
        self._load_initial_weights(trainer, brain, settings.init_path)
        logger.info("Hyperparameters for behavior name %s: %s", brain, settings.model_dump(mode="json"))
        manager = AgentManager(brain, stats, settings.threaded, self.stop_event)
        trainer.subscribe_trajectory_queue(manager.trajectory_queue)
        trainer.publish_policy_queue(manager.policy_queue)
        self.trainers[brain] = trainer
        self.managers[brain] = manager
        self.brain_of[behavior_id] = brain
        self.behavior_ids[brain] = [behavior_id]
        self.env_manager.set_policy(behavior_id, trainer.policy_message())
        logger.debug("Trainer of %s ready; its first policy is on the way to the workers", brain)
        if settings.threaded:
            thread = threading.Thread(
                target=self._trainer_loop, args=(brain, trainer), name=f"trainer-{brain}", daemon=True
            )
            self.threads[brain] = thread
            thread.start()

    def _load_initial_weights(self, trainer: PPOTrainer, behavior: str, init_path: Optional[str]) -> None:
        cp = self.options.checkpoint_settings
        if cp.resume:
            path = os.path.join(self.write_path, behavior, "checkpoint.pt")
            if os.path.isfile(path):
                trainer.load(path, resume=True)
                logger.info("Resuming %s from %s at step %d", behavior, path, trainer.step)
            else:
                logger.warning("--resume: no checkpoint for %s at %s; it starts from scratch", behavior, path)
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

    def _trainer_loop(self, behavior: str, trainer: PPOTrainer) -> None:
        try:
            while not self.stop_event.is_set():
                with self.timers.timed("trainer_advance"):
                    trainer.advance(block_timeout=0.05)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread with its traceback
            self.thread_errors.append((behavior, exc, traceback.format_exc()))

    def _check_threads(self) -> None:
        if self.thread_errors:
            behavior, exc, tb = self.thread_errors[0]
            logger.error("trainer thread of %s raised:\n%s", behavior, tb.rstrip())
            raise TrainerThreadError(behavior, f"trainer of {behavior} failed: {type(exc).__name__}: {exc}", tb) from exc

    # ------------------------------------------------------------------ the loop
    def _done(self) -> bool:
        return bool(self.trainers) and all(t.finished for t in self.trainers.values())

    def _handle_batch(self, batch: StepBatch) -> None:
        for behavior, spec in batch.new_specs.items():
            self._create_trainer(behavior, spec)
        self.env_steps.total += batch.env_steps
        brain_of = self.brain_of
        by_brain: dict[str, list] = {}
        for traj in batch.trajectories:
            by_brain.setdefault(brain_of[traj.behavior], []).append(traj)
        for brain, trajectories in by_brain.items():
            self.managers[brain].add_trajectories(trajectories, self._check_threads)
        for ep in batch.episodes:
            self.managers[brain_of[ep.behavior]].record_episodes([ep])
        for behavior, (total, count) in batch.entropy.items():
            self.managers[brain_of[behavior]].record_entropy(total, count)
        if batch.env_stats:
            for manager in self.managers.values():
                manager.record_environment_stats(batch.env_stats, batch.worker_id)

    def advance(self) -> None:
        with self.timers.timed("env_step"):
            batches = self.env_manager.step()
        with self.timers.timed("process_steps"):
            for batch in batches:
                self._handle_batch(batch)
        self._check_threads()
        for behavior, trainer in self.trainers.items():
            if behavior not in self.threads:
                with self.timers.timed("trainer_advance"):
                    trainer.advance()
            newest = self.managers[behavior].policy_queue.drain()
            if newest:
                for behavior_id in self.behavior_ids[behavior]:
                    self.env_manager.set_policy(behavior_id, newest[-1])

    def start_learning(self) -> None:
        interrupted = False
        output_ready = False
        try:
            with self.timers.timed("env_start"):
                specs = self.env_manager.start()
            logger.debug("Environments ready; behaviors: %s", ", ".join(specs))
            for behavior in specs:
                self.options.settings_for(behavior)  # a behavior missing from the config fails before any write
                check = check_visual_support(specs[behavior], self.options.settings_for(behavior).network_settings)
                if check is not None:
                    raise ConfigError([f"behaviors.{behavior.split('?', 1)[0]}.{check}"])
            prepare_results_dir(self.options)  # --force removes the old run only now that all is checked
            os.makedirs(self.options.checkpoint_settings.run_logs_dir, exist_ok=True)
            write_yaml(os.path.join(self.write_path, "configuration.yaml"), self.options.as_dict())
            output_ready = True
            for behavior, spec in specs.items():
                self._create_trainer(behavior, spec)
            self._open_progress()
            last_progress = time.monotonic()
            while not self._done():
                self.advance()
                if self._progress is not None and time.monotonic() - last_progress >= 0.5:
                    last_progress = time.monotonic()
                    self._update_progress()
        except KeyboardInterrupt:
            interrupted = True
            logger.info("Learning was interrupted; saving a final checkpoint.")
        finally:
            self._close_progress()
            self._stop_threads()
            try:
                if self.train_model and output_ready:
                    self._save_models()
            finally:
                if output_ready:
                    self._write_run_logs()
                self._close_env()
                for writer in self.writers:
                    writer.close()
        if not interrupted:
            logger.info("Training finished after %d environment steps.", self.env_steps.total)

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
            if trainer.saved_step == trainer.step and trainer.checkpoints is not None:
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
        self.status.save()
        meta = metadata()
        meta.update(
            {
                "timer_format_version": "0.1.0",
                "start_time_seconds": str(int(self.timers.start)),
                "end_time_seconds": str(int(time.time())),
                "command_line_arguments": " ".join(sys.argv),
                "ml_arl_version": ml_arl.__version__,
            }
        )
        write_json(os.path.join(run_logs, "timers.json"), self.timers.as_dict(meta))
        write_yaml(os.path.join(self.write_path, "configuration.yaml"), self.options.as_dict())

    # ------------------------------------------------------------------ progress bar
    def _open_progress(self) -> None:
        if not sys.stdout.isatty():
            return
        from tqdm import tqdm
        from tqdm.contrib.logging import logging_redirect_tqdm

        total = sum(t.settings.max_steps for t in self.trainers.values())
        self._progress = tqdm(total=total, unit="step", dynamic_ncols=True, file=sys.stdout)
        self._log_redirect = logging_redirect_tqdm()  # log lines print above the bar
        self._log_redirect.__enter__()

    def _update_progress(self) -> None:
        if self._progress is not None:
            done = sum(min(t.step, t.settings.max_steps) for t in self.trainers.values())
            self._progress.update(done - self._progress.n)

    def _close_progress(self) -> None:
        if self._progress is not None:
            self._log_redirect.__exit__(None, None, None)
            self._progress.close()
            self._progress = None
