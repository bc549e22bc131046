from ml_arl.protocol.communicator_objects import unity_rl_input_pb2 as _unity_rl_input_pb2
from ml_arl.protocol.communicator_objects import unity_rl_initialization_input_pb2 as _unity_rl_initialization_input_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class UnityInputProto(_message.Message):
    __slots__ = ("rl_input", "rl_initialization_input")
    RL_INPUT_FIELD_NUMBER: _ClassVar[int]
    RL_INITIALIZATION_INPUT_FIELD_NUMBER: _ClassVar[int]
    rl_input: _unity_rl_input_pb2.UnityRLInputProto
    rl_initialization_input: _unity_rl_initialization_input_pb2.UnityRLInitializationInputProto
    def __init__(self, rl_input: _Optional[_Union[_unity_rl_input_pb2.UnityRLInputProto, _Mapping]] = ..., rl_initialization_input: _Optional[_Union[_unity_rl_initialization_input_pb2.UnityRLInitializationInputProto, _Mapping]] = ...) -> None: ...
