"""The study file's sampler and pruner names as Optuna objects.

Median pruning (Optuna's ``MedianPruner``) stops a trial whose metric so far is below the median
of earlier trials at the same step, once ``startup_trials`` trials have ended and past
``warmup_steps`` (default: a quarter of a run's max_steps). Hyperband (``HyperbandPruner``) gives
a trial resources from a quarter of a run up to all of its runs.
"""

from __future__ import annotations

import warnings

import optuna

from ml_arl.study.plan import StudyPlan
from ml_arl.study.space import grid_values


def make_sampler(plan: StudyPlan, trials_so_far: int = 0) -> optuna.samplers.BaseSampler:
    """``trials_so_far``: the trials a resumed study has; its sampler starts from another seed
    (the same one for the same history), or it would draw the first study's values again."""
    s = plan.settings
    seed = s.sampler_seed + trials_so_far
    if s.mode == "grid":
        # every trial is queued with all its values (ml_arl.study.design), so the sampler draws
        # nothing; Optuna's GridSampler would fail telling a queued trial of a one-combination grid
        return optuna.samplers.RandomSampler(seed=seed)
    if s.sampler == "grid":
        return optuna.samplers.GridSampler({key: grid_values(sampler) for key, sampler in s.search.items()}, seed=seed)
    if s.sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        # with trials at once, the running ones count as bad guesses until they end (Optuna's advice for
        # parallel TPE): the next suggestion moves away from them instead of repeating them
        return optuna.samplers.TPESampler(seed=seed, constant_liar=s.parallel > 1)


def make_pruner(plan: StudyPlan) -> optuna.pruners.BasePruner:
    s = plan.settings
    warmup = s.warmup_steps if s.warmup_steps is not None else plan.span // 4
    if s.pruning == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=s.startup_trials, n_warmup_steps=warmup)
    if s.pruning == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=max(1, warmup), max_resource=plan.span * len(s.seeds))
    return optuna.pruners.NopPruner()
