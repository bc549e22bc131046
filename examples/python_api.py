"""Train CartPole from Python, stop once it is solved, load the policy, evaluate it, and drive
arl-learn's workers as a gymnasium vector environment with it.

    python examples/python_api.py [--results-dir results] [--threshold 475]

docs/python-api.md walks through it; CI runs it (tests/cli/test_examples.py).
"""

from __future__ import annotations

import argparse
import logging
import statistics

import ml_arl
from ml_arl import StopOnReward


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results-dir", default="results")
    parser.add_argument("--threshold", type=float, default=475.0, help="mean return of the last 20 episodes")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)  # INFO shows arl-learn's console summaries

    # 1. Train with a shipped config; stop as soon as the last 20 episodes average the threshold.
    stop = StopOnReward("CartPole", threshold=args.threshold, window=20)
    run = ml_arl.train("config/ppo/CartPole.yaml", run_id="cartpole-api", results_dir=args.results_dir,
                       force=True, seed=1, callbacks=[stop])
    print(f"trained {run.steps['CartPole']} steps; stopped: {run.stopped}")
    print(f"results in {run.path}; ONNX model {run.onnx('CartPole')}")

    # 2. Load the policy from the run folder (or a .pt checkpoint, or the .onnx model) and evaluate it.
    policy = ml_arl.load_policy(run.path)
    returns = ml_arl.evaluate(policy, "gymnasium:CartPole-v1", episodes=10)
    print(f"evaluation: mean return {statistics.mean(returns):.1f} over {len(returns)} episodes")

    # 3. Act on observations of your own.
    print("action for a centred pole:", policy.act([0.0, 0.0, 0.0, 0.0]))

    # 4. Step arl-learn's environment workers yourself: a gymnasium VectorEnv (same-step autoreset).
    envs = ml_arl.make_vec_env("gymnasium:CartPole-v1", num_envs=2, seed=7)
    obs, _ = envs.reset()
    ended = []
    for _ in range(1000):
        obs, rewards, terminated, truncated, infos = envs.step(policy.act(obs))
        ended += [int(i) for i in (terminated | truncated).nonzero()[0]]
    envs.close()
    print(f"vector env: {envs.num_envs} sub-environments, {len(ended)} episodes ended in 1,000 steps")


if __name__ == "__main__":  # argparse in main(); train() itself needs no guard (workers never import this file)
    main()
