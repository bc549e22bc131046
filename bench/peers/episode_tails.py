"""Two sides' finished runs scored over several tails of their episodes: for each fraction, each seed's
mean return over its last fraction of episodes, and the seeds' mean and IQM with 95% intervals
(``ml_arl.study.bootstrap``, as arl-study and ``bench/common/compare_seeds.py`` report them).

A run folder is read as either side writes it: arl-learn's ``results.sqlite`` (``bench/learning/mujoco.py``)
or the ``episodes-w*.csv`` files of ``bench/peers/mlagents_gym.py`` (ML-Agents' side). The last 10% is the
score both benches print; longer tails say how much of a difference is the noise of a few episodes.

    python bench/peers/episode_tails.py --a "ML-Agents 1.1.0" /tmp/mlsac/Pendulum-sac-s{1,2,3,4,5} \\
        --b arl-learn /tmp/oursac/Pendulum-sac-s{1,2,3,4,5} --tails 0.1 0.3 0.5
"""

from __future__ import annotations

import argparse
import csv
import glob
import sqlite3
import statistics
import sys
from pathlib import Path

if Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:  # run as a script:
    sys.path[0] = str(Path(__file__).resolve().parents[2])  # import bench.* from the repository root, not from this folder

from bench.common.compare_seeds import interval  # noqa: E402
from ml_arl.study.bootstrap import seed_statistics  # noqa: E402


def run_returns(run_dir: Path) -> list[float]:
    """Every finished episode's return, in the order the episodes ended."""
    if (run_dir / "results.sqlite").is_file():
        with sqlite3.connect(run_dir / "results.sqlite") as db:
            return [row[0] for row in db.execute("SELECT env_reward FROM episodes ORDER BY id")]
    rows: list[tuple[float, float]] = []
    for path in sorted(glob.glob(str(run_dir / "episodes-w*.csv"))):
        with open(path, newline="") as f:
            rows += [(float(r["wall_time"]), float(r["return"])) for r in csv.DictReader(f)]
    if not rows:
        raise SystemExit(f"{run_dir}: neither results.sqlite nor episodes-w*.csv (a run folder of bench/learning/mujoco.py or bench/peers/mlagents_gym.py)")
    return [ret for _, ret in sorted(rows)]


def tail_mean(returns: list[float], fraction: float) -> float:
    """The mean of the last ``fraction`` of the episodes, their number rounded down as the benches'
    own scores take it (``len // 10`` for the last 10%): at least one."""
    return statistics.fmean(returns[-max(1, int(len(returns) * fraction + 1e-9)):])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--a", nargs="+", required=True, metavar=("NAME", "RUN_DIR"), help="name, then one run folder per seed")
    p.add_argument("--b", nargs="+", required=True, metavar=("NAME", "RUN_DIR"))
    p.add_argument("--tails", nargs="+", type=float, default=[0.1, 0.3, 0.5], help="fractions of the episodes (default 0.1 0.3 0.5)")
    args = p.parse_args(argv)
    sides = [(side[0], [run_returns(Path(d)) for d in side[1:]]) for side in (args.a, args.b)]
    print("| last | side | per seed | mean [95% CI] | IQM [95% CI] |")
    print("|---|---|---|---|---|")
    for fraction in args.tails:
        for name, runs in sides:
            scores = [tail_mean(r, fraction) for r in runs]
            s = seed_statistics(scores)
            print(f"| {fraction:.0%} | {name} | {' / '.join(f'{v:,.0f}' for v in scores)} | {interval(s['mean'])} | {interval(s['iqm'])} |")


if __name__ == "__main__":
    main()
