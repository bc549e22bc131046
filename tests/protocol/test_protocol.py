"""ml_arl/protocol: our generated Unity messages are mlagents-envs 0.28.0's, field for field and byte
for byte, and mlagents-envs' own modules run on them (issue 23)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

import ml_arl  # noqa: F401  (installs the aliases)
from ml_arl.protocol import OURS, THEIRS
from tests.support.protocol_samples import build

DATA = Path(__file__).resolve().parents[1] / "data"
OLD_PATH, NEW_PATH = "mlagents_envs/communicator_objects/", "ml_arl/protocol/communicator_objects/"


def _our_descriptors() -> dict[str, descriptor_pb2.FileDescriptorProto]:
    out = {}
    for path in sorted((Path(ml_arl.__file__).parent / "protocol" / "communicator_objects").glob("*.proto")):
        module = importlib.import_module(f"{OURS}.{path.stem}_pb2")
        proto = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(proto)
        out[proto.name] = proto
    return out


def _without_json_names(message: descriptor_pb2.DescriptorProto) -> None:
    for field in message.field:
        field.ClearField("json_name")  # protoc fills these in; the old modules' descriptors lack them
    for nested in message.nested_type:
        _without_json_names(nested)


def test_every_message_is_field_for_field_mlagents_envs_0_28() -> None:
    recorded = descriptor_pb2.FileDescriptorSet.FromString((DATA / "communicator_objects_0.28.pb").read_bytes())
    ours = _our_descriptors()
    assert len(recorded.file) == len(ours) == 21
    for theirs in recorded.file:
        theirs.name = theirs.name.replace(OLD_PATH, NEW_PATH)
        theirs.dependency[:] = [d.replace(OLD_PATH, NEW_PATH) for d in theirs.dependency]
        mine = ours[theirs.name]
        for message in mine.message_type:
            _without_json_names(message)
        assert mine == theirs, theirs.name


@pytest.mark.parametrize("name", sorted(build(OURS)))
def test_messages_are_byte_for_byte_those_of_mlagents_envs(name: str) -> None:
    message = build(OURS)[name]
    recorded = (DATA / "exchanges" / f"{name}.bin").read_bytes()
    assert message.SerializeToString(deterministic=True) == recorded  # what we send
    parsed = type(message).FromString(recorded)  # what we receive
    assert parsed == message and parsed.SerializeToString(deterministic=True) == recorded


def test_mlagents_envs_modules_import_our_messages() -> None:
    from mlagents_envs import rpc_utils
    from mlagents_envs.communicator_objects.agent_info_pb2 import AgentInfoProto
    from mlagents_envs.environment import UnityEnvironment
    from mlagents_envs.side_channel.engine_configuration_channel import EngineConfigurationChannel

    ours = importlib.import_module(f"{OURS}.agent_info_pb2")
    assert AgentInfoProto is ours.AgentInfoProto
    assert sys.modules[f"{THEIRS}.agent_info_pb2"] is ours
    assert rpc_utils.AgentInfoProto is ours.AgentInfoProto
    assert UnityEnvironment.API_VERSION == "1.5.0" and EngineConfigurationChannel is not None


def test_mlagents_envs_steps_from_our_messages() -> None:
    """mlagents-envs' own decoding (the classic path's) of a step we built with our classes."""
    from mlagents_envs.rpc_utils import behavior_spec_from_proto, steps_from_proto

    messages = build(OURS)
    params = messages["handshake_out"].unity_output.rl_initialization_output.brain_parameters[0]
    infos = list(messages["step_out"].unity_output.rl_output.agentInfos["Walker?team=0"].value)
    spec = behavior_spec_from_proto(params, infos[0])
    assert spec.action_spec.continuous_size == 2 and spec.action_spec.discrete_branches == (3, 2)
    vector_only = [type(i)(reward=i.reward, done=i.done, id=i.id, observations=[i.observations[0]]) for i in infos]
    spec = behavior_spec_from_proto(params, vector_only[0])
    decisions, terminals = steps_from_proto(vector_only, spec)
    assert list(decisions.agent_id) == [7] and list(terminals.agent_id) == [8]
    assert decisions.obs[0][0].tolist() == pytest.approx([0.5, -1.25, 3.0])


def test_the_protobuf_runtime_is_current() -> None:
    """No protobuf 3.x: the pin this replaced is gone (issue 23)."""
    import google.protobuf

    assert int(google.protobuf.__version__.split(".")[0]) >= 7


def test_a_fresh_interpreter_imports_mlagents_envs_environment_after_ml_arl() -> None:
    code = "import ml_arl, mlagents_envs.environment, mlagents_envs.side_channel.stats_side_channel; print('ok')"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_the_fast_bridge_writes_the_recorded_step_and_reads_the_recorded_output() -> None:
    """unity_fast encodes and decodes the wire format itself: against mlagents-envs 0.28's bytes."""
    import numpy as np
    from mlagents_envs.base_env import ActionTuple

    from ml_arl.envs.adapters import unity_decode, unity_wire

    actions = ActionTuple(continuous=np.array([[0.25, -0.75], [0.0, 1.0]], np.float32),
                          discrete=np.array([[2, 1], [0, 0]], np.int32))
    mine = unity_wire.encode_input_message(
        unity_wire.COMMAND_STEP, [("Walker?team=0", unity_wire.encode_agent_actions(actions, 2))], b"\x03chan")
    assert mine == (DATA / "exchanges" / "step_in.bin").read_bytes()
    status, output = unity_decode.split_message((DATA / "exchanges" / "step_out.bin").read_bytes())
    assert status == 200
    decoded = unity_decode.decode_output(bytes(output))
    assert decoded.side_channel == b"\x01\x02side"
