"""The resilience matrix of arl-report: every pairing of a matrix phase (ml_arl.settings.matrix),
the first behavior's mean environment return in each, with a 95 % interval, as a table and a
heat map.

With several runs of the same config (seeds), the interval is over seeds and episodes: a
two-level bootstrap that draws runs, then episodes within each drawn run (2,000 draws, fixed
generator). With one run it is over episodes. A matrix with best responses has a ``best_response`` column
(and row), and the lines of each player's exploitability under them.

With several runs and a ``learned`` player, the lines after the table pair the runs: in each column, per
run, the learned player's mean return minus each other player's, then the mean of those differences and
its 95 % t-interval over the runs. A run's cells face the same seed (and, where the environment replays
its episodes per seed, the same episodes), so the pairing removes what the runs share; the cells' own
intervals above are not paired and can overlap where every run ranks the players alike.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import yaml

from ml_arl.results.run_results import RunResults
from ml_arl.settings.matrix import BEST_RESPONSE

DRAWS = 2000
REFERENCE = "learned"  # the player the paired differences start from


@dataclass
class Matrix:
    group: str
    behavior: str  # whose return the cells hold (the first behavior of the matrix)
    rows: list[str]  # its players
    columns: list[str]  # the other behaviors' players ("a / b" with more than two behaviors)
    cells: dict[tuple[str, str], list[list[float]]] = field(default_factory=dict)  # (row, column) -> per run, returns


def matrix_phases(run_folder: str) -> list[dict[str, Any]]:
    """The pairing phases of the run's configuration.yaml (each with group and cell)."""
    path = os.path.join(run_folder, "configuration.yaml")
    try:
        with open(path, encoding="utf-8") as f:
            config = yaml.safe_load(f) or {}
    except (OSError, yaml.YAMLError):
        return []
    return [p for p in config.get("phases") or [] if isinstance(p, dict) and p.get("group") and p.get("cell")]


def build_matrices(runs: list[tuple[str, RunResults]]) -> list[Matrix]:
    matrices: dict[str, Matrix] = {}
    for index, (folder, results) in enumerate(runs):
        returns = {(s.phase, s.behavior): list(s.env_reward) for s in results.series}
        for phase in matrix_phases(folder):
            cell = {str(k): str(v) for k, v in phase["cell"].items()}
            behaviors = list(cell)
            row = cell[behaviors[0]]
            column = " / ".join(cell[b] for b in behaviors[1:]) or "-"
            m = matrices.setdefault(phase["group"], Matrix(phase["group"], behaviors[0], [], []))
            if row not in m.rows:
                m.rows.append(row)
            if column not in m.columns:
                m.columns.append(column)
            per_run = m.cells.setdefault((row, column), [[] for _ in runs])
            per_run[index] = returns.get((phase["name"], behaviors[0]), [])
    return list(matrices.values())


def interval(per_run: list[list[float]], seed: int = 0) -> Optional[tuple[float, float, float]]:
    """(mean, low, high): the mean return over the runs' episodes and its 95 % bootstrap interval."""
    runs = [np.asarray(r, np.float64) for r in per_run if len(r)]
    if not runs:
        return None
    mean = float(np.mean([r.mean() for r in runs]))
    rng = np.random.default_rng(seed)
    draws = np.empty(DRAWS)
    for i in range(DRAWS):
        chosen = rng.integers(0, len(runs), len(runs)) if len(runs) > 1 else [0]
        draws[i] = np.mean([runs[j][rng.integers(0, len(runs[j]), len(runs[j]))].mean() for j in chosen])
    low, high = np.percentile(draws, [2.5, 97.5])
    return mean, float(low), float(high)


def format_matrix(m: Matrix, n_runs: int) -> str:
    over = f"{n_runs} runs and their episodes" if n_runs > 1 else "episodes"
    head = [f"{m.behavior} \\ others"] + m.columns
    rows = []
    for row in m.rows:
        cells = [row]
        for column in m.columns:
            est = interval(m.cells.get((row, column), []))
            cells.append("-" if est is None else f"{est[0]:.2f} [{est[1]:.2f}, {est[2]:.2f}]")
        rows.append(cells)
    widths = [max(len(str(r[i])) for r in [head] + rows) for i in range(len(head))]
    lines = [f"matrix {m.group}: {m.behavior}'s mean return, 95 % interval over {over}",
             "  ".join(str(c).ljust(w) for c, w in zip(head, widths))]
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)) for r in rows]
    lines += exploitability(m)
    lines += paired_differences(m)
    return "\n".join(lines)


def paired(first: list[list[float]], second: list[list[float]]) -> Optional[tuple[float, float, float, int]]:
    """(mean, low, high, runs): per run, the mean of ``first``'s returns minus the mean of ``second``'s, then
    their mean and 95 % t-interval over the runs that have both; None with fewer than 2 such runs."""
    diffs = [float(np.mean(a) - np.mean(b)) for a, b in zip(first, second) if len(a) and len(b)]
    if len(diffs) < 2:
        return None
    from scipy.stats import t

    mean = float(np.mean(diffs))
    half = float(t.ppf(0.975, len(diffs) - 1) * np.std(diffs, ddof=1) / np.sqrt(len(diffs)))
    return mean, mean - half, mean + half, len(diffs)


def paired_differences(m: Matrix) -> list[str]:
    """The learned player's return minus each other player's, paired by run (the module's docstring)."""
    if REFERENCE not in m.rows:
        return []
    lines = []
    for row in m.rows:
        if row in (REFERENCE, BEST_RESPONSE):
            continue
        shown, runs = [], set()
        for column in m.columns:
            est = paired(m.cells.get((REFERENCE, column), []), m.cells.get((row, column), []))
            if est is not None:
                shown.append(f"against {column} {est[0]:+.2f} [{est[1]:+.2f}, {est[2]:+.2f}]")
                runs.add(est[3])
        if shown:
            over = "-".join(str(n) for n in sorted(runs)[:: max(len(runs) - 1, 1)])
            lines.append(f"paired over {over} runs, {REFERENCE} minus {row} (95 % t-interval): " + ", ".join(shown))
    return lines


def exploitability(m: Matrix) -> list[str]:
    """The best responses' lines (ml_arl.settings.matrix): each player's return under an opponent
    trained against it alone, with the same budget for every player."""
    def means(pairs: list[tuple[str, tuple[str, str]]]) -> str:
        shown = []
        for name, key in pairs:
            est = interval(m.cells.get(key, []))
            shown.append(f"{name} {'-' if est is None else f'{est[0]:.2f}'}")
        return ", ".join(shown)

    lines = []
    if BEST_RESPONSE in m.columns:
        pairs = [(row, (row, BEST_RESPONSE)) for row in m.rows if row != BEST_RESPONSE]
        lines.append(f"exploitability: {m.behavior}'s return under a best response to it: {means(pairs)}")
    if BEST_RESPONSE in m.rows:
        pairs = [(column, (BEST_RESPONSE, column)) for column in m.columns if column != BEST_RESPONSE]
        lines.append(f"exploitability of the others: {m.behavior}'s return as a best response to each: {means(pairs)}")
    return lines


def plot_matrix(m: Matrix, output: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ml_arl.core.atomic_files import atomic_write

    values = np.full((len(m.rows), len(m.columns)), np.nan)
    for i, row in enumerate(m.rows):
        for j, column in enumerate(m.columns):
            est = interval(m.cells.get((row, column), []))
            if est is not None:
                values[i, j] = est[0]
    figure, ax = plt.subplots(figsize=(1.8 + 1.6 * len(m.columns), 1.2 + 0.8 * len(m.rows)))
    image = ax.imshow(values, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(m.columns)), m.columns, rotation=20, ha="right")
    ax.set_yticks(range(len(m.rows)), m.rows)
    ax.set_xlabel("the others' players")
    ax.set_ylabel(f"{m.behavior}'s player")
    ax.set_title(f"{m.group}: {m.behavior}'s mean return")
    for i in range(len(m.rows)):
        for j in range(len(m.columns)):
            if not np.isnan(values[i, j]):
                ax.text(j, i, f"{values[i, j]:.2f}", ha="center", va="center", color="white", fontsize=9)
    figure.colorbar(image, ax=ax)
    figure.tight_layout()
    atomic_write(output, lambda f: figure.savefig(f, format="png", dpi=110))
    plt.close(figure)
