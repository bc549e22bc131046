"""Steps survived on Grid2Op's L2RPN case14 sandbox under random line attacks: a learned operator
(PPO, config/grid2op/case14-operator.yaml) against grid2op's DoNothing, the reconnect-a-line rule and
uniform random actions (docs/grid2op.md's table).

Each seed is one ``arl-learn`` run of the config (a process of its own, ``--seed``): its train
phase, then its ``survival`` matrix phase, which plays each operator for the same number of
episodes in test mode (the learned one deterministically). Steps survived is an episode's length
(the steps played, the one that ended it in a game over included; 575 = the whole chronic), read
from the run's results.sqlite (the survival reward's sum, plus the step of a game over: with
``safe_max_rho`` an episode's length counts the Operator's decisions, not the steps). The table gives each player's mean over the episodes of each seed,
then the mean and the standard deviation of those per-seed means.

    python bench/learning/grid2op_survival.py                   # 5 seeds (0..4), the config's budget
    python bench/learning/grid2op_survival.py --seeds 0 1 --steps 20000 --episodes 12
    python bench/learning/grid2op_survival.py --config config/grid2op/case14-guarded.yaml   # the rule as a safety layer

A config with ``behavioral_cloning`` (case14-guarded.yaml) gets its demonstrations first: one run of
DEMO_CONFIG (grid2op_greedy, the teacher) with ``--record-demo`` on ``--demo-seed`` (20: not a seed it
reports on), whose folder every seed's run then reads. With a ``survival`` matrix of its own, the config's
players are the table's. Beside each player's mean, the table gives each player's paired difference from
grid2op_reconnect: per seed, the difference of the two means over the same episodes (a phase switch
replays the seed's episodes: the same chronics, the same attacks until the players act apart), then its
mean and t-interval over the seeds.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sqlite3
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

from bench.common.runner import Run, add_seeds_argument, run_grid  # noqa: E402

CONFIG = ROOT / "config/grid2op/case14-operator.yaml"
DEMO_CONFIG = ROOT / "config/grid2op/case14-greedy-demos.yaml"
RULE = "grid2op_reconnect"
PLAYERS = ["learned", "grid2op_do_nothing", "grid2op_reconnect", "random"]
CHRONIC_STEPS = 575  # one chronic of the sandbox, 5-minute steps
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}  # Student's t, 97.5 %


def run_seed(config: dict, seed: int, results: Path, players: list[str]) -> tuple[dict[str, list[int]], float]:
    """One arl-learn run; each player's episode lengths in the survival phase, and the run's wall-clock."""
    path = results / f"seed{seed}.yaml"
    path.write_text(yaml.safe_dump(config))
    run_id = f"case14-seed{seed}"
    started = time.time()
    proc = subprocess.run(
        [sys.executable, "-m", "ml_arl.cli.learn", str(path), "--run-id", run_id, "--seed", str(seed),
         "--results-dir", str(results), "--force"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    wall = time.time() - started
    if proc.returncode != 0:
        raise SystemExit(f"seed {seed}: arl-learn exited {proc.returncode}:\n{proc.stdout[-3000:]}")
    with sqlite3.connect(results / run_id / "results.sqlite") as db:
        rows = db.execute("SELECT phase, env_reward FROM episodes WHERE behavior = 'Operator' AND mode = 'test'").fetchall()
    lengths: dict[str, list[int]] = {p: [] for p in players}
    for phase, survived in rows:
        player = phase.split(".", 1)[1] if "." in phase else phase
        # the survival reward counts the steps after which the grid still ran; the steps played add the one
        # that ended it in a game over (with safe_max_rho an episode's length counts decisions, not steps)
        lengths.setdefault(player, []).append(min(int(round(survived)) + 1, CHRONIC_STEPS))
    return lengths, wall


def record_demos(results: Path, seed: int) -> Path:
    """The greedy teacher's demonstrations (DEMO_CONFIG, one arl-learn run on ``seed``); their folder."""
    folder = results / "demos"
    proc = subprocess.run(
        [sys.executable, "-m", "ml_arl.cli.learn", str(DEMO_CONFIG), "--run-id", "greedy-demos", "--seed", str(seed),
         "--results-dir", str(results), "--record-demo", str(folder), "--force"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"demonstrations (seed {seed}): arl-learn exited {proc.returncode}:\n{proc.stdout[-3000:]}")
    return folder


def interval(values: list[float]) -> tuple[float, float, float]:
    """Mean, sd and the half-width of the 95 % t-interval over ``values``."""
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    half = T95.get(len(values) - 1, 1.96) * sd / len(values) ** 0.5 if len(values) > 1 else float("nan")
    return mean, sd, half


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_seeds_argument(parser, [0, 1, 2, 3, 4])
    parser.add_argument("--steps", type=int, default=None, help="training steps per seed (default: the config's)")
    parser.add_argument("--episodes", type=int, default=None, help="test episodes per player (default: the config's)")
    parser.add_argument("--results-dir", default=None, help="where the runs go (default: a temporary folder)")
    parser.add_argument("--config", default=str(CONFIG.relative_to(ROOT)),
                        help="the operator's config (default: %(default)s; config/grid2op/case14-guarded.yaml: the rule as a safety layer)")
    parser.add_argument("--jobs", type=int, default=1, help="seeds at once")
    parser.add_argument("--demo-seed", type=int, default=20, help="the seed the teacher's demonstrations are recorded on")
    args = parser.parse_args(argv)

    config = yaml.safe_load((ROOT / args.config).read_text())
    train, survival = config["phases"][0], config["phases"][1]
    if args.steps is not None:
        train["max_steps"] = config["default_settings"]["max_steps"] = args.steps
    if args.episodes is not None:
        survival["episodes"] = args.episodes
    if "matrix" in survival:
        players = list(survival["matrix"]["Operator"])
    else:  # grid2op_greedy plays on the forecasts of simulate=true
        players = PLAYERS + (["grid2op_greedy"] if "simulate=true" in config["env_settings"]["env_args"] else [])
        survival["matrix"] = {"Operator": players}
    results = Path(args.results_dir or tempfile.mkdtemp(prefix="grid2op-survival-"))
    results.mkdir(parents=True, exist_ok=True)
    cloning = config.get("default_settings", {}).get("behavioral_cloning")
    if cloning is not None:
        if args.demo_seed in args.seeds:
            raise SystemExit(f"--demo-seed {args.demo_seed} is one of the seeds reported on; pick another")
        started = time.time()
        cloning["demo_path"] = str(record_demos(results, args.demo_seed))
        print(f"demonstrations: grid2op_greedy, seed {args.demo_seed}, {time.time() - started:.0f} s", flush=True)

    per_seed: dict[str, list[float]] = {p: [] for p in players}

    def report(run: Run, result: tuple[dict[str, list[int]], float]) -> None:
        lengths, wall = result
        means = {p: statistics.fmean(v) if v else float("nan") for p, v in lengths.items()}
        for p in players:
            per_seed[p].append(means[p])
        print(f"seed {run.seed}: {wall:.0f} s, " + ", ".join(f"{p} {means[p]:.1f} ({len(lengths[p])} ep.)" for p in players),
              flush=True)

    run_grid(lambda run: run_seed(config, run.seed, results, players), seeds=args.seeds, on_result=report, jobs=args.jobs)

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    print()
    print(f"python bench/learning/grid2op_survival.py --config {args.config} --seeds {' '.join(map(str, args.seeds))}"
          + (f" --steps {args.steps}" if args.steps is not None else "")
          + (f" --episodes {args.episodes}" if args.episodes is not None else "")
          + (f" --demo-seed {args.demo_seed}" if cloning is not None else ""))
    print(f"{datetime.date.today().isoformat()}, commit {commit}, {os.cpu_count()} CPU cores; {train['max_steps']} training "
          f"steps and {survival['episodes']} test episodes per player and seed; {config['env_settings']['env_args']}")
    print()
    print(f"| operator | mean steps survived (of 575) | sd over seeds | 95 % t-interval over seeds | per seed "
          f"| paired difference from {RULE}, 95 % t-interval |")
    print("|---|---|---|---|---|---|")
    for p in players:
        mean, sd, half = interval(per_seed[p])
        paired = ""
        if p != RULE and RULE in per_seed:
            diff, _, dhalf = interval([a - b for a, b in zip(per_seed[p], per_seed[RULE])])
            paired = f"{diff:+.1f} [{diff - dhalf:+.1f}, {diff + dhalf:+.1f}]"
        print(f"| {p} | {mean:.1f} | {sd:.1f} | [{mean - half:.1f}, {mean + half:.1f}] "
              f"| {' / '.join(f'{v:.0f}' for v in per_seed[p])} | {paired} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
