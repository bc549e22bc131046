"""Statistics over seeds, as rliable reports them (Agarwal et al., 2021, "Deep RL at the Edge of
the Statistical Precipice"): the mean and the interquartile mean (the mean of the middle 50% of
runs, scipy's ``trim_mean(x, 0.25)``), each with a 95% percentile-bootstrap confidence interval
over the runs (scipy's ``bootstrap``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Optional

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95


def iqm(values: Any, axis: int = -1) -> Any:
    from scipy.stats import trim_mean

    return trim_mean(values, 0.25, axis=axis)


def _mean(values: Any, axis: int = -1) -> Any:
    return np.mean(values, axis=axis)


@dataclass
class Estimate:
    value: float
    low: Optional[float]  # the 95% interval (None with fewer than two runs)
    high: Optional[float]


def estimate(values: list[float], statistic: Callable[..., Any], seed: int = 0) -> Estimate:
    point = float(statistic(np.asarray(values, dtype=np.float64)))
    if len(values) < 2 or len(set(values)) < 2:
        return Estimate(point, point if len(values) >= 2 else None, point if len(values) >= 2 else None)
    from scipy.stats import bootstrap

    result = bootstrap(
        (np.asarray(values, dtype=np.float64),), statistic, n_resamples=BOOTSTRAP_RESAMPLES,
        confidence_level=CONFIDENCE, method="percentile", rng=np.random.default_rng(seed), vectorized=True,
    )
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    return Estimate(point, low if math.isfinite(low) else None, high if math.isfinite(high) else None)


def seed_statistics(values: list[float]) -> dict[str, Any]:
    """The mean and the IQM of per-seed values, each with its 95% bootstrap interval."""
    return {
        "runs": len(values),
        "values": list(values),
        "mean": asdict(estimate(values, _mean)),
        "iqm": asdict(estimate(values, iqm)),
        "confidence": CONFIDENCE,
        "bootstrap_resamples": BOOTSTRAP_RESAMPLES,
    }


def format_estimate(name: str, e: dict[str, Any]) -> str:
    if e["low"] is None:
        return f"{name} {e['value']:.4g}"
    return f"{name} {e['value']:.4g} (95% CI {e['low']:.4g} to {e['high']:.4g})"
