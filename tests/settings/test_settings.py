"""The config schema: ML-Agents defaults, strict errors (all at once, one line each, with the
closest key), default_settings merging, and CLI flags overriding only when typed."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from ml_arl.cli.learn import parse_options
from ml_arl.core.exceptions import ConfigError
from ml_arl.settings import RunOptions, TrainerSettings, build_run_options
from ml_arl.settings.config_file import load_config_file
from tests.support.runs import write_config


def problems(data: dict, source: str = "cfg.yaml") -> list[str]:
    with pytest.raises(ConfigError) as err:
        build_run_options(data, {}, source)
    return err.value.problems


def test_mlagents_defaults() -> None:
    t = TrainerSettings()
    hp = t.hyperparameters
    assert (hp.batch_size, hp.buffer_size, hp.learning_rate, hp.beta, hp.epsilon, hp.lambd, hp.num_epoch) == (
        1024, 10240, 3.0e-4, 5.0e-3, 0.2, 0.95, 3
    )
    assert hp.learning_rate_schedule == "linear" and hp.beta_schedule == "linear" and hp.epsilon_schedule == "linear"
    assert (t.max_steps, t.time_horizon, t.summary_freq, t.checkpoint_interval, t.keep_checkpoints) == (
        500000, 64, 50000, 500000, 5
    )
    assert (t.network_settings.hidden_units, t.network_settings.num_layers, t.network_settings.normalize) == (128, 2, False)
    assert t.reward_signals.extrinsic.gamma == 0.99 and t.threaded is False
    env = RunOptions().env_settings
    assert (env.base_port, env.num_envs, env.timeout_wait, env.seed) == (5005, 1, 60, -1)
    assert (env.max_lifetime_restarts, env.restarts_rate_limit_n, env.restarts_rate_limit_period_s) == (10, 1, 60)
    assert RunOptions().checkpoint_settings.run_id == "ppo"


def test_schedules_follow_learning_rate_schedule() -> None:
    opts = build_run_options({"behaviors": {"B": {"hyperparameters": {"learning_rate_schedule": "constant"}}}}, {}, "c")
    hp = opts.behaviors["B"].hyperparameters
    assert hp.beta_schedule == "constant" and hp.epsilon_schedule == "constant"


def test_unknown_key_names_path_and_closest_key() -> None:
    (msg,) = problems({"behaviors": {"Walker": {"hyperparameters": {"learnin_rate": 0.1}}}})
    assert msg.startswith("cfg.yaml: behaviors.Walker.hyperparameters.learnin_rate")
    assert "did you mean 'learning_rate'" in msg


def test_unknown_top_level_section() -> None:
    (msg,) = problems({"env_setings": {"num_envs": 2}})
    assert "env_setings" in msg and "did you mean 'env_settings'" in msg


def test_wrong_type_names_value() -> None:
    (msg,) = problems({"behaviors": {"B": {"max_steps": "lots"}}})
    assert "behaviors.B.max_steps" in msg and "'lots'" in msg


def test_every_problem_reported_at_once() -> None:
    found = problems(
        {
            "behaviors": {"B": {"time_horizon": -3, "hyperparameters": {"batch_sise": 64}, "trainer_type": "ppp"}},
            "env_settings": {"num_envs": "two"},
            "checkpoint_settings": {"run_idd": "x"},
        }
    )
    text = "\n".join(found)
    assert len(found) == 5, text
    for needle in ("time_horizon", "batch_sise", "trainer_type", "num_envs", "run_idd"):
        assert needle in text
    assert "did you mean 'ppo'" in text
    assert all("\n" not in p for p in found)


def test_default_settings_merge_under_behaviors() -> None:
    opts = build_run_options(
        {
            "default_settings": {"max_steps": 1000, "hyperparameters": {"batch_size": 32, "buffer_size": 320}},
            "behaviors": {"A": {"hyperparameters": {"batch_size": 64}}, "B": None},
        },
        {},
        "c",
    )
    assert opts.behaviors["A"].max_steps == 1000
    assert opts.behaviors["A"].hyperparameters.batch_size == 64
    assert opts.behaviors["A"].hyperparameters.buffer_size == 320
    assert opts.behaviors["B"].hyperparameters.batch_size == 32
    assert opts.settings_for("Unlisted?team=1").max_steps == 1000


def test_missing_behavior_without_defaults_gets_the_defaults_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    opts = build_run_options({"behaviors": {"A": {"max_steps": 77}}}, {}, "c")
    with caplog.at_level("WARNING"):
        assert opts.settings_for("NotInConfigB").max_steps == TrainerSettings().max_steps
        assert opts.settings_for("NotInConfigB?team=1").max_steps == TrainerSettings().max_steps
    named = [r for r in caplog.records if "NotInConfigB" in r.getMessage()]
    assert len(named) == 1 and named[0].levelname == "WARNING" and "default settings" in named[0].getMessage()
    assert opts.settings_for("A").max_steps == 77


def test_scientific_notation_steps() -> None:
    opts = build_run_options({"behaviors": {"A": {"max_steps": "5.0e5", "hyperparameters": {"learning_rate": "3.0e-4"}}}}, {}, "c")
    assert opts.behaviors["A"].max_steps == 500000
    assert opts.behaviors["A"].hyperparameters.learning_rate == pytest.approx(3e-4)


def test_sac_hyperparameters_have_mlagents_defaults() -> None:
    opts = build_run_options({"behaviors": {"A": {"trainer_type": "sac"},
                                            "B": {"trainer_type": "sac", "hyperparameters": {"steps_per_update": 4}}}}, {}, "c")
    hp = opts.behaviors["A"].hyperparameters
    assert (hp.batch_size, hp.buffer_size, hp.buffer_init_steps, hp.learning_rate_schedule) == (128, 50000, 0, "constant")
    assert (hp.tau, hp.steps_per_update, hp.init_entcoef, hp.save_replay_buffer) == (0.005, 1.0, 1.0, False)
    assert hp.reward_signal_steps_per_update == 1.0
    assert opts.behaviors["B"].hyperparameters.reward_signal_steps_per_update == 4.0  # follows steps_per_update


def test_sac_refuses_ppo_keys_and_small_buffers() -> None:
    found = problems({"behaviors": {"A": {"trainer_type": "sac", "hyperparameters": {"num_epoch": 3}},
                                    "B": {"trainer_type": "sac", "hyperparameters": {"batch_size": 256, "buffer_size": 100}}}})
    assert any("behaviors.A.hyperparameters.num_epoch: 'num_epoch' is a PPO hyperparameter" in p for p in found), found
    assert any("behaviors.B.hyperparameters.batch_size: 256 is larger than buffer_size" in p for p in found), found


def test_reward_signals_as_mlagents_has_them() -> None:
    opts = build_run_options({"behaviors": {
        "Plain": {},
        "Curious": {"reward_signals": {"curiosity": {"strength": 0.02, "encoding_size": 64}}},
        "Imitator": {"reward_signals": {"gail": {"demo_path": "x.demo"}, "rnd": {}},
                     "behavioral_cloning": {"demo_path": "x.demo", "strength": 0.5}},
    }}, {}, "c")
    assert [n for n, _ in opts.behaviors["Plain"].reward_signals.items()] == ["extrinsic"]
    curious = opts.behaviors["Curious"].reward_signals
    assert [n for n, _ in curious.items()] == ["curiosity"]  # only the signals given, as ML-Agents
    assert curious.curiosity is not None and curious.curiosity.network_settings.hidden_units == 64  # encoding_size alias
    assert curious.curiosity.learning_rate == 3e-4
    imitator = opts.behaviors["Imitator"]
    assert imitator.reward_signals.rnd is not None and imitator.reward_signals.rnd.learning_rate == 1e-4
    gail = imitator.reward_signals.gail
    assert gail is not None and (gail.use_actions, gail.use_vail, gail.gamma) == (False, False, 0.99)
    bc = imitator.behavioral_cloning
    assert bc is not None and (bc.steps, bc.strength, bc.samples_per_update, bc.num_epoch, bc.batch_size) == (0, 0.5, 0, None, None)


def test_sac_hyperparameter_typos_suggest_sac_keys() -> None:
    found = problems({"behaviors": {"A": {"trainer_type": "sac", "hyperparameters": {"tua": 0.01}}}})
    assert found == ["cfg.yaml: behaviors.A.hyperparameters.tua: unknown key 'tua'; did you mean 'tau'?"], found


def test_reward_signal_problems() -> None:
    found = problems({"behaviors": {"A": {"reward_signals": {"gail": {}}}, "B": {"behavioral_cloning": {"strength": 1}},
                                    "C": {"reward_signals": {"curiousity": {}}}, "D": {"reward_signals": {}}}})
    assert any("behaviors.A.reward_signals.gail.demo_path: required key is missing" in p for p in found), found
    assert any("behaviors.B.behavioral_cloning.demo_path: required key is missing" in p for p in found), found
    assert any("behaviors.C.reward_signals.curiousity: unknown key 'curiousity'; did you mean 'curiosity'?" in p for p in found), found
    assert any("behaviors.D.reward_signals" in p and "no reward signal given" in p for p in found), found


def test_cli_overrides_only_typed_flags(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "c.yaml", {"env_settings": {"env_path": "builtin:Reach", "num_envs": 3, "seed": 7},
                                             "behaviors": {"Reach": {}}})
    opts = parse_options([str(cfg)])
    assert opts.env_settings.num_envs == 3 and opts.env_settings.seed == 7
    assert opts.checkpoint_settings.run_id == "ppo"
    opts = parse_options([str(cfg), "--num-envs", "2", "--run-id", "x", "--torch-device", "cpu", "--debug"])
    assert opts.env_settings.num_envs == 2 and opts.env_settings.seed == 7
    assert opts.checkpoint_settings.run_id == "x" and opts.torch_settings.device == "cpu" and opts.debug


def test_a_wrong_type_in_the_file_is_reported_where_a_flag_overrides_it(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "c.yaml", {"env_settings": {"env_path": "builtin:Reach", "num_envs": "two"},
                                             "checkpoint_settings": {"run_id": [1, 2]}, "debug": "loud",
                                             "torch_settings": {"device": "cpu"}})
    with pytest.raises(ConfigError) as err:
        parse_options([str(cfg), "--num-envs", "2", "--run-id", "x", "--debug", "--torch-device", "cuda"])
    assert sorted(err.value.problems) == [
        f"{cfg}: checkpoint_settings.run_id: [1, 2] is invalid: input should be a valid string",
        f"{cfg}: debug: 'loud' is invalid: input should be a valid boolean, unable to interpret input",
        f"{cfg}: env_settings.num_envs: 'two' is invalid: input should be a valid integer, unable to parse string as an integer",
    ]


def test_env_args_take_the_rest_of_the_line(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "c.yaml", {"env_settings": {"env_path": "builtin:Reach"}})
    opts = parse_options([str(cfg), "--env-args", "n_agents=8", "--not-ours"])
    assert opts.env_settings.env_args == ["n_agents=8", "--not-ours"]


def test_yaml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("behaviors:\n  A: {max_steps: 10\n")
    with pytest.raises(ConfigError) as err:
        load_config_file(str(bad))
    assert str(bad) in err.value.problems[0] and "line" in err.value.problems[0]


def test_mlagents_style_config_parses_unchanged(tmp_path: Path) -> None:
    text = """
behaviors:
  3DBall:
    trainer_type: ppo
    hyperparameters:
      batch_size: 64
      buffer_size: 12000
      learning_rate: 0.0003
      beta: 0.001
      epsilon: 0.2
      lambd: 0.99
      num_epoch: 3
      learning_rate_schedule: linear
      beta_schedule: constant
      epsilon_schedule: linear
    network_settings:
      normalize: true
      hidden_units: 128
      num_layers: 2
      vis_encode_type: simple
    reward_signals:
      extrinsic:
        gamma: 0.99
        strength: 1.0
    keep_checkpoints: 5
    max_steps: 500000
    time_horizon: 1000
    summary_freq: 12000
env_settings:
  env_path: null
  num_envs: 1
engine_settings:
  time_scale: 20
checkpoint_settings:
  run_id: ball
torch_settings:
  device: null
debug: false
"""
    text = text.replace("    trainer_type: ppo\n", "    trainer_type: ppo\n    framework: pytorch\n", 1)
    path = tmp_path / "3DBall.yaml"
    path.write_text(text)
    opts = build_run_options(load_config_file(str(path))[0], {}, str(path))
    assert opts.behaviors["3DBall"].hyperparameters.beta_schedule == "constant"
    assert opts.behaviors["3DBall"].time_horizon == 1000


@pytest.mark.parametrize("path", sorted(str(p) for p in (Path(__file__).resolve().parents[2] / "config").rglob("*.yaml")))
def test_shipped_configs_are_valid(path: str) -> None:
    from ml_arl.cli.learn import parse_options

    options = parse_options([path])
    assert options.behaviors or options.default_settings


def test_environment_parameter_errors_are_one_line_each() -> None:
    data = {"environment_parameters": {
        "a": 2, "b": {"sampler_type": "uniform", "sampler_parameters": {"min_value": 3, "max_value": 1}},
        "c": {"sampler_type": "gausian"}, "d": {"curriculum": []},
        "e": {"sampler_type": "multirangeuniform", "sampler_parameters": {"intervals": [[1, 2], [3]]}},
        "f": {"sampler_type": "gaussian", "sampler_parameters": {"mean": 0, "stdev": 1}},
    }}
    with pytest.raises(ConfigError) as err:
        build_run_options(data, {}, "cfg.yaml")
    problems = err.value.problems
    assert len(problems) == 5, problems
    assert any("environment_parameters.b" in p and "swap" in p for p in problems)
    assert any("did you mean 'gaussian'" in p for p in problems)
    assert any(p.startswith("cfg.yaml: environment_parameters.d.curriculum: [] is invalid; give a list of lessons") for p in problems)
    assert any("intervals" in p for p in problems)
    assert any("'stdev'" in p and "st_dev" in p for p in problems)


def test_environment_parameters_are_normalised_and_seeded() -> None:
    from ml_arl.settings import resolve_parameter_seeds

    data = {"environment_parameters": {
        "size": "2e-1",
        "mass": {"sampler_type": "uniform", "sampler_parameters": {"min_value": 1, "max_value": 3}},
        "len": {"sampler_type": "multirangeuniform", "sampler_parameters": {"intervals": [[1, 2], [3, 4]], "seed": 9}},
        "g": {"sampler_type": "gaussian"},
    }}
    params = build_run_options(data, {}, "cfg.yaml").environment_parameters
    assert params is not None
    assert params["size"] == 0.2
    assert params["mass"]["sampler_parameters"] == {"min_value": 1.0, "max_value": 3.0, "seed": -1}
    assert params["g"]["sampler_parameters"] == {"mean": 1.0, "st_dev": 1.0, "seed": -1}
    seeded = resolve_parameter_seeds(params, 100)
    assert seeded["mass"]["sampler_parameters"]["seed"] == 100
    assert seeded["len"]["sampler_parameters"]["seed"] == 9  # given seeds are kept
    assert seeded["g"]["sampler_parameters"]["seed"] == 102


@pytest.mark.parametrize(
    "phases,needle",
    [
        ([], "phases: the list is empty"),
        ([{"name": "a"}], "phases.a: give exactly one of max_steps or episodes"),
        ([{"name": "a", "max_steps": 5, "episodes": 3}], "give exactly one of max_steps or episodes"),
        ([{"name": "a", "max_steps": 5}, {"name": "a", "max_steps": 5}], "two phases are named 'a'"),
        ([{"name": "a", "mode": "test", "learn": ["D"], "episodes": 3}], "a test phase never changes weights"),
        ([{"name": "a", "learn": ["Nobody"], "max_steps": 5}], "phases.a.learn: 'Nobody' is not a configured behavior"),
        ([{"name": "a", "mode": "tset", "max_steps": 5}], "did you mean 'test'?"),
        ([{"name": "a b", "max_steps": 5}], "phases.0.name"),
        ([{"name": "a", "max_steps": 5, "load": {"D": {"phase": "a"}}}], "'a' is not an earlier phase of this run"),
        ([{"name": "a", "max_steps": 5, "load": {"D": {}}}], "the first phase has no earlier phase to load from"),
        ([{"name": "a", "learn": ["A"], "max_steps": 5}, {"name": "b", "max_steps": 5, "load": {"D": {"phase": "a"}}}],
         "phase 'a' does not train 'D'"),
        ([{"name": "a", "max_steps": 5, "behaviors": {"D": {"network_settings": {"num_layers": 3}}}}],
         "phases.a.behaviors.D.network_settings.num_layers: a phase cannot change the network's shape"),
        ([{"name": "a", "max_steps": 5, "behaviors": {"D": {"hyperparameters": {"lerning_rate": 1}}}}],
         "did you mean 'learning_rate'?"),
        ([{"name": "a", "max_steps": 5, "environment_parameters": {"x": {"sampler_type": "unifrom"}}}],
         "phases.a.environment_parameters.x.sampler_type"),
    ],
)
def test_phase_problems_are_one_line_each(phases: list, needle: str) -> None:
    found = problems({"behaviors": {"A": {}, "D": {}}, "phases": phases})
    assert any(needle in p for p in found), found


def test_objective_role_and_trainer_type_problems() -> None:
    found = problems({"behaviors": {
        "A": {"role": "attacker", "objective": {"name": "reward"}},
        "B": {"objective": {"name": "no_such"}},
        "C": {"objective": {"name": "scaled_sum", "params": {"nope": 1}}},
        "E": {"trainer_type": "no_such_pkg.mod:Trainer"},
        "F": {"role": "spy"},
    }})
    for needle in ("behaviors.A: give either role", "behaviors.B.objective: 'no_such' is neither", "behaviors.C.objective: scaled_sum: bad params",
"behaviors.E.trainer_type: cannot import module", "behaviors.F.role"):
        assert any(needle in p for p in found), (needle, found)


# ---------------------------------------------------------------- samplers (a pydantic discriminated union)


SAMPLER_DEFAULTS = {
    "constant": {"value": 0.0, "seed": -1},
    "uniform": {"min_value": 0.0, "max_value": 1.0, "seed": -1},
    "gaussian": {"mean": 1.0, "st_dev": 1.0, "seed": -1},
    "multirangeuniform": {"intervals": [[0.0, 1.0]], "seed": -1},
}


@pytest.mark.parametrize("kind", sorted(SAMPLER_DEFAULTS))
def test_each_sampler_variant_has_mlagents_defaults(kind: str) -> None:
    from pydantic import TypeAdapter

    from ml_arl.settings import Sampler

    sampler = TypeAdapter(Sampler).validate_python({"sampler_type": kind})
    assert sampler.sampler_type == kind
    assert sampler.sampler_parameters.model_dump() == SAMPLER_DEFAULTS[kind]
    given = {"sampler_type": kind, "sampler_parameters": {"seed": "7.0"}}
    assert TypeAdapter(Sampler).validate_python(given).sampler_parameters.seed == 7


def test_sampler_parameters_are_typed_per_variant() -> None:
    from pydantic import TypeAdapter, ValidationError

    from ml_arl.settings import GaussianSampler, MultiRangeUniformSampler, Sampler, UniformSampler

    adapter = TypeAdapter(Sampler)
    uniform = adapter.validate_python({"sampler_type": "uniform", "sampler_parameters": {"min_value": "2e-1", "max_value": 3}})
    assert isinstance(uniform, UniformSampler) and (uniform.sampler_parameters.min_value, uniform.sampler_parameters.max_value) == (0.2, 3.0)
    multi = adapter.validate_python({"sampler_type": "multirangeuniform", "sampler_parameters": {"intervals": [[1, 2], [3, 4]]}})
    assert isinstance(multi, MultiRangeUniformSampler) and multi.sampler_parameters.intervals == [[1.0, 2.0], [3.0, 4.0]]
    assert isinstance(adapter.validate_python({"sampler_type": "gaussian", "sampler_parameters": None}), GaussianSampler)
    for bad in (
        {"sampler_type": "unifrom"},  # not a variant
        {"sampler_parameters": {}},  # no sampler_type
        {"sampler_type": "uniform", "sampler_parameters": {"min_value": 2, "max_value": 1}},  # min > max
        {"sampler_type": "multirangeuniform", "sampler_parameters": {"intervals": [[3, 1]]}},  # an interval's min > max
        {"sampler_type": "gaussian", "sampler_parameters": {"mean": 0, "st_dev": 1, "stdev": 1}},  # a key of no variant
        {"sampler_type": "constant", "sampler_parameters": {"min_value": 1}},  # another variant's key
        {"sampler_type": "uniform", "sampler_parameters": {"seed": -2}},
    ):
        with pytest.raises(ValidationError):
            adapter.validate_python(bad)


@pytest.mark.parametrize(
    "value,needle",
    [
        ({"sampler_type": "unifrom"}, "environment_parameters.p.sampler_type: 'unifrom' is not a sampler; did you mean 'uniform'?"),
        ({"sampler_type": "box"}, "'box' is not a sampler; expected one of constant, uniform, gaussian, multirangeuniform"),
        ({"sampler_type": "uniform", "sampler_parameters": {"min_value": 3, "max_value": 1}},
         "environment_parameters.p.sampler_parameters: min_value 3.0 is larger than max_value 1.0; swap them"),
        ({"sampler_type": "multirangeuniform", "sampler_parameters": {"intervals": [[0, 1], [5, 2]]}},
         "environment_parameters.p.sampler_parameters.intervals: [5.0, 2.0] has min > max; swap them"),
        ({"sampler_type": "multirangeuniform", "sampler_parameters": {"intervals": [0, 1]}},
         "environment_parameters.p.sampler_parameters.intervals: [0, 1] is invalid; give a list of [min, max] pairs"),
        ({"sampler_type": "constant", "sampler_parameters": {"value": 1, "min_value": 0}},
         "environment_parameters.p.sampler_parameters: unknown key 'min_value' for a constant sampler; valid keys: value, seed"),
        ({"sampler_type": "gaussian", "sampler_parameters": {"mean": "x"}}, "environment_parameters.p.sampler_parameters.mean: 'x' is not a number"),
        ({"sampler_type": "gaussian", "sampler_parameters": 5}, "environment_parameters.p.sampler_parameters: expected a mapping, got 5"),
        ({"sampler_type": "uniform", "lessons": []}, "environment_parameters.p: unknown key 'lessons'; a sampler has sampler_type and sampler_parameters"),
        ({"curriculum": [{"name": "a"}]}, "environment_parameters.p.curriculum.a.value: required key is missing; give a number or a sampler"),
        ([1, 2], "environment_parameters.p: [1, 2] is invalid; give a number or a sampler"),
        (True, "environment_parameters.p: True is invalid; give a number or a sampler"),
    ],
)
def test_sampler_problems_are_one_line_each(value: object, needle: str) -> None:
    (found,) = problems({"environment_parameters": {"p": value}})
    assert needle in found, found


def test_environment_parameters_stay_plain_data() -> None:
    """What workers receive (pickled) and what configuration.yaml shows: floats and dicts, no models."""
    import pickle

    from ml_arl.settings import resolve_parameter_seeds

    data = {
        "environment_parameters": {"a": 1, "b": {"sampler_type": "gaussian", "sampler_parameters": {"mean": 2}}},
        "behaviors": {"A": {}},
        "phases": [{"name": "p", "max_steps": 5, "environment_parameters": {"b": {"sampler_type": "constant"}}}],
    }
    opts = build_run_options(data, {}, "c")
    assert opts.environment_parameters == {"a": 1.0, "b": {"sampler_type": "gaussian", "sampler_parameters": {"mean": 2.0, "st_dev": 1.0, "seed": -1}}}
    assert opts.phases is not None
    assert opts.phases[0].environment_parameters == {"b": {"sampler_type": "constant", "sampler_parameters": {"value": 0.0, "seed": -1}}}
    assert opts.as_dict()["environment_parameters"] == opts.environment_parameters
    seeded = resolve_parameter_seeds({**opts.environment_parameters, **opts.phases[0].environment_parameters}, 10)
    assert seeded == {"a": 1.0, "b": {"sampler_type": "constant", "sampler_parameters": {"value": 0.0, "seed": 10}}}
    assert "pydantic" not in str(pickle.dumps(seeded)) and "ml_arl" not in str(pickle.dumps(seeded))


# ---------------------------------------------------------------- derived defaults: pure validators, effective values


def test_derived_defaults_hold_their_effective_values() -> None:
    data = {
        "default_settings": {
            "max_steps": 1000, "keep_checkpoints": 4, "even_checkpoints": True, "self_play": {"save_steps": 30},
            "hyperparameters": {"learning_rate_schedule": "constant", "epsilon_schedule": "linear"},
        },
        "behaviors": {"A": {}, "B": {"max_steps": "9e1", "self_play": {"save_steps": 7, "team_change": 11}}},
        "phases": [{"name": "p", "max_steps": 5, "behaviors": {"A": {"max_steps": 400}}}],
    }
    before = copy.deepcopy(data)
    opts = build_run_options(data, {}, "c")
    assert data == before  # the input is not changed
    a, b = opts.behaviors["A"], opts.behaviors["B"]
    assert (a.hyperparameters.beta_schedule, a.hyperparameters.epsilon_schedule) == ("constant", "linear")
    assert a.checkpoint_interval == 250 and b.checkpoint_interval == 22  # max_steps // keep_checkpoints
    assert a.self_play is not None and a.self_play.team_change == 150  # 5 x save_steps
    assert b.self_play is not None and b.self_play.team_change == 11  # given
    assert opts.phases is not None and opts.phase_settings_for("A", opts.phases[0]).checkpoint_interval == 100
    saved = opts.as_dict()["behaviors"]["A"]
    assert saved["checkpoint_interval"] == 250 and saved["self_play"]["team_change"] == 150
    assert saved["hyperparameters"]["beta_schedule"] == "constant"
    # direct construction derives the same way
    assert TrainerSettings(max_steps=10, keep_checkpoints=3, even_checkpoints=True).checkpoint_interval == 3
    from ml_arl.settings import PPOSettings, SelfPlaySettings

    assert PPOSettings(learning_rate_schedule="constant").beta_schedule == "constant"
    assert SelfPlaySettings(save_steps=4).team_change == 20


def test_derived_defaults_come_only_from_valid_inputs() -> None:
    """A bad input is reported once, not again through the values derived from it; a bad value
    given for a derived key is reported, not replaced."""
    (msg,) = problems({"behaviors": {"A": {"hyperparameters": {"learning_rate_schedule": "linar"}}}})
    assert "learning_rate_schedule" in msg and "did you mean 'linear'" in msg
    (msg,) = problems({"behaviors": {"A": {"self_play": {"save_steps": -1}}}})
    assert "self_play.save_steps" in msg
    (msg,) = problems({"behaviors": {"A": {"even_checkpoints": True, "checkpoint_interval": -5}}})
    assert "behaviors.A.checkpoint_interval" in msg
    (msg,) = problems({"behaviors": {"A": {"even_checkpoints": True, "keep_checkpoints": 0}}})
    assert "behaviors.A.keep_checkpoints" in msg


def test_unlisted_behavior_fallback_is_kept_aside_and_shown_in_as_dict() -> None:
    opts = build_run_options({"behaviors": {"A": {}}}, {}, "c")
    assert opts.as_dict()["default_settings"] is None
    fallback = opts.settings_for("Other")
    assert fallback == TrainerSettings() and opts.settings_for("Other?team=1") is fallback
    assert opts.default_settings is None  # not written into the options
    assert opts.as_dict()["default_settings"] == TrainerSettings().model_dump(mode="json")
    with_defaults = build_run_options({"default_settings": {"max_steps": 10}}, {}, "c")
    assert with_defaults.settings_for("Other") is with_defaults.default_settings


def test_own_trainer_types_left_to_trainer_creation_are_trainers() -> None:
    """The trainer types a translated config names (OWN_TRAINERS) are not imported while the
    config is checked (they import torch); each must therefore be a Trainer, and a misspelt one
    in a config is still one line when the trainer is made."""
    from ml_arl.core.import_path import resolve_class
    from ml_arl.settings.build import OWN_TRAINERS
    from ml_arl.trainers.trainer import Trainer

    for path in OWN_TRAINERS:
        assert issubclass(resolve_class(path, Trainer), Trainer)
