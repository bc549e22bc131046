"""Design of experiments, as palaestrAI's arsenAI does it (``mode: grid``): every combination of the
search's values (in the order the keys are written, the last key fastest), each written as a
concrete run file before anything runs, ``configs/trial-NNNN.yaml``, with the command that runs it
alone in ``runs.txt``; the study then runs them in that order (queued in Optuna's storage, so a
stopped study resumes where it was)."""

from __future__ import annotations

import itertools
import os
import shlex
from typing import Any

import optuna

from ml_arl.core.atomic_files import atomic_write, write_yaml
from ml_arl.study.plan import StudyPlan
from ml_arl.study.space import grid_values
from ml_arl.study.trial_files import RUN_NAME_ATTR, run_ids

RUNS_FILE = "runs.txt"


def combinations(plan: StudyPlan) -> list[dict[str, Any]]:
    keys = list(plan.settings.search)
    values = [grid_values(plan.settings.search[k]) for k in keys]
    return [dict(zip(keys, combo)) for combo in itertools.product(*values)]


def write_design(plan: StudyPlan, folder: str, study: optuna.Study) -> int:
    """Write every combination's run file and runs.txt, and queue them in ``study``; returns how many."""
    seeds = plan.settings.seeds
    lines = [f"# {plan.path}: {len(combinations(plan))} combinations x {len(seeds)} seed(s); each line runs one alone"]
    for number, values in enumerate(combinations(plan)):
        name = f"trial-{number:04d}"
        config = os.path.join(folder, "configs", f"{name}.yaml")
        os.makedirs(os.path.dirname(config), exist_ok=True)
        write_yaml(config, plan.trial_config(values))
        lines.append("# " + ", ".join(f"{k}={v}" for k, v in values.items()))
        for seed, run_id in run_ids(name, seeds):
            lines.append(f"arl-learn {shlex.quote(config)} --run-id {run_id} --results-dir {shlex.quote(folder)} --seed {seed}")
        study.enqueue_trial(values, user_attrs={RUN_NAME_ATTR: name})
    text = "\n".join(lines) + "\n"
    atomic_write(os.path.join(folder, RUNS_FILE), lambda f: f.write(text), "w")
    return len(combinations(plan))
