"""Adversarial Resilience Learning: objectives, several learners, phases (carry-over, test
phases, load), self-play with ELO, user trainers, the results store and arl-report."""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from ml_arl.acting.agent_processor import AgentProcessor
from ml_arl.acting.muscle import Muscle, masks_allowed
from ml_arl.core.objectives import ObjectiveBatch, build_objective
from ml_arl.envs.games.grid_defense import GridDefense
from ml_arl.results.sqlite_store import STORE_FILENAME
from ml_arl.settings import build_run_options
from ml_arl.trainers.sac.trainer import SACTrainer
from ml_arl.training.controller import TrainerController
from tests.support.runs import ROOT, arl_learn, arl_learn_here, scalars, write_config
from tests.support.zygote import popen_arl_learn

GRID_PPO: dict[str, Any] = {
    "trainer_type": "ppo",
    "hyperparameters": {"batch_size": 256, "buffer_size": 2048, "learning_rate": 3.0e-3, "beta": 1.0e-3, "num_epoch": 4},
    "network_settings": {"hidden_units": 64, "num_layers": 2},
    "reward_signals": {"extrinsic": {"gamma": 0.9}},
    "max_steps": 100000,
    "time_horizon": 24,
    "summary_freq": 5000,
    "checkpoint_interval": 20000,
    "keep_checkpoints": 2,
}


def grid_config(results: Path, run_id: str, phases: Any = None, **env: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "env_settings": {"env_path": "builtin:GridDefense", "num_envs": 2, "num_areas": 8, "seed": 3, **env},
        "default_settings": GRID_PPO,
        "behaviors": {"Defender": {"role": "defender"}, "Attacker": {"role": "attacker"}},
        "checkpoint_settings": {"results_dir": str(results), "run_id": run_id},
    }
    if phases is not None:
        config["phases"] = phases
    return config


def run(config: dict[str, Any]) -> TrainerController:
    controller = TrainerController(build_run_options(config, {}, "test"))
    controller.start_learning()
    return controller


def episodes(run_dir: Path, phase: str, behavior: str) -> tuple[np.ndarray, np.ndarray]:
    """(env reward, objective) of every episode of a phase and behavior, in order, from the store."""
    import sqlite3

    with sqlite3.connect(run_dir / STORE_FILENAME) as db:
        rows = db.execute(
            "SELECT env_reward, objective FROM episodes WHERE phase = ? AND behavior = ? ORDER BY id", (phase, behavior)
        ).fetchall()
    arr = np.asarray(rows, np.float64).reshape(-1, 2)
    return arr[:, 0], arr[:, 1]


# ---------------------------------------------------------------------------------- objectives


def _batch(reward: list[float], group: list[float], terminated: list[bool]) -> ObjectiveBatch:
    n = len(reward)
    return ObjectiveBatch(
        [np.zeros((n, 2), np.float32)], np.zeros((n, 1), np.float32), np.zeros((n, 0), np.int32),
        np.asarray(reward, np.float32), np.asarray(group, np.float32), np.asarray(terminated, bool),
        np.zeros(n, bool), np.arange(n),
    )


def test_builtin_objectives_against_hand_values() -> None:
    batch = _batch([1.0, -0.5, 0.0], [0.0, 2.0, -1.0], [False, True, False])
    assert build_objective("reward")(batch).tolist() == [1.0, -0.5, 0.0]
    assert build_objective("negated_reward")(batch).tolist() == [-1.0, 0.5, -0.0]
    scaled = build_objective("scaled_sum", {"scale": 2.0, "reward_weight": 1.0, "group_reward_weight": 0.5, "offset": 1.0})
    # 2 * (r + 0.5 g) + 1
    np.testing.assert_allclose(scaled(batch), [3.0, 2.0, 0.0])


def test_objective_by_import_path_and_role_shorthand() -> None:
    objective = build_objective("tests.support.plugins:ClippedReward", {"low": -0.2, "high": 0.5, "terminal_bonus": 10.0})
    np.testing.assert_allclose(objective(_batch([1.0, -0.5, 0.3], [0, 0, 0], [False, True, False])), [0.5, 9.8, 0.3])
    options = build_run_options(
        {"behaviors": {"A": {"role": "attacker"}, "D": {"role": "defender"},
                       "U": {"objective": {"name": "tests.support.plugins:ClippedReward", "params": {"low": 0}}}}}, {}, "cfg",
    )
    assert options.behaviors["A"].objective_spec() == ("negated_reward", {})
    assert options.behaviors["D"].objective_spec() == ("reward", {})
    assert options.behaviors["U"].objective_spec() == ("tests.support.plugins:ClippedReward", {"low": 0})


def test_attacker_trajectories_carry_the_negated_reward() -> None:
    env = GridDefense(seed=5, num_areas=3, steps_per_day=6)
    env.reset()
    spec = env.behavior_specs["Attacker"]
    processor = AgentProcessor("Attacker", spec, time_horizon=4, worker_id=0, objective=build_objective("negated_reward"))
    muscles = {b: Muscle(_random_weights(env.behavior_specs[b]), seed=i) for i, b in enumerate(("Defender", "Attacker"))}
    seen_rewards = []
    for _ in range(12):
        for behavior, muscle in muscles.items():
            decision, terminal = env.get_steps(behavior)
            info = muscle.act(decision.obs, masks_allowed(decision.action_mask, len(decision), muscle.branches))
            env.set_actions(behavior, info.env_action)
            if behavior == "Attacker":
                processor.add_experiences(decision, terminal, info)
                seen_rewards += decision.reward.tolist() + terminal.reward.tolist()
        env.step()
    trajectories, finished = processor.take()
    assert trajectories and finished
    for traj in trajectories:
        assert traj.env_rewards is not None
        np.testing.assert_allclose(traj.rewards, -traj.env_rewards)
        assert np.all(traj.env_rewards > -5) and np.any(traj.env_rewards != 0)
    for ep in finished:
        assert ep.objective == pytest.approx(-ep.reward, abs=1e-4)


def _random_weights(spec: Any) -> dict[str, np.ndarray]:
    from ml_arl.networks.actor_critic import ActorCritic
    from ml_arl.settings import NetworkSettings

    return ActorCritic(spec, NetworkSettings(hidden_units=16, num_layers=1)).muscle_weights()


# ---------------------------------------------------------------------------------- GridDefense in phases

PHASES = [
    {"name": "defend", "mode": "train", "learn": ["Defender"], "max_steps": 40000},
    {"name": "attack", "mode": "train", "learn": ["Attacker"], "max_steps": 40000},
    {"name": "test", "mode": "test", "episodes": 64, "deterministic": True},
]
DEFENDER_THRESHOLD = 19.3  # mean objective (= reward) of the last 200 defend episodes; the untrained defender scores about 17.9


@pytest.fixture(scope="module")
def grid_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, TrainerController, dict[str, list[int]]]:
    results = tmp_path_factory.mktemp("grid")
    controller = TrainerController(build_run_options(grid_config(results, "grid", PHASES), {}, "test"))
    worker_pids: dict[str, list[int]] = {}
    original = controller._run_phase

    def spy(index: int, phase: Any, specs: Any) -> None:
        worker_pids[phase.name] = [w.process.pid for w in controller.env_manager.workers]  # type: ignore[attr-defined]
        original(index, phase, specs)

    controller._run_phase = spy  # type: ignore[method-assign]
    controller.start_learning()
    return results / "grid", controller, worker_pids


@pytest.mark.slow
def test_defender_learns_against_a_random_attacker(grid_run: tuple[Path, TrainerController, Any]) -> None:
    run_dir, _, _ = grid_run
    env_reward, objective = episodes(run_dir, "defend", "Defender")
    assert len(objective) >= 1000
    np.testing.assert_allclose(objective, env_reward, atol=1e-4)  # role: defender = the environment reward
    first, last = objective[:200].mean(), objective[-200:].mean()
    assert last >= DEFENDER_THRESHOLD, (first, last)
    assert last > first + 1.0, (first, last)


def test_attacker_trained_against_the_frozen_defender_lowers_its_reward(grid_run: tuple[Path, TrainerController, Any]) -> None:
    run_dir, _, _ = grid_run
    defended, _ = episodes(run_dir, "defend", "Defender")
    attacked, _ = episodes(run_dir, "attack", "Defender")
    attacker_env, attacker_objective = episodes(run_dir, "attack", "Attacker")
    np.testing.assert_allclose(attacker_objective, -attacker_env, atol=1e-4)  # role: attacker
    assert attacked[-200:].mean() <= defended[-200:].mean() - 0.7, (defended[-200:].mean(), attacked[-200:].mean())
    assert attacker_objective[-200:].mean() > attacker_objective[:200].mean() + 0.7


def test_phases_carry_weights_and_test_phases_change_none(grid_run: tuple[Path, TrainerController, Any]) -> None:
    run_dir, controller, worker_pids = grid_run
    # every phase ran with the same worker processes
    assert worker_pids["defend"] == worker_pids["attack"] == worker_pids["test"], worker_pids
    for brain, phase in (("Defender", "defend"), ("Attacker", "attack")):
        saved = torch.load(run_dir / phase / brain / "checkpoint.pt", weights_only=True)["Policy"]
        now = controller.trainers[brain].network.state_dict()  # type: ignore[attr-defined]
        for key, value in saved.items():  # later phases (frozen / test) left the weights as they were
            assert torch.equal(value, now[key]), (brain, key)
        # what the workers acted with in the test phase gives the saved network's actions
        policy = controller.env_manager.policies[brain]
        assert policy.deterministic and not policy.collect
        obs = np.random.default_rng(0).normal(size=(32, controller.trainers[brain].spec.observation_specs[0].shape[0]))
        acted = Muscle(policy.weights, deterministic=True).act([obs.astype(np.float32)], None).continuous
        net = controller.trainers[brain].network  # type: ignore[attr-defined]
        with torch.no_grad():
            mean = net.mu(net.body(net.encoder([torch.as_tensor(obs, dtype=torch.float32)])))
        np.testing.assert_allclose(acted, mean.numpy(), atol=1e-5)
    # each phase keeps its checkpoints, TensorBoard events and status apart
    assert not (run_dir / "defend" / "Attacker" / "checkpoint.pt").exists()  # frozen: nothing saved
    assert (run_dir / "defend" / "Defender.onnx").is_file() and (run_dir / "attack" / "Attacker.onnx").is_file()
    assert glob.glob(str(run_dir / "test" / "Defender" / "events.out.tfevents.*"))
    test_env, _ = episodes(run_dir, "test", "Defender")
    assert len(test_env) >= 64


def test_store_rows_match_tensorboard_and_report_writes_png(
    grid_run: tuple[Path, TrainerController, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir, _, _ = grid_run
    for phase in ("defend", "attack", "test"):
        for brain in ("Defender", "Attacker"):
            counted = sum(v for _, v in scalars(run_dir / phase / brain, "Environment/Episode Count"))
            rows = len(episodes(run_dir, phase, brain)[0])
            assert rows == counted and rows > 0, (phase, brain, rows, counted)
    assert {"Objective/Cumulative Objective", "Environment/Cumulative Reward"} <= {
        tag for tag in EventAccumulator(glob.glob(str(run_dir / "attack" / "Attacker" / "events.out.tfevents.*"))[0]).Reload().Tags()["scalars"]
    }
    from ml_arl.cli.report import (
        main as report_main,  # in this process; `python -m ml_arl.cli.report`: tests/results/test_store.py
    )

    capsys.readouterr()
    code = report_main([str(run_dir)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "defend" in out and "Attacker" in out
    assert (run_dir / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run "grid" for the phases' ``load``: the layout of the grid run (phases defend and
    attack, each saving the brain it trains, run_logs/phases.json), from a few hundred steps with
    a small buffer (some updates, so its weights are not the ones a fresh run starts with), in
    this process, and with another seed than the runs that load from it."""
    results = tmp_path_factory.mktemp("small")
    phases = [{"name": "defend", "mode": "train", "learn": ["Defender"], "max_steps": 600},
              {"name": "attack", "mode": "train", "learn": ["Attacker"], "max_steps": 600}]
    config = grid_config(results, "grid", phases, num_envs=1, manager="inprocess", seed=11)
    config["default_settings"] = dict(GRID_PPO, hyperparameters=dict(GRID_PPO["hyperparameters"], batch_size=64, buffer_size=256))
    run(config)
    run_dir = results / "grid"
    assert json.loads((run_dir / "run_logs" / "phases.json").read_text())["phases"].keys() == {"defend", "attack"}
    for phase, brain in (("defend", "Defender"), ("attack", "Attacker")):
        assert torch.load(run_dir / phase / brain / "checkpoint.pt", weights_only=True)["global_step"] >= 600
    return run_dir


def test_load_from_another_run(small_run: Path) -> None:
    run_dir = small_run
    results = run_dir.parent
    phases = [{"name": "eval", "mode": "test", "episodes": 16,
               "load": {"Defender": {"run": "grid", "phase": "defend"}, "Attacker": {"run": "grid"}}}]
    controller = run(grid_config(results, "reuse", phases))
    for brain, phase in (("Defender", "defend"), ("Attacker", "attack")):  # no phase: the newest that saved it
        saved = torch.load(run_dir / phase / brain / "checkpoint.pt", weights_only=True)["Policy"]
        now = controller.trainers[brain].network.state_dict()  # type: ignore[attr-defined]
        assert all(torch.equal(v, now[k]) for k, v in saved.items()), brain


@pytest.mark.parametrize(
    "load,needle,command",
    [
        ({"run": "no-such-run", "phase": "defend"}, "no run 'no-such-run'", False),
        ({"run": "grid", "phase": "no-such-phase"}, "has no phase 'no-such-phase'", False),
        ({"run": "grid", "phase": "defend", "behavior": "Nobody"}, "saved no behavior 'Nobody'", True),
    ],
)
def test_broken_load_is_a_one_line_error_before_anything_starts(
    small_run: Path, load: dict[str, str], needle: str, command: bool
) -> None:
    """One case through the command itself, the others through its main() in this process."""
    results = small_run.parent
    config = grid_config(results, "broken", [{"name": "eval", "mode": "test", "episodes": 4, "load": {"Defender": load}}])
    cfg = write_config(results / "broken.yaml", config)
    proc = (arl_learn if command else arl_learn_here)([str(cfg)], cwd=results)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    assert len(errors) == 1 and needle in errors[0] and "phases.eval.load.Defender" in errors[0], errors
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not (results / "broken").exists()


# ---------------------------------------------------------------------------------- self-play


def tag_config(results: Path, run_id: str, max_steps: int) -> dict[str, Any]:
    config = yaml.safe_load((ROOT / "config" / "ppo" / "Tag-selfplay.yaml").read_text())
    config["behaviors"]["Tag"]["max_steps"] = max_steps
    config["env_settings"]["seed"] = 2
    config["checkpoint_settings"] = {"results_dir": str(results), "run_id": run_id}
    return config


@pytest.mark.slow
def test_selfplay_elo_rises_and_survives_resume(tmp_path: Path) -> None:
    """arl-learn's main() in this process (self-play through the command: tests/envs/test_faults.py)."""
    cfg = write_config(tmp_path / "tag.yaml", tag_config(tmp_path, "tag", 35000))
    proc = arl_learn_here([str(cfg)], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "team 1 learns now" in proc.stdout
    elo = [v for _, v in scalars(tmp_path / "tag" / "Tag", "Self-play/ELO")]
    assert elo and elo[-1] - 1200.0 >= 50, elo
    status = json.loads((tmp_path / "tag" / "run_logs" / "training_status.json").read_text())
    saved_elo = status["Tag"]["elo"]
    assert saved_elo - 1200.0 >= 50
    before = len(glob.glob(str(tmp_path / "tag" / "Tag" / "events.out.tfevents.*")))

    cfg = write_config(tmp_path / "tag.yaml", tag_config(tmp_path, "tag", 45000))
    proc = arl_learn_here([str(cfg), "--resume"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"continues at ELO {saved_elo:.1f}" in proc.stdout
    newest = sorted(glob.glob(str(tmp_path / "tag" / "Tag" / "events.out.tfevents.*")), key=os.path.getmtime)
    assert len(newest) == before + 1
    acc = EventAccumulator(newest[-1])
    acc.Reload()
    resumed = [e.value for e in acc.Scalars("Self-play/ELO")]
    assert abs(resumed[0] - saved_elo) < 40 and resumed[0] - 1200.0 >= 40, (saved_elo, resumed[:3])


def test_asymmetric_selfplay_rotates_attacker_and_defender(tmp_path: Path) -> None:
    config = grid_config(tmp_path, "asym", num_envs=1)
    config["default_settings"] = dict(GRID_PPO, max_steps=6000,
                                      self_play={"save_steps": 1000, "team_change": 2000, "swap_steps": 500})
    config["env_settings"]["manager"] = "inprocess"
    controller = run(config)
    ghosts = controller.selfplay.ghosts
    assert set(ghosts) == {"Defender", "Attacker"}
    assert sorted(controller.selfplay.controller.teams) == ["Attacker", "Defender"]
    # both brains learned in turn, each against snapshots of the other; a GridDefense day ends by
    # time (interrupted), so it is not a game with a winner and the ELO stays where it was
    assert all(len(g.snapshots) >= 3 and g.ghost_step > 0 for g in ghosts.values()), {b: len(g.snapshots) for b, g in ghosts.items()}
    assert all(t.step >= 6000 for t in controller.trainers.values()), {b: t.step for b, t in controller.trainers.items()}
    assert all(g.games == 0 and g.elo == 1200.0 for g in ghosts.values())


def test_asymmetric_elo_moves_learner_and_opponent_snapshot() -> None:
    from ml_arl.core.actor_weights import PolicySnapshot
    from ml_arl.results.summary_writers import StatsReporter
    from ml_arl.settings import SelfPlaySettings
    from ml_arl.training.opponents import GhostController, OpponentPool, expected_score

    controller = GhostController()
    settings = SelfPlaySettings(elo_k_factor=16, play_against_latest_model_ratio=0.0)
    defender = OpponentPool("Defender", settings, controller, StatsReporter("Defender", []), seed=0)
    attacker = OpponentPool("Attacker", settings, controller, StatsReporter("Attacker", []), seed=1)
    defender.add_behavior("Defender")
    attacker.add_behavior("Attacker")
    for ghost in (defender, attacker):
        ghost.start(PolicySnapshot(0, {"w": np.zeros(1)}), step=0)
    assert controller.learning_team == "Defender" and defender.is_learning("Defender") and not attacker.is_learning("Attacker")
    assert attacker.current_opponent == 0  # always a snapshot (ratio 0)
    attacker.snapshots[0].elo = 1300.0
    defender.record_game(final=0.7)  # the defender won against a stronger snapshot
    gain = 16 * (1.0 - expected_score(1200.0, 1300.0))
    assert defender.elo == pytest.approx(1200.0 + gain) and attacker.snapshots[0].elo == pytest.approx(1300.0 - gain)
    defender.record_game(final=0.0)  # a draw against the still stronger snapshot gains a little
    assert 1200.0 + gain < defender.elo < 1200.0 + 2 * gain
    defender.after_trainer_step(step=settings.team_change or 0)
    assert controller.learning_team == "Attacker" and controller.reset_pending


# ---------------------------------------------------------------------------------- user trainers


def test_user_trainer_never_learns_and_acts_randomly(tmp_path: Path) -> None:
    config = grid_config(tmp_path, "plugin", num_envs=1)
    config["env_settings"]["manager"] = "inprocess"
    config["default_settings"] = dict(GRID_PPO, max_steps=4000)
    config["behaviors"]["Attacker"] = {"trainer_type": "tests.support.plugins:RandomTrainer", "role": "attacker",
                                       "hyperparameters": {"note": "random"}, "max_steps": 4000}
    controller = run(config)
    trainer = controller.trainers["Attacker"]
    assert type(trainer).__name__ == "RandomTrainer"
    assert trainer.trajectories_seen > 0 and trainer.updates == 0  # type: ignore[attr-defined]
    actions = np.concatenate(trainer.actions_seen)  # type: ignore[attr-defined]
    assert actions.shape[1] == 3 and np.all(np.abs(actions) <= 1.0)
    assert abs(actions.std() - 1 / np.sqrt(3)) < 0.03 and abs(actions.mean()) < 0.03  # uniform on [-1, 1]
    assert (tmp_path / "plugin" / "Attacker" / "checkpoint.pt").is_file()


def test_user_trainer_that_is_not_a_trainer_is_a_config_error(tmp_path: Path) -> None:
    config = grid_config(tmp_path, "notatrainer", num_envs=1)
    config["behaviors"]["Attacker"] = {"trainer_type": "tests.support.plugins:RandomMuscle"}
    proc = arl_learn_here([str(write_config(tmp_path / "c.yaml", config))], cwd=tmp_path)
    assert proc.returncode == 2 and "not a subclass of ml_arl.trainers.trainer.Trainer" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


# ---------------------------------------------------------------------------------- resume in a phase


def test_resume_continues_in_the_phase_where_the_run_stopped(tmp_path: Path) -> None:
    phases = [{"name": "warmup", "learn": ["Defender"], "max_steps": 1000},
              {"name": "long", "learn": ["Defender"], "max_steps": 10_000_000}]
    config = grid_config(tmp_path, "stop", phases, num_envs=1)
    config["default_settings"] = dict(GRID_PPO, summary_freq=1000)  # a summary line to stop at, a phase in
    cfg = write_config(tmp_path / "grid.yaml", config)
    proc = popen_arl_learn([cfg], tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + 120
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if "Defender. Step: 3000" in line or time.monotonic() > deadline:
            break
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, "".join(lines) + out
    log = json.loads((tmp_path / "stop" / "run_logs" / "phases.json").read_text())
    assert log["phases"]["warmup"]["state"] == "done" and log["phases"]["long"]["state"] == "running"
    stopped = torch.load(tmp_path / "stop" / "long" / "Defender" / "checkpoint.pt", weights_only=True)["global_step"]

    phases[1]["max_steps"] = 4000  # finish the long phase sooner
    cfg = write_config(tmp_path / "grid.yaml", config)
    resumed = arl_learn_here([str(cfg), "--resume"], cwd=tmp_path)  # stopped by Ctrl-C in the command, resumed in main()
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "Phase warmup is done already" in resumed.stdout
    assert f"Resuming Defender from {os.path.join('results', 'stop', 'long', 'Defender', 'checkpoint.pt')}" in resumed.stdout or \
        "long/Defender/checkpoint.pt" in resumed.stdout
    final = torch.load(tmp_path / "stop" / "long" / "Defender" / "checkpoint.pt", weights_only=True)["global_step"]
    origin = json.loads((tmp_path / "stop" / "run_logs" / "phases.json").read_text())["phases"]["long"]["origin"]["Defender"]
    assert final >= origin + 4000 > stopped >= origin + 1000 and origin >= 1000

    # every phase is done: --resume again runs none, writes no checkpoint and logs only these phases
    checkpoints = {p: p.read_bytes() for p in (tmp_path / "stop").rglob("*.pt")}
    again = arl_learn_here([str(cfg), "--resume"], cwd=tmp_path)
    assert again.returncode == 0 and "Traceback" not in again.stdout + again.stderr, again.stdout + again.stderr
    assert "Phase long is done already" in again.stdout
    log = json.loads((tmp_path / "stop" / "run_logs" / "phases.json").read_text())["phases"]
    assert {name: p["state"] for name, p in log.items()} == {"warmup": "done", "long": "done"}
    assert {p: p.read_bytes() for p in (tmp_path / "stop").rglob("*.pt")} == checkpoints


def test_per_step_records_only_when_asked(tmp_path: Path) -> None:
    import sqlite3

    config = grid_config(tmp_path, "steps", num_envs=1)
    config["env_settings"]["manager"] = "inprocess"
    config["default_settings"] = dict(GRID_PPO, max_steps=2000)
    config["results_store"] = {"record_steps": True, "batch_size": 64}
    config["phases"] = [{"name": "p", "learn": ["Defender"], "max_steps": 2000}]
    run(config)
    with sqlite3.connect(tmp_path / "steps" / STORE_FILENAME) as db:
        rows = db.execute("SELECT behavior, env_reward, objective, step FROM steps WHERE phase = 'p'").fetchall()
        episode_steps = db.execute("SELECT behavior, SUM(length) FROM episodes GROUP BY behavior").fetchall()
    by_behavior = {b: [r for r in rows if r[0] == b] for b in ("Defender", "Attacker")}
    assert all(by_behavior.values())  # the frozen attacker's steps are recorded too
    assert all(abs(o + e) < 1e-5 for _, e, o, _ in by_behavior["Attacker"])
    assert max(r[3] for r in rows) == 23  # step index within a 24-step day
    for behavior, total in episode_steps:
        assert len(by_behavior[behavior]) >= total  # every step of every finished episode
    config["results_store"] = {"record_steps": False}
    config["checkpoint_settings"]["run_id"] = "nosteps"
    run(config)
    with sqlite3.connect(tmp_path / "nosteps" / STORE_FILENAME) as db:
        assert db.execute("SELECT COUNT(*) FROM steps").fetchone()[0] == 0
        assert db.execute("SELECT COUNT(*) FROM episodes").fetchone()[0] > 0


def test_phase_environment_parameters_reach_the_environment(tmp_path: Path) -> None:
    phases = [{"name": "heavy", "mode": "test", "episodes": 8, "environment_parameters": {"load_scale": 1.15}},
              {"name": "light", "mode": "test", "episodes": 8, "environment_parameters": {"load_scale": 0.9}}]
    config = grid_config(tmp_path, "params", phases, num_envs=1, manager="inprocess")
    config["environment_parameters"] = {"pv_scale": 0.7}
    controller = TrainerController(build_run_options(config, {}, "test"))
    seen: list[dict[str, float]] = []
    original = controller._end_phase

    def spy() -> None:
        seen.append(dict(controller.env_manager.runners[0].env.params))  # type: ignore[attr-defined]
        original()

    controller._end_phase = spy  # type: ignore[method-assign]
    controller.start_learning()
    assert [(p["load_scale"], p["pv_scale"]) for p in seen] == [(1.15, 0.7), (0.9, 0.7)]


# ---------------------------------------------------------------------------------- SAC in phases and self-play

GRID_SAC: dict[str, Any] = {
    "trainer_type": "sac",
    "hyperparameters": {"batch_size": 32, "buffer_size": 2000, "buffer_init_steps": 100, "steps_per_update": 4,
                        "save_replay_buffer": True},
    "network_settings": {"hidden_units": 16, "num_layers": 1},
    "reward_signals": {"extrinsic": {"gamma": 0.9}},
    "max_steps": 100000,
    "time_horizon": 24,
    "summary_freq": 200,
    "checkpoint_interval": 300,
    "keep_checkpoints": 2,
}
SAC_PHASES = [
    {"name": "defend", "learn": ["Defender"], "max_steps": 400},
    {"name": "both", "learn": ["Defender", "Attacker"], "max_steps": 600},
    {"name": "test", "mode": "test", "episodes": 4, "deterministic": True},
]


def replays(controller: TrainerController) -> dict[str, np.ndarray]:
    """The rewards each SAC brain's replay buffer holds, oldest first."""
    out = {}
    for brain, trainer in controller.trainers.items():
        assert isinstance(trainer, SACTrainer)
        out[brain] = trainer.replay.rewards[: len(trainer.replay)].cpu().numpy().copy()
    return out


def test_sac_phases_with_roles_clear_the_replay_buffer_and_resume_keeps_it(tmp_path: Path) -> None:
    """SAC through phases as PPO (test_phases_carry_weights_and_test_phases_change_none): checkpoints
    and phases.json per phase, the attacker learning its negated reward; a phase switch empties the
    replay buffer (on_new_phase), Ctrl-C in the middle of a phase and --resume keep it."""
    config = grid_config(tmp_path, "sac", SAC_PHASES, num_envs=1, num_areas=2, manager="inprocess")
    config["default_settings"] = GRID_SAC
    controller = TrainerController(build_run_options(config, {}, "test"))
    at_end: dict[str, dict[str, np.ndarray]] = {}
    end_phase, advance = controller._end_phase, controller.advance

    def spy_end() -> None:
        at_end[controller.schedule.name] = replays(controller)
        end_phase()

    def ctrl_c_in_phase_both() -> None:
        advance()
        attacker = controller.trainers.get("Attacker")
        if controller.schedule.name == "both" and attacker is not None and attacker.step >= 300:
            raise KeyboardInterrupt  # as Ctrl-C in the main thread

    controller._end_phase = spy_end  # type: ignore[method-assign]
    controller.advance = ctrl_c_in_phase_both  # type: ignore[method-assign]
    controller.start_learning()
    run_dir = tmp_path / "sac"
    log = json.loads((run_dir / "run_logs" / "phases.json").read_text())["phases"]
    assert log["defend"]["state"] == "done" and log["both"]["state"] == "running"
    origin = log["both"]["origin"]["Defender"]
    defender, attacker = controller.trainers["Defender"], controller.trainers["Attacker"]
    assert len(at_end["defend"]["Defender"]) == origin >= 400  # every experience of the phase (buffer_size 2000)
    stopped = replays(controller)
    assert len(stopped["Defender"]) == defender.step - origin  # emptied when "both" began: only this phase's experience
    assert len(stopped["Attacker"]) == attacker.step >= 300
    assert stopped["Defender"].mean() > 0 > stopped["Attacker"].mean()  # role attacker: the negated reward
    for phase, brain in (("defend", "Defender"), ("both", "Defender"), ("both", "Attacker")):
        state = torch.load(run_dir / phase / brain / "checkpoint.pt", weights_only=True)
        assert state["global_step"] > 0 and "Q1" in state, (phase, brain)
        assert (run_dir / phase / brain / "last_replay_buffer.npz").is_file()
    assert not (run_dir / "defend" / "Attacker" / "checkpoint.pt").exists()  # frozen: nothing saved

    # --resume: the phase goes on with the buffers saved at Ctrl-C, then the test phase
    config["checkpoint_settings"]["resume"] = True
    resumed = TrainerController(build_run_options(config, {}, "test"))
    first: list[dict[str, np.ndarray]] = []
    advance_again = resumed.advance

    def spy_first() -> None:
        if not first:
            first.append(replays(resumed))
        advance_again()

    resumed.advance = spy_first  # type: ignore[method-assign]
    resumed.start_learning()
    for brain in ("Defender", "Attacker"):
        np.testing.assert_array_equal(first[0][brain], stopped[brain])
    log = json.loads((run_dir / "run_logs" / "phases.json").read_text())["phases"]
    assert {name: p["state"] for name, p in log.items()} == {"defend": "done", "both": "done", "test": "done"}
    assert resumed.trainers["Defender"].step >= origin + 600 and resumed.trainers["Attacker"].step >= 600
    with np.load(run_dir / "both" / "Attacker" / "last_replay_buffer.npz") as data:
        assert len(data["rewards"]) == torch.load(run_dir / "both" / "Attacker" / "checkpoint.pt", weights_only=True)["global_step"]
    test_env, _ = episodes(run_dir, "test", "Defender")
    assert len(test_env) >= 4
    assert all(len(r) == 0 for r in replays(resumed).values())  # the test phase began with empty buffers


def test_sac_selfplay_on_tag_writes_elo(tmp_path: Path) -> None:
    config = tag_config(tmp_path, "sactag", 2000)
    config["env_settings"].update(num_envs=1, num_areas=4, manager="inprocess")
    config["behaviors"]["Tag"].update(
        trainer_type="sac", summary_freq=400, checkpoint_interval=800,
        hyperparameters={"batch_size": 32, "buffer_size": 5000, "buffer_init_steps": 100, "steps_per_update": 4},
        network_settings={"hidden_units": 16, "num_layers": 1},
        self_play=dict(config["behaviors"]["Tag"]["self_play"], save_steps=300, team_change=800, swap_steps=200),
    )
    cfg = write_config(tmp_path / "tag.yaml", config)
    proc = arl_learn_here([str(cfg)], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "team 1 learns now" in proc.stdout and "team 0 learns now" in proc.stdout
    elo = [v for _, v in scalars(tmp_path / "sactag" / "Tag", "Self-play/ELO")]
    assert elo, proc.stdout
    status = json.loads((tmp_path / "sactag" / "run_logs" / "training_status.json").read_text())
    assert abs(status["Tag"]["elo"] - elo[-1]) < 10 and status["Tag"]["final_checkpoint"]["steps"] >= 2000  # a summary holds the period's mean
    state = torch.load(tmp_path / "sactag" / "Tag" / "checkpoint.pt", weights_only=True)
    assert state["global_step"] >= 2000 and state["update_steps"] > 100  # SAC learned all along
