"""SAC on Pendulum-v1: wall-clock until the mean return of the last 10 episodes is >= -200.

ml_arl and Stable-Baselines3 side by side, seed after seed (never both at once):

* ml_arl: ``arl-learn config/sac/Pendulum.yaml --seed S`` as a subprocess, its env swapped for
  bench.common.episode_log (Pendulum-v1 that logs each finished episode with a timestamp). Time runs
  from the process start to the first moment the episodes of all workers, merged in time order,
  reach the mean; the run is then interrupted (SIGTERM, which arl-learn handles as Ctrl-C: exit 0;
  SIGINT would be ignored by a bench started in the background). It stops by itself at max_steps.
* SB3: SAC with rl-baselines3-zoo's Pendulum-v1 hyperparameters (``MlpPolicy``, learning_rate
  1e-3, everything else SB3's defaults: 256 x 256 networks, batch 256, buffer 1e6,
  learning_starts 100, one gradient step per env step, tau 0.005, gamma 0.99, entropy
  coefficient learned from 1.0) on make_vec_env (DummyVecEnv, 1 env, Monitor), device cpu, as
  many torch threads as arl-learn uses, in a fresh process timed from its start like arl-learn.
  A callback on the Monitor episodes stops training at the mean. After the zoo's 2e4 steps it
  continues up to 5e4.

Prints per-seed times and steps, medians and the ratio of the medians ours/SB3 (the issue's
goal: <= 0.5). It is a measurement, not a test: the exit code does not depend on the ratio.

    python bench/peers/sac_vs_sb3.py [--seeds 0 1 2] [--config config/sac/Pendulum.yaml] [--keep] [--only ours|sb3]
                               [--max-seconds S]

SB3 is a bench-only extra: ``pip install -e ".[bench]"``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Optional

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if os.path.realpath(sys.path[0] or os.curdir) == os.path.dirname(os.path.realpath(__file__)):  # run as a script:
    sys.path[0] = ROOT  # import bench.* from the repository root, not from this folder

from bench.common.runner import Run, add_seeds_argument, run_grid  # noqa: E402

CONFIG = os.path.join("config", "sac", "Pendulum.yaml")
ENV_ID = "Pendulum-v1"
THRESHOLD = -200.0
WINDOW = 10
SB3_ZOO_STEPS = 20_000
SB3_MAX_STEPS = 50_000
POLL_S = 0.25
SHUTDOWN_TIMEOUT_S = 120.0


@dataclass
class Result:
    seconds: Optional[float]  # None: the mean was not reached
    steps: int  # environment steps of the finished episodes when it was reached (or when the run ended)
    episodes: int
    startup: Optional[float] = None  # ml_arl only: process start -> first env built


def first_solved(episodes: Iterable[tuple[float, float, int]]) -> Optional[tuple[float, int, int]]:
    """(time, steps, episodes) when the mean of the last WINDOW returns first reaches THRESHOLD.

    Episodes are (timestamp, return, length); steps are the summed lengths of the episodes so far."""
    window: deque[float] = deque(maxlen=WINDOW)
    steps = 0
    for n, (t, ret, length) in enumerate(sorted(episodes), start=1):
        window.append(ret)
        steps += length
        if len(window) == WINDOW and sum(window) / WINDOW >= THRESHOLD:
            return t, steps, n
    return None


def run_ours(seed: int, config: str, keep: bool, max_seconds: Optional[float] = None) -> Result:
    from bench.common.episode_log import EpisodeFiles  # here: the SB3 child, timed from its start, needs no gymnasium

    work = tempfile.mkdtemp(prefix=f"pendulum-bench-s{seed}-")
    log_dir = os.path.join(work, "episodes")
    os.makedirs(log_dir)
    arl_learn = os.path.join(os.path.dirname(sys.executable), "arl-learn")
    cmd = [
        arl_learn, config, "--run-id", f"pendulum-bench-s{seed}", "--seed", str(seed),
        "--results-dir", os.path.join(work, "results"), "--force", "--torch-device", "cpu",
        "--env", "bench.common.episode_log:make_env",
        "--env-args", f"env_id={ENV_ID}", f"log_dir={log_dir}",  # last: --env-args takes everything after it
    ]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
    files = EpisodeFiles(log_dir)
    console = os.path.join(work, "console.txt")
    with open(console, "wb") as out:
        t0 = time.time()
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            while proc.poll() is None:
                time.sleep(POLL_S)
                files.update()
                if first_solved(files.episodes) is not None or (max_seconds is not None and time.time() - t0 > max_seconds):
                    proc.send_signal(signal.SIGTERM)  # arl-learn's Ctrl-C path; SIGINT is ignored when the bench runs in the background
                    break
            rc = proc.wait(timeout=SHUTDOWN_TIMEOUT_S)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    files.update()  # the other workers' last lines: the merged order decides the time
    if rc != 0:
        with open(console, errors="replace") as f:
            tail = f.read()[-3000:]
        raise RuntimeError(f"arl-learn exited with {rc} (seed {seed}); its output ends with:\n{tail}")
    if keep:
        print(f"  ml_arl seed {seed}: results kept in {work}", flush=True)
    else:
        shutil.rmtree(work, ignore_errors=True)
    startup = min(files.starts) - t0 if files.starts else None
    solved = first_solved(files.episodes)
    if solved is None:
        return Result(None, sum(n for _, _, n in files.episodes), len(files.episodes), startup)
    t, steps, n = solved
    return Result(t - t0, steps, n, startup)


def run_sb3(seed: int) -> tuple[Result, Optional[float]]:
    """SB3 in a fresh process, timed from process start like arl-learn; also returns SB3's own
    time from env creation (what an in-process timer would show)."""
    log_dir = tempfile.mkdtemp(prefix="pendulum-bench-sb3-")  # SB3's logger writes a folder per run
    try:
        t0 = time.time()
        proc = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--sb3-child", str(seed)],
            capture_output=True, text=True, check=True, cwd=ROOT, env={**os.environ, "SB3_LOGDIR": log_dir},
        )
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)
    child = json.loads(proc.stdout.strip().splitlines()[-1])
    solved_wall = child["solved_wall"]
    seconds = None if solved_wall is None else solved_wall - t0
    return Result(seconds, child["steps"], child["episodes"]), child["solved_in_process"]


def sb3_child(seed: int) -> None:
    import torch

    from ml_arl.training.controller import set_torch_threads

    set_torch_threads()  # the same count arl-learn sets for itself
    torch.manual_seed(seed)
    result, in_process, solved_wall = _run_sb3_here(seed)
    print(json.dumps({"solved_wall": solved_wall, "solved_in_process": in_process,
                      "steps": result.steps, "episodes": result.episodes}))


def _run_sb3_here(seed: int) -> tuple[Result, Optional[float], Optional[float]]:
    from stable_baselines3 import SAC
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv

    class StopAtMeanReturn(BaseCallback):
        def __init__(self, t0: float):
            super().__init__()
            self.t0 = t0
            self.window: deque[float] = deque(maxlen=WINDOW)
            self.episodes = 0
            self.steps = 0  # summed lengths of the finished episodes
            self.solved: Optional[float] = None
            self.solved_wall: Optional[float] = None

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    self.window.append(float(info["episode"]["r"]))
                    self.episodes += 1
                    self.steps += int(info["episode"]["l"])
            if len(self.window) == WINDOW and sum(self.window) / WINDOW >= THRESHOLD:
                self.solved = time.perf_counter() - self.t0
                self.solved_wall = time.time()
                return False
            return True

    t0 = time.perf_counter()
    vec_env = make_vec_env(ENV_ID, n_envs=1, seed=seed, vec_env_cls=DummyVecEnv)
    # rl-baselines3-zoo hyperparams/sac.yml, Pendulum-v1: MlpPolicy, learning_rate 1e-3, n_timesteps 2e4
    model = SAC("MlpPolicy", vec_env, learning_rate=1e-3, seed=seed, device="cpu", verbose=0)
    callback = StopAtMeanReturn(t0)
    model.learn(SB3_ZOO_STEPS, callback=callback)
    if callback.solved is None:
        model.learn(SB3_MAX_STEPS - model.num_timesteps, callback=callback, reset_num_timesteps=False)
    vec_env.close()
    steps = callback.steps if callback.solved is not None else int(model.num_timesteps)
    return Result(callback.solved, steps, callback.episodes), callback.solved, callback.solved_wall


def _seconds(value: Optional[float], unit: str = "") -> str:
    return "not reached" if value is None else f"{value:.1f}{unit}"


def _median(results: list[Result]) -> float:
    return statistics.median(math.inf if r.seconds is None else r.seconds for r in results)


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    add_seeds_argument(p, [0, 1, 2], "seeds, run one after another")
    p.add_argument("--config", default=CONFIG, help=f"arl-learn config (default: {CONFIG})")
    p.add_argument("--only", choices=("ours", "sb3"), help="run one side only (no ratio)")
    p.add_argument("--max-seconds", type=float, help="ml_arl only: interrupt a run after this long (for tuning)")
    p.add_argument("--keep", action="store_true", help="keep the arl-learn results folders (run_logs/timers.json)")
    p.add_argument("--sb3-child", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.sb3_child is not None:
        sb3_child(args.sb3_child)
        return 0
    if args.only != "ours" and importlib.util.find_spec("stable_baselines3") is None:
        print('stable-baselines3 is not installed; install the bench extra: pip install -e ".[bench]"', file=sys.stderr)
        return 2

    import torch

    from ml_arl.training.controller import set_torch_threads

    set_torch_threads()  # the same count arl-learn sets for itself
    sb3_version = "-"
    if args.only != "ours":
        import stable_baselines3

        sb3_version = stable_baselines3.__version__
    print(
        f"SAC {ENV_ID}, wall-clock until the mean return of the last {WINDOW} episodes >= {THRESHOLD:g}\n"
        f"ml_arl: arl-learn {args.config}, time from process start\n"
        f"SB3 {sb3_version}: rl-zoo hyperparameters, DummyVecEnv x1, in a fresh process, time from "
        "process start (in brackets: from env creation, imports excluded)\n"
        f"cpus {os.cpu_count()}, torch {torch.__version__} with {torch.get_num_threads()} threads, device cpu",
        flush=True,
    )
    ours: list[Result] = []
    sb3: list[Result] = []
    sb3_inproc: list[Optional[float]] = []

    def one(run: Run) -> tuple[Result, Optional[float]]:  # a side ("config") of one seed
        if run.config == "ml_arl":
            return run_ours(run.seed, args.config, args.keep, args.max_seconds), None
        return run_sb3(run.seed)

    def report(run: Run, result: tuple[Result, Optional[float]]) -> None:
        if run.config == "ml_arl":
            ours.append(result[0])
            print(f"  seed {run.seed}: ml_arl {_seconds(ours[-1].seconds, ' s')} ({ours[-1].steps} steps)", flush=True)
        else:
            sb3.append(result[0])
            sb3_inproc.append(result[1])
            print(f"  seed {run.seed}: SB3    {_seconds(sb3[-1].seconds, ' s')} ({sb3[-1].steps} steps)", flush=True)

    sides = [side for side, skip in (("ml_arl", "sb3"), ("SB3", "ours")) if args.only != skip]
    run_grid(one, seeds=args.seeds, configs=sides, order=("seed", "config", "task"), on_result=report)

    print(f"\n{'seed':>4} | {'ml_arl s':>11} {'startup s':>9} {'steps':>7} {'episodes':>8} | "
          f"{'SB3 s':>11} {'(in-proc)':>11} {'steps':>7} {'episodes':>8}")
    for i, seed in enumerate(args.seeds):
        left = right = ""
        if ours:
            a = ours[i]
            startup = "-" if a.startup is None else f"{a.startup:.1f}"
            left = f"{_seconds(a.seconds):>11} {startup:>9} {a.steps:>7} {a.episodes:>8}"
        if sb3:
            b, inproc = sb3[i], sb3_inproc[i]
            right = f"{_seconds(b.seconds):>11} {'(' + _seconds(inproc) + ')':>11} {b.steps:>7} {b.episodes:>8}"
        print(f"{seed:>4} | {left:>38} | {right}")
    if ours:
        print(f"median ml_arl {_median(ours):.1f} s, steps {statistics.median(r.steps for r in ours):.0f}")
    if sb3:
        print(f"median SB3 {_median(sb3):.1f} s, steps {statistics.median(r.steps for r in sb3):.0f}")
    if ours and sb3:
        ours_median, sb3_median = _median(ours), _median(sb3)
        if math.isinf(ours_median) or math.isinf(sb3_median):
            print("ratio ours/SB3: undefined (a median did not reach the mean)")
        else:
            ratio = ours_median / sb3_median
            print(f"ratio ours/SB3 {ratio:.2f} (goal <= 0.5: {'met' if ratio <= 0.5 else 'not met'})")
    print("steps/episodes: the finished episodes at the moment the mean was reached (or at the end of the run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
