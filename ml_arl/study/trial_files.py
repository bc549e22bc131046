"""What a study leaves in results/<study>/ besides the runs: ``trials.csv`` (one row per trial),
``best.yaml`` (the best trial's complete arl-learn config) and, for a study over seeds only,
``statistics.json`` (mean and IQM over the seeds, with 95% bootstrap intervals). Every file is
written whole or not at all (ml_arl.core.atomic_files), after each trial ends."""

from __future__ import annotations

import csv
import io
import math
import os
from typing import Any, Optional

import optuna
from optuna.trial import FrozenTrial, TrialState

from ml_arl.core.atomic_files import atomic_write, write_json, write_yaml
from ml_arl.study.bootstrap import seed_statistics
from ml_arl.study.plan import StudyPlan
from ml_arl.study.space import VALUES_ATTR

TRIALS_CSV = "trials.csv"
BEST_YAML = "best.yaml"
STATISTICS_JSON = "statistics.json"
SEED_VALUES_ATTR = "seed_values"  # trial user attribute: {seed: the metric of its run}
FAIL_REASON_ATTR = "fail_reason"
PRUNED_AT_ATTR = "pruned_at"
INTERRUPTED_ATTR = "interrupted"  # stopped by Ctrl-C or a kill, to run again
RUN_NAME_ATTR = "run_name"  # the prefix of its runs' folders (a trial run again keeps its first one)
RESUME_OF_ATTR = "resume_of"  # the interrupted trial it runs again
SECONDS_ATTR = "seconds"


def _cell(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return ""
    return "" if value is None else value


def run_ids(name: str, seeds: list[int]) -> list[tuple[int, str]]:
    """(seed, run id) of a trial's runs: the trial's name with one seed, name-seedS with several."""
    return [(s, name if len(seeds) == 1 else f"{name}-seed{s}") for s in seeds]


def state_name(trial: FrozenTrial) -> str:
    """Optuna's state, but INTERRUPTED for a trial stopped by Ctrl-C or a kill (FAIL to Optuna)."""
    return "INTERRUPTED" if trial.user_attrs.get(INTERRUPTED_ATTR) else trial.state.name


def trial_rows(plan: StudyPlan, trials: list[FrozenTrial]) -> list[dict[str, Any]]:
    keys = list(plan.settings.search)
    rerun = {t.user_attrs[RESUME_OF_ATTR]: t.number for t in trials if RESUME_OF_ATTR in t.user_attrs}
    rows = []
    for t in trials:
        if t.state == TrialState.WAITING:
            continue
        values = t.user_attrs.get(VALUES_ATTR, {})
        seeds = t.user_attrs.get(SEED_VALUES_ATTR, {})
        row: dict[str, Any] = {"number": t.number, "state": state_name(t)}
        row.update({k: _cell(values.get(k)) for k in keys})
        row["metric"] = _cell(t.value if t.state == TrialState.COMPLETE else None)
        row.update({f"metric_seed{s}": _cell(seeds.get(str(s))) for s in plan.settings.seeds})
        name = t.user_attrs.get(RUN_NAME_ATTR)
        row["runs"] = " ".join(run_id for _, run_id in run_ids(name, list(plan.settings.seeds))) if name else ""
        row["pruned_at_step"] = _cell(t.user_attrs.get(PRUNED_AT_ATTR))
        row["seconds"] = _cell(t.user_attrs.get(SECONDS_ATTR))
        row["reason"] = t.user_attrs.get(FAIL_REASON_ATTR, "")
        again = f"run again as trial {rerun[t.number]}" if t.number in rerun else "arl-study --resume runs it again"
        if t.user_attrs.get(INTERRUPTED_ATTR):
            row["reason"] = f"interrupted; {again}"
        elif t.state == TrialState.FAIL and not row["reason"]:
            row["reason"] = f"abandoned (its arl-study stopped answering); {again}"
        rows.append(row)
    return rows


def write_trials_csv(folder: str, plan: StudyPlan, study: optuna.Study) -> None:
    rows = trial_rows(plan, study.get_trials(deepcopy=False))
    fields = ["number", "state", *plan.settings.search, "metric", *[f"metric_seed{s}" for s in plan.settings.seeds],
              "runs", "pruned_at_step", "seconds", "reason"]
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write(os.path.join(folder, TRIALS_CSV), lambda f: f.write(text.getvalue()), "w")


def best_trial(study: optuna.Study) -> Optional[FrozenTrial]:
    if not any(t.state == TrialState.COMPLETE for t in study.get_trials(deepcopy=False)):
        return None
    return study.best_trial


def write_best(folder: str, plan: StudyPlan, study: optuna.Study) -> Optional[FrozenTrial]:
    best = best_trial(study)
    if best is not None:
        write_yaml(os.path.join(folder, BEST_YAML), plan.trial_config(best.user_attrs.get(VALUES_ATTR, {})))
    return best


def write_statistics(folder: str, plan: StudyPlan, study: optuna.Study) -> Optional[dict[str, Any]]:
    """Over-the-seeds statistics of a study without a search (its one trial's seeds)."""
    trial = best_trial(study)
    if plan.settings.search or trial is None:
        return None
    seeds = trial.user_attrs.get(SEED_VALUES_ATTR, {})
    values = [float(seeds[str(s)]) for s in plan.settings.seeds if seeds.get(str(s)) is not None]
    stats = seed_statistics(values)
    stats["metric"] = plan.settings.metric.model_dump()
    stats["seeds"] = [s for s in plan.settings.seeds if seeds.get(str(s)) is not None]
    write_json(os.path.join(folder, STATISTICS_JSON), stats)
    return stats
