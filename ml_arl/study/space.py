"""The search space: each searched config key's value drawn through an Optuna trial, and a
trial's values written into the base config.

``uniform``, ``log_uniform``, ``int_uniform`` and ``choice`` are Optuna's own distributions.
``gaussian`` and ``multirangeuniform`` have none: Optuna searches a position in [0, 1] (gaussian:
the quantile, turned into mean + st_dev * the normal's inverse CDF, so a random search draws the
normal) or along the intervals laid end to end (multirangeuniform: uniform over their union, as
Unity draws it). The value a run gets is kept in the trial's ``values`` attribute.
"""

from __future__ import annotations

import copy
import difflib
import statistics
from typing import Any

import optuna

from ml_arl.settings.values import flat_items
from ml_arl.study.settings import (
    ChoiceSearch,
    GaussianSearch,
    IntUniformSearch,
    LogUniformSearch,
    MultiRangeUniformSearch,
    UniformSearch,
)

VALUES_ATTR = "values"  # trial user attribute: {config key: the value its runs got}
_QUANTILE_EDGE = 1e-6  # a gaussian's quantiles stay inside (0, 1): its inverse CDF is finite there


def suggest(trial: optuna.Trial, key: str, sampler: Any) -> Any:
    """The value of ``key`` for this trial."""
    p = sampler.sampler_parameters
    if isinstance(sampler, UniformSearch):
        return trial.suggest_float(key, p.min_value, p.max_value)
    if isinstance(sampler, LogUniformSearch):
        return trial.suggest_float(key, p.min_value, p.max_value, log=True)
    if isinstance(sampler, IntUniformSearch):
        return trial.suggest_int(key, p.min_value, p.max_value, step=p.step)
    if isinstance(sampler, ChoiceSearch):
        return trial.suggest_categorical(key, p.values)
    if isinstance(sampler, GaussianSearch):
        q = trial.suggest_float(f"{key} (quantile)", _QUANTILE_EDGE, 1.0 - _QUANTILE_EDGE)
        return statistics.NormalDist(p.mean, p.st_dev).inv_cdf(q)
    if isinstance(sampler, MultiRangeUniformSearch):
        widths = [high - low for low, high in p.intervals]
        position = trial.suggest_float(f"{key} (position)", 0.0, max(sum(widths), 1e-12))
        return along(p.intervals, position)
    raise TypeError(f"unknown search sampler {type(sampler).__name__}")


def along(intervals: list[list[float]], position: float) -> float:
    """The point ``position`` along the intervals laid end to end (the last one's end past them)."""
    for low, high in intervals:
        if position <= high - low:
            return float(low + position)
        position -= high - low
    return float(intervals[-1][1])


def grid_values(sampler: Any) -> list[Any]:
    """Every value of an int_uniform or choice sampler (what the grid sampler walks)."""
    p = sampler.sampler_parameters
    if isinstance(sampler, IntUniformSearch):
        return list(range(p.min_value, p.max_value + 1, p.step))
    if isinstance(sampler, ChoiceSearch):
        return list(p.values)
    raise TypeError(f"{sampler.sampler_type} has no finite set of values")


def ends(sampler: Any) -> list[Any]:
    """Values to check a config with before anything runs: the ends of a range, each choice."""
    p = sampler.sampler_parameters
    if isinstance(sampler, (UniformSearch, LogUniformSearch, IntUniformSearch)):
        return [p.min_value, p.max_value]
    if isinstance(sampler, ChoiceSearch):
        return list(p.values)
    if isinstance(sampler, GaussianSearch):
        return [p.mean]
    return [p.intervals[0][0], p.intervals[-1][1]]


def set_key(config: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """A copy of ``config`` with the dotted ``key`` set to ``value`` (mappings made on the way). A
    number indexes a list: ``phases.1.max_steps`` is the second phase's max_steps."""
    out = copy.deepcopy(config)
    node: Any = out
    parts = key.split(".")
    for part in parts[:-1]:
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
            continue
        child = node.get(part) if isinstance(node, dict) else None
        if not isinstance(child, (dict, list)):
            child = node[part] = {}
        node = child
    last = parts[-1]
    if isinstance(node, list) and last.isdigit() and int(last) < len(node):
        node[int(last)] = value
    else:
        node[last] = value
    return out


def with_values(config: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    for key, value in values.items():
        config = set_key(config, key, value)
    return config


def dotted_keys(tree: Any) -> list[str]:
    """Every leaf of nested mappings and lists as a dotted key (list items by their index)."""
    return [key for key, _ in flat_items(tree)]


def closest_key(key: str, valid: list[str]) -> str:
    """'; did you mean X?' for the valid key closest to ``key`` (or '' when none is close)."""
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""
