"""arl-study: a hyperparameter search or a multi-seed run of an arl-learn config.

    arl-study STUDY.yaml --run-id NAME [--resume | --force] [--results-dir DIR] [--storage URL]

Exit codes as arl-learn's: 0 done (or stopped by Ctrl-C, resumable), 1 no trial completed, 2 bad
input (the study file, its config, the folder or the storage), with every problem on a line of
its own and nothing started.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import sys
import warnings
from types import FrameType
from typing import Any, NoReturn, Optional

from ml_arl.cli.logs import configure_logging
from ml_arl.core.exceptions import ArlError, ConfigError
from ml_arl.core.one_line import one_line

logger = logging.getLogger("ml_arl.study")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit 2
        self.exit(2, f"arl-study: error: {message} (see arl-study --help)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="arl-study", description="Hyperparameter search (Optuna) or multi-seed run of an arl-learn config.")
    p.add_argument("study", metavar="STUDY", help="the study file (YAML): config, search, seeds, metric, budget")
    p.add_argument("--run-id", required=True, help="the study's name: its folder is <results-dir>/<run-id>")
    p.add_argument("--results-dir", default="results", help="where the study's folder goes (default: results)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--resume", action="store_true", help="continue the study from its storage (interrupted trials run again)")
    mode.add_argument("--force", action="store_true", help="remove the study's folder (one arl-study wrote) and start over")
    p.add_argument("--storage", metavar="URL", help="an SQLAlchemy URL for the Optuna storage, e.g. postgresql://... for a study "
                   "several machines share (default: sqlite in the study's folder)")
    p.add_argument("--store", metavar="URL", help="the runs write their episodes into the PostgreSQL results store at URL "
                   "(arl-learn --store), each as <run-id>/<trial run>; the study reads its episode metrics there")
    p.add_argument("--base-port", type=int, help="first port of the runs' Unity workers (default: the config's)")
    p.add_argument("--ray-address", metavar="ADDRESS", help="run the trials' runs as Ray tasks on the Ray cluster at ADDRESS "
                   "(auto: the cluster this machine belongs to; local: a Ray instance on this machine); --results-dir "
                   "must be a folder every node sees at the same path")
    p.add_argument("--check", action="store_true", help="check the study file and its config, print the plan and exit")
    p.add_argument("--debug", action="store_true", help="debug logging")
    return p


def _sigterm(signum: int, frame: Optional[FrameType]) -> None:
    raise KeyboardInterrupt


def _check_lines(plan: Any) -> list[str]:
    s = plan.settings
    lines = [f"{plan.path}: valid; base config {plan.base_path}"]
    if s.mode == "grid":
        from ml_arl.study.design import combinations

        lines.append(f"mode grid: {len(combinations(plan))} combinations, {s.parallel} at once, seeds {s.seeds}, pruner {s.pruning}")
    else:
        lines.append(f"trials {s.n_trials}, {s.parallel} at once, seeds {s.seeds}, sampler {s.sampler}, pruner {s.pruning}")
    lines.append(f"metric {s.metric.tag} ({s.metric.reduce}, {s.metric.direction}) of {plan.behavior or 'the only behavior'}; "
                 f"{plan.span} steps per run")
    lines += [f"search {key}: {sampler.sampler_type} {sampler.sampler_parameters.model_dump()}" for key, sampler in s.search.items()]
    return lines


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    configure_logging(args.debug, fmt="[%(levelname)s] %(message)s")
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    # trials are asked and told here, and their heartbeats recorded by the study's loop
    warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")
    from ml_arl.settings.values import check_run_name
    from ml_arl.study.plan import load_plan

    try:
        check_run_name(args.run_id)
    except ValueError as err:
        sys.stderr.write(f"arl-study: error: --run-id {args.run_id!r} {err}\n")
        return 2
    if args.store is not None:
        from pydantic import ValidationError

        from ml_arl.settings import ResultsStoreSettings

        try:
            ResultsStoreSettings(url=args.store)
        except ValidationError as err:
            sys.stderr.write(f"arl-study: error: --store {err.errors()[0]['msg'].removeprefix('Value error, ')}\n")
            return 2
    arsenai = _arsenai_file(args.study)
    if arsenai:  # an arsenAI design of palaestrAI run files (ml_arl.study.arsenai)
        if args.storage or args.store or args.ray_address or args.base_port is not None:
            sys.stderr.write("arl-study: error: --storage, --store, --ray-address and --base-port are for arl-study's own studies; "
                             "an arsenAI experiment runs its run files here, one after the other\n")
            return 2
        from ml_arl.study.arsenai import run_design

        return run_design(args.study, args.run_id, args.results_dir, args.check, args.resume, args.force)
    try:
        plan = load_plan(args.study)
    except ConfigError as err:
        for problem in err.problems:
            sys.stderr.write(f"arl-study: error: {one_line(problem)}\n")
        return err.exit_code
    for warning in plan.warnings:
        logger.warning("%s", warning)
    if args.check:
        lines = _check_lines(plan)
        if args.resume:
            from ml_arl.study import storage as st

            folder = st.StudyFolder(args.results_dir, args.run_id)
            try:
                st.check_resume(folder, args.storage, plan)
            except ArlError as err:
                sys.stderr.write(f"arl-study: error: {one_line(str(err))}\n")
                return err.exit_code
            lines.append(f"resumes the study in {folder.path}")
        sys.stdout.write("\n".join(lines) + "\n")
        return 0
    return _run(args, plan)


def _arsenai_file(path: str) -> bool:
    """The study file is an arsenAI experiment (``definitions`` and a ``schedule``); a file that
    cannot be read is left to load_plan, which says why."""
    from ml_arl.settings.config_file import load_config_file

    try:
        data, _ = load_config_file(path)
    except ConfigError:
        return False
    from ml_arl.study.arsenai import is_experiment_file

    return is_experiment_file(data)


def _run(args: argparse.Namespace, plan: Any) -> int:
    from ml_arl.study import storage as st
    from ml_arl.study.optuna_samplers import make_pruner, make_sampler
    from ml_arl.study.runner import StudyRunner
    from ml_arl.study.summary import draw, summary_lines

    folder = st.StudyFolder(args.results_dir, args.run_id)
    signal.signal(signal.SIGTERM, _sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        folder.prepare(args.resume, args.force)
        shared = args.storage is not None
        storage = st.open_storage(args.storage or folder.default_storage, shared)
        study = st.load_or_create(storage, plan, args.run_id, args.resume, shared, make_sampler(plan), make_pruner(plan))
        if args.resume:
            study.sampler = make_sampler(plan, len(study.get_trials(deepcopy=False)))
        elif plan.settings.mode == "grid":
            from ml_arl.study.design import RUNS_FILE, write_design

            count = write_design(plan, folder.path, study)
            logger.info("Wrote the %d run files of the grid to %s, and the commands to %s", count,
                        os.path.join(folder.path, "configs"), os.path.join(folder.path, RUNS_FILE))
        shutil.copyfile(plan.path, os.path.join(folder.path, "study.yaml"))
        if args.resume:
            again = st.requeue_interrupted(study, storage, shared)
            if again:
                logger.info("%d interrupted trial(s) run again, from their checkpoints", again)
        owns_ray = False
        if args.ray_address:
            from ml_arl.study.ray_runs import connect

            owns_ray = connect(args.ray_address, plan.settings.parallel)
        runner = StudyRunner(plan, folder, study, storage, args.base_port, ray=bool(args.ray_address), store=args.store)
        logger.info("Study %s: %d trial(s), %d at once, in %s", args.run_id, runner.n_trials, plan.settings.parallel, folder.path)
        code = runner.run()
        runner.write_outputs()
        from ml_arl.study.trial_files import write_statistics

        write_statistics(folder.path, plan, study)
        for line in summary_lines(study):
            logger.info("%s", line)
        try:
            for path in draw(folder.path, study):
                logger.info("Wrote %s", path)
        except Exception as err:  # noqa: BLE001 - a picture that fails is not a failed study
            logger.warning("could not draw the study's plots: %s", one_line(str(err)))
        if code == 1:
            logger.error("No trial completed; their reasons are in %s", os.path.join(folder.path, "trials.csv"))
        if owns_ray:
            import ray

            ray.shutdown()
        return code
    except KeyboardInterrupt:
        logger.info("Interrupted before the study started")
        return 0
    except ArlError as err:
        sys.stderr.write(f"arl-study: error: {one_line(str(err))}\n")
        return err.exit_code
    finally:
        folder.unlock()


def run() -> NoReturn:
    sys.exit(main())


if __name__ == "__main__":
    run()
