"""GridDefense: DistFlow voltages against pandapower's AC power flow on the same feeder, and the
BaseEnv contract of the two behaviors (specs, episodes, rewards, parameters, determinism)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from mlagents_envs.base_env import ActionTuple

from ml_arl.envs.games.builtin import BUILTIN_ENVS
from ml_arl.envs.games.grid_defense import (
    ATTACKER,
    DEFENDER,
    LINES,
    LOAD_P_MW,
    LOAD_Q_MVAR,
    N_BUS,
    GridDefense,
    distflow_voltages,
    voltage_reward,
)


@pytest.fixture(scope="module")
def case33bw():  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pandapower.networks as pn

        return pn.case33bw()


def pandapower_voltages(net, p_mw: np.ndarray, q_mvar: np.ndarray) -> np.ndarray:  # type: ignore[no-untyped-def]
    import pandapower as pp

    buses = net.load.bus.to_numpy()
    net.load["p_mw"] = p_mw[buses]
    net.load["q_mvar"] = q_mvar[buses]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pp.runpp(net, algorithm="nr", numba=False, tolerance_mva=1e-9)
    return net.res_bus.vm_pu.to_numpy()


def random_actions(rng: np.random.Generator, n: int) -> tuple[ActionTuple, ActionTuple]:
    return (
        ActionTuple(continuous=rng.uniform(-1, 1, (n, 6)).astype(np.float32)),
        ActionTuple(continuous=rng.uniform(-1, 1, (n, 3)).astype(np.float32)),
    )


def step_with(env: GridDefense, defend: ActionTuple, attack: ActionTuple) -> None:
    env.set_actions(DEFENDER, defend)
    env.set_actions(ATTACKER, attack)
    env.step()


@pytest.mark.slow
def test_feeder_constants_match_pandapower_case33bw(case33bw) -> None:  # type: ignore[no-untyped-def]
    lines = case33bw.line[case33bw.line.in_service]
    ours = np.array([[f, t, r, x] for f, t, r, x in LINES])
    theirs = lines[["from_bus", "to_bus", "r_ohm_per_km", "x_ohm_per_km"]].to_numpy() * [[1, 1, 1, 1]]
    theirs[:, 2:] *= lines[["length_km"]].to_numpy()
    np.testing.assert_allclose(ours, theirs, atol=1e-9)
    buses = case33bw.load.bus.to_numpy()
    np.testing.assert_allclose(LOAD_P_MW[buses], case33bw.load.p_mw.to_numpy(), atol=1e-12)
    np.testing.assert_allclose(LOAD_Q_MVAR[buses], case33bw.load.q_mvar.to_numpy(), atol=1e-12)
    assert case33bw.bus.vn_kv.iloc[0] == 12.66 and case33bw.ext_grid.vm_pu.iloc[0] == 1.0


def test_distflow_matches_pandapower_ac_power_flow(case33bw) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(123)
    worst = 0.0
    for point in range(24):
        env = GridDefense(
            seed=point,
            load_scale=rng.uniform(0.8, 1.2),
            pv_scale=rng.uniform(0.5, 1.5),
            attack_strength=rng.uniform(0.0, 1.0),
        )
        env.reset()
        for _ in range(int(rng.integers(1, env.steps_per_day + 1))):  # a random hour of the day
            step_with(env, *random_actions(rng, 1))
        p, q, vm = env.operating_point(0)
        reference = pandapower_voltages(case33bw, p, q)
        worst = max(worst, float(np.abs(vm - reference).max()))
    assert worst <= 0.01, worst
    # The nominal feeder (Baran & Wu peak load) too, and plain LinDistFlow is the first pass.
    reference = pandapower_voltages(case33bw, LOAD_P_MW, LOAD_Q_MVAR)
    assert np.abs(distflow_voltages(LOAD_P_MW, LOAD_Q_MVAR) - reference).max() <= 1e-4
    assert np.abs(distflow_voltages(LOAD_P_MW, LOAD_Q_MVAR, iterations=0) - reference).max() <= 0.01


def test_distflow_is_batched() -> None:
    p = np.stack([LOAD_P_MW * s for s in (0.5, 1.0, 1.5)])
    vm = distflow_voltages(p, np.stack([LOAD_Q_MVAR] * 3))
    assert vm.shape == (3, N_BUS)
    np.testing.assert_allclose(vm[1], distflow_voltages(LOAD_P_MW, LOAD_Q_MVAR))
    assert np.all(vm[:, 0] == 1.0) and vm[0].min() > vm[1].min() > vm[2].min()
    assert distflow_voltages(p.reshape(3, 1, N_BUS), np.stack([LOAD_Q_MVAR] * 3)[:, None]).shape == (3, 1, N_BUS)


def test_reward_formula() -> None:
    vm = np.ones(N_BUS)
    vm[0] = 0.9  # the substation is not counted
    vm[[3, 7, 11, 20]] = [0.94, 1.07, 0.95, 1.05]  # two outside (by 0.01 and 0.02), two on the band's edges
    assert voltage_reward(vm, 2.0) == pytest.approx(30 / 32 - 2.0 * 0.03)
    assert voltage_reward(np.ones(N_BUS), 2.0) == 1.0
    batch = np.stack([vm, np.ones(N_BUS)])
    np.testing.assert_allclose(voltage_reward(batch, 10.0), [30 / 32 - 0.3, 1.0])


def test_specs_and_episode_contract() -> None:
    env = BUILTIN_ENVS["GridDefense"](seed=0, num_areas=4)
    assert isinstance(env, GridDefense)
    specs = env.behavior_specs
    assert sorted(specs) == [ATTACKER, DEFENDER]
    assert specs[DEFENDER].observation_specs[0].shape == (42,)
    assert specs[ATTACKER].observation_specs[0].shape == (39,)
    assert specs[DEFENDER].action_spec.continuous_size == 6 and specs[DEFENDER].action_spec.discrete_size == 0
    assert specs[ATTACKER].action_spec.continuous_size == 3 and specs[ATTACKER].action_spec.discrete_size == 0
    env.reset()
    ids = {}
    for name in (DEFENDER, ATTACKER):
        decision, terminal = env.get_steps(name)
        assert len(decision) == 4 and len(terminal) == 0
        assert decision.obs[0].shape == (4, specs[name].observation_specs[0].shape[0])
        assert decision.obs[0].dtype == np.float32 and np.all(np.abs(decision.obs[0]) < 10)
        np.testing.assert_allclose(decision.obs[0][:, 32:34], [[0.0, 1.0]] * 4, atol=1e-6)  # 0:00
        ids[name] = set(decision.agent_id.tolist())
    assert not ids[DEFENDER] & ids[ATTACKER]
    rng = np.random.default_rng(0)
    for episode in range(2):
        rewards = []
        for k in range(1, 25):
            step_with(env, *random_actions(rng, 4))
            d_dec, d_term = env.get_steps(DEFENDER)
            a_dec, a_term = env.get_steps(ATTACKER)
            if k < 24:
                assert len(d_term) == len(a_term) == 0, (episode, k)
                np.testing.assert_array_equal(d_dec.reward, a_dec.reward)  # one reward for both behaviors
                rewards.append(d_dec.reward)
                angle = 2 * np.pi * k / 24
                np.testing.assert_allclose(d_dec.obs[0][0, 32:34], [np.sin(angle), np.cos(angle)], atol=1e-6)
            else:  # the day is over: both behaviors' agents end, interrupted, and start a new day
                for dec, term, name in ((d_dec, d_term, DEFENDER), (a_dec, a_term, ATTACKER)):
                    assert len(term) == 4 and term.interrupted.all()
                    assert set(term.agent_id.tolist()) == ids[name] == set(dec.agent_id.tolist())
                    np.testing.assert_array_equal(dec.reward, 0.0)
                np.testing.assert_array_equal(d_term.reward, a_term.reward)
                rewards.append(d_term.reward)
        r = np.array(rewards)
        assert r.shape == (24, 4) and np.all(r <= 1.0) and np.all(r > -10.0)
        assert r.min() < 1.0  # random actions do violate the band


def test_reward_matches_the_voltages_and_held_setpoints_are_observed() -> None:
    env = GridDefense(seed=3, num_areas=3)
    env.reset()
    rng = np.random.default_rng(3)
    for _ in range(13):
        defend, attack = random_actions(rng, 3)
        step_with(env, defend, attack)
    decision, _ = env.get_steps(DEFENDER)
    for area in range(3):
        _, _, vm = env.operating_point(area)
        assert decision.reward[area] == pytest.approx(voltage_reward(vm, 2.0), abs=1e-6)
    np.testing.assert_allclose(decision.obs[0][:, -6:], defend.continuous, atol=1e-6)
    np.testing.assert_allclose(env.get_steps(ATTACKER)[0].obs[0][:, -3:], attack.continuous, atol=1e-6)


def test_missing_actions_are_zero_and_set_action_for_agent() -> None:
    a, b, c = (GridDefense(seed=5, num_areas=2) for _ in range(3))
    for env in (a, b, c):
        env.reset()
    zeros = ActionTuple(continuous=np.zeros((2, 6), np.float32)), ActionTuple(continuous=np.zeros((2, 3), np.float32))
    one = ActionTuple(continuous=np.full((1, 6), 0.5, np.float32))
    for _ in range(10):
        step_with(a, *zeros)
        b.step()
        c.set_action_for_agent(DEFENDER, 1, one)
        c.step()
    np.testing.assert_array_equal(a.get_steps(DEFENDER)[0].obs[0], b.get_steps(DEFENDER)[0].obs[0])
    obs_c = c.get_steps(DEFENDER)[0].obs[0]
    np.testing.assert_array_equal(obs_c[0], b.get_steps(DEFENDER)[0].obs[0][0])
    np.testing.assert_allclose(obs_c[1, -6:], 0.5)
    with pytest.raises(KeyError, match="Defender"):
        a.get_steps("Nope")


def test_environment_parameters() -> None:
    with pytest.raises(ValueError, match="bogus.*load_scale"):
        GridDefense(bogus=1.0)
    env = GridDefense(seed=1, num_areas=2, steps_per_day=12, load_scale=1.1)
    assert env.params["load_scale"] == 1.1
    with pytest.raises(ValueError, match="'voltage'.*attack_strength"):
        env.set_environment_parameters({"voltage": 1.0})
    with pytest.raises(ValueError, match="out of range"):
        env.set_environment_parameters({"pv_scale": -1.0})
    env.reset()
    rng = np.random.default_rng(1)
    env.set_environment_parameters({"attack_strength": 0.0, "steps_per_day": 6})
    length = 0
    while True:  # the running day keeps its parameters and length
        step_with(env, *random_actions(rng, 2))
        length += 1
        if len(env.get_steps(DEFENDER)[1]):
            break
    assert length == 12 and env.steps_per_day == 6 and env.params["attack_strength"] == 0.0
    # From the next day on the attacker is powerless: its actions change nothing.
    twin = GridDefense(seed=9, num_areas=2, attack_strength=0.0)
    other = GridDefense(seed=9, num_areas=2, attack_strength=0.0)
    twin.reset()
    other.reset()
    for _ in range(8):
        defend, attack = random_actions(rng, 2)
        step_with(twin, defend, attack)
        other.set_actions(DEFENDER, defend)
        other.step()
        np.testing.assert_array_equal(twin.get_steps(DEFENDER)[0].reward, other.get_steps(DEFENDER)[0].reward)


def test_determinism() -> None:
    def trace(seed: int) -> np.ndarray:
        env = GridDefense(seed=seed, num_areas=4)
        env.reset()
        rng = np.random.default_rng(0)
        out = []
        for _ in range(30):
            step_with(env, *random_actions(rng, 4))
            out.append(np.concatenate([env.get_steps(DEFENDER)[0].obs[0].ravel(), env.get_steps(ATTACKER)[0].reward]))
        return np.array(out)

    np.testing.assert_array_equal(trace(7), trace(7))
    assert not np.array_equal(trace(7), trace(8))
