"""palaestrAI 3.5.18 and arl-learn side by side on the same palaestrAI run file: wall-clock, time to
the first environment step, phase switch, environment steps/s and peak memory.

The run file (default bench/peers/palaestrai/dummy_two_agents.yml) is palaestrAI's two-agent dummy run:
DummyEnvironment (10 steps an episode), two DummyBrain/DummyMuscle/DummyObjective agents, 2 workers,
a train phase of 15 episodes per worker (300 environment steps) and a test phase of 5 (100 steps).
Each round runs, one after the other, in fresh temporary folders:

* palaestrAI: ``palaestrai -c runtime.conf.yaml database-create`` (not timed), then
  ``palaestrai -c runtime.conf.yaml experiment-start FILE``, with the working folder and a SQLite
  ``store_uri``, ``log_store_uri`` and ``data_path`` inside the temporary folder; default logging
  (no ``-v``);
* ours: ``arl-learn FILE --run-id palaestrai-bench --results-dir TMP --force --debug``.

How each figure is computed (t0 = ``time.time()`` just before the command is started):

* wall-clock: ``time.perf_counter()`` from just before ``Popen`` to the process's exit.
* first step: the time of the first environment step minus t0. palaestrAI: the earliest
  ``world_states.walltime`` in its store (the ``EnvironmentUpdateResponse``'s ``datetime.now()``,
  taken in the SimulationController process right after the environment stepped). Ours: the
  timestamp of arl-learn's debug line ``First environment steps arrived`` (taken in the main process
  when the first experience arrives from a worker, so a little after the step itself: this favours
  palaestrAI).
* phase switch: the first step of the next phase minus the last step of the phase before (the time
  in which no environment steps). palaestrAI: ``world_states.walltime``, phases from
  ``world_states.environment_id -> environments.experiment_run_phase_id -> experiment_run_phases.number``.
  Ours: the timestamp of the debug line ``Phase switch took`` (the next phase's first experience
  arriving) minus the last ``episodes.wall_time`` of the phase before in ``results.sqlite`` (the main
  process's ``time.time()`` when an episode's end arrived). With more than one switch, their mean.
* env steps: environment steps done in the run, all workers. palaestrAI: the rows of
  ``world_states`` (one per ``EnvironmentUpdateResponse``). Ours: per phase the largest ``acted`` of
  ``run_logs/phases.json`` (with Vanilla every agent acts every step), summed over the phases.
* steps/s: the steady stepping rate, start-up and phase switches left out. Per phase, a list of
  progress marks (time, steps): palaestrAI, every world state (1 step); ours, every finished
  episode of one behavior in ``results.sqlite`` (``length`` steps at ``wall_time``). Rate = the
  steps of every mark after each phase's first, summed over the phases, divided by the summed spans
  (last mark - first mark) of the phases.
* peak memory: the largest sum, over the command's process and all its descendants, of their RSS,
  sampled from /proc (bench/common/process_tree.py) every ``--sample-ms`` (50) milliseconds. Shared pages count once per process,
  as RSS counts them.

Every figure is the median over ``--repeats`` rounds (the two sides alternate within a round).
"x better" is palaestrAI / ours for times and memory, ours / palaestrAI for steps/s. The goals are
for ours: first step under 1 s, phase switch under 0.2 s, over 1,000 steps/s, under 300 MB.

    python bench/peers/palaestrai.py [--run-file bench/peers/palaestrai/dummy_two_agents.yml] [--repeats 1]
                               [--ours-only] [--keep] [--assets DIR] [--prepare CMD]

A run file with files of its own (MIDAS: a scenario, a grid) names them relative to the folder it
runs in: ``--assets DIR`` copies DIR's files into each round's folder and ``--prepare CMD`` runs CMD
there (not timed), each side in a folder of its own; ``XDG_CONFIG_HOME`` points into that folder
(MIDAS writes its runtime configuration there). The MIDAS figures of docs/palaestrai.md:

    python bench/peers/palaestrai.py --run-file examples/midas/run.yml --assets examples/midas \
        --prepare "python make_grid.py"
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from typing import Any, Optional

if os.path.realpath(sys.path[0] or os.curdir) == os.path.dirname(os.path.realpath(__file__)):  # run as a script:
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))  # bench.* from the root

from bench.common.process_tree import PeakMemory  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
RUN_FILE = os.path.join(ROOT, "bench", "peers", "palaestrai", "dummy_two_agents.yml")
RUN_ID = "palaestrai-bench"
LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \+\d+ ms ")
GOALS = {"first_step": ("under 1 s", 1.0), "switch": ("under 0.2 s", 0.2), "steps_per_s": ("over 1,000", 1000.0),
         "peak_mb": ("under 300 MB", 300.0)}
ROWS = [  # key, label, format, lower is better
    ("wall", "wall-clock (s)", "{:.2f}", True),
    ("first_step", "first env step (s)", "{:.2f}", True),
    ("switch", "phase switch (s)", "{:.3f}", True),
    ("steps", "env steps", "{:.0f}", None),
    ("steps_per_s", "env steps/s", "{:.0f}", False),
    ("peak_mb", "peak RSS, tree (MB)", "{:.0f}", True),
]


def timed(cmd: list[str], cwd: str, log: str, timeout: float, sample_s: float) -> dict[str, Any]:
    """Runs cmd (output to log): t0, wall-clock, peak tree RSS (MB), exit code."""
    with open(log, "wb") as out:
        t0 = time.time()
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        sampler = PeakMemory(proc.pid, sample_s)
        sampler.start()
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            rc = proc.wait()
            print(f"  {os.path.basename(cmd[0])} ran past {timeout:.0f} s and was stopped (log: {log})",
                  file=sys.stderr)
        wall = time.perf_counter() - start
        sampler.stop()
    return {"t0": t0, "wall": wall, "peak_mb": sampler.peak_rss_kb * 1024 / 1e6, "rc": rc}


def stepping_rate(phases: list[list[tuple[float, float]]]) -> Optional[float]:
    """Steps after each phase's first mark over the summed spans of the phases."""
    steps, span = 0, 0.0
    for marks in phases:
        if len(marks) < 2:
            continue
        marks = sorted(marks)
        steps += int(sum(n for _, n in marks[1:]))
        span += marks[-1][0] - marks[0][0]
    return steps / span if span > 0 else None


def mean_or_none(values: list[float]) -> Optional[float]:
    return statistics.mean(values) if values else None


# ---------------------------------------------------------------------------------------------- palaestrAI
def epoch(value: Any) -> float:
    """A stored walltime (naive local time, as datetime.now() gives it, or with an offset) in seconds."""
    return (value if isinstance(value, datetime) else datetime.fromisoformat(str(value))).timestamp()


def run_palaestrai(run_file: str, folder: str, timeout: float, sample_s: float) -> dict[str, Any]:
    conf = os.path.join(folder, "runtime.conf.yaml")
    with open(conf, "w") as f:
        f.write(f"store_uri: sqlite:///{folder}/palaestrai.db\n"
                f"log_store_uri: sqlite:///{folder}/palaestrai-log.db\n"
                f"data_path: {folder}/_outputs\n")
    palaestrai = os.path.join(BIN, "palaestrai")
    start = time.perf_counter()
    subprocess.run([palaestrai, "-c", conf, "database-create"], cwd=folder, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    create = time.perf_counter() - start
    result = timed([palaestrai, "-c", conf, "experiment-start", run_file], folder,
                   os.path.join(folder, "palaestrai.log"), timeout, sample_s)
    result["database_create"] = create
    db = sqlite3.connect(os.path.join(folder, "palaestrai.db"))
    rows = db.execute(
        "SELECT p.number, w.walltime FROM world_states w JOIN environments e ON w.environment_id = e.id "
        "JOIN experiment_run_phases p ON e.experiment_run_phase_id = p.id").fetchall()
    db.close()
    by_phase: dict[int, list[float]] = {}
    for number, walltime in rows:
        by_phase.setdefault(number, []).append(epoch(walltime))
    phases = [sorted(by_phase[n]) for n in sorted(by_phase)]
    result["steps"] = len(rows)
    result["first_step"] = phases[0][0] - result["t0"] if phases else None
    result["switch"] = mean_or_none([b[0] - a[-1] for a, b in zip(phases, phases[1:])])
    result["steps_per_s"] = stepping_rate([[(t, 1) for t in times] for times in phases])
    return result


# ---------------------------------------------------------------------------------------------- ours
def log_time(line: str) -> float:
    match = LOG_TIME.match(line)
    if not match:
        raise ValueError(f"no timestamp in {line!r}")
    return datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()


def run_ours(run_file: str, folder: str, timeout: float, sample_s: float) -> dict[str, Any]:
    log = os.path.join(folder, "arl-learn.log")
    result = timed([os.path.join(BIN, "arl-learn"), run_file, "--run-id", RUN_ID, "--results-dir", folder, "--force",
                    "--debug"], folder, log, timeout, sample_s)
    first, arrivals = None, []
    with open(log, errors="replace") as f:
        for line in f:
            if "First environment steps arrived" in line:
                first = log_time(line)
            elif "Phase switch took" in line:
                arrivals.append(log_time(line))
    run = os.path.join(folder, RUN_ID)
    with open(os.path.join(run, "run_logs", "phases.json")) as f:
        acted = json.load(f)["phases"]
    db = sqlite3.connect(os.path.join(run, "results.sqlite"))
    order = [name for name, in db.execute("SELECT phase FROM phases ORDER BY idx")]
    episodes = db.execute("SELECT phase, behavior, length, wall_time FROM episodes").fetchall()
    db.close()
    marks: dict[str, dict[str, list[tuple[float, int]]]] = {}
    for phase, behavior, length, wall_time in episodes:
        marks.setdefault(phase, {}).setdefault(behavior, []).append((wall_time, length))
    phases = [marks[p][min(marks[p])] for p in order if p in marks]  # one behavior's episodes
    one = sum(v["acted"].get(min(marks[p]), 0) for p, v in acted.items() if p in marks)  # its steps
    finished = re.findall(r"Training finished after (\d+) environment steps", open(log, errors="replace").read())
    result["steps"] = int(finished[-1]) if finished else sum(max(v["acted"].values(), default=0) for v in acted.values())
    scale = result["steps"] / one if one else 1.0  # TakingTurns: an agent acts on 1 step in N; Vanilla: on every step
    phases = [[(t, n * scale) for t, n in marks_] for marks_ in phases]
    result["first_step"] = first - result["t0"] if first is not None else None
    result["switch"] = mean_or_none([b - max(t for t, _ in a) for a, b in zip(phases, arrivals)])
    result["steps_per_s"] = stepping_rate(phases)
    return result


# ---------------------------------------------------------------------------------------------- table
def median(results: list[dict[str, Any]], key: str) -> Optional[float]:
    values = [r[key] for r in results if r.get(key) is not None]
    return statistics.median(values) if values else None


def cell(fmt: str, value: Optional[float]) -> str:
    return "-" if value is None else fmt.format(value)


def print_table(theirs: list[dict[str, Any]], ours: list[dict[str, Any]]) -> None:
    header = f"{'':22} {'palaestrAI 3.5.18':>18} {'ml_arl':>10} {'x better':>9}   {'goal (ours)':<14} met"
    print(header)
    print("-" * len(header))
    for key, label, fmt, lower in ROWS:
        a, b = median(theirs, key), median(ours, key)
        ratio = None
        if lower is not None and a and b:
            ratio = a / b if lower else b / a
        goal, met = "", ""
        if key in GOALS and b is not None:
            goal, limit = GOALS[key]
            met = "yes" if (b < limit if lower else b > limit) else "no"
        print(f"{label:22} {cell(fmt, a):>18} {cell(fmt, b):>10} {cell('{:.1f}', ratio):>9}   {goal:<14} {met}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-file", default=RUN_FILE)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--ours-only", action="store_true", help="skip palaestrAI (quick)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds a run may take before it is stopped")
    parser.add_argument("--sample-ms", type=float, default=50, help="memory sampling interval")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folders (their paths are printed)")
    parser.add_argument("--assets", help="a folder whose files are copied into each round's folder (MIDAS' scenario)")
    parser.add_argument("--prepare", help="a shell command run in each round's folder before the side (not timed)")
    args = parser.parse_args()
    run_file = os.path.abspath(args.run_file)

    sides = [("ours", run_ours)] if args.ours_only else [("palaestrAI", run_palaestrai), ("ours", run_ours)]
    results: dict[str, list[dict[str, Any]]] = {"palaestrAI": [], "ours": []}
    for round_ in range(args.repeats):
        for name, run in sides:
            folder = tempfile.mkdtemp(prefix=f"bench-palaestrai-{name}-")
            os.environ["XDG_CONFIG_HOME"] = os.path.join(folder, "xdg")
            if args.assets:
                for entry in os.listdir(args.assets):
                    if os.path.isfile(os.path.join(args.assets, entry)):
                        shutil.copy(os.path.join(args.assets, entry), folder)
            if args.prepare:
                env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
                subprocess.run(args.prepare, shell=True, cwd=folder, check=True, env=env, stdout=subprocess.DEVNULL)
            try:
                result = run(run_file, folder, args.timeout, args.sample_ms / 1000)
                create = result.get("database_create")
                extra = "" if create is None else f", database-create {create:.1f} s (not counted)"
                print(f"round {round_ + 1} {name}: exit {result['rc']}, {result['wall']:.1f} s, "
                      f"{result['steps']} env steps{extra}", file=sys.stderr)
                if result["rc"] == 0:
                    results[name].append(result)
            except Exception as error:  # a side that fails leaves its column empty; the folder is kept
                print(f"round {round_ + 1} {name}: failed: {error!r} (folder kept: {folder})", file=sys.stderr)
                continue
            if args.keep or result["rc"] != 0:
                print(f"  {name} folder kept: {folder}", file=sys.stderr)
            else:
                shutil.rmtree(folder, ignore_errors=True)

    print(f"\n{os.path.relpath(run_file, ROOT)}, median of {args.repeats} round(s)\n")
    print_table(results["palaestrAI"], results["ours"])


if __name__ == "__main__":
    main()
