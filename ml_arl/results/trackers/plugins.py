"""Stats writers from installed packages' entry points, as ML-Agents loads them.

ML-Agents (mlagents/plugins/stats_writer.py) calls every entry point of the group
``mlagents.stats_writer`` with the run options and adds the writers it returns. ml_arl does the same
for that group and for its own, ``ml_arl.stats_writer``. What a writer made for ML-Agents gets is
what it gets there: ``write_stats(category, values, step)`` with ``values[tag]`` a StatsSummary
(``full_dist``, ``aggregation_method``, ``mean``, ``std``, ``num``, ``sum``), and
``add_property(category, StatsPropertyType.HYPERPARAMETERS, settings)`` once per behavior. The
summary and enum types are ML-Agents' own when the ``mlagents`` package is installed, else
look-alikes with the same names and values (``ml_arl.results.trackers.mlagents_types``).
"""

from __future__ import annotations

import logging
from importlib.metadata import entry_points
from typing import Any

from ml_arl.core.exceptions import TrackerError
from ml_arl.core.one_line import squeeze
from ml_arl.results.summary_writers import StatsSummary
from ml_arl.results.trackers.mlagents_types import property_type, provide_mlagents_names, summary
from ml_arl.settings import RunOptions

logger = logging.getLogger(__name__)

GROUPS = ("ml_arl.stats_writer", "mlagents.stats_writer")


class MLAgentsWriter:
    """A writer made for ML-Agents, given summaries in ML-Agents' types."""

    def __init__(self, writer: Any):
        self.writer = writer
        self._properties_sent: set[str] = set()

    def write_stats(self, category: str, values: dict[str, StatsSummary], step: int) -> None:
        self.writer.write_stats(category, {k: summary(v) for k, v in values.items()}, step)

    def add_property(self, category: str, kind: Any, value: Any) -> None:
        if hasattr(self.writer, "add_property"):
            self.writer.add_property(category, property_type(kind), value)

    def close(self) -> None:
        if hasattr(self.writer, "close"):
            self.writer.close()


def plugin_writers(options: RunOptions) -> list[tuple[str, Any]]:
    """(entry point name, writer) for every writer the installed packages declare."""
    writers: list[tuple[str, Any]] = []
    for group in GROUPS:
        points = list(entry_points(group=group))
        if points and group == "mlagents.stats_writer":
            provide_mlagents_names()
        for point in points:
            where = f"stats writer plugin {point.name!r} ({point.value}, group {group})"
            try:
                factory = point.load()
                made = list(factory(options))
            except Exception as err:  # noqa: BLE001 - a broken plugin is a one-line error naming it
                raise TrackerError(f"{where} failed: {type(err).__name__}: {squeeze(str(err))}") from err
            for writer in made:
                if not callable(getattr(writer, "write_stats", None)):
                    raise TrackerError(f"{where} returned {type(writer).__name__}, which has no write_stats(category, values, step)")
                adapted = MLAgentsWriter(writer) if group == "mlagents.stats_writer" else writer
                writers.append((f"{point.name} ({type(writer).__name__})", adapted))
            logger.info("Stats writer plugin %s: %d writer(s)", point.name, len(made))
    return writers
