"""A run's outputs: the results folder, TensorBoard and console summaries, training_status.json,
the results store, timers and the run logs (timers.json, configuration.yaml).

Layout as ML-Agents: ``results/<run-id>/`` with ``run_logs/`` (training_status.json, timers.json),
``configuration.yaml`` and one TensorBoard folder per behavior; with phases, each phase has
its own folder with its own summaries, checkpoints and training_status.json.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Sequence
from typing import Any, Optional

import ml_arl
from ml_arl.core.atomic_files import remove_stale_temp_files, write_json, write_yaml
from ml_arl.core.exceptions import ResultsWriteError, TrackerError
from ml_arl.core.experience import EpisodeStat, Trajectory
from ml_arl.results.checkpoints import TrainingStatus, metadata
from ml_arl.results.run_folder import prepare_results_dir
from ml_arl.results.run_store import open_store
from ml_arl.results.store_buffer import BufferedStore
from ml_arl.results.summary_writers import (
    ConsoleWriter,
    GaugeWriter,
    StatsReporter,
    StatsWriter,
    StepCounter,
    TensorboardWriter,
    repair_event_files,
)
from ml_arl.results.timers import Timers
from ml_arl.settings import RunOptions

logger = logging.getLogger(__name__)

def _process_start() -> float:
    """When this process started (wall-clock): from /proc where there is one (this module is
    imported after torch, seconds after the start), else the time of this import."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime, in clock ticks since boot
        with open("/proc/uptime", encoding="ascii") as f:
            uptime = float(f.read().split()[0])
        return time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return time.time()


PROCESS_START = _process_start()  # when the process started


class RunOutputs:
    def __init__(self, options: RunOptions, timers: Timers, extra_writers: Sequence[StatsWriter] = ()):
        cp = options.checkpoint_settings
        self.options = options
        self.timers = timers
        self.run_path = cp.write_path
        self.writers: list[StatsWriter] = []  # reporters hold this list: it is replaced in place
        self.trackers: list[StatsWriter] = []  # MLflow, W&B, entry-point plugins: one run for all phases
        self.extra_writers = list(extra_writers)  # train()'s callbacks: beside the trackers, in every phase
        self.status = TrainingStatus(os.path.join(cp.run_logs_dir, "training_status.json"))
        self.store: Optional[BufferedStore] = None
        self.env_steps = StepCounter()
        self.first_step_time: Optional[float] = None
        self.phase_switch_seconds: list[float] = []
        self._switch_started: Optional[float] = None
        self._agent_episodes: dict[tuple[str, str], list[int]] = {}  # (brain, agent) -> [episode, step in it]
        self.ready = False  # the results folder is prepared: run logs may be written

    def reporter(self, brain: str) -> StatsReporter:
        """The behavior's stats reporter; trackers that take properties get its settings, as
        ML-Agents gives a new trainer's hyperparameters to its stats writers."""
        for tracker in self.trackers:
            add_property = getattr(tracker, "add_property", None)
            if add_property is not None:
                add_property(brain, "hyperparameters", self.options.settings_for(brain).model_dump(mode="json"))
        return StatsReporter(brain, self.writers, self.env_steps)

    # ------------------------------------------------------------------ the results folder
    def prepare(self) -> None:
        """Make the results folder this run's (--force removes the old run only now that every
        check passed), tidy a killed run on --resume, write configuration.yaml, open the store."""
        if self.options.results_store.url is not None:  # first: a server that is down or holds the run id changes nothing here
            self.store = open_store(self.options)
        try:
            self._prepare_folder()
        except BaseException:
            if self.store is not None:
                self.store.close()
                self.store = None
            raise
        if self.store is None:
            self.store = open_store(self.options)

    def _prepare_folder(self) -> None:
        cp = self.options.checkpoint_settings
        fresh = not cp.resume and not os.path.lexists(self.run_path)
        prepare_results_dir(self.options)
        if cp.resume:
            for path in remove_stale_temp_files(self.run_path):
                logger.info("Removed %s, an unfinished write of an interrupted run", path)
            repair_event_files(self.run_path)  # cut torn last records off the event files
        try:
            os.makedirs(cp.run_logs_dir, exist_ok=True)
        except OSError as err:
            raise ResultsWriteError(
                f"{cp.run_logs_dir}: cannot create ({err.strerror or err}); free disk space or make the results folder writable"
            ) from None
        write_yaml(os.path.join(self.run_path, "configuration.yaml"), self.options.as_dict())
        self.ready = True
        from ml_arl.results.trackers import tracker_writers

        try:
            self.trackers = tracker_writers(self.options)  # they get every summary, in every phase
        except TrackerError:
            if fresh:  # nothing ran: the same command runs once the tracker is mended, without --force
                self.ready = False
                shutil.rmtree(self.run_path, ignore_errors=True)
            raise

    @property
    def records_steps(self) -> bool:
        return self.store is not None and self.options.results_store.record_steps

    def open_phase(self, write_path: str, run_logs: str) -> None:
        """TensorBoard and training_status of a phase (its own folder)."""
        cp = self.options.checkpoint_settings
        for writer in self.writers:
            if writer not in self.trackers:
                writer.close()
        self.writers[:] = [
            TensorboardWriter(write_path, clear_past_data=not cp.resume and not cp.inference),
            GaugeWriter(self.timers),
            ConsoleWriter(),
            *self.trackers,
            *self.extra_writers,
        ]
        self.status = TrainingStatus(os.path.join(run_logs, "training_status.json"))
        if cp.resume:
            self.status.load()
            self.status.prune_missing()  # it never names a missing file, unless someone removed one

    # ------------------------------------------------------------------ timing
    def steps_arrived(self) -> None:
        """Environment steps arrived: the first of the run, or the first after a phase switch."""
        if self.first_step_time is None:
            self.first_step_time = time.time()
            logger.debug("First environment steps arrived %.3f s after start", time.time() - PROCESS_START)
        if self._switch_started is not None:
            self.phase_switch_seconds.append(time.monotonic() - self._switch_started)
            logger.debug("Phase switch took %.3f s", self.phase_switch_seconds[-1])
            self._switch_started = None

    def switch_begins(self) -> None:
        """A phase ends and another follows: the switch lasts until its first steps arrive."""
        self._switch_started = time.monotonic()

    # ------------------------------------------------------------------ the results store
    def record_phase(self, phase: str, index: int, mode: str, state: str) -> None:
        if self.store is not None:
            self.store.record_phase(phase=phase, index=index, mode=mode, state=state, wall_time=time.time())
            if state == "done":
                self.store.flush()

    def record_steps(self, phase: str, brain: str, traj: Trajectory, worker_id: int) -> None:
        assert self.store is not None
        key = (brain, traj.agent_id)
        episode, first = self._agent_episodes.get(key, [0, 0])
        env_rewards = traj.env_rewards if traj.env_rewards is not None else traj.rewards
        self.store.record_steps(
            phase=phase, behavior=brain, agent=traj.agent_id, worker=worker_id, episode=episode,
            first_step=first, env_rewards=env_rewards.tolist(), objectives=traj.rewards.tolist(),
        )
        self._agent_episodes[key] = [episode + 1, 0] if traj.done else [episode, first + len(traj)]

    def record_episode(
        self, phase: str, mode: str, brain: str, ep: EpisodeStat, worker_id: int, number: int, elo: Optional[float],
        policy: Optional[str] = None,
    ) -> None:
        if self.store is not None:
            self.store.record_episode(
                phase=phase, mode=mode, behavior=brain, agent=ep.agent_id, worker=worker_id, episode=number,
                length=ep.length, env_reward=ep.reward, objective=ep.objective, elo=elo, wall_time=time.time(),
                policy=policy,
            )

    # ------------------------------------------------------------------ the end
    def write_run_logs(self, elos: dict[str, float]) -> None:
        """training_status.json (with the ELO of self-play brains), timers.json, configuration.yaml."""
        for brain, elo in elos.items():
            self.status.behavior(brain)["elo"] = elo
        self.status.save()
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
        write_json(os.path.join(self.options.checkpoint_settings.run_logs_dir, "timers.json"), self.timers.as_dict(meta))
        write_yaml(os.path.join(self.run_path, "configuration.yaml"), self.options.as_dict())

    def close(self) -> None:
        for writer in self.writers:
            if writer not in self.trackers:
                writer.close()
        for tracker in self.trackers:  # after the models are exported: they upload them
            tracker.close()
        if self.store is not None:
            self.store.close()


class ProgressBar:
    """A tqdm bar of trainer steps when stdout is a terminal; log lines print above it."""

    def __init__(self) -> None:
        self._bar: Any = None
        self._redirect: Any = None
        self._last = 0.0

    def open(self, trainers: dict[str, Any]) -> None:
        if not sys.stdout.isatty():
            return
        from tqdm import tqdm
        from tqdm.contrib.logging import logging_redirect_tqdm

        total = sum(min(t.step_limit - t.schedule_origin, t.settings.max_steps) for t in trainers.values())
        self._bar = tqdm(total=total, unit="step", dynamic_ncols=True, file=sys.stdout)
        self._redirect = logging_redirect_tqdm()
        self._redirect.__enter__()

    def update(self, trainers: dict[str, Any]) -> None:
        """At most twice a second."""
        if self._bar is None or time.monotonic() - self._last < 0.5:
            return
        self._last = time.monotonic()
        done = sum(min(t.step - t.schedule_origin, t.step_limit - t.schedule_origin, t.settings.max_steps) for t in trainers.values())
        self._bar.update(done - self._bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._redirect.__exit__(None, None, None)
            self._bar.close()
            self._bar = None
