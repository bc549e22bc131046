"""pytest's hooks for the whole suite: one BLAS thread, the test scheduler; the helpers are in tests/support."""

from __future__ import annotations

import os

# In-process runs act with numpy in the test process, next to torch: a multi-threaded BLAS there
# competes with torch for the 2 cores (resnet acting went from 9 to 122 ms a step). Worker
# processes already use one BLAS thread (ml_arl/envs/backends/forkserver.py). Set before numpy loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

import ml_arl  # noqa: E402,F401  first: mlagents-envs' modules then load ml_arl's Unity messages (ml_arl/protocol)


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
    "tests/training/test_arl.py::": "test_arl.py",
    "tests/envs/test_grid.py::": "test_grid.py",
    # the module's Ray cluster (the cluster fixture): started once (about 10 s), not once per process
    "tests/envs/test_ray.py::": "test_ray.py",
    # the module's PostgreSQL server (the server fixture): started once
    "tests/results/test_server_store.py::": "test_server_store.py",
    # both need port 5004, the Unity Editor's (a lock keeps them apart too, the editor_port
    # fixture; in one process neither waits for the other)
    "tests/envs/test_unity.py::test_editor_": "editor port 5004",
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
