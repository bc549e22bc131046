from ml_arl.protocol.communicator_objects import agent_info_pb2 as _agent_info_pb2
from ml_arl.protocol.communicator_objects import agent_action_pb2 as _agent_action_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AgentInfoActionPairProto(_message.Message):
    __slots__ = ("agent_info", "action_info")
    AGENT_INFO_FIELD_NUMBER: _ClassVar[int]
    ACTION_INFO_FIELD_NUMBER: _ClassVar[int]
    agent_info: _agent_info_pb2.AgentInfoProto
    action_info: _agent_action_pb2.AgentActionProto
    def __init__(self, agent_info: _Optional[_Union[_agent_info_pb2.AgentInfoProto, _Mapping]] = ..., action_info: _Optional[_Union[_agent_action_pb2.AgentActionProto, _Mapping]] = ...) -> None: ...
