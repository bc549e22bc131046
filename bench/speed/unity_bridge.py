"""Environment steps per second through the Unity bridge (mlagents-envs 0.28, gRPC), played by the
stand-in Unity build of tests/support/unity_standin (behavior Seeker: obs [2], 1 continuous action).

Measurements, each for --agents (agents per env, default 1 and 16):

* ``raw``: plain mlagents-envs ``UnityEnvironment`` (file_name = the stand-in launcher,
  no_graphics, the three side channels ml_arl uses: engine configuration with the default
  engine settings, environment parameters, stats) in this process, looping
  get_steps / set_actions (random actions) / step. The mlagents-envs baseline.
* ``ours-1proc``: ml_arl's ``UnityBuildEnv``, built in this process by the very factory a worker
  calls (``unity_factory`` -> ``make_unity_env``), same loop: what our subclass costs or saves.
* ``pipeline``: the full acting pipeline, ``SubprocessEnvManager`` with --workers worker
  processes (default 1 and 4), each an EnvRunner stepping its own build with the numpy muscle of
  a small ActorCritic (2 x 32) in batches of steps_per_message (16). Env steps/s is the sum over
  workers of the ``env_steps`` of the batches received; trajectories are dropped (no trainer).

Every measurement starts its own build(s) on fresh free ports, steps a warm-up, then times
--repeats consecutive windows of --seconds each; printed: the median env steps/s and agent
steps/s (= env steps/s x agents) with the single windows, and the ratios ours-1proc / raw and
pipeline(max workers) / pipeline(min workers), all measured in this run. The stand-in sends
stats side-channel records (as a training build does); ``--no-stats`` turns them off for raw and
ours-1proc only (the pipeline always keeps them: it is what training sees).

ours-1proc and pipeline are measured with ``fast_bridge`` off (bridge "classic": mlagents-envs'
own messages) and on (bridge "fast": ml_arl.envs.adapters.unity_fast).

    python bench/speed/unity_bridge.py [--seconds S] [--repeats R] [--agents 1 16] [--workers 1 4]
                                       [--no-stats] [--profile N]

``--raw-python PY`` also runs the raw loop with another interpreter (bench/peers/unity_raw.py, which
imports no ml_arl): an ML-Agents user's own venv, e.g. ML-Agents 1.1.0's, which ``make peer-mlagents``
makes (``--raw-python .venv-mlagents/bin/python``: mlagents-envs 1.1.0 on protobuf 3.20), measured
right after our raw loop; the ratios to it are printed too.

``--profile N`` also runs the raw loop under cProfile (one window per agents count) and prints
its N most expensive functions (own time). The default invocation takes about 2-3 minutes on
a 2-core machine; the pipeline shares those cores with the builds it drives.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if os.path.realpath(sys.path[0] or os.curdir) == os.path.dirname(os.path.realpath(__file__)):  # run as a script:
    sys.path[0] = ROOT  # import tests.* from the repository root, not from this folder
elif ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import ml_arl  # noqa: E402,F401,I001  first: mlagents-envs' modules then load ml_arl's Unity messages (ml_arl/protocol)
import numpy as np  # noqa: E402
from mlagents_envs import env_utils, logging_util  # noqa: E402
from mlagents_envs.base_env import BaseEnv  # noqa: E402
from mlagents_envs.environment import UnityEnvironment  # noqa: E402
from mlagents_envs.side_channel.engine_configuration_channel import EngineConfigurationChannel  # noqa: E402
from mlagents_envs.side_channel.environment_parameters_channel import EnvironmentParametersChannel  # noqa: E402
from mlagents_envs.side_channel.stats_side_channel import StatsSideChannel  # noqa: E402

from ml_arl.core.env_factory import EnvFactory  # noqa: E402
from ml_arl.envs.sources import unity_factory  # noqa: E402
from ml_arl.envs.backends.subprocess_env_manager import SubprocessEnvManager  # noqa: E402
from ml_arl.envs.adapters.unity_env import port_is_free  # noqa: E402
from ml_arl.core.actor_weights import PolicyMessage  # noqa: E402
from ml_arl.settings import CheckpointSettings, EngineSettings, EnvSettings, RunOptions  # noqa: E402
from tests.support.unity_standin import make_build  # noqa: E402

SEEKER = "Seeker?team=0"
TIMEOUT_WAIT = 30
STEPS_PER_STATS_READ = 16  # raw / ours-1proc drain the stats channel as often as an EnvRunner does
WARMUP_STEPS = 50  # raw / ours-1proc
WARMUP_S = 1.0  # pipeline: after every worker has delivered a batch
HIDDEN_UNITS = 32
PORT_RANGE = (20000, 60000)

_used_ports: set[int] = set()


# --------------------------------------------------------------------------- ports


def free_base_port(n: int) -> int:
    """A random base port with ``n`` consecutive ports that bind now and were not used in this run."""
    for _ in range(1000):
        base = random.randint(PORT_RANGE[0], PORT_RANGE[1] - n)
        ports = range(base, base + n)
        if not _used_ports.intersection(ports) and all(port_is_free(p) for p in ports):
            _used_ports.update(ports)
            return base
    raise RuntimeError(f"no {n} consecutive free ports in {PORT_RANGE}")


# --------------------------------------------------------------------------- fast bridge switch


def with_bridge(factory: EnvFactory, fast: bool) -> EnvFactory:
    """The factory with the fast bridge switched on or off."""
    return EnvFactory(factory.description, factory.build, {**factory.kwargs, "fast_bridge": fast},
                      factory.pass_worker_id, factory.pass_seed)


@contextmanager
def in_this_process(fast: Optional[bool]) -> Iterator[None]:
    """make_unity_env patches mlagents' launcher in its process: undo it after."""
    launcher = env_utils.launch_executable
    try:
        yield
    finally:
        env_utils.launch_executable = launcher


# --------------------------------------------------------------------------- the setups


@dataclass
class Bench:
    build: Path
    work: Path
    seconds: float
    repeats: int
    no_stats: bool
    counter: int = 0
    profile_top: int = 15
    profiles: list[tuple[str, str]] = field(default_factory=list)

    def standin_args(self, agents: int, stats: bool) -> list[str]:
        return ["--agents", str(agents), "--behaviors", "Seeker", *([] if stats else ["--no-stats"])]

    def log_folder(self) -> str:
        self.counter += 1
        path = self.work / f"logs-{self.counter}"
        path.mkdir(parents=True, exist_ok=True)
        return str(path)

    def factory(self, agents: int, workers: int, stats: bool) -> EnvFactory:
        """What arl-learn builds for ``--env <stand-in> --num-envs workers --no-graphics``."""
        self.counter += 1
        options = RunOptions(
            env_settings=EnvSettings(
                env_path=str(self.build), env_args=self.standin_args(agents, stats), num_envs=workers,
                base_port=free_base_port(workers), timeout_wait=TIMEOUT_WAIT,
            ),
            engine_settings=EngineSettings(no_graphics=True),
            checkpoint_settings=CheckpointSettings(run_id=f"bench-{self.counter}", results_dir=str(self.work)),
        )
        return unity_factory(options, seed=0)

    # ------------------------------------------------------------ raw / ours-1proc
    def raw_env(self, agents: int) -> tuple[BaseEnv, Callable[[], Any]]:
        engine_settings = EngineSettings()
        engine = EngineConfigurationChannel()
        engine.set_configuration_parameters(
            width=engine_settings.width, height=engine_settings.height,
            quality_level=engine_settings.quality_level, time_scale=engine_settings.time_scale,
            target_frame_rate=engine_settings.target_frame_rate,
            capture_frame_rate=engine_settings.capture_frame_rate,
        )
        stats = StatsSideChannel()
        env = UnityEnvironment(
            file_name=str(self.build), worker_id=0, base_port=free_base_port(1), seed=0, no_graphics=True,
            timeout_wait=TIMEOUT_WAIT, additional_args=self.standin_args(agents, not self.no_stats),
            side_channels=[engine, EnvironmentParametersChannel(), stats],
            log_folder=self.log_folder(),
        )
        return env, stats.get_and_reset_stats

    def ours_env(self, agents: int, fast: Optional[bool]) -> tuple[BaseEnv, Callable[[], Any]]:
        env = with_bridge(self.factory(agents, 1, not self.no_stats), fast)(0, 0)
        return env, env.take_environment_stats  # type: ignore[attr-defined]

    def loop(self, make: Callable[[], tuple[BaseEnv, Callable[[], Any]]], profile: Optional[str] = None) -> list[float]:
        """Env steps/s of --repeats windows (one under cProfile) of the get_steps/set_actions/step loop;
        ``make`` returns the env and what drains its stats channel."""
        env, take_stats = make()
        try:
            env.reset()
            spec = env.behavior_specs[SEEKER]

            def run(steps: int) -> None:
                for i in range(steps):
                    decision, _terminal = env.get_steps(SEEKER)
                    if len(decision):
                        env.set_actions(SEEKER, spec.action_spec.random_action(len(decision)))
                    env.step()
                    if i % STEPS_PER_STATS_READ == STEPS_PER_STATS_READ - 1:
                        take_stats()

            run(WARMUP_STEPS)
            rates: list[float] = []
            windows = 1 if profile else self.repeats
            profiler = cProfile.Profile() if profile else None
            for _ in range(windows):
                steps = 0
                if profiler is not None:
                    profiler.enable()
                t0 = time.perf_counter()
                while time.perf_counter() - t0 < self.seconds:
                    run(STEPS_PER_STATS_READ)
                    steps += STEPS_PER_STATS_READ
                rates.append(steps / (time.perf_counter() - t0))
                if profiler is not None:
                    profiler.disable()
            if profiler is not None:
                out = io.StringIO()
                pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(self.profile_top)
                self.profiles.append((f"{profile}: {rates[0]:,.0f} steps/s under cProfile", out.getvalue()))
            return rates
        finally:
            env.close()

    def raw_elsewhere(self, python: str, agents: int) -> tuple[list[float], str]:
        """The raw loop in another interpreter (bench/peers/unity_raw.py): its windows' env steps/s and
        the mlagents-envs / protobuf versions it ran with."""
        e = EngineSettings()
        cmd = [python, os.path.join(ROOT, "bench", "peers", "unity_raw.py"), "--build", str(self.build),
               "--port", str(free_base_port(1)), "--behavior", SEEKER, "--seconds", str(self.seconds),
               "--repeats", str(self.repeats), "--timeout-wait", str(TIMEOUT_WAIT), "--engine",
               *(str(v) for v in (e.width, e.height, e.quality_level, e.time_scale, e.target_frame_rate,
                                  e.capture_frame_rate)),
               "--", *self.standin_args(agents, not self.no_stats)]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=str(self.work))
        if out.returncode != 0:
            raise SystemExit(f"{python} bench/peers/unity_raw.py failed ({out.returncode}):\n{out.stderr[-2000:]}")
        data = json.loads(out.stdout.strip().splitlines()[-1])
        return data["rates"], f"mlagents-envs {data['mlagents_envs']}, protobuf {data['protobuf']}, Python {data['python']}"

    # ------------------------------------------------------------ pipeline
    def pipeline(self, agents: int, workers: int, fast: Optional[bool]) -> list[float]:
        factory = with_bridge(self.factory(agents, workers, stats=True), fast)
        settings = EnvSettings(num_envs=workers, env_path=str(self.build), timeout_wait=TIMEOUT_WAIT)
        manager = SubprocessEnvManager(factory, settings, 0)
        try:
            specs = manager.start()
            manager.set_policy(SEEKER, policy_message(specs[SEEKER]))
            seen: set[int] = set()
            deadline = time.monotonic() + 2 * TIMEOUT_WAIT
            while len(seen) < workers and time.monotonic() < deadline:
                seen.update(batch.worker_id for batch in manager.step())
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < WARMUP_S:
                manager.step()
            rates: list[float] = []
            for _ in range(self.repeats):
                steps = 0
                t0 = time.perf_counter()
                while time.perf_counter() - t0 < self.seconds:
                    steps += sum(batch.env_steps for batch in manager.step())
                rates.append(steps / (time.perf_counter() - t0))
            return rates
        finally:
            manager.close()


def policy_message(spec: Any) -> PolicyMessage:
    import torch

    from ml_arl.networks.actor_critic import ActorCritic
    from ml_arl.settings import NetworkSettings

    torch.manual_seed(0)
    network = ActorCritic(spec, NetworkSettings(hidden_units=HIDDEN_UNITS, num_layers=2))
    return PolicyMessage(1, network.muscle_weights(), 64, False)


# --------------------------------------------------------------------------- main


@dataclass
class Row:
    name: str
    bridge: str
    agents: int
    workers: int
    runs: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.runs)


def ratio_line(label: str, num: Row, den: Row) -> str:
    return (f"{label}: {num.median / den.median:.2f}x  "
            f"({num.median:,.0f} / {den.median:,.0f} env steps/s, {num.agents} agent{'s' * (num.agents != 1)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="length of one timed window")
    parser.add_argument("--repeats", type=int, default=3, help="timed windows per measurement (median)")
    parser.add_argument("--agents", type=int, nargs="+", default=[1, 16], help="agents per env")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 4], help="pipeline worker counts")
    parser.add_argument("--no-stats", action="store_true", help="raw and ours-1proc: the stand-in sends no stats")
    parser.add_argument("--raw-python", metavar="PY",
                        help="also the raw loop under this interpreter (bench/peers/unity_raw.py; ML-Agents 1.1.0's: "
                             "make peer-mlagents, then .venv-mlagents/bin/python)")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="also profile the raw loop and print its N costliest functions")
    args = parser.parse_args()
    if args.raw_python and shutil.which(args.raw_python) is None:
        parser.error(f"--raw-python {args.raw_python}: no such interpreter; `make peer-mlagents` makes ML-Agents 1.1.0's "
                     "venv, whose is .venv-mlagents/bin/python")
    logging_util.set_log_level(logging_util.WARNING)  # what make_unity_env does without --debug
    np.random.seed(0)
    random.seed()  # ports: a different base every run

    bridges: list[Optional[bool]] = [False, True]

    def bridge_name(fast: Optional[bool]) -> str:
        return "-" if fast is None else ("fast" if fast else "classic")

    work = Path(tempfile.mkdtemp(prefix="unity-bridge-bench-"))
    started = time.perf_counter()
    rows: list[Row] = []
    try:
        bench = Bench(make_build(work / "build"), work, args.seconds, args.repeats, args.no_stats)
        bench.profile_top = args.profile or 15
        for agents in args.agents:
            rows.append(Row("raw", "-", agents, 1, bench.loop(partial(bench.raw_env, agents))))
            print(f"  raw, {agents} agents: {rows[-1].median:,.0f} env steps/s", flush=True)
            if args.raw_python:
                ref, versions = bench.raw_elsewhere(args.raw_python, agents)
                rows.append(Row("raw-ref", "-", agents, 1, ref))
                print(f"  raw-ref ({versions}), {agents} agents: {rows[-1].median:,.0f} env steps/s", flush=True)
            for fast in bridges:
                with in_this_process(fast):
                    runs = bench.loop(partial(bench.ours_env, agents, fast))
                rows.append(Row("ours-1proc", bridge_name(fast), agents, 1, runs))
                print(f"  ours-1proc ({bridge_name(fast)}), {agents} agents: {rows[-1].median:,.0f} env steps/s",
                      flush=True)
            for fast in bridges:
                for workers in args.workers:
                    rows.append(Row("pipeline", bridge_name(fast), agents, workers,
                                    bench.pipeline(agents, workers, fast)))
                    print(f"  pipeline ({bridge_name(fast)}), {agents} agents, {workers} workers: "
                          f"{rows[-1].median:,.0f} env steps/s", flush=True)
            if args.profile:
                bench.loop(partial(bench.raw_env, agents), profile=f"raw, {agents} agents")
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print()
    print(f"stand-in Seeker, random actions (raw/ours) or a 2x{HIDDEN_UNITS} muscle (pipeline); "
          f"median of {args.repeats} x {args.seconds:g} s; stats {'off' if args.no_stats else 'on'} for raw/ours")
    header = f"{'measurement':<12} {'bridge':<8} {'agents':>6} {'workers':>7} {'env steps/s':>12} {'agent steps/s':>14}  runs"
    print(header)
    print("-" * len(header))
    for r in rows:
        windows = ", ".join(f"{x:,.0f}" for x in r.runs)
        print(f"{r.name:<12} {r.bridge:<8} {r.agents:>6} {r.workers:>7} {r.median:>12,.0f} "
              f"{r.median * r.agents:>14,.0f}  {windows}")
    print()

    def find(name: str, agents: int, bridge: str, workers: int = 1) -> Optional[Row]:
        return next((r for r in rows if (r.name, r.agents, r.bridge, r.workers) == (name, agents, bridge, workers)), None)

    lo, hi = min(args.workers), max(args.workers)
    for agents in args.agents:
        raw = find("raw", agents, "-")
        ref = find("raw-ref", agents, "-")
        for fast in bridges:
            ours = find("ours-1proc", agents, bridge_name(fast))
            if raw and ours:
                print(ratio_line(f"ours-1proc{'' if fast is None else f' ({bridge_name(fast)})'} / raw", ours, raw))
            if ref and ours:
                print(ratio_line(f"ours-1proc{'' if fast is None else f' ({bridge_name(fast)})'} / raw-ref", ours, ref))
        if lo != hi:
            for fast in bridges:
                one, many = find("pipeline", agents, bridge_name(fast), lo), find("pipeline", agents, bridge_name(fast), hi)
                if one and many:
                    suffix = "" if fast is None else f" ({bridge_name(fast)})"
                    print(ratio_line(f"pipeline {hi} workers / {lo} worker{'s' * (lo != 1)}{suffix}", many, one))
        for name, workers in [("ours-1proc", 1)] + [("pipeline", w) for w in args.workers]:
            slow, fast_row = find(name, agents, "classic", workers), find(name, agents, "fast", workers)
            if slow and fast_row:
                what = name if name == "ours-1proc" else f"pipeline {workers} worker{'s' * (workers != 1)}"
                print(ratio_line(f"{what} fast / classic", fast_row, slow))
    print(f"total time: {time.perf_counter() - started:.0f} s")
    for title, text in bench.profiles:
        print(f"\ncProfile of the raw loop ({title}), by own time:")
        print("\n".join(line for line in text.splitlines() if line.strip())[:6000])


if __name__ == "__main__":
    main()
