"""Finished runs' final policies, evaluated: each run's last checkpoint plays ``--episodes`` fresh
episodes with the most likely action (``--stochastic`` to sample), and the script prints each run's
mean +- sd over its episodes, then the runs' mean and IQM with 95% intervals (``ml_arl.study.bootstrap``).

This is rl-baselines3-zoo's protocol (a trained agent's deterministic evaluation, mean +- sd over the
evaluation episodes), where ``bench/learning/mujoco.py``'s score is the last 10% of the training episodes,
acted with sampled actions.

SAC's most likely action differs between the two trainers' models: ML-Agents 1.1.0 exports the
un-squashed mean (its ``deterministic_continuous_actions``; the environment then clips it to [-1, 1]),
ml_arl exports tanh of the mean. ``--mean-as`` puts both on one footing: ``tanh`` applies tanh to an
ML-Agents SAC model's mean, ``clip`` turns an ml_arl SAC model's tanh(mean) back into the clipped mean.

    python bench/learning/evaluate_runs.py --env gymnasium:HalfCheetah-v5 /tmp/hc1m/HalfCheetah-ppo-s{4,5,6,7,8}
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

import numpy as np

if Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:  # run as a script: import bench.* from the
    sys.path[0] = str(Path(__file__).resolve().parents[2])  # repository root; this folder's mujoco.py would shadow mujoco

from mlagents_envs.base_env import ActionTuple  # noqa: E402

from bench.common.compare_seeds import interval  # noqa: E402
from ml_arl.api.inference import evaluate, load_policy  # noqa: E402
from ml_arl.study.bootstrap import seed_statistics  # noqa: E402

MEAN_AS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "tanh": np.tanh,  # an ML-Agents SAC model's un-squashed mean -> tanh(mean), as ml_arl acts
    # an ml_arl SAC model's tanh(mean) -> clip(mean, -1, 1), as ML-Agents' mean reaches the environment
    "clip": lambda a: np.clip(np.arctanh(np.clip(a, -1 + 1e-7, 1 - 1e-7)), -1.0, 1.0),
}


class MappedMean:
    """A deterministic policy whose continuous actions pass through ``MEAN_AS[name]``."""

    def __init__(self, policy: Any, name: str):
        self.policy, self.map, self.behavior = policy, MEAN_AS[name], policy.behavior

    def action_tuple(self, obs: list[np.ndarray], deterministic: Optional[bool] = None,
                     allowed: Optional[np.ndarray] = None, agent_ids: Optional[np.ndarray] = None) -> ActionTuple:
        actions = self.policy.action_tuple(obs, deterministic, allowed, agent_ids)
        return ActionTuple(continuous=self.map(actions.continuous).astype(np.float32), discrete=actions.discrete)

    def forget(self, agent_ids: Optional[np.ndarray] = None) -> None:
        self.policy.forget(agent_ids)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("runs", nargs="+", help="run folders (results/<run-id>), or .onnx models (ML-Agents' too)")
    p.add_argument("--env", required=True, help="what --env takes, e.g. gymnasium:HalfCheetah-v5")
    p.add_argument("--episodes", type=int, default=10)
    p.add_argument("--seed", type=int, default=1000, help="the evaluation environment's seed (none of the training seeds)")
    p.add_argument("--stochastic", action="store_true", help="sample actions instead of the most likely one")
    p.add_argument("--mean-as", choices=sorted(MEAN_AS), help="SAC models: map the most likely action (see above)")
    args = p.parse_args(argv)
    if args.mean_as and args.stochastic:
        p.error("--mean-as maps the most likely action; it does not go with --stochastic")
    means = []
    print("| run | mean +- sd over episodes |")
    print("|---|---|")
    for run in args.runs:
        policy: Any = load_policy(run, deterministic=not args.stochastic)
        if args.mean_as:
            policy = MappedMean(policy, args.mean_as)
        returns = evaluate(policy, args.env, episodes=args.episodes, seed=args.seed)
        means.append(statistics.fmean(returns))
        name = Path(run).name if Path(run).is_dir() else f"{Path(run).parent.name}/{Path(run).name}"
        print(f"| {name} | {means[-1]:,.0f} +- {statistics.pstdev(returns):,.0f} |", flush=True)
    s = seed_statistics(means)
    print(f"\nruns: {len(means)}; mean {interval(s['mean'])}; IQM {interval(s['iqm'])}")


if __name__ == "__main__":
    main()
