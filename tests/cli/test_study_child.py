"""A study's run is interrupted once when the study dies (Linux only): the kernel delivered the
parent-death signal twice to a run with threads of its own, and with SIGTERM the repeat cut the
run's final checkpoint short (ml_arl.cli.study_child)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")

# The run: arl-learn's signal handling; counts the interrupts it gets while it "saves" for a second
# after the first one.
CHILD = """
import os, signal, sys, time
from ml_arl.cli.learn import _sigterm
from ml_arl.cli.study_child import die_with_parent
die_with_parent(int(sys.argv[2]))
signal.signal(signal.SIGTERM, _sigterm)  # as arl-learn's main() sets it
import threading
for _ in range(3):  # the run's own threads (trainers, trackers, torch's)
    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
out = open(sys.argv[1], "a")
out.write("ready\\n"); out.flush()
interrupts = 0
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    try:
        time.sleep(0.05)
        if interrupts and time.monotonic() > saved_at:
            break
    except KeyboardInterrupt:
        interrupts += 1
        out.write("interrupt\\n"); out.flush()
        saved_at = time.monotonic() + 1.0
out.write(f"done {interrupts}\\n"); out.flush()
"""

# The study: the run started from one of several threads, as arl-study's parallel slots start them.
PARENT = """
import os, subprocess, sys, threading, time
def start():
    subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2], str(os.getpid())], start_new_session=True)
    time.sleep(120)
threads = [threading.Thread(target=start if i == 0 else time.sleep, args=() if i == 0 else (120,), daemon=True) for i in range(4)]
for t in threads:
    t.start()
time.sleep(120)
"""


def _wait_for(path: Path, text: str) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        content = path.read_text() if path.exists() else ""
        if text in content:
            return content
        time.sleep(0.05)
    raise AssertionError(f"{text!r} never appeared in {path}: {content!r}")


def test_a_study_killed_with_sigkill_interrupts_its_run_once(tmp_path: Path) -> None:
    log = tmp_path / "child.log"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, CHILD, str(log)], start_new_session=True)
    try:
        _wait_for(log, "ready")
    finally:
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=30)
    assert _wait_for(log, "done").splitlines() == ["ready", "interrupt", "done 1"]
