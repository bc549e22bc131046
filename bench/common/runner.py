"""The one grid runner of bench/: every (task, config, seed) of a benchmark, run one after another or
``jobs`` at a time, results handed back in grid order.

A bench script says what one run is (a function of a :class:`Run`) and which tasks, configs and seeds
it covers; ``run_grid`` does the looping, the parallelism and, with ``fresh_process``, a spawned
process per run. The scripts keep their own command lines (``--seeds``, ``--jobs``, ...) and their own
tables; ``bench/run.py`` is the same grid from the shell, for any command.

    from bench.common.runner import run_grid

    def one(run):
        return train(run.task, seed=run.seed)

    for run, score in run_grid(one, tasks=["Hopper", "Walker2d"], seeds=[1, 2, 3], jobs=2):
        print(run.task, run.seed, score)

Order: ``order`` names the three axes outermost first; the last one varies fastest (the default,
``("task", "config", "seed")``, runs every seed of a task's config before the next config). With
``jobs`` > 1 the runs start in that order, ``jobs`` at a time (threads: a run is normally a
subprocess), and ``on_result`` is still called in grid order, as soon as the runs before have ended.
An exception in a run ends the grid with that exception once the runs already started have finished.
"""

from __future__ import annotations

import argparse
import itertools
import queue
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Optional, TypeVar

R = TypeVar("R")
AXES = ("task", "config", "seed")
DEFAULT_ORDER = AXES


@dataclass(frozen=True)
class Run:
    """One cell of the grid: what to run, with which seed, and its place in the grid (0-based)."""

    task: Any = None
    config: Any = None
    seed: int = 0
    index: int = 0
    total: int = 1

    def label(self) -> str:
        """``task=... config=... seed=...``, leaving out the axes the grid does not use (None)."""
        parts = [f"{name}={getattr(self, name)}" for name in ("task", "config") if getattr(self, name) is not None]
        return " ".join([*parts, f"seed={self.seed}"])


def grid(
    tasks: Iterable[Any] = (None,),
    seeds: Iterable[int] = (0,),
    configs: Iterable[Any] = (None,),
    order: Sequence[str] = DEFAULT_ORDER,
) -> list[Run]:
    """Every combination of tasks, configs and seeds, nested as ``order`` says (outermost first)."""
    order = tuple(order)
    if sorted(order) != sorted(AXES):
        raise ValueError(f"order {order!r}: name each of {', '.join(AXES)} once")
    values = {"task": list(tasks), "config": list(configs), "seed": list(seeds)}
    cells = [dict(zip(order, combo)) for combo in itertools.product(*(values[axis] for axis in order))]
    return [Run(c["task"], c["config"], c["seed"], i, len(cells)) for i, c in enumerate(cells)]


def run_grid(
    fn: Callable[[Run], R],
    tasks: Iterable[Any] = (None,),
    seeds: Iterable[int] = (0,),
    configs: Iterable[Any] = (None,),
    *,
    jobs: int = 1,
    order: Sequence[str] = DEFAULT_ORDER,
    fresh_process: bool = False,
    timeout: Optional[float] = None,
    on_result: Optional[Callable[[Run, R], None]] = None,
) -> list[tuple[Run, R]]:
    """``fn(run)`` for every run of the grid; ``(run, result)`` pairs in grid order.

    ``fresh_process``: each run in a process of its own, started with ``spawn`` (nothing of this
    process's imports or state carries over; ``fn`` must be a module-level function and its result
    picklable); ``timeout`` then bounds each run in seconds. ``on_result(run, result)`` is called in
    grid order as results arrive (the scripts print their per-seed lines there)."""
    runs = grid(tasks, seeds, configs, order)
    call: Callable[[Run], R] = (lambda run: in_fresh_process(fn, run, timeout)) if fresh_process else fn
    out: list[tuple[Run, R]] = []
    if jobs <= 1:
        for run in runs:
            result = call(run)
            out.append((run, result))
            if on_result is not None:
                on_result(run, result)
        return out
    from concurrent.futures import ThreadPoolExecutor  # here: a script timed from its start pays for it only with jobs

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for run, result in zip(runs, pool.map(call, runs)):
            out.append((run, result))
            if on_result is not None:
                on_result(run, result)
    return out


class RunFailed(RuntimeError):
    """A run in a fresh process raised, died or ran out of time."""


def _child(fn: Callable[[Run], Any], run: Run, results: Any) -> None:
    try:
        results.put(("ok", fn(run)))
    except BaseException as err:  # every way out of the run (SystemExit included) is reported to the parent
        results.put(("error", f"{type(err).__name__}: {err}\n{traceback.format_exc()}"))


def in_fresh_process(fn: Callable[[Run], R], run: Run, timeout: Optional[float] = None) -> R:
    """``fn(run)`` in a spawned process; its result, or RunFailed with the child's traceback."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    proc = ctx.Process(target=_child, args=(fn, run, results), name=f"bench-run-{run.index}")
    proc.start()
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while True:
            try:
                status, value = results.get(timeout=1.0)
                break
            except queue.Empty:
                if deadline is not None and time.monotonic() > deadline:
                    raise RunFailed(f"{run.label()}: no result within {timeout:g} s") from None
                if not proc.is_alive():
                    try:  # it may have put its result just before it ended
                        status, value = results.get(timeout=1.0)
                        break
                    except queue.Empty:
                        raise RunFailed(f"{run.label()}: the run's process exited {proc.exitcode} without a result") from None
    finally:
        proc.join(timeout=60)
        if proc.is_alive():
            proc.kill()
            proc.join()
    if status != "ok":
        raise RunFailed(f"{run.label()}: {value}")
    return value


def add_seeds_argument(parser: argparse.ArgumentParser, default: Sequence[int], help: str = "") -> None:
    """The benches' common ``--seeds S [S ...]`` (the runner's seed axis)."""
    shown = " ".join(map(str, default))
    parser.add_argument("--seeds", type=int, nargs="+", default=list(default),
                        help=f"{help or 'seeds'} (default: {shown})")
