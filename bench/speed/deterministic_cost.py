"""What `--deterministic` costs, and that it repeats a run (issue 33: the README's figure, re-measured).

Runs one config with and without `--deterministic`, interleaved (--repeats rounds of one run each), every run
a separate `arl-learn` process with the same --seed, and prints the median wall-clock of the whole command on
each side, their ratio, and whether the deterministic runs' episode returns (results.sqlite, in order) and final
checkpoints are identical (they must be), and whether the others' are.

    python bench/speed/deterministic_cost.py                        # HalfCheetah-v5, the ML-Agents walker config, 200k steps, 3 rounds
    python bench/speed/deterministic_cost.py --config config/ppo/CartPole.yaml --steps 50000

Run it on an idle machine: both sides' wall-clocks move with whatever else runs.
"""

from __future__ import annotations

import argparse
import hashlib
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def run(config: Path, run_id: str, seed: int, results: Path, deterministic: bool) -> tuple[float, list[float], str]:
    """(wall-clock s, episode returns in order, a digest of the final checkpoints)."""
    cmd = [sys.executable, "-m", "ml_arl.cli.learn", str(config), "--run-id", run_id, "--seed", str(seed),
           "--results-dir", str(results), "--force"] + (["--deterministic"] if deterministic else [])
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{run_id} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    with sqlite3.connect(results / run_id / "results.sqlite") as db:
        returns = [row[0] for row in db.execute("SELECT env_reward FROM episodes ORDER BY id")]
    digest = hashlib.sha256()
    for path in sorted((results / run_id).rglob("*.pt")):
        digest.update(path.read_bytes())
    return wall, returns, digest.hexdigest()[:16]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "config" / "mujoco" / "mlagents-walker" / "HalfCheetah-ppo.yaml")
    parser.add_argument("--steps", type=int, default=200_000, help="max_steps of every behavior")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3, help="rounds; each runs both sides once")
    parser.add_argument("--results-dir", type=Path, default=Path(tempfile.gettempdir()) / "arl-deterministic")
    args = parser.parse_args(argv)
    config = yaml.safe_load(args.config.read_text())
    for behavior in config["behaviors"].values():
        behavior["max_steps"] = args.steps
        behavior["checkpoint_interval"] = max(args.steps, int(behavior.get("checkpoint_interval", 0) or 0))
    runs: dict[bool, list[tuple[float, list[float], str]]] = {False: [], True: []}
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(config, f)
        path = Path(f.name)
    try:
        for round_ in range(args.repeats):
            for deterministic in (False, True):
                side = "det" if deterministic else "free"
                result = run(path, f"{side}-{round_}", args.seed, args.results_dir, deterministic)
                runs[deterministic].append(result)
                print(f"round {round_ + 1} {side:4s}: {result[0]:6.1f} s, {len(result[1])} episodes, "
                      f"checkpoints {result[2]}", flush=True)
    finally:
        path.unlink()
    free = statistics.median(r[0] for r in runs[False])
    det = statistics.median(r[0] for r in runs[True])

    def same(side: list[tuple[float, list[float], str]]) -> bool:
        return all(r[1] == side[0][1] and r[2] == side[0][2] for r in side[1:])

    print(f"\n{args.config.name}, {args.steps:,} steps, seed {args.seed}, medians of {args.repeats} interleaved runs:")
    ratios = [d[0] / f[0] for f, d in zip(runs[False], runs[True])]
    print(f"without --deterministic {free:.1f} s, with it {det:.1f} s: x{det / free:.2f} "
          f"(each round's ratio: {' '.join(f'{r:.2f}' for r in ratios)})")
    print(f"deterministic runs identical (returns and checkpoints): {same(runs[True])}; "
          f"runs without it identical: {same(runs[False])}")
    if not same(runs[True]):
        raise SystemExit("--deterministic runs differ")


if __name__ == "__main__":
    main()
