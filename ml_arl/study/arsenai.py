"""arsenAI designs of experiments given to arl-study: ``arl-study experiment.yml --run-id ID``.

An arsenAI experiment file (``definitions`` plus a ``schedule`` of levels) is expanded by arsenAI's
own generator (``arsenai.api.fnc_generate.generate``, shipped with palaestrai 3.5) into palaestrAI
run files, one per design row and repetition, with the uids and seeds arsenAI gives them. arl-study
then, as it does for ``mode: grid``:

* checks every run file as arl-learn would (every problem of every run at once, exit 2);
* writes them to ``<results-dir>/<ID>/runs/<uid>.yml`` and the commands to ``runs.txt``;
* runs them one after the other with arl-learn, each into ``<results-dir>/<ID>/<uid>/`` with its
  console in ``logs/<uid>.log`` (``--resume`` skips the runs that finished);
* writes ``summary.csv`` (run, exit code, phase, agent, episodes, mean objective, mean environment
  reward) from each run's ``results.sqlite`` and prints it as a table.
"""

from __future__ import annotations

import csv
import io
import logging
import os
import sqlite3
import subprocess
import sys
import warnings
from typing import Any

from ml_arl.core.atomic_files import atomic_write, write_yaml
from ml_arl.core.exceptions import ArlError, ConfigError
from ml_arl.core.one_line import one_line

logger = logging.getLogger(__name__)

SUMMARY = "summary.csv"
DONE = "finished.txt"


def is_experiment_file(data: Any) -> bool:
    return isinstance(data, dict) and "definitions" in data and "schedule" in data


def generate(path: str) -> list[dict[str, Any]]:
    """arsenAI's run files for the experiment at ``path``; ConfigError (one line) when it cannot."""
    try:
        from arsenai.api.fnc_generate import generate as arsenai_generate
    except ImportError as err:
        raise ConfigError([f"{path}: an arsenAI experiment file needs palaestrai's arsenai ({err}); "
                           "pip install -e '.[palaestrai]'"]) from None
    for noisy in ("arsenai", "arsenai.api", "arsenai.generator"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runs = arsenai_generate(path, no_disk_saving=True)
    except Exception as err:  # arsenAI's own validation and expansion: its message, on one line
        raise ConfigError([f"{path}: arsenAI could not expand the experiment: {type(err).__name__}: {one_line(str(err))}"]) from None
    if not runs:
        raise ConfigError([f"{path}: arsenAI made no runs of this experiment; check its schedule"])
    return list(runs)


def check(path: str, runs: list[dict[str, Any]], results_dir: str) -> list[str]:
    """Every run file read as arl-learn reads it; returns a line per run, or ConfigError with all problems."""
    from ml_arl.palaestrai.runfile import read, run_name

    problems: list[str] = []
    lines: list[str] = []
    for run in runs:
        uid = str(run.get("uid"))
        try:
            translation = read(run, f"{path} (run {uid})", results_dir)
        except ConfigError as err:
            problems += err.problems
            continue
        phases = translation.config["phases"]
        lines.append(f"run {run_name(uid)}: seed {run.get('seed')}, "
                     f"{len(phases)} phase(s) ({', '.join(p['name'] for p in phases)}), "
                     f"agents {', '.join(a.name for a in translation.agents)}")
    if problems:
        raise ConfigError(problems)
    return lines


def run_design(path: str, run_id: str, results_dir: str, check_only: bool, resume: bool, force: bool) -> int:
    """arl-study's entry for an arsenAI experiment file; the exit code."""
    from ml_arl.palaestrai.runfile import run_name
    from ml_arl.study.storage import StudyFolder

    try:
        runs = generate(path)
        folder = StudyFolder(results_dir, run_id)
        lines = check(path, runs, folder.path)
    except ConfigError as err:
        for problem in err.problems:
            sys.stderr.write(f"arl-study: error: {one_line(problem)}\n")
        return err.exit_code
    if check_only:
        sys.stdout.write("\n".join([f"arsenAI experiment {path}: {len(runs)} run(s)"] + lines) + "\n")
        return 0
    try:
        folder.prepare(resume, force)
    except ArlError as err:
        sys.stderr.write(f"arl-study: error: {one_line(str(err))}\n")
        return err.exit_code
    try:
        return _run_all(folder.path, runs, [run_name(str(r["uid"])) for r in runs], resume)
    except KeyboardInterrupt:
        logger.info("Interrupted; arl-study %s --resume runs the runs that did not finish", path)
        return 0
    finally:
        folder.unlock()


def _run_all(folder: str, runs: list[dict[str, Any]], names: list[str], resume: bool) -> int:
    os.makedirs(os.path.join(folder, "runs"), exist_ok=True)
    os.makedirs(os.path.join(folder, "logs"), exist_ok=True)
    files = []
    for run, name in zip(runs, names):
        file = os.path.join(folder, "runs", f"{name}.yml")
        write_yaml(file, run)
        files.append(file)
    commands = [f"arl-learn {f} --results-dir {folder}" for f in files]
    atomic_write(os.path.join(folder, "runs.txt"), lambda f: f.write("\n".join(commands) + "\n"), mode="w")
    done_file = os.path.join(folder, DONE)
    done = set(open(done_file, encoding="utf-8").read().split()) if resume and os.path.exists(done_file) else set()
    codes: dict[str, int] = {}
    for file, name in zip(files, names):
        if name in done:
            codes[name] = 0
            continue
        logger.info("Run %s (%d of %d)", name, len(codes) + 1, len(files))
        args = [sys.executable, "-m", "ml_arl.cli.learn", file, "--results-dir", folder]
        if resume and os.path.isdir(os.path.join(folder, name)):
            args.append("--resume")
        with open(os.path.join(folder, "logs", f"{name}.log"), "w", encoding="utf-8") as log:
            proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
            try:
                while True:  # a run takes as long as it takes: an hourly line says it is still going
                    try:
                        codes[name] = proc.wait(timeout=3600)
                        break
                    except subprocess.TimeoutExpired:
                        logger.info("Run %s is still running (its console: %s)", name, log.name)
            except KeyboardInterrupt:
                proc.send_signal(2)
                try:
                    proc.wait(timeout=120)  # the run saves its checkpoints first
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
                raise
        if codes[name] == 0:
            done.add(name)
            atomic_write(done_file, lambda f: f.write("\n".join(sorted(done)) + "\n"), mode="w")
        else:
            logger.error("Run %s failed with exit code %d (its console: %s)", name, codes[name],
                         os.path.join(folder, "logs", f"{name}.log"))
    rows = _summary(folder, names, codes)
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(["run", "exit_code", "phase", "agent", "episodes", "mean_objective", "mean_reward"])
    writer.writerows(rows)
    atomic_write(os.path.join(folder, SUMMARY), lambda f: f.write(text.getvalue()), mode="w")
    width = max([len(r[0]) for r in rows] + [3])
    logger.info("%-*s  %4s  %-12s %-16s %8s %14s %12s", width, "run", "exit", "phase", "agent", "episodes",
                "mean objective", "mean reward")
    for r in rows:
        logger.info("%-*s  %4s  %-12s %-16s %8s %14s %12s", width, *r)
    logger.info("Wrote %s", os.path.join(folder, SUMMARY))
    return 0 if all(c == 0 for c in codes.values()) else 1


def _summary(folder: str, names: list[str], codes: dict[str, int]) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for name in names:
        db = os.path.join(folder, name, "results.sqlite")
        if not os.path.exists(db):
            rows.append([name, codes.get(name, ""), "", "", 0, "", ""])
            continue
        with sqlite3.connect(db) as conn:
            found = conn.execute(
                "SELECT phase, behavior, COUNT(*), AVG(objective), AVG(env_reward) FROM episodes "
                "GROUP BY phase, behavior ORDER BY MIN(id)").fetchall()
        for phase, agent, count, objective, reward in found:
            rows.append([name, codes.get(name, ""), phase, agent, count, f"{objective:.4g}", f"{reward:.4g}"])
    return rows
