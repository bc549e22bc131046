"""Wall-clock of arl-learn against ML-Agents 1.1.0's trainer on the same gymnasium task, config, seed and steps.

Each side is one whole command, timed from outside (process start to exit, imports included), run one after
the other (--repeats rounds, the sides alternating), nothing else should be running:

* ours: ``python -m ml_arl.cli.learn <config> --seed N`` (the config's env_settings: 2 workers x 8 copies for
  config/mujoco/mlagents-walker/);
* ML-Agents: ``<mlagents python> bench/peers/mlagents_gym.py --config <config> --env <Task>-v5 --seed N`` (its
  SubprocessEnvManager with the same 2 workers x 8 copies, see that script).

It prints each run's wall-clock and last-10% return, the medians and the ratio ours / ML-Agents. Needs ML-Agents
1.1.0's own venv with gymnasium[mujoco]: ``make peer-mlagents`` makes it in ``.venv-mlagents``, the default of
``--mlagents-python``:

    python bench/peers/wallclock_vs_mlagents.py --tasks Hopper --steps 100000
    python bench/peers/wallclock_vs_mlagents.py --mlagents-python /work/mlref/bin/python --tasks Hopper --steps 100000
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
if Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:  # run as a script:
    sys.path[0] = str(ROOT)  # import bench.* from the repository root, not from this folder

from bench.learning.mujoco import episode_returns  # noqa: E402

MLAGENTS_PYTHON = ROOT / ".venv-mlagents" / "bin" / "python"  # what `make peer-mlagents` makes


def timed(cmd: list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])} ... failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall, proc.stdout


def ours(config: dict, task: str, seed: int, results: Path) -> tuple[float, float]:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(config, f)
        path = Path(f.name)
    try:
        run_id = f"ours-{task}-s{seed}"
        wall, _ = timed([sys.executable, "-m", "ml_arl.cli.learn", str(path), "--run-id", run_id, "--seed", str(seed),
                         "--results-dir", str(results), "--force"])
    finally:
        path.unlink()
    returns = episode_returns(results / run_id)
    tail = returns[-max(1, len(returns) // 10):]
    return wall, statistics.fmean(tail)


def mlagents(python: str, config_path: Path, task: str, version: str, seed: int, steps: int, results: Path) -> tuple[float, float]:
    wall, out = timed([python, str(ROOT / "bench" / "peers" / "mlagents_gym.py"), "--config", str(config_path),
                       "--env", f"{task}-{version}", "--seed", str(seed), "--steps", str(steps),
                       "--results-dir", str(results), "--run-id", f"ml-{task}-s{seed}"])
    found = re.search(r"SCORE seed=\d+ score=(\S+)", out)
    if found is None:
        raise SystemExit(f"bench/peers/mlagents_gym.py printed no SCORE line:\n{out[-2000:]}")
    return wall, float(found.group(1))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mlagents-python", default=str(MLAGENTS_PYTHON),
                        help="the python of ML-Agents 1.1.0's venv (default: .venv-mlagents/bin/python, from make peer-mlagents)")
    parser.add_argument("--configs", type=Path, default=ROOT / "config" / "mujoco" / "mlagents-walker")
    parser.add_argument("--tasks", nargs="+", default=["HalfCheetah", "Hopper", "Walker2d"])
    parser.add_argument("--version", default="v5", help="gymnasium task version")
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--results-dir", type=Path, default=Path(tempfile.gettempdir()) / "arl-wallclock")
    args = parser.parse_args(argv)
    if not Path(args.mlagents_python).exists():
        parser.error(f"--mlagents-python {args.mlagents_python}: not there; `make peer-mlagents` makes ML-Agents 1.1.0's "
                     "venv in .venv-mlagents")
    rows = []
    for task in args.tasks:
        config_path = (args.configs / f"{task}-ppo.yaml").resolve()
        config = yaml.safe_load(config_path.read_text())
        config["behaviors"][task]["max_steps"] = args.steps
        ours_walls, ml_walls = [], []
        for round_ in range(args.repeats):
            order = ("ours", "ML-Agents") if round_ % 2 == 0 else ("ML-Agents", "ours")
            for name in order:
                if name == "ours":
                    wall, score = ours(config, task, args.seed, args.results_dir)
                    ours_walls.append(wall)
                else:
                    wall, score = mlagents(args.mlagents_python, config_path, task, args.version, args.seed,
                                           args.steps, args.results_dir)
                    ml_walls.append(wall)
                print(f"{task} round {round_ + 1} {name:9s}: {wall:7.1f} s, last-10% return {score:8.1f}", flush=True)
        rows.append((task, statistics.median(ours_walls), statistics.median(ml_walls)))
    print(f"\n| task ({args.steps:,} steps, seed {args.seed}, medians of {args.repeats}) | arl-learn | ML-Agents 1.1.0 | ours / ML-Agents |")
    print("|---|---:|---:|---:|")
    for task, o, m in rows:
        print(f"| {task} | {o:.0f} s | {m:.0f} s | {o / m:.2f} |")


if __name__ == "__main__":
    main()
