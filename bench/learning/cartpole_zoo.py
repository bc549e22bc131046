"""CartPole-v1 under rl-baselines3-zoo's PPO hyperparameters with ML-Agents' default swish network:
how many environment steps each seed needs until the mean return of 20 episodes reaches 475.

    python bench/learning/cartpole_zoo.py                            # config/ppo/CartPole-zoo.yaml, seeds 1 2 3
    python bench/learning/cartpole_zoo.py --set max_grad_norm=null   # one hyperparameter changed
    python bench/learning/cartpole_zoo.py --steps-per-message 16     # the pipelined default

Each seed is one `arl-learn` run (one after another, through bench/common/runner.py); the steps are read from the run's
results.sqlite, episodes in the order they finished. Issue 22's goal: every seed within 100k steps
(Stable-Baselines3 with SiLU: 67-97k).
"""

from __future__ import annotations

import argparse
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
if Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:  # run as a script:
    sys.path[0] = str(ROOT)  # import bench.* from the repository root, not from this folder

from bench.common.runner import Run, add_seeds_argument, run_grid  # noqa: E402
from bench.peers.cartpole_vs_sb3 import first_solved  # noqa: E402

CONFIG = ROOT / "config" / "ppo" / "CartPole-zoo.yaml"


def solved_at(run_dir: Path) -> tuple[int | None, int, float]:
    """(steps when solved or None, episodes, mean return of the last 20 episodes)."""
    with sqlite3.connect(run_dir / "results.sqlite") as db:
        episodes = db.execute("SELECT wall_time, env_reward FROM episodes ORDER BY id").fetchall()
    found = first_solved(episodes)
    last = [r for _, r in episodes[-20:]]
    return (found[1] if found else None), len(episodes), sum(last) / max(1, len(last))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_seeds_argument(parser, [1, 2, 3])
    parser.add_argument("--steps-per-message", type=int, help="env_settings.steps_per_message (default: the config's)")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="override hyperparameters.KEY (a YAML value)")
    parser.add_argument("--results-dir", type=Path, default=Path(tempfile.gettempdir()) / "arl-cartpole-zoo")
    args = parser.parse_args(argv)
    config: dict[str, Any] = yaml.safe_load(CONFIG.read_text())
    if args.steps_per_message is not None:
        config["env_settings"]["steps_per_message"] = args.steps_per_message
    for item in args.set:
        key, _, value = item.partition("=")
        config["behaviors"]["CartPole"]["hyperparameters"][key] = yaml.safe_load(value)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(config, f)

    def one(run: Run) -> tuple[int | None, int, float]:
        run_id = f"cartpole-zoo-s{run.seed}"
        cmd = [sys.executable, "-m", "ml_arl.cli.learn", f.name, "--run-id", run_id, "--seed", str(run.seed),
               "--results-dir", str(args.results_dir), "--force"]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        if proc.returncode != 0:
            raise SystemExit(f"{run_id} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        return solved_at(args.results_dir / run_id)

    def report(run: Run, result: tuple[int | None, int, float]) -> None:
        steps, episodes, last = result
        where = f"solved at {steps:,} steps" if steps is not None else "not solved"
        print(f"seed {run.seed}: {where}; {episodes} episodes, last-20 mean {last:.0f}", flush=True)

    try:
        results = run_grid(one, seeds=args.seeds, on_result=report)
    finally:
        Path(f.name).unlink()
    solved = sum(steps is not None for _, (steps, _, _) in results)
    print(f"{solved} of {len(args.seeds)} seeds solved within {config['behaviors']['CartPole']['max_steps']:,} steps")


if __name__ == "__main__":
    main()
