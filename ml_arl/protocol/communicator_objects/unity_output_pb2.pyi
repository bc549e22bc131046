from ml_arl.protocol.communicator_objects import unity_rl_output_pb2 as _unity_rl_output_pb2
from ml_arl.protocol.communicator_objects import unity_rl_initialization_output_pb2 as _unity_rl_initialization_output_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class UnityOutputProto(_message.Message):
    __slots__ = ("rl_output", "rl_initialization_output")
    RL_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    RL_INITIALIZATION_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    rl_output: _unity_rl_output_pb2.UnityRLOutputProto
    rl_initialization_output: _unity_rl_initialization_output_pb2.UnityRLInitializationOutputProto
    def __init__(self, rl_output: _Optional[_Union[_unity_rl_output_pb2.UnityRLOutputProto, _Mapping]] = ..., rl_initialization_output: _Optional[_Union[_unity_rl_initialization_output_pb2.UnityRLInitializationOutputProto, _Mapping]] = ...) -> None: ...
