"""ARL start-up, phase switch and memory, against palaestrAI's figures measured on this kind of
machine (shared/reference/palaestrai.md section 8: 43 s to the first step, 21 s per phase
switch, 1.4 GB for a two-agent toy).

Runs ``arl-learn config/arl/GridDefense.yaml`` (two behaviors, two worker processes, three
phases: the defender against greedy, the attacker against the droop, the defender again, test, the matrix) several times and reports medians:

- time from launching ``arl-learn`` to the first environment step the trainer sees
  (timers.json metadata: first_step_time, written by the controller);
- phase switch: from the end of a phase's loop (final checkpoints and ONNX export included)
  to the first steps of the next phase, with the same worker processes;
- peak memory of the whole process tree (arl-learn, its forkserver and workers), sampled every
  20 ms from /proc: the sum of RSS, and the sum of PSS (shared pages counted once).

Usage: python bench/speed/arl.py [--runs 5] [--steps 10000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

if os.path.realpath(sys.path[0] or os.curdir) == os.path.dirname(os.path.realpath(__file__)):  # run as a script:
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))  # bench.* from the root

from bench.common.process_tree import PeakMemory  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PALAESTRAI = {"first_step_s": 43.0, "phase_switch_s": 21.0, "peak_mb": 1400.0}
GOALS = {"first_step_s": 2.0, "phase_switch_s": 1.0, "peak_mb": 500.0}


def one_run(config: Path, workdir: Path, run_id: str) -> dict[str, float]:
    started = time.time()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ml_arl.cli.learn", str(config), "--run-id", run_id, "--results-dir", str(workdir)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    sampler = PeakMemory(proc.pid)
    sampler.start()
    try:
        _, err = proc.communicate(timeout=600)
    finally:
        sampler.stop()
    peak = {"rss": sampler.peak_rss_kb, "pss": sampler.peak_pss_kb}
    if proc.returncode != 0:
        raise SystemExit(f"arl-learn failed ({proc.returncode}): {err.strip().splitlines()[-1:]}")
    meta = json.loads((workdir / run_id / "run_logs" / "timers.json").read_text())["metadata"]
    switches = json.loads(meta["phase_switch_seconds"])
    return {
        "first_step_s": float(meta["first_step_time"]) - started,
        "phase_switch_s": statistics.median(switches),
        "peak_mb": peak["pss"] / 1024,
        "peak_rss_mb": peak["rss"] / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10000, help="max_steps of each training phase")
    args = parser.parse_args()
    config = yaml.safe_load((ROOT / "config" / "arl" / "GridDefense.yaml").read_text())
    for phase in config["phases"]:
        if phase.get("max_steps"):
            phase["max_steps"] = args.steps
    config["env_settings"]["seed"] = 1
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        cfg = workdir / "grid.yaml"
        cfg.write_text(yaml.safe_dump(config))
        runs = [one_run(cfg, workdir, f"bench{i}") for i in range(args.runs)]
    print(f"GridDefense: 2 behaviors, 2 workers, its phases; {args.runs} runs (medians)")
    print(f"{'measure':<22}{'ours':>10}{'goal':>10}{'palaestrAI':>12}{'ours/goal':>11}{'ours/palaestrAI':>17}")
    for key, label in (("first_step_s", "first step (s)"), ("phase_switch_s", "phase switch (s)"), ("peak_mb", "peak memory (MB, PSS)")):
        ours = statistics.median(r[key] for r in runs)
        print(f"{label:<22}{ours:>10.2f}{GOALS[key]:>10.1f}{PALAESTRAI[key]:>12.1f}{ours / GOALS[key]:>11.2f}{ours / PALAESTRAI[key]:>17.3f}")
    rss = statistics.median(r["peak_rss_mb"] for r in runs)
    print(f"peak memory as RSS summed over the processes (shared pages counted in each): {rss:.0f} MB")
    print("per run:", "; ".join(f"{r['first_step_s']:.2f} s / {r['phase_switch_s']:.3f} s / {r['peak_mb']:.0f} MB" for r in runs))


if __name__ == "__main__":
    main()
