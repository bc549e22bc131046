"""Running arl-learn as a user would: tiny configs, config files, the command in a process of its
own (from the zygote) or in the test process; reading TensorBoard scalars back."""

from __future__ import annotations

import glob
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

ROOT = Path(__file__).resolve().parents[2]


def tiny_config(env: str = "builtin:Reach", max_steps: int = 3000, **trainer: Any) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "trainer_type": "ppo",
        "hyperparameters": {"batch_size": 128, "buffer_size": 512, "learning_rate": 3.0e-3, "beta": 1.0e-3, "num_epoch": 3},
        "network_settings": {"hidden_units": 32, "num_layers": 2},
        "reward_signals": {"extrinsic": {"gamma": 0.95}},
        "max_steps": max_steps,
        "time_horizon": 32,
        "summary_freq": 1000,
        "checkpoint_interval": 1000,
        "keep_checkpoints": 2,
    }
    settings.update(trainer)
    return {"env_settings": {"env_path": env}, "default_settings": settings, "behaviors": {}}


def write_config(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(config))
    return path


def arl_learn(
    args: list[Any], cwd: Path, timeout: float = 120, fresh: bool = False, env: Optional[dict[str, str]] = None,
) -> subprocess.CompletedProcess[str]:
    """``arl-learn ARGS`` as a process of its own, its output captured: forked from this test
    process's zygote (tests/support/zygote.py: no interpreter start, no torch import), or with ``fresh`` a
    new ``python -m ml_arl.cli.learn``."""
    from tests.support.zygote import run_arl_learn

    return run_arl_learn(args, cwd, timeout, env=env, fresh=fresh)


def arl_learn_watched(
    args: list[Any], cwd: Path, stop: Optional[Callable[[list[str]], bool]] = None,
    on_line: Optional[Callable[[str], None]] = None, deadline_s: float = 240, **env: str,
) -> subprocess.CompletedProcess[str]:
    """``arl_learn`` (forked) with its console (stdout and stderr together) read line by line while it runs:
    ``on_line`` sees each line, and the first time ``stop(lines so far)`` holds the run gets SIGTERM
    (what Ctrl-C does: save, export, exit 0). Killed if it still runs after ``deadline_s``."""
    import signal
    import threading

    from tests.support.zygote import popen_arl_learn

    proc = popen_arl_learn(args, cwd, dict(os.environ, PYTHONPATH=str(ROOT), **env), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    def dump_and_kill() -> None:  # every thread's stack into the console first (arl-learn's SIGUSR2), for the failure
        proc.send_signal(signal.SIGUSR2)
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            proc.kill()

    watchdog = threading.Timer(deadline_s, dump_and_kill)
    watchdog.start()
    lines: list[str] = []
    stopped = False
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if on_line is not None:
                on_line(line)
            if stop is not None and not stopped and stop(lines):
                proc.send_signal(signal.SIGTERM)
                stopped = True
        proc.wait()
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, "".join(lines), "")


def arl_learn_here(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``arl_learn`` without a new interpreter: arl-learn's ``main(args)`` in this process, in
    ``cwd``, with its stdout and stderr captured (torch and the rest are imported once per test
    session, not once per run). The same exit code and console lines as the command; what differs
    is only what needs a process of its own (signals, workers' own output), which the tests that
    check it run through ``arl_learn``. Logging, the SIGTERM and SIGINT handlers and the cwd are restored."""
    from ml_arl.cli import learn as cli

    return main_here(cli.main, "arl-learn", args, cwd)


def arl_study_here(args: list[Any], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``arl-study ARGS`` as ``arl_learn_here`` runs arl-learn: its ``main`` in this process (its
    runs are processes of their own all the same)."""
    from ml_arl.cli import study as cli

    return main_here(cli.main, "arl-study", args, cwd)


def main_here(main: Callable[[list[str]], int], prog: str, args: list[Any], cwd: Path) -> subprocess.CompletedProcess[str]:
    import contextlib
    import io
    import logging
    import signal

    out, err = io.StringIO(), io.StringIO()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    sigterm, sigint = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    here = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in args])
            except SystemExit as exit:  # argparse's errors and --help
                code = exit.code if isinstance(exit.code, int) else 1
    finally:
        os.chdir(here)
        signal.signal(signal.SIGTERM, sigterm)
        signal.signal(signal.SIGINT, sigint)
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
                handler.close()
        for handler in handlers:
            if handler not in root.handlers:
                root.addHandler(handler)
        root.setLevel(level)
    return subprocess.CompletedProcess([prog, *map(str, args)], code, out.getvalue(), err.getvalue())


def scalars(folder: Path, tag: str) -> list[tuple[int, float]]:
    out: list[tuple[int, float]] = []
    for event_file in sorted(glob.glob(str(folder / "events.out.tfevents.*")), key=os.path.getmtime):
        acc = EventAccumulator(event_file)
        acc.Reload()
        if tag in acc.Tags()["scalars"]:
            out += [(e.step, e.value) for e in acc.Scalars(tag)]
    return out
