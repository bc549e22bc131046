"""Two sides' training scores with the luck of the episodes' starts taken out: each training episode
is played again from its own start by one fixed reference policy, and a run's score over a tail of its
episodes is set against the reference's score over the same starts.

On a task where the start decides much of the return (Pendulum: a solved policy scores about -1 from
upright, -120 from most starts and -350 from hanging down), the last ten episodes of a run say more
about which starts it drew than about how well it acts. The starts can be drawn again: a gymnasium
environment seeded once and reset after each episode draws the same starts in the same order, as long
as stepping does not use its random stream (true of Pendulum and the classic-control tasks). So for run
folder ``<name>-s<N>`` the script seeds the environment as that side's bench did for copy 0 of worker 0
(``N * seed_scale``: 1 for ``bench/mujoco.py``, whose worker 0 seeds with the run's seed; 10,000 for
``bench/mlagents_gym.py``, which seeds with ``seed * 10_000``), and plays the reference policy (most
likely action) through as many episodes as the run had. Runs of one environment copy only.

The check that the starts are the run's own is printed with each run: the correlation, over its last
30% of episodes, between its training returns and the reference's from the same starts (close to 1
when the starts match and both policies are good; near 0 when they do not).

    python bench/start_adjusted.py --env gymnasium:Pendulum-v1 --reference /tmp/arl-pend/Pendulum-sac-s1/Pendulum.onnx \\
        --a "ML-Agents 1.1.0" /tmp/mlpend/Pendulum-sac-s{1..7} --a-seed-scale 10000 \\
        --b arl-learn /tmp/arl-pend/Pendulum-sac-s{1..7} --b-seed-scale 1
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

from compare_seeds import interval  # bench/compare_seeds.py
from episode_tails import run_returns, tail_mean  # bench/episode_tails.py

# bench/mujoco.py would shadow the mujoco package gymnasium imports: this folder leaves the path
sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import numpy as np  # noqa: E402

from ml_arl.api.inference import evaluate, load_policy  # noqa: E402
from ml_arl.study.bootstrap import seed_statistics  # noqa: E402


def run_seed(run_dir: Path) -> int:
    """The training seed in a run folder's name, as both benches name them (``<Behavior>-<algo>-s<N>``)."""
    match = re.search(r"-s(\d+)$", run_dir.name)
    if not match:
        raise SystemExit(f"{run_dir}: the folder name does not end in -s<seed> (bench/mujoco.py's and bench/mlagents_gym.py's run ids do)")
    return int(match.group(1))


def side_rows(policy, env: str, dirs: list[Path], scale: int, tails: list[float]) -> list[dict]:
    """Per run: the seed, the start check, and for each tail (training mean, reference mean)."""
    rows = []
    for run in dirs:
        seed = run_seed(run)
        trained = run_returns(run)
        replayed = evaluate(policy, env, episodes=len(trained), seed=seed * scale)
        n = max(2, int(len(trained) * 0.3))
        check = float(np.corrcoef(trained[-n:], replayed[-n:])[0, 1])
        rows.append({"seed": seed, "check": check,
                     "tails": {t: (tail_mean(trained, t), tail_mean(replayed, t)) for t in tails}})
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--env", required=True, help="what --env takes, e.g. gymnasium:Pendulum-v1")
    p.add_argument("--reference", required=True, help="the policy that replays every start: a run folder or an .onnx (either side's)")
    p.add_argument("--a", nargs="+", required=True, metavar=("NAME", "RUN_DIR"), help="name, then one run folder per seed")
    p.add_argument("--a-seed-scale", type=int, required=True, help="environment seed = run seed x this (bench/mlagents_gym.py: 10000)")
    p.add_argument("--b", nargs="+", required=True, metavar=("NAME", "RUN_DIR"))
    p.add_argument("--b-seed-scale", type=int, required=True, help="environment seed = run seed x this (bench/mujoco.py: 1)")
    p.add_argument("--tails", nargs="+", type=float, default=[0.1, 0.3, 0.5], help="fractions of the episodes (default 0.1 0.3 0.5)")
    args = p.parse_args(argv)
    policy = load_policy(args.reference, deterministic=True)
    sides = [(args.a[0], side_rows(policy, args.env, [Path(d) for d in args.a[1:]], args.a_seed_scale, args.tails)),
             (args.b[0], side_rows(policy, args.env, [Path(d) for d in args.b[1:]], args.b_seed_scale, args.tails))]
    for name, rows in sides:
        checks = ", ".join(f"s{r['seed']} {r['check']:.2f}" for r in rows)
        print(f"{name}: starts replayed, correlation with training over the last 30% of episodes: {checks}")
    print(f"\nreference: {args.reference}\n")
    print("| last | side | training, per seed | reference from the same starts | training - reference, per seed | "
          "training - reference: mean [95% CI] | IQM [95% CI] |")
    print("|---|---|---|---|---|---|---|")
    for t in args.tails:
        for name, rows in sides:
            trained = [r["tails"][t][0] for r in rows]
            replayed = [r["tails"][t][1] for r in rows]
            diffs = [a - b for a, b in zip(trained, replayed)]
            s = seed_statistics(diffs)
            print(f"| {t:.0%} | {name} | {' / '.join(f'{v:,.0f}' for v in trained)} (mean {statistics.fmean(trained):,.0f}) "
                  f"| {' / '.join(f'{v:,.0f}' for v in replayed)} (mean {statistics.fmean(replayed):,.0f}) "
                  f"| {' / '.join(f'{v:+,.0f}' for v in diffs)} | {interval(s['mean'])} | {interval(s['iqm'])} |")


if __name__ == "__main__":
    main()
