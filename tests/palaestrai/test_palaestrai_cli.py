"""arl-learn on a palaestrAI run file, end to end: a two-agent harl:PPOBrain run on palaestrAI's
DummyEnvironment (a train phase, then a test phase that inherits everything but phase_config)
writes results/<uid>/ with both phases, TensorBoard per agent, results.sqlite with the schedule's
phase names and an ONNX model per agent; --check on a run file; a bad run file is one stderr line
per problem, exit code 2, no traceback and no results folder."""

from __future__ import annotations

import glob
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.runs import arl_learn, arl_learn_here

pytest.importorskip("palaestrai")

UID = "ppo_duo"
AGENTS = ("mighty_defender", "evil_attacker")


def ppo_agent(name: str, first: int) -> dict[str, Any]:
    ids = [f"myenv.{i}" for i in range(first, first + 5)]
    return {
        "name": name,
        "brain": {"name": "harl:PPOBrain", "params": {"rollout_size": 8, "epochs": 1, "batch_size": 4, "fc_dims": [16, 16]}},
        "muscle": {"name": "harl:PPOMuscle", "params": {}},
        "objective": {"name": "palaestrai.agent:DummyObjective", "params": {}},
        "sensors": ids,
        "actuators": ids,
    }


def run_file_data(train_episodes: int = 2) -> dict[str, Any]:
    return {
        "uid": UID,
        "seed": 7,
        "version": "3.5",
        "schedule": [
            {"train": {
                "environments": [{"environment": {"name": "palaestrai.environment:DummyEnvironment", "uid": "myenv",
                                                  "params": {"discrete": True, "max_iter": 10}}}],
                "agents": [ppo_agent(AGENTS[0], 0), ppo_agent(AGENTS[1], 5)],
                "simulation": {"name": "palaestrai.simulation:Vanilla", "conditions": [
                    {"name": "palaestrai.experiment:EnvironmentTerminationCondition", "params": {}}]},
                "phase_config": {"mode": "train", "worker": 1, "episodes": train_episodes},
            }},
            {"test": {"phase_config": {"mode": "test", "worker": 1, "episodes": 1}}},
        ],
        "run_config": {"condition": {"name": "palaestrai.experiment:VanillaRunGovernorTerminationCondition", "params": {}}},
    }


def write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def episodes(run: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(run / "results.sqlite") as db:
        return db.execute("SELECT phase, mode, behavior FROM episodes ORDER BY id").fetchall()


def test_a_harl_ppo_run_file_runs_both_phases_and_writes_the_results(tmp_path: Path) -> None:
    path = write(tmp_path / "duo.yml", run_file_data())
    proc = arl_learn([path.name], cwd=tmp_path)  # the command, as a user runs it: worker processes and all
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert "Traceback" not in output
    assert "Phase train (train, 2 episodes) begins" in output and "Phase test (test, 1 episodes) begins" in output
    run = tmp_path / "results" / UID
    assert (run / "configuration.yaml").is_file() and (run / "run_logs" / "phases.json").is_file()
    for phase in ("train", "test"):
        for agent in AGENTS:
            events = glob.glob(str(run / phase / agent / "events.out.tfevents.*"))
            assert events, (phase, agent, sorted(p.name for p in (run / phase).iterdir()))
    for agent in AGENTS:
        assert (run / "train" / f"{agent}.onnx").is_file(), agent
        assert (run / "train" / agent / "checkpoint.pt").is_file(), agent
    rows = episodes(run)
    assert {(phase, mode) for phase, mode, _ in rows} == {("train", "train"), ("test", "test")}
    for phase, least in (("train", 2), ("test", 1)):
        for agent in AGENTS:
            assert sum(1 for p, _, b in rows if (p, b) == (phase, agent)) >= least, (phase, agent, rows)
    saved = yaml.safe_load((run / "configuration.yaml").read_text())
    assert saved["checkpoint_settings"]["run_id"] == UID and saved["env_settings"]["seed"] == 7
    assert [p["name"] for p in saved["phases"]] == ["train", "test"]


def test_a_phase_runs_exactly_its_episodes(tmp_path: Path) -> None:
    data = run_file_data(train_episodes=2)
    path = write(tmp_path / "duo.yml", data)
    proc = arl_learn_here([path.name], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = episodes(tmp_path / "results" / UID)
    for agent in AGENTS:
        assert sum(1 for p, _, b in rows if (p, b) == ("train", agent)) == 2, rows


def test_check_on_a_run_file_prints_the_translated_config_and_exits_0(tmp_path: Path) -> None:
    path = write(tmp_path / "duo.yml", run_file_data())
    proc = arl_learn_here([path.name, "--check"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    config = yaml.safe_load(proc.stdout)
    assert set(config["behaviors"]) == set(AGENTS)
    assert config["behaviors"][AGENTS[0]]["trainer_type"] == "ppo"
    assert config["checkpoint_settings"]["run_id"] == UID
    assert [p["name"] for p in config["phases"]] == ["train", "test"]
    assert not (tmp_path / "results").exists()


def test_a_bad_run_file_is_one_stderr_line_per_problem_exit_2_and_no_results(tmp_path: Path) -> None:
    data = run_file_data()
    train = data["schedule"][0]["train"]
    train["simulation"]["name"] = "palaestrai.simulation:ParallelSimulationController"
    train["phase_config"]["episodez"] = 2
    train["agents"][1]["objective"]["name"] = "palaestrai.agent:NoSuchObjective"
    data["schedule"][1]["test"]["phase_config"] = {"mode": "test"}  # replaced whole: no episodes
    path = write(tmp_path / "bad.yml", data)
    proc = arl_learn([path.name], cwd=tmp_path)  # the command itself: its exit code and stderr
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert all(line.startswith(f"arl-learn: error: {path.name}: ") for line in lines), lines
    for needle in ("ParallelSimulationController", "'episodez'", "NoSuchObjective", "schedule[1].test.phase_config"):
        assert any(needle in line for line in lines), (needle, lines)
    assert not (tmp_path / "results").exists()


def test_a_wrong_sensor_is_found_by_check_wiring_and_by_a_run_but_check_starts_nothing(tmp_path: Path) -> None:
    """--check starts no environment, so it cannot see a sensor the environment lacks (exit 0);
    --check-wiring starts it and names the sensor (exit 2); a training run finds it as its worker's
    environment first starts: one line, exit 2, nothing restarted."""
    data = run_file_data()
    agent = data["schedule"][0]["train"]["agents"][0]
    agent["sensors"] = [*agent["sensors"][:2], "myenv.2x", *agent["sensors"][3:]]  # its actuators stay right
    path = write(tmp_path / "wired.yml", data)
    check = arl_learn_here([path.name, "--check"], cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    wiring = arl_learn_here([path.name, "--check-wiring"], cwd=tmp_path)
    assert wiring.returncode == 2, wiring.stdout + wiring.stderr
    line = [ln for ln in wiring.stderr.splitlines() if "myenv.2x" in ln]
    assert len(line) == 1 and "did you mean 'myenv.2'?" in line[0], wiring.stderr
    run = arl_learn([path.name], cwd=tmp_path)
    out = run.stdout + run.stderr
    assert run.returncode == 2, out
    assert "Traceback" not in out and "Restarting worker" not in out, out
    stopped = [ln for ln in out.splitlines() if ln.startswith("[ERROR] Training stopped: worker 0: ")]
    assert len(stopped) == 1 and "myenv.2x" in stopped[0] and "--check-wiring" in stopped[0], out


@pytest.mark.parametrize("key", ["objective", "brain", "environment"])
def test_a_class_that_does_not_import_in_a_right_file_is_one_line_exit_2_and_no_results(tmp_path: Path, key: str) -> None:
    """A run file that is otherwise right has its classes' modules found, not imported, before the
    workers launch (issue 49: palaestrAI's and the environment's imports would hold them back); a
    class its module lacks is then one line naming the file and key, where it is built: the brain
    before anything is written, the objective and the environment in the worker, with no restart."""
    data = run_file_data()
    train = data["schedule"][0]["train"]
    if key == "environment":
        train["environments"][0]["environment"]["name"] = "palaestrai.environment:NoSuchEnvironment"
    else:
        train["agents"][0][key] = {"name": f"palaestrai.agent:NoSuch{key.title()}", "params": {}}
        if key == "brain":
            train["agents"][0]["muscle"] = {"name": "palaestrai.agent:DummyMuscle", "params": {}}
    path = write(tmp_path / "typo.yml", data)
    proc = arl_learn([path.name], cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "Traceback" not in out and "Restarting worker" not in out, out
    lines = [ln for ln in out.splitlines() if "does not import" in ln]
    assert len(lines) == 1 and f"NoSuch{key.title()}" in lines[0] and "has no attribute" in lines[0], out
    assert (AGENTS[0] if key == "brain" else f"{path.name}: schedule[0].train.") in lines[0], lines[0]
    assert not (tmp_path / "results").exists(), out
