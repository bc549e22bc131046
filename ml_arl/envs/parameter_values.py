"""Environment parameters as a Python environment receives them.

A Python environment (``builtin:``, ``gymnasium:`` or a ``package.module:factory`` returning a
``BaseEnv``) takes environment parameters by defining ``set_environment_parameters(params)``.
``params`` maps each name to its value in the current lesson, as plain data:

- a number (``0.5``), or
- a sampler ``{"sampler_type": "uniform", "sampler_parameters": {"min_value": 0.0,
  "max_value": 1.0, "seed": 1234}}`` (also ``constant``, ``gaussian``, ``multirangeuniform``),
  which the environment draws from itself, e.g. at every episode start, with ``draw``.

When a phase begins (the run's start included) and when a lesson with ``require_reset`` begins,
the environment is reset right after the call; a lesson without it calls the method between two
steps, and the environment applies the values as it sees fit (the built-in ones from their next
episode on). Names the run does not set keep their values. An environment without the method
is warned about and gets nothing. Unity builds get the same values through the
environment-parameters side channel instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def draw(value: Any, rng: np.random.Generator) -> float:
    """A float from a parameter's value: the number itself, or a draw from the sampler (as Unity
    draws: uniform on [min_value, max_value]; normal(mean, st_dev); multirangeuniform: an
    interval picked in proportion to its length, then uniform in it). ``rng`` draws; the
    sampler's seed is for Unity builds."""
    if not isinstance(value, dict):
        return float(value)
    kind, p = value["sampler_type"], value["sampler_parameters"]
    if kind == "constant":
        return float(p["value"])
    if kind == "uniform":
        return float(rng.uniform(p["min_value"], p["max_value"]))
    if kind == "gaussian":
        return float(rng.normal(p["mean"], p["st_dev"]))
    if kind == "multirangeuniform":
        intervals = np.asarray(p["intervals"], np.float64).reshape(-1, 2)
        widths = intervals[:, 1] - intervals[:, 0]
        weights = widths / widths.sum() if widths.sum() > 0 else np.full(len(widths), 1.0 / len(widths))
        low, high = intervals[rng.choice(len(intervals), p=weights)]
        return float(rng.uniform(low, high))
    raise ValueError(f"unknown sampler_type {kind!r}; expected constant, uniform, gaussian or multirangeuniform")


def is_value(value: Any) -> bool:
    """A number or a sampler mapping (what ``draw`` takes), not a boolean."""
    if isinstance(value, dict):
        return isinstance(value.get("sampler_type"), str) and isinstance(value.get("sampler_parameters"), dict)
    return isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool)
