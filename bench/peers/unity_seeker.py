"""Per-step learning through the Unity protocol: arl-learn against ML-Agents 1.1.0 on the stand-in
Unity build of tests/support/unity_standin (behavior Seeker, 4 agents per environment), both launching the
same build with --num-envs 2, the same PPO config, the same seeds (issue 22's Unity row).

    python bench/peers/unity_seeker.py [--seeds 1 2 3] [--steps 40000] [--mlagents-venv VENV] [--config FILE]

With ``--mlagents-venv`` (ML-Agents 1.1.0's venv: ``make peer-mlagents`` makes ``.venv-mlagents``), ML-Agents'
own ``mlagents-learn`` runs too; without it, ours alone. Seeds x sides go through bench/common/runner.py
(each seed's arl-learn run, then ML-Agents'). Both sides write TensorBoard summaries every
``summary_freq`` steps (2,000 in the default config); printed per run and as medians over seeds: the
first step at which "Environment/Cumulative Reward" reaches --target (default 0.6) and its value at
the last summary. Steps are ML-Agents' steps: agent steps of the behavior.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[2]
if Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:  # run as a script:
    sys.path[0] = str(ROOT)  # import bench.* and tests.* from the repository root, not from this folder
elif str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common.runner import Run, add_seeds_argument, run_grid  # noqa: E402
from tests.support.unity_standin import make_build  # noqa: E402

CONFIG = """# Seeker (tests/support/unity_standin): PPO as an ML-Agents user writes it for a small task
behaviors:
  Seeker:
    trainer_type: ppo
    hyperparameters:
      batch_size: 128
      buffer_size: 1024
      learning_rate: 3.0e-4
      beta: 5.0e-3
      epsilon: 0.2
      lambd: 0.95
      num_epoch: 3
      learning_rate_schedule: linear
    network_settings:
      normalize: false
      hidden_units: 64
      num_layers: 2
    reward_signals:
      extrinsic:
        gamma: 0.99
        strength: 1.0
    max_steps: {steps}
    time_horizon: 64
    summary_freq: 2000
    checkpoint_interval: 500000
"""

# mlagents-learn under torch >= 2.9 exports ONNX only with the TorchScript exporter
MLAGENTS_MAIN = (
    "import torch\n"
    "_export = torch.onnx.export\n"
    "def _legacy(*a, **k):\n"
    "    k.setdefault('dynamo', False)\n"
    "    return _export(*a, **k)\n"
    "torch.onnx.export = _legacy\n"
    "from mlagents.trainers.learn import main\n"
    "main()\n"
)
TAG = "Environment/Cumulative Reward"


def rewards(run_dir: Path) -> list[tuple[int, float]]:
    """(step, value) of TAG in every TensorBoard file under ``run_dir``, in step order."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    points: dict[int, float] = {}
    for events in run_dir.rglob("events.out.tfevents.*"):
        acc = EventAccumulator(str(events), size_guidance={"scalars": 0})
        acc.Reload()
        if TAG in acc.Tags().get("scalars", []):
            points.update((e.step, e.value) for e in acc.Scalars(TAG))
    return sorted(points.items())


def first_at(points: list[tuple[int, float]], target: float) -> Optional[int]:
    return next((step for step, value in points if value >= target), None)


def run(side: str, cmd: list[str], run_dir: Path, log: Path) -> float:
    start = time.perf_counter()
    with open(log, "w") as out:
        code = subprocess.call(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=run_dir.parent.parent)
    if code != 0:
        raise SystemExit(f"{side} failed with exit code {code}; see {log}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_seeds_argument(parser, [1, 2, 3])
    parser.add_argument("--steps", type=int, default=40000)
    parser.add_argument("--target", type=float, default=0.6)
    parser.add_argument("--mlagents-venv", type=Path, default=None,
                        help="ML-Agents 1.1.0's venv, to run mlagents-learn too (make peer-mlagents makes .venv-mlagents)")
    parser.add_argument("--config", type=Path, default=None, help="an ML-Agents-schema config for behavior Seeker")
    parser.add_argument("--base-port", type=int, default=6100, help="ports from here on (two benches at once need 200 apart)")
    parser.add_argument("--arl-config", type=Path, default=None, help="arl-learn's config, when it differs (ml_arl keys ML-Agents refuses)")
    parser.add_argument("--out", type=Path, default=None, help="keep the runs here (default: a temporary folder)")
    args = parser.parse_args()
    if args.mlagents_venv is not None and not (args.mlagents_venv / "bin" / "python").exists():
        parser.error(f"--mlagents-venv {args.mlagents_venv}: no bin/python there; `make peer-mlagents` makes ML-Agents 1.1.0's "
                     "venv in .venv-mlagents")

    out = args.out or Path(tempfile.mkdtemp(prefix="unity_seeker_"))
    out.mkdir(parents=True, exist_ok=True)
    build = make_build(out / "build")
    config = out / "Seeker.yaml"
    config.write_text(args.config.read_text() if args.config else CONFIG.format(steps=args.steps))
    arl_config = out / "Seeker-arl.yaml"
    arl_config.write_text(args.arl_config.read_text() if args.arl_config else config.read_text())
    common = ["--env", str(build), "--num-envs", "2", "--no-graphics", "--results-dir", str(out / "results")]
    sides = {"arl-learn": [str(Path(sys.executable).with_name("arl-learn"))]}
    if args.mlagents_venv is not None:
        sides["ML-Agents 1.1.0"] = [str(args.mlagents_venv / "bin" / "python"), "-c", MLAGENTS_MAIN]

    table: dict[str, list[tuple[Optional[int], float, float]]] = {side: [] for side in sides}

    def one(cell: Run) -> tuple[list[tuple[int, float]], float]:  # one side ("config": its index k) of one seed
        k, seed = cell.config, cell.seed
        side, prefix = list(sides.items())[k]
        run_id = f"{'arl' if k == 0 else 'mla'}-s{seed}"
        run_dir = out / "results" / run_id
        port = args.base_port + 20 * k + 40 * (seed % 5)
        cmd = prefix + [str(arl_config if k == 0 else config), "--run-id", run_id, "--seed", str(seed), "--base-port", str(port), "--force"] + common
        cmd += ["--env-args", "--agents", "4"]
        wall = run(side, cmd, run_dir, out / f"{run_id}.log")
        points = rewards(run_dir)
        if not points:
            raise SystemExit(f"{side}: no '{TAG}' summaries under {run_dir}")
        return points, wall

    def report(cell: Run, result: tuple[list[tuple[int, float]], float]) -> None:
        side = list(sides)[cell.config]
        points, wall = result
        reached, last = first_at(points, args.target), points[-1][1]
        table[side].append((reached, last, wall))
        shown = f"{reached:,}" if reached is not None else "not reached"
        print(f"{side:16s} seed {cell.seed}: {args.target} at {shown:>11s}  last summary {last:6.3f} (step {points[-1][0]:,})  {wall:5.0f} s", flush=True)

    run_grid(one, seeds=args.seeds, configs=range(len(sides)), order=("seed", "config", "task"), on_result=report)

    print(f"\n| side | steps to a mean reward of {args.target} (median) | per seed | reward at the last summary (mean) | per seed | median wall-clock |")
    print("|---|---|---|---|---|---|")
    for side, rows in table.items():
        steps = [r for r, _, _ in rows]
        reached = [s for s in steps if s is not None]
        median = f"{statistics.median(reached):,.0f}" if len(reached) == len(steps) else f"{len(reached)}/{len(steps)} reached"
        per = " / ".join(f"{s:,}" if s is not None else "-" for s in steps)
        lasts = [last for _, last, _ in rows]
        print(
            f"| {side} | {median} | {per} | {statistics.mean(lasts):.3f} | {' / '.join(f'{v:.3f}' for v in lasts)} "
            f"| {statistics.median(w for _, _, w in rows):.0f} s |"
        )
    print(f"\nruns in {out}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
