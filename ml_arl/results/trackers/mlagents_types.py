"""ML-Agents' summary types for writers made for ML-Agents: its own (``mlagents.trainers.stats``)
when the ``mlagents`` package is installed, else look-alikes with the same names, fields and values.

Without ML-Agents installed, ``provide_mlagents_names`` makes the names such a writer imports
importable while plugins load: ``mlagents.trainers.stats`` (StatsWriter, StatsSummary,
StatsAggregationMethod, StatsPropertyType) and ``mlagents.trainers.settings`` (RunOptions, ml_arl's).
With ML-Agents installed nothing is added: its own modules serve."""

from __future__ import annotations

import abc
import importlib.util
import sys
import types
from enum import Enum
from typing import Any, NamedTuple

import numpy as np

from ml_arl.results.summary_writers import StatsSummary


class StatsAggregationMethod(Enum):  # as mlagents.trainers.stats.StatsAggregationMethod
    AVERAGE = 0
    MOST_RECENT = 1
    SUM = 2
    HISTOGRAM = 3


class StatsPropertyType(Enum):  # as mlagents.trainers.stats.StatsPropertyType
    HYPERPARAMETERS = "hyperparameters"
    SELF_PLAY = "selfplay"


class MLAgentsStatsSummary(NamedTuple):  # as mlagents.trainers.stats.StatsSummary
    full_dist: list[float]
    aggregation_method: Any

    @property
    def aggregated_value(self) -> float:
        if self.aggregation_method == _types()[1].SUM:
            return self.sum
        if self.aggregation_method == _types()[1].MOST_RECENT:
            return self.full_dist[-1]
        return self.mean

    @property
    def mean(self) -> float:
        return float(np.mean(self.full_dist)) if self.full_dist else 0.0

    @property
    def std(self) -> float:
        return float(np.std(self.full_dist)) if self.full_dist else 0.0

    @property
    def num(self) -> int:
        return len(self.full_dist)

    @property
    def sum(self) -> float:
        return float(np.sum(self.full_dist))


class StatsWriter(abc.ABC):  # as mlagents.trainers.stats.StatsWriter
    def on_add_stat(  # noqa: B027 - optional, as in ML-Agents
        self, category: str, key: str, value: float, aggregation: Any = StatsAggregationMethod.AVERAGE
    ) -> None:
        pass

    @abc.abstractmethod
    def write_stats(self, category: str, values: dict[str, Any], step: int) -> None:
        pass

    def add_property(self, category: str, property_type: Any, value: Any) -> None:  # noqa: B027 - optional, as in ML-Agents
        pass


def provide_mlagents_names() -> bool:
    """Make ``mlagents.trainers.stats`` and ``mlagents.trainers.settings`` importable (look-alikes)
    when ML-Agents is not installed; True when they were added."""
    if "mlagents.trainers.stats" in sys.modules or importlib.util.find_spec("mlagents") is not None:
        return False
    from ml_arl.settings import RunOptions

    stats = types.ModuleType("mlagents.trainers.stats")
    stats.__dict__.update(StatsWriter=StatsWriter, StatsSummary=MLAgentsStatsSummary,
                          StatsAggregationMethod=StatsAggregationMethod, StatsPropertyType=StatsPropertyType)
    settings = types.ModuleType("mlagents.trainers.settings")
    settings.__dict__.update(RunOptions=RunOptions)
    trainers = types.ModuleType("mlagents.trainers")
    trainers.__dict__.update(stats=stats, settings=settings)
    package = types.ModuleType("mlagents")
    package.__path__ = []  # a package: its submodules are the ones above
    package.__dict__.update(trainers=trainers)
    trainers.__path__ = []  # type: ignore[attr-defined]
    sys.modules.update({"mlagents": package, "mlagents.trainers": trainers, "mlagents.trainers.stats": stats,
                        "mlagents.trainers.settings": settings})
    return True


def _types() -> tuple[Any, Any, Any]:
    """(StatsSummary, StatsAggregationMethod, StatsPropertyType): ML-Agents' or the look-alikes."""
    try:
        from mlagents.trainers.stats import StatsAggregationMethod as Method
        from mlagents.trainers.stats import StatsPropertyType as Property
        from mlagents.trainers.stats import StatsSummary as Summary

        return Summary, Method, Property
    except ImportError:
        return MLAgentsStatsSummary, StatsAggregationMethod, StatsPropertyType


def summary(value: StatsSummary) -> Any:
    """Our summary as ML-Agents' StatsSummary. An average keeps its mean and count (``n`` copies of
    the mean), a sum its total, a histogram every value."""
    summary_type, method, _ = _types()
    if value.aggregation == "histogram" and value.histogram is not None:
        return summary_type(list(map(float, value.histogram)), method.HISTOGRAM)
    if value.aggregation == "sum":
        return summary_type([value.mean], method.SUM)
    return summary_type([value.mean] * max(value.n, 1), method.AVERAGE)


def property_type(value: Any) -> Any:
    _, _, prop = _types()
    name = getattr(value, "name", str(value)).upper()
    return getattr(prop, name, value)
