"""Two sides' per-seed scores side by side: mean and IQM (interquartile mean), each with its 95%
percentile-bootstrap interval over the seeds (ml_arl.study.bootstrap, as arl-study reports them), and
the ratio of the means and of the IQMs.

    python bench/common/compare_seeds.py --a "ML-Agents 1.1.0" 478 713 771 634.3 --b arl-learn 345.2 665.4 376.8 372.0 958.1

Where each side's scores come from is the caller's to say (docs/benchmarks/mujoco.md gives the
commands that produced them).
"""

from __future__ import annotations

import argparse

from ml_arl.study.bootstrap import seed_statistics


def interval(e: dict[str, float | None]) -> str:
    """An estimate of seed_statistics as "value [low, high]" (the value alone without an interval)."""
    if e["low"] is None or e["high"] is None:
        return f"{e['value']:,.0f}"
    return f"{e['value']:,.0f} [{e['low']:,.0f}, {e['high']:,.0f}]"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--a", nargs="+", required=True, metavar=("NAME", "SCORE"), help="name, then one score per seed")
    p.add_argument("--b", nargs="+", required=True, metavar=("NAME", "SCORE"))
    args = p.parse_args(argv)
    sides = [(side[0], [float(v) for v in side[1:]]) for side in (args.a, args.b)]
    stats = {name: seed_statistics(values) for name, values in sides}
    print("| side | seeds | scores | mean [95% CI] | IQM [95% CI] |")
    print("|---|---:|---|---|---|")
    for name, values in sides:
        s = stats[name]
        print(f"| {name} | {len(values)} | {' / '.join(f'{v:,.0f}' for v in values)} | {interval(s['mean'])} | {interval(s['iqm'])} |")
    (a, sa), (b, sb) = (sides[0][0], stats[sides[0][0]]), (sides[1][0], stats[sides[1][0]])
    print(f"\n{b} / {a}: mean {sb['mean']['value'] / sa['mean']['value']:.2f}, IQM {sb['iqm']['value'] / sa['iqm']['value']:.2f}")


if __name__ == "__main__":
    main()
