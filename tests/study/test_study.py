"""arl-study as a user runs it: a search that prunes and writes trials.csv, best.yaml and the plots;
a study over seeds with its statistics and arl-report; a failing trial recorded with its reason
while the study goes on; a killed study resumed from its storage and its runs' checkpoints; a
study folder that is locked, another study's, or changed since it began."""

from __future__ import annotations

import csv
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.support.runs import ROOT, arl_learn_here, arl_study_here

BASE = """\
env_settings: {{env_path: {env}, num_envs: 1, manager: inprocess}}
behaviors:
  Reach:
    trainer_type: ppo
    hyperparameters: {{batch_size: 64, buffer_size: 256, learning_rate: 3.0e-3, num_epoch: 3}}
    network_settings: {{hidden_units: 16, num_layers: 1}}
    max_steps: {max_steps}
    summary_freq: 250
    checkpoint_interval: 500
    time_horizon: 32
"""
LR = "behaviors.Reach.hyperparameters.learning_rate"
WAIT_S = 120.0


def write(folder: Path, study: str, env: str = "builtin:Reach", max_steps: int = 2000) -> Path:
    (folder / "base.yaml").write_text(BASE.format(env=env, max_steps=max_steps))
    path = folder / "study.yaml"
    path.write_text(study)
    return path


def write_fault_study(folder: Path, env_args: str, max_steps: int = 2000) -> Path:
    """Two trials over the learning rate, each a run of tests/support/fault_envs.py with ``env_args``."""
    study = write(folder, f"""\
config: base.yaml
trials: 2
search:
  {LR}: {{sampler_type: log_uniform, sampler_parameters: {{min_value: 1.0e-4, max_value: 1.0e-2}}}}
""", env="tests.support.fault_envs:make_env", max_steps=max_steps)
    base = (folder / "base.yaml").read_text().replace("manager: inprocess}", f"manager: inprocess, env_args: [{env_args}]}}")
    (folder / "base.yaml").write_text(base)
    return study


def rows(folder: Path) -> list[dict[str, str]]:
    with open(folder / "trials.csv", newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_search_prunes_the_bad_trial_and_writes_best_yaml(tmp_path: Path) -> None:
    # The metric is the learning rate itself: a trial at 1e-5 is below the median of the trials at
    # 1e-3 at every step, so the median pruner stops it. Random sampler seed 2 draws 1e-3 three
    # times, then 1e-5.
    study = write(tmp_path, f"""\
config: base.yaml
trials: 4
parallel: 1
sampler: random
sampler_seed: 2
pruner: median
startup_trials: 1
warmup_steps: 0
report_interval_s: 0.2
metric: {{tag: "Policy/Learning Rate", reduce: last, direction: maximize}}
search:
  {LR}: {{sampler_type: choice, sampler_parameters: {{values: [1.0e-3, 1.0e-5]}}}}
""", env="tests.support.fault_envs:make_env", max_steps=1000)
    # each env step sleeps 2 ms: a run lasts 2 s or more however fast the machine, so the study
    # reads several of its summaries while it trains
    base = (tmp_path / "base.yaml").read_text().replace("manager: inprocess}", "manager: inprocess, env_args: [step_sleep=0.002]}")
    (tmp_path / "base.yaml").write_text(base)
    result = arl_study_here([study, "--run-id", "lr", "--results-dir", tmp_path / "results"], ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    folder = tmp_path / "results" / "lr"
    table = rows(folder)
    assert [r["state"] for r in table] == ["COMPLETE", "COMPLETE", "COMPLETE", "PRUNED"], table
    assert float(table[3][LR]) == 1e-5 and table[3]["pruned_at_step"] and int(table[3]["pruned_at_step"]) < 1000
    assert all(float(r[LR]) == 1e-3 for r in table[:3])
    assert "Trial 3 pruned at step" in result.stdout
    best = yaml.safe_load((folder / "best.yaml").read_text())
    assert best["behaviors"]["Reach"]["hyperparameters"]["learning_rate"] == 1e-3
    check = arl_learn_here([folder / "best.yaml", "--check"], ROOT)  # a complete config arl-learn runs
    assert check.returncode == 0, check.stderr
    assert (folder / "history.png").stat().st_size > 1000
    for number in range(4):  # every trial an ordinary run folder with its config beside
        assert (folder / f"trial-{number:04d}" / "Reach").is_dir()
        assert (folder / "configs" / f"trial-{number:04d}.yaml").is_file()


@pytest.mark.slow
def test_seeds_study_reports_mean_iqm_and_intervals_and_refuses_misuse(tmp_path: Path) -> None:
    study = write(tmp_path, "config: base.yaml\nparallel: 2\nseeds: [0, 1, 2]\nmetric: {reduce: mean_last_3}\n")
    results = tmp_path / "results"
    result = arl_study_here([study, "--run-id", "seeds", "--results-dir", results], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    folder = results / "seeds"
    stats = json.loads((folder / "statistics.json").read_text())
    assert stats["runs"] == 3 and stats["seeds"] == [0, 1, 2]
    assert stats["iqm"]["low"] <= stats["iqm"]["value"] <= stats["iqm"]["high"]
    assert stats["mean"]["value"] == pytest.approx(sum(stats["values"]) / 3)
    assert "Over 3 seeds: mean" in result.stdout and "IQM" in result.stdout and "95% CI" in result.stdout
    assert (folder / "seeds.png").stat().st_size > 1000
    assert sorted(p.name for p in folder.glob("trial-0000-seed*")) == ["trial-0000-seed0", "trial-0000-seed1", "trial-0000-seed2"]
    ports = {(folder / "logs" / f"trial-0000-seed{s}.log").read_text().splitlines()[0].split("--base-port ")[1].split()[0] for s in (0, 1)}
    assert ports == {"5005", "5007"}  # the two runs at once: slots 0 and 1, num_envs + 1 ports apart
    os.remove(folder / "seeds.png")
    from ml_arl.cli.report import main as report_main

    assert report_main([str(folder)]) == 0
    assert (folder / "seeds.png").is_file()

    again = arl_study_here([study, "--run-id", "seeds", "--results-dir", results], tmp_path)
    assert again.returncode == 2 and "use --resume to continue it, --force to start over" in again.stderr, again
    shutil.copytree(folder, results / "copy")
    other = arl_study_here([study, "--run-id", "copy", "--results-dir", results, "--resume"], tmp_path)
    assert other.returncode == 2 and "holds the study 'seeds', not 'copy': it belongs to another study" in other.stderr, other
    checked = arl_study_here([study, "--run-id", "seeds", "--results-dir", results, "--resume", "--check"], tmp_path)
    assert checked.returncode == 0 and f"resumes the study in {folder}" in checked.stdout, checked
    changed = write(tmp_path, "config: base.yaml\nparallel: 2\nseeds: [0, 1, 2, 3]\nmetric: {reduce: mean_last_3}\n")
    moved = arl_study_here([changed, "--run-id", "seeds", "--results-dir", results, "--resume"], tmp_path)
    assert moved.returncode == 2 and "was started with other settings (seeds changed)" in moved.stderr, moved
    checked = arl_study_here([changed, "--run-id", "seeds", "--results-dir", results, "--resume", "--check"], tmp_path)
    assert checked.returncode == 2 and "was started with other settings (seeds changed)" in checked.stderr, checked
    with open(folder / "study.lock", "a+") as held:  # as another arl-study holds it
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        locked = arl_study_here([study, "--run-id", "seeds", "--results-dir", results, "--resume"], tmp_path)
        running = arl_study_here([changed, "--run-id", "seeds", "--results-dir", results], tmp_path)
    assert locked.returncode == 2 and "the study is being run by another arl-study" in locked.stderr, locked
    assert running.returncode == 2 and "the study is being run by another arl-study" in running.stderr, running
    (results / "mine").mkdir()
    (results / "mine" / "notes.txt").write_text("mine")
    forced = arl_study_here([study, "--run-id", "mine", "--results-dir", results, "--force"], tmp_path)
    assert forced.returncode == 2 and "not a folder arl-study wrote" in forced.stderr, forced
    assert (results / "mine" / "notes.txt").is_file()
    for r in (again, other, moved, locked, forced):
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stdout + r.stderr


@pytest.mark.slow
def test_a_failing_trial_is_recorded_with_its_reason_and_the_study_goes_on(tmp_path: Path) -> None:
    study = write_fault_study(tmp_path, "fault=value_error, at_step=20")
    result = arl_study_here([study, "--run-id", "fail", "--results-dir", tmp_path / "results"], ROOT)
    assert result.returncode == 1, result.stdout + result.stderr
    table = rows(tmp_path / "results" / "fail")
    assert [r["state"] for r in table] == ["FAIL", "FAIL"]
    assert all("ValueError" in r["reason"] and "\n" not in r["reason"] for r in table), table
    assert "Trial 0 failed: run trial-0000:" in result.stdout and "Trial 1 failed" in result.stdout
    assert "No trial completed" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr


def _wait_for(predicate, what: str) -> None:  # noqa: ANN001
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _runs_alive(run_id: str) -> bool:
    """A process whose command line has ``--run-id run_id`` (from /proc: no pgrep needed)."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if any(a == b"--run-id" and b == run_id.encode() for a, b in zip(args, args[1:])):
            return True
    return False


@pytest.mark.slow
def test_a_killed_study_resumes_its_trials_from_their_checkpoints(tmp_path: Path) -> None:
    study = write_fault_study(tmp_path, "step_sleep=0.004", max_steps=1500)
    folder = tmp_path / "results" / "killed"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ml_arl.cli.study", str(study), "--run-id", "killed", "--results-dir", str(tmp_path / "results")],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        _wait_for(lambda: (folder / "trial-0000" / "Reach" / "checkpoint.pt").is_file(), "the first checkpoint")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    _wait_for(lambda: not _runs_alive("trial-0000"), "the orphaned run to save and stop")
    # The kernel repeats the parent-death signal as each of the study's threads exits: one stop, its
    # final checkpoint saved in full, not cut short by the repeats.
    stopped = (folder / "logs" / "trial-0000.log").read_text()
    stopped = stopped[stopped.index("Learning was interrupted; saving a final checkpoint.") :]
    # a final checkpoint: saved, or, when the stop came before any step after the last periodic one, that one
    # marked final (its model copied to <behavior>.onnx; ml_arl.results.checkpoints.mark_final)
    final = "Saved checkpoint" in stopped or re.search(r"Copied \S+-\d+\.onnx to \S+Reach\.onnx", stopped)
    assert final and "Interrupted" not in stopped and "terminate called" not in stopped, stopped

    result = arl_study_here([study, "--run-id", "killed", "--results-dir", tmp_path / "results", "--resume"], ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 interrupted trial(s) run again" in result.stdout
    table = rows(folder)
    assert [r["state"] for r in table] == ["INTERRUPTED", "COMPLETE", "COMPLETE"], table
    assert table[0]["reason"] == "interrupted; run again as trial 1"
    assert "Study killed: 3 trials (2 complete, 1 interrupted)" in result.stdout
    assert table[1][LR] == table[0][LR] and table[1]["runs"] == "trial-0000"  # run again with its values ...
    log = (folder / "logs" / "trial-0000.log").read_text()
    assert "Resum" in log  # ... continuing its run from the checkpoint
    assert table[2][LR] != table[0][LR] and table[2]["runs"] == "trial-0002"  # the resumed sampler draws anew
    assert not (folder / "trial-0001").exists()


@pytest.mark.slow
def test_grid_mode_writes_every_run_file_first_and_each_reruns_alone(tmp_path: Path) -> None:
    """palaestrAI's design of experiments: attacker settings x phase lengths on GridDefense, every
    concrete run file written before anything runs; the metric is the defender's test episodes."""
    base = yaml.safe_load((ROOT / "config" / "arl" / "GridDefense.yaml").read_text())
    base["env_settings"]["num_envs"] = 1
    base["default_settings"]["summary_freq"] = 500
    for phase in base["phases"]:
        phase.update({"max_steps": 500} if phase["mode"] == "train" else {"episodes": 8})
        phase.pop("best_response", None)  # (tests/rules/test_best_response.py has them)
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(base))
    study = tmp_path / "doe.yaml"
    study.write_text("""\
config: base.yaml
mode: grid
parallel: 2
metric: {tag: episodes/env_reward, behavior: Defender, reduce: mean_last_8}
search:
  behaviors.Attacker.hyperparameters.learning_rate: {sampler_type: choice, sampler_parameters: {values: [1.0e-4, 3.0e-3]}}
  phases.1.max_steps: {sampler_type: int_uniform, sampler_parameters: {min_value: 500, max_value: 1000, step: 500}}
""")
    check = arl_study_here([study, "--run-id", "doe", "--check"], tmp_path)
    assert "mode grid: 4 combinations, 2 at once, seeds [0], pruner none" in check.stdout, check
    result = arl_study_here([study, "--run-id", "doe", "--results-dir", tmp_path / "results"], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    folder = tmp_path / "results" / "doe"
    commands = [line for line in (folder / "runs.txt").read_text().splitlines() if line.startswith("arl-learn ")]
    assert len(commands) == 4
    table = rows(folder)
    assert [(float(r["behaviors.Attacker.hyperparameters.learning_rate"]), int(r["phases.1.max_steps"])) for r in table] == [
        (1e-4, 500), (1e-4, 1000), (3e-3, 500), (3e-3, 1000)]  # in order, the last key fastest
    assert all(r["state"] == "COMPLETE" and float(r["metric"]) > 0 for r in table), table
    written = yaml.safe_load((folder / "configs" / "trial-0003.yaml").read_text())
    assert written["phases"][1]["max_steps"] == 1000 and written["behaviors"]["Attacker"]["hyperparameters"]["learning_rate"] == 3e-3
    # any one run again, alone, from its line in runs.txt
    args = commands[3].split()[1:]
    args[args.index("--run-id") + 1] = "again"
    again = arl_learn_here(args, tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert (folder / "again" / "attack-droop" / "Attacker").is_dir()


@pytest.mark.slow
def test_runs_as_ray_tasks_give_the_same_trials(tmp_path: Path) -> None:
    """--ray-address local: each run a Ray task on a Ray instance the study starts; the trials and
    their metrics are those of the same study run here (same seeds, same sampler)."""
    pytest.importorskip("ray")
    study = write(tmp_path, f"""\
config: base.yaml
trials: 2
parallel: 2
sampler: random
search:
  {LR}: {{sampler_type: log_uniform, sampler_parameters: {{min_value: 1.0e-4, max_value: 1.0e-2}}}}
""", max_steps=500)
    tables = {}
    for name, extra in (("here", []), ("ray", ["--ray-address", "local"])):
        done = subprocess.run(
            [sys.executable, "-m", "ml_arl.cli.study", str(study), "--run-id", name, "--results-dir", str(tmp_path / "results"), *extra],
            cwd=tmp_path, capture_output=True, text=True, timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        tables[name] = [(r["state"], r[LR], r["metric"]) for r in rows(tmp_path / "results" / name)]
    assert tables["ray"] == tables["here"] and all(state == "COMPLETE" for state, _, _ in tables["ray"])
