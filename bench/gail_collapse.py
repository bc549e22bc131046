"""SAC with GAIL and behavioral cloning on ML-Agents' test_gail task, past its 500 steps.

ML-Agents' test_gail (and tests/integration/test_signals_learning.py, its mirror here) trains SAC
with GAIL and behavioral cloning, no extrinsic reward, for 500 steps on the 1-D goal-reaching task
(step size 0.2), from an expert's demonstrations recorded with --record-demo. This script runs the
same config for ``--max-steps`` with behavioral cloning over ``--bc-steps`` (its weight falls
linearly to 0 there, as ML-Agents' does) and prints, per seed, the mean episode return and
length of each 100 steps (from TensorBoard's Environment/Cumulative Reward and Episode Length)
and the behavioral-cloning loss.

    python bench/gail_collapse.py --max-steps 1000 --bc-steps 1000 --seeds 1 2 3
    python bench/gail_collapse.py --max-steps 1000 --bc-steps 5000 --seeds 1 2 3
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

from ml_arl.settings import build_run_options  # noqa: E402
from ml_arl.training.controller import TrainerController  # noqa: E402
from tests.integration.test_signals_learning import SAC  # noqa: E402

ENV = "tests.support.simple_envs:goal_reach"


def record_expert(folder: Path) -> str:
    config = {"env_settings": {"env_path": ENV, "env_args": ["continuous=1"], "manager": "inprocess", "seed": 7},
              "checkpoint_settings": {"results_dir": str(folder), "run_id": "expert", "inference": True,
                                      "record_demo": str(folder / "demos")},
              "default_settings": {"trainer_type": "tests.support.plugins:GoalExpertTrainer", "max_steps": 600,
                                   "summary_freq": 100},
              "behaviors": {}}
    TrainerController(build_run_options(config, {}, "expert")).start_learning()
    return str(folder / "demos")


def scalars(folder: Path, tag: str) -> list[tuple[int, float]]:
    events = EventAccumulator(str(folder))
    events.Reload()
    return [(e.step, e.value) for e in events.Scalars(tag)] if tag in events.Tags()["scalars"] else []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-steps", type=int, default=1000)
    parser.add_argument("--bc-steps", type=int, default=1000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="gail-collapse-"))
    demo = record_expert(folder)
    print(f"SAC + GAIL + BC, goal_reach step 0.2, {args.max_steps} steps, behavioral cloning over {args.bc_steps} steps")
    for seed in args.seeds:
        run_id = f"seed{seed}"
        config = {"env_settings": {"env_path": ENV, "env_args": ["continuous=1", "step_size=0.2"], "manager": "inprocess",
                                   "seed": seed},
                  "checkpoint_settings": {"results_dir": str(folder), "run_id": run_id},
                  "default_settings": {**SAC, "summary_freq": 100, "max_steps": args.max_steps,
                                       "reward_signals": {"gail": {"encoding_size": 32, "demo_path": demo}},
                                       "behavioral_cloning": {"demo_path": demo, "steps": args.bc_steps}},
                  "behaviors": {}}
        TrainerController(build_run_options(config, {}, run_id)).start_learning()
        tb = folder / run_id / "GoalReach"
        rewards = scalars(tb, "Environment/Cumulative Reward")
        lengths = dict(scalars(tb, "Environment/Episode Length"))
        bc = dict(scalars(tb, "Losses/Pretraining Loss"))
        print(f"seed {seed}: step: mean return / mean episode length / BC loss")
        print("  " + "  ".join(f"{step}: {value:.2f} / {lengths.get(step, float('nan')):.1f} / {bc.get(step, float('nan')):.3f}"
                               for step, value in rewards))
    print(f"(runs in {folder}; remove it when done)" if os.environ.get("KEEP") else "")


if __name__ == "__main__":
    main()
