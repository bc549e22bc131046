"""``python -m ml_arl.study.child ARGS``: arl-learn (ml_arl.cli) for a study's run, which gets
SIGTERM when the study's process dies (Linux ``PR_SET_PDEATHSIG``): a study killed with SIGKILL
leaves no run training on in the background; each saves a checkpoint (SIGTERM is arl-learn's
Ctrl-C) for ``arl-study --resume``. Elsewhere it is plain arl-learn."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(parent: int) -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the study died before the line above
        os.kill(os.getpid(), signal.SIGTERM)


if __name__ == "__main__":
    parent = int(os.environ.pop("ARL_STUDY_PID", "0") or 0)
    if parent:
        die_with_parent(parent)
    from ml_arl.cli import run

    run()
