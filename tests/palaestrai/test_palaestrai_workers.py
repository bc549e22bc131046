"""A palaestrAI run file's environment in each kind of worker (subprocess, in-process, Ray), a
crashing palaestrAI environment restarted within the quotas, a phase that loads a brain from an
earlier run, and --deterministic repeating a run."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.runs import arl_learn_here

pytest.importorskip("palaestrai")

REPO = Path(__file__).resolve().parents[2]
DUMMY = "palaestrai.environment.dummy_environment:DummyEnvironment"
CONDITIONS = [{"name": "palaestrai.experiment:EnvironmentTerminationCondition", "params": {}}]


def agent(name: str, first: int, brain: str = "harl:PPOBrain") -> dict[str, Any]:
    harl = brain.startswith("harl:")
    return {
        "name": name,
        "brain": {"name": brain, "params": {"rollout_size": 40, "epochs": 2, "batch_size": 20} if harl else {}},
        "muscle": {"name": brain.replace("Brain", "Muscle"), "params": {}},
        "objective": {"name": "palaestrai.agent:DummyObjective", "params": {}},
        "sensors": [f"myenv.{i}" for i in range(first, first + 5)],
        "actuators": [f"myenv.{i}" for i in range(first, first + 5)],
    }


def run_file(tmp_path: Path, uid: str, env: str = DUMMY, env_params: Any = None, episodes: int = 3, worker: int = 1,
             brain: str = "harl:PPOBrain", test_load: Any = None) -> Path:
    test: dict[str, Any] = {"phase_config": {"mode": "test", "worker": worker, "episodes": 1}}
    if test_load is not None:
        test["agents"] = [dict(agent("defender", 0, brain), load=test_load), agent("attacker", 5, brain)]
    data = {
        "uid": uid, "seed": 11, "version": "3.5",
        "schedule": [
            {"train": {
                "environments": [{"environment": {"name": env, "uid": "myenv",
                                                  "params": env_params or {"discrete": True, "max_iter": 10}}}],
                "agents": [agent("defender", 0, brain), agent("attacker", 5, brain)],
                "simulation": {"name": "palaestrai.simulation:VanillaSimulationController", "conditions": CONDITIONS},
                "phase_config": {"mode": "train", "worker": worker, "episodes": episodes},
            }},
            {"test": test},
        ],
        "run_config": {"condition": {"name": "palaestrai.experiment:VanillaRunGovernorTerminationCondition", "params": {}}},
    }
    path = tmp_path / f"{uid}.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def our_config(tmp_path: Path, run_file_path: Path, **env_settings: Any) -> Path:
    """Our config for the run file (what arl-learn translates it into) with other env_settings."""
    from ml_arl.palaestrai.runfile import translate_file
    from ml_arl.settings.config_file import load_config_file

    data, _ = load_config_file(str(run_file_path))
    config = translate_file(data, str(run_file_path), str(tmp_path / "results"))
    config["env_settings"].update(env_settings)
    path = tmp_path / "ours.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def episodes(tmp_path: Path, uid: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(tmp_path / "results" / uid / "results.sqlite") as db:
        return db.execute("SELECT phase, behavior, length, env_reward, objective FROM episodes "
                          "ORDER BY phase, behavior, id").fetchall()


def test_the_run_files_environment_runs_in_process(tmp_path: Path) -> None:
    config = our_config(tmp_path, run_file(tmp_path, "inproc"), manager="inprocess")
    result = arl_learn_here([str(config)], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = episodes(tmp_path, "inproc")
    assert {(phase, behavior) for phase, behavior, *_ in rows} == {
        ("train", "defender"), ("train", "attacker"), ("test", "defender"), ("test", "attacker")}
    assert all(length == 10 for _, _, length, _, _ in rows)


@pytest.mark.slow
def test_the_run_files_environment_runs_in_ray_actors(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    from ml_arl.envs.backends.ray_env_manager import LOCAL_ONLY_ENV

    os.environ.setdefault(LOCAL_ONLY_ENV, "0")
    config = our_config(tmp_path, run_file(tmp_path, "onray", worker=2), manager="ray")
    here = os.getcwd()
    os.chdir(REPO)  # Ray's workers get the driver's cwd on sys.path
    try:
        result = arl_learn_here([str(config), "--results-dir", str(tmp_path / "results")], REPO)
    finally:
        os.chdir(here)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = episodes(tmp_path, "onray")
    assert sum(1 for phase, behavior, *_ in rows if phase == "train" and behavior == "defender") >= 6


def test_a_crashing_palaestrai_environment_is_restarted_within_the_quota(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    path = run_file(tmp_path, "flaky", env="tests.support.palaestrai_agents:FlakyDummyEnvironment",
                    env_params={"discrete": True, "max_iter": 10, "fail_at": 15, "state_dir": str(state)})
    result = arl_learn_here([str(path)], tmp_path)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "Restarting worker[0] after PalaestraiComponentError: _Flaky.update() raised RuntimeError: flaky environment: " \
           "life 1 fails at update 15 (restart 1 of 10)" in out, out
    assert "Traceback" not in out
    log = (tmp_path / "results" / "flaky" / "run_logs").glob("*error*")
    text = "".join(p.read_text() for p in log)
    assert "RuntimeError: flaky environment" in text and "palaestrai_agents.py" in text, text  # the worker's traceback
    assert (state / "lives-11").read_text() == "2"  # the failing worker's, the restarted worker's: none in the main process


def test_a_phase_loads_a_brain_from_an_earlier_run(tmp_path: Path) -> None:
    first = run_file(tmp_path, "earlier", brain="tests.support.palaestrai_agents:CountingBrain")
    assert arl_learn_here([str(first)], tmp_path).returncode == 0
    later = run_file(tmp_path, "later", brain="tests.support.palaestrai_agents:CountingBrain",
                     test_load={"experiment_run": "earlier", "phase": 0, "agent": "attacker"})
    result = arl_learn_here([str(later), "--check"], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "run: earlier" in result.stdout and "phase: train" in result.stdout and "behavior: attacker" in result.stdout
    result = arl_learn_here([str(later)], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "results/earlier/train/attacker" in result.stdout.replace(str(tmp_path) + "/", ""), result.stdout
    missing = run_file(tmp_path, "missing", brain="tests.support.palaestrai_agents:CountingBrain",
                       test_load={"experiment_run": "nowhere", "phase": 0, "agent": "attacker"})
    result = arl_learn_here([str(missing)], tmp_path)
    assert result.returncode == 2
    assert "load.experiment_run: no run 'nowhere'" in result.stderr, result.stderr


@pytest.mark.slow
def test_deterministic_repeats_a_run_file_bit_for_bit(tmp_path: Path) -> None:
    path = run_file(tmp_path, "same", brain="palaestrai.agent:DummyBrain", episodes=4, worker=2)
    for run_id in ("one", "two"):
        result = arl_learn_here([str(path), "--run-id", run_id, "--deterministic"], tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
    first, second = episodes(tmp_path, "one"), episodes(tmp_path, "two")
    assert first == second and len(first) >= 8


def test_harl_sac_runs_on_our_sac_and_arl_report_reads_the_run(tmp_path: Path) -> None:
    path = run_file(tmp_path, "sac", brain="harl:SACBrain")
    data = yaml.safe_load(path.read_text())
    for agent_def in data["schedule"][0]["train"]["agents"]:
        agent_def["brain"]["params"] = {"replay_size": 1000, "fc_dims": [16, 16], "batch_size": 16, "update_after": 10,
                                        "update_every": 5, "gradient_steps": 5, "lr": 0.001, "polyak": 0.99}
        agent_def["muscle"]["params"] = {"start_steps": 10}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    result = arl_learn_here([str(path), "--check"], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    config = yaml.safe_load(result.stdout)
    hp = config["behaviors"]["defender"]["hyperparameters"]
    assert config["behaviors"]["defender"]["trainer_type"] == "sac"
    assert (hp["buffer_size"], hp["batch_size"], hp["buffer_init_steps"], hp["steps_per_update"]) == (1000, 16, 10, 1.0)
    assert hp["tau"] == pytest.approx(0.01)
    result = arl_learn_here([str(path)], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "results" / "sac" / "train" / "defender.onnx").is_file()
    import contextlib
    import io

    from ml_arl.cli import report

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = report.main([str(tmp_path / "results" / "sac")])
    assert code in (0, None), out.getvalue()
    text = out.getvalue()
    assert "train" in text and "test" in text and "defender" in text and "attacker" in text, text
    assert (tmp_path / "results" / "sac" / "report.png").is_file()


def test_phase_avg_ends_a_phase_once_the_objective_is_reached(tmp_path: Path) -> None:
    """AgentObjectiveTerminationCondition's phase_avgN in run_config: DummyObjective's reward per step
    averages 4.5 over DummyEnvironment's 10 steps, so phase_avg2: 4.0 ends each phase after the
    defender's second episode (or the one in flight then), though the train phase asks for 40."""
    path = run_file(tmp_path, "early", brain="palaestrai.agent:DummyBrain", episodes=40)
    data = yaml.safe_load(path.read_text())
    data["run_config"]["condition"] = {"name": "palaestrai.experiment:AgentObjectiveTerminationCondition",
                                       "params": {"defender": {"phase_avg2": 4.0}}}
    data["schedule"][1]["test"]["phase_config"]["episodes"] = 3
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    result = arl_learn_here([str(path)], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Phase train ends early: defender's objective per step averaged 4.5 over its last 2 episodes" in result.stdout
    rows = episodes(tmp_path, "early")
    # the phase ends between step messages: an episode already in flight may still finish (palaestrAI
    # stops its workers at once)
    assert 2 <= sum(1 for phase, behavior, *_ in rows if (phase, behavior) == ("train", "defender")) <= 3, rows
    assert "Phase test ends early" in result.stdout
    data["run_config"]["condition"]["params"] = {"nobody": {"phase_avg2": 4.0}}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    result = arl_learn_here([str(path), "--check"], tmp_path)
    assert result.returncode == 2
    assert "phases.train.stop_when: 'nobody' is not a configured behavior" in result.stderr, result.stderr


def test_a_phase_may_leave_an_agent_out(tmp_path: Path) -> None:
    """palaestrAI runs the agents a phase lists: the attacker alone in the test phase, the
    defender sitting it out (it neither acts nor counts)."""
    path = run_file(tmp_path, "alone", brain="palaestrai.agent:DummyBrain", episodes=2)
    data = yaml.safe_load(path.read_text())
    data["schedule"][1]["test"]["agents"] = [agent("attacker", 5, "palaestrai.agent:DummyBrain")]
    data["schedule"][1]["test"]["phase_config"]["episodes"] = 3
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    result = arl_learn_here([str(path)], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = episodes(tmp_path, "alone")
    counts = {(p, b): sum(1 for row in rows if row[:2] == (p, b)) for p in ("train", "test") for b in ("defender", "attacker")}
    assert counts == {("train", "defender"): 2, ("train", "attacker"): 2, ("test", "defender"): 0, ("test", "attacker"): 3}


def test_fewer_workers_than_a_phase_asks_for_is_one_line(tmp_path: Path) -> None:
    path = run_file(tmp_path, "two", brain="palaestrai.agent:DummyBrain", worker=2)
    result = arl_learn_here([str(path), "--num-envs", "1", "--check"], tmp_path)
    assert result.returncode == 2
    assert "--num-envs 1 is fewer than the 2 workers a phase of the run file asks for" in result.stderr, result.stderr
    assert arl_learn_here([str(path), "--num-envs", "3", "--check"], tmp_path).returncode == 0  # more is fine: they idle


def test_load_names_an_earlier_run_by_its_uid_even_with_spaces(tmp_path: Path) -> None:
    first = run_file(tmp_path, "earlier", brain="tests.support.palaestrai_agents:CountingBrain")
    data = yaml.safe_load(first.read_text())
    data["uid"] = "An earlier run"  # its folder: results/An-earlier-run
    first.write_text(yaml.safe_dump(data, sort_keys=False))
    assert arl_learn_here([str(first)], tmp_path).returncode == 0
    assert (tmp_path / "results" / "An-earlier-run").is_dir()
    later = run_file(tmp_path, "later", brain="tests.support.palaestrai_agents:CountingBrain",
                     test_load={"experiment_run": "An earlier run", "phase": 0, "agent": "attacker"})
    result = arl_learn_here([str(later), "--check"], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "run: An-earlier-run" in result.stdout
