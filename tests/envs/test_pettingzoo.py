"""PettingZoo environments (``--env pettingzoo:<module>``): agents to behaviors by name prefix,
spaces, agents that leave early, turn-based AEC games with action masks, learning on MPE2
simple_spread, attacker vs defender on simple_adversary, and one-line errors for bad names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import numpy as np
import pytest
from mlagents_envs.base_env import ActionTuple

pytest.importorskip("pettingzoo")
pytest.importorskip("mpe2")

from ml_arl.envs.adapters.pettingzoo_env import PettingZooEnv, behavior_of, make_pettingzoo_env  # noqa: E402
from ml_arl.envs.sources import resolve_env  # noqa: E402
from ml_arl.settings import build_run_options  # noqa: E402
from ml_arl.training.callbacks import CallbackList, StopOnReward  # noqa: E402
from ml_arl.training.controller import TrainerController  # noqa: E402
from tests.support.pettingzoo_envs import Mixed  # noqa: E402
from tests.support.runs import arl_learn, arl_learn_here, tiny_config, write_config  # noqa: E402

SPREAD_RANDOM = -27.7  # simple_spread_v3 (N=3, 25 steps): mean agent return of uniform random play over 900 episodes
SPREAD_THRESHOLD = -21.5  # the last 60 agent returns (20 games); 60 random ones average -31.5 .. -25.6
SPREAD_SOLVED = -21.0  # the learning run stops there (the same 60 returns), not at max_steps


def test_behavior_names_come_from_agent_name_prefixes() -> None:
    assert [behavior_of(a) for a in ["adversary_0", "agent_2", "pursuer", "red_team_10", "a_b"]] == [
        "adversary", "agent", "pursuer", "red_team", "a_b"]
    env = make_pettingzoo_env("mpe2.simple_tag_v3", seed=0)
    env.reset()
    specs = env.behavior_specs
    assert list(specs) == ["adversary", "agent"]
    assert specs["adversary"].observation_specs[0].shape == (16,) and specs["agent"].observation_specs[0].shape == (14,)
    assert specs["adversary"].action_spec.discrete_branches == (5,)
    decision, terminal = env.get_steps("adversary")
    assert list(decision.agent_id) == [0, 1, 2] and len(terminal) == 0
    assert list(env.get_steps("agent")[0].agent_id) == [0]


def test_spaces_early_leavers_and_truncation() -> None:
    raw = Mixed(early_step=2, last_step=4)
    env = PettingZooEnv(raw, seed=0)
    env.reset()
    runner, cam = env.behavior_specs["runner"], env.behavior_specs["cam"]
    assert runner.observation_specs[0].shape == (2,) and runner.action_spec.continuous_size == 2
    assert cam.observation_specs[0].shape == (8, 8, 3) and cam.action_spec.discrete_branches == (3, 2)
    seen = []
    for _ in range(5):
        env.set_actions("runner", ActionTuple(continuous=np.array([[1.0, -1.0], [0.0, 0.0]], np.float32)[: len(env.get_steps("runner")[0])]))
        env.set_actions("cam", ActionTuple(discrete=np.array([[2, 1]], np.int32)))
        env.step()
        seen.append({b: env.get_steps(b) for b in ("runner", "cam")})
    # actions: [-1, 1] onto the Box's [0, 2]; MultiDiscrete as given
    assert np.allclose(raw.actions[0]["runner_0"], [2.0, 0.0]) and np.allclose(raw.actions[0]["runner_1"], [1.0, 1.0])
    assert list(raw.actions[0]["cam_0"]) == [2, 1]
    # step 2: runner_1 terminates (not interrupted) with the reward of that step; runner_0 keeps deciding
    d2, t2 = seen[1]["runner"]
    assert list(t2.agent_id) == [1] and not t2.interrupted[0] and t2.reward[0] == pytest.approx(1.0)
    assert list(d2.agent_id) == [0] and d2.reward[0] == pytest.approx(2.0)
    assert "runner_1" not in raw.actions[2]  # gone until the next episode
    # step 4: the rest is truncated (interrupted), the env resets, every agent starts again in the same step
    d4, t4 = seen[3]["runner"]
    assert list(t4.agent_id) == [0] and t4.interrupted[0]
    assert list(d4.agent_id) == [0, 1] and np.all(d4.reward == 0.0) and raw.resets == 2
    dc, tc = seen[3]["cam"]
    assert tc.interrupted[0] and tc.reward[0] == pytest.approx(1.0)
    # images stay images, scaled to [0, 1]; Box observations are flattened
    assert dc.obs[0].shape == (1, 8, 8, 3) and dc.obs[0].max() == pytest.approx(0.0)
    assert seen[0]["cam"][0].obs[0][0, 0, 0, 0] == pytest.approx(51 / 255)
    assert np.allclose(d4.obs[0], [[0, 0], [0, 1]])


def test_turn_based_aec_game_decides_in_turns_with_masks() -> None:
    env = make_pettingzoo_env("pettingzoo.classic.tictactoe_v3", seed=0)
    env.reset()
    assert list(env.behavior_specs) == ["player"]
    rng = np.random.default_rng(0)
    lengths, moves, finals = [], 0, []
    for _ in range(400):
        decision, terminal = env.get_steps("player")
        if len(terminal):
            assert sorted(terminal.agent_id) == [0, 1]  # both players' episodes end, the waiting one too
            lengths.append(moves)
            finals.append(sorted(terminal.reward.tolist()))
            moves = 0
        assert len(decision) == 1  # only the player whose turn it is decides
        allowed = ~decision.action_mask[0][0]
        assert allowed.any()
        env.set_actions("player", ActionTuple(discrete=np.array([[rng.choice(np.flatnonzero(allowed))]], np.int32)))
        env.step()
        moves += 1
    assert len(lengths) > 20
    assert min(lengths) >= 5  # a legal game lasts 5 moves at least: masks keep random play legal
    assert all(f in ([-1.0, 1.0], [0.0, 0.0]) for f in finals)  # a loser gets its -1 although it did not move last


def test_aec_env_runs_through_arl_learn(tmp_path: Path) -> None:
    config = tiny_config("pettingzoo:pettingzoo.classic.tictactoe_v3", max_steps=600)
    config["env_settings"]["num_envs"] = 1
    cfg = write_config(tmp_path / "ttt.yaml", config)
    proc = arl_learn_here([str(cfg), "--run-id", "ttt"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    status = json.loads((tmp_path / "results/ttt/run_logs/training_status.json").read_text())
    assert status["player"]["final_checkpoint"]["steps"] >= 600


def _train(tmp_path: Path, config: dict, callbacks: Optional[CallbackList] = None) -> TrainerController:
    config.setdefault("checkpoint_settings", {}).update({"results_dir": str(tmp_path), "run_id": "learn"})
    controller = TrainerController(build_run_options(config, {}, "test"), callbacks=callbacks)
    controller.start_learning()
    return controller


@pytest.mark.slow
def test_simple_spread_learns_above_random(tmp_path: Path) -> None:
    config = tiny_config(
        "pettingzoo:mpe2.simple_spread_v3", max_steps=40000, time_horizon=25,
        hyperparameters={"batch_size": 256, "buffer_size": 1500, "learning_rate": 3e-3, "beta": 5e-3, "num_epoch": 8,
                         "learning_rate_schedule": "constant"},
        network_settings={"hidden_units": 64, "num_layers": 2, "normalize": True},
    )
    config["env_settings"].update({"manager": "inprocess", "num_envs": 1, "seed": 1})
    # the run stops once the last 60 returns average SPREAD_SOLVED, above the threshold
    controller = _train(tmp_path, config, CallbackList([StopOnReward("agent", SPREAD_SOLVED, 60)]))
    rewards = list(controller.managers["agent"].recent_rewards)
    assert len(rewards) >= 60
    assert np.mean(rewards[-60:]) > SPREAD_THRESHOLD > SPREAD_RANDOM, (np.mean(rewards[-60:]), controller.trainers["agent"].step)


def test_attacker_and_defender_train_on_simple_adversary(tmp_path: Path) -> None:
    config = tiny_config("pettingzoo:mpe2.simple_adversary_v3", max_steps=1200, time_horizon=25)
    config["env_settings"].update({"num_envs": 1, "env_args": ["rewards_from={adversary: agent}"]})
    config["behaviors"] = {"agent": {"role": "defender"}, "adversary": {"role": "attacker"}}
    cfg = write_config(tmp_path / "adv.yaml", config)
    proc = arl_learn_here([str(cfg), "--run-id", "adv"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    status = json.loads((tmp_path / "results/adv/run_logs/training_status.json").read_text())
    assert status["agent"]["final_checkpoint"]["steps"] >= 1200
    assert status["adversary"]["final_checkpoint"]["steps"] >= 1200
    for behavior in ("agent", "adversary"):
        assert (tmp_path / "results/adv" / f"{behavior}.onnx").is_file()


def test_rewards_from_gives_the_attacker_the_defenders_reward() -> None:
    env = make_pettingzoo_env("mpe2.simple_adversary_v3", seed=0, rewards_from={"adversary": "agent"})
    plain = make_pettingzoo_env("mpe2.simple_adversary_v3", seed=0)
    env.reset()
    plain.reset()
    for _ in range(3):
        env.step()
        plain.step()
    good = plain.get_steps("agent")[0].reward
    assert np.allclose(env.get_steps("agent")[0].reward, good)
    assert env.get_steps("adversary")[0].reward[0] == pytest.approx(float(np.mean(good)))
    assert plain.get_steps("adversary")[0].reward[0] != pytest.approx(float(np.mean(good)))


@pytest.mark.parametrize(
    "source,args,needle,command",
    [
        ("pettingzoo:no_such_module_xyz", [], "cannot import module 'no_such_module_xyz'", True),
        ("pettingzoo:mpe2.simple_nothing_v9", [], "cannot import module 'mpe2.simple_nothing_v9'", False),
        ("pettingzoo:json", [], "has neither parallel_env nor env", False),
        ("pettingzoo:mpe2.simple_spread_v3", ["--env-args", "no_such_arg=1"], "check --env-args", False),
    ],
)
def test_bad_pettingzoo_sources_are_one_line_errors(
    tmp_path: Path, source: str, args: list[str], needle: str, command: bool
) -> None:
    """One case through the command itself, the others through its main() in this process."""
    cfg = write_config(tmp_path / "c.yaml", tiny_config("builtin:Reach"))
    proc = (arl_learn if command else arl_learn_here)([str(cfg), "--run-id", "bad", "--env", source, *args], cwd=tmp_path)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, output
    assert needle in output and "Traceback" not in output
    assert len(output.strip().splitlines()) == 1, output


def test_resolve_pettingzoo_source_builds_in_a_worker() -> None:
    factory = resolve_env("pettingzoo:mpe2.simple_spread_v3", ["N=2"])
    env = factory(worker_id=0, seed=5)
    env.reset()
    assert len(env.get_steps("agent")[0]) == 2
    env.close()


@pytest.mark.slow
def test_self_play_takes_its_teams_from_the_behavior_names(tmp_path: Path) -> None:
    """Each behavior (agent-name prefix) is a team: with self_play the attacker and the defender of
    simple_adversary learn in turn, each against snapshots of the other (asymmetric self-play)."""
    config = tiny_config("pettingzoo:mpe2.simple_adversary_v3", max_steps=1600, time_horizon=25,
                         self_play={"save_steps": 200, "team_change": 400, "swap_steps": 100})
    config["env_settings"].update({"manager": "inprocess", "num_envs": 1, "seed": 3,
                                   "env_args": ["rewards_from={adversary: agent}"]})
    config["behaviors"] = {"agent": {"role": "defender"}, "adversary": {"role": "attacker"}}
    controller = _train(tmp_path, config)
    assert controller.selfplay is not None
    ghosts = controller.selfplay.ghosts
    assert set(ghosts) == {"agent", "adversary"}
    assert sorted(controller.selfplay.controller.teams) == ["adversary", "agent"]
    # both learned in turn (the team changed at least once each way) and kept snapshots of themselves
    assert all(len(g.snapshots) >= 2 and g.ghost_step > 0 for g in ghosts.values()), {b: len(g.snapshots) for b, g in ghosts.items()}
    assert all(t.step >= 800 for t in controller.trainers.values()), {b: t.step for b, t in controller.trainers.items()}


def test_check_builds_no_environment_and_check_wiring_does(tmp_path: Path) -> None:
    """A constructor argument the game does not take is seen only where the environment is built:
    --check (nothing started) passes it, --check-wiring (built once here) names it in one line."""
    config = tiny_config("pettingzoo:pettingzoo.classic.tictactoe_v3", max_steps=600)
    config["env_settings"]["env_args"] = ["board_colour=red"]
    path = write_config(tmp_path / "ttt.yaml", config)
    check = arl_learn_here([str(path), "--check"], tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    wiring = arl_learn_here([str(path), "--check-wiring"], tmp_path)
    assert wiring.returncode == 2, wiring.stdout + wiring.stderr
    lines = wiring.stderr.strip().splitlines()
    assert len(lines) == 1 and "board_colour" in lines[0] and "check --env-args" in lines[0], lines
