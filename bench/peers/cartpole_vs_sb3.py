"""PPO on CartPole-v1: wall-clock until the mean return of the last 20 episodes is >= 475.

ml_arl and Stable-Baselines3 side by side, seed after seed (never both at once):

* ml_arl: ``arl-learn config/ppo/CartPole.yaml --seed S`` as a subprocess, its env swapped for
  bench.common.episode_log (CartPole-v1 that logs each finished episode with a timestamp). Time runs
  from the process start to the first moment the episodes of all workers, merged in time order,
  reach the mean; the run is then interrupted (SIGINT, exit 0). It stops by itself at max_steps.
* SB3: PPO with rl-baselines3-zoo's CartPole-v1 hyperparameters on make_vec_env (DummyVecEnv, 8
  envs, Monitor), device cpu, as many torch threads as arl-learn uses. Time runs from env
  creation; a callback on the Monitor episodes stops training at the mean. After the zoo's 1e5
  steps it continues up to 3e5 (the linear schedules then run over the 3e5 total).

Prints per-seed times, medians and the ratio of the medians ours/SB3 (the issue's goal: <= 0.5).
It is a measurement, not a test: the exit code does not depend on the ratio.

    python bench/peers/cartpole_vs_sb3.py [--seeds 0 1 2] [--num-envs N] [--keep]

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
from typing import TYPE_CHECKING, Any, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if os.path.realpath(sys.path[0] or os.curdir) == os.path.dirname(os.path.realpath(__file__)):  # run as a script:
    sys.path[0] = ROOT  # import bench.* from the repository root, not from this folder

from bench.common.runner import Run, add_seeds_argument, run_grid  # noqa: E402

if TYPE_CHECKING:  # imported where used: the SB3 child, timed from its start, has no use for gymnasium or ml_arl
    from bench.common.episode_log import EpisodeFiles

CONFIG = os.path.join("config", "ppo", "CartPole.yaml")
THRESHOLD = 475.0
WINDOW = 20
SB3_ZOO_STEPS = 100_000
SB3_MAX_STEPS = 300_000
POLL_S = 0.25
SHUTDOWN_TIMEOUT_S = 120.0


@dataclass
class Result:
    seconds: Optional[float]  # None: the mean was not reached
    steps: int  # environment steps when it was reached (or when the run ended)
    episodes: int
    startup: Optional[float] = None  # ml_arl only: process start -> first env built


def first_solved(episodes: Iterable[tuple[float, float]]) -> Optional[tuple[float, int, int]]:
    """(time, steps, episodes) when the mean of the last WINDOW returns first reaches THRESHOLD.

    Episodes are (timestamp, return); on CartPole the return is the episode length.
    """
    window: deque[float] = deque(maxlen=WINDOW)
    steps = 0
    for n, (t, ret) in enumerate(sorted(episodes), start=1):
        window.append(ret)
        steps += int(ret)
        if len(window) == WINDOW and sum(window) / WINDOW >= THRESHOLD:
            return t, steps, n
    return None


def returns(files: EpisodeFiles) -> list[tuple[float, float]]:
    """(time, return) of the episodes logged so far."""
    return [(t, ret) for t, ret, _ in files.episodes]


def run_ours(seed: int, num_envs: Optional[int], keep: bool) -> Result:
    from bench.common.episode_log import EpisodeFiles

    work = tempfile.mkdtemp(prefix=f"cartpole-bench-s{seed}-")
    log_dir = os.path.join(work, "episodes")
    os.makedirs(log_dir)
    arl_learn = os.path.join(os.path.dirname(sys.executable), "arl-learn")
    cmd = [
        arl_learn, CONFIG, "--run-id", f"cartpole-bench-s{seed}", "--seed", str(seed),
        "--results-dir", os.path.join(work, "results"), "--force", "--torch-device", "cpu",
        "--env", "bench.common.episode_log:make_env",
    ]
    if num_envs is not None:
        cmd += ["--num-envs", str(num_envs)]
    cmd += ["--env-args", "env_id=CartPole-v1", f"log_dir={log_dir}"]  # last: --env-args takes everything after it
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
                if first_solved(returns(files)) is not None:
                    proc.send_signal(signal.SIGINT)
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
    solved = first_solved(returns(files))
    if solved is None:
        return Result(None, sum(n for _, _, n in files.episodes), len(files.episodes), startup)
    t, steps, n = solved
    return Result(t - t0, steps, n, startup)


def run_sb3(seed: int) -> tuple[Result, Optional[float]]:
    """SB3 in a fresh process, timed from process start like arl-learn; also returns SB3's own
    time from env creation (what an in-process timer would show)."""
    log_dir = tempfile.mkdtemp(prefix="cartpole-bench-sb3-")  # SB3's logger writes a folder per run
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
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv

    class StopAtMeanReturn(BaseCallback):
        def __init__(self, t0: float):
            super().__init__()
            self.t0 = t0
            self.window: deque[float] = deque(maxlen=WINDOW)
            self.episodes = 0
            self.solved: Optional[float] = None
            self.solved_wall: Optional[float] = None

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    self.window.append(float(info["episode"]["r"]))
                    self.episodes += 1
            if len(self.window) == WINDOW and sum(self.window) / WINDOW >= THRESHOLD:
                self.solved = time.perf_counter() - self.t0
                self.solved_wall = time.time()
                return False
            return True

    def linear(initial: float) -> Any:  # rl-zoo's lin_<value>
        return lambda progress_remaining: progress_remaining * initial

    t0 = time.perf_counter()
    vec_env = make_vec_env("CartPole-v1", n_envs=8, seed=seed, vec_env_cls=DummyVecEnv)
    model = PPO(
        "MlpPolicy", vec_env, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20,
        ent_coef=0.0, learning_rate=linear(1e-3), clip_range=linear(0.2), seed=seed, device="cpu", verbose=0,
    )
    callback = StopAtMeanReturn(t0)
    model.learn(SB3_ZOO_STEPS, callback=callback)
    if callback.solved is None:
        model.learn(SB3_MAX_STEPS - model.num_timesteps, callback=callback, reset_num_timesteps=False)
    vec_env.close()
    return Result(callback.solved, int(model.num_timesteps), callback.episodes), callback.solved, callback.solved_wall


def _seconds(value: Optional[float], unit: str = "") -> str:
    return "not reached" if value is None else f"{value:.1f}{unit}"


def _median(results: list[Result]) -> float:
    return statistics.median(math.inf if r.seconds is None else r.seconds for r in results)


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    add_seeds_argument(p, [0, 1, 2], "seeds, run one after another")
    p.add_argument("--num-envs", type=int, help="arl-learn --num-envs (default: the config's)")
    p.add_argument("--keep", action="store_true", help="keep the arl-learn results folders (run_logs/timers.json)")
    p.add_argument("--sb3-child", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.sb3_child is not None:
        sb3_child(args.sb3_child)
        return 0
    if importlib.util.find_spec("stable_baselines3") is None:
        print('stable-baselines3 is not installed; install the bench extra: pip install -e ".[bench]"', file=sys.stderr)
        return 2

    import stable_baselines3
    import torch
    import yaml

    from ml_arl.training.controller import set_torch_threads

    set_torch_threads()  # the same count arl-learn sets for itself
    with open(os.path.join(ROOT, CONFIG)) as f:
        num_envs = args.num_envs or yaml.safe_load(f)["env_settings"]["num_envs"]
    print(
        f"PPO CartPole-v1, wall-clock until the mean return of the last {WINDOW} episodes >= {THRESHOLD:g}\n"
        f"ml_arl: arl-learn {CONFIG} --num-envs {num_envs}, time from process start\n"
        f"SB3 {stable_baselines3.__version__}: rl-zoo hyperparameters, DummyVecEnv x8, in a fresh process, time from "
        "process start (in brackets: from env creation, imports excluded)\n"
        f"cpus {os.cpu_count()}, torch {torch.__version__} with {torch.get_num_threads()} threads, device cpu",
        flush=True,
    )
    ours: list[Result] = []
    sb3: list[Result] = []
    sb3_inproc: list[Optional[float]] = []

    def one(run: Run) -> tuple[Result, Optional[float]]:  # a side ("config") of one seed
        return (run_ours(run.seed, args.num_envs, args.keep), None) if run.config == "ml_arl" else run_sb3(run.seed)

    def report(run: Run, result: tuple[Result, Optional[float]]) -> None:
        if run.config == "ml_arl":
            ours.append(result[0])
            print(f"  seed {run.seed}: ml_arl {_seconds(ours[-1].seconds, ' s')}", flush=True)
        else:
            sb3.append(result[0])
            sb3_inproc.append(result[1])
            print(f"  seed {run.seed}: SB3    {_seconds(sb3[-1].seconds, ' s')}", flush=True)

    run_grid(one, seeds=args.seeds, configs=["ml_arl", "SB3"], order=("seed", "config", "task"), on_result=report)

    print(f"\n{'seed':>4} | {'ml_arl s':>11} {'startup s':>9} {'steps':>7} {'episodes':>8} | "
          f"{'SB3 s':>11} {'steps':>7} {'episodes':>8}")
    for seed, a, b, inproc in zip(args.seeds, ours, sb3, sb3_inproc):
        startup = "-" if a.startup is None else f"{a.startup:.1f}"
        print(f"{seed:>4} | {_seconds(a.seconds):>11} {startup:>9} {a.steps:>7} {a.episodes:>8} | "
              f"{_seconds(b.seconds):>11} ({_seconds(inproc)}) {b.steps:>7} {b.episodes:>8}")
    ours_median, sb3_median = _median(ours), _median(sb3)
    print(f"median ml_arl {ours_median:.1f} s, median SB3 {sb3_median:.1f} s")
    if math.isinf(ours_median) or math.isinf(sb3_median):
        print("ratio ours/SB3: undefined (a median did not reach the mean)")
    else:
        ratio = ours_median / sb3_median
        print(f"ratio ours/SB3 {ratio:.2f} (goal <= 0.5: {'met' if ratio <= 0.5 else 'not met'})")
    print("steps/episodes: at the moment the mean was reached (or at the end of the run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
