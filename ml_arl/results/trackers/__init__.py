"""Experiment trackers besides TensorBoard: stats writers that get every summary a run writes.

Built in: MLflow (``--mlflow-uri``) and Weights & Biases (``--wandb-project``); from installed
packages: the stats writers their Python entry points declare, in ml_arl's group
``ml_arl.stats_writer`` and in ML-Agents' ``mlagents.stats_writer`` (a writer made for
ML-Agents works unchanged: ml_arl.results.trackers.plugins).

A tracker that fails while the run goes on (its server gone, a full disk) is logged once and
dropped: the run, its checkpoints and its TensorBoard summaries do not depend on it. A tracker
that cannot start (not installed, its server not answering) is a one-line error before training.
"""

from __future__ import annotations

import logging
from typing import Any

from ml_arl.core.one_line import squeeze
from ml_arl.results.summary_writers import StatsSummary, StatsWriter
from ml_arl.settings import RunOptions

logger = logging.getLogger(__name__)


class GuardedWriter:
    """A tracker's writer whose failures end its part in the run, not the run."""

    def __init__(self, name: str, writer: Any):
        self.name = name
        self.writer = writer
        self.failed = False

    def _guard(self, what: str, call: Any, *args: Any) -> None:
        if self.failed:
            return
        try:
            call(*args)
        except Exception as err:  # noqa: BLE001 - a tracker's failure must not stop the training
            self.failed = True
            logger.warning("%s: %s failed (%s: %s); it gets nothing more from this run",
                           self.name, what, type(err).__name__, squeeze(str(err)))

    def write_stats(self, category: str, values: dict[str, StatsSummary], step: int) -> None:
        self._guard("writing summaries", self.writer.write_stats, category, values, step)

    def add_property(self, category: str, property_type: Any, value: Any) -> None:
        if hasattr(self.writer, "add_property"):
            self._guard("adding a property", self.writer.add_property, category, property_type, value)

    def close(self) -> None:
        if hasattr(self.writer, "close"):
            self._guard("closing", self.writer.close)

    def abort(self) -> None:
        """The run never began (another tracker could not start): the tracker's run ends as failed."""
        if hasattr(self.writer, "abort"):
            self._guard("ending", self.writer.abort)


def tracker_writers(options: RunOptions) -> list[StatsWriter]:
    """The run's trackers, started (their errors while starting are ``TrackerError``s)."""
    settings = options.tracker_settings
    writers: list[GuardedWriter] = []
    try:
        if settings.mlflow_uri is not None:
            from ml_arl.results.trackers.mlflow_writer import MLflowWriter

            writers.append(GuardedWriter("MLflow", MLflowWriter(options)))
        if settings.wandb_project is not None:
            from ml_arl.results.trackers.wandb_writer import WandbWriter

            writers.append(GuardedWriter("W&B", WandbWriter(options)))
        if settings.plugins:
            from ml_arl.results.trackers.plugins import plugin_writers

            writers += [GuardedWriter(name, w) for name, w in plugin_writers(options)]
    except BaseException:
        for writer in writers:  # no run left RUNNING in MLflow for a run that never began
            writer.abort()
        raise
    return list(writers)
