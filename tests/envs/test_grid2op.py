"""Grid2Op environments (``--env grid2op:<name>``, ml_arl.envs.adapters.grid2op_env): spaces,
observation and action decoding, an episode to its end with DoNothing, the Opponent's attacks
under grid2op's budget and cooldown, the Grid2Op baselines, and one-line errors for an unknown
name, a bad option and a missing extra."""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

import numpy as np
import pytest
from mlagents_envs.base_env import ActionSpec, ActionTuple, BehaviorSpec

from ml_arl.core.exceptions import EnvironmentSourceError
from ml_arl.envs.sources import is_python_source, resolve_env
from ml_arl.rules import PolicyWeights, policy_problem
from ml_arl.rules.grid2op_rules import DoNothing, Greedy, RandomLineAttack, ReconnectLines

HAS_GRID2OP = importlib.util.find_spec("grid2op") is not None
needs_grid2op = pytest.mark.skipif(not HAS_GRID2OP, reason="grid2op is not installed (pip install 'ml_arl[grid2op]')")
if HAS_GRID2OP:
    from ml_arl.envs.adapters.grid2op_env.adapter import make_grid2op_env

CASE14 = "l2rpn_case14_sandbox"
N_LINE, N_SUB, N_GEN, N_LOAD, DIM_TOPO = 20, 14, 6, 11, 57
OBS_SIZE = 3 * N_LINE + DIM_TOPO + 2 * N_GEN + N_LOAD + N_SUB + 2  # 156: the subset, docs/grid2op.md
N_TOPOLOGY = 29  # substations 2 (3 + the reference), 4 (11), 8 (11), 12 (4): at most 5 elements, no line alone
N_ACTIONS = 1 + N_LINE + N_TOPOLOGY + 6  # do nothing, reconnections, topologies, +/- on 3 generators


def _act(env: Any, behavior: str, choice: int) -> None:
    env.set_actions(behavior, ActionTuple(discrete=np.array([[choice]], np.int32)))


@pytest.fixture(scope="module")
def plain() -> Any:
    env = make_grid2op_env(CASE14, seed=0)
    yield env
    env.close()


@needs_grid2op
def test_spaces_observation_and_action_decoding(plain: Any) -> None:
    env = plain
    env.reset()
    assert list(env.behavior_specs) == ["Operator"]
    spec = env.behavior_specs["Operator"]
    assert spec.observation_specs[0].shape == (OBS_SIZE,) and spec.action_spec.discrete_branches == (N_ACTIONS,)
    assert spec.action_spec.continuous_size == 0
    decision, terminal = env.get_steps("Operator")
    assert len(decision) == 1 and len(terminal) == 0 and decision.obs[0].dtype == np.float32
    o, row = env.obs, decision.obs[0][0]
    assert np.allclose(row[:N_LINE], np.clip(o.rho, 0, 10), atol=1e-6)
    assert np.array_equal(row[N_LINE: 2 * N_LINE], o.line_status.astype(np.float32))
    assert np.array_equal(row[2 * N_LINE: 2 * N_LINE + DIM_TOPO], np.where(o.topo_vect > 0, o.topo_vect - 1, -1))
    # the action set: 0 do nothing, 1..20 reconnect, topologies, then redispatch
    labels = env.actions.labels
    assert labels[0] == "do nothing" and labels[1] == "reconnect line 0_1_0" and labels[N_LINE].startswith("reconnect")
    assert sorted({int(label.split()[1]) for label in labels if label.startswith("substation")}) == [2, 4, 8, 12]
    assert sum(label.startswith("redispatch") for label in labels) == 6
    assert env.operator_actions[3].as_dict()["set_line_status"]["connected_id"].tolist() == [2]
    topo = env.operator_actions[env.actions.topo_start + 1].as_dict()["set_bus_vect"]
    assert topo["modif_subs_id"] == ["2"]
    assert env.operator_actions[env.actions.redispatch_start].redispatch.tolist() == [5.0, 0, 0, 0, 0, 0]  # +max ramp
    assert env.operator_actions[env.actions.redispatch_start + 1].redispatch.tolist() == [-5.0, 0, 0, 0, 0, 0]
    # every line connected: no reconnection allowed; the reference topologies are already in place
    mask = decision.action_mask[0][0]
    assert mask.shape == (N_ACTIONS,) and not mask[0] and mask[1: 1 + N_LINE].all()
    assert mask[env.actions.topo_start] and not mask[env.actions.topo_start + 1] and not mask[env.actions.redispatch_start:].any()
    # a topology action takes effect; the reference is then allowed again, the applied one not
    assert env.actions.labels[env.actions.topo_start + 2] == "substation 2 buses 1221"
    _act(env, "Operator", env.actions.topo_start + 2)
    env.step()
    assert env.obs.topo_vect[env.actions.sub_start[2]: env.actions.sub_start[3]].tolist() == [1, 2, 2, 1]
    mask = env.get_steps("Operator")[0].action_mask[0][0]
    assert not mask[env.actions.topo_start] and mask[env.actions.topo_start + 2]
    assert env.get_steps("Operator")[0].reward[0] == 1.0


@needs_grid2op
def test_do_nothing_survives_a_whole_chronic_without_an_opponent(plain: Any) -> None:
    env = plain
    env.reset()
    total, steps = 0.0, 0
    while True:
        _act(env, "Operator", 0)
        env.step()
        steps += 1
        decision, terminal = env.get_steps("Operator")
        if len(terminal):
            total += float(terminal.reward[0])
            break
        total += float(decision.reward[0])
    assert steps == 575 and total == 575.0
    assert bool(terminal.interrupted[0])  # the chronic's end: interrupted, not a game over
    assert len(decision) == 1 and decision.reward[0] == 0.0  # the next chronic has begun


@needs_grid2op
def test_below_safe_max_rho_the_rule_plays_and_the_operator_decides_above_it() -> None:
    """safe_max_rho: the Operator is asked at an episode's first step and whenever the highest line
    load is at or above the threshold; the steps in between are the reconnect rule's, their survival
    rewards summed into the next decision's. Under random line attacks, the rule's action at every
    decision survives as long as the rule does in the plain environment, step for step, and is
    asked far fewer times."""
    guarded = make_grid2op_env(CASE14, seed=3, opponent="random", safe_max_rho=0.95, redispatch=False)
    plain = make_grid2op_env(CASE14, seed=3, opponent="random", redispatch=False)
    try:
        lengths = []
        for env, rule in ((guarded, False), (plain, True)):
            env.reset()
            decisions, total, first = 0, 0.0, True
            while True:
                if not first and not rule:
                    assert float(np.max(env.obs.rho)) >= 0.95  # asked only above the threshold
                _act(env, "Operator", env.rule_choice())
                env.step()
                decisions, first = decisions + 1, False
                decision, terminal = env.get_steps("Operator")
                if len(terminal):
                    total += float(terminal.reward[0])
                    break
                total += float(decision.reward[0])
            lengths.append((decisions, total))
        (asked, survived), (steps, rule_survived) = lengths
        assert survived == rule_survived and asked < steps / 2, lengths
    finally:
        guarded.close()
        plain.close()


@needs_grid2op
def test_with_an_opponent_behavior_the_operator_decides_only_at_or_above_safe_max_rho() -> None:
    """opponent=true with safe_max_rho: one grid2op step a call, the Opponent decides at every one, the
    Operator only at an episode's first step and at or above the threshold (the rule plays the rest);
    its rewards, summed over its decisions and its end, count the same steps as the Opponent's."""
    env = make_grid2op_env(CASE14, seed=3, opponent=True, safe_max_rho=0.95, redispatch=False)
    try:
        env.reset()
        rewards = {"Operator": 0.0, "Opponent": 0.0}
        asked, steps, ended = 0, 0, False
        while not ended:
            for behavior in rewards:
                decision, _ = env.get_steps(behavior)
                if behavior == "Operator" and len(decision):
                    assert steps == 0 or float(np.max(env.obs.rho)) >= 0.95
                    asked += 1
                    _act(env, behavior, env.rule_choice())
                if behavior == "Opponent":
                    assert len(decision) == 1  # every step
                    mask = decision.action_mask[0][0]
                    _act(env, behavior, int(np.flatnonzero(~mask)[-1]))  # the last line it may attack, else none
            env.step()
            steps += 1
            for behavior in rewards:
                decision, terminal = env.get_steps(behavior)
                if len(terminal):
                    rewards[behavior] += float(terminal.reward[0])
                    ended = True
                elif len(decision):
                    rewards[behavior] += float(decision.reward[0])
        assert rewards["Operator"] == rewards["Opponent"] == steps - 1 or rewards["Operator"] == rewards["Opponent"] == steps
        assert 0 < asked < steps / 2 and steps > 20, (asked, steps, rewards)
        assert len(env.get_steps("Operator")[0]) == 1  # the next episode's first step is the Operator's
    finally:
        env.close()


@needs_grid2op
def test_a_reset_replays_the_seed_sequence_so_matrix_cells_face_the_same_episodes() -> None:
    """Episode k after reset() plays chronic (seed + k) mod their number, grid2op seeded from seed and k:
    the same player after a reset (a phase switch, a matrix cell) survives the same steps."""
    env = make_grid2op_env(CASE14, seed=4, opponent="random", redispatch=False)
    try:
        def two_episodes() -> list[tuple[int, int]]:
            env.reset()
            out = []
            for _ in range(2):
                chronic = str(env.env.chronics_handler.get_name())
                steps = 0
                while True:
                    _act(env, "Operator", env.rule_choice())
                    env.step()
                    steps += 1
                    if len(env.get_steps("Operator")[1]):
                        break
                out.append((chronic, steps))
            return out

        first = two_episodes()
        assert two_episodes() == first
        names = sorted(env.env.chronics_handler.real_data.subpaths)
        assert [c for c, _ in first] == [names[(4 + k) % len(names)].rstrip("/").split("/")[-1] for k in range(2)], first
    finally:
        env.close()


@needs_grid2op
def test_simulate_forecasts_each_action_and_the_greedy_rule_plays_on_it() -> None:
    """simulate=true: a second observation, one forecast highest line load per action: grid2op's own
    obs.simulate of that action, 10 where the action is masked; grid2op_greedy takes the lowest."""
    env = make_grid2op_env(CASE14, seed=3, opponent="random", topology_max_elements=4, safe_max_rho=0.95, simulate=True)
    try:
        env.reset()
        spec = env.behavior_specs["Operator"]
        n = len(env.operator_actions)
        assert [o.name for o in spec.observation_specs] == ["vector", "simulated_rho"]
        assert spec.observation_specs[1].shape == (n,) and policy_problem("grid2op_greedy", spec) is None
        greedy = Greedy(PolicyWeights("grid2op_greedy", 0, (n,), {}))
        for _ in range(12):
            decision, _ = env.get_steps("Operator")
            forecast, mask = decision.obs[1][0], decision.action_mask[0][0]
            assert np.all(forecast[mask] == 10.0) and forecast[0] < 10.0  # do nothing is always allowed
            for i in np.flatnonzero(~mask)[:4]:
                sim, _, done, _ = env.obs.simulate(env.operator_actions[i])
                assert forecast[i] == pytest.approx(10.0 if done else min(float(np.max(sim.rho)), 10.0), abs=1e-5)
            choice = int(greedy.act([x for x in decision.obs], ~decision.action_mask[0]).env_action.discrete[0, 0])
            assert not mask[choice] and forecast[choice] == pytest.approx(float(np.min(forecast)), abs=1e-3)
            _act(env, "Operator", choice)
            env.step()
    finally:
        env.close()


@needs_grid2op
def test_opponent_attacks_under_grid2ops_budget_and_cooldown() -> None:
    env = make_grid2op_env(CASE14, seed=0, opponent=True, attack_duration=3, attack_cooldown=6,
                           attack_budget=6, attack_budget_per_step=0.0)
    env.reset()
    assert list(env.behavior_specs) == ["Operator", "Opponent"]
    opp = env.behavior_specs["Opponent"]
    assert opp.observation_specs[0].shape == (OBS_SIZE + 3,) and opp.action_spec.discrete_branches == (7,)
    assert env.attack_lines == ["1_3_3", "1_4_4", "3_6_15", "9_10_12", "11_12_13", "12_13_14"]
    line = int(np.flatnonzero(env.env.name_line == "1_3_3")[0])
    attacked, allowed_at = [], []
    for t in range(30):
        mask = env.get_steps("Opponent")[0].action_mask[0][0]
        if not mask[1:].all():
            allowed_at.append(t)
        _act(env, "Opponent", 1)  # always try line 1_3_3, allowed or not
        _act(env, "Operator", 0)
        env.step()
        assert len(env.get_steps("Operator")[1]) == 0, "the grid survives these attacks"
        hits = env.last_info["opponent_attack_line"]
        if hits is not None and hits[line]:
            attacked.append(t)
            assert not env.obs.line_status[line], "the attack disconnects its line"
            if t - 1 not in attacked:  # its first step: the line's cooldown holds it out for the attack's duration
                assert env.obs.time_before_cooldown_line[line] > 0
                assert env.get_steps("Operator")[0].action_mask[0][0][1 + line], "no reconnection while it holds"
    starts = [t for t in attacked if t - 1 not in attacked]
    # the mask allows an attack exactly where grid2op's OpponentSpace takes one (a forced attack
    # in between is refused): at once, then once the cooldown allows; a budget of 6 pays for two
    # attacks of 3 steps, and no more
    assert allowed_at == starts == [0, 5], (allowed_at, attacked)
    assert attacked == [0, 1, 2, 5, 6, 7]
    assert env.get_steps("Opponent")[0].obs[0][0][-3] == 0.0  # the budget, spent
    env.close()


def test_baselines_read_the_mask() -> None:
    allowed = np.zeros((2, 8), bool)
    allowed[:, 0] = True
    allowed[1, 3] = allowed[1, 5] = True
    weights = PolicyWeights("x", 0, (8,), {})
    assert DoNothing(weights).act([np.zeros((2, 4), np.float32)], allowed).env_action.discrete[:, 0].tolist() == [0, 0]
    reco = ReconnectLines(PolicyWeights("x", 0, (8,), {"lines": 4}))
    assert reco.act([np.zeros((2, 4), np.float32)], allowed).env_action.discrete[:, 0].tolist() == [0, 3]
    attack = RandomLineAttack(weights, seed=0)
    picks = {int(attack.act([np.zeros((2, 4), np.float32)], allowed).env_action.discrete[1, 0]) for _ in range(40)}
    assert picks == {3, 5}
    assert attack.act([np.zeros((2, 4), np.float32)], allowed).env_action.discrete[0, 0] == 0
    with pytest.raises(ValueError, match="lines=9"):
        ReconnectLines(PolicyWeights("x", 0, (8,), {"lines": 9}))


def test_greedy_takes_the_lowest_forecast_unless_the_rule_is_as_good() -> None:
    """grid2op_greedy: the allowed action with the lowest forecast line load; the reconnect rule's choice
    where that is not lower by margin; masked actions never, whatever their forecast."""
    allowed = np.zeros((3, 8), bool)
    allowed[:, [0, 2, 6]] = True  # do nothing, reconnect line 2, topology 6
    forecast = np.array([[0.99, 0.1, 0.97, 0.9, 0.9, 0.9, 0.80, 0.1],   # 6 is lowest among the allowed
                         [0.99, 0.1, 0.80, 0.9, 0.9, 0.9, 0.8005, 0.1],  # 6 within the margin of the rule's 2
                         [10.0, 10.0, 10.0, 0.5, 0.5, 0.5, 10.0, 0.5]],  # all allowed forecast a game over
                        np.float32)
    greedy = Greedy(PolicyWeights("grid2op_greedy", 0, (8,), {"lines": 4}))
    picks = greedy.act([np.zeros((3, 4), np.float32), forecast], allowed).env_action.discrete[:, 0].tolist()
    assert picks == [6, 2, 2]
    wide = Greedy(PolicyWeights("grid2op_greedy", 0, (8,), {"lines": 4, "margin": 0.5}))
    assert wide.act([np.zeros((3, 4), np.float32), forecast], allowed).env_action.discrete[:, 0].tolist() == [2, 2, 2]
    with pytest.raises(ValueError, match="grid2op_greedy: unknown params depth; it takes lines and margin"):
        Greedy(PolicyWeights("grid2op_greedy", 0, (8,), {"depth": 2}))


@needs_grid2op
def test_baselines_check_the_behavior(plain: Any) -> None:
    spec = plain.behavior_specs["Operator"]
    for name in ("grid2op_do_nothing", "grid2op_reconnect", "random_line_attack"):
        assert policy_problem(name, spec) is None
    continuous = BehaviorSpec(spec.observation_specs, ActionSpec(3, ()))
    problem = policy_problem("random_line_attack", continuous)
    assert problem is not None and "one discrete branch" in problem
    problem = policy_problem("grid2op_greedy", spec)  # without simulate=true there is nothing to be greedy on
    assert problem is not None and "simulate=true" in problem and "['vector']" in problem


@needs_grid2op
def test_grid2op_is_a_python_source_and_builds_in_a_worker() -> None:
    assert is_python_source("grid2op:l2rpn_case14_sandbox")
    factory = resolve_env("grid2op:rte_case5_example", ["opponent=true", "attack_lines=all"])
    env = factory(worker_id=0, seed=3)
    env.reset()
    assert env.behavior_specs["Opponent"].action_spec.discrete_branches == (1 + env.n_line,)
    env.close()


@needs_grid2op
@pytest.mark.parametrize(
    "name,args,needle",
    [
        ("no_such_grid", [], "no Grid2Op environment 'no_such_grid' available offline; available: "),
        (CASE14, ["opponent=maybe"], "opponent='maybe': expected false, true"),
        (CASE14, ["budget=3"], "unknown option budget; Grid2Op environments take opponent, "),
        (CASE14, ["opponent=true", "attack_lines=['9_9_9']"], "attack_lines: no line '9_9_9' on this grid"),
        (CASE14, ["opponent=true", "attack_lines=[1_3_3]"], "YAML reads 1_3_3 as the number 133"),
        (CASE14, ["safe_max_rho=3"], "safe_max_rho=3: expected a line load above 0 and at most 2"),
        (CASE14, ["simulate=3"], "simulate=3: expected true or false"),
    ],
)
def test_bad_grid2op_sources_are_one_line_errors(name: str, args: list[str], needle: str) -> None:
    with pytest.raises(EnvironmentSourceError) as err:
        resolve_env(f"grid2op:{name}", args)
    message = str(err.value)
    assert needle in message and "\n" not in message, message
    if name == "no_such_grid":
        assert CASE14 in message and "rte_case14_realistic" in message


def test_missing_extra_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "grid2op", None)  # import grid2op -> ImportError
    with pytest.raises(EnvironmentSourceError) as err:
        resolve_env(f"grid2op:{CASE14}")
    assert str(err.value) == f"--env grid2op:{CASE14}: Grid2Op is not installed; pip install 'ml_arl[grid2op]'"
