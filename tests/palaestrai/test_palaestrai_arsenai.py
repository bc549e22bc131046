"""arl-study on an arsenAI experiment file: arsenAI's generator expands the design into palaestrAI
run files, arl-study checks and runs them with arl-learn and summarises them."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import yaml

from tests.support.runs import arl_study_here

pytest.importorskip("arsenai")

DUMMY = "palaestrai.environment.dummy_environment:DummyEnvironment"


def experiment(tmp_path: Path, brain: str = "palaestrai.agent:DummyBrain") -> Path:
    data = {
        "uid": "doe", "seed": 3, "version": "3.5.18", "repetitions": 1, "output": str(tmp_path / "_outputs"),
        "definitions": {
            "environments": {
                "short": {"environment": {"name": DUMMY, "uid": "myenv", "params": {"discrete": True, "max_iter": 5}}},
                "long": {"environment": {"name": DUMMY, "uid": "myenv", "params": {"discrete": True, "max_iter": 8}}},
            },
            "agents": {"defender": {"name": "defender", "brain": {"name": brain, "params": {}},
                                    "muscle": {"name": "palaestrai.agent:DummyMuscle", "params": {}},
                                    "objective": {"name": "palaestrai.agent:DummyObjective", "params": {}}}},
            "sensors": {"all": {"myenv": ["myenv.0", "myenv.1"]}},
            "actuators": {"all": {"myenv": ["myenv.0", "myenv.1"]}},
            "simulation": {"vanilla": {"name": "palaestrai.simulation:Vanilla", "conditions": [
                {"name": "palaestrai.experiment:EnvironmentTerminationCondition", "params": {}}]}},
            "phase_config": {"train": {"mode": "train", "worker": 1, "episodes": 2}},
            "run_config": {"condition": {"name": "palaestrai.experiment:VanillaRunGovernorTerminationCondition",
                                         "params": {}}},
        },
        "schedule": [{"phase_0": {"environments": [["short"], ["long"]], "agents": [["defender"]],
                                  "simulation": ["vanilla"], "phase_config": ["train"],
                                  "sensors": {"defender": ["all"]}, "actuators": {"defender": ["all"]}}}],
    }
    path = tmp_path / "experiment.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_check_lists_the_designs_runs_and_a_broken_run_is_one_line_exit_2(tmp_path: Path) -> None:
    result = arl_study_here([str(experiment(tmp_path)), "--run-id", "doe", "--check"], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 run(s)" in result.stdout and "run doe-0:" in result.stdout and "run doe-1:" in result.stdout
    assert not (tmp_path / "results").exists()
    result = arl_study_here([str(experiment(tmp_path, brain="nowhere.brains:Missing")), "--run-id", "doe", "--check"],
                            tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2 and all("nowhere.brains:Missing does not import" in line for line in lines), result.stderr
    assert "Traceback" not in result.stderr + result.stdout


@pytest.mark.slow
def test_the_design_runs_and_is_summarised(tmp_path: Path) -> None:
    result = arl_study_here([str(experiment(tmp_path)), "--run-id", "doe"], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    folder = tmp_path / "results" / "doe"
    assert sorted(p.name for p in (folder / "runs").iterdir()) == ["doe-0.yml", "doe-1.yml"]
    with open(folder / "summary.csv") as f:
        rows = list(csv.DictReader(f))
    # DummyEnvironment's reward counts its steps: 0+1+...+4 in the short one, 0+...+7 in the long one
    assert sorted(float(r["mean_objective"]) for r in rows) == [10.0, 28.0]
    assert all(r["exit_code"] == "0" and r["episodes"] == "2" for r in rows)
    result = arl_study_here([str(experiment(tmp_path)), "--run-id", "doe", "--resume"], tmp_path)
    assert result.returncode == 0 and "Run doe-0" not in result.stdout  # both finished: nothing runs again
