"""POCA with self-play (ML-Agents' SoccerTwos): the built-in SoccerLine (two teams of two, each team
a group with a group reward of +1 / -1 per goal), a game counted for ELO only when the agent's
whole group ended (ML-Agents' all_group_dones_reached), POCA learning against a frozen opponent
with ghost swaps and a rising ELO, and arl-learn on config/poca/SoccerLine.yaml with --resume."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from mlagents_envs.base_env import ActionSpec, ActionTuple, BehaviorSpec, DecisionSteps, TerminalSteps

from ml_arl.acting.agent_processor import AgentProcessor
from ml_arl.acting.muscle import ActionInfo, Muscle
from ml_arl.core.actor_weights import PolicySnapshot
from ml_arl.core.behavior_specs import vector_obs_spec
from ml_arl.envs.games.builtin import BUILTIN_ENVS
from ml_arl.envs.games.soccer import HALF_CELLS, TEAMS, SoccerLine
from ml_arl.results.summary_writers import StatsReporter
from ml_arl.settings import SelfPlaySettings, build_run_options
from ml_arl.trainers.poca.trainer import POCATrainer
from ml_arl.training.controller import TrainerController
from ml_arl.training.opponents import GhostController, OpponentPool
from tests.support.runs import ROOT, arl_learn, arl_learn_here, scalars, write_config

Policy = Callable[[np.ndarray], np.ndarray]


def chase(obs: np.ndarray) -> np.ndarray:
    """Forward while the ball is ahead or under the agent, back otherwise."""
    return np.where(obs[:, 1] >= 0, 2, 1).astype(np.int32)


def random_policy(seed: int) -> Policy:
    rng = np.random.default_rng(seed)
    return lambda obs: rng.integers(0, 3, len(obs)).astype(np.int32)


def act(env: SoccerLine, team: int, action: np.ndarray) -> None:
    env.set_actions(TEAMS[team], ActionTuple(discrete=np.asarray(action).reshape(-1, 1)))


def play(policies: tuple[Policy, Policy], games: int, seed: int = 0, num_areas: int = 16) -> np.ndarray:
    """Team 0's result of ``games`` episodes: its group reward, 0 for a timeout."""
    env = SoccerLine(seed=seed, num_areas=num_areas)
    env.reset()
    results: list[float] = []
    while len(results) < games:
        for team in range(2):
            act(env, team, policies[team](env.get_steps(TEAMS[team])[0].obs[0]))
        env.step()
        (_, t0), (_, t1) = env.get_steps(TEAMS[0]), env.get_steps(TEAMS[1])
        np.testing.assert_array_equal(t0.group_reward, -t1.group_reward)
        results += t0.group_reward[::2].tolist()  # one row per arena (both teammates get the same)
    return np.array(results[:games])


# ---------------------------------------------------------------- the environment


def test_soccer_line_specs_groups_kicks_goals_and_timeouts() -> None:
    env = BUILTIN_ENVS["SoccerLine"](seed=0, num_areas=2)
    assert isinstance(env, SoccerLine)
    assert list(env.behavior_specs) == list(TEAMS)
    for name in TEAMS:
        assert env.behavior_specs[name].observation_specs[0].shape == (5,)
        assert env.behavior_specs[name].action_spec.discrete_branches == (3,)
    env.reset()
    (d0, _), (d1, _) = env.get_steps(TEAMS[0]), env.get_steps(TEAMS[1])
    assert d0.agent_id.tolist() == [0, 1, 2, 3] and d1.agent_id.tolist() == [4, 5, 6, 7]
    assert d0.group_id.tolist() == [1, 1, 2, 2] and d1.group_id.tolist() == [3, 3, 4, 4]  # a group per team and arena
    with pytest.raises(ValueError, match="no environment parameters"):
        env.set_environment_parameters({"speed": 1.0})

    # Arena 0: team 0 at -1 and -1 (both next to the ball), team 1 far; arena 1: one kick each way.
    env.pos[0, 0], env.pos[1, 0] = [-1, -1], [4, 4]
    env.pos[0, 1], env.pos[1, 1] = [-1, -4], [1, 4]
    np.testing.assert_allclose(env._observe(0)[0] * HALF_CELLS, [-1, 1, 0, 5, 5])  # own, ball, mate, opponents (relative)
    np.testing.assert_allclose(env._observe(1)[2] * HALF_CELLS, [-1, 1, -3, 2, 5])  # team 1 sees the line mirrored
    act(env, 0, [2, 2, 2, 0])  # arena 0: both forward into the ball; arena 1: one forward
    act(env, 1, [0, 0, 2, 0])  # arena 1: team 1's first agent forward (to the left) into the ball
    env.step()
    np.testing.assert_array_equal(env.ball, [2, 0])  # two kicks add up; one each way cancels
    np.testing.assert_array_equal(env.pos[0, 0], [0, 0])
    # Arena 1: team 0's first agent stands on the ball and moves forward: it dribbles the ball along.
    act(env, 0, [0, 0, 2, 0])
    env.step()
    assert env.ball[1] == 1 and env.pos[0, 1, 0] == 1
    assert len(env.get_steps(TEAMS[0])[1]) == 0
    # Arena 0: one kick from cell 3 puts the ball on the last cell: a goal for team 0.
    env.ball[0], env.pos[0, 0] = HALF_CELLS - 1, [HALF_CELLS - 2, -3]
    act(env, 0, [2, 0, 0, 0])
    env.step()
    (d0, t0), (d1, t1) = env.get_steps(TEAMS[0]), env.get_steps(TEAMS[1])
    assert t0.agent_id.tolist() == [0, 1] and t1.agent_id.tolist() == [4, 5]  # the goal ends arena 0 for all four
    assert t0.group_id.tolist() == [1, 1] and t1.group_id.tolist() == [3, 3]
    np.testing.assert_array_equal(t0.group_reward, [1, 1])
    np.testing.assert_array_equal(t1.group_reward, [-1, -1])
    np.testing.assert_array_equal(t0.reward, 0.0)
    assert not t0.interrupted.any() and not t1.interrupted.any()
    assert len(d0) == len(d1) == 4 and env.ball[0] == 0 and env.t[0] == 0  # arena 0 started over at once
    np.testing.assert_array_equal(d0.group_reward, 0.0)

    # Nobody moves: a timeout, interrupted, group reward 0.
    env = SoccerLine(seed=1, num_areas=2, max_episode_steps=5)
    env.reset()
    for _ in range(5):
        env.step()
    _, t0 = env.get_steps(TEAMS[0])
    assert len(t0) == 4 and t0.interrupted.all()
    np.testing.assert_array_equal(t0.group_reward, 0.0)


def test_chasing_beats_random_and_random_is_fair() -> None:
    assert (play((chase, random_policy(1)), 300) == 1).mean() >= 0.85
    assert (play((random_policy(2), chase), 300, seed=1) == -1).mean() >= 0.85
    both = play((random_policy(3), random_policy(4)), 400, seed=2)
    wins0, wins1 = (both == 1).sum(), (both == -1).sum()
    assert wins0 + wins1 >= 150 and 0.4 <= wins0 / (wins0 + wins1) <= 0.6


# ---------------------------------------------------------------- what counts as a game


SPEC = BehaviorSpec([vector_obs_spec(1)], ActionSpec(0, (3,)))


def _steps(ids: list[int], groups: list[int], group_reward: float = 0.0, terminal: bool = False) -> Any:
    n = len(ids)
    args = ([np.zeros((n, 1), np.float32)], np.zeros(n, np.float32))
    tail = (np.array(ids, np.int32), np.array(groups, np.int32), np.full(n, group_reward, np.float32))
    if terminal:
        return TerminalSteps(*args, np.zeros(n, bool), *tail)
    return DecisionSteps(*args, tail[0], None, tail[1], tail[2])


def _acts(n: int) -> ActionInfo:
    disc = np.zeros((n, 1), np.int32)
    return ActionInfo(np.zeros((n, 0), np.float32), disc, np.zeros(n, np.float32), np.zeros(n, np.float32), None,
                      ActionTuple(np.zeros((n, 0), np.float32), disc))


def test_a_game_counts_when_the_whole_group_ended_and_the_group_reward_decides_it() -> None:
    proc = AgentProcessor("Soccer?team=0", SPEC, time_horizon=100, worker_id=0)
    empty = TerminalSteps.empty(SPEC)
    proc.add_experiences(_steps([1, 2, 3], [7, 7, 0]), empty, _acts(3))
    # agent 2 leaves its group early (its teammate plays on); agent 3 has no group
    proc.add_experiences(_steps([1], [7]), _steps([2, 3], [7, 0], terminal=True), _acts(1))
    # the group ends: agent 1 with a group reward of -1 (the other team scored)
    proc.add_experiences(_steps([], []), _steps([1], [7], group_reward=-1.0, terminal=True), _acts(0))
    episodes = {ep.agent_id: ep for ep in proc.take()[1]}
    assert not episodes["0-2"].group_done and episodes["0-3"].group_done and episodes["0-1"].group_done
    assert episodes["0-1"].final == -1.0 and episodes["0-1"].reward == 0.0  # the group reward decides, not the reward

    # the ghost's ELO: a loss against an equal opponent costs K / 2, the snapshot gains it
    controller = GhostController()
    ghost = OpponentPool("Soccer", SelfPlaySettings(elo_k_factor=16, play_against_latest_model_ratio=0.0), controller,
                         StatsReporter("Soccer", []), 0)
    ghost.add_behavior("Soccer?team=0")
    ghost.add_behavior("Soccer?team=1")
    ghost.start(PolicySnapshot(0, None), 0)
    ghost.record_game(episodes["0-1"].final)
    assert ghost.elo == pytest.approx(1192.0) and ghost.snapshots[0].elo == pytest.approx(1208.0)


# ---------------------------------------------------------------- learning with a ghost opponent


def soccer_config(results: Path, run_id: str, max_steps: int, **self_play: Any) -> dict[str, Any]:
    config = yaml.safe_load((ROOT / "config" / "poca" / "SoccerLine.yaml").read_text())
    behavior = config["behaviors"]["SoccerLine"]
    behavior["max_steps"] = max_steps
    behavior["self_play"].update(self_play)
    config["env_settings"]["seed"] = 1
    config["checkpoint_settings"] = {"results_dir": str(results), "run_id": run_id}
    return config


def test_poca_learns_against_a_frozen_ghost_swaps_and_elo_rises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Team 0 learns all along (no team change); team 1 plays the first snapshot (the initial,
    random policy) throughout: no later snapshot is taken and the latest weights are never drawn."""
    started = time.perf_counter()
    learned: set[str] = set()
    add_experience = POCATrainer.add_experience

    def spy(self: POCATrainer, traj: Any) -> None:
        learned.add(traj.behavior)
        assert traj.groupmates is not None and traj.group_id > 0  # the group reached the POCA critic
        add_experience(self, traj)

    monkeypatch.setattr(POCATrainer, "add_experience", spy)
    config = soccer_config(tmp_path, "frozen", 8000, save_steps=10**6, team_change=10**6, swap_steps=500,
                           play_against_latest_model_ratio=0.0)
    config["env_settings"]["manager"] = "inprocess"
    controller = TrainerController(build_run_options(config, {}, "test"))
    controller.start_learning()
    ghost = controller.selfplay.ghosts["SoccerLine"]
    trainer = controller.trainers["SoccerLine"]
    assert learned == {TEAMS[0]}  # the ghost team's experience never reached the trainer
    assert len(ghost.snapshots) == 1 and ghost.current_opponent == 0
    assert ghost.ghost_serial >= 5  # swapped every 500 ghost steps (always to the same frozen snapshot)
    assert ghost.games >= 150
    assert ghost.elo - 1200.0 >= 40, ghost.elo
    assert ghost.snapshots[0].elo == pytest.approx(2400.0 - ghost.elo)  # the opponent lost what the learner won

    # the learned policy (as the workers act with it) against random play, from either side
    weights = trainer.policy_snapshot().weights

    def learned_policy(seed: int) -> Policy:
        muscle = Muscle(weights, deterministic=False, seed=seed)
        return lambda obs: muscle.act([obs], np.ones((len(obs), 3), bool)).discrete[:, 0]

    assert (play((learned_policy(0), random_policy(5)), 300, seed=3) == 1).mean() >= 0.75
    assert (play((random_policy(6), learned_policy(1)), 300, seed=4) == -1).mean() >= 0.75

    run_dir = tmp_path / "frozen" / "SoccerLine"
    elo = [v for _, v in scalars(run_dir, "Self-play/ELO")]
    assert elo and elo[-1] > elo[0] and elo[-1] - 1200.0 >= 30, elo
    group = [v for _, v in scalars(run_dir, "Environment/Group Cumulative Reward")]
    assert len(group) >= 3 and group[-1] > group[0] and group[-1] >= 0.5, group
    print(f"POCA self-play vs frozen: {time.perf_counter() - started:.1f} s, ELO {ghost.elo:.1f}, {ghost.games} games")


@pytest.mark.slow
def test_arl_learn_soccer_line_switches_teams_and_resumes(tmp_path: Path) -> None:
    config = soccer_config(tmp_path, "soccer", 3000, save_steps=500, team_change=1500, swap_steps=500)
    config["behaviors"]["SoccerLine"]["summary_freq"] = 1000
    config["behaviors"]["SoccerLine"]["checkpoint_interval"] = 1500
    cfg = write_config(tmp_path / "soccer.yaml", config)
    proc = arl_learn([str(cfg)], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "team 1 learns now" in proc.stdout
    run = tmp_path / "soccer"
    status = json.loads((run / "run_logs" / "training_status.json").read_text())
    saved = status["SoccerLine"]
    assert saved["final_checkpoint"]["steps"] >= 3000 and saved["elo"] != 1200.0
    assert (run / "SoccerLine.onnx").exists()
    assert scalars(run / "SoccerLine", "Self-play/ELO") and scalars(run / "SoccerLine", "Environment/Group Cumulative Reward")

    config["behaviors"]["SoccerLine"]["max_steps"] = 4000
    write_config(cfg, config)
    proc = arl_learn_here([str(cfg), "--resume"], cwd=tmp_path)  # main() in this process: one interpreter less
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"continues at ELO {saved['elo']:.1f}" in proc.stdout
    status = json.loads((run / "run_logs" / "training_status.json").read_text())
    assert status["SoccerLine"]["final_checkpoint"]["steps"] >= 4000
    assert re.search(r"SoccerLine\. Step: 4000\. .* Mean Group Reward: -?[\d.]+\. Training\. ELO: [\d.]+\.", proc.stdout), proc.stdout
