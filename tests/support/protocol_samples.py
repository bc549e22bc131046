"""Unity protocol messages with every field the bridge reads or writes set, built from any set of
generated ``communicator_objects`` modules: ours (ml_arl.protocol) in tests/protocol/test_protocol.py,
mlagents-envs 0.28.0's own when tests/data/record_exchanges.py recorded their bytes.

``build(package)`` returns ``{name: message}``; each name's serialized bytes are recorded in
tests/data/exchanges/<name>.bin. Map fields are given one key each so the byte order is fixed.
"""

from __future__ import annotations

import importlib
from typing import Any


def build(package: str) -> dict[str, Any]:
    def mod(name: str) -> Any:
        return importlib.import_module(f"{package}.{name}_pb2")

    msg, out, inp = mod("unity_message"), mod("unity_output"), mod("unity_input")
    rl_out, rl_in = mod("unity_rl_output"), mod("unity_rl_input")
    init_out, init_in = mod("unity_rl_initialization_output"), mod("unity_rl_initialization_input")
    brain, info, action, obs = mod("brain_parameters"), mod("agent_info"), mod("agent_action"), mod("observation")
    caps, command, header = mod("capabilities"), mod("command"), mod("header")
    pair, meta = mod("agent_info_action_pair"), mod("demonstration_meta")

    capabilities = caps.UnityRLCapabilitiesProto(
        baseRLCapabilities=True, concatenatedPngObservations=True, compressedChannelMapping=True,
        hybridActions=True, trainingAnalytics=True, variableLengthObservation=True, multiAgentGroups=True,
    )
    spec = brain.ActionSpecProto(num_continuous_actions=2, num_discrete_actions=2, discrete_branch_sizes=[3, 2],
                                 action_descriptions=["left", "right"])
    params = brain.BrainParametersProto(brain_name="Walker?team=0", is_training=True, action_spec=spec)
    vector = obs.ObservationProto(shape=[3], compression_type=obs.NONE, float_data=obs.ObservationProto.FloatData(data=[0.5, -1.25, 3.0]),
                                  dimension_properties=[1], observation_type=obs.DEFAULT, name="VectorSensor")
    image = obs.ObservationProto(shape=[8, 8, 3], compression_type=obs.PNG, compressed_data=b"\x89PNG\r\n\x1a\nfake",
                                 compressed_channel_mapping=[0, 1, 2], dimension_properties=[3, 2, 1], name="Camera")
    goal = obs.ObservationProto(shape=[2], float_data=obs.ObservationProto.FloatData(data=[1.0, 0.0]),
                                observation_type=obs.GOAL_SIGNAL, name="Goal")
    agent = info.AgentInfoProto(reward=0.75, done=False, max_step_reached=False, id=7, action_mask=[False, True, False, False, True],
                                observations=[vector, image, goal], group_id=2, group_reward=-0.5)
    finished = info.AgentInfoProto(reward=-1.0, done=True, max_step_reached=True, id=8, observations=[vector])
    output = rl_out.UnityRLOutputProto(side_channel=b"\x01\x02side")
    output.agentInfos["Walker?team=0"].value.extend([agent, finished])

    # as mlagents-envs' UnityEnvironment sends them: the deprecated field repeats the continuous then the discrete actions
    act = action.AgentActionProto(vector_actions_deprecated=[0.25, -0.75, 2, 1], continuous_actions=[0.25, -0.75], discrete_actions=[2, 1])
    rest = action.AgentActionProto(vector_actions_deprecated=[0.0, 1.0, 0, 0], continuous_actions=[0.0, 1.0], discrete_actions=[0, 0])
    rl_input = rl_in.UnityRLInputProto(command=command.STEP, side_channel=b"\x03chan")
    rl_input.agent_actions["Walker?team=0"].value.extend([act, rest])

    return {
        "handshake_out": msg.UnityMessageProto(
            header=header.HeaderProto(status=200, message="hello"),
            unity_output=out.UnityOutputProto(rl_initialization_output=init_out.UnityRLInitializationOutputProto(
                name="Env", communication_version="1.5.0", log_path="/tmp/log", brain_parameters=[params],
                package_version="2.0.1", capabilities=capabilities,
            )),
        ),
        "handshake_in": msg.UnityMessageProto(
            header=header.HeaderProto(status=200),
            unity_input=inp.UnityInputProto(rl_initialization_input=init_in.UnityRLInitializationInputProto(
                seed=42, communication_version="1.5.0", package_version="0.28.0", capabilities=capabilities, num_areas=4,
            )),
        ),
        "step_out": msg.UnityMessageProto(header=header.HeaderProto(status=200), unity_output=out.UnityOutputProto(rl_output=output)),
        "step_in": msg.UnityMessageProto(header=header.HeaderProto(status=200), unity_input=inp.UnityInputProto(rl_input=rl_input)),
        "demo_meta": meta.DemonstrationMetaProto(api_version=1, demonstration_name="expert", number_steps=120,
                                                 number_episodes=3, mean_reward=0.9),
        "demo_step": pair.AgentInfoActionPairProto(agent_info=agent, action_info=act),
    }
