"""A run's metric: one TensorBoard tag of one behavior, read from the run's event files, and
reduced to one number (last, max, min, or the mean of the last K summaries).

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


class ScalarReader:
    def __init__(self, run_dir: str, tag: str, behavior: Optional[str]):
        self.run_dir = run_dir
        self.tag = tag
        self.behavior = behavior
        self._readers: dict[str, Any] = {}  # event file -> its EventAccumulator

    def _folder(self) -> Optional[str]:
        if self.behavior is not None:
            return os.path.join(self.run_dir, self.behavior)
        folders = sorted(os.path.dirname(p) for p in glob.glob(os.path.join(self.run_dir, "*", EVENT_GLOB)))
        return folders[0] if folders else None  # the runs' only behavior

    def read(self) -> list[tuple[int, float]]:
        """(step, value) of every summary of the tag so far, by step (a step written twice, by a
        run and by its resumption: the later value)."""
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
    return values[-1]
