"""`make bench-check`: re-run the README's short benchmarks on this machine and fail when a figure
the README gives is further from today's measurement than its noise allows.

Each check names the README text it reads the published figure from (a regular expression with
one group, matched in the Performance table's row), the benchmark that measures it now (medians of
--repeats rounds), and its noise: the relative difference that rounds of the same code showed on
the machine the figure came from (docs/benchmarks.md gives those rounds). A figure outside its band
is either stale (re-measure it and update the README with the command and commit) or a regression.

    python bench/check_readme.py [--repeats 3] [--only palaestrai]

Covered now: bench/peers/palaestrai.py's arl-learn side (command to exit, first step, phase switch, steps/s,
peak memory), one SAC gradient step against Stable-Baselines3's (bench/speed/sac_step.py --sb3, Hopper's networks)
and the cost of --deterministic (bench/speed/deterministic_cost.py, HalfCheetah-v5 at 200k steps, the ML-Agents walker config). The last two need
the `bench` extra (Stable-Baselines3, MuJoCo), which `make bench-check` installs. The long ones (MuJoCo
learning, studies, installs, the learning table) are not re-run here.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
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
    Check("palaestrai", "command to exit (s)", r"\| ([\d.]+) s from command to exit", "wall", 0.35),
    Check("palaestrai", "phase switch (s)", r"phase switch ([\d.]+) s", "switch", 0.5),
    Check("palaestrai", "environment steps/s", r"([\d,]+) environment steps/s", "steps_per_s", 0.3),
    Check("palaestrai", "peak memory (MB)", r"peak memory ([\d,]+) MB", "peak_mb", 0.1),
    Check("palaestrai", "first step (s)", r"first step after ([\d.]+) s", "first_step", 0.35),
    # Three runs of bench/speed/sac_step.py on ed4892a gave 0.74 / 0.77 / 0.76; bench/speed/deterministic_cost.py's rounds
    # 1.20 / 1.34 / 1.03 around its median 1.20 (docs/benchmarks.md, "Deterministic runs" and "make bench-check").
    # Both read the ml_arl column of their table row: the first "| <figure>x" after the row's link.
    Check("sac-step", "SAC gradient step / SB3's", r"\[One SAC gradient step\]\([^)]*\)[^|]*\| ([\d.]+)x", "ratio", 0.1),
    Check("deterministic", "--deterministic wall-clock / without", r"\[`--deterministic`\]\([^)]*\)[^|]*\| ([\d.]+)x", "ratio", 0.15),
]


def measure_palaestrai(repeats: int) -> dict[str, float]:
    from bench.peers.palaestrai import RUN_FILE, run_ours

    rounds = []
    for _ in range(repeats):
        folder = tempfile.mkdtemp(prefix="bench-check-palaestrai-")
        try:
            result = run_ours(os.path.abspath(RUN_FILE), folder, 600.0, 0.05)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        if result["rc"] != 0:
            raise SystemExit(f"bench/peers/palaestrai.py's arl-learn run failed (exit {result['rc']})")
        rounds.append(result)
    return {k: statistics.median(r[k] for r in rounds) for k in ("wall", "switch", "steps_per_s", "peak_mb", "first_step")}


def _figure(cmd: list[str], pattern: str, what: str) -> float:
    """Run a bench script and read one figure from its output."""
    proc = subprocess.run([sys.executable, *cmd], capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}")
    found = re.search(pattern, proc.stdout)
    if found is None:
        raise SystemExit(f"{' '.join(cmd)}: no {what} in its output")
    return float(found.group(1))


def measure_sac_step(repeats: int) -> dict[str, float]:
    cmd = ["bench/speed/sac_step.py", "--config", "config/mujoco/Hopper-sac.yaml", "--behavior", "Hopper", "--obs", "11",
           "--actions", "3", "--repeats", str(max(repeats, 3)), "--steps", "100", "--sb3"]
    return {"ratio": _figure(cmd, r"ours / SB3: wall ([\d.]+)", "'ours / SB3' line")}


def measure_deterministic(repeats: int) -> dict[str, float]:
    cmd = ["bench/speed/deterministic_cost.py", "--repeats", str(repeats)]
    return {"ratio": _figure(cmd, r"with it [\d.]+ s: x([\d.]+)", "ratio")}


MEASURES: dict[str, Callable[[int], dict[str, float]]] = {
    "palaestrai": measure_palaestrai,
    "sac-step": measure_sac_step,
    "deterministic": measure_deterministic,
}


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
