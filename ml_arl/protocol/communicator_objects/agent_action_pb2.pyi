from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class AgentActionProto(_message.Message):
    __slots__ = ("vector_actions_deprecated", "value", "continuous_actions", "discrete_actions")
    VECTOR_ACTIONS_DEPRECATED_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    CONTINUOUS_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    DISCRETE_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    vector_actions_deprecated: _containers.RepeatedScalarFieldContainer[float]
    value: float
    continuous_actions: _containers.RepeatedScalarFieldContainer[float]
    discrete_actions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, vector_actions_deprecated: _Optional[_Iterable[float]] = ..., value: _Optional[float] = ..., continuous_actions: _Optional[_Iterable[float]] = ..., discrete_actions: _Optional[_Iterable[int]] = ...) -> None: ...
