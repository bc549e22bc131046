"""Records tests/data/mlagents_1x.demo, a .demo written by ML-Agents 1.1.0's own writer
(``mlagents.trainers.demo_loader.write_demo``, with its generated messages under protobuf 3.20),
and tests/data/mlagents_1x.npz, what ML-Agents' own loader (``demo_to_buffer``) reads from it.
tests/demonstrations/test_demonstrations.py checks that ml_arl reads the same steps from the file.

Run once, in a venv with ML-Agents 1.1.0 (`make peer-mlagents` makes one: .venv-mlagents):

    VENV/bin/python tests/data/record_mlagents_demo.py

It imports nothing of ml_arl.
"""

from pathlib import Path

import numpy as np
from mlagents.trainers.buffer import BufferKey
from mlagents.trainers.demo_loader import demo_to_buffer, write_demo
from mlagents.trainers.trajectory import ObsUtil
from mlagents_envs.communicator_objects.agent_action_pb2 import AgentActionProto
from mlagents_envs.communicator_objects.agent_info_action_pair_pb2 import AgentInfoActionPairProto
from mlagents_envs.communicator_objects.agent_info_pb2 import AgentInfoProto
from mlagents_envs.communicator_objects.brain_parameters_pb2 import ActionSpecProto, BrainParametersProto
from mlagents_envs.communicator_objects.demonstration_meta_pb2 import DemonstrationMetaProto
from mlagents_envs.communicator_objects.observation_pb2 import NONE, ObservationProto

HERE = Path(__file__).resolve().parent
rng = np.random.default_rng(22)

records = []
returns = []
for episode, length in enumerate([4, 3, 5]):
    total = 0.0
    for t in range(length + 1):  # the last record is the terminal one (its reward, done, no decision)
        obs = ObservationProto(shape=[4], compression_type=NONE)
        obs.float_data.data.extend(rng.normal(size=4).astype(np.float32).tolist())
        reward = 0.0 if t == 0 else float(np.float32(rng.normal()))
        total += reward
        info = AgentInfoProto(reward=reward, done=t == length, max_step_reached=episode == 2 and t == length,
                              id=100 + episode, observations=[obs])
        action = AgentActionProto(continuous_actions=rng.uniform(-1, 1, 2).astype(np.float32).tolist(),
                                  discrete_actions=[int(rng.integers(3))])
        records.append(AgentInfoActionPairProto(agent_info=info, action_info=action))
    returns.append(total)

meta = DemonstrationMetaProto(api_version=1, demonstration_name="Hybrid", number_steps=len(records),
                              number_episodes=3, mean_reward=float(np.mean(returns)))
brain = BrainParametersProto(brain_name="Hybrid", is_training=True,
                             action_spec=ActionSpecProto(num_continuous_actions=2, num_discrete_actions=1, discrete_branch_sizes=[3]))
path = HERE / "mlagents_1x.demo"
write_demo(str(path), meta, brain, records)

spec, buffer = demo_to_buffer(str(path), 1)
np.savez(
    HERE / "mlagents_1x.npz",
    obs=np.asarray(buffer[ObsUtil.get_name_at(0)].get_batch(), np.float32),
    continuous=np.asarray(buffer[BufferKey.CONTINUOUS_ACTION].get_batch(), np.float32),
    discrete=np.asarray(buffer[BufferKey.DISCRETE_ACTION].get_batch(), np.int32),
    rewards=np.asarray(buffer[BufferKey.ENVIRONMENT_REWARDS].get_batch(), np.float32),
    dones=np.asarray(buffer[BufferKey.DONE].get_batch(), bool),
)
print(path.name, path.stat().st_size, "bytes;", buffer.num_experiences, "steps as ML-Agents reads them;", spec)
