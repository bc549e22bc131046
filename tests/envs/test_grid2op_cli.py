"""arl-learn on Grid2Op (``--env grid2op:<name>``): the shipped configs pass --check, a short run of
the Operator against a learning Opponent ends in a resilience matrix with Grid2Op's baselines, and a
name not available offline or a missing extra is one line (exit 2)."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import sys
from pathlib import Path

import pytest

from tests.support.runs import ROOT, arl_learn_here, tiny_config, write_config

needs_grid2op = pytest.mark.skipif(importlib.util.find_spec("grid2op") is None,
                                   reason="grid2op is not installed (pip install 'ml_arl[grid2op]')")
CONFIGS = ["case14-operator.yaml", "case14-adversarial.yaml", "case14-guarded.yaml", "case14-greedy-demos.yaml",
           "case14-guarded-adversarial.yaml"]


@needs_grid2op
@pytest.mark.parametrize("name", CONFIGS)
def test_shipped_configs_pass_check(tmp_path: Path, name: str) -> None:
    proc = arl_learn_here([str(ROOT / "config/grid2op" / name), "--run-id", "check", "--check"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "The configuration is valid." in proc.stdout + proc.stderr
    assert not (tmp_path / "results/check").exists()


@needs_grid2op
def test_operator_and_opponent_train_then_play_the_matrix(tmp_path: Path) -> None:
    config = tiny_config("grid2op:l2rpn_case14_sandbox", max_steps=300, time_horizon=32)
    config["env_settings"].update({"num_envs": 1, "manager": "inprocess", "seed": 2,
                                   "env_args": ["opponent=true", "attack_duration=12", "attack_cooldown=12"]})
    config["behaviors"] = {"Operator": {"role": "defender"}, "Opponent": {"role": "attacker"}}
    config["phases"] = [
        {"name": "train", "mode": "train", "max_steps": 300},
        {"name": "matrix", "mode": "test", "episodes": 1, "deterministic": True,
         "matrix": {"Operator": ["learned", "grid2op_do_nothing"], "Opponent": ["random_line_attack", "none"]}},
    ]
    cfg = write_config(tmp_path / "g2o.yaml", config)
    proc = arl_learn_here([str(cfg), "--run-id", "g2o"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    status = json.loads((tmp_path / "results/g2o/train/run_logs/training_status.json").read_text())
    assert status["Operator"]["final_checkpoint"]["steps"] >= 300
    assert status["Opponent"]["final_checkpoint"]["steps"] >= 300
    with sqlite3.connect(tmp_path / "results/g2o/results.sqlite") as db:
        rows = dict(db.execute("SELECT phase, length FROM episodes WHERE behavior = 'Operator' AND phase LIKE 'matrix.%'"))
    assert set(rows) == {f"matrix.{op}-vs-{att}" for op in ("learned", "grid2op_do_nothing")
                         for att in ("random_line_attack", "none")}
    # without an attack, doing nothing lasts the whole chronic; random line attacks end it earlier
    assert rows["matrix.grid2op_do_nothing-vs-none"] == 575
    assert rows["matrix.grid2op_do_nothing-vs-random_line_attack"] < 575


@needs_grid2op
def test_unknown_grid_is_one_line(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "c.yaml", tiny_config("builtin:Reach"))
    proc = arl_learn_here([str(cfg), "--run-id", "bad", "--env", "grid2op:l2rpn_case99"], cwd=tmp_path)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, output
    assert len(output.strip().splitlines()) == 1 and "Traceback" not in output, output
    assert "no Grid2Op environment 'l2rpn_case99' available offline; available: " in output
    assert "l2rpn_case14_sandbox" in output


def test_missing_extra_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "grid2op", None)  # as if the extra were not installed
    cfg = write_config(tmp_path / "c.yaml", tiny_config("grid2op:l2rpn_case14_sandbox"))
    proc = arl_learn_here([str(cfg), "--run-id", "missing"], cwd=tmp_path)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, output
    assert output.strip().splitlines() == [
        "arl-learn: error: --env grid2op:l2rpn_case14_sandbox: Grid2Op is not installed; pip install 'ml_arl[grid2op]'"
    ] or (len(output.strip().splitlines()) == 1 and "pip install 'ml_arl[grid2op]'" in output), output


@needs_grid2op
def test_guarded_operator_against_a_best_response_opponent(tmp_path: Path) -> None:
    """safe_max_rho with an Opponent behavior (opponent=true): the Operator decides only at or above the
    threshold, the Opponent every step; a matrix with a best-response Opponent trains a fresh one
    against each operator and tests it. Every episode's Operator return counts its steps survived."""
    config = tiny_config("grid2op:l2rpn_case14_sandbox", max_steps=200, time_horizon=32)
    config["env_settings"].update({"num_envs": 1, "manager": "inprocess", "seed": 2,
                                   "env_args": ["opponent=true", "safe_max_rho=0.95", "redispatch=false"]})
    config["behaviors"] = {"Operator": {"role": "defender", "max_steps": 40}, "Opponent": {"role": "attacker"}}
    config["phases"] = [
        {"name": "train", "mode": "train", "learn": ["Operator"], "max_steps": 40,
         "play": {"Opponent": {"name": "random_line_attack"}}},
        {"name": "matrix", "mode": "test", "episodes": 1, "deterministic": True,
         "matrix": {"Operator": ["learned", "grid2op_reconnect"], "Opponent": ["random_line_attack"]},
         "best_response": {"Opponent": {"max_steps": 200}}},
    ]
    cfg = write_config(tmp_path / "g2o.yaml", config)
    proc = arl_learn_here([str(cfg), "--run-id", "guarded"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    status = json.loads((tmp_path / "results/guarded/train/run_logs/training_status.json").read_text())
    assert status["Operator"]["final_checkpoint"]["steps"] >= 40
    with sqlite3.connect(tmp_path / "results/guarded/results.sqlite") as db:
        rows = db.execute("SELECT phase, behavior, env_reward, length FROM episodes WHERE phase LIKE 'matrix.%'").fetchall()
    phases = {phase for phase, *_ in rows}
    assert {"matrix.learned-vs-random_line_attack", "matrix.grid2op_reconnect-vs-random_line_attack",
            "matrix.br-Opponent-vs-learned", "matrix.br-Opponent-vs-grid2op_reconnect"} <= phases, phases
    operator = {phase: (reward, length) for phase, behavior, reward, length in rows if behavior == "Operator"}
    opponent = {phase: (reward, length) for phase, behavior, reward, length in rows if behavior == "Opponent"}
    for phase, (reward, length) in operator.items():
        assert reward == opponent[phase][0]  # the same steps survived; the Opponent decides every step
        assert length <= opponent[phase][1], (phase, length, opponent[phase])
    reward, length = operator["matrix.grid2op_reconnect-vs-random_line_attack"]
    assert reward > 20 and length < opponent["matrix.grid2op_reconnect-vs-random_line_attack"][1] / 2
