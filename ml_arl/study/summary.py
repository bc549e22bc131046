"""What a study says when it ends, and what ``arl-report results/<study>`` says at any time: how
many trials ended how, the best trial and its values (or, over seeds, the mean and the IQM with
their intervals), and the PNGs."""

from __future__ import annotations

import os
from collections import Counter
from typing import Optional

import optuna
from optuna.trial import TrialState

from ml_arl.core.exceptions import ArlError
from ml_arl.study import STORAGE_FILE, plots, storage_url
from ml_arl.study.bootstrap import format_estimate, seed_statistics
from ml_arl.study.space import VALUES_ATTR
from ml_arl.study.storage import FINGERPRINT_ATTR, RUN_NAME_ATTR
from ml_arl.study.trial_files import SEED_VALUES_ATTR, STATISTICS_JSON, best_trial, run_ids, state_name


class StudyReportError(ArlError):
    exit_code = 2


def load_study(folder: str) -> optuna.Study:
    storage = storage_url(folder)
    names = optuna.study.get_all_study_names(storage)
    name = os.path.basename(os.path.normpath(folder))
    if not names:
        raise StudyReportError(f"{folder}: {STORAGE_FILE} holds no study")
    return optuna.load_study(storage=storage, study_name=name if name in names else names[0])


def summary_lines(study: optuna.Study) -> list[str]:
    trials = study.get_trials(deepcopy=False)
    states = Counter(state_name(t).lower() for t in trials if t.state != TrialState.WAITING)
    lines = [f"Study {study.study_name}: {len(trials)} trials ({', '.join(f'{n} {s}' for s, n in sorted(states.items()))})"]
    fp = study.user_attrs.get(FINGERPRINT_ATTR, {})
    best = best_trial(study)
    if best is None:
        return lines + ["No trial completed."]
    if fp.get("search"):
        values = ", ".join(f"{k}={v}" for k, v in best.user_attrs.get(VALUES_ATTR, {}).items())
        lines.append(f"Best: trial {best.number}, {fp.get('metric', {}).get('reduce', 'metric')} {best.value:.6g} ({values})")
    else:
        seeds = best.user_attrs.get(SEED_VALUES_ATTR, {})
        stats = seed_statistics([float(v) for v in seeds.values()])
        lines.append(f"Over {stats['runs']} seeds: {format_estimate('mean', stats['mean'])}; {format_estimate('IQM', stats['iqm'])}")
    return lines


def draw(folder: str, study: optuna.Study) -> list[str]:
    fp = study.user_attrs.get(FINGERPRINT_ATTR, {})
    if fp.get("search"):
        return plots.plot_search(folder, study)
    best = best_trial(study)
    if best is None:
        return []
    seeds = [int(s) for s in fp.get("seeds", [])]
    name = best.user_attrs.get(RUN_NAME_ATTR, f"trial-{best.number:04d}")
    runs = dict(run_ids(name, seeds))
    metric = fp.get("metric", {})
    return plots.plot_seeds(folder, runs, metric.get("tag", "Environment/Cumulative Reward"), metric.get("behavior"),
                            fp.get("phase"))


def report(folder: str, plot: bool = True) -> tuple[list[str], list[str]]:
    """(summary lines, PNGs written) of the study in ``folder``."""
    study = load_study(folder)
    written = draw(folder, study) if plot else []
    return summary_lines(study), written


def statistics_path(folder: str) -> Optional[str]:
    path = os.path.join(folder, STATISTICS_JSON)
    return path if os.path.isfile(path) else None
