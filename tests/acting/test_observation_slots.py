"""Observations written once into slots (ml_arl.acting.observation_slots): a shared slot pickles as
where it lies and unpickles as a view of the same memory, freed when its last view is gone; a heap
slot frees itself the same way; a full cap falls back to the heap; the files go when their worker
goes; and a trajectory is the same, value for value, whichever way it travelled."""

from __future__ import annotations

import gc
import glob
import mmap
import os
import pickle
import subprocess
import sys
import time

import numpy as np
import pytest
from mlagents_envs.base_env import ActionSpec, BehaviorSpec, DecisionSteps, TerminalSteps

from ml_arl.acting import observation_slots as slots_module
from ml_arl.acting.agent_processor import AgentProcessor
from ml_arl.acting.muscle import ActionInfo
from ml_arl.acting.observation_slots import FREE, TAKEN, SharedFiles, Slots, forget, remove_stale
from ml_arl.core.actor_weights import PolicyMessage
from ml_arl.core.behavior_specs import vector_obs_spec
from ml_arl.envs.backends.subprocess_env_manager import SubprocessEnvManager
from ml_arl.envs.sources import resolve_env
from ml_arl.networks.actor_critic import ActorCritic
from ml_arl.settings import EnvSettings, NetworkSettings

SHAPES = [(3,), (2, 2)]


def _files(tmp_path: object, cap: int = 2**20) -> SharedFiles:
    return SharedFiles(os.path.join(str(tmp_path), f"{slots_module.FILE_PREFIX}{os.getpid()}-0-0-"), cap)


def _owner(arr: np.ndarray) -> object:
    while isinstance(arr, np.ndarray) and arr.base is not None:
        arr = arr.base
    return arr.obj if isinstance(arr, memoryview) else arr


def test_a_shared_slot_pickles_as_where_it_lies_and_frees_itself_in_the_reader(tmp_path: object) -> None:
    slots = Slots(SHAPES, rows=5, files=_files(tmp_path))
    pool, slot = slots.take()
    assert pool.shared and pool.flags[slot] == TAKEN
    pool.blocks[0][slot, :4] = np.arange(12, dtype=np.float32).reshape(4, 3)
    pool.blocks[1][slot, :4] = 7.0
    obs, next_obs = pool.views(slot, 3)
    data = pickle.dumps((obs, next_obs))
    assert len(data) < 400  # where the rows lie, not the rows
    got_obs, got_next = pickle.loads(data)
    assert not glob.glob(pool.path)  # mapped on both sides: the name is gone
    np.testing.assert_array_equal(got_obs[0], np.arange(9, dtype=np.float32).reshape(3, 3))
    np.testing.assert_array_equal(got_next[0], [9.0, 10.0, 11.0])
    assert got_obs[1].shape == (3, 2, 2) and (got_obs[1] == 7.0).all()
    assert type(got_obs[0]) is np.ndarray and not got_obs[0].flags.owndata
    pool.blocks[0][slot, 0, 0] = -1.0  # the same memory, not a copy
    assert got_obs[0][0, 0] == -1.0
    del obs, next_obs
    gc.collect()
    assert pool.flags[slot] == TAKEN  # the reader still holds it
    del got_obs
    gc.collect()
    assert pool.flags[slot] == TAKEN
    del got_next
    gc.collect()
    assert pool.flags[slot] == FREE
    assert slots.take() == (pool, slot) or pool.flags[slot] == FREE


def test_heap_slots_free_themselves_and_full_pools_grow() -> None:
    slots = Slots(SHAPES, rows=4)
    taken = [slots.take() for _ in range(Slots.FIRST_SLOTS + 1)]
    assert len(slots.pools) == 2 and not slots.pools[0].shared
    pool, slot = taken[0]
    obs, _next = pool.views(slot, 2)
    assert pool.flags[slot] == TAKEN
    del obs, _next
    gc.collect()
    assert pool.flags[slot] == FREE
    pool.release(taken[1][1])
    assert pool.flags[taken[1][1]] == FREE


def test_past_the_cap_slots_are_on_the_heap(tmp_path: object) -> None:
    slot_bytes = slots_module.slot_layout(SHAPES, 5)[1]
    slots = Slots(SHAPES, rows=5, files=_files(tmp_path, cap=4 * slot_bytes + 64))
    taken = [slots.take() for _ in range(12)]
    pools = {id(p): p for p, _ in taken}.values()
    shared = [p for p in pools if p.shared]
    assert shared and sum(p.n_slots for p in shared) <= 4
    assert any(not p.shared for p in pools)
    freed = next((pool, slot) for pool, slot in taken if pool.shared)
    freed[0].release(freed[1])
    assert slots.take() == freed  # a shared slot free again is taken before any heap slot


def test_forget_and_stale_files_are_unlinked(tmp_path: object) -> None:
    files = _files(tmp_path)
    made = files.create(4096)
    assert made is not None and os.path.exists(made[1])
    forget(files.prefix)
    assert not os.path.exists(made[1])
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = os.path.join(str(tmp_path), f"{slots_module.FILE_PREFIX}{int(dead.stdout)}-0-0-0")
    live = os.path.join(str(tmp_path), f"{slots_module.FILE_PREFIX}{os.getpid()}-9-0-0")
    fresh = stale[:-1] + "1"
    for path in (stale, live, fresh):
        open(path, "wb").close()
    hour_ago = time.time() - 3600
    for path in (stale, live):
        os.utime(path, (hour_ago, hour_ago))
    remove_stale(str(tmp_path))
    assert not os.path.exists(stale) and os.path.exists(live)
    assert os.path.exists(fresh)  # a dead pid's new file: maybe another pid namespace's live run


def _step(ids: list[int], obs: np.ndarray) -> DecisionSteps:
    n = len(ids)
    return DecisionSteps([obs], np.ones(n, np.float32), np.asarray(ids, np.int32), None, np.zeros(n, np.int32),
                         np.zeros(n, np.float32))


def _info(n: int) -> ActionInfo:
    return ActionInfo(np.zeros((n, 1), np.float32), np.zeros((n, 0), np.int32), np.zeros((n, 1), np.float32),
                      np.zeros(n, np.float32), None, None, None)


@pytest.mark.parametrize("shared", [False, True])
def test_trajectories_are_the_same_from_a_shared_or_a_heap_slot(tmp_path: object, shared: bool) -> None:
    spec = BehaviorSpec([vector_obs_spec(2)], ActionSpec(1, ()))
    proc = AgentProcessor("B", spec, time_horizon=3, worker_id=0, shared=_files(tmp_path) if shared else None)
    rng = np.random.default_rng(0)
    seen = []
    for t in range(7):
        ids = [0, 1] if t != 4 else [1, 0]  # once out of order: rows written one by one
        obs = rng.random((2, 2), dtype=np.float32)
        seen.append({i: obs[k].copy() for k, i in enumerate(ids)})
        proc.add_experiences(_step(ids, obs), TerminalSteps.empty(spec), _info(2))
    trajs, _ = proc.take()
    trajs = pickle.loads(pickle.dumps(trajs))
    assert [len(t) for t in trajs] == [3, 3, 3, 3]
    for traj in trajs:
        agent = int(traj.agent_id.split("-")[1])
        first = 0 if traj.obs[0][0].tolist() == seen[0][agent].tolist() else 3
        np.testing.assert_array_equal(traj.obs[0], np.stack([seen[first + t][agent] for t in range(3)]))
        np.testing.assert_array_equal(traj.next_obs[0], seen[first + 3][agent])
        assert shared == (not traj.obs[0].flags.owndata)


def test_a_new_time_horizon_takes_new_slots_and_cuts_old_ones_at_their_size(tmp_path: object) -> None:
    spec = BehaviorSpec([vector_obs_spec(2)], ActionSpec(1, ()))
    proc = AgentProcessor("B", spec, time_horizon=2, worker_id=0, shared=_files(tmp_path))
    obs = np.zeros((1, 2), np.float32)
    for t in range(2):
        proc.add_experiences(_step([0], obs + t), TerminalSteps.empty(spec), _info(1))
    proc.time_horizon = 5  # a phase with a longer horizon: the trajectory begun in a 3-row slot ends at 2 steps
    for t in range(2, 14):
        proc.add_experiences(_step([0], obs + t), TerminalSteps.empty(spec), _info(1))
    trajs, _ = proc.take()
    assert [len(t) for t in trajs] == [2, 5, 5]
    assert [t.obs[0][0, 0] for t in trajs] == [0, 2, 7] and [t.next_obs[0][0] for t in trajs] == [2, 7, 12]


def test_a_worker_ships_views_of_shared_memory_and_leaves_no_file() -> None:
    settings = EnvSettings(env_path="builtin:Trivial", timeout_wait=60, num_envs=2, steps_per_message=40)
    manager = SubprocessEnvManager(resolve_env(settings.env_path, settings.env_args), settings, 0)
    try:
        spec = manager.start()["Trivial"]
        manager.set_policy("Trivial", PolicyMessage(1, ActorCritic(spec, NetworkSettings(hidden_units=8)).muscle_weights(), 16, True))
        trajs = []
        for _ in range(20):
            trajs += [t for b in manager.step() for t in b.trajectories]
        assert trajs and {len(t) for t in trajs} <= {16, 100 % 16}  # Trivial: episodes of 100 steps
        assert all(not t.obs[0].flags.owndata and isinstance(_owner(t.obs[0]), mmap.mmap) for t in trajs)
        prefixes = [w.shared_prefix for w in manager.workers]
    finally:
        manager.close()
    assert all(prefixes) and not [p for prefix in prefixes for p in glob.glob(prefix + "*")]
