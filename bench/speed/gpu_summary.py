"""Helpers of bench/speed/gpu_check.sh (the one-shot GPU check on the device machine).

    python3 bench/speed/gpu_summary.py RESULTS_DIR RUN_ID [RUN_ID ...] > hopper_sac.md
        a markdown table per run of every summary (step, seconds since the run started, mean episode
        return, episodes, environment steps/s over the period), read from the run's TensorBoard
        event files (results.sqlite's episodes where there are none), then one table over the runs
        (steps reached, the last summary's mean return, steps/s) with the median over the runs
    python3 bench/speed/gpu_summary.py make-config SRC DST [--max-steps N] [--summary-freq N] [--buffer-init-steps N]
        a copy of the config SRC with every behavior's max_steps, summary_freq and (SAC)
        buffer_init_steps replaced where given; nothing else changes
    python3 bench/speed/gpu_summary.py sac-step --device cuda [bench/speed/sac_step.py's arguments]
        bench/speed/sac_step.py with the SAC trainer built on DEVICE (sac_step.py itself builds it on the CPU)
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import sqlite3
import statistics
import sys
from typing import Any, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ------------------------------------------------------------------ make-config


def make_config(argv: list[str]) -> int:
    import yaml

    p = argparse.ArgumentParser(prog="gpu_summary.py make-config")
    p.add_argument("src")
    p.add_argument("dst")
    p.add_argument("--max-steps", type=int)
    p.add_argument("--summary-freq", type=int)
    p.add_argument("--buffer-init-steps", type=int)
    args = p.parse_args(argv)
    with open(args.src) as f:
        config = yaml.safe_load(f)
    changes = {"max_steps": args.max_steps, "summary_freq": args.summary_freq}
    changes = {k: v for k, v in changes.items() if v is not None}
    for settings in (config.get("behaviors") or {}).values():
        settings.update(changes)
        if args.buffer_init_steps is not None:
            settings.setdefault("hyperparameters", {})["buffer_init_steps"] = args.buffer_init_steps
    with open(args.dst, "w") as f:
        yaml.safe_dump(config, f, sort_keys=False)
    if args.buffer_init_steps is not None:
        changes["buffer_init_steps"] = args.buffer_init_steps
    print(f"{args.dst}: {args.src} with " + (", ".join(f"{k} {v}" for k, v in changes.items()) or "no change"))
    return 0


# ------------------------------------------------------------------ sac-step


def sac_step(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="gpu_summary.py sac-step", add_help=False)
    p.add_argument("--device", default="cpu")
    args, rest = p.parse_known_args(argv)
    import torch

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print(f"sac-step: {args.device} requested but CUDA is unavailable (torch {torch.__version__})")
        return 3
    import ml_arl.trainers.sac.trainer as sac

    base = sac.SACTrainer

    class OnDevice(base):  # type: ignore[misc,valid-type]
        def __init__(self, *a: Any, **k: Any) -> None:
            if len(a) >= 6:
                a = (*a[:5], device, *a[6:])
            else:
                k["device"] = device
            super().__init__(*a, **k)

    sac.SACTrainer = OnDevice  # bench/speed/sac_step.py imports it inside main(), after this
    sys.path.insert(0, ROOT)
    from bench.speed import sac_step as bench_sac_step

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"SAC trainer on {device} ({name})")
    try:
        return bench_sac_step.main(rest)
    finally:
        sac.SACTrainer = base


# ------------------------------------------------------------------ summary


def fmt(x: Optional[float], digits: int = 1) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.{digits}f}"


def read_json(path: str) -> Any:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def behaviors_of(run_dir: str) -> dict[str, dict[str, Any]]:
    try:
        import yaml

        with open(os.path.join(run_dir, "configuration.yaml")) as f:
            return dict((yaml.safe_load(f) or {}).get("behaviors") or {})
    except Exception:  # noqa: BLE001  a summary of what is there, whatever is missing
        return {}


def summaries_from_events(folder: str) -> list[dict[str, float]]:
    """One row per summary: step, wall_time, reward, and where written episodes and steps_per_s."""
    if not glob.glob(os.path.join(folder, "events.out.tfevents.*")):
        return []
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(folder, size_guidance={"scalars": 0})
    acc.Reload()
    tags = set(acc.Tags().get("scalars", []))
    if "Environment/Cumulative Reward" not in tags:
        return []
    rows: dict[int, dict[str, float]] = {}
    for e in acc.Scalars("Environment/Cumulative Reward"):
        rows[e.step] = {"step": e.step, "wall_time": e.wall_time, "reward": e.value}
    for tag, key in (("Environment/Episode Count", "episodes"), ("Environment/Steps Per Second", "steps_per_s")):
        if tag in tags:
            for e in acc.Scalars(tag):
                if e.step in rows:
                    rows[e.step][key] = e.value
    return [rows[s] for s in sorted(rows)]


def summaries_from_store(run_dir: str, behavior: str, summary_freq: int) -> list[dict[str, float]]:
    """The same rows from results.sqlite: episodes binned by the steps they end at (one worker)."""
    path = os.path.join(run_dir, "results.sqlite")
    if not os.path.isfile(path):
        return []
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        episodes = conn.execute(
            "SELECT length, env_reward, wall_time FROM episodes WHERE behavior = ? AND mode = 'train' ORDER BY id",
            (behavior,),
        ).fetchall()
        conn.close()
    except sqlite3.Error:
        return []
    rows: list[dict[str, float]] = []
    steps, rewards, last_wall = 0, [], 0.0
    bound = summary_freq
    for length, reward, wall in episodes:
        steps += int(length)
        while steps >= bound + summary_freq:  # a period with no episode ending in it
            bound += summary_freq
        rewards.append(float(reward))
        last_wall = float(wall)
        if steps >= bound:
            rows.append({"step": bound, "wall_time": last_wall, "reward": statistics.fmean(rewards), "episodes": len(rewards)})
            rewards, bound = [], bound + summary_freq
    return rows


def phase_state(run_dir: str) -> str:
    try:
        conn = sqlite3.connect(f"file:{os.path.join(run_dir, 'results.sqlite')}?mode=ro", uri=True)
        states = [r[0] for r in conn.execute("SELECT state FROM phases ORDER BY idx")]
        conn.close()
        return ",".join(states) or "-"
    except sqlite3.Error:
        return "-"


def summarize(results: str, run_ids: list[str]) -> int:
    overall: list[dict[str, Any]] = []
    print(f"# SAC runs in {results}\n")
    for run_id in run_ids:
        run_dir = os.path.join(results, run_id)
        print(f"## {run_id}\n")
        if not os.path.isdir(run_dir):
            print(f"no results folder {run_dir}\n")
            overall.append({"run": run_id})
            continue
        behaviors = behaviors_of(run_dir) or {
            os.path.basename(d): {} for d in glob.glob(os.path.join(run_dir, "*"))
            if os.path.isdir(d) and os.path.basename(d) != "run_logs"
        }
        created = (read_json(os.path.join(run_dir, "run_logs", "arl-run.json")) or {}).get("created")
        status = read_json(os.path.join(run_dir, "run_logs", "training_status.json")) or {}
        for behavior, settings in behaviors.items():
            summary_freq = int(settings.get("summary_freq") or 50000)
            hp = settings.get("hyperparameters") or {}
            rows = summaries_from_events(os.path.join(run_dir, behavior))
            source = "TensorBoard events"
            if not rows:
                rows, source = summaries_from_store(run_dir, behavior, summary_freq), "results.sqlite episodes"
            start = float(created) if created else (rows[0]["wall_time"] if rows else 0.0)
            print(f"{behavior}: max_steps {settings.get('max_steps')}, summary_freq {summary_freq}, "
                  f"buffer_init_steps {hp.get('buffer_init_steps')}, batch {hp.get('batch_size')}; "
                  f"from {source}; phase state: {phase_state(run_dir)}\n")
            if rows:
                print("| step | s since start | mean return | episodes | env steps/s (period) |")
                print("| ---: | ---: | ---: | ---: | ---: |")
                for r in rows:
                    print(f"| {int(r['step'])} | {fmt(r['wall_time'] - start)} | {fmt(r['reward'], 2)} | "
                          f"{fmt(r.get('episodes'), 0)} | {fmt(r.get('steps_per_s'))} |")
                print()
            else:
                print("no summary written\n")
            final = (status.get(behavior) or {}).get("final_checkpoint") or {}
            checkpoints = (status.get(behavior) or {}).get("checkpoints") or []
            reached = final.get("steps") or max((c.get("steps", 0) for c in checkpoints), default=0)
            last = rows[-1] if rows else None
            reached = max(int(reached or 0), int(last["step"]) if last else 0)
            end = max(float(final.get("creation_time") or 0.0), last["wall_time"] if last else 0.0)
            elapsed = end - start if rows or final else float("nan")
            overall.append({
                "run": run_id, "behavior": behavior, "reached": reached,
                "last_step": int(last["step"]) if last else None, "last_return": last["reward"] if last else None,
                "best_return": max(r["reward"] for r in rows) if rows else None,
                "elapsed": elapsed, "overall_sps": reached / elapsed if elapsed and elapsed > 0 else None,
                "last_sps": last.get("steps_per_s") if last else None,
            })
    print("## Over the runs\n")
    print("| run | steps reached | last summary step | last mean return | best mean return | s | steps/s overall | steps/s last period |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for o in overall:
        print(f"| {o['run']} | {o.get('reached', '-')} | {o.get('last_step') or '-'} | {fmt(o.get('last_return'), 2)} | "
              f"{fmt(o.get('best_return'), 2)} | {fmt(o.get('elapsed'))} | {fmt(o.get('overall_sps'))} | {fmt(o.get('last_sps'))} |")

    def median(key: str) -> Optional[float]:
        values = [o[key] for o in overall if o.get(key) is not None and not (isinstance(o[key], float) and math.isnan(o[key]))]
        return statistics.median(values) if values else None

    print(f"| **median** | {fmt(median('reached'), 0)} | {fmt(median('last_step'), 0)} | {fmt(median('last_return'), 2)} | "
          f"{fmt(median('best_return'), 2)} | {fmt(median('elapsed'))} | {fmt(median('overall_sps'))} | {fmt(median('last_sps'))} |")
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "make-config":
        return make_config(argv[1:])
    if argv and argv[0] == "sac-step":
        return sac_step(argv[1:])
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    if len(argv) < 2:
        print(__doc__)
        return 2
    return summarize(argv[0], argv[1:])


if __name__ == "__main__":
    sys.exit(main())
