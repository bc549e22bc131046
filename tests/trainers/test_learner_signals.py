"""Reward signals with ``--num-learners`` (ml_arl.trainers.on_policy_group, ml_arl.trainers.sac.grouped):
each learner steps the learned signals on its rows of every minibatch, their gradients all-reduced
and their normalisers taking in every learner's rows, so the signals stay in agreement, and two
learners give the update one learner gives on the joined minibatch."""

from __future__ import annotations

import copy
import threading
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ml_arl.networks.encoders import Normalizer
from ml_arl.results.summary_writers import StatsReporter
from ml_arl.settings import build_run_options
from ml_arl.trainers.learner_group import LearnerGroup
from ml_arl.trainers.ppo.trainer import PPOTrainer
from ml_arl.trainers.reward_signals import GAILProvider, LearnerSync, SignalBatch, make_reward_providers
from tests.trainers.test_learners import DISCRETE, SPEC, _trajectories, discrete_trajectories

SIGNALS = {"extrinsic": {"gamma": 0.99}, "curiosity": {"strength": 0.02, "network_settings": {"hidden_units": 16}},
           "rnd": {"strength": 0.01, "network_settings": {"hidden_units": 16, "normalize": True}}}


def _signal_tensors(trainer: Any) -> list[torch.Tensor]:
    """Every learned signal's parameters and buffers (RND's normaliser statistics among them)."""
    return [t.detach().clone() for p in trainer.streams.learned.values() for t in [*p.parameters(), *p.buffers()]]


def _ppo() -> PPOTrainer:
    section = {"hyperparameters": {"batch_size": 128, "buffer_size": 128, "num_epoch": 3, "max_grad_norm": 0.5},
               "network_settings": {"hidden_units": 16, "num_layers": 2, "normalize": True}, "reward_signals": SIGNALS}
    settings = build_run_options({"behaviors": {"B": section}}, {}, "test").behaviors["B"]
    torch.manual_seed(0)
    return PPOTrainer("B", settings, SPEC, StatsReporter("B", []), None, torch.device("cpu"), seed=3)


def _close(a: list[torch.Tensor], b: list[torch.Tensor]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y, atol=1e-5, rtol=1e-4)


def test_two_ppo_learners_step_curiosity_and_rnd_as_one_learner_does(tmp_path: Path) -> None:
    """Two updates; after each, the policy and both signals (and RND's normaliser) of two learners
    on 64 rows each equal one learner's on the 128 rows. The second update's rewards come from
    the signals the first one trained, so they must agree for the policies to."""
    single, grouped = _ppo(), _ppo()
    start = _signal_tensors(single)
    group = LearnerGroup(2, str(tmp_path))
    grouped.learners = group
    try:
        for seed in (1, 2):
            for traj in _trajectories(seed):
                single.add_experience(traj)
                grouped.add_experience(traj)
            single.update()
            grouped.update()
            _close(_signal_tensors(single), _signal_tensors(grouped))
            _close([p.detach() for p in single.network.parameters()], [p.detach() for p in grouped.network.parameters()])
    finally:
        group.close()
    assert max(float((a - b).abs().max()) for a, b in zip(start, _signal_tensors(single)) if a.is_floating_point()) > 1e-3
    assert float(single.streams.learned["rnd"].normalizer.count) > 200  # it took in the rows of every minibatch


def _sac() -> Any:
    from ml_arl.trainers.sac.trainer import SACTrainer

    section = {"trainer_type": "sac",
               "hyperparameters": {"batch_size": 64, "buffer_size": 1000, "buffer_init_steps": 0, "steps_per_update": 10,
                                   "reward_signal_steps_per_update": 20},
               "network_settings": {"hidden_units": 16, "num_layers": 2, "normalize": True}, "reward_signals": SIGNALS}
    settings = build_run_options({"behaviors": {"B": section}}, {}, "test").behaviors["B"]
    torch.manual_seed(0)
    return SACTrainer("B", settings, DISCRETE, StatsReporter("B", []), None, torch.device("cpu"), seed=3)


def test_two_sac_learners_step_curiosity_and_rnd_as_one_learner_does(tmp_path: Path) -> None:
    """SAC evaluates the signals inside each gradient step, then takes the signals' own steps due:
    with discrete actions nothing else is drawn at random, so two learners equal one."""
    single, grouped = _sac(), _sac()
    group = LearnerGroup(2, str(tmp_path))
    grouped.learners = group
    try:
        for round_ in (1, 2):
            for traj in discrete_trajectories(round_):
                single.add_experience(traj)
                grouped.add_experience(traj)
            single.step = grouped.step = 128 * round_
            single.update()
            grouped.update()
            assert single.signal_update_steps == grouped.signal_update_steps > 1
            _close(_signal_tensors(single), _signal_tensors(grouped))
            _close([p.detach() for p in single.q1.parameters()], [p.detach() for p in grouped.q1.parameters()])
    finally:
        group.close()


class ThreadGroup:
    """Learners as threads of this process, for a unit test of LearnerSync's use: each collective
    is an exchange through shared slots between two barriers."""

    def __init__(self, world: int):
        self.world = world
        self.slots: list[Any] = [None] * world
        self.barrier = threading.Barrier(world, timeout=30)

    def _exchange(self, rank: int, value: Any) -> list[Any]:
        self.slots[rank] = value
        self.barrier.wait()
        out = list(self.slots)
        self.barrier.wait()
        return out

    def sync(self, rank: int) -> LearnerSync:
        def gradients(params: list[torch.Tensor]) -> None:
            grads = [p.grad for p in params if p.grad is not None]
            every = self._exchange(rank, [g.clone() for g in grads])
            for k, g in enumerate(grads):
                g.copy_(sum(e[k] for e in every) / self.world)

        return LearnerSync(gradients, lambda x: self._exchange(rank, x.clone()))


def test_gail_learners_stay_in_agreement_though_each_draws_its_own_expert_rows() -> None:
    """GAIL draws expert rows and penalty points at random on each learner; with the gradients
    averaged and the normaliser taking in every learner's expert rows, two replicas that start
    equal end equal, and their normaliser holds both learners' draws."""
    rng = np.random.default_rng(0)
    expert = SignalBatch.from_arrays([rng.normal(size=(200, 5)).astype(np.float32)], rng.normal(size=(200, 2)),
                                     rng.integers(0, 3, size=(200, 1)), np.zeros(200))
    settings = build_run_options({"behaviors": {"B": {"reward_signals": {
        "gail": {"demo_path": "unused.demo", "use_vail": True, "network_settings": {"hidden_units": 16, "normalize": True}}}}}},
        {}, "test").behaviors["B"].reward_signals
    torch.manual_seed(0)
    first = make_reward_providers(settings, SPEC, expert)["gail"]
    assert isinstance(first, GAILProvider)
    replicas = [first, copy.deepcopy(first)]
    assert replicas[1].optimizer is not None and replicas[1].optimizer.params[0] is next(replicas[1].parameters())
    group, errors = ThreadGroup(2), []
    batches = [SignalBatch.from_arrays([rng.normal(size=(32, 5)).astype(np.float32)], rng.normal(size=(32, 2)),
                                       rng.integers(0, 3, size=(32, 1)), np.zeros(32)) for _ in range(2)]

    def learner(rank: int) -> None:
        try:
            for _ in range(3):
                replicas[rank].update(batches[rank], group.sync(rank))
        except Exception as err:  # noqa: BLE001 - handed to the test's thread
            errors.append(err)

    threads = [threading.Thread(target=learner, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    for a, b in zip(replicas[0].state_dict().values(), replicas[1].state_dict().values()):
        if isinstance(a, torch.Tensor):
            torch.testing.assert_close(a, b)
    normalizer: Normalizer = replicas[0].normalizer
    assert float(normalizer.count) == 1 + 3 * 2 * 32  # both learners' expert rows, three times
