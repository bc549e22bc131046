"""A run's picture (report.png): what arl-report draws and what the MLflow tracker logs as an
artifact when a run ends. matplotlib is imported when a picture is drawn, not before."""

from __future__ import annotations

import os
import tempfile
from typing import Any

from ml_arl.results.run_results import EpisodeSeries, RunResults

PNG_FILENAME = "report.png"


def rolling_mean(values: list[float], window: int) -> Any:
    import numpy as np

    x = np.asarray(values, dtype=float)
    c = np.cumsum(np.insert(x, 0, 0.0))
    n = np.arange(1, len(x) + 1)
    lo = np.maximum(n - window, 0)  # partial windows at the start
    return (c[n] - c[lo]) / (n - lo)


def plot_run(results: RunResults, output: str) -> None:
    """A run's learning curves (objective, env reward, ELO; a line at each phase), one subplot per
    behavior, written atomically to ``output``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    behaviors = results.behaviors
    fig, axes = plt.subplots(len(behaviors), 1, figsize=(10, 3.2 * len(behaviors)), squeeze=False)
    for ax, behavior in zip(axes[:, 0], behaviors):
        parts: list[EpisodeSeries] = [s for s in results.series if s.behavior == behavior]
        objective = [v for s in parts for v in s.objective]
        env_reward = [v for s in parts for v in s.env_reward]
        elo = [float("nan") if e is None else e for s in parts for e in s.elo]
        n = len(objective)
        window = max(1, n // 50)
        x = range(1, n + 1)
        ax.plot(x, rolling_mean(objective, window), "-", color="C0", label="objective")
        ax.plot(x, rolling_mean(env_reward, window), "--", color="C1", label="env reward")
        start = 0
        for s in parts:  # phase boundaries: a line at each phase's first episode
            ax.axvline(start + 0.5, color="grey", lw=0.8, ls=":")
            ax.text(start + 0.5, 0.98, f" {s.phase} ({s.mode})", transform=ax.get_xaxis_transform(),
                    va="top", ha="left", fontsize=8, color="dimgrey")
            start += len(s)
        handles, labels = ax.get_legend_handles_labels()
        if any(e == e for e in elo):  # some ELO is not NaN
            ax2 = ax.twinx()
            ax2.plot(x, elo, ":", color="C2", label="ELO")
            ax2.set_ylabel("ELO")
            h2, l2 = ax2.get_legend_handles_labels()
            handles, labels = handles + h2, labels + l2
        ax.legend(handles, labels, loc="best", fontsize=8)
        ax.set_title(f"{behavior} (rolling mean over {window} episode{'s' if window > 1 else ''})", fontsize=10)
        ax.set_xlabel("episodes")
        ax.set_ylabel("reward")
        ax.set_xlim(0.5, n + 0.5)
    fig.tight_layout()
    folder = os.path.dirname(os.path.abspath(output))
    fd, tmp = tempfile.mkstemp(prefix=".report-", suffix=".png", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            fig.savefig(f, format="png", dpi=100)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the PNG the usual permissions
        os.replace(tmp, output)
    except BaseException:
        os.unlink(tmp)
        raise
    finally:
        plt.close(fig)
