"""A run's metric: one TensorBoard tag of one behavior, read from the run's event files (or its
episodes from the results store: ``episodes/env_reward``, ``episodes/objective``), and reduced to
one number (last, max, min, the mean of all, or the mean of the last K summaries or episodes).

``ScalarReader`` reads a run folder's event files as they grow (each file's reader keeps its place,
so a read costs what was written since the last one); a resumed run's new event file adds the
steps after the resume.
"""

from __future__ import annotations

import glob
import math
import os
from typing import Any, Optional

from ml_arl.study.settings import MetricSettings

EVENT_GLOB = "events.out.tfevents.*"
# the run's episodes in its results store (results.sqlite or a PostgreSQL store), one point per episode: for phases
# that write no summaries (a short test phase) and for palaestrAI's view of a run
EPISODE_TAGS = ("episodes/env_reward", "episodes/objective")


class ScalarReader:
    """``tag`` of ``behavior`` (None: the run's only behavior) in ``run_dir``, or with phases in its
    folder ``phase``."""

    def __init__(self, run_dir: str, tag: str, behavior: Optional[str], phase: Optional[str] = None):
        self.root = run_dir
        self.phase = phase
        self.run_dir = os.path.join(run_dir, phase) if phase else run_dir
        self.tag = tag
        self.behavior = behavior
        self._readers: dict[str, Any] = {}  # event file -> its EventAccumulator

    def _folder(self) -> Optional[str]:
        if self.behavior is not None:
            return os.path.join(self.run_dir, self.behavior)
        folders = sorted(os.path.dirname(p) for p in glob.glob(os.path.join(self.run_dir, "*", EVENT_GLOB)))
        return folders[0] if folders else None  # the runs' only behavior

    def _episodes(self) -> list[tuple[int, float]]:
        from ml_arl.core.exceptions import ArlError
        from ml_arl.results.run_store import store_of

        store = store_of(self.root)  # results.sqlite, or the run's rows in the server its configuration.yaml names
        if not store.exists:
            return []
        try:
            results = store.read()
        except ArlError:  # not written yet
            return []
        field = self.tag.split("/", 1)[1]
        values: list[float] = []
        for series in results.series:
            if (self.behavior is None or series.behavior == self.behavior) and (self.phase is None or series.phase == self.phase):
                values += getattr(series, field)
        return list(enumerate(values))

    def tags(self) -> list[str]:
        """The scalar tags read so far (for a message when ``tag`` is not among them)."""
        found: set[str] = set()
        for reader in self._readers.values():
            found.update(reader.Tags().get("scalars", []))
        return sorted(found)

    def read(self) -> list[tuple[int, float]]:
        """(step, value) of every summary of the tag so far, by step (a step written twice, by a
        run and by its resumption: the later value); for an ``episodes/`` tag, (episode, value)."""
        if self.tag in EPISODE_TAGS:
            return self._episodes()
        from tensorboard.backend.event_processing.event_accumulator import SCALARS, EventAccumulator

        folder = self._folder()
        if folder is None:
            return []
        by_step: dict[int, float] = {}
        for path in sorted(glob.glob(os.path.join(folder, EVENT_GLOB)), key=os.path.getmtime):
            reader = self._readers.get(path)
            if reader is None:
                reader = self._readers[path] = EventAccumulator(path, size_guidance={SCALARS: 0})
            try:
                reader.Reload()
            except (OSError, ValueError):  # a torn last record: what came before stays readable
                pass
            if self.tag in reader.Tags().get("scalars", []):
                for event in reader.Scalars(self.tag):
                    by_step[int(event.step)] = float(event.value)
        return sorted(by_step.items())


def reduce(points: list[tuple[int, float]], metric: MetricSettings) -> Optional[float]:
    """One number from a run's summaries; None when there are none (or none finite)."""
    values = [v for _, v in points if math.isfinite(v)]
    if not values:
        return None
    k = metric.last_k()
    if k is not None:
        tail = values[-k:]
        return sum(tail) / len(tail)
    if metric.reduce == "max":
        return max(values)
    if metric.reduce == "min":
        return min(values)
    if metric.reduce == "mean":  # the area under the curve, per summary: rewards learning sooner
        return sum(values) / len(values)
    return values[-1]
