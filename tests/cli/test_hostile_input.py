"""Hostile and broken input: every file of tests/support/hostile_corpus.py through the CLI, run ids that try
to escape the results folder, --force on folders arl-learn did not write, --check, config-less
runs and behaviors missing from the config. Each refusal is exit code 2, one line per problem,
no traceback, and nothing written or removed."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from ml_arl.cli import learn as cli
from ml_arl.core.exceptions import ConfigError
from ml_arl.settings.config_file import MAX_DEPTH, load_config_file
from tests.support.hostile_corpus import CORPUS, VALID, Case
from tests.support.runs import arl_learn, arl_learn_here, tiny_config, write_config
from tests.support.zygote import popen_arl_learn


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under ``root`` with its size and mtime: 'nothing touched' is equality."""
    out: dict[str, tuple[int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            out[os.path.relpath(path, root)] = (st.st_size, st.st_mtime_ns)
    return out


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("case", CORPUS, ids=[c.name for c in CORPUS])
def test_hostile_file_gives_one_line_errors_and_writes_nothing(
    case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "hostile.yaml"
    cfg.write_bytes(case.content)
    before = snapshot(tmp_path)
    args = case.args or ([] if b"run_id" in case.content else ["--run-id", "h"])
    code, out, err = run_main([str(cfg), "--check", "--env", "builtin:Reach", *args], capsys)
    assert code == 2, (case.name, out, err)
    assert "Traceback" not in out + err
    lines = err.strip().splitlines()
    problems = [line for line in lines if line.startswith("arl-learn: error: ")]
    assert problems, err
    assert all(line.startswith(("arl-learn: error: ", "[WARNING] ")) for line in lines), err
    assert all(len(line) < 400 for line in lines), err
    assert any(case.needle in line for line in problems), (case.needle, err)
    assert out == ""  # --check prints the configuration only when it is valid
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("index", [0, 11, 17])
def test_hostile_files_through_the_real_command(index: int, tmp_path: Path) -> None:
    """The same answers from `arl-learn CONFIG` in its own process, without --check."""
    case = CORPUS[index]
    cfg = tmp_path / "hostile.yaml"
    cfg.write_bytes(case.content)
    before = snapshot(tmp_path)
    args = case.args or ([] if b"run_id" in case.content else ["--run-id", "h"])
    proc = arl_learn([str(cfg), "--env", "builtin:Reach", *args], cwd=tmp_path, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert case.needle in proc.stderr and str(cfg) in proc.stderr
    assert snapshot(tmp_path) == before


def test_depth_limit_leaves_room_for_real_configs(tmp_path: Path) -> None:
    nested: dict[str, object] = {"leaf": 1}
    for i in range(MAX_DEPTH - 2):
        nested = {f"k{i}": nested}
    path = tmp_path / "deep.yaml"
    path.write_text(yaml.safe_dump(nested))
    assert load_config_file(str(path))[0]
    path.write_text(yaml.safe_dump({"outer": {"x": nested}}, default_flow_style=True))
    with pytest.raises(ConfigError, match="nested more than"):
        load_config_file(str(path))


def test_plain_yaml_features_still_read(tmp_path: Path) -> None:
    """Anchors, merges, explicit standard tags, dates as strings and a UTF-8 BOM all read as ML-Agents' configs use them."""
    path = tmp_path / "ok.yaml"
    path.write_bytes(
        b"\xef\xbb\xbfdefaults: &d {max_steps: 1000, time_horizon: 32}\n"
        b"behaviors:\n  A:\n    <<: *d\n    summary_freq: !!int '500'\n  B: *d\n"
        b"checkpoint_settings:\n  run_id: 2024-01-01\n"
    )
    data, warnings = load_config_file(str(path))
    assert data["behaviors"]["A"] == {"max_steps": 1000, "time_horizon": 32, "summary_freq": 500}
    assert data["behaviors"]["B"]["max_steps"] == 1000
    assert data["checkpoint_settings"]["run_id"] == "2024-01-01" and warnings == []


def test_duplicate_keys_are_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text("behaviors:\n  A:\n    max_steps: 10\n    max_steps: 20\n")
    data, warnings = load_config_file(str(path))
    assert data["behaviors"]["A"]["max_steps"] == 20
    assert len(warnings) == 1 and "max_steps" in warnings[0] and "line 4" in warnings[0]


def test_every_problem_of_a_behavior_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "behaviors:\n  A:\n    trainer_type: sacc\n    max_steps: -1\n"
        "    network_settings: {memory: {memory_size: 7}, hidden_units: 0}\n"
        "env_settings: [1]\nengine_settings: {width: 0}\n"
        "environment_parameters: {p: {sampler_type: unifrom}}\n"
    )
    code, _, err = run_main([str(cfg), "--check"], capsys)
    assert code == 2
    for needle in ("trainer_type", "max_steps", "memory", "hidden_units", "env_settings", "engine_settings.width", "unifrom"):
        assert needle in err, (needle, err)


# ---------------------------------------------------------------- run ids and --force


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A folder beside the results folder that a hostile run id tries to reach."""
    folder = tmp_path / "victim"
    folder.mkdir()
    (folder / "thesis.txt").write_text("years of work")
    (folder / "run_logs").mkdir()
    return folder


@pytest.mark.parametrize(
    "args,config_extra",
    [
        (["--run-id", "../victim", "--force"], {}),
        (["--run-id", "VICTIM_ABS", "--force"], {}),
        ([], {"checkpoint_settings": {"run_id": "VICTIM_ABS", "force": True}}),
        ([], {"checkpoint_settings": {"run_id": "../victim", "resume": True}}),
        (["--run-id", "ok", "--initialize-from", "../victim"], {}),
        (["--run-id", "ok", "--initialize-from", "VICTIM_ABS"], {}),
        (["--run-id", "ok"], {"phases": [{"name": "p", "max_steps": 10, "load": {"Reach": {"run": "../victim"}}}]}),
        (["--run-id", "."], {}),
        (["--run-id", ".."], {}),
        (["--run-id", ""], {}),
    ],
)
def test_run_id_escapes_are_refused_with_nothing_touched(
    args: list[str], config_extra: dict[str, object], tmp_path: Path, victim: Path,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through the CLI's main() in this process (test_hostile_files_through_the_real_command runs
    the command itself): refused while reading the options, before anything starts."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    config = tiny_config("builtin:Reach", max_steps=500)
    config["behaviors"] = {"Reach": {}}
    config.update(config_extra)
    text = yaml.safe_dump(config).replace("VICTIM_ABS", str(victim))
    cfg = work / "c.yaml"
    cfg.write_text(text)
    args = [a.replace("VICTIM_ABS", str(victim)) for a in args]
    before = snapshot(tmp_path)
    code, out, err = run_main([str(cfg), *args], capsys)
    assert code == 2, out + err
    assert "is not a run name" in err and "Traceback" not in out + err
    assert all(line.startswith(("arl-learn: error: ", "[WARNING] ")) for line in err.strip().splitlines()), err
    assert snapshot(tmp_path) == before


def test_force_removes_only_folders_arl_learn_wrote(tmp_path: Path) -> None:
    config = tiny_config("builtin:Reach", max_steps=400)
    cfg = write_config(tmp_path / "c.yaml", config)
    results = tmp_path / "results"
    # someone else's folder under the run's name
    (results / "mine" / "run_logs").mkdir(parents=True)
    (results / "mine" / "notes.txt").write_text("keep")
    # a link to a folder elsewhere
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "run_logs").mkdir(parents=True)
    (elsewhere / "run_logs" / "training_status.json").write_text("{}")
    os.symlink(elsewhere, results / "linked")
    before = snapshot(tmp_path)
    for run_id, needle in (("mine", "not a run folder written by arl-learn"), ("linked", "symbolic link")):
        proc = arl_learn_here([str(cfg), "--run-id", run_id, "--force"], cwd=tmp_path)
        output = proc.stdout + proc.stderr
        assert proc.returncode == 2 and needle in output and "Traceback" not in output, output
        assert len([line for line in output.splitlines() if line.strip()]) == 1, output
    assert snapshot(tmp_path) == before
    # a run arl-learn wrote is replaced by --force
    assert arl_learn_here([str(cfg), "--run-id", "ours"], cwd=tmp_path).returncode == 0
    marker = results / "ours" / "run_logs" / "arl-run.json"
    assert marker.is_file()
    (results / "ours" / "stale.txt").write_text("old run")
    proc = arl_learn([str(cfg), "--run-id", "ours", "--force"], cwd=tmp_path)  # --force through the command itself
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not (results / "ours" / "stale.txt").exists() and marker.is_file()


def test_force_on_a_run_of_an_older_version_without_marker(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "c.yaml", tiny_config("builtin:Reach", max_steps=400))
    old = tmp_path / "results" / "old"
    (old / "run_logs").mkdir(parents=True)
    (old / "run_logs" / "training_status.json").write_text("{}")
    proc = arl_learn_here([str(cfg), "--run-id", "old", "--force"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ---------------------------------------------------------------- --check, config-less, partial configs


def test_check_prints_the_merged_configuration_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "c.yaml"
    cfg.write_bytes(VALID)
    before = snapshot(tmp_path)
    code, out, err = run_main([str(cfg), "--check", "--num-envs", "3", "--run-id", "chk"], capsys)
    assert code == 0, err
    merged = yaml.safe_load(out)
    assert merged["env_settings"]["num_envs"] == 3 and merged["checkpoint_settings"]["run_id"] == "chk"
    assert merged["behaviors"]["Reach"]["max_steps"] == 1000
    assert merged["behaviors"]["Reach"]["hyperparameters"]["batch_size"] == 1024  # ML-Agents' default filled in
    assert snapshot(tmp_path) == before
    # problems --check finds without an environment: a missing run for --resume, an unknown env, a bad device
    for args, needle in (
        (["--resume"], "previous data from this run ID was not found"),
        (["--env", "builtin:Nope"], "no built-in environment 'Nope'"),
        (["--torch-device", "cuda:7"], "torch_settings.device"),
    ):
        code, out, err = run_main([str(cfg), "--check", "--run-id", "chk", *args], capsys)
        assert code == 2 and needle in err and out == "" and "Traceback" not in err, (args, err)
    assert snapshot(tmp_path) == before


def test_config_less_run_trains_with_default_settings(tmp_path: Path) -> None:
    """As `mlagents-learn --env X --run-id Y`: no config file; every behavior gets the defaults
    (max_steps 500000, so the run is stopped with SIGINT once it trains, which saves a checkpoint)."""
    proc = arl_learn_here(["--env", "builtin:Reach", "--run-id", "nocfg", "--check"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert yaml.safe_load(proc.stdout)["behaviors"] == {}
    assert not (tmp_path / "results").exists()
    with popen_arl_learn(["--env", "builtin:Reach", "--run-id", "nocfg", "--debug"], tmp_path, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True) as run:
        assert run.stdout is not None
        configuration = tmp_path / "results" / "nocfg" / "configuration.yaml"
        deadline = time.monotonic() + 60
        seen = []
        for line in run.stdout:  # until the trainer of Reach has updated once
            seen.append(line)
            if "Reach: update 1 took" in line or time.monotonic() > deadline:
                break
        run.send_signal(signal.SIGINT)
        rest, _ = run.communicate(timeout=60)
        output = "".join(seen) + rest
    assert run.returncode == 0, output
    assert "'Reach' is not in the config's behaviors; it trains with the default settings" in output
    assert (tmp_path / "results" / "nocfg" / "Reach" / "checkpoint.pt").is_file()
    saved = yaml.safe_load(configuration.read_text())
    assert saved["behaviors"] == {} or saved["default_settings"]["max_steps"] == 500000


def test_behavior_missing_from_config_trains_with_default_settings(tmp_path: Path) -> None:
    config = tiny_config("builtin:Reach", max_steps=600)
    config["behaviors"] = {"SomethingElse": {"max_steps": 5}}
    cfg = write_config(tmp_path / "c.yaml", config)
    proc = arl_learn_here([str(cfg), "--run-id", "partial"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    warnings = [line for line in proc.stdout.splitlines() if "'Reach' is not in the config" in line]
    assert len(warnings) == 1 and "default_settings" in warnings[0]
    saved = (tmp_path / "results" / "partial" / "Reach" / "checkpoint.pt")
    assert saved.is_file()


def test_empty_config_file_is_a_config_less_run_with_a_warning(tmp_path: Path) -> None:
    cfg = tmp_path / "empty.yaml"
    cfg.write_text("# nothing here yet\n")
    proc = arl_learn_here([str(cfg), "--env", "builtin:Reach", "--run-id", "e", "--check"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "the config is empty" in proc.stderr
