"""Start-up: time from the command to the first environment step, and peak memory, for short runs
(issue 49's goals 1 and 2), each run against ``import torch`` and against Stable-Baselines3 measured
in the same call.

Each round runs, one after another and in this order, every case once; ``--repeats`` rounds are
interleaved so that a slower minute of the machine falls on every case alike:

- ``import torch``: ``python -c "import torch"``, launch to exit;
- ml_arl: ``arl-learn`` on ``config/ppo/Reach.yaml`` (``make demo``'s run), ``config/ppo/CartPole.yaml``,
  ``config/arl/GridDefense.yaml`` and the palaestrAI run file ``bench/peers/palaestrai/dummy_two_agents.yml``,
  each cut to ``--steps`` steps a phase (the run file as it is). The first step is timers.json's
  ``first_step_time`` (when the trainer side sees the first environment step) minus the launch;
- Stable-Baselines3's PPO on CartPole-v1 (the ``bench`` extra): launch to the first call of its
  callback's ``_on_step``, which runs after the first environment step; skipped if not installed;
- ``arl-learn --help``, and ``--check`` on Reach and on the run file: launch to exit (they must
  not wait for torch);
- ML-Agents 1.1.0 is not run: its gym wrapper needs a Unity build to step (``make peer-mlagents``
  installs it for bench/peers/).

With ``--busy`` another training run (``config/ppo/Reach.yaml`` without a step limit, 2 workers)
runs the whole time, as when a study's trials or the test suite share the machine; it starts a
few seconds before the first round and is stopped (SIGTERM, then SIGKILL) after the last.

Peak memory is the PSS of the whole process tree (arl-learn, its fork server, its workers), summed,
sampled every 20 ms until the run ends (bench/common/process_tree.py). Medians over the rounds;
ratios are of medians. A second table splits each of our runs' peak by process: arl-learn itself,
the fork server (its child) and the workers (the server's children), and gives what the tree holds
beyond ``import torch``'s own peak.

    python bench/speed/startup.py [--repeats 3] [--steps 2000] [--busy]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

import yaml

if os.path.realpath(sys.path[0] or os.curdir) == os.path.dirname(os.path.realpath(__file__)):  # run as a script:
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))  # bench.* from the root

from bench.common.process_tree import PeakMemory  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
OURS = {
    "Reach": ROOT / "config" / "ppo" / "Reach.yaml",
    "CartPole": ROOT / "config" / "ppo" / "CartPole.yaml",
    "GridDefense": ROOT / "config" / "arl" / "GridDefense.yaml",
    "palaestrAI file": ROOT / "bench" / "peers" / "palaestrai" / "dummy_two_agents.yml",
}
SB3 = """
import sys, time
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
class First(BaseCallback):
    def _on_step(self):
        print("FIRST_STEP", time.time(), flush=True)
        return False
PPO("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=64, device="cpu", seed=1).learn(64, callback=First())
"""


def timed(cmd: list[str], cwd: Path, timeout: float) -> tuple[float, subprocess.CompletedProcess[str], PeakMemory]:
    """Launch ``cmd``; (its launch time, its outcome, its tree's peak memory)."""
    started = time.time()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sampler = PeakMemory(proc.pid)
    sampler.start()
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    finally:
        sampler.stop()
    return started, subprocess.CompletedProcess(cmd, proc.returncode, out, err), sampler


def short_config(path: Path, steps: int, folder: Path) -> Path:
    """The config with every behavior's and phase's max_steps cut to ``steps`` (a run file stays as it is)."""
    if path.suffix == ".yml":
        return path
    config = yaml.safe_load(path.read_text())
    for settings in [config.get("default_settings") or {}, *(config.get("behaviors") or {}).values()]:
        settings["max_steps"] = min(int(settings.get("max_steps", steps)), steps)
    for phase in config.get("phases") or []:
        if phase.get("max_steps"):
            phase["max_steps"] = min(int(phase["max_steps"]), steps)
    out = folder / f"{path.stem}.yaml"
    out.write_text(yaml.safe_dump(config))
    return out


def run_ours(name: str, config: Path, folder: Path, index: int) -> dict[str, float]:
    run_id = f"startup-{name.replace(' ', '-')}-{index}"
    cmd = [sys.executable, "-m", "ml_arl.cli.learn", str(config), "--run-id", run_id, "--results-dir", str(folder / "results")]
    cwd = config.parent if config.suffix == ".yml" else ROOT
    started, done, memory = timed(cmd, cwd, 900)
    if done.returncode != 0:
        raise SystemExit(f"{name}: arl-learn exited {done.returncode}: {(done.stderr or done.stdout).strip().splitlines()[-1:]}")
    meta = json.loads((folder / "results" / run_id / "run_logs" / "timers.json").read_text())["metadata"]
    parts = {depth: sum(kb for d, kb in memory.peak_parts if d == depth) / 1024 for depth in (0, 1, 2)}
    workers = sum(1 for d, _kb in memory.peak_parts if d == 2)
    return {"first_step_s": float(meta["first_step_time"]) - started, "peak_pss_mb": memory.peak_pss_mb,
            "main_mb": parts[0], "server_mb": parts[1], "workers_mb": parts[2], "workers": workers}


QUICK = {  # the commands that must not wait for torch (issue 49: at most 0.3x its import), launch to exit
    "arl-learn --help": ["--help"],
    "arl-learn Reach --check": [str(OURS["Reach"]), "--check"],
    "arl-learn palaestrAI file --check": [str(OURS["palaestrAI file"]), "--check"],
}


def run_quick(args: list[str], folder: Path) -> float:
    cmd = [sys.executable, "-m", "ml_arl.cli.learn", *args]
    if "--check" in args:
        cmd += ["--results-dir", str(folder / "results")]
    started, done, _ = timed(cmd, ROOT, 300)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)}: exited {done.returncode}: {(done.stderr or done.stdout).strip().splitlines()[-1:]}")
    return time.time() - started


def run_torch_import() -> dict[str, float]:
    started, done, memory = timed([sys.executable, "-c", "import torch"], ROOT, 300)
    return {"first_step_s": time.time() - started, "peak_pss_mb": memory.peak_pss_mb}


def run_sb3() -> Optional[dict[str, float]]:
    started, done, memory = timed([sys.executable, "-c", SB3], ROOT, 300)
    marks = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("FIRST_STEP")]
    if done.returncode != 0 or not marks:
        return None
    return {"first_step_s": float(marks[0]) - started, "peak_pss_mb": memory.peak_pss_mb}


BUSY_WARMUP_S = 5.0  # the other run is stepping by then (its own first step takes about 1 s)


def start_other_run(folder: Path) -> subprocess.Popen[bytes]:
    """``--busy``: a Reach run with no practical step limit, in a session of its own."""
    config = yaml.safe_load(OURS["Reach"].read_text())
    for settings in [config.get("default_settings") or {}, *(config.get("behaviors") or {}).values()]:
        settings["max_steps"] = 10**9
    path = folder / "busy.yaml"
    path.write_text(yaml.safe_dump(config))
    cmd = [sys.executable, "-m", "ml_arl.cli.learn", str(path), "--run-id", "busy", "--results-dir", str(folder / "busy")]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    time.sleep(BUSY_WARMUP_S)
    if proc.poll() is not None:
        raise SystemExit(f"--busy: the other run exited {proc.returncode} before the measurement began")
    return proc


def stop_other_run(proc: subprocess.Popen[bytes]) -> None:
    for sig, wait_s in ((signal.SIGTERM, 60.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def sb3_installed() -> bool:
    probe = subprocess.run([sys.executable, "-c", "import stable_baselines3"], capture_output=True, timeout=120)
    return probe.returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds (default: 3)")
    parser.add_argument("--steps", type=int, default=2000, help="max_steps of each behavior and phase (default: 2000)")
    parser.add_argument("--busy", action="store_true", help="with another training run on the machine the whole time")
    args = parser.parse_args()
    with_sb3 = sb3_installed()
    results: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        folder = Path(tmp)
        configs = {name: short_config(path, args.steps, folder) for name, path in OURS.items()}
        other = start_other_run(folder) if args.busy else None
        try:
            rounds(args, configs, folder, with_sb3, results)
        finally:
            if other is not None:
                stop_other_run(other)
    report(args, results, with_sb3)


def rounds(args: argparse.Namespace, configs: dict[str, Path], folder: Path, with_sb3: bool,
           results: dict[str, list[dict[str, float]]]) -> None:
    for index in range(args.repeats):
        results.setdefault("import torch", []).append(run_torch_import())
        for name, config in configs.items():
            results.setdefault(name, []).append(run_ours(name, config, folder, index))
        for name, quick_args in QUICK.items():
            results.setdefault(name, []).append({"exit_s": run_quick(quick_args, folder)})
        if with_sb3:
            sb3 = run_sb3()
            if sb3 is not None:
                results.setdefault("SB3 PPO CartPole", []).append(sb3)
        print(f"round {index + 1} of {args.repeats} done", file=sys.stderr, flush=True)


def report(args: argparse.Namespace, results: dict[str, list[dict[str, float]]], with_sb3: bool) -> None:
    med: dict[str, dict[str, Any]] = {
        name: {k: statistics.median(r[k] for r in runs) for k in runs[0] if k != "exit_s"}
        for name, runs in results.items() if name not in QUICK
    }
    quick = {name: statistics.median(r["exit_s"] for r in results[name]) for name in QUICK}
    torch_s = med["import torch"]["first_step_s"]
    sb3_s = med.get("SB3 PPO CartPole", {}).get("first_step_s")
    machine = "with another training run on the machine" if args.busy else "on an idle machine"
    print(f"time to the first environment step and peak PSS of the process tree, {machine}; "
          f"medians of {args.repeats} interleaved rounds\n")
    print("| run | first step (s) | / import torch | / SB3's first step | peak PSS (MB) |")
    print("|---|---:|---:|---:|---:|")
    for name, m in med.items():
        vs_sb3 = f"{m['first_step_s'] / sb3_s:.2f}x" if sb3_s else "-"
        print(f"| {name} | {m['first_step_s']:.2f} | {m['first_step_s'] / torch_s:.2f}x | {vs_sb3} | {m['peak_pss_mb']:.0f} |")
    print("\nwhere the peak PSS is (MB, medians): arl-learn's own process, the fork server, the workers it forked")
    print("\n| run | arl-learn | fork server | workers (how many) | of which beyond import torch's |")
    print("|---|---:|---:|---:|---:|")
    torch_mb = med["import torch"]["peak_pss_mb"]
    for name, m in med.items():
        if "main_mb" in m:
            beyond = m["peak_pss_mb"] - torch_mb
            print(f"| {name} | {m['main_mb']:.0f} | {m['server_mb']:.0f} | {m['workers_mb']:.0f} ({m['workers']:.0f}) | {beyond:.0f} |")
    print("\n| command | launch to exit (s) | / import torch |")
    print("|---|---:|---:|")
    for name, seconds in quick.items():
        print(f"| {name} | {seconds:.2f} | {seconds / torch_s:.2f}x |")
    if not with_sb3:
        print("\nStable-Baselines3 is not installed (the bench extra: pip install -e '.[bench]'); its row is left out")


if __name__ == "__main__":
    main()
