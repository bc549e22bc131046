"""Reward signals: ML-Agents' reward providers (extrinsic, curiosity, GAIL, RND) as torch modules.

A trainer builds one provider per configured signal with ``make_reward_providers``, evaluates
each on its experience (the reward before ``strength``), keeps a value head per signal with the
signal's ``gamma``, and calls ``update`` on the learned signals with its minibatches.
"""

from __future__ import annotations

from typing import Optional

from mlagents_envs.base_env import BehaviorSpec

from ml_arl.networks.encoders import encoder_problem
from ml_arl.settings import CuriositySettings, GAILSettings, RewardSignals, RNDSettings
from ml_arl.trainers.reward_signals.base import (
    ExtrinsicProvider,
    LearnerSync,
    RewardProvider,
    SignalBatch,
    flatten_actions,
)
from ml_arl.trainers.reward_signals.curiosity import CuriosityProvider
from ml_arl.trainers.reward_signals.gail import GAILProvider
from ml_arl.trainers.reward_signals.rnd import RNDProvider

__all__ = [
    "CuriosityProvider",
    "ExtrinsicProvider",
    "GAILProvider",
    "LearnerSync",
    "RNDProvider",
    "RewardProvider",
    "SignalBatch",
    "flatten_actions",
    "make_reward_providers",
]


def _visual_problem(name: str, spec: BehaviorSpec, kind: str) -> Optional[str]:
    """Why the signal's encoder cannot take this behavior's images (the actor's check, worded
    for the signal's own network_settings)."""
    for i, obs in enumerate(spec.observation_specs):
        if len(obs.shape) == 3:
            problem = encoder_problem(kind, i, int(obs.shape[0]), int(obs.shape[1]))
            if problem is not None:
                return f"reward_signals.{name}.network_settings.vis_encode_type: {problem}"
    return None


def make_reward_providers(
    signals: RewardSignals, spec: BehaviorSpec, expert: Optional[SignalBatch] = None
) -> dict[str, RewardProvider]:
    """One provider per configured signal, keyed by its name under reward_signals, in the order
    of ``signals.items()``. ``expert`` holds the demonstrations of gail's demo_path (required
    when gail is configured). Raises ValueError for what cannot be built."""
    providers: dict[str, RewardProvider] = {}
    for name, settings in signals.items():
        problem = _visual_problem(name, spec, settings.network_settings.vis_encode_type)
        if problem is not None and name != "extrinsic":
            raise ValueError(problem)
        provider: RewardProvider
        if isinstance(settings, CuriositySettings):
            provider = CuriosityProvider(spec, settings)
        elif isinstance(settings, RNDSettings):
            provider = RNDProvider(spec, settings)
        elif isinstance(settings, GAILSettings):
            if expert is None:
                raise ValueError(f"reward_signals.gail needs the demonstrations of demo_path '{settings.demo_path}'")
            provider = GAILProvider(spec, settings, expert)
        else:
            provider = ExtrinsicProvider(settings)
        providers[name] = provider
    return providers
