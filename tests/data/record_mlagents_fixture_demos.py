"""Records tests/data/goal_reach_mlagents.demo and tests/data/momentum_mlagents.demo the way
ML-Agents' own learning tests make their demonstrations (the ``simple_record`` fixture of
ml-agents' test_simple_rl.py: an expert steps the environment, and after every step
``proto_from_steps_and_action`` pairs the step's AgentInfos with the action just taken; then
ML-Agents 1.1.0's ``write_demo`` writes the last 100 records).

That pairing has three traits our own recorder does not, and which the imitation tests must
meet (issue 51):
- the AgentInfos of a step are the decision steps', then the terminal steps', zipped with one
  action: the terminal AgentInfo of an episode is dropped, so no record is ``done``;
- the first record of an episode carries the action taken at the previous episode's last step;
- only the last 100 records are kept (about 16 GoalReach episodes).
The metadata is an empty DemonstrationMetaProto and the brain parameters the deprecated fields, as
the fixture writes them.

Run in a venv with ML-Agents 1.1.0 (``make peer-mlagents`` makes one: .venv-mlagents), from the
repository root:

    .venv-mlagents/bin/python tests/data/record_mlagents_fixture_demos.py

It imports nothing of ml_arl: the environments are tests/support's (numpy and mlagents_envs only).
"""

import sys
from pathlib import Path

import numpy as np
from mlagents.trainers.demo_loader import write_demo
from mlagents_envs.base_env import ActionTuple
from mlagents_envs.communicator_objects.agent_action_pb2 import AgentActionProto
from mlagents_envs.communicator_objects.agent_info_action_pair_pb2 import AgentInfoActionPairProto
from mlagents_envs.communicator_objects.agent_info_pb2 import AgentInfoProto
from mlagents_envs.communicator_objects.brain_parameters_pb2 import BrainParametersProto
from mlagents_envs.communicator_objects.demonstration_meta_pb2 import DemonstrationMetaProto
from mlagents_envs.communicator_objects.observation_pb2 import NONE, ObservationProto

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from tests.support.momentum_env import Momentum  # noqa: E402
from tests.support.simple_envs import GoalReach  # noqa: E402

N_DEMOS = 100  # the fixture's RecordEnvironment(..., n_demos=100)


def infos(steps, done: bool) -> list:
    out = []
    for index, agent in enumerate(steps.agent_id):
        observations = []
        for obs in steps.obs:
            proto = ObservationProto(shape=list(obs.shape[1:]), compression_type=NONE)
            proto.float_data.data.extend(obs[index].reshape(-1).tolist())
            observations.append(proto)
        cut = bool(steps.interrupted[index]) if done else False
        out.append(AgentInfoProto(reward=float(steps.reward[index]), done=done, id=int(agent), max_step_reached=cut,
                                  observations=observations))
    return out


def record(env, behavior: str, expert, path: Path) -> None:
    env.reset()
    records: list = []
    for _ in range(N_DEMOS):
        decision, _ = env.get_steps(behavior)
        action = np.array([[expert(env, decision)]], np.float32)
        env.set_actions(behavior, ActionTuple(continuous=action))
        env.step()
        decision, terminal = env.get_steps(behavior)
        proto = AgentActionProto()
        proto.continuous_actions.extend(action[0].tolist())
        proto.vector_actions_deprecated.extend(action[0].tolist())
        # zip with the one action: the first AgentInfo (the decision step's) only
        step_infos = infos(decision, False) + infos(terminal, True)
        records += [AgentInfoActionPairProto(agent_info=i, action_info=a) for i, a in zip(step_infos, [proto])]
        records = records[-N_DEMOS:]
    brain = BrainParametersProto(vector_action_size_deprecated=[1], vector_action_descriptions_deprecated=[""],
                                 vector_action_space_type_deprecated=1, brain_name=behavior, is_training=True)
    write_demo(str(path), DemonstrationMetaProto(), brain, records)
    print(f"{path}: {len(records)} records")


record(GoalReach(1, 0, seed=11), "GoalReach", lambda env, d: float(env.goal[0]), HERE / "goal_reach_mlagents.demo")
record(Momentum(seed=12), "Momentum", lambda env, d: float(d.obs[0][0, 0]), HERE / "momentum_mlagents.demo")
