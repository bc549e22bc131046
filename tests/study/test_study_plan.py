"""arl-study's pieces alone: the study file's checks (every problem at once, one line each), the
search space's values, the metric's reductions, the statistics over seeds against hand values."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import optuna
import pytest

from ml_arl.core.exceptions import ConfigError
from ml_arl.study import space
from ml_arl.study.bootstrap import iqm, seed_statistics
from ml_arl.study.metric import reduce
from ml_arl.study.plan import load_plan
from ml_arl.study.plots import seed_band
from ml_arl.study.settings import MetricSettings
from tests.support.runs import arl_study_here

BASE = """\
env_settings: {env_path: builtin:Reach, num_envs: 1, manager: inprocess}
behaviors:
  Reach:
    trainer_type: ppo
    hyperparameters: {batch_size: 64, buffer_size: 256, learning_rate: 3.0e-3, num_epoch: 3}
    network_settings: {hidden_units: 16, num_layers: 1}
    max_steps: 2000
    summary_freq: 500
"""
LR = "behaviors.Reach.hyperparameters.learning_rate"


def write_study(folder: Path, study: str, base: str = BASE) -> Path:
    (folder / "base.yaml").write_text(base)
    path = folder / "study.yaml"
    path.write_text(study)
    return path


def problems(folder: Path, study: str, base: str = BASE) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_plan(str(write_study(folder, study, base)))
    return info.value.problems


def test_the_issue_contract_loads(tmp_path: Path) -> None:
    plan = load_plan(str(write_study(tmp_path, f"""\
config: base.yaml
trials: 20
parallel: 2
seeds: [0]
metric: {{tag: "Environment/Cumulative Reward", reduce: last, direction: maximize}}
sampler: tpe
pruner: median
search:
  {LR}: {{sampler_type: log_uniform, sampler_parameters: {{min_value: 1.0e-4, max_value: 1.0e-2}}}}
  behaviors.Reach.hyperparameters.num_epoch: {{sampler_type: int_uniform, sampler_parameters: {{min_value: 3, max_value: 10}}}}
""")))
    assert plan.settings.n_trials == 20 and plan.settings.parallel == 2
    assert plan.behavior == "Reach" and plan.span == 2000
    assert list(plan.settings.search) == [LR, "behaviors.Reach.hyperparameters.num_epoch"]
    assert plan.trial_config({LR: 1e-3})["behaviors"]["Reach"]["hyperparameters"]["learning_rate"] == 1e-3


def test_every_problem_at_once_with_the_closest_key(tmp_path: Path) -> None:
    lines = problems(tmp_path, """\
config: base.yaml
trials: 0
seeds: [1, 1]
metric: {tag: x, reduce: median}
sampler: tpee
serach: {}
search:
  behaviors.Reach.hyperparameters.learnin_rate: {sampler_type: log_uniform, sampler_parameters: {min_value: 1.0e-4, max_value: 1.0e-2}}
  behaviors.Reach.hyperparameters.num_epoch: {sampler_type: int_uniform, sampler_parameters: {min_value: -3, max_value: 10}}
  behaviors.Reach.hyperparameters.beta: {sampler_type: gausian, sampler_parameters: {mean: 1}}
""")
    text = "\n".join(lines)
    assert all(line.startswith(str(tmp_path / "study.yaml")) for line in lines), text
    assert all("\n" not in line for line in lines)
    assert "trials: 0 is invalid" in text
    assert "seeds: [1, 1] is invalid: lists a seed twice" in text
    assert "metric.reduce: 'median' is invalid" in text
    assert "did you mean 'tpe'?" in text
    assert "serach: unknown key 'serach'; did you mean 'search'?" in text
    assert ("search.behaviors.Reach.hyperparameters.learnin_rate: not a key of " in text
            and f"did you mean '{LR}'?" in text)
    assert "search.behaviors.Reach.hyperparameters.num_epoch: -3 makes the config invalid" in text
    assert "search.behaviors.Reach.hyperparameters.beta.sampler_type: 'gausian' is not a search sampler; did you mean 'gaussian'?" in text
    assert len(lines) == 8, text


def test_a_broken_metric_key_and_a_broken_range_hide_no_other_problem(tmp_path: Path) -> None:
    lines = problems(tmp_path, f"""\
config: base.yaml
trials: 2
metric: {{behavior: Rech, phase: test, reduce: mean_last_0}}
search:
  {LR}: {{sampler_type: log_uniform, sampler_parameters: {{min_value: 1.0e-2, max_value: 1.0e-4}}}}
""")
    text = "\n".join(lines)
    assert "metric.reduce: 'mean_last_0' is invalid" in text
    assert "metric.behavior: 'Rech' is not a behavior of the config; did you mean 'Reach'?" in text
    assert "metric.phase: 'test' is not a phase of the config; the config has no phases" in text
    assert "min_value 0.01 is larger than max_value 0.0001; swap them" in text
    assert "with no search" not in text  # the search is there, with a problem of its own
    assert len(lines) == 4, text


@pytest.mark.parametrize(("study", "expected"), [
    ("config: base.yaml\nsearch: {behaviors.Reach: {sampler_type: uniform, sampler_parameters: {min_value: 0, max_value: 1}}}\n",
     "search.behaviors.Reach: a section of"),
    ("config: nope.yaml\n", "config: nope.yaml is not a file (the path is relative to the study file)"),
    ("config: base.yaml\ntrials: 3\n", "trials: 3 trials with no search would run one config 3 times; give seeds instead"),
    ("config: base.yaml\nsampler: grid\nsearch: {x.y: {sampler_type: uniform, sampler_parameters: {}}}\n",
     "search.x.y: a grid needs a finite set of values (int_uniform or choice), not uniform"),
    ("config: base.yaml\nmetric: {behavior: Rech}\n", "metric.behavior: 'Rech' is not a behavior of the config; did you mean 'Reach'?"),
    ("config: base.yaml\nsearch: {" + LR + ": {sampler_type: log_uniform, sampler_parameters: {min_value: 0, max_value: 1}}}\n",
     "min_value 0.0 must be above 0 for a log_uniform sampler"),
    ("config: base.yaml\nsearch: {" + LR + ": {sampler_type: choice, sampler_parameters: {values: []}}}\n", "values"),
])
def test_one_line_per_problem(tmp_path: Path, study: str, expected: str) -> None:
    lines = problems(tmp_path, study)
    assert any(expected in line for line in lines), lines


def test_a_broken_base_config_is_reported_as_arl_learn_would(tmp_path: Path) -> None:
    lines = problems(tmp_path, "config: base.yaml\n", base=BASE.replace("num_epoch: 3", "num_epohc: 3"))
    assert any(str(tmp_path / "base.yaml") in line and "did you mean 'num_epoch'?" in line for line in lines), lines


def test_several_behaviors_need_metric_behavior(tmp_path: Path) -> None:
    base = BASE + "  ReachDiscrete: {trainer_type: ppo}\n"
    lines = problems(tmp_path, "config: base.yaml\n", base)
    assert any("metric.behavior: the config has behaviors Reach, ReachDiscrete; name the one" in line for line in lines), lines


def test_bad_study_file_exits_2_and_starts_nothing(tmp_path: Path) -> None:
    study = write_study(tmp_path, "config: base.yaml\ntrials: -1\nsearch: {a.b: {sampler_type: choice, sampler_parameters: {values: [1]}}}\n")
    result = arl_study_here([study, "--run-id", "s", "--results-dir", tmp_path / "results"], tmp_path)
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith("arl-study: error: ") for line in lines), result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert not (tmp_path / "results").exists()


def _trial(params: dict[str, float]) -> optuna.trial.FixedTrial:
    return optuna.trial.FixedTrial(params)


def test_search_values_follow_their_samplers() -> None:
    from ml_arl.study.settings import GaussianSearch, IntUniformSearch, MultiRangeUniformSearch

    gauss = GaussianSearch.model_validate({"sampler_type": "gaussian", "sampler_parameters": {"mean": 2.0, "st_dev": 0.5}})
    assert space.suggest(_trial({"g (quantile)": 0.5}), "g", gauss) == pytest.approx(2.0)
    assert space.suggest(_trial({"g (quantile)": 0.8413447}), "g", gauss) == pytest.approx(2.5, abs=1e-5)
    multi = MultiRangeUniformSearch.model_validate(
        {"sampler_type": "multirangeuniform", "sampler_parameters": {"intervals": [[0, 1], [10, 12]]}})
    assert space.suggest(_trial({"m (position)": 0.25}), "m", multi) == 0.25
    assert space.suggest(_trial({"m (position)": 2.5}), "m", multi) == 11.5  # 1.5 into the second interval
    ints = IntUniformSearch.model_validate({"sampler_type": "int_uniform", "sampler_parameters": {"min_value": 2, "max_value": 8, "step": 3}})
    assert space.grid_values(ints) == [2, 5, 8]
    assert space.set_key({"a": {"b": 1}}, "a.c.d", 2) == {"a": {"b": 1, "c": {"d": 2}}}


def test_reductions() -> None:
    points = [(1, 1.0), (2, 5.0), (3, float("nan")), (4, 3.0)]
    assert reduce(points, MetricSettings(reduce="last")) == 3.0
    assert reduce(points, MetricSettings(reduce="max")) == 5.0
    assert reduce(points, MetricSettings(reduce="min")) == 1.0
    assert reduce(points, MetricSettings(reduce="mean_last_2")) == 4.0
    assert reduce(points, MetricSettings(reduce="mean")) == 3.0  # nan left out
    assert reduce([], MetricSettings()) is None


def test_statistics_against_hand_values() -> None:
    values = [1.0, 2.0, 3.0, 4.0, 10.0, 6.0, 7.0, 8.0]
    assert float(iqm(np.array(values))) == pytest.approx((3 + 4 + 6 + 7) / 4)  # the middle half of 8 runs
    stats = seed_statistics(values)
    assert stats["mean"]["value"] == pytest.approx(41 / 8)
    assert stats["iqm"]["low"] < stats["iqm"]["value"] < stats["iqm"]["high"]
    assert stats["mean"]["low"] >= 1.0 and stats["mean"]["high"] <= 10.0
    single = seed_statistics([5.0])
    assert single["mean"] == {"value": 5.0, "low": None, "high": None}


def test_seed_band_is_the_mean_with_an_interval_that_holds_it() -> None:
    steps = np.array([0.0, 100.0])
    grid, mean, low, high = seed_band([(steps, np.array([0.0, 1.0])), (steps, np.array([0.0, 3.0])), (steps, np.array([0.0, 2.0]))])
    assert mean[-1] == pytest.approx(2.0) and mean[0] == 0.0
    assert low[-1] <= 2.0 <= high[-1] and 1.0 <= low[-1] and high[-1] <= 3.0
    assert math.isclose(grid[-1], 100.0)


def test_keys_index_lists_and_grid_mode_checks(tmp_path: Path) -> None:
    config = {"phases": [{"name": "a", "max_steps": 1}, {"name": "b", "max_steps": 2}]}
    assert space.set_key(config, "phases.1.max_steps", 5)["phases"] == [{"name": "a", "max_steps": 1}, {"name": "b", "max_steps": 5}]
    assert space.dotted_keys(config) == ["phases.0.name", "phases.0.max_steps", "phases.1.name", "phases.1.max_steps"]
    lines = problems(tmp_path, f"""\
config: base.yaml
mode: grid
trials: 3
sampler: tpe
search:
  {LR}: {{sampler_type: log_uniform, sampler_parameters: {{min_value: 1.0e-4, max_value: 1.0e-2}}}}
metric: {{phase: test}}
""")
    text = "\n".join(lines)
    assert "trials: mode grid runs every combination of the search; leave trials out" in text
    assert "sampler: mode grid walks every combination in order; leave sampler (tpe) out" in text
    assert f"search.{LR}: a grid needs a finite set of values (int_uniform or choice), not log_uniform" in text
    assert "metric.phase: 'test' is not a phase of the config; the config has no phases" in text


@pytest.mark.parametrize("values", [[3.0e-3], [1.0e-3, 3.0e-3]])
def test_a_grid_of_one_combination_or_more_is_asked_and_told_in_order(tmp_path: Path, values: list[float]) -> None:
    """mode grid queues every combination; a one-combination grid once crashed at its first tell."""
    from ml_arl.study.design import write_design
    from ml_arl.study.optuna_samplers import make_sampler
    from ml_arl.study.space import suggest

    plan = load_plan(str(write_study(tmp_path, f"""\
config: base.yaml
mode: grid
seeds: [1, 2]
search:
  {LR}: {{sampler_type: choice, sampler_parameters: {{values: {values}}}}}
""")))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=make_sampler(plan), direction="maximize")
    assert write_design(plan, str(tmp_path / "out"), study) == len(values)
    for value in values:
        trial = study.ask()
        assert suggest(trial, LR, plan.settings.search[LR]) == value
        study.tell(trial, 1.0)
    assert [t.params[LR] for t in study.trials] == values
