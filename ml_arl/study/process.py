"""One arl-learn run of a study, as a process of its own.

The run is ``python -m ml_arl.cli.study_child CONFIG --run-id ... --results-dir ...`` (arl-learn, which
stops when the study's process dies) in a session of its own (the terminal's Ctrl-C reaches the
study, which passes it on), its console in a log file. A waiter
thread puts the run on the study's queue when the process ends, so the study blocks on one queue
with a deadline instead of polling processes. Stopping escalates: SIGINT (arl-learn saves a
checkpoint and exits), then SIGTERM after ``STOP_GRACE_S``, then SIGKILL of its whole process
group after ``TERM_GRACE_S`` more.
"""

from __future__ import annotations

import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time
from typing import IO, Optional, Protocol

STOP_GRACE_S = 120.0  # after SIGINT: saving a checkpoint of a large model on a busy machine
TERM_GRACE_S = 30.0  # after SIGTERM, before the process group is killed
_TAIL_BYTES = 64 * 1024  # how much of a run's log is read for its failure reason


class StudyRun(Protocol):
    """What the study's loop uses of a run, here (RunProcess) or on a Ray cluster (RayRun)."""

    started: float
    stop_reason: Optional[str]
    log_path: str

    @property
    def returncode(self) -> Optional[int]: ...

    def stop(self, reason: str) -> None: ...

    def escalate(self, now: float) -> None: ...

    def kill(self) -> None: ...

    def next_deadline(self) -> Optional[float]: ...

    def failure_reason(self) -> str: ...


class RunProcess:
    def __init__(self, argv: list[str], log_path: str, ended: queue.SimpleQueue[StudyRun], cwd: Optional[str] = None):
        self.argv = argv
        self.log_path = log_path
        os.makedirs(os.path.dirname(log_path), exist_ok=True)
        self._log: IO[bytes] = open(log_path, "ab")
        self._log.write(("$ arl-learn " + " ".join(shlex.quote(a) for a in argv) + "\n").encode())
        self._log.flush()
        env = {**os.environ, "ARL_STUDY_PID": str(os.getpid())}  # the run stops if the study dies (ml_arl.cli.study_child)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ml_arl.cli.study_child", *argv], stdin=subprocess.DEVNULL, stdout=self._log,
            stderr=subprocess.STDOUT, cwd=cwd, start_new_session=True, env=env,
        )
        self.started = time.monotonic()
        self.stop_reason: Optional[str] = None  # why the study stopped it (pruned, timed out, interrupted)
        self._stop_sent_at: Optional[float] = None
        self._term_sent_at: Optional[float] = None
        self._ended = ended
        self._waiter = threading.Thread(target=self._wait, name=f"arl-study-wait-{self.proc.pid}", daemon=True)
        self._waiter.start()

    def _wait(self) -> None:
        self.proc.wait()  # the study's deadlines end the process (stop, escalate); this only reports it
        self._log.close()
        self._ended.put(self)

    @property
    def returncode(self) -> Optional[int]:
        return self.proc.returncode

    def stop(self, reason: str) -> None:
        """Ask the run to save and stop (SIGINT); ``escalate`` makes sure it does."""
        if self.stop_reason is None:
            self.stop_reason = reason
        if self._stop_sent_at is None and self.proc.poll() is None:
            self._signal(signal.SIGINT)
            self._stop_sent_at = time.monotonic()

    def escalate(self, now: float) -> None:
        """SIGTERM, then SIGKILL of the process group, to a stopped run past its grace."""
        if self._stop_sent_at is None or self.proc.poll() is not None:
            return
        if self._term_sent_at is None and now - self._stop_sent_at >= STOP_GRACE_S:
            self._signal(signal.SIGTERM)
            self._term_sent_at = now
        elif self._term_sent_at is not None and now - self._term_sent_at >= TERM_GRACE_S:
            self.kill()

    def kill(self) -> None:
        """SIGKILL to the run's whole process group (its workers too)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def next_deadline(self) -> Optional[float]:
        """When ``escalate`` has something to do next (None: nothing pending)."""
        if self._stop_sent_at is None or self.proc.poll() is not None:
            return None
        if self._term_sent_at is None:
            return self._stop_sent_at + STOP_GRACE_S
        return self._term_sent_at + TERM_GRACE_S

    def _signal(self, signum: int) -> None:
        try:
            self.proc.send_signal(signum)
        except ProcessLookupError:
            pass

    def failure_reason(self) -> str:
        """The run's own last error line (arl-learn says what went wrong in one line), else its exit code."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(max(0, os.path.getsize(self.log_path) - _TAIL_BYTES))
                lines = f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            lines = []
        errors = [line for line in lines if "error:" in line or "[ERROR]" in line]
        if errors:
            return errors[-1].replace("[ERROR] ", "").strip()
        code = self.returncode
        if code is not None and code < 0:
            return f"arl-learn was killed by signal {-code}"
        return f"arl-learn ended with exit code {code}"
