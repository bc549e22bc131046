"""A study's pictures (PNG, matplotlib): the optimisation history and the parameter importances
(Optuna's matplotlib plots; importances by fANOVA) of a search, and, for a study over seeds, every
seed's learning curve with their mean and its 95% bootstrap band. Drawn by arl-study at the end
and by ``arl-report results/<study>`` at any time."""

from __future__ import annotations

import logging
import os
import warnings
from typing import Any

import numpy as np
import optuna
from optuna.trial import TrialState

from ml_arl.core.atomic_files import atomic_write
from ml_arl.study.bootstrap import BOOTSTRAP_RESAMPLES, CONFIDENCE
from ml_arl.study.metric import ScalarReader

logger = logging.getLogger("ml_arl.study")

HISTORY_PNG = "history.png"
IMPORTANCES_PNG = "importances.png"
SEEDS_PNG = "seeds.png"
CURVE_POINTS = 200  # the seeds' curves are compared on this many steps


def _save(figure: Any, path: str) -> None:
    atomic_write(path, lambda f: figure.savefig(f, format="png", dpi=110, bbox_inches="tight"))


def plot_search(folder: str, study: optuna.Study) -> list[str]:
    """history.png, and importances.png once two trials with different values have completed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from optuna.visualization.matplotlib import plot_optimization_history, plot_param_importances

    written = []
    complete = [t for t in study.get_trials(deepcopy=False) if t.state == TrialState.COMPLETE]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Optuna marks its matplotlib plots experimental
        if complete:
            ax = plot_optimization_history(study)
            path = os.path.join(folder, HISTORY_PNG)
            _save(ax.figure, path)
            plt.close("all")
            written.append(path)
        if len(complete) >= 2 and len({repr(t.params) for t in complete}) >= 2 and complete[0].params:
            try:
                ax = plot_param_importances(study)
            except (ValueError, RuntimeError) as err:  # e.g. every trial scored the same
                logger.warning("no parameter importances: %s", err)
            else:
                path = os.path.join(folder, IMPORTANCES_PNG)
                _save(ax.figure, path)
                plt.close("all")
                written.append(path)
    return written


def seed_band(curves: list[tuple[np.ndarray, np.ndarray]], seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(steps, mean, low, high): the curves on a common grid of steps (where every curve has data),
    their mean and its percentile-bootstrap interval over the curves, step by step."""
    start = max(float(s[0]) for s, _ in curves)
    end = min(float(s[-1]) for s, _ in curves)
    grid = np.linspace(start, end, CURVE_POINTS) if end > start else np.array([end])
    values = np.stack([np.interp(grid, s, v) for s, v in curves])  # [runs, points]
    mean = values.mean(axis=0)
    if len(curves) < 2:
        return grid, mean, mean, mean
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(curves), size=(BOOTSTRAP_RESAMPLES, len(curves)))
    means = values[picks].mean(axis=1)  # [resamples, points]
    tail = (1.0 - CONFIDENCE) / 2 * 100
    return grid, mean, np.percentile(means, tail, axis=0), np.percentile(means, 100 - tail, axis=0)


def plot_seeds(folder: str, runs: dict[int, str], tag: str, behavior: str | None, phase: str | None = None) -> list[str]:
    """seeds.png: ``runs`` (seed -> run id) under ``folder``, one faint line each, their mean and band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = {}
    for seed, run_id in runs.items():
        points = ScalarReader(os.path.join(folder, run_id), tag, behavior, phase).read()
        if len(points) >= 1:
            curves[seed] = (np.array([p[0] for p in points], float), np.array([p[1] for p in points], float))
    if not curves:
        return []
    figure, ax = plt.subplots(figsize=(8, 4.5))
    for seed, (steps, values) in curves.items():
        ax.plot(steps, values, linewidth=0.8, alpha=0.45, label=f"seed {seed}")
    grid, mean, low, high = seed_band(list(curves.values()))
    ax.plot(grid, mean, color="black", linewidth=2.0, label=f"mean of {len(curves)}")
    ax.fill_between(grid, low, high, color="gray", alpha=0.3, label=f"{CONFIDENCE:.0%} bootstrap interval")
    ax.set_xlabel("step")
    ax.set_ylabel(tag)
    ax.set_title(f"{os.path.basename(os.path.normpath(folder))}: {len(curves)} seeds")
    ax.legend(fontsize=8)
    path = os.path.join(folder, SEEDS_PNG)
    _save(figure, path)
    plt.close(figure)
    return [path]
