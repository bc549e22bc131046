"""Finished runs' final policies, evaluated: each run's last checkpoint plays ``--episodes`` fresh
episodes with the most likely action (``--stochastic`` to sample), and the script prints each run's
mean +- sd over its episodes, then the runs' mean and IQM with 95% intervals (``ml_arl.study.stats``).

This is rl-baselines3-zoo's protocol (a trained agent's deterministic evaluation, mean +- sd over the
evaluation episodes), where ``bench/mujoco.py``'s score is the last 10% of the training episodes,
acted with sampled actions.

    python bench/evaluate_runs.py --env gymnasium:HalfCheetah-v5 /tmp/hc1m/HalfCheetah-ppo-s{4,5,6,7,8}
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from compare_seeds import interval  # bench/compare_seeds.py, imported while this folder is on the path

# bench/mujoco.py would shadow the mujoco package gymnasium imports: this folder leaves the path
sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from ml_arl.inference import evaluate, load_policy  # noqa: E402
from ml_arl.study.stats import seed_statistics  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("runs", nargs="+", help="run folders (results/<run-id>), or .onnx models (ML-Agents' too)")
    p.add_argument("--env", required=True, help="what --env takes, e.g. gymnasium:HalfCheetah-v5")
    p.add_argument("--episodes", type=int, default=10)
    p.add_argument("--seed", type=int, default=1000, help="the evaluation environment's seed (none of the training seeds)")
    p.add_argument("--stochastic", action="store_true", help="sample actions instead of the most likely one")
    args = p.parse_args(argv)
    means = []
    print("| run | mean +- sd over episodes |")
    print("|---|---|")
    for run in args.runs:
        policy = load_policy(run, deterministic=not args.stochastic)
        returns = evaluate(policy, args.env, episodes=args.episodes, seed=args.seed)
        means.append(statistics.fmean(returns))
        name = Path(run).name if Path(run).is_dir() else f"{Path(run).parent.name}/{Path(run).name}"
        print(f"| {name} | {means[-1]:,.0f} +- {statistics.pstdev(returns):,.0f} |", flush=True)
    s = seed_statistics(means)
    print(f"\nruns: {len(means)}; mean {interval(s['mean'])}; IQM {interval(s['iqm'])}")


if __name__ == "__main__":
    main()
