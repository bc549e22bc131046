"""Trajectory assembly: cuts at time_horizon and episode end, interrupted vs terminated,
agents that finish and reappear in the same step, agents that join mid-way."""

from __future__ import annotations

from typing import Optional

import numpy as np
from mlagents_envs.base_env import ActionSpec, ActionTuple, BehaviorSpec, DecisionSteps, TerminalSteps

from ml_arl.acting.agent_processor import AgentProcessor
from ml_arl.acting.muscle import ActionInfo
from ml_arl.core.behavior_specs import vector_obs_spec
from ml_arl.core.experience import EnvStatAggregation
from ml_arl.trainers.queues import AgentManagerQueue

SPEC = BehaviorSpec([vector_obs_spec(1)], ActionSpec(1, ()))


def decisions(ids: list[int], obs: list[float], rewards: Optional[list[float]] = None) -> DecisionSteps:
    n = len(ids)
    return DecisionSteps(
        [np.array(obs, np.float32).reshape(n, 1)],
        np.array(rewards or [0.0] * n, np.float32),
        np.array(ids, np.int32), None, np.zeros(n, np.int32), np.zeros(n, np.float32),
    )


def terminals(ids: list[int], obs: list[float], rewards: list[float], interrupted: list[bool]) -> TerminalSteps:
    n = len(ids)
    return TerminalSteps(
        [np.array(obs, np.float32).reshape(n, 1)], np.array(rewards, np.float32), np.array(interrupted),
        np.array(ids, np.int32), np.zeros(n, np.int32), np.zeros(n, np.float32),
    )


def actions(values: list[float]) -> ActionInfo:
    cont = np.array(values, np.float32).reshape(-1, 1)
    n = cont.shape[0]
    return ActionInfo(cont, np.zeros((n, 0), np.int32), np.full(n, -1.0, np.float32), np.zeros(n, np.float32),
                      None, ActionTuple(continuous=cont))


def no_terminals() -> TerminalSteps:
    return TerminalSteps.empty(SPEC)


def test_cut_at_time_horizon_keeps_next_obs_for_bootstrap() -> None:
    proc = AgentProcessor("B", SPEC, time_horizon=3, worker_id=2)
    for t in range(7):
        proc.add_experiences(decisions([5], [float(t)], [float(t)]), no_terminals(), actions([10.0 + t]))
    trajs, episodes = proc.take()
    assert len(trajs) == 2 and not episodes
    first, second = trajs
    assert first.agent_id == "2-5"
    np.testing.assert_array_equal(first.obs[0][:, 0], [0, 1, 2])
    np.testing.assert_array_equal(first.continuous[:, 0], [10, 11, 12])
    np.testing.assert_array_equal(first.rewards, [1, 2, 3])  # reward of the step after each action
    np.testing.assert_array_equal(first.next_obs[0], [3.0])
    assert not first.done and not first.interrupted
    np.testing.assert_array_equal(second.obs[0][:, 0], [3, 4, 5])
    np.testing.assert_array_equal(second.next_obs[0], [6.0])


def test_terminal_and_interrupted_are_kept_apart_and_agent_reappears() -> None:
    proc = AgentProcessor("B", SPEC, time_horizon=10, worker_id=0)
    proc.add_experiences(decisions([1, 2], [0.0, 0.0]), no_terminals(), actions([0.1, 0.2]))
    proc.add_experiences(decisions([1, 2], [1.0, 1.0], [0.5, 0.5]), no_terminals(), actions([0.3, 0.4]))
    # agent 1 terminates, agent 2 is cut by max steps; both reappear in the same step
    proc.add_experiences(
        decisions([1, 2], [100.0, 200.0], [0.0, 0.0]),
        terminals([1, 2], [9.0, 8.0], [1.0, -1.0], [False, True]),
        actions([0.5, 0.6]),
    )
    trajs, episodes = proc.take()
    by_agent = {t.agent_id: t for t in trajs}
    t1, t2 = by_agent["0-1"], by_agent["0-2"]
    assert t1.done and not t1.interrupted
    assert t2.done and t2.interrupted
    np.testing.assert_array_equal(t1.rewards, [0.5, 1.0])
    np.testing.assert_array_equal(t2.rewards, [0.5, -1.0])
    np.testing.assert_array_equal(t1.next_obs[0], [9.0])
    assert sorted((e.reward, e.length, e.interrupted) for e in episodes) == [(-0.5, 2, True), (1.5, 2, False)]
    # the new episodes started cleanly from the reappearing observations
    proc.add_experiences(decisions([1, 2], [101.0, 201.0], [0.25, 0.25]), terminals([1], [102.0], [2.0], [False]),
                         actions([0.7, 0.8]))
    trajs, episodes = proc.take()
    # agent 1's second episode holds only its own step: nothing of the first episode leaked in
    assert [(t.agent_id, t.obs[0][:, 0].tolist(), t.rewards.tolist(), t.done) for t in trajs] == [
        ("0-1", [100.0], [2.0], True)
    ]
    assert [(e.reward, e.length) for e in episodes] == [(2.0, 1)]


def test_agent_joining_and_leaving_mid_batch() -> None:
    proc = AgentProcessor("B", SPEC, time_horizon=2, worker_id=1)
    proc.add_experiences(decisions([1], [0.0]), no_terminals(), actions([0.0]))
    proc.add_experiences(decisions([1, 7], [1.0, 70.0], [1.0, 0.0]), no_terminals(), actions([0.0, 0.0]))
    proc.add_experiences(decisions([7], [71.0], [3.0]), terminals([1], [2.0], [2.0], [False]), actions([0.0]))
    trajs, episodes = proc.take()
    assert [(t.agent_id, t.rewards.tolist(), t.done) for t in trajs] == [("1-1", [1.0, 2.0], True)]
    assert [(e.reward, e.length) for e in episodes] == [(3.0, 2)]
    proc.add_experiences(decisions([7], [72.0], [4.0]), no_terminals(), actions([0.0]))
    trajs, _ = proc.take()
    assert [(t.agent_id, t.rewards.tolist(), t.done) for t in trajs] == [("1-7", [3.0, 4.0], False)]


def test_end_episodes_discards_half_built_trajectories() -> None:
    proc = AgentProcessor("B", SPEC, time_horizon=5, worker_id=0)
    for t in range(3):
        proc.add_experiences(decisions([1], [float(t)], [1.0]), no_terminals(), actions([0.0]))
    proc.end_episodes()
    proc.add_experiences(decisions([1], [0.0]), terminals([1], [3.0], [1.0], [False]), actions([0.0]))
    trajs, episodes = proc.take()
    assert trajs == [] and episodes == []


def test_the_first_trajectory_of_each_episode_is_marked() -> None:
    """``episode_start`` on an agent's first trajectory of an episode: after a terminal step (the agent
    reappearing), after a reset that dropped its episode, after a switch of collect; not on the
    trajectories that go on with an episode."""
    proc = AgentProcessor("B", SPEC, time_horizon=2, worker_id=0)
    for t in range(5):  # two trajectories of one episode
        proc.add_experiences(decisions([1], [float(t)]), no_terminals(), actions([0.0]))
    assert [t.episode_start for t in proc.take()[0]] == [True, False]
    proc.add_experiences(decisions([1], [9.0]), terminals([1], [5.0], [1.0], [False]), actions([0.0]))  # ends, reappears
    proc.add_experiences(decisions([1], [10.0]), no_terminals(), actions([0.0]))
    proc.add_experiences(decisions([1], [11.0]), no_terminals(), actions([0.0]))
    assert [(t.done, t.episode_start) for t in proc.take()[0]] == [(True, False), (False, True)]
    proc.end_episodes()  # a reset: the episode goes no further
    for t in range(3):
        proc.add_experiences(decisions([1], [float(t)]), no_terminals(), actions([0.0]))
    proc.set_collect(False)
    proc.set_collect(True)  # (a self-play team change: the half-built experience is dropped)
    for t in range(3):
        proc.add_experiences(decisions([1], [float(t)]), no_terminals(), actions([0.0]))
    assert [t.episode_start for t in proc.take()[0]] == [True, True]


def test_agent_manager_queue_is_fifo_and_drains() -> None:
    q: AgentManagerQueue[int] = AgentManagerQueue("B", maxlen=0)
    for i in range(5):
        q.put(i)
    assert q.drain(limit=2) == [0, 1]
    assert q.drain() == [2, 3, 4]
    assert q.empty()


def test_observations_are_copied_when_the_env_reuses_its_buffer() -> None:
    proc = AgentProcessor("B", SPEC, time_horizon=3, worker_id=0)
    buffer = np.zeros((1, 1), np.float32)
    for t in range(4):
        buffer[0, 0] = float(t)  # the env writes every observation into the same array
        steps = DecisionSteps([buffer], np.zeros(1, np.float32), np.array([1], np.int32), None,
                              np.zeros(1, np.int32), np.zeros(1, np.float32))
        proc.add_experiences(steps, no_terminals(), actions([0.0]))
    (traj,), _ = proc.take()
    assert traj.obs[0][:, 0].tolist() == [0.0, 1.0, 2.0] and traj.next_obs[0].tolist() == [3.0]


def test_group_id_and_group_reward_are_recorded() -> None:
    proc = AgentProcessor("B", SPEC, time_horizon=10, worker_id=0)

    def grouped(ids: list[int], rewards: list[float], group_rewards: list[float]) -> DecisionSteps:
        n = len(ids)
        return DecisionSteps(
            [np.zeros((n, 1), np.float32)], np.array(rewards, np.float32), np.array(ids, np.int32), None,
            np.full(n, 3, np.int32), np.array(group_rewards, np.float32),
        )

    empty = terminals([], [], [], [])
    proc.add_experiences(grouped([0], [0.0], [0.0]), empty, actions([0.1]))
    proc.add_experiences(grouped([0], [1.0], [0.5]), empty, actions([0.2]))
    end = TerminalSteps(
        [np.zeros((1, 1), np.float32)], np.array([2.0], np.float32), np.array([False]),
        np.array([0], np.int32), np.array([3], np.int32), np.array([0.25], np.float32),
    )
    proc.add_experiences(decisions([], []), end, None)
    (traj,), _ = proc.take()
    assert traj.rewards.tolist() == [1.0, 2.0]
    assert traj.group_rewards.tolist() == [0.5, 0.25]
    assert traj.group_id == 3


def test_environment_stats_aggregations_and_most_recent_from_worker_0_only() -> None:
    import threading

    from ml_arl.results.summary_writers import StatsReporter, StatsSummary
    from ml_arl.training.router import AgentManager

    written: dict[str, StatsSummary] = {}

    class Capture:
        def write_stats(self, category: str, values: dict[str, StatsSummary], step: int) -> None:
            written.update(values)

        def close(self) -> None:
            pass

    from mlagents_envs.side_channel.stats_side_channel import StatsAggregationMethod

    # ours mirrors mlagents_envs' enum: what the workers convert by value
    assert [(m.name, m.value) for m in EnvStatAggregation] == [(m.name, m.value) for m in StatsAggregationMethod]
    avg, recent, total, hist = EnvStatAggregation.AVERAGE, EnvStatAggregation.MOST_RECENT, EnvStatAggregation.SUM, EnvStatAggregation.HISTOGRAM
    manager = AgentManager("B", StatsReporter("B", [Capture()]), False, threading.Event())
    manager.record_environment_stats({"avg": [(1.0, avg), (3.0, avg)], "sum": [(2.0, total), (5.0, total)], "hist": [(1.0, hist), (2.0, hist)],
                                      "recent": [(7.0, recent), (8.0, recent)]}, worker_id=0)
    manager.record_environment_stats({"recent": [(99.0, recent)], "sum": [(1.0, total)]}, worker_id=1)
    manager.stats.write_stats(1000)
    assert written["avg"].mean == 2.0
    assert written["sum"].mean == 8.0
    assert written["hist"].mean == 1.5 and written["hist"].histogram is not None
    assert written["recent"].mean == 8.0  # worker 1's value is ignored
