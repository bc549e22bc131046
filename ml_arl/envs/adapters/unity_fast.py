"""The fast message path of the Unity bridge: per-step messages as raw protobuf wire bytes.

With protobuf 3.20 in pure-Python mode (what mlagents-envs 0.28 needs on Python 3.11), parsing and
building ``UnityMessageProto`` objects costs far more than the rest of a step. This module moves
the per-step traffic past the generated classes, with results identical to mlagents-envs':

* ``RawExchange`` is a communicator mixin: the gRPC method ``UnityToExternalProto/Exchange`` is
  registered without (de)serializers, so requests and replies cross the pipe between the gRPC
  thread and the trainer as bytes. The handshake (``initialize``) still goes through the
  generated classes; so does the generic ``exchange`` (unused by the fast path).
* What is sent is written by ml_arl.envs.adapters.unity_wire; what comes back is read by
  ml_arl.envs.adapters.unity_decode (with mlagents-envs' own decoder as the fallback for anything unusual).
* Images a build sends channels-first (com.unity.ml-agents 3.x) are decoded to (H, W, C), the
  one layout ml_arl hands on, and the behavior's spec says so (ml_arl.protocol.image_layout); the
  env keeps, per behavior, which observations arrive CHW (``chw_table``).
* ``step(env)`` / ``reset(env)`` are ``UnityEnvironment.step`` / ``reset`` on this path; the env
  must have been created with a ``RawExchange`` communicator (ml_arl.envs.adapters.unity_env does so
  when ``fast_bridge`` is on).

This module runs in worker processes: no torch.
"""

from __future__ import annotations

from multiprocessing import Pipe
from typing import Any, Optional

import grpc
from mlagents_envs import environment as _mlagents_environment
from mlagents_envs.base_env import ActionTuple, BehaviorSpec, DecisionSteps, TerminalSteps
from mlagents_envs.exception import UnityCommunicatorStoppedException, UnityEnvironmentException
from mlagents_envs.rpc_communicator import RpcCommunicator
from mlagents_envs.rpc_utils import behavior_spec_from_proto

from ml_arl.envs.adapters.unity_decode import decode_output, first_agent_info, split_message, steps_from_wire
from ml_arl.envs.adapters.unity_wire import (
    COMMAND_RESET,
    COMMAND_STEP,
    STATUS_CLOSE,
    STATUS_OK,
    Buffer,
    encode_agent_actions,
    encode_input_message,
    header_message,
)
from ml_arl.protocol import image_layout
from ml_arl.protocol.communicator_objects.brain_parameters_pb2 import BrainParametersProto
from ml_arl.protocol.communicator_objects.unity_input_pb2 import UnityInputProto
from ml_arl.protocol.communicator_objects.unity_message_pb2 import UnityMessageProto
from ml_arl.protocol.communicator_objects.unity_output_pb2 import UnityOutputProto

# ============================================================================================
# The communicator: raw bytes between the gRPC thread and the trainer
# ============================================================================================

SERVICE = "communicator_objects.UnityToExternalProto"
CLOSE_GRACE_S = 2.0  # how long close() lets the call in flight return the close message


class RawExchangeServicer:
    """UnityToExternalProto/Exchange with bytes in and out: the request goes to the trainer
    through a pipe, the trainer's reply bytes go back to Unity (mlagents' servicer, unparsed)."""

    def __init__(self) -> None:
        self.parent_conn, self.child_conn = Pipe()

    def Exchange(self, request: bytes, context: Any) -> bytes:
        self.child_conn.send_bytes(request)
        return self.child_conn.recv_bytes()

    def add_to_server(self, server: grpc.Server) -> None:
        method = grpc.unary_unary_rpc_method_handler(self.Exchange)  # no (de)serializers: bytes
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {"Exchange": method}),))


class RawExchange(RpcCommunicator):
    """Mixin for an RpcCommunicator subclass whose ``create_server`` registers the servicer that
    ``_add_servicer(server)`` returns (ml_arl.envs.adapters.unity_env._Communicator): every message crosses
    as bytes. ``exchange_raw`` is the fast path; ``initialize``, ``exchange`` and ``close`` keep
    RpcCommunicator's interface and behaviour."""

    is_open: bool
    server: Any
    unity_to_external: Any

    def _add_servicer(self, server: grpc.Server) -> Any:
        servicer = RawExchangeServicer()
        servicer.add_to_server(server)
        return servicer

    def initialize(self, inputs: UnityInputProto, poll_callback: Optional[Any] = None) -> UnityOutputProto:
        self.poll_for_timeout(poll_callback)
        conn = self.unity_to_external.parent_conn
        academy = UnityMessageProto.FromString(conn.recv_bytes()).unity_output
        message = UnityMessageProto()
        message.header.status = STATUS_OK
        message.unity_input.CopyFrom(inputs)
        conn.send_bytes(message.SerializeToString())
        conn.recv_bytes()  # Unity's next call: answered by the first reset
        return academy

    def exchange_raw(self, message: bytes, poll_callback: Optional[Any] = None) -> Optional[memoryview]:
        """Sends a serialized UnityMessageProto; returns Unity's unity_output bytes, or None when
        Unity's status is not 200 (it is quitting)."""
        conn = self.unity_to_external.parent_conn
        conn.send_bytes(message)
        self.poll_for_timeout(poll_callback)
        status, unity_output = split_message(conn.recv_bytes())
        if status != STATUS_OK:
            return None
        return unity_output

    def exchange(self, inputs: UnityInputProto, poll_callback: Optional[Any] = None) -> Optional[UnityOutputProto]:
        message = UnityMessageProto()
        message.header.status = STATUS_OK
        message.unity_input.CopyFrom(inputs)
        output = self.exchange_raw(message.SerializeToString(), poll_callback)
        return None if output is None else UnityOutputProto.FromString(bytes(output))

    def close(self) -> None:
        if self.is_open:
            conn = self.unity_to_external.parent_conn
            conn.send_bytes(header_message(STATUS_CLOSE))
            conn.close()
            # A grace period lets the Exchange call the build is blocked in return the close
            # message (mlagents-envs stops at once: on a busy machine the build then sees its
            # call cancelled instead of the close); with no call in flight it returns at once.
            self.server.stop(CLOSE_GRACE_S).wait(CLOSE_GRACE_S)
            self.is_open = False


# ============================================================================================
# UnityEnvironment.step / reset on the fast path
# ============================================================================================


def _communicator(env: Any) -> RawExchange:
    comm = env._communicator
    if not isinstance(comm, RawExchange):
        raise TypeError("the fast bridge needs a RawExchange communicator")
    return comm


def reset(env: Any) -> None:
    """UnityEnvironment.reset: RESET command with the queued side-channel messages."""
    if not env._loaded:
        raise UnityEnvironmentException("No Unity environment is loaded.")
    side_channel = bytes(env._side_channel_manager.generate_side_channel_messages())
    output = _communicator(env).exchange_raw(encode_input_message(COMMAND_RESET, [], side_channel), env._poll_process)
    if output is None:
        raise UnityCommunicatorStoppedException("Communicator has exited.")
    apply_output(env, output)
    env._is_first_message = False
    env._env_actions.clear()


def step(env: Any) -> None:
    """UnityEnvironment.step: the actions set (zeros for behaviors without), STEP command."""
    if env._is_first_message:
        env.reset()
        return
    if not env._loaded:
        raise UnityEnvironmentException("No Unity environment is loaded.")
    specs: dict[str, BehaviorSpec] = env._env_specs
    state: dict[str, tuple[DecisionSteps, TerminalSteps]] = env._env_state
    actions: dict[str, ActionTuple] = env._env_actions
    for name, spec in specs.items():
        if name not in actions:
            actions[name] = spec.action_spec.empty_action(len(state[name][0]) if name in state else 0)
    encoded = []
    for name, action in actions.items():
        n_agents = len(state[name][0])
        if n_agents:
            encoded.append((name, encode_agent_actions(action, n_agents)))
    side_channel = bytes(env._side_channel_manager.generate_side_channel_messages())
    output = _communicator(env).exchange_raw(encode_input_message(COMMAND_STEP, encoded, side_channel), env._poll_process)
    if output is None:
        raise UnityCommunicatorStoppedException("Communicator has exited.")
    apply_output(env, output)
    actions.clear()


def chw_table(env: Any) -> dict[str, tuple[int, ...]]:
    """The env's behavior name -> indices of the observations its build sends channels-first
    (only behaviors that have such images); created on first use."""
    table: Optional[dict[str, tuple[int, ...]]] = getattr(env, "chw_observations", None)
    if table is None:
        table = {}
        env.chw_observations = table
    return table


def set_behavior_spec(env: Any, name: str, wire_spec: BehaviorSpec) -> None:
    """A behavior's spec as the build describes it -> the env's spec (images (H, W, C)) and its
    entry in chw_table."""
    spec, chw = image_layout.hwc_behavior_spec(wire_spec)
    env._env_specs[name] = spec
    table = chw_table(env)
    if chw:
        table[name] = chw
    else:
        table.pop(name, None)


def apply_output(env: Any, unity_output: Buffer) -> None:
    """UnityEnvironment._update_behavior_specs + _update_state for a UnityOutputProto's bytes
    (images the build sends channels-first become (H, W, C): see ml_arl.protocol.image_layout)."""
    out = decode_output(unity_output)
    specs: dict[str, BehaviorSpec] = env._env_specs
    for payload in out.brain_parameters:
        brain = BrainParametersProto.FromString(bytes(payload))
        # as mlagents' agentInfos[brain_name] lookup, this adds an empty entry when there is none
        infos = out.agent_infos.setdefault(brain.brain_name, [])
        first = first_agent_info(infos)
        if first is not None:
            set_behavior_spec(env, brain.brain_name, behavior_spec_from_proto(brain, first))
            _mlagents_environment.logger.info(f"Connected new brain: {brain.brain_name}")
    state: dict[str, tuple[DecisionSteps, TerminalSteps]] = env._env_state
    chw = chw_table(env)
    for name, spec in specs.items():
        payloads = out.agent_infos.get(name)
        if payloads is None:
            state[name] = (DecisionSteps.empty(spec), TerminalSteps.empty(spec))
        else:
            state[name] = steps_from_wire(payloads, spec, chw.get(name, ()))
    env._side_channel_manager.process_side_channel_message(out.side_channel)
