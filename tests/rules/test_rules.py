"""Fixed policies as first-class players (ml_arl.rules, a phase's ``play``): GridDefense's
volt/var droop and greedy attacker against no-op and random players, the store naming who played,
and the bad inputs."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import yaml

from tests.support.runs import arl_learn_here


def config(phases: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "env_settings": {"env_path": "builtin:GridDefense", "num_envs": 1, "num_areas": 4, "seed": 3},
        "default_settings": {"trainer_type": "ppo", "network_settings": {"hidden_units": 16, "num_layers": 1}},
        "behaviors": {"Defender": {"role": "defender"}, "Attacker": {"role": "attacker"}},
        "phases": phases,
    }


def phase(name: str, defender: str, attacker: str) -> dict[str, Any]:
    return {"name": name, "mode": "test", "episodes": 8,
            "play": {"Defender": {"name": defender}, "Attacker": {"name": attacker}}}


def test_droop_and_greedy_play_and_the_store_names_them(tmp_path: Path) -> None:
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(config([
        phase("droop-none", "volt_var_droop", "no_op"), phase("noop-none", "no_op", "no_op"),
        phase("droop-greedy", "volt_var_droop", "greedy"), phase("droop-random", "volt_var_droop", "random"),
    ])))
    result = arl_learn_here([str(path), "--run-id", "bl"], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    with sqlite3.connect(tmp_path / "results" / "bl" / "results.sqlite") as db:
        rows = db.execute("SELECT phase, behavior, policy, COUNT(*), AVG(env_reward) FROM episodes "
                          "GROUP BY phase, behavior").fetchall()
    by = {(p, b): (policy, n, mean) for p, b, policy, n, mean in rows}
    assert by[("droop-none", "Defender")][0] == "volt_var_droop" and by[("droop-greedy", "Attacker")][0] == "greedy"
    assert all(n == 8 for _, n, _ in by.values())
    defended = {p: by[(p, "Defender")][2] for p in ("droop-none", "noop-none", "droop-greedy", "droop-random")}
    # the droop keeps more voltages in band than doing nothing; the greedy attack hurts it more than random actions
    assert defended["droop-none"] > defended["noop-none"], defended
    assert defended["droop-greedy"] < defended["droop-random"] < defended["droop-none"] + 1e-6, defended


def test_a_phase_of_n_episodes_records_n_when_areas_end_theirs_together(tmp_path: Path) -> None:
    """GridDefense's 4 areas end their episodes on the same step, 4 at a time: a phase of 6 episodes
    records 6 per behavior, not the 8 that have ended by the step that reached 6 (nor those the worker
    stepped ahead: an 8-episode phase recorded more than 8 once in a loaded make test)."""
    path = tmp_path / "six.yaml"
    six = {**phase("six", "volt_var_droop", "random"), "episodes": 6}
    path.write_text(yaml.safe_dump(config([six, phase("eight", "no_op", "no_op")])))
    result = arl_learn_here([str(path), "--run-id", "six"], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    with sqlite3.connect(tmp_path / "results" / "six" / "results.sqlite") as db:
        counts = dict(((p, b), n) for p, b, n in db.execute(
            "SELECT phase, behavior, COUNT(*) FROM episodes GROUP BY phase, behavior"))
    assert counts == {("six", "Defender"): 6, ("six", "Attacker"): 6, ("eight", "Defender"): 8, ("eight", "Attacker"): 8}


def test_bad_policies_are_one_line_each(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    bad = config([{"name": "t", "mode": "test", "episodes": 2, "play": {"Defender": {"name": "droopy"}}},
                  {"name": "u", "mode": "train", "episodes": 2, "learn": ["Attacker"],
                   "play": {"Attacker": {"name": "random"}}}])
    path.write_text(yaml.safe_dump(bad))
    result = arl_learn_here([str(path), "--run-id", "bad", "--check"], tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert any("phases.t.play.Defender.name: no policy 'droopy': the built-in ones are no_op, random, volt_var_droop, greedy"
               in line for line in lines), lines
    assert any("phases.u.play: 'Attacker' is in learn too" in line for line in lines), lines
    assert len(lines) == 2 and "Traceback" not in result.stderr
    # a droop on the attacker, which has no inverter actions: one line once the behaviors are known
    path.write_text(yaml.safe_dump(config([phase("t", "no_op", "volt_var_droop")])))
    result = arl_learn_here([str(path), "--run-id", "wrong"], tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "play: Attacker: policy volt_var_droop plays GridDefense's Defender (6 continuous actions" in result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_a_matrix_phase_plays_every_pairing_and_arl_report_shows_it(tmp_path: Path) -> None:
    from ml_arl.cli import report

    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump(config([{"name": "m", "mode": "test", "episodes": 4, "matrix": {
        "Defender": ["learned", "volt_var_droop"], "Attacker": ["greedy", "none"]}}]), sort_keys=False))
    check = arl_learn_here([str(path), "--run-id", "m", "--check"], tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    phases = yaml.safe_load(check.stdout)["phases"]
    assert [p["name"] for p in phases] == ["m.learned-vs-greedy", "m.learned-vs-none", "m.volt_var_droop-vs-greedy",
                                           "m.volt_var_droop-vs-none"]
    assert phases[3]["play"] == {"Defender": {"name": "volt_var_droop", "params": {}}, "Attacker": {"name": "no_op", "params": {}}}
    assert phases[0]["play"] == {"Attacker": {"name": "greedy", "params": {}}} and phases[0]["cell"]["Defender"] == "learned"
    for run_id, seed in (("m", "3"), ("m2", "4")):
        result = arl_learn_here([str(path), "--run-id", run_id, "--seed", seed], tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = report.main([str(tmp_path / "results" / "m"), str(tmp_path / "results" / "m2")])
    text = out.getvalue()
    assert code == 0, text
    assert "matrix m: Defender's mean return, 95 % interval over 2 runs and their episodes" in text, text
    line = next(row for row in text.splitlines() if row.startswith("volt_var_droop "))
    greedy, none = [float(cell.split(" [")[0]) for cell in line.split("  ")[1:] if cell.strip()]
    assert greedy < none  # the greedy attack costs the droop
    assert "paired over 2 runs, learned minus volt_var_droop (95 % t-interval): against greedy " in text, text
    assert (tmp_path / "results" / "m" / "matrix-m.png").is_file()
    bad = config([{"name": "m", "mode": "train", "max_steps": 10, "matrix": {"Defender": ["learned"]}}])
    path.write_text(yaml.safe_dump(bad))
    result = arl_learn_here([str(path), "--run-id", "bad", "--check"], tmp_path)
    assert result.returncode == 2 and "phases.m.matrix: a matrix plays its pairings in test mode" in result.stderr
