"""Tianshou's MuJoCo protocol on our runs: every checkpoint a run kept plays ``--episodes`` fresh
episodes (sampled actions, as Tianshou's PPO evaluates; ``--deterministic`` for the most likely
action), the seeds' mean is taken at each checkpoint, and the figure is the best of those means over
training, with a 95% percentile-bootstrap interval over the seeds (the statistic recomputed, best
included, on each resample).

Tianshou evaluates 10 episodes after every epoch (30,720 steps for its PPO) and reports the best
10-seed mean over the first 1M steps. Runs must keep a checkpoint at that cadence
(``checkpoint_interval: 30720`` and enough ``keep_checkpoints``); checkpoints are matched across
seeds by ``step // checkpoint_interval`` (the final one replaces the last interval's). With fewer
seeds than Tianshou's 10, the seed mean is noisier and the best of it is biased further upwards.

    python bench/learning/best_evaluation.py --env gymnasium:HalfCheetah-v5 --jobs 2 /tmp/hcw48/HalfCheetah-ppo-s{4,5,6,7,8}
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import yaml

if Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:  # run as a script: import bench.* from the
    sys.path[0] = str(Path(__file__).resolve().parents[2])  # repository root; this folder's mujoco.py would shadow mujoco

from bench.common.compare_seeds import interval  # noqa: E402
from ml_arl.api.inference import evaluate, load_policy  # noqa: E402
from ml_arl.study.bootstrap import estimate, seed_statistics  # noqa: E402

STEP = re.compile(r"-(\d+)\.onnx$")


def checkpoints(run: Path) -> tuple[int, dict[int, tuple[int, Path]]]:
    """The run's checkpoint interval and its (step, ONNX checkpoint) by interval index (the latest in each)."""
    config = yaml.safe_load((run / "configuration.yaml").read_text())
    behaviors = config.get("behaviors") or {}
    if len(behaviors) != 1:
        raise SystemExit(f"{run}/configuration.yaml: expected one behavior, found {sorted(behaviors)}")
    name, settings = next(iter(behaviors.items()))
    every = int(settings.get("checkpoint_interval") or 500000)
    found: dict[int, tuple[int, Path]] = {}
    for model in (run / name).glob(f"{name}-*.onnx"):
        match = STEP.search(model.name)
        if match:
            step = int(match.group(1))
            if step // every not in found or found[step // every][0] < step:
                found[step // every] = (step, model)
    if not found:
        raise SystemExit(f"{run}/{name}: no {name}-<step>.onnx checkpoints; keep them with checkpoint_interval")
    return every, dict(sorted(found.items()))


def score(job: tuple[str, str, list[str], int, int, bool]) -> float:
    model, env, env_args, episodes, seed, deterministic = job
    policy = load_policy(model, deterministic=deterministic)
    return statistics.fmean(evaluate(policy, env, episodes=episodes, env_args=env_args, seed=seed))


def best_of_mean(scores: np.ndarray) -> Any:
    """The statistic over seed indices (vectorised for scipy's bootstrap): the best seed mean over checkpoints."""
    def statistic(index: Any, axis: int = -1) -> Any:
        picked = scores[np.asarray(index, dtype=np.int64)]  # (..., seeds, checkpoints)
        return picked.mean(axis=-2).max(axis=-1)
    return statistic


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("runs", nargs="+", type=Path, help="run folders (results/<run-id>), one per seed")
    p.add_argument("--env", required=True, help="what --env takes, e.g. gymnasium:HalfCheetah-v5")
    p.add_argument("--env-args", nargs="*", default=[], metavar="KEY=VALUE",
                   help="the environment's arguments, as the runs' env_settings.env_args gave them")
    p.add_argument("--episodes", type=int, default=10)
    p.add_argument("--seed", type=int, default=1000, help="the evaluation environment's seed (none of the training seeds)")
    p.add_argument("--deterministic", action="store_true", help="the most likely action instead of sampled ones")
    p.add_argument("--up-to", type=int, default=1_000_064, help="checkpoints at or before this step (Tianshou: 1M)")
    p.add_argument("--jobs", type=int, default=1)
    args = p.parse_args(argv)
    found = [checkpoints(run) for run in args.runs]
    every = {e for e, _ in found}
    if len(every) != 1:
        raise SystemExit(f"the runs keep checkpoints at different intervals ({sorted(every)}); compare like with like")
    interval_steps = every.pop()
    shared = sorted(set.intersection(*(set(k for k in models if k * interval_steps <= args.up_to) for _, models in found)))
    if not shared:
        raise SystemExit("the runs share no checkpoint interval")
    jobs = [(str(models[k][1]), args.env, list(args.env_args), args.episodes, args.seed, args.deterministic)
            for _, models in found for k in shared]
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        flat = list(pool.map(score, jobs))
    scores = np.asarray(flat, dtype=np.float64).reshape(len(args.runs), len(shared))
    curve = scores.mean(axis=0)
    print("| step | " + " | ".join(run.name for run in args.runs) + " | mean |")
    print("|---:|" + "---:|" * (len(args.runs) + 1))
    for j, k in enumerate(shared):
        print(f"| {max(models[k][0] for _, models in found):,} | "
              + " | ".join(f"{v:,.0f}" for v in scores[:, j]) + f" | {curve[j]:,.0f} |")
    best = int(curve.argmax())
    e = estimate(list(range(len(args.runs))), best_of_mean(scores))
    kind = "most likely action" if args.deterministic else "sampled actions"
    print(f"\n{len(args.runs)} runs, {len(shared)} checkpoints, {args.episodes} episodes each, {kind}")
    print(f"best seed mean over training (Tianshou's figure): {interval({'value': e.value, 'low': e.low, 'high': e.high})}"
          f", at checkpoint {best + 1} of {len(shared)}")
    print(f"each run's best: {' / '.join(f'{v:,.0f}' for v in scores.max(axis=1))}; "
          f"mean {interval(seed_statistics(list(scores.max(axis=1)))['mean'])}")
    print(f"the last checkpoint: mean {interval(seed_statistics(list(scores[:, -1]))['mean'])}")


if __name__ == "__main__":
    main()
