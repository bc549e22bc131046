"""Running one conformance case as a user runs it: ``arl-learn`` (or a script) in a process of its
own, a train phase then a test phase, and what must hold afterwards: exit 0, no traceback on the
console, episodes of both phases in results.sqlite, and no process of the run left behind.

Orphans are found by a tag: the run gets ``ARL_CONFORMANCE_TAG=<uuid>`` in its environment, which
every process it starts inherits (the fork server, the workers, what the environments start), and
``/proc/<pid>/environ`` shows it. A process that still carries the tag once the run has exited was
left behind."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Optional

import yaml

from tests.support.runs import ROOT, arl_learn

TAG = "ARL_CONFORMANCE_TAG"
ORPHAN_DEADLINE_S = 20.0  # a process of the run may take this long to go after the run has exited


def tagged(tag: str) -> list[tuple[int, str]]:
    """(pid, command line) of every live process whose environment carries ``tag``."""
    needle = f"{TAG}={tag}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")[:200]
        except OSError:
            continue  # gone, or not ours to read
        if needle in environ and state not in (b"Z", b"X"):  # a zombie has exited; reaping it is its parent's job
            found.append((int(entry), cmdline))
    return found


def assert_no_orphans(tag: str, deadline_s: float = ORPHAN_DEADLINE_S) -> None:
    end = time.monotonic() + deadline_s
    left = tagged(tag)
    while left and time.monotonic() < end:
        time.sleep(0.2)
        left = tagged(tag)
    assert not left, f"processes of the run outlived it by {deadline_s:g} s: {left}"


def new_tag() -> dict[str, str]:
    """The environment of a tagged run, and its tag under TAG."""
    return dict(os.environ, **{TAG: uuid.uuid4().hex, "PYTHONPATH": str(ROOT)})


def two_phases(env: str, train_steps: int = 600, test_episodes: int = 4, num_envs: int = 2,
               **env_settings: Any) -> dict[str, Any]:
    """A small PPO config on ``env`` that trains ``train_steps`` and then tests ``test_episodes``."""
    return {
        "env_settings": {"env_path": env, "num_envs": num_envs, **env_settings},
        "default_settings": {
            "trainer_type": "ppo",
            "hyperparameters": {"batch_size": 64, "buffer_size": 256, "learning_rate": 3.0e-4, "num_epoch": 2},
            "network_settings": {"hidden_units": 32, "num_layers": 1},
            "max_steps": train_steps,
            "time_horizon": 32,
            "summary_freq": 10_000,
            "checkpoint_interval": 100_000,
        },
        "behaviors": {},
        "phases": [{"name": "train", "mode": "train", "max_steps": train_steps},
                   {"name": "test", "mode": "test", "episodes": test_episodes}],
    }


def episodes_by_phase(run: Path) -> dict[str, int]:
    with sqlite3.connect(run / "results.sqlite") as db:
        return dict(db.execute("SELECT phase, COUNT(*) FROM episodes GROUP BY phase").fetchall())


def check_run(proc: subprocess.CompletedProcess[str], tag: str, run: Path,
              phases: tuple[str, ...] = ("train", "test")) -> dict[str, int]:
    """What every case must show; returns the episodes per phase."""
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "Traceback" not in out, out[-4000:]
    assert "Task was destroyed but it is pending" not in out, out[-4000:]
    assert_no_orphans(tag)
    episodes = episodes_by_phase(run)
    for phase in phases:
        assert episodes.get(phase, 0) > 0, (phase, episodes, out[-2000:])
    return episodes


def run_case(tmp_path: Path, config: dict[str, Any], args: Optional[list[str]] = None, timeout: float = 240,
             phases: tuple[str, ...] = ("train", "test")) -> tuple[subprocess.CompletedProcess[str], dict[str, int]]:
    """``arl-learn case.yaml --run-id case`` as its own process, tagged, checked by ``check_run``."""
    path = tmp_path / "case.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    env = new_tag()
    proc = arl_learn([str(path), "--run-id", "case", *(args or [])], tmp_path, timeout, env=env)
    return proc, check_run(proc, env[TAG], tmp_path / "results" / "case", phases)


def run_script(tmp_path: Path, script: str, stdin: bool = False, timeout: float = 240
               ) -> tuple[subprocess.CompletedProcess[str], str]:
    """``python script.py`` (or ``python - < script.py``) in ``tmp_path``, tagged; returns the
    process and its tag. A fresh interpreter: what a user types."""
    path = tmp_path / "train.py"
    path.write_text(script)
    env = new_tag()
    command = [sys.executable, "-"] if stdin else [sys.executable, path.name]
    with open(path, "rb") as source:
        proc = subprocess.run(command, cwd=tmp_path, env=env, stdin=source if stdin else subprocess.DEVNULL,
                              capture_output=True, timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(errors="replace"),
                                       proc.stderr.decode(errors="replace")), env[TAG]
