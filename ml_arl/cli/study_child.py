"""``python -m ml_arl.cli.study_child ARGS``: arl-learn (ml_arl.cli.learn) for a study's run, which stops and
saves a checkpoint when the study's process dies (Linux ``PR_SET_PDEATHSIG``), as on Ctrl-C: a study
killed with SIGKILL leaves no run training on in the background, and ``arl-study --resume`` goes on
from the checkpoints. Elsewhere it is plain arl-learn.

The kernel may deliver the parent-death signal more than once to a run with threads of its own
(seen: twice to an arl-learn run; tests/cli/test_study_child.py), so it is a signal of its
own, SIGUSR1, taken once: a repeat must not cut the final checkpoint short, as a second SIGTERM did."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from types import FrameType
from typing import Optional

PR_SET_PDEATHSIG = 1  # linux/prctl.h
STUDY_DIED = signal.SIGUSR1


def _study_died(signum: int, frame: Optional[FrameType]) -> None:
    signal.signal(signum, signal.SIG_IGN)  # its repeats
    raise KeyboardInterrupt  # arl-learn's Ctrl-C: save a checkpoint and stop


def die_with_parent(parent: int) -> None:
    if not sys.platform.startswith("linux"):
        return
    signal.signal(STUDY_DIED, _study_died)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, STUDY_DIED, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the study died before the line above
        os.kill(os.getpid(), STUDY_DIED)


if __name__ == "__main__":
    parent = int(os.environ.pop("ARL_STUDY_PID", "0") or 0)
    try:
        if parent:
            die_with_parent(parent)
        from ml_arl.cli.learn import run

        run()
    except KeyboardInterrupt:  # the study died before the run began: nothing to save
        sys.exit(0)
