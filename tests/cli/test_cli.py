"""arl-learn end to end: the results layout and TensorBoard tags, --resume, --force, reuse
errors, and malformed configs (one line per problem, exit code 2, no traceback)."""

from __future__ import annotations

import glob
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from tests.support.runs import ROOT, arl_learn, arl_learn_here, tiny_config, write_config

EXPECTED_TAGS = {
    "Environment/Cumulative Reward",
    "Environment/Episode Length",
    "Environment/Steps Per Second",
    "Policy/Entropy",
    "Policy/Learning Rate",
    "Policy/Extrinsic Value Estimate",
    "Losses/Policy Loss",
    "Losses/Value Loss",
}


def scalar_tags(folder: Path) -> set[str]:
    tags: set[str] = set()
    for event_file in glob.glob(str(folder / "events.out.tfevents.*")):
        acc = EventAccumulator(event_file)
        acc.Reload()
        tags |= set(acc.Tags()["scalars"])
    return tags


@pytest.fixture
def run_dir(tmp_path: Path) -> tuple[Path, Path]:
    config = tiny_config("builtin:Reach", max_steps=3000)
    config["env_settings"]["num_envs"] = 2
    return tmp_path, write_config(tmp_path / "reach.yaml", config)


def test_tiny_run_writes_results_layout_and_tags(run_dir: tuple[Path, Path]) -> None:
    tmp, cfg = run_dir
    proc = arl_learn([str(cfg), "--run-id", "tiny", "--seed", "3"], cwd=tmp, fresh=True)  # the command itself
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = tmp / "results" / "tiny"
    assert (out / "configuration.yaml").is_file()
    saved = yaml.safe_load((out / "configuration.yaml").read_text())
    assert saved["checkpoint_settings"]["run_id"] == "tiny" and saved["env_settings"]["num_envs"] == 2
    status = json.loads((out / "run_logs" / "training_status.json").read_text())
    assert status["Reach"]["final_checkpoint"]["steps"] >= 3000 and "metadata" in status
    timers = json.loads((out / "run_logs" / "timers.json").read_text())
    assert timers["name"] == "root" and "env_step" in timers["children"]
    assert any(k.startswith("Reach.Environment.CumulativeReward") for k in timers["gauges"])
    ckpts = sorted(p.name for p in (out / "Reach").glob("Reach-*.pt"))
    assert len(ckpts) == 2, ckpts  # keep_checkpoints: 2
    assert (out / "Reach" / "checkpoint.pt").is_file()
    assert not list(out.rglob(".tmp-*")), "temporary files left behind"
    assert EXPECTED_TAGS <= scalar_tags(out / "Reach")
    line = re.search(r"Reach\. Step: 1000\. Time Elapsed: [\d.]+ s\. Mean Reward: -?[\d.]+\. Std of Reward: [\d.]+\. Training\.",
                     proc.stdout)
    assert line, proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


def test_resume_continues_step_count(run_dir: tuple[Path, Path]) -> None:
    tmp, cfg = run_dir  # arl-learn's main() in this process; --resume through the command: test_kill_resume, test_faults
    assert arl_learn_here([str(cfg), "--run-id", "r"], cwd=tmp).returncode == 0
    first = json.loads((tmp / "results/r/run_logs/training_status.json").read_text())["Reach"]["final_checkpoint"]["steps"]
    config = yaml.safe_load(cfg.read_text())
    config["default_settings"]["max_steps"] = 5000
    write_config(cfg, config)
    proc = arl_learn_here([str(cfg), "--run-id", "r", "--resume"], cwd=tmp)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"at step {first}" in proc.stdout
    second = json.loads((tmp / "results/r/run_logs/training_status.json").read_text())["Reach"]["final_checkpoint"]["steps"]
    assert first < second and second >= 5000
    assert "Reach. Step: 1000." not in proc.stdout  # summaries continue after the saved step


def test_reuse_force_and_initialize_from(run_dir: tuple[Path, Path]) -> None:
    tmp, cfg = run_dir  # main() in this process; --force through the command: test_hostile_input
    assert arl_learn_here([str(cfg), "--run-id", "x"], cwd=tmp).returncode == 0
    before = (tmp / "results/x/Reach/checkpoint.pt").stat().st_mtime
    reuse = arl_learn_here([str(cfg), "--run-id", "x"], cwd=tmp)
    assert reuse.returncode == 2
    assert "previous data from this run ID was found" in reuse.stdout + reuse.stderr
    assert (tmp / "results/x/Reach/checkpoint.pt").stat().st_mtime == before  # nothing touched
    missing = arl_learn_here([str(cfg), "--run-id", "nope", "--resume"], cwd=tmp)
    assert missing.returncode == 2 and "was not found" in missing.stdout + missing.stderr
    init = arl_learn_here([str(cfg), "--run-id", "y", "--initialize-from", "x"], cwd=tmp)
    assert init.returncode == 0 and "Initialized Reach from" in init.stdout
    bad_force = arl_learn_here([str(cfg), "--run-id", "x", "--force", "--env", "builtin:Nope"], cwd=tmp)
    assert bad_force.returncode == 2 and (tmp / "results/x/Reach/checkpoint.pt").is_file()  # nothing deleted
    forced = arl_learn_here([str(cfg), "--run-id", "x", "--force"], cwd=tmp)
    assert forced.returncode == 0, forced.stdout + forced.stderr


def test_resume_with_a_different_network_is_a_one_line_error(run_dir: tuple[Path, Path]) -> None:
    tmp, cfg = run_dir
    assert arl_learn_here([str(cfg), "--run-id", "n"], cwd=tmp).returncode == 0
    config = yaml.safe_load(cfg.read_text())
    config["default_settings"]["network_settings"]["hidden_units"] = 48
    config["default_settings"]["max_steps"] = 6000
    write_config(cfg, config)
    proc = arl_learn_here([str(cfg), "--run-id", "n", "--resume"], cwd=tmp)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "cannot load this checkpoint" in output and "Traceback" not in output


def test_inference_acts_without_training(run_dir: tuple[Path, Path]) -> None:
    tmp, cfg = run_dir
    assert arl_learn_here([str(cfg), "--run-id", "inf"], cwd=tmp).returncode == 0
    before = (tmp / "results/inf/Reach/checkpoint.pt").read_bytes()
    proc = arl_learn([str(cfg), "--run-id", "inf", "--resume", "--inference"], cwd=tmp)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp / "results/inf/Reach/checkpoint.pt").read_bytes() == before
    acted = int(re.search(r"Training finished after (\d+) environment steps", proc.stdout).group(1))
    assert acted * 4 >= 3000  # max_steps agent steps acted (4 agents per env step), from the saved step on
    assert "Not Training." in proc.stdout


@pytest.mark.parametrize(
    "text,needles,command",
    [
        ("behaviors:\n  Reach:\n    hyperparameters:\n      learnin_rate: 0.1\n", ["learnin_rate", "did you mean 'learning_rate'"], False),
        ("behaviors:\n  Reach:\n    max_steps: many\n    time_horizon: -1\n", ["max_steps", "'many'", "time_horizon"], True),
        ("behaviors: [1, 2\n", ["YAML syntax error", "line"], False),
        ("env_settings:\n  num_envs: 2\n  env_path: null\n", ["num_envs"], False),
    ],
)
def test_malformed_configs_give_one_line_errors(tmp_path: Path, text: str, needles: list[str], command: bool) -> None:
    """One case through the command itself, the others through its main() in this process."""
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(text)
    proc = (arl_learn if command else arl_learn_here)([str(cfg), "--run-id", "bad"], cwd=tmp_path)
    assert proc.returncode == 2
    output = proc.stdout + proc.stderr
    assert "Traceback" not in output
    for needle in needles:
        assert needle in output
    assert all(line.startswith("arl-learn: error: ") and str(cfg) in line for line in proc.stderr.strip().splitlines())
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize(
    "args,needle,command",
    [
        (["--env", "builtin:Nope"], "no built-in environment 'Nope'", False),
        (["--env", "gymnasium:NotAnEnv-v0"], "gymnasium has no environment id", False),
        (["--env", "no_such_module:make"], "cannot import module 'no_such_module'", False),
        (["--num-envs", "zero"], "invalid int value", True),
        (["--torch-device", "tpu"], "torch_settings.device", False),
    ],
)
def test_bad_flags_give_one_line_errors(run_dir: tuple[Path, Path], args: list[str], needle: str, command: bool) -> None:
    """One case through the command itself, the others through its main() in this process."""
    tmp, cfg = run_dir
    proc = (arl_learn if command else arl_learn_here)([str(cfg), "--run-id", "bad", *args], cwd=tmp)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, output
    assert needle in output and "Traceback" not in output


def test_help_shows_examples() -> None:
    proc = arl_learn(["--help"], cwd=ROOT, timeout=60, fresh=True)
    assert proc.returncode == 0 and "examples:" in proc.stdout and "--initialize-from" in proc.stdout


def test_resume_with_a_corrupt_status_file_is_a_one_line_error(run_dir: tuple[Path, Path]) -> None:
    tmp, cfg = run_dir
    assert arl_learn_here([str(cfg), "--run-id", "c"], cwd=tmp).returncode == 0
    (tmp / "results/c/run_logs/training_status.json").write_text("{broken")
    proc = arl_learn_here([str(cfg), "--run-id", "c", "--resume"], cwd=tmp)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "cannot read the run status" in output and "Traceback" not in output


def _help_blocks(text: str) -> dict[str, str]:
    """argparse --help: each option's help, its wrapped lines joined."""
    blocks: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        match = re.match(r"^  (--?[\w-]+)", line)
        if match:
            current = match.group(1)
            blocks[current] = line
        elif current is not None and line.startswith("    "):
            blocks[current] += " " + line.strip()
        else:
            current = None
    return {option: " ".join(block.split()) for option, block in blocks.items()}


def test_every_setting_flag_is_in_help_with_its_default(capsys: pytest.CaptureFixture[str]) -> None:
    """Flags are declared on the settings they override; --help shows each with the setting's default."""
    from ml_arl.cli import learn as cli
    from ml_arl.settings import RunOptions, cli_flags

    with pytest.raises(SystemExit) as done:
        cli.main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "engine configuration (Unity builds):" in out and "torch configuration:" in out
    blocks = _help_blocks(out)
    flags = cli_flags(RunOptions)
    assert {f.option for f in flags} >= {"--env", "--env-args", "--num-envs", "--seed", "--run-id", "--resume", "--force",
                                         "--initialize-from", "--inference", "--results-dir", "--torch-device", "--debug",
                                         "--width", "--time-scale", "--no-graphics", "--listen-address"}
    for flag in flags:
        model = RunOptions if flag.section == "" else RunOptions.model_fields[flag.section].annotation
        default = model.model_fields[flag.name].default
        assert flag.option in blocks, flag.option
        shown = blocks[flag.option]
        if flag.switch or default is None:
            assert "(default: " not in shown or flag.option == "--torch-device", shown
        else:
            text = format(default, "g") if isinstance(default, float) else str(default)
            assert shown.endswith(f"(default: {text})"), shown
    assert blocks["--time-scale"].endswith("(default: 20)") and blocks["--num-envs"].endswith("(default: 1)")


def test_every_setting_flag_sets_its_setting() -> None:
    """Each flag typed on the command line lands in its section, with the field's type."""
    from ml_arl.cli.learn import parse_options
    from ml_arl.settings import RunOptions, cli_flags

    values = {int: ("3", 3), float: ("3.5", 3.5), str: ("cpu", "cpu")}
    own_values = {"wandb_mode": ("offline", "offline"),  # str settings with a fixed set or form of values
                  "url": ("postgresql://arl@db/runs", "postgresql://arl@db/runs")}
    for flag in cli_flags(RunOptions):
        if flag.name == "env_path":
            continue
        if flag.switch:
            argv, expected = [flag.option], True
        elif flag.remainder:
            argv, expected = [flag.option, "a=1", "--not-ours"], ["a=1", "--not-ours"]
        else:
            assert flag.type is not None
            typed, expected = own_values.get(flag.name) or values[flag.type]
            argv = [flag.option, typed]
        if flag.name == "deterministic":
            argv += ["--seed", "1"]  # a deterministic run needs a fixed seed
        options = parse_options(["--env", "builtin:Reach", *argv])
        target = options if flag.section == "" else getattr(options, flag.section)
        assert getattr(target, flag.name) == expected, flag.option
        assert options.env_settings.env_path == "builtin:Reach"


@pytest.mark.parametrize("config", ["config/ppo/Reach.yaml", "bench/peers/palaestrai/dummy_two_agents.yml"])
def test_check_of_a_python_environment_does_not_import_torch(tmp_path: Path, config: str) -> None:
    """--check is the quick look: a config on a Python environment, or a palaestrAI run file, is
    checked without torch (issue 49: at most 0.3x the torch import; a run file's brains are
    ml_arl's BrainTrainer, whose class is checked once the workers are launched); a named device
    still is checked with it."""
    code = ("import sys; from ml_arl.cli.learn import main; "
            f"code = main([{config!r}, '--check', '--results-dir', {str(tmp_path)!r}]); "
            "print(code, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "0 False", out.stdout + out.stderr
