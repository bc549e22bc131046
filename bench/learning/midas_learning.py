"""Does a learned defender improve a MIDAS voltage objective? harl's PPO (``harl:PPOBrain`` on
ml_arl's PPO) as the defender of examples/midas's CIGRE MV grid, against palaestrAI's DummyMuscle
defender (random setpoints) as the baseline: the same run file, the same attacker (a DummyMuscle),
the same seeds, the same number of episodes.

Each run: examples/midas's scenario and run file with episodes of ``--steps`` steps of 15 minutes
(48: half a day), ``--episodes`` training episodes, then a test phase of ``--test-episodes``. The
defender's objective is the run file's, MIDAS' ``VoltageDefenderObjective``, or the one
``--objective`` names (``muscles_cumulative_objective`` in results.sqlite, divided by the
episode's length: the mean per step). Printed per seed and as
means over seeds: the first and the last ``--window`` training episodes of each side, and the
test phase.

    python bench/learning/midas_learning.py [--seeds 1 2 3] [--episodes 40] [--steps 48] [--jobs 2] [--objective YAML]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from typing import Any

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if os.path.realpath(sys.path[0] or os.curdir) == os.path.dirname(os.path.realpath(__file__)):  # run as a script:
    sys.path[0] = ROOT  # import bench.* from the repository root, not from this folder

from bench.common.runner import add_seeds_argument, run_grid  # noqa: E402

EXAMPLE = os.path.join(ROOT, "examples", "midas")
BIN = os.path.dirname(sys.executable)
PPO = {"name": "harl:PPOBrain", "params": {"rollout_size": 96, "epochs": 10, "batch_size": 32, "actor_lr": 0.003,
                                         "critic_lr": 0.003, "entropy_coef": 0.0, "fc_dims": [32, 32]}}
PPO_MUSCLE = {"name": "harl:PPOMuscle", "params": {}}


def prepare(folder: str, seed: int, learner: bool, episodes: int, test_episodes: int, steps: int,
            objective: dict[str, Any] | None = None) -> str:
    shutil.copy(os.path.join(EXAMPLE, "scenario.yml"), folder)
    scenario = open(os.path.join(folder, "scenario.yml")).read().replace("end: 96*15*60", f"end: {steps}*15*60")
    open(os.path.join(folder, "scenario.yml"), "w").write(scenario)
    subprocess.run([sys.executable, os.path.join(EXAMPLE, "make_grid.py")], cwd=folder, check=True,
                   stdout=subprocess.DEVNULL)
    run = yaml.safe_load(open(os.path.join(EXAMPLE, "run.yml")))
    run["seed"] = seed
    run["uid"] = f"midas-{'ppo' if learner else 'dummy'}-s{seed}"
    train = run["schedule"][0]["phase_train"]
    train["environments"][0]["environment"]["params"]["end"] = steps * 900
    train["phase_config"]["episodes"] = episodes
    run["schedule"][1]["phase_test"]["phase_config"]["episodes"] = test_episodes
    defender = next(a for a in train["agents"] if a["name"] == "defender")
    if objective:
        defender["objective"] = objective
    if learner:
        defender["brain"], defender["muscle"] = PPO, PPO_MUSCLE
    path = os.path.join(folder, "run.yml")
    with open(path, "w") as f:
        yaml.safe_dump(run, f, sort_keys=False)
    return str(run["uid"])


def one_run(seed: int, learner: bool, args: argparse.Namespace) -> dict[str, Any]:
    folder = tempfile.mkdtemp(prefix="bench-midas-learning-")
    uid = prepare(folder, seed, learner, args.episodes, args.test_episodes, args.steps, args.objective)
    env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(folder, "xdg"))
    proc = subprocess.run([os.path.join(BIN, "arl-learn"), "run.yml"], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=args.timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"seed {seed} ({'ppo' if learner else 'dummy'}): exit {proc.returncode} (folder {folder}):\n"
                           + (proc.stdout + proc.stderr)[-2000:])
    db = sqlite3.connect(os.path.join(folder, "results", uid, "results.sqlite"))
    rows = db.execute("SELECT experiment_run_phase, cumulative_objective, length FROM muscles_cumulative_objective "
                      "WHERE agent_name = 'defender' ORDER BY rowid").fetchall()
    db.close()
    shutil.rmtree(folder, ignore_errors=True)
    per_step = {"train": [o / n for p, o, n in rows if p == "phase_train"],
                "test": [o / n for p, o, n in rows if p == "phase_test"]}
    return {"seed": seed, "learner": learner, **per_step,
            "steps": int(re.findall(r"Training finished after (\d+) environment steps", proc.stdout)[-1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_seeds_argument(parser, [1, 2, 3])
    parser.add_argument("--episodes", type=int, default=40)
    parser.add_argument("--test-episodes", type=int, default=4)
    parser.add_argument("--steps", type=int, default=48, help="steps of 15 minutes per episode")
    parser.add_argument("--window", type=int, default=10, help="training episodes at each end that are compared")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--ppo", type=yaml.safe_load, default={},
                        help="harl PPOBrain parameters over the defaults, as a YAML mapping: '{gamma: 0.9}'")
    parser.add_argument("--objective", type=yaml.safe_load, default=None,
                        help="the defender's palaestrAI objective instead of the run file's, as a YAML mapping: "
                             "'{name: midas_palaestrai.arl_defender_objective:ArlDefenderObjective, params: {alpha: 1}}'")
    args = parser.parse_args()
    PPO["params"].update(args.ppo)
    # the two defenders ("configs": harl PPO, then the Dummy) of each seed, --jobs runs at a time
    grid = run_grid(lambda run: one_run(run.seed, run.config, args), seeds=args.seeds, configs=(True, False),
                    order=("seed", "config", "task"), jobs=args.jobs)
    results = [result for _, result in grid]
    w = args.window
    print(f"examples/midas, {args.steps} steps an episode, {args.episodes} training episodes, "
          f"{args.test_episodes} test episodes; defender objective per step "
          f"({(args.objective or {}).get('name', 'VoltageDefenderObjective').rpartition(':')[2]})\n")
    print(f"{'seed':>4} {'defender':>10} {'first ' + str(w):>10} {'last ' + str(w):>10} {'test':>8}")
    summary: dict[bool, list[tuple[float, float, float]]] = {True: [], False: []}
    for r in results:
        first, last, test = statistics.mean(r["train"][:w]), statistics.mean(r["train"][-w:]), statistics.mean(r["test"])
        summary[r["learner"]].append((first, last, test))
        print(f"{r['seed']:>4} {'harl PPO' if r['learner'] else 'Dummy':>10} {first:>10.3f} {last:>10.3f} {test:>8.3f}")
    print()
    for learner in (True, False):
        cols = list(zip(*summary[learner]))
        print(f"mean {'harl PPO' if learner else 'Dummy':>10} " + " ".join(f"{statistics.mean(c):>10.3f}" for c in cols))
    ppo, dummy = summary[True], summary[False]
    better = sum(p[1] > d[1] for p, d in zip(ppo, dummy))
    print(f"\nharl PPO's last {w} above the Dummy defender's last {w} in {better} of {len(ppo)} seeds; "
          f"above its own first {w} in {sum(p[1] > p[0] for p in ppo)} of {len(ppo)}")


if __name__ == "__main__":
    main()
