"""Writing one behavior's acted episodes as a .demo file that ML-Agents' loader (and
``ml_arl.demonstrations.load_demonstrations``) reads.

Trajectories of several agents arrive interleaved, each agent's in order and cut at time_horizon;
ML-Agents' loader pairs consecutive records, so each agent's steps are buffered until its episode
ends and then written as one contiguous run: one record per step (observation, the reward received
since the previous step, the action) and a terminal record (the last observation, the last
reward, done, max_step_reached for a max-step cut). The file is a temporary one until ``close()``
puts the header in front and renames it into place.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
from mlagents_envs.base_env import BehaviorSpec

from ml_arl.core.atomic_files import AtomicFile, write_error
from ml_arl.core.behavior_id import brain_name
from ml_arl.core.experience import Trajectory
from ml_arl.demonstrations.format import META_BYTES, brain_parameters, delimited, meta_header, observation_proto
from ml_arl.protocol.communicator_objects.agent_action_pb2 import AgentActionProto
from ml_arl.protocol.communicator_objects.agent_info_action_pair_pb2 import AgentInfoActionPairProto
from ml_arl.protocol.communicator_objects.agent_info_pb2 import AgentInfoProto

logger = logging.getLogger(__name__)

ADVICE = "no demonstrations were saved. Free disk space or pass a writable folder to --record-demo"


@dataclass
class _Unfinished:
    """One agent's trajectories of the episode in progress."""

    parts: list[Trajectory] = field(default_factory=list)
    continuous: list[np.ndarray] = field(default_factory=list)  # of each part, as the environment received them

    @property
    def steps(self) -> int:
        return sum(len(t) for t in self.parts)


def _same_observation(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


class DemoWriter:
    """Writes the finished episodes of one behavior to ``path`` (a .demo file), atomically.

    ``add`` takes the behavior's trajectories as they come (any agents, interleaved), with their
    continuous actions as the environment received them when ``trajectory.continuous`` holds raw
    samples (``ml_arl.training.demo_recording.sent_continuous``). An agent's trajectory that does not continue its previous one (its first observation
    is not the previous one's next observation: an environment reset in between) starts the
    episode afresh; the broken one is dropped. ``close`` writes the file if any episode finished
    (else writes nothing) and logs what was written and how many unfinished episodes were dropped.

    Observations that are images with 8-bit values (decoded from a build) are PNG-compressed when
    ``compress_images``; other observations are float data. ``name`` goes in the metadata
    (shortened to fit Unity's 32 bytes)."""

    def __init__(self, path: str, behavior: str, spec: BehaviorSpec, name: Optional[str] = None, compress_images: bool = True):
        self.path = path
        self.behavior = behavior
        self.spec = spec
        self.name = name if name is not None else brain_name(behavior)
        self.compress_images = compress_images
        self.episodes = 0  # finished episodes written
        self.steps = 0  # their steps (records: steps + episodes)
        self.reward_sum = 0.0  # of the episodes written
        self.dropped_episodes = 0  # broken by a reset
        self._unfinished: dict[str, _Unfinished] = {}
        self._file: Optional[AtomicFile] = AtomicFile(path, ADVICE)
        self._write(bytes(META_BYTES) + delimited(brain_parameters(brain_name(behavior), spec.action_spec)))

    def add(self, trajectory: Trajectory, continuous: Optional[np.ndarray] = None) -> None:
        """One trajectory; ``continuous`` [T, n_continuous]: the actions sent, if not ``trajectory.continuous``."""
        if self._file is None:
            raise RuntimeError(f"{self.path}: the demo writer is closed")
        current = self._unfinished.setdefault(trajectory.agent_id, _Unfinished())
        if current.parts:
            previous = current.parts[-1]
            if not _same_observation(previous.next_obs, [o[0] for o in trajectory.obs]):
                logger.debug("%s: agent %s's episode was cut off (reset); its %d steps are dropped",
                             self.behavior, trajectory.agent_id, current.steps)
                self.dropped_episodes += 1
                current.parts, current.continuous = [], []
        current.parts.append(trajectory)
        current.continuous.append(trajectory.continuous if continuous is None else continuous)
        if trajectory.done:
            del self._unfinished[trajectory.agent_id]
            self._write_episode(current.parts, current.continuous)

    def close(self) -> bool:
        """Put the header in front and the file in place; True if a file was written."""
        if self._file is None:
            return False
        file, self._file = self._file, None
        unfinished = [u for u in self._unfinished.values() if u.parts]
        if unfinished:
            logger.info(
                "%s: %d unfinished episode(s) (%d steps) were not written to %s; only finished episodes are",
                self.behavior, len(unfinished), sum(u.steps for u in unfinished), self.path,
            )
        if self.dropped_episodes:
            logger.info(
                "%s: %d episode(s) cut off by an environment reset were not written to %s",
                self.behavior, self.dropped_episodes, self.path,
            )
        self._unfinished.clear()
        if not self.episodes:
            file.discard()
            logger.warning("%s: no episode finished; no demonstrations written to %s", self.behavior, self.path)
            return False
        mean = self.reward_sum / self.episodes
        try:
            file.file.seek(0)
            file.file.write(meta_header(self.name, self.steps + self.episodes, self.episodes, mean))
        except OSError as err:
            file.discard()
            raise write_error(self.path, err, ADVICE) from None
        file.commit()
        logger.info(
            "%s: wrote %d episodes (%d steps, mean reward %.4g) to %s",
            self.behavior, self.episodes, self.steps, mean, self.path,
        )
        return True

    def discard(self) -> None:
        """Stop without writing anything."""
        if self._file is not None:
            self._file.discard()
            self._file = None

    # -------------------------------------------------------------------------------- records

    def _write(self, data: bytes) -> None:
        assert self._file is not None
        try:
            self._file.file.write(data)
        except OSError as err:
            self.discard()
            raise write_error(self.path, err, ADVICE) from None

    def _write_episode(self, parts: list[Trajectory], sent: list[np.ndarray]) -> None:
        """One record per step, then the terminal record, as one write."""
        obs = [np.concatenate([t.obs[k] for t in parts]) for k in range(len(self.spec.observation_specs))]
        continuous = np.concatenate(sent).astype(np.float32)
        discrete = np.concatenate([t.discrete for t in parts]).astype(np.int64)
        rewards = np.concatenate([t.env_rewards if t.env_rewards is not None else t.rewards for t in parts])
        group_rewards = np.concatenate([t.group_rewards for t in parts])
        allowed = [t.allowed for t in parts if t.allowed is not None]
        masks: Optional[np.ndarray] = ~np.concatenate(allowed) if len(allowed) == len(parts) else None  # True = masked
        last = parts[-1]
        episode_id = self.episodes
        records = []
        for t in range(len(rewards)):
            info = self._info([o[t] for o in obs], rewards[t - 1] if t else 0.0, group_rewards[t - 1] if t else 0.0,
                              episode_id, last.group_id)
            if masks is not None:
                info.action_mask.extend(masks[t].tolist())
            action = AgentActionProto(continuous_actions=continuous[t].tolist(), discrete_actions=discrete[t].tolist())
            records.append(delimited(AgentInfoActionPairProto(agent_info=info, action_info=action)))
        terminal = self._info(last.next_obs, rewards[-1], group_rewards[-1], episode_id, last.group_id)
        terminal.done = True
        terminal.max_step_reached = bool(last.interrupted)
        zero = AgentActionProto(
            continuous_actions=[0.0] * continuous.shape[1], discrete_actions=[0] * discrete.shape[1]
        )
        records.append(delimited(AgentInfoActionPairProto(agent_info=terminal, action_info=zero)))
        self._write(b"".join(records))
        self.episodes += 1
        self.steps += len(rewards)
        self.reward_sum += float(np.sum(rewards, dtype=np.float64))

    def _info(self, obs: list[np.ndarray], reward: float, group_reward: float, episode_id: int, group_id: int) -> Any:
        info = AgentInfoProto(reward=float(reward), id=episode_id, group_id=int(group_id), group_reward=float(group_reward))
        info.observations.extend(
            observation_proto(o, s, self.compress_images) for o, s in zip(obs, self.spec.observation_specs)
        )
        return info
