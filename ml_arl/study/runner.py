"""Running a study: trials asked of Optuna, each trial one arl-learn run per seed, ``parallel``
runs at once, intermediate summaries reported for pruning, results told back.

All Optuna calls happen in this (the main) thread; the runs are processes of their own
(ml_arl.study.process), whose ends arrive on one queue. The loop blocks on that queue until a run
ends or the next report is due (``report_interval_s``), when it reads the running runs' new
summaries (their TensorBoard event files), reports each run's metric so far at step
``seed index x max_steps + step`` (so trials compare at the same seed and step) and stops the
runs of a trial the pruner prunes (SIGINT: the run saves and exits).

Run names: ``trial-0007`` with one seed, ``trial-0007-seed3`` with several; every run is an ordinary
arl-learn run folder under results/<study>/, its config in results/<study>/configs/, its console
in results/<study>/logs/. Slot k of ``parallel`` gives its runs ``--base-port`` base + k x
(num_envs + 1), so parallel Unity builds never share a port. Ctrl-C (or SIGTERM) stops every
run (each saves a checkpoint); the trials they belonged to are recorded as interrupted and run
again, from those checkpoints, by ``arl-study --resume``.
"""

from __future__ import annotations

import glob
import logging
import os
import queue
import statistics
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Optional

import optuna
from optuna.trial import TrialState

import ml_arl.study.trial_files as trial_files
from ml_arl.core.atomic_files import write_yaml
from ml_arl.results.run_folder import is_run_folder
from ml_arl.study.design import combinations
from ml_arl.study.metric import ScalarReader, reduce
from ml_arl.study.plan import StudyPlan
from ml_arl.study.process import RunProcess, StudyRun
from ml_arl.study.space import VALUES_ATTR, grid_values, suggest
from ml_arl.study.storage import RUN_NAME_ATTR, StudyFolder
from ml_arl.study.trial_files import INTERRUPTED_ATTR, run_ids

logger = logging.getLogger("ml_arl.study")

INTERRUPT_DEADLINE_S = 300.0  # after Ctrl-C: how long the runs get to save and stop, all together


@dataclass
class SeedRun:
    seed: int
    index: int  # the seed's position in the study's seeds
    run_id: str
    reader: ScalarReader
    process: Optional[StudyRun] = None
    slot: int = -1
    reported_step: int = -1


@dataclass
class TrialJob:
    trial: optuna.Trial
    values: dict[str, Any]
    run_name: str
    config_path: str
    pending: deque[SeedRun]
    running: list[SeedRun] = field(default_factory=list)
    results: dict[int, float] = field(default_factory=dict)
    failure: Optional[str] = None
    pruned_at: Optional[int] = None
    started: float = field(default_factory=time.monotonic)

    @property
    def finished(self) -> bool:
        return not self.pending and not self.running

    def describe(self) -> str:
        return ", ".join(f"{k.rsplit('.', 1)[-1]}={_short(v)}" for k, v in self.values.items())


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def ended_trials(study: optuna.Study) -> int:
    """Trials that count against ``trials``: complete, pruned, or failed on their own (not interrupted)."""
    count = 0
    for t in study.get_trials(deepcopy=False):
        if t.state in (TrialState.COMPLETE, TrialState.PRUNED):
            count += 1
        elif t.state == TrialState.FAIL and trial_files.FAIL_REASON_ATTR in t.user_attrs:
            count += 1
    return count


class StudyRunner:
    def __init__(
        self, plan: StudyPlan, folder: StudyFolder, study: optuna.Study, storage: optuna.storages.RDBStorage,
        base_port: Optional[int] = None, ray: bool = False, store: Optional[str] = None,
    ):
        self.plan = plan
        self.settings = plan.settings
        self.folder = folder
        self.study = study
        self.storage = storage
        env = plan.options.env_settings
        self.base_port = env.base_port if base_port is None else base_port
        self.port_stride = env.num_envs + 1
        self.store = store  # a PostgreSQL results store every run writes into (arl-learn --store)
        self.ray = ray  # runs as Ray tasks (ml_arl.study.ray_runs), each asking for num_envs + 1 CPUs
        self.free_slots = list(range(self.settings.parallel))
        self.jobs: list[TrialJob] = []
        self.ended: queue.SimpleQueue[StudyRun] = queue.SimpleQueue()
        self.by_process: dict[StudyRun, tuple[TrialJob, SeedRun]] = {}
        self.n_trials = self.settings.n_trials
        if self.settings.mode == "grid":
            self.n_trials = len(combinations(plan))
        elif self.settings.sampler == "grid":
            size = 1
            for sampler in self.settings.search.values():
                size *= len(grid_values(sampler))
            self.n_trials = min(self.n_trials, size)
        self.started = time.monotonic()

    # ------------------------------------------------------------------ the loop
    def run(self) -> int:
        """Run trials until ``trials`` have ended (or the time is up). Returns the exit code."""
        try:
            while True:
                self._fill()
                if not self.jobs:
                    break
                self._wait_and_handle()
        except KeyboardInterrupt:
            self._interrupt()
            return 0
        return 0 if any(t.state == TrialState.COMPLETE for t in self.study.get_trials(deepcopy=False)) else 1

    def _may_start_trial(self) -> bool:
        timeout = self.settings.timeout_s
        if timeout is not None and time.monotonic() - self.started >= timeout:
            return False
        waiting = self.study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
        return bool(waiting) or ended_trials(self.study) + len(self.jobs) < self.n_trials

    def _fill(self) -> None:
        while self.free_slots:
            job = next((j for j in self.jobs if j.pending and j.failure is None and j.pruned_at is None), None)
            if job is not None:
                self._start_run(job, job.pending.popleft())
            elif self._may_start_trial():
                self.jobs.append(self._new_trial())
            else:
                return

    def _new_trial(self) -> TrialJob:
        trial = self.study.ask()
        values = {key: suggest(trial, key, sampler) for key, sampler in self.settings.search.items()}
        run_name = trial.user_attrs.get(RUN_NAME_ATTR) or f"trial-{trial.number:04d}"
        trial.set_user_attr(VALUES_ATTR, values)
        trial.set_user_attr(RUN_NAME_ATTR, run_name)
        config_path = os.path.join(self.folder.path, "configs", f"{run_name}.yaml")
        os.makedirs(os.path.dirname(config_path), exist_ok=True)
        write_yaml(config_path, self.plan.trial_config(values))
        runs = deque(
            SeedRun(seed, i, run_id, ScalarReader(os.path.join(self.folder.path, run_id), self.settings.metric.tag, self.plan.behavior, self.plan.phase))
            for i, (seed, run_id) in enumerate(run_ids(run_name, self.settings.seeds))
        )
        job = TrialJob(trial, values, run_name, config_path, runs)
        if self.settings.search:
            logger.info("Trial %d: %s", trial.number, job.describe())
        return job

    def _start_run(self, job: TrialJob, run: SeedRun) -> None:
        run.slot = self.free_slots.pop(0)
        run_dir = os.path.join(self.folder.path, run.run_id)
        config, results = job.config_path, self.folder.path
        if self.ray:  # the run's node: the same paths, from wherever its worker starts
            config, results = os.path.abspath(config), os.path.abspath(results)
        argv = [config, "--run-id", run.run_id, "--results-dir", results, "--seed", str(run.seed),
                "--base-port", str(self.base_port + run.slot * self.port_stride)]
        if self.store is not None:  # the run's name there: the study's own, then the run's
            argv += ["--store", self.store, "--store-run", f"{os.path.basename(self.folder.path)}/{run.run_id}"]
        if is_run_folder(run_dir):  # a trial run again after an interruption: continue where it stopped
            argv.append("--resume" if glob.glob(os.path.join(run_dir, "*", "checkpoint.pt")) else "--force")
        log = os.path.join(self.folder.path, "logs", f"{run.run_id}.log")
        if self.ray:
            from ml_arl.study.ray_runs import RayRun

            run.process = RayRun(argv, log, self.ended, cpus=self.port_stride)
        else:
            run.process = RunProcess(argv, log, self.ended)
        self.by_process[run.process] = (job, run)
        job.running.append(run)

    def _next_wait(self) -> float:
        now = time.monotonic()
        deadline = now + self.settings.report_interval_s
        for process in self.by_process:
            pending = process.next_deadline()
            if pending is not None:
                deadline = min(deadline, pending)
            if self.settings.trial_timeout_s is not None and process.stop_reason is None:
                deadline = min(deadline, process.started + self.settings.trial_timeout_s)
        return max(0.05, deadline - now)

    def _wait_and_handle(self) -> None:
        try:
            ended = [self.ended.get(timeout=self._next_wait())]
        except queue.Empty:
            ended = []
        while True:
            try:
                ended.append(self.ended.get_nowait())
            except queue.Empty:
                break
        now = time.monotonic()
        for process in list(self.by_process):
            if process not in ended:
                self._check_running(process, now)
        for process in ended:
            self._run_ended(process)

    def _check_running(self, process: StudyRun, now: float) -> None:
        job, run = self.by_process[process]
        if self.storage.get_heartbeat_interval() is not None:  # a shared storage
            self.storage.record_heartbeat(job.trial._trial_id)
        timeout = self.settings.trial_timeout_s
        if timeout is not None and process.stop_reason is None and now - process.started >= timeout:
            process.stop("timeout")
        process.escalate(now)
        if job.pruned_at is not None or job.failure is not None or not self.settings.search:
            return
        points = run.reader.read()
        if not points or points[-1][0] <= run.reported_step:
            return
        run.reported_step = points[-1][0]
        value = reduce(points, self.settings.metric)
        if value is None:
            return
        step = run.index * self.plan.span + run.reported_step
        job.trial.report(value, step)
        if job.trial.should_prune():
            job.pruned_at = step
            self._stop_trial(job, "pruned")

    def _stop_trial(self, job: TrialJob, reason: str) -> None:
        job.pending.clear()
        for other in job.running:
            if other.process is not None:
                other.process.stop(reason)

    def _run_ended(self, process: StudyRun) -> None:
        job, run = self.by_process.pop(process)
        job.running.remove(run)
        self.free_slots.append(run.slot)
        self.free_slots.sort()
        if process.stop_reason == "timeout" and job.failure is None:
            job.failure = f"run {run.run_id} ran past trial_timeout_s ({self.settings.trial_timeout_s:g} s) and was stopped"
        elif process.stop_reason is None and process.returncode != 0 and job.failure is None:
            job.failure = f"run {run.run_id}: {process.failure_reason()}"
        elif process.stop_reason is None and job.failure is None:
            value = reduce(run.reader.read(), self.settings.metric)
            if value is None:
                who = f" of behavior {self.plan.behavior}" if self.plan.behavior else ""
                where = f" in phase {self.plan.phase}" if self.plan.phase else ""
                tags = run.reader.tags()
                written = f" (it wrote {', '.join(tags[:6])}{', ...' if len(tags) > 6 else ''})" if tags else ""
                job.failure = f"run {run.run_id} wrote no {self.settings.metric.tag!r} summaries{who}{where}{written}; check metric"
            else:
                job.results[run.seed] = value
        if job.failure is not None:
            self._stop_trial(job, "failed")
        if job.finished:
            self._finish(job)

    def _finish(self, job: TrialJob) -> None:
        self.jobs.remove(job)
        trial = job.trial
        trial.set_user_attr(trial_files.SECONDS_ATTR, round(time.monotonic() - job.started, 1))
        trial.set_user_attr(trial_files.SEED_VALUES_ATTR, {str(s): v for s, v in job.results.items()})
        if job.pruned_at is not None:
            trial.set_user_attr(trial_files.PRUNED_AT_ATTR, job.pruned_at)
            self.study.tell(trial, state=TrialState.PRUNED)
            logger.info("Trial %d pruned at step %d", trial.number, job.pruned_at)
        elif job.failure is not None:
            trial.set_user_attr(trial_files.FAIL_REASON_ATTR, job.failure)
            self.study.tell(trial, state=TrialState.FAIL)
            logger.warning("Trial %d failed: %s", trial.number, job.failure)
        else:
            value = statistics.fmean(job.results[s] for s in self.settings.seeds)
            self.study.tell(trial, value)
            best = trial_files.best_trial(self.study)
            where = f"; best so far: trial {best.number}, {best.value:.6g}" if best is not None else ""
            logger.info("Trial %d finished: %s %.6g%s", trial.number, self.settings.metric.reduce, value, where)
        self.write_outputs()

    def write_outputs(self) -> None:
        trial_files.write_trials_csv(self.folder.path, self.plan, self.study)
        trial_files.write_best(self.folder.path, self.plan, self.study)

    # ------------------------------------------------------------------ Ctrl-C
    def _interrupt(self) -> None:
        logger.info("Interrupted: stopping %d run(s); each saves a checkpoint", len(self.by_process))
        for process in self.by_process:
            process.stop("interrupted")
        deadline = time.monotonic() + INTERRUPT_DEADLINE_S
        while self.by_process and time.monotonic() < deadline:
            try:
                try:
                    process = self.ended.get(timeout=self._next_wait())
                    job, run = self.by_process.pop(process)
                    job.running.remove(run)
                except queue.Empty:
                    for process in self.by_process:
                        process.escalate(time.monotonic())
            except KeyboardInterrupt:  # a second Ctrl-C: no more waiting
                break
        for process in self.by_process:
            process.kill()
        for job in self.jobs:
            job.trial.set_user_attr(INTERRUPTED_ATTR, True)
            self.study.tell(job.trial, state=TrialState.FAIL)
        self.jobs = []
        self.write_outputs()
        logger.info("The study stopped; continue it with --resume")
