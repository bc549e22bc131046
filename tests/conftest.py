"""Shared helpers: tiny configs and a way to run arl-learn as a user would."""

from __future__ import annotations

import os

# In-process runs act with numpy in the test process, next to torch: a multi-threaded BLAS there
# competes with torch for the 2 cores (resnet acting went from 9 to 122 ms a step). Worker
# processes already use one BLAS thread (ml_arl/envs/managers/forkserver.py). Set before numpy loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import subprocess  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Optional  # noqa: E402

import pytest  # noqa: E402
import yaml  # noqa: E402

import ml_arl  # noqa: E402,F401  first: mlagents-envs' modules then load ml_arl's Unity messages (ml_arl/protocol)

ROOT = Path(__file__).resolve().parents[1]


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
    process's zygote (tests/zygote.py: no interpreter start, no torch import), or with ``fresh`` a
    new ``python -m ml_arl.cli``."""
    from .zygote import run_arl_learn

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

    from .zygote import popen_arl_learn

    proc = popen_arl_learn(args, cwd, dict(os.environ, PYTHONPATH=str(ROOT), **env), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    watchdog = threading.Timer(deadline_s, proc.kill)
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
    import contextlib
    import io
    import logging
    import signal

    from ml_arl import cli

    out, err = io.StringIO(), io.StringIO()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    sigterm, sigint = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    here = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.main([str(a) for a in args])
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
    return subprocess.CompletedProcess(["arl-learn", *map(str, args)], code, out.getvalue(), err.getvalue())


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


# `make test` runs the suite in two processes (pytest-xdist, ``-n 2``) with the scheduler below:
# every test is a unit of its own, handed to whichever process is free, except the tests that
# must run in one process. (xdist's own ``--dist loadgroup`` with ``xdist_group`` marks would
# say this, but it does not group on pytest 9.2: pytest-dev/pytest-xdist#1386.)
SHARED_UNITS = {
    # module-scoped fixtures that are whole runs (grid_run, small_run) or pandapower's feeder
    # (case33bw): built once, in the process that runs every test using them
    "tests/test_arl.py::": "test_arl.py",
    "tests/test_grid.py::": "test_grid.py",
    # the module's Ray cluster (the cluster fixture): started once (about 10 s), not once per process
    "tests/test_ray.py::": "test_ray.py",
    # both need port 5004, the Unity Editor's (a lock keeps them apart too, the editor_port
    # fixture; in one process neither waits for the other)
    "tests/test_unity.py::test_editor_": "editor port 5004",
}


def unit_of(nodeid: str) -> str:
    for prefix, unit in SHARED_UNITS.items():
        if nodeid.startswith(prefix):
            return unit
    return nodeid


# Longest units first: the processes then end together instead of one running a 25 s test while
# the other has nothing left. A unit's length is the sum of its tests' durations in the last run
# that ran them (kept in pytest's cache, .pytest_cache, by the process that hands out the tests);
# a new test counts SLOW_GUESS_S when marked slow and QUICK_GUESS_S otherwise. With no durations
# on record (a fresh clone, as in CI) xdist's own order stays: the shared units first, then the
# files' order, which spreads the runs that start many processes over the session. The order only
# decides which process runs a test and when.
DURATIONS_KEY = "ml_arl/durations"
SLOW_GUESS_S, QUICK_GUESS_S = 10.0, 0.5
_durations: dict[str, float] = {}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    cache = getattr(config, "cache", None)
    known: dict[str, float] = cache.get(DURATIONS_KEY, {}) if cache is not None else {}
    if not known:
        return
    totals: dict[str, float] = {}
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        guess = SLOW_GUESS_S if item.get_closest_marker("slow") else QUICK_GUESS_S
        unit = unit_of(item.nodeid)
        totals[unit] = totals.get(unit, 0.0) + float(known.get(item.nodeid, guess))
        first.setdefault(unit, index)
    order = {id(item): (-totals[unit_of(item.nodeid)], first[unit_of(item.nodeid)], i) for i, item in enumerate(items)}
    items.sort(key=lambda item: order[id(item)])


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _durations[report.nodeid] = _durations.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    cache = getattr(session.config, "cache", None)
    if cache is None or hasattr(session.config, "workerinput") or not _durations:
        return  # an xdist worker: the process handing out the tests gets every report and keeps them
    known: dict[str, float] = cache.get(DURATIONS_KEY, {})
    known.update({nodeid: round(seconds, 2) for nodeid, seconds in _durations.items()})
    cache.set(DURATIONS_KEY, known)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "load":  # --dist loadfile etc. as asked
        return None
    from xdist.scheduler import LoadScopeScheduling

    cache = getattr(config, "cache", None)
    if cache is not None and cache.get(DURATIONS_KEY, {}):
        config.option.loadscopereorder = False  # the units come in the collection's order, longest first
    # else xdist's own order: units of several tests first, then the files' order

    class Scheduling(LoadScopeScheduling):
        """xdist's loadscope scheduler with one test per unit but for SHARED_UNITS, in the order
        of the collection (longest units first)."""

        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return Scheduling(config, log)
