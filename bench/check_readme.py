"""`make bench-check`: re-run the README's short benchmarks on this machine and fail when a figure
the README gives is further from today's measurement than its noise allows.

Each check names the README sentence it reads the published figure from (a regular expression with
one group), the benchmark that measures it now (medians of --repeats rounds), and its noise: the
relative difference that rounds of the same code showed on the machine the figure came from
(docs/benchmarks.md gives those rounds). A figure outside its band is either stale (re-measure it
and update the README with the command and commit) or a regression.

    python bench/check_readme.py [--repeats 3] [--only palaestrai]

Covered now: bench/palaestrai.py's arl-learn side (command to exit, first step, phase switch, steps/s,
peak memory). The long ones (MuJoCo, studies, installs, the learning table) are not re-run here.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


@dataclass(frozen=True)
class Check:
    group: str
    name: str
    readme: str  # a regex with one group: the published figure
    key: str  # what the group's benchmark returns
    noise: float  # allowed relative difference


# The palaestrAI row: one round published (188c88c); three --ours-only --repeats 3 rounds on 550ebf4
# gave 4.1 s / 0.148 s / 960 steps/s / 644 MB against it (docs/benchmarks.md), so timings move by a
# quarter or so from round to round on a shared 2-core machine and memory by under 5%.
CHECKS = [
    Check("palaestrai", "command to exit (s)", r"run\):\s+([\d.]+) s from command to exit", "wall", 0.35),
    Check("palaestrai", "phase switch (s)", r"a phase switch of ([\d.]+) s", "switch", 0.5),
    Check("palaestrai", "environment steps/s", r"([\d,]+) environment steps/s against", "steps_per_s", 0.3),
    Check("palaestrai", "peak memory (MB)", r"([\d,]+) MB against [\d.]+ GB", "peak_mb", 0.1),
    Check("palaestrai", "first step (s)", r"the first step\s+after ([\d.]+) s", "first_step", 0.35),
]


def measure_palaestrai(repeats: int) -> dict[str, float]:
    from bench.palaestrai import RUN_FILE, run_ours

    rounds = []
    for _ in range(repeats):
        folder = tempfile.mkdtemp(prefix="bench-check-palaestrai-")
        try:
            result = run_ours(os.path.abspath(RUN_FILE), folder, 600.0, 0.05)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        if result["rc"] != 0:
            raise SystemExit(f"bench/palaestrai.py's arl-learn run failed (exit {result['rc']})")
        rounds.append(result)
    return {k: statistics.median(r[k] for r in rounds) for k in ("wall", "switch", "steps_per_s", "peak_mb", "first_step")}


MEASURES: dict[str, Callable[[int], dict[str, float]]] = {"palaestrai": measure_palaestrai}


def published(text: str, check: Check) -> float:
    found = re.search(check.readme, text, re.S)
    if found is None:
        raise SystemExit(f"README.md: no figure for '{check.name}' (pattern {check.readme!r}); update CHECKS with the README")
    return float(found.group(1).replace(",", ""))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--only", choices=sorted(MEASURES))
    args = p.parse_args(argv)
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = " ".join(f.read().split())  # sentences broken over lines read as one
    failed = 0
    load = os.getloadavg()[0]
    if load > 0.5:
        print(f"load average {load:.1f} at the start: other work shares the cores, and the timings will show it",
              file=sys.stderr)
    print(f"| check | README | now (median of {args.repeats}) | difference | noise | |")
    print("|---|---:|---:|---:|---:|---|")
    for group, measure in MEASURES.items():
        if args.only and group != args.only:
            continue
        checks = [c for c in CHECKS if c.group == group]
        figures = {c.name: published(readme, c) for c in checks}  # a README without them fails before the runs
        now = measure(args.repeats)
        for c in checks:
            then, value = figures[c.name], now[c.key]
            diff = (value - then) / then if then else float("inf")
            ok = abs(diff) <= c.noise
            failed += not ok
            print(f"| {group}: {c.name} | {then:,.3g} | {value:,.3g} | {diff:+.0%} | {c.noise:.0%} | {'ok' if ok else 'OUTSIDE'} |")
    if failed:
        print(f"\n{failed} README figure(s) outside their noise: re-measure them (the README says with which command) "
              "and update the README, or find the regression", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
