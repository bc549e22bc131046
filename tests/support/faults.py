"""Running arl-learn against environments that fail on cue (tests/support/fault_envs.py) and reading
what it left: the console, run_logs/worker_errors.log, the run's status."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest

from ml_arl.envs.backends.env_manager import WORKER_ERRORS_LOG
from tests.support.runs import arl_learn_here
from tests.support.zygote import popen_arl_learn

REPO = Path(__file__).resolve().parents[2]
ENV = "tests.support.fault_envs:make_env"
BEHAVIOR = "Reach"
RUN_TIMEOUT_S = 120.0

CONFIG = """\
default_settings:
  trainer_type: ppo
  hyperparameters:
    batch_size: 64
    buffer_size: 256
    num_epoch: 1
  network_settings:
    hidden_units: 16
    num_layers: 1
  max_steps: {max_steps}
  time_horizon: 32
  summary_freq: {summary_freq}
  checkpoint_interval: 1000000
"""


PHASES = """\
phases:
  - name: one
    max_steps: {steps}
  - name: two
    max_steps: {steps}
    environment_parameters: {{level: 2.0}}
"""

SELF_PLAY = """\
behaviors:
  Tag:
    trainer_type: ppo
    hyperparameters: {{batch_size: 64, buffer_size: 256, num_epoch: 1}}
    network_settings: {{hidden_units: 16, num_layers: 1}}
    max_steps: {max_steps}
    time_horizon: 32
    summary_freq: 1000
    checkpoint_interval: 1000000
    self_play: {{save_steps: 500, team_change: {team_change}, swap_steps: 500, window: 3}}
"""


def write_config(
    tmp_path: Path, max_steps: int, summary_freq: int = 1000, name: str = "config.yaml", phase_steps: int = 0
) -> Path:
    """The tiny Reach config; ``phase_steps``: two phases of that many steps, the second with
    environment_parameters {level: 2.0} (the switch resets every worker with them)."""
    path = tmp_path / name
    text = CONFIG.format(max_steps=max_steps, summary_freq=summary_freq)
    if phase_steps:
        text += PHASES.format(steps=phase_steps)
    path.write_text(text)
    return path


@dataclass
class Run:
    proc: subprocess.Popen
    stdout_path: Path
    stderr_path: Path
    started: float

    @property
    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def output(self) -> str:
        return f"--- rc={self.proc.returncode}\n--- stdout:\n{self.stdout}\n--- stderr:\n{self.stderr}"

    def kill_tree(self) -> None:
        """Kill the session the run was started in (arl-learn, its forkserver and the workers)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)

    def wait(self, timeout: float = RUN_TIMEOUT_S) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill_tree()
            pytest.fail(f"arl-learn did not exit within {timeout} s\n{self.output()}")

    def wait_for(self, what: str, predicate: Callable[[], bool], timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            if self.proc.poll() is not None:
                pytest.fail(f"arl-learn exited before {what}\n{self.output()}")
            time.sleep(0.02)
        self.kill_tree()
        pytest.fail(f"timed out after {timeout} s waiting for {what}\n{self.output()}")


@dataclass
class Finished:
    """A run that has ended: its exit code and console output."""
    returncode: int
    stdout: str
    stderr: str

    def output(self) -> str:
        return f"--- rc={self.returncode}\n--- stdout:\n{self.stdout}\n--- stderr:\n{self.stderr}"


def cli_args(
    tmp_path: Path,
    config: Path,
    run_id: str,
    *flags: str,
    env_args: tuple[str, ...] = (),
    num_envs: int = 1,
    env: str = ENV,
) -> list[str]:
    args = [
        str(config),
        "--run-id", run_id,
        "--results-dir", str(tmp_path / "results"),
        "--num-envs", str(num_envs),
        "--seed", "1",
        "--torch-device", "cpu",
        *flags,
        "--env", env,
    ]
    if env_args:
        args += ["--env-args", *env_args]  # REMAINDER: must come last
    return args


def start_run(tmp_path: Path, config: Path, run_id: str, *flags: str, tag: Optional[str] = None, code: str = "",
              **kwargs) -> Run:
    """arl-learn as a process of its own (its own session, forked by the zygote), output to files;
    ``code`` runs first in that process."""
    environ = dict(os.environ)
    environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), environ.get("PYTHONPATH", "")) if p)
    environ["PYTHONUNBUFFERED"] = "1"
    name = tag or run_id
    out, err = tmp_path / f"{name}.stdout", tmp_path / f"{name}.stderr"
    with open(out, "wb") as fo, open(err, "wb") as fe:
        proc = popen_arl_learn(cli_args(tmp_path, config, run_id, *flags, **kwargs), REPO, environ, stdout=fo,
                               stderr=fe, start_new_session=True, code=code)
    return Run(proc, out, err, time.monotonic())


def run_command_to_end(tmp_path: Path, *args, **kwargs) -> Finished:
    run = start_run(tmp_path, *args, **kwargs)
    run.wait()
    return Finished(run.proc.returncode, run.stdout, run.stderr)


def run_to_end(tmp_path: Path, *args, **kwargs) -> Finished:
    """The same command line through arl-learn's main() in this process (no interpreter start):
    the same console lines and exit code. The workers are processes either way; what only the
    command shows (output the workers print themselves, signals) is checked by the tests that
    use ``start_run`` or ``run_command_to_end``."""
    proc = arl_learn_here(cli_args(tmp_path, *args, **kwargs), cwd=REPO)
    return Finished(proc.returncode, proc.stdout, proc.stderr)


def last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def assert_tracebacks_only_from_workers(run: Finished, worker_id: int) -> None:
    """--debug: a Traceback may only appear right after the logged "worker N traceback:" line."""
    assert "Traceback" not in run.stderr, run.output()
    lines = run.stdout.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Traceback"):
            assert i > 0 and lines[i - 1].endswith(f"worker {worker_id} traceback:"), (
                f"main-process traceback at stdout line {i + 1}\n{run.output()}"
            )


def assert_no_traceback(run: Run | Finished) -> None:
    """Without --debug nothing prints a traceback: failures are one line each."""
    assert "Traceback (most recent call last)" not in run.stdout + run.stderr, run.output()


def worker_errors(tmp_path: Path, run_id: str) -> str:
    path = tmp_path / "results" / run_id / "run_logs" / WORKER_ERRORS_LOG
    assert path.is_file(), f"{path} missing"
    return path.read_text()


def lines_with(text: str, needle: str) -> list[str]:
    return [line for line in text.splitlines() if needle in line]


def behavior_dir(tmp_path: Path, run_id: str) -> Path:
    return tmp_path / "results" / run_id / BEHAVIOR


def status(tmp_path: Path, run_id: str) -> dict:
    path = tmp_path / "results" / run_id / "run_logs" / "training_status.json"
    assert path.is_file(), f"{path} missing"
    return json.loads(path.read_text())


def read_pid(path: Path) -> Optional[int]:
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text else None


# --------------------------------------------------------------------------- end to end
