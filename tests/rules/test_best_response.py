"""A matrix's best responses (ml_arl.settings.matrix ``best_response``, issue 51): for every player
of the other side, a fresh brain trained against it alone with one budget, then tested; the phase
after the matrix gets the learned brain back; arl-report gives each player's exploitability."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from ml_arl.core.exceptions import ConfigError
from ml_arl.settings import build_run_options
from tests.rules.test_rules import config
from tests.support.runs import arl_learn_here

MATRIX = {"name": "m", "mode": "test", "episodes": 4, "deterministic": True,
          "matrix": {"Defender": ["learned", "no_op"], "Attacker": ["learned", "none"]},
          "best_response": {"Attacker": {"max_steps": 300}, "Defender": {"max_steps": 200}}}


def phases(extra: list[dict[str, Any]]) -> dict[str, Any]:
    options = build_run_options(config(extra), {}, "test")
    return {p.name: p for p in options.phases or []}


def test_best_responses_are_fresh_train_phases_then_test_cells() -> None:
    train = [{"name": "attack", "max_steps": 100, "learn": ["Attacker"]}, {"name": "defend", "max_steps": 100, "learn": ["Defender"]}]
    got = phases([*train, MATRIX, {"name": "after", "mode": "test", "episodes": 2}])
    names = list(got)
    assert names[2:6] == ["m.learned-vs-learned", "m.learned-vs-none", "m.no_op-vs-learned", "m.no_op-vs-none"]
    assert names[6:] == [
        "m.br-Attacker-vs-learned.train", "m.br-Attacker-vs-learned", "m.br-Attacker-vs-no_op.train", "m.br-Attacker-vs-no_op",
        "m.br-Defender-vs-learned.train", "m.br-Defender-vs-learned", "m.br-Defender-vs-none.train", "m.br-Defender-vs-none",
        "after"]
    first = got["m.br-Attacker-vs-learned.train"]
    assert first.mode == "train" and first.learn == ["Attacker"] and first.max_steps == 300 and not first.play
    assert first.load["Attacker"].initial and set(first.load) == {"Attacker"}
    assert first.behaviors == {"Defender": {"network_settings": {"deterministic": True}}}  # as it acts in the test
    assert got["m.br-Attacker-vs-no_op.train"].play["Defender"].name == "no_op"
    test = got["m.br-Attacker-vs-no_op"]
    assert test.mode == "test" and test.episodes == 4 and test.deterministic and test.group == "m"
    assert test.cell == {"Defender": "no_op", "Attacker": "best_response"}
    # the defender's responses face the learned attacker, not the last attacker response: it comes back first
    defend = got["m.br-Defender-vs-learned.train"]
    assert defend.load["Attacker"].phase == "attack" and defend.load["Defender"].initial and defend.max_steps == 200
    assert got["m.br-Defender-vs-none"].cell == {"Defender": "best_response", "Attacker": "none"}
    after = got["after"]
    assert after.load["Attacker"].phase == "attack" and after.load["Defender"].phase == "defend"


@pytest.mark.parametrize("bad, message", [
    ({"best_response": {"Seeker": {"max_steps": 10}}}, "phases.m.best_response.Seeker: not a behavior of the matrix"),
    ({"best_response": {"Attacker": {"max_steps": 0}}}, "phases.m.best_response: expected a mapping of a matrix behavior"),
    ({"best_response": {"Attacker": 10}}, "phases.m.best_response: expected a mapping of a matrix behavior"),
    ({"matrix": {"Defender": ["best_response"], "Attacker": ["none"]}}, "'best_response' is the best responses' player"),
])
def test_bad_best_responses_are_one_line(bad: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        phases([{"name": "t", "max_steps": 10}, {**MATRIX, **bad}])
    assert message in str(err.value) and len(str(err.value).splitlines()) == 1, str(err.value)


def test_initial_is_the_runs_own_brain() -> None:
    with pytest.raises(ConfigError, match="initial: true is this run's own first brain; leave out run, phase and behavior"):
        phases([{"name": "t", "max_steps": 10, "load": {"Attacker": {"initial": True, "phase": "x"}}}])


def test_a_best_response_starts_afresh_and_arl_report_gives_exploitability(tmp_path: Path) -> None:
    """A short run: the attacker learns against the droop, the matrix's cells, a best response of
    300 steps against each defender player, then a phase that plays the learned attacker again."""
    from ml_arl.cli import report

    cfg = config([
        {"name": "attack", "max_steps": 600, "learn": ["Attacker"], "play": {"Defender": {"name": "volt_var_droop"}}},
        {"name": "m", "mode": "test", "episodes": 4, "deterministic": True,
         "matrix": {"Defender": ["volt_var_droop", "no_op"], "Attacker": ["learned", "none"]},
         "best_response": {"Attacker": {"max_steps": 300}}},
        {"name": "after", "mode": "test", "episodes": 2, "play": {"Defender": {"name": "no_op"}}},
    ])
    cfg["default_settings"]["hyperparameters"] = {"batch_size": 32, "buffer_size": 128}
    path = tmp_path / "br.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    result = arl_learn_here([str(path), "--run-id", "br"], tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    run = tmp_path / "results" / "br"
    learned = torch.load(run / "attack" / "Attacker" / "checkpoint.pt", weights_only=True)
    assert learned["global_step"] >= 600
    for defender in ("volt_var_droop", "no_op"):
        response = torch.load(run / f"m.br-Attacker-vs-{defender}.train" / "Attacker" / "checkpoint.pt", weights_only=True)
        assert 300 <= response["global_step"] < 600, response["global_step"]  # counted from 0: a fresh brain
    assert (run / "run_logs" / "initial" / "Attacker.pt").is_file()
    assert "Phase m.br-Attacker-vs-no_op.train: Attacker starts afresh from its first weights" in output
    assert "Phase after: Attacker loaded from results/br/attack/Attacker/checkpoint.pt" in output  # the learned one, back
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert report.main([str(run)]) == 0
    text = out.getvalue()
    header = next(line for line in text.splitlines() if line.startswith("Defender \\ others"))
    assert header.split()[-3:] == ["learned", "none", "best_response"], header
    assert "exploitability: Defender's return under a best response to it: volt_var_droop " in text, text


@pytest.mark.parametrize("recorded", [True, False], ids=["phase-recorded", "phase-unrecorded"])
def test_a_best_response_killed_before_its_first_checkpoint_starts_afresh_again(tmp_path: Path, recorded: bool) -> None:
    """arl-learn SIGKILLed just after a best response began (nothing of it saved yet): --resume
    starts that response again from the attacker's first weights, not from the last checkpoint of
    an earlier phase (the previous response's attacker). Unrecorded: the kill came before
    run_logs/phases.json marked the phase running (seen once in a loaded make test), so --resume
    takes it for a phase not begun; the earlier checkpoint is not read (nor logged) before the afresh load."""
    import json
    import time

    from tests.training.test_kill_resume import kill_run, start, wait_for

    cfg = config([
        {"name": "attack", "max_steps": 300, "learn": ["Attacker"], "play": {"Defender": {"name": "volt_var_droop"}}},
        {"name": "m", "mode": "test", "episodes": 2, "deterministic": True,
         "matrix": {"Defender": ["volt_var_droop", "no_op"], "Attacker": ["learned"]},
         "best_response": {"Attacker": {"max_steps": 300}}},
    ])
    cfg["default_settings"]["hyperparameters"] = {"batch_size": 32, "buffer_size": 128}
    path = tmp_path / "killed.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    log = tmp_path / "first.log"
    proc = start([str(path), "--run-id", "k"], tmp_path, log, fresh=False)
    began = "Phase m.br-Attacker-vs-no_op.train: Attacker starts afresh from its first weights"
    phase = "m.br-Attacker-vs-no_op.train"
    log_path = tmp_path / "results" / "k" / "run_logs" / "phases.json"

    def state() -> object:  # the phase's state in the log (written whole: a temporary file, then a rename)
        return json.loads(log_path.read_text())["phases"].get(phase, {}).get("state") if log_path.is_file() else None

    wait_for(log, began, 1, proc, 120)
    if recorded:  # the log line comes just before the phase log marks the phase running: wait for that too
        end = time.monotonic() + 60
        while state() != "running" and proc.poll() is None:
            assert time.monotonic() < end, f"{phase} not marked running within 60 s: {log_path.read_text()}"
            time.sleep(0.02)
    assert proc.poll() is None, log.read_text()[-3000:]
    kill_run(proc)
    assert not (tmp_path / "results" / "k" / phase / "Attacker" / "checkpoint.pt").exists()
    if not recorded:  # as a kill before the phase log's save leaves it (the race of a loaded machine): no entry
        phases = json.loads(log_path.read_text())
        phases["phases"].pop(phase, None)
        log_path.write_text(json.dumps(phases))
    else:
        assert state() == "running"
    result = arl_learn_here([str(path), "--run-id", "k", "--resume"], tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert began in output and "Resuming Attacker from" not in output, output
    response = torch.load(tmp_path / "results" / "k" / "m.br-Attacker-vs-no_op.train" / "Attacker" / "checkpoint.pt",
                          weights_only=True)
    assert 300 <= response["global_step"] < 600, response["global_step"]
