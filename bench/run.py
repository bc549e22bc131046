"""Run one command over a grid of tasks x configs x seeds: bench/common/runner.py from the shell.

    python bench/run.py --tasks Hopper Walker2d --seeds 1 2 3 --jobs 2 -- \\
        arl-learn config/mujoco/{task}-ppo.yaml --run-id {task}-s{seed} --seed {seed} --results-dir /tmp/grid --force
    python bench/run.py --configs config/ppo/CartPole.yaml config/ppo/CartPole-zoo.yaml --seeds 1 2 --dry-run -- \\
        arl-learn {config} --seed {seed} --run-id run{index} --force

Everything after ``--`` is the command, one argument per word as the shell split it. In each word,
``{task}``, ``{config}``, ``{seed}`` and ``{index}`` (the run's place in the grid, from 0) become the
run's values; nothing else is touched, so YAML such as ``'{gamma: 0.9}'`` passes through. An axis with
more than one value must appear in the command (else every run along it would be the same run).

Runs go in grid order (``--order``, outermost first; the default runs every seed of a task's config
before the next), ``--jobs`` at a time. Each run's output goes to its own log file in ``--log-dir``; one
line is printed per run as it ends, then a markdown table of every run's exit code and wall-clock.
A failed run does not stop the grid; the exit code is 1 if any run failed.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:  # run as a script: import bench.* from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.common.runner import AXES, Run, add_seeds_argument, grid, run_grid  # noqa: E402

PLACEHOLDER = re.compile(r"\{(task|config|seed|index)\}")


def command_for(template: list[str], run: Run) -> list[str]:
    """The command of one run: each placeholder replaced by the run's value."""
    values = {"task": run.task, "config": run.config, "seed": run.seed, "index": run.index}
    return [PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), word) for word in template]


def log_name(run: Run) -> str:
    """A file name for the run's output: its index and its values, in characters safe anywhere."""
    label = re.sub(r"[^A-Za-z0-9_.=-]+", "_", run.label().replace(" ", "_"))
    return f"{run.index:03d}-{label[:120]}.log"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        argv_ours, command = argv, []
    else:
        cut = argv.index("--")
        argv_ours, command = argv[:cut], argv[cut + 1:]
    parser = argparse.ArgumentParser(
        prog="bench/run.py", description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter, usage="%(prog)s [options] -- COMMAND [ARG ...]",
    )
    parser.add_argument("--tasks", nargs="+", default=[None], metavar="TASK", help="the {task} values")
    parser.add_argument("--configs", nargs="+", default=[None], metavar="CONFIG", help="the {config} values")
    add_seeds_argument(parser, [0], "the {seed} values")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once (default: 1)")
    parser.add_argument("--order", nargs=3, default=list(AXES), metavar="AXIS",
                        help=f"nesting of the grid, outermost first (default: {' '.join(AXES)})")
    parser.add_argument("--log-dir", type=Path, help="one log file per run here (default: a new temporary folder)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    args = parser.parse_args(argv_ours)
    if not command:
        parser.error("no command: give it after --")
    used = {m.group(1) for word in command for m in PLACEHOLDER.finditer(word)}
    for axis, values in (("task", args.tasks), ("config", args.configs), ("seed", args.seeds)):
        if len(values) > 1 and axis not in used:
            parser.error(f"--{axis}s has {len(values)} values but the command has no {{{axis}}}: its runs would all be the same")
        if values == [None] and axis in used:
            parser.error(f"the command uses {{{axis}}}; give its values with --{axis}s")
    try:
        runs = grid(args.tasks, args.seeds, args.configs, args.order)
    except ValueError as err:
        parser.error(f"--order: {err}")
    if args.dry_run:
        for run in runs:
            print(subprocess.list2cmdline(command_for(command, run)))
        return 0

    log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="bench-run-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    print(f"{len(runs)} runs, {args.jobs} at a time; logs in {log_dir}", flush=True)

    def one(run: Run) -> tuple[int, float]:
        log = log_dir / log_name(run)
        started = time.perf_counter()
        with open(log, "w") as out:
            out.write(subprocess.list2cmdline(command_for(command, run)) + "\n")
            out.flush()
            try:
                code = subprocess.call(command_for(command, run), stdout=out, stderr=subprocess.STDOUT)
            except OSError as err:  # the program is not there, or not executable
                out.write(f"{err}\n")
                code = 127
        return code, time.perf_counter() - started

    def report(run: Run, result: tuple[int, float]) -> None:
        code, seconds = result
        print(f"[{run.index + 1}/{run.total}] {run.label()}: exit {code}, {seconds:.1f} s ({log_dir / log_name(run)})", flush=True)

    results = run_grid(one, args.tasks, args.seeds, args.configs, jobs=args.jobs, order=args.order, on_result=report)
    print("\n| task | config | seed | exit | seconds |\n|---|---|---:|---:|---:|")
    for run, (code, seconds) in results:
        print(f"| {'-' if run.task is None else run.task} | {'-' if run.config is None else run.config} | {run.seed} "
              f"| {code} | {seconds:.1f} |")
    failed = sum(code != 0 for _, (code, _) in results)
    if failed:
        print(f"\n{failed} of {len(results)} runs failed; their logs say why", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
