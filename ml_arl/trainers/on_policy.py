"""What PPO and POCA share, as ML-Agents' OnPolicyTrainer does: an actor (``ActorCritic``) with its
reward streams, one Adam over the trained parameters, behavioral cloning, the observation
normaliser updated as each trajectory arrives, the learning-rate / epsilon / beta schedules with
ML-Agents' floors, the workers' policy snapshot, the ONNX actor and the checkpoint state. Each
trainer keeps its buffer, its batch, its loss and its advantages."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from typing import Any, Optional, TypeVar

import numpy as np
import torch

from ml_arl.acting.muscle import env_continuous
from ml_arl.core.actor_weights import ActorWeights, PolicySnapshot
from ml_arl.core.behavior_id import brain_name
from ml_arl.core.exceptions import ConfigError
from ml_arl.core.experience import Trajectory
from ml_arl.networks.actor_critic import ActorCritic
from ml_arl.settings.trainer_settings import _ClippedPolicySettings
from ml_arl.trainers.behavioral_cloning import BehavioralCloning, make_behavioral_cloning
from ml_arl.trainers.optimizers import Adam
from ml_arl.trainers.reward_streams import Actions, RewardStreams
from ml_arl.trainers.trainer import Trainer

HP = TypeVar("HP", bound=_ClippedPolicySettings)
T = TypeVar("T")

# ML-Agents' floors of the linear schedules (ppo/optimizer_torch.py, poca/optimizer_torch.py)
LR_FLOOR, EPSILON_FLOOR, BETA_FLOOR = 1e-10, 0.1, 1e-5
STATISTICS_TOLERANCE = 0.05  # see OnPolicyTrainer.statistics_moved


class OnPolicyTrainer(Trainer[HP]):
    network: ActorCritic
    optimizer: Adam
    clip_groups: list[list[torch.nn.Parameter]]

    env_actions: Actions = staticmethod(env_continuous)  # what a stored action becomes as the env got it

    def build(self) -> None:
        self.streams = RewardStreams(self.behavior, self.settings, self.spec, self.env_actions, self.device)
        memory = self.settings.network_settings.memory
        self.sequence_length = memory.sequence_length if memory is not None else 1
        self.bc: Optional[BehavioralCloning] = None
        # the normaliser's mean and deviation in the last published policy (None before the first)
        self._acting_statistics: tuple[Optional[np.ndarray], Optional[np.ndarray]] = (None, None)
        self.build_networks()

    @abstractmethod
    def build_networks(self) -> None:
        """The trainer's networks (``self.network``: the actor), then ``_train`` with their parameters."""

    def stream_targets(
        self, trajs: list[Trajectory], stream_rewards: list[np.ndarray], values: np.ndarray, next_values: np.ndarray,
        terminal: Callable[[Trajectory], bool], estimate: Callable[..., np.ndarray], lambd: float,
    ) -> np.ndarray:
        """[steps, streams]: ``estimate(rewards, values, value_next, gamma, lambd)`` (GAE, lambda returns)
        for every trajectory and reward stream, bootstrapped from the value after its last step
        unless it ended ``terminal`` (a stream that ignores dones bootstraps always)."""
        streams = self.streams
        out = np.empty_like(values)
        start = 0
        for i, (traj, rewards) in enumerate(zip(trajs, stream_rewards)):
            end = start + len(traj)
            ended = terminal(traj)
            for k in range(len(streams.names)):
                value_next = 0.0 if ended and not streams.ignore_done[k] else float(next_values[i, k])
                out[start:end, k] = estimate(rewards[:, k], values[start:end, k], value_next, streams.gammas[k], lambd)
            start = end
        return out

    def _networks(self, build: Callable[[], T]) -> T:
        """``build()``, with a behavior whose observations do not fit network_settings as a config error."""
        try:
            return build()
        except ValueError as err:
            raise ConfigError([f"behaviors.{brain_name(self.behavior)}.{err}"]) from None

    def _train(self, parameters: list[torch.nn.Parameter]) -> None:
        """One Adam over ``parameters`` and behavioral cloning beside it (once the networks exist)."""
        hp, settings = self.hp, self.settings
        self.optimizer = Adam(parameters, lr=hp.learning_rate)
        # the gradients max_grad_norm clips jointly: all of them, or the actor's and the rest (the critic's) apart
        actor = {id(p) for p in self.network.actor_parameters()}
        self.clip_groups = [parameters] if not hp.max_grad_norm_per_network else [
            [p for p in parameters if id(p) in actor], [p for p in parameters if id(p) not in actor]]
        self.bc = make_behavioral_cloning(  # ML-Agents' on-policy trainers share the BC module
            self.behavior, settings.behavioral_cloning, self.network, hp.learning_rate, hp.batch_size,
            hp.num_epoch, self.device, self.rng, self.sequence_length,
        )

    def policy_snapshot(self) -> PolicySnapshot:
        weights = self.network.muscle_weights()
        self._acting_statistics = (weights.norm_mean, weights.norm_std)
        return PolicySnapshot(self.policy_version, weights)

    def load_first_actor(self, weights: ActorWeights) -> None:
        """Start from the actor the quick start acted with (``ml_arl.training.quick_start``)."""
        self.network.load_actor(weights)

    def statistics_moved(self) -> bool:
        """ML-Agents' workers act with the trainer's own normaliser, which each arriving trajectory
        updates; ours act with the published one. Publish again between updates once any input's
        normalised value would move by more than ``STATISTICS_TOLERANCE`` (a mean shift in units of
        its standard deviation, or a relative change of that deviation): early in a run at each
        batch of trajectories, later rarely."""
        if not self.network.normalize:
            return False
        mean, std = self._acting_statistics
        if mean is None or std is None:
            return True
        new_mean = self.network.normalizer.mean.cpu().numpy()
        new_std = self.network.normalizer.std().cpu().numpy()
        shift = np.abs(new_mean - mean) / new_std
        scale = np.abs(new_std / std - 1.0)
        return bool(max(float(shift.max(initial=0.0)), float(scale.max(initial=0.0))) > STATISTICS_TOLERANCE)

    def onnx_actor(self) -> ActorCritic:
        return self.network

    def _update_normalizer(self, traj: Trajectory) -> None:
        """ML-Agents updates the normaliser with each trajectory as it arrives."""
        if self.network.normalize:
            vectors = self.network.vector_part([torch.as_tensor(o, device=self.device) for o in traj.obs])
            if vectors is not None:
                self.network.normalizer.update(vectors)

    def _schedules(self) -> tuple[float, float]:
        """(epsilon, beta) at this step; the optimizer takes this step's learning rate."""
        hp = self.hp
        self.optimizer.lr = self.scheduled(hp.learning_rate, LR_FLOOR, hp.learning_rate_schedule)
        epsilon = self.scheduled(hp.epsilon, EPSILON_FLOOR, hp.epsilon_schedule or "linear")
        beta = self.scheduled(hp.beta, BETA_FLOOR, hp.beta_schedule or "linear")
        return epsilon, beta

    # ------------------------------------------------------------------ persistence
    def _extra_state(self) -> dict[str, Any]:
        """More of the trainer's networks to keep (POCA's critic)."""
        return {}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        """Restore what ``_extra_state`` kept."""

    def state(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            "Policy": self.network.state_dict(),
            **self._extra_state(),
            "Optimizer": self.optimizer.state_dict(),
            "global_step": self.step,
            "policy_version": self.policy_version,
        }
        if self.streams.stateful:
            state["RewardSignals"] = self.streams.state()
        if self.bc is not None:
            state["BehavioralCloning"] = self.bc.state()
        return state

    def load_state(self, state: dict[str, Any], resume: bool) -> None:
        self.network.load_state_dict(state["Policy"])
        self._load_extra_state(state)
        self.streams.load_state(state.get("RewardSignals"))
        if resume:
            self.optimizer.load_state_dict(state["Optimizer"])
            if self.bc is not None:
                self.bc.load_state(state.get("BehavioralCloning"))
            self.step = int(state["global_step"])
            self.policy_version = int(state.get("policy_version", 0))
