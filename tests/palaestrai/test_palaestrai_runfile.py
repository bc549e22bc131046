"""palaestrAI run files (ml_arl.palaestrai.runfile.read) on dict run files: palaestrai 3.5.18's
phase inheritance, the translation into our config (behaviors, phases, episodes x worker, num_envs,
run id, seed), harl's parameters on our PPO and SAC, and bad input: every problem at once, one
line each, naming the closest valid key, the class and its import error, the closest sensor id, the
supported controllers and conditions; is_run_file."""

from __future__ import annotations

import copy
import logging
import os
from typing import Any

import pytest

from ml_arl.core.exceptions import ConfigError
from ml_arl.palaestrai.definitions import PHASE_PARAMETER, AgentWiring, EnvironmentSpec, PluginSpec
from ml_arl.palaestrai.runfile import is_run_file, read, translate_file
from ml_arl.settings import build_run_options

PATH = "run.yml"
DUMMY_ENV = "palaestrai.environment:DummyEnvironment"
RUNFILE_LOGGER = "ml_arl.palaestrai.runfile"


def agent(name: str, ids: range, brain: str = "palaestrai.agent:DummyBrain", muscle: str = "palaestrai.agent:DummyMuscle",
          brain_params: Any = None, muscle_params: Any = None) -> dict[str, Any]:
    return {
        "name": name,
        "brain": {"name": brain, "params": brain_params or {}},
        "muscle": {"name": muscle, "params": muscle_params or {}},
        "objective": {"name": "palaestrai.agent:DummyObjective", "params": {}},
        "sensors": [f"myenv.{i}" for i in ids],
        "actuators": [f"myenv.{i}" for i in ids],
    }


def environments(max_iter: int = 10) -> list[dict[str, Any]]:
    return [{"environment": {"name": DUMMY_ENV, "uid": "myenv", "params": {"discrete": True, "max_iter": max_iter}}}]


def simulation(name: str = "palaestrai.simulation:Vanilla") -> dict[str, Any]:
    return {"name": name, "conditions": [{"name": "palaestrai.experiment:EnvironmentTerminationCondition", "params": {}}]}


def first_phase(**changes: Any) -> dict[str, Any]:
    phase = {
        "environments": environments(),
        "agents": [agent("mighty_defender", range(0, 5)), agent("evil_attacker", range(5, 10))],
        "simulation": simulation(),
        "phase_config": {"mode": "train", "worker": 2, "episodes": 3},
    }
    phase.update(changes)
    return phase


def run_file(*later: tuple[str, dict[str, Any]], first: Any = None, **top: Any) -> dict[str, Any]:
    """A two-agent DummyEnvironment run file (as /tmp/pal/ex/dummy_two_agents.yml): ``phase_train`` and the
    ``later`` phases."""
    data: dict[str, Any] = {
        "uid": "Two dummy agents",
        "seed": 42,
        "version": "3.5",
        "schedule": [{"phase_train": first if first is not None else first_phase()}] + [{n: b} for n, b in later],
        "run_config": {"condition": {"name": "palaestrai.experiment:VanillaRunGovernorTerminationCondition", "params": {}}},
    }
    data.update(top)
    return data


def problems(data: dict[str, Any], **kwargs: Any) -> list[str]:
    with pytest.raises(ConfigError) as err:
        read(data, PATH, **kwargs)
    lines = err.value.problems
    assert all(line.startswith(f"{PATH}: ") and "\n" not in line for line in lines), lines
    return lines


def one(lines: list[str], needle: str) -> str:
    found = [line for line in lines if needle in line]
    assert len(found) == 1, (needle, lines)
    return found[0]


# -- (a) palaestrai 3.5.18's phase inheritance ------------------------------------------------------

def test_a_phase_that_gives_only_phase_config_inherits_environments_agents_and_simulation() -> None:
    out = read(run_file(("phase_test", {"phase_config": {"mode": "test", "worker": 1, "episodes": 1}})), PATH)
    spec = EnvironmentSpec(DUMMY_ENV, "myenv", {"discrete": True, "max_iter": 10})
    assert out.environments == [(spec,), (spec,)]  # per phase, its environments
    assert [a.name for a in out.agents] == ["mighty_defender", "evil_attacker"]
    assert [p["name"] for p in out.config["phases"]] == ["phase_train", "phase_test"]
    assert not out.taking_turns
    # every phase names itself to the environment (its episodes per worker, and its environment if it changes)
    assert [p["environment_parameters"] for p in out.config["phases"]] == [{PHASE_PARAMETER: i} for i in range(2)]
    assert out.phase_limits == [(3, 2), (1, 1)]


def test_a_key_a_phase_leaves_out_comes_from_the_latest_phase_that_gave_it() -> None:
    out = read(run_file(
        ("shorter", {"environments": environments(max_iter=5), "phase_config": {"mode": "train", "episodes": 1}}),
        ("again", {"phase_config": {"mode": "test", "episodes": 2}}),
    ), PATH)
    assert [e.params["max_iter"] for (e,) in out.environments] == [10, 5, 5]
    assert [p["environment_parameters"] for p in out.config["phases"]] == [{PHASE_PARAMETER: i} for i in range(3)]


def test_a_phase_config_is_replaced_whole_not_merged() -> None:
    """phase_train has worker 2; phase_test's phase_config gives none, so its worker is 1 again."""
    out = read(run_file(("phase_test", {"phase_config": {"mode": "test", "episodes": 4}})), PATH)
    train, test = out.config["phases"]
    assert train["episodes"] == 3 * 2 and test["episodes"] == 4 * 1


def test_phase_config_mode_test_alone_is_an_error_line_about_episodes() -> None:
    lines = problems(run_file(("phase_test", {"phase_config": {"mode": "test"}})))
    assert len(lines) == 1, lines
    assert "schedule[1].phase_test" in lines[0] and "episodes" in lines[0]


def test_an_empty_phase_is_skipped_as_palaestrai_skips_it() -> None:
    out = read(run_file(("nothing", {}), ("phase_test", {"phase_config": {"mode": "test", "episodes": 1}})), PATH)
    assert [p["name"] for p in out.config["phases"]] == ["phase_train", "phase_test"]


# -- (b) the translation ------------------------------------------------------------------------------

def test_agents_become_behaviors_and_the_schedule_our_phases() -> None:
    data = run_file(("phase_test", {"phase_config": {"mode": "test", "worker": 1, "episodes": 5}}))
    data["schedule"][0]["phase_train"]["phase_config"]["worker"] = 3
    out = read(data, PATH)
    config = out.config
    assert list(config["behaviors"]) == ["mighty_defender", "evil_attacker"]
    assert config["phases"] == [
        {"name": "phase_train", "mode": "train", "environment_parameters": {PHASE_PARAMETER: 0}, "episodes": 3 * 3},
        {"name": "phase_test", "mode": "test", "environment_parameters": {PHASE_PARAMETER: 1}, "episodes": 5,
         "deterministic": True},
    ]
    assert config["env_settings"] == {"env_path": f"palaestrai:{os.path.abspath(PATH)}", "num_envs": 3, "seed": 42}
    assert config["checkpoint_settings"] == {"run_id": "Two-dummy-agents"}  # the uid, made a valid run id
    defender = config["behaviors"]["mighty_defender"]
    assert defender["objective"] == {"name": "ml_arl.palaestrai.objective:EnvironmentObjective"}
    assert defender["trainer_type"] == "ml_arl.palaestrai.agents:BrainTrainer"  # not harl: palaestrAI's own Brain/Muscle
    assert defender["hyperparameters"]["brain"] == {"name": "palaestrai.agent:DummyBrain", "params": {}}
    assert defender["hyperparameters"]["sensors"] == [f"myenv.{i}" for i in range(5)]
    assert out.agents[1] == AgentWiring(
        "evil_attacker", tuple(f"myenv.{i}" for i in range(5, 10)), tuple(f"myenv.{i}" for i in range(5, 10)),
        PluginSpec("palaestrai.agent:DummyObjective", {}),
    )


def test_the_uid_is_the_run_id() -> None:
    assert read(run_file(uid="duel_3.v2"), PATH).config["checkpoint_settings"] == {"run_id": "duel_3.v2"}
    assert read(run_file(uid="a/b: c"), PATH).config["checkpoint_settings"] == {"run_id": "a-b-c"}


def test_num_envs_is_the_largest_worker_of_any_phase() -> None:
    out = read(run_file(("phase_test", {"phase_config": {"mode": "test", "worker": 4, "episodes": 1}})), PATH)
    assert out.config["env_settings"]["num_envs"] == 4
    assert [p["episodes"] for p in out.config["phases"]] == [6, 4]


def test_taking_turns_is_read_from_the_simulation() -> None:
    out = read(run_file(first=first_phase(simulation=simulation("palaestrai.simulation:TakingTurns"))), PATH)
    assert out.taking_turns
    for name in ("palaestrai.simulation:VanillaSimulationController", "palaestrai.simulation:Vanilla"):
        assert not read(run_file(first=first_phase(simulation=simulation(name))), PATH).taking_turns


def test_a_run_file_without_seed_leaves_the_seed_to_arl_learn() -> None:
    data = run_file()
    del data["seed"]
    assert "seed" not in read(data, PATH).config["env_settings"]


# -- (c) harl on our trainers ------------------------------------------------------------------------

def harl_run(brain: str, muscle: str, brain_params: dict[str, Any], muscle_params: Any = None) -> dict[str, Any]:
    return run_file(first=first_phase(agents=[
        agent("learner", range(0, 5), brain, muscle, brain_params, muscle_params),
        agent("other", range(5, 10)),
    ]))


def test_harl_ppo_parameters_become_ours() -> None:
    params = {"rollout_size": 128, "epochs": 4, "batch_size": 32, "actor_lr": 1.0e-3, "clip": 0.1, "entropy_coef": 0.02,
              "gamma": 0.9, "gae_lambda": 0.8, "fc_dims": [64, 64, 64], "max_grad_norm": 1.5}
    learner = read(harl_run("harl:PPOBrain", "harl:PPOMuscle", params), PATH).config["behaviors"]["learner"]
    assert learner["trainer_type"] == "ppo"
    hp = learner["hyperparameters"]
    assert (hp["buffer_size"], hp["num_epoch"], hp["batch_size"]) == (128, 4, 32)
    assert (hp["learning_rate"], hp["epsilon"], hp["beta"], hp["lambd"], hp["max_grad_norm"]) == (1.0e-3, 0.1, 0.02, 0.8, 1.5)
    assert learner["reward_signals"]["extrinsic"]["gamma"] == 0.9
    assert (learner["network_settings"]["hidden_units"], learner["network_settings"]["num_layers"]) == (64, 3)


def test_harl_ppo_defaults_are_harls() -> None:
    learner = read(harl_run("harl:PPOBrain", "harl:PPOMuscle", {}), PATH).config["behaviors"]["learner"]
    hp = learner["hyperparameters"]
    assert (hp["buffer_size"], hp["num_epoch"], hp["batch_size"], hp["learning_rate"]) == (96, 50, 4, 3.0e-4)
    assert (hp["epsilon"], hp["beta"], hp["lambd"], hp["max_grad_norm"]) == (0.2, 0.01, 0.95, 0.5)
    # harl clips its actor's and its critic's gradients apart (two optimizers); its critic is tanh, orthogonally set
    assert hp["max_grad_norm_per_network"] is True and learner["network_settings"]["activation"] == "tanh"
    assert learner["reward_signals"]["extrinsic"]["gamma"] == 0.99
    assert (learner["network_settings"]["hidden_units"], learner["network_settings"]["num_layers"]) == (256, 2)


def test_harl_sac_parameters_become_ours() -> None:
    params = {"replay_size": 5000, "lr": 1.0e-3, "polyak": 0.99, "update_after": 500, "update_every": 10,
              "gradient_steps": 5, "batch_size": 64, "gamma": 0.95, "fc_dims": [32, 32]}
    learner = read(harl_run("harl:SACBrain", "harl:SACMuscle", params, {"start_steps": 200}), PATH).config["behaviors"]["learner"]
    assert learner["trainer_type"] == "sac"
    hp = learner["hyperparameters"]
    assert (hp["buffer_size"], hp["learning_rate"], hp["batch_size"]) == (5000, 1.0e-3, 64)
    assert hp["tau"] == pytest.approx(0.01)  # 1 - polyak
    assert hp["buffer_init_steps"] == 500  # the later of update_after and the muscle's start_steps
    assert hp["steps_per_update"] == pytest.approx(2.0)  # update_every / gradient_steps
    assert learner["reward_signals"]["extrinsic"]["gamma"] == 0.95
    assert (learner["network_settings"]["hidden_units"], learner["network_settings"]["num_layers"]) == (32, 2)


def test_harl_sac_start_steps_and_gradient_steps_defaults() -> None:
    hp = read(harl_run("harl:SACBrain", "harl:SACMuscle", {"update_after": 100, "update_every": 4}, {"start_steps": 300}),
              PATH).config["behaviors"]["learner"]["hyperparameters"]
    assert hp["buffer_init_steps"] == 300  # start_steps is later than update_after
    assert hp["steps_per_update"] == pytest.approx(1.0)  # gradient_steps -1: update_every steps every update_every
    defaults = read(harl_run("harl:SACBrain", "harl:SACMuscle", {}), PATH).config["behaviors"]["learner"]["hyperparameters"]
    assert defaults["buffer_size"] == 1_000_000 and defaults["buffer_init_steps"] == 10_000  # SACMuscle's start_steps
    assert defaults["tau"] == pytest.approx(0.005) and defaults["batch_size"] == 100


@pytest.mark.parametrize("brain,muscle", [("harl:PPOBrain", "harl:PPOMuscle"), ("harl:SACBrain", "harl:SACMuscle")])
def test_the_translated_config_is_a_valid_config_of_ours(brain: str, muscle: str) -> None:
    data = harl_run(brain, muscle, {"fc_dims": [16, 16]})
    options = build_run_options(translate_file(data, PATH), {}, PATH)
    assert options.behaviors["learner"].trainer_type == brain[5:8].lower()


def test_a_harl_parameter_without_counterpart_is_a_warning_naming_it(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger=RUNFILE_LOGGER):
        read(harl_run("harl:PPOBrain", "harl:PPOMuscle", {"critic_lr": 1.0e-3, "annealing_total_updates": 10},
                      {"temperature": 2}), PATH)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert one(warnings, "'critic_lr'") and one(warnings, "'annealing_total_updates'") and one(warnings, "'temperature'")
    assert all("learner" in w for w in warnings if "harl" in w)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=RUNFILE_LOGGER):
        read(harl_run("harl:SACBrain", "harl:SACMuscle", {"cql_alpha": 2.0}), PATH)
    assert one([r.getMessage() for r in caplog.records], "'cql_alpha'")


def test_uneven_harl_fc_dims_are_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger=RUNFILE_LOGGER):
        out = read(harl_run("harl:PPOBrain", "harl:PPOMuscle", {"fc_dims": [64, 32]}), PATH)
    assert out.config["behaviors"]["learner"]["network_settings"]["hidden_units"] == 64
    assert one([r.getMessage() for r in caplog.records], "fc_dims")


@pytest.mark.parametrize("brain", ["harl:TD3Brain", "harl:DDPGBrain"])
def test_td3_and_ddpg_are_one_error_line_naming_the_brains_that_run(brain: str) -> None:
    lines = problems(harl_run(brain, "harl:OffPolicyMuscle", {}))
    assert len(lines) == 1, lines
    assert brain in lines[0] and "harl:PPOBrain" in lines[0] and "harl:SACBrain" in lines[0]
    assert "agents[learner].brain" in lines[0]


def test_a_harl_brain_with_the_wrong_muscle_is_an_error() -> None:
    line = one(problems(harl_run("harl:PPOBrain", "harl:SACMuscle", {})), "muscle")
    assert "harl:PPOMuscle" in line and "harl:SACMuscle" in line


# -- (d) bad input ----------------------------------------------------------------------------------

def test_every_problem_at_once_one_line_each() -> None:
    phase = first_phase()
    phase["phase_config"]["workers"] = 2
    phase["agents"][0]["sensor"] = ["myenv.0"]
    phase["agents"][0]["objective"]["name"] = "palaestrai.agent:NoSuchObjective"
    phase["agents"][1]["brain"]["name"] = "no_such_package.brains:Brain"
    phase["simulation"] = simulation("palaestrai.simulation:ParallelSimulationController")
    phase["simulation"]["conditions"].append({"name": "palaestrai.experiment:CountingTerminationCondition", "params": {}})
    data = run_file(first=phase, seeds=3)
    data["run_config"]["condition"]["name"] = "palaestrai.experiment:MyRunCondition"
    lines = problems(data)
    expected = {
        "'seeds'": ["top level", "did you mean 'seed'?"],
        "'workers'": ["phase_config", "did you mean 'worker'?"],
        "'sensor'": ["agents[0]", "did you mean 'sensors'?"],
        "NoSuchObjective": ["agents[mighty_defender].objective", "does not import", "has no attribute 'NoSuchObjective'"],
        "no_such_package.brains:Brain": ["agents[evil_attacker].brain", "No module named 'no_such_package'"],
        "ParallelSimulationController": ["simulation.name", "Vanilla", "TakingTurns"],
        "CountingTerminationCondition": ["conditions[1]", "EnvironmentTerminationCondition", "AgentObjectiveTerminationCondition"],
        "MyRunCondition": ["run_config.condition", "VanillaRunGovernorTerminationCondition"],
    }
    for needle, parts in expected.items():
        line = one(lines, needle)
        for part in parts:
            assert part in line, (part, line)
    assert len(lines) == len(expected), lines


def test_a_sensor_or_actuator_the_environment_lacks_names_the_closest_id() -> None:
    phase = first_phase()
    phase["agents"][0]["sensors"][3] = "my_env.3"
    phase["agents"][1]["actuators"][2] = "myenv.7a"
    lines = problems(run_file(first=phase))
    assert len(lines) == 2, lines
    sensor = one(lines, "'my_env.3'")
    assert "mighty_defender" in sensor and "sensor" in sensor and "did you mean 'myenv.3'?" in sensor
    actuator = one(lines, "'myenv.7a'")
    assert "evil_attacker" in actuator and "actuator" in actuator and "did you mean 'myenv.7'?" in actuator


def test_the_wiring_is_not_checked_when_asked_not_to() -> None:
    phase = first_phase()
    phase["agents"][0]["sensors"][3] = "my_env.3"
    out = read(run_file(first=phase), PATH, check_environment=False)
    assert out.agents[0].sensors[3] == "my_env.3"


def test_an_environment_that_does_not_start_is_one_line() -> None:
    phase = first_phase()
    phase["environments"][0]["environment"]["params"]["colour"] = "red"  # DummyEnvironment takes no colour
    line = one(problems(run_file(first=phase)), DUMMY_ENV)
    assert "did not start" in line and "TypeError" in line and "colour" in line


@pytest.mark.parametrize("key", ["environments", "agents", "simulation", "phase_config"])
def test_a_first_phase_lacking_a_key_inherits_it_from_nothing(key: str) -> None:
    phase = first_phase()
    del phase[key]
    lines = problems(run_file(first=phase))
    line = one(lines, "no earlier phase")
    assert line.startswith(f"{PATH}: schedule[0].phase_train: {key} not given")


@pytest.mark.parametrize("key", ["environments", "simulation"])
def test_a_first_phase_lacking_a_key_is_one_line(key: str) -> None:
    phase = first_phase()
    del phase[key]
    lines = problems(run_file(("phase_test", {"phase_config": {"mode": "test", "episodes": 1}}), first=phase))
    assert len(lines) == 1, lines


def test_a_problem_a_later_phase_inherits_is_one_line() -> None:
    data = harl_run("harl:TD3Brain", "harl:OffPolicyMuscle", {})
    data["schedule"].append({"phase_test": {"phase_config": {"mode": "test", "episodes": 1}}})
    lines = problems(data)
    assert len(lines) == 1, lines


def test_a_missing_sensor_is_reported_beside_other_problems() -> None:
    phase = first_phase()
    phase["agents"][0]["sensors"][3] = "my_env.3"
    phase["phase_config"]["workers"] = 2
    lines = problems(run_file(first=phase))
    one(lines, "'workers'")
    one(lines, "'my_env.3'")


def test_agents_that_share_a_name_are_an_error() -> None:
    phase = first_phase()
    phase["agents"][1]["name"] = "mighty_defender"
    one(problems(run_file(first=phase)), "two agents of one phase have this name")


@pytest.mark.parametrize(
    "change,needle",
    [
        ({"phase_config": {"mode": "evaluate", "episodes": 1}}, "not a mode"),
        ({"phase_config": {"mode": "train", "episodes": 0}}, "positive integer"),
        ({"phase_config": {"mode": "train", "worker": 0, "episodes": 1}}, "positive integer"),
    ],
)
def test_bad_phase_config_values(change: dict[str, Any], needle: str) -> None:
    assert needle in one(problems(run_file(("later", change))), "schedule[1].later.phase_config")


def test_not_a_schedule_is_one_line() -> None:
    assert "expected a list of phases" in one(problems(run_file(schedule={"phase_train": first_phase()})), "schedule")


# -- (e) is_run_file --------------------------------------------------------------------------------

def test_is_run_file_tells_run_files_from_our_configs() -> None:
    assert is_run_file(run_file())
    assert is_run_file({"schedule": []})
    ours = {"behaviors": {"Reach": {"trainer_type": "ppo"}}, "env_settings": {"env_path": "builtin:Reach"}}
    assert not is_run_file(ours)
    assert not is_run_file({**ours, "phases": [{"name": "train", "max_steps": 10}]})
    assert not is_run_file({"schedule": [], "behaviors": {}})
    assert not is_run_file({"schedule": [], "phases": []})
    assert not is_run_file({})
    assert not is_run_file(None)
    assert not is_run_file([{"schedule": []}])
    assert not is_run_file(copy.deepcopy(ours) | {"uid": "x"})


def test_a_misspelled_module_of_a_controller_or_condition_is_one_line() -> None:
    lines = problems(run_file(first=first_phase(simulation=simulation("palaestrai.simulaton:Vanilla"))))
    assert "palaestrAI's controllers are in palaestrai.simulation (palaestrai.simulation:Vanilla)" in one(lines, "simulaton")
    data = run_file()
    data["run_config"]["condition"]["name"] = "palaestrai.experimnt:VanillaRunGovernorTerminationCondition"
    assert "palaestrAI's termination conditions are in palaestrai.experiment" in one(problems(data), "experimnt")


def test_a_run_file_without_its_schedule_is_told_so_and_id_is_read_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    data = run_file()
    data["schedul"] = data.pop("schedule")
    assert is_run_file(data)  # uid and run_config: a run file, whose schedule is missing
    lines = problems(data)
    assert any("unknown key 'schedul'; did you mean 'schedule'?" in line for line in lines), lines
    assert any("schedule: missing" in line for line in lines), lines
    data = run_file()
    data["id"] = data.pop("uid")
    with caplog.at_level("WARNING"):
        out = read(data, PATH)
    assert out.config["checkpoint_settings"]["run_id"] == "Two-dummy-agents"
    assert "id: palaestrAI 3.5.18's schema wants uid" in caplog.text


# -- (f) what ml_arl does not run: said, not silently dropped ---------------------------------------

def test_replay_is_one_line_saying_it_is_not_supported() -> None:
    phase = first_phase()
    phase["agents"][0]["replay"] = [{"experiment_run": "old", "phase": 0}]
    assert "remove it" in one(problems(run_file(first=phase)), "agents[mighty_defender].replay")


def test_evaluate_every_is_a_warning_and_the_run_file_still_reads(caplog: pytest.LogCaptureFixture) -> None:
    phase = first_phase()
    phase["phase_config"]["evaluate_every"] = 5
    with caplog.at_level("WARNING", logger=RUNFILE_LOGGER):
        out = read(run_file(first=phase), PATH)
    assert out.config["phases"][0]["episodes"] == 6
    assert "phase_config.evaluate_every: evaluation workers are not run by ml_arl yet; ignored" in caplog.text


@pytest.mark.parametrize("key,value", [
    ("brain", {"name": "harl:PPOBrain", "params": {}}),
    ("objective", {"name": "tests.support.palaestrai_agents:NegatedSum", "params": {}}),
    ("sensors", ["myenv.0", "myenv.1"]),
])
def test_a_later_phase_that_changes_an_agent_is_one_line(key: str, value: Any) -> None:
    later = first_phase()
    later["agents"][1][key] = value
    line = one(problems(run_file(("phase_test", later))), "schedule[1].phase_test.agents[evil_attacker]")
    assert "changes this agent's brain, muscle, objective, sensors or actuators" in line


def test_a_later_phase_that_changes_the_controller_is_one_line() -> None:
    later = first_phase(simulation=simulation("palaestrai.simulation:TakingTurns"))
    assert "changes the simulation controller" in one(problems(run_file(("phase_test", later))), "phase_test.simulation")
