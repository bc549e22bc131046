"""A study's runs as Ray tasks (``arl-study --ray-address``): Ray places each run on a node of the
cluster with the CPUs it needs (num_envs + 1), where the task starts the same arl-learn process a
local study starts and waits for it. It joins the cluster as the Ray backend does
(ml_arl.envs.backends.ray_env_manager.connect; ``local`` starts a Ray instance on this machine).

The runs write into ``--results-dir``, which every node must see at the same path (one machine,
or a shared file system): the study reads the runs' summaries there for pruning and the metric.

``RayRun`` has the interface of ``ml_arl.study.process.RunProcess``: stopping cancels the task,
which passes SIGINT to its run (the run saves and stops); escalating cancels it by force (Ray kills
the task's worker, and the run, whose parent died, gets SIGTERM and saves as well).
"""

from __future__ import annotations

import os
import queue
import threading
import time
from typing import Any, Optional

from ml_arl.study.process import STOP_GRACE_S, RunProcess

_task: Any = None


def connect(address: str, parallel: int) -> bool:
    """Ray ready in this process; True when this call started it."""
    from ml_arl.envs.backends.ray_env_manager import connect as join

    return join(None if address == "local" else address, parallel)


def _run_on_node(argv: list[str], log_path: str, cwd: str, env: dict[str, str]) -> tuple[int, str]:
    """The Ray task: the run in a process of its own on this node; (exit code, its last error line)."""
    ended: queue.SimpleQueue[Any] = queue.SimpleQueue()
    os.environ.update(env)
    run = RunProcess(argv, log_path, ended, cwd=cwd)
    try:
        while True:
            try:
                ended.get(timeout=3600.0)  # a run lasts as long as it trains; Ray's cancel interrupts this wait
                break
            except queue.Empty:
                continue
    except KeyboardInterrupt:  # ray.cancel: the study stops this run
        run.stop("cancelled")
        deadline = time.monotonic() + STOP_GRACE_S * 2
        while True:
            try:
                ended.get(timeout=max(0.05, (run.next_deadline() or deadline) - time.monotonic()))
                break
            except queue.Empty:
                run.escalate(time.monotonic())
                if time.monotonic() > deadline:
                    run.kill()
    code = run.returncode if run.returncode is not None else -9
    return code, run.failure_reason() if code != 0 else ""


class RayRun:
    def __init__(self, argv: list[str], log_path: str, ended: queue.SimpleQueue[Any], cpus: int, cwd: Optional[str] = None):
        import ray

        global _task
        if _task is None:
            _task = ray.remote(max_retries=0)(_run_on_node)
        self.argv = argv
        self.log_path = log_path
        self.started = time.monotonic()
        self.stop_reason: Optional[str] = None
        self.returncode: Optional[int] = None
        self._reason = ""
        self._stop_sent_at: Optional[float] = None
        self._forced = False
        env = {k: v for k, v in os.environ.items() if k in ("PYTHONPATH", "PATH", "MLFLOW_TRACKING_URI", "WANDB_MODE")}
        self._ref = _task.options(num_cpus=cpus).remote(argv, os.path.abspath(log_path), cwd or os.getcwd(), env)
        self._ended = ended
        threading.Thread(target=self._wait, name="arl-study-ray-wait", daemon=True).start()

    def _wait(self) -> None:
        import ray

        try:
            self.returncode, self._reason = ray.get(self._ref)
        except Exception as err:  # noqa: BLE001 - a cancelled task, a lost node: the run ended without a code
            self.returncode = -9
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            self._reason = f"the Ray task ended: {type(err).__name__}: {first}"
        self._ended.put(self)

    def stop(self, reason: str) -> None:
        import ray

        if self.stop_reason is None:
            self.stop_reason = reason
        if self._stop_sent_at is None and self.returncode is None:
            ray.cancel(self._ref)
            self._stop_sent_at = time.monotonic()

    def escalate(self, now: float) -> None:
        if self._stop_sent_at is not None and not self._forced and self.returncode is None and now - self._stop_sent_at >= STOP_GRACE_S * 2:
            self.kill()

    def kill(self) -> None:
        import ray

        if self.returncode is None and not self._forced:
            self._forced = True
            ray.cancel(self._ref, force=True)

    def next_deadline(self) -> Optional[float]:
        if self._stop_sent_at is None or self._forced or self.returncode is not None:
            return None
        return self._stop_sent_at + STOP_GRACE_S * 2

    def failure_reason(self) -> str:
        return self._reason or f"arl-learn ended with exit code {self.returncode}"
