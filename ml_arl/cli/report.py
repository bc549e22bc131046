"""arl-report: summarise a run's results (its results.sqlite, or its rows in a PostgreSQL store) as a table (stdout) and learning curves (report.png);
given a study's folder (arl-study), its summary and plots (ml_arl.study.summary).

Exit codes: 0 done, 2 the path is not a run folder with a readable, non-empty results database or the
PNG cannot be written there.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any, Optional

from ml_arl.core.exceptions import ArlError
from ml_arl.results.plotting import PNG_FILENAME, plot_run
from ml_arl.results.run_results import RunResults
from ml_arl.results.run_store import RunStore, store_of
from ml_arl.results.sqlite_store import STORE_FILENAME
from ml_arl.study import is_study_folder

logger = logging.getLogger("ml_arl")

LAST_FRACTION = 0.1  # "obj last10%": mean objective of the last 10 % of a group's episodes (at least one)
COLUMNS = ("phase", "mode", "behavior", "episodes", "mean len", "mean env reward", "mean objective",
           "obj last10%", "final ELO")


class ReportError(ArlError):
    """The report cannot be made from the given path."""

    exit_code = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit 2
        self.exit(2, f"arl-report: error: {message} (see arl-report --help)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="arl-report", description="Summary table and learning curves of an arl-learn run, or an arl-study study.")
    p.add_argument("results_dir", metavar="RESULTS_DIR", nargs="?",
                   help=f"run folder (results/<run-id>) or its {STORE_FILENAME}, or a study's folder (results/<study>); "
                   "with --store, a run id (none: list the store's runs)")
    p.add_argument("seeds", metavar="MORE_RUNS", nargs="*",
                   help="more runs of the same config (other seeds): a resilience matrix pools them, its intervals over "
                   "seeds and episodes")
    p.add_argument("--store", metavar="URL",
                   help="read the runs from the PostgreSQL results store at URL (arl-learn --store) instead of their folders")
    p.add_argument("--output", metavar="PATH",
                   help=f"where to write the PNG (default: RESULTS_DIR/{PNG_FILENAME}; with --store and a run id, <run-id>.png here)")
    p.add_argument("--no-plot", action="store_true", help="only print the table")
    return p


def locate_store(path: str, url: Optional[str] = None) -> tuple[str, RunStore]:
    """(the run's folder, where its results are) for a run folder, a results.sqlite, or with ``url``
    a run id (the folder: ``path`` when it is one, else "")."""
    if url is not None:
        if os.path.isdir(path):  # a run folder: its run id from its configuration.yaml
            own = store_of(path)
            return path, RunStore(url=url, run_id=own.run_id if own.url else os.path.basename(os.path.normpath(path)))
        return "", RunStore(url=url, run_id=path)
    if os.path.isfile(path):
        return os.path.dirname(path) or ".", RunStore(path=path)
    if not os.path.isdir(path):
        raise ReportError(f"{path} does not exist; pass a run folder (results/<run-id>) or its {STORE_FILENAME}")
    store = store_of(path)
    if not store.exists:
        raise ReportError(f"no {STORE_FILENAME} in {path}; pass a run folder written by arl-learn (results/<run-id>)")
    return path, store


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def summary_rows(results: RunResults) -> list[tuple[str, ...]]:
    """One row of formatted cells per (phase, behavior), in the order of ``COLUMNS``."""
    rows: list[tuple[str, ...]] = []
    for s in results.series:
        tail = s.objective[-max(1, round(len(s) * LAST_FRACTION)):]
        elo = s.final_elo
        rows.append((
            s.phase, s.mode, s.behavior, str(len(s)), f"{_mean([float(n) for n in s.length]):.1f}",
            f"{_mean(s.env_reward):.3f}", f"{_mean(s.objective):.3f}", f"{_mean(tail):.3f}",
            "-" if elo is None else f"{elo:.1f}",
        ))
    return rows


def format_table(rows: list[tuple[str, ...]]) -> str:
    """Aligned plain-text columns: text left-aligned, numbers right-aligned."""
    widths = [max(len(c) for c in col) for col in zip(COLUMNS, *rows)]
    left = (True, True, True) + (False,) * (len(COLUMNS) - 3)

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) if lj else c.rjust(w) for c, w, lj in zip(cells, widths, left)).rstrip()

    return "\n".join([line(COLUMNS), line(tuple("-" * w for w in widths)), *(line(r) for r in rows)])


def _report_study(folder: str, draw: bool) -> int:
    """A study's folder (arl-study): its summary and its plots."""
    from ml_arl.study.summary import report

    try:
        lines, written = report(folder, draw)
    except OSError as err:
        raise ReportError(f"cannot write the plots into {folder}: {err.strerror or err}; pass --no-plot") from err
    for line in [*lines, *written]:
        print(line)
    return 0


def _report_matrices(
    folder: str, results: RunResults, more: list[str], url: Optional[str], draw: bool, out_dir: str
) -> list[str]:
    """Print the run's resilience matrices (pooled over ``more`` runs) and write their heat maps.
    A matrix comes from a run folder's configuration.yaml: a run read by id from a store has none."""
    from ml_arl.results.resilience_matrix import build_matrices, format_matrix, plot_matrix

    runs = [(folder, results)]
    for path in more:
        other_folder, other = locate_store(path, url)
        runs.append((other_folder, other.read()))
    written = []
    for m in build_matrices(runs):
        print()
        print(format_matrix(m, len(runs)))
        if draw:
            output = os.path.join(out_dir, f"matrix-{m.group}.png")
            try:
                plot_matrix(m, output)
            except OSError as err:
                raise ReportError(f"cannot write {output}: {err.strerror or err}; pass --no-plot") from err
            print(output)
            written.append(output)
    return written


def _list_runs(url: str) -> int:
    """The run ids a results store holds, one a line."""
    from ml_arl.results.server_store import list_runs

    for run in list_runs(url):
        print(run)
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.results_dir is None:
            if args.store is None:
                raise ReportError("pass a run folder (results/<run-id>), or --store URL to list the runs of a store")
            return _list_runs(args.store)
        if args.store is None and is_study_folder(args.results_dir):
            return _report_study(args.results_dir, not args.no_plot)
        folder, store = locate_store(args.results_dir, args.store)
        results = store.read()
        if not results.series:
            raise ReportError(f"{results.path} has no episodes yet; report a run that has finished at least one episode")
        print(format_table(summary_rows(results)))
        out_dir = folder or "."
        _report_matrices(folder, results, args.seeds, args.store, not args.no_plot, out_dir)
        if args.no_plot:
            return 0
        default = os.path.join(folder, PNG_FILENAME) if folder else f"{os.path.basename(store.run_id)}.png"
        output = args.output or default
        try:
            plot_run(results, output)
        except OSError as err:
            raise ReportError(f"cannot write {output}: {err.strerror or err}; pass --output PATH or --no-plot") from err
        logger.info("Wrote %s", output)
        print(output)
    except ArlError as err:
        sys.stdout.flush()
        sys.stderr.write(f"arl-report: error: {err}\n")
        return err.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
