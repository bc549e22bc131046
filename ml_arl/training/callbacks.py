"""Callbacks of ``ml_arl.train``: objects with any of ``on_start(run)``, ``on_summary(summary)``,
``on_checkpoint(path)``, ``on_episode(behavior, episode)`` and ``on_phase(name)``.

A callback stops the run cleanly by returning ``False`` from any of them, or by raising
``StopTraining``: the run then saves a final checkpoint and returns, as it does for Ctrl-C. Any
other exception is the run's failure, with its traceback.

Where each is called: ``on_phase`` and ``on_episode`` in the thread that runs ``train`` (the main
loop), ``on_summary`` and ``on_checkpoint`` in the thread of the trainer that wrote them (its own
thread with ``threaded: true``), so a callback that keeps state across them should lock it.
``on_start`` receives the live ``Run`` (ml_arl.api.train.Run; typed Any here, which ml_arl.api.train imports)
before the environments start.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Optional

from ml_arl.core.experience import EpisodeStat
from ml_arl.results.summary_writers import StatsSummary

logger = logging.getLogger(__name__)

HOOKS = ("on_start", "on_summary", "on_checkpoint", "on_episode", "on_phase")


class StopTraining(Exception):
    """Raised by a callback: stop the run cleanly (save, then return from ``train``)."""


@dataclass(frozen=True)
class Summary:
    """One behavior's summary, as TensorBoard gets it: ``values`` maps each tag
    ("Environment/Cumulative Reward", "Losses/Policy Loss", ...) to its mean over the period."""

    behavior: str
    step: int
    values: dict[str, float] = field(default_factory=dict)


class Callback:
    """A base class with every hook doing nothing; subclassing it is optional."""

    def on_start(self, run: Any) -> Optional[bool]:
        return None

    def on_summary(self, summary: Summary) -> Optional[bool]:
        return None

    def on_checkpoint(self, path: str) -> Optional[bool]:
        return None

    def on_episode(self, behavior: str, episode: EpisodeStat) -> Optional[bool]:
        return None

    def on_phase(self, name: str) -> Optional[bool]:
        return None


class CallbackList:
    """The run's callbacks: calls each hook a callback has, and remembers a stop request. It is also
    a stats writer (``write_stats``), so summaries reach it beside TensorBoard and the trackers."""

    def __init__(self, callbacks: Iterable[Any] = ()):
        self.callbacks = list(callbacks)
        for cb in self.callbacks:
            if not any(callable(getattr(cb, hook, None)) for hook in HOOKS):
                raise TypeError(f"callback {cb!r} has none of {', '.join(HOOKS)}")
        self._stop = threading.Event()
        self.reason: Optional[str] = None
        self.last_summary: dict[str, Summary] = {}

    @property
    def stop_requested(self) -> bool:
        return self._stop.is_set()

    def request_stop(self, reason: str) -> None:
        if not self._stop.is_set():
            self.reason = reason
            logger.info("Stopping the run: %s", reason)
            self._stop.set()

    def _call(self, hook: str, *args: Any) -> None:
        for cb in self.callbacks:
            fn = getattr(cb, hook, None)
            if fn is None:
                continue
            try:
                result = fn(*args)
            except StopTraining as stop:
                self.request_stop(f"{type(cb).__name__}.{hook} raised StopTraining" + (f": {stop}" if str(stop) else ""))
                continue
            if result is False:
                self.request_stop(f"{type(cb).__name__}.{hook} returned False")

    def start(self, run: Any) -> None:
        self._call("on_start", run)

    def phase(self, name: str) -> None:
        self._call("on_phase", name)

    def episode(self, behavior: str, episode: EpisodeStat) -> None:
        self._call("on_episode", behavior, episode)

    def checkpoint(self, path: str) -> None:
        self._call("on_checkpoint", path)

    # the stats-writer side (ml_arl.results.summary_writers.StatsWriter)
    def write_stats(self, category: str, values: dict[str, StatsSummary], step: int) -> None:
        summary = Summary(category, step, {k: float(v.mean) for k, v in values.items()})
        self.last_summary[category] = summary
        self._call("on_summary", summary)

    def close(self) -> None:
        pass


class StopOnReward(Callback):
    """Stop once the mean environment return of ``behavior``'s last ``window`` episodes reaches
    ``threshold`` (episodes cut by a time limit count, as they do in TensorBoard)."""

    def __init__(self, behavior: str, threshold: float, window: int = 20):
        if window < 1:
            raise ValueError("StopOnReward: window must be at least 1")
        self.behavior, self.threshold, self.window = behavior, float(threshold), int(window)
        self.returns: deque[float] = deque(maxlen=self.window)
        self.episodes = 0  # of the behavior, seen so far
        self.reached_at: Optional[int] = None  # episodes seen when it stopped the run

    @property
    def mean(self) -> Optional[float]:
        return sum(self.returns) / len(self.returns) if self.returns else None

    def on_episode(self, behavior: str, episode: EpisodeStat) -> Optional[bool]:
        if behavior != self.behavior or self.reached_at is not None:
            return None
        self.returns.append(float(episode.reward))
        self.episodes += 1
        mean = self.mean
        if len(self.returns) == self.window and mean is not None and mean >= self.threshold:
            self.reached_at = self.episodes
            raise StopTraining(f"{self.behavior}: mean return {mean:.2f} of the last {self.window} episodes "
                               f">= {self.threshold:g}")
        return None


class CheckpointEvery(Callback):
    """Save a checkpoint of every learning behavior each ``steps`` trainer steps (checked at each
    summary, so a multiple of ``summary_freq`` is exact), on top of ``checkpoint_interval``."""

    def __init__(self, steps: int):
        if steps < 1:
            raise ValueError("CheckpointEvery: steps must be at least 1")
        self.steps = int(steps)
        self.run: Optional[Any] = None
        self._next: dict[str, int] = {}
        self.saved: list[str] = []

    def on_start(self, run: Any) -> None:
        self.run = run

    def on_summary(self, summary: Summary) -> None:
        due = self._next.setdefault(summary.behavior, self.steps)
        if summary.step < due or self.run is None:
            return
        self._next[summary.behavior] = (summary.step // self.steps + 1) * self.steps
        path = self.run.save_checkpoint(summary.behavior)  # on_summary runs in the trainer's own thread
        if path is not None:
            self.saved.append(path)
