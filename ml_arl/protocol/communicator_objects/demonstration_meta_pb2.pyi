from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class DemonstrationMetaProto(_message.Message):
    __slots__ = ("api_version", "demonstration_name", "number_steps", "number_episodes", "mean_reward")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    DEMONSTRATION_NAME_FIELD_NUMBER: _ClassVar[int]
    NUMBER_STEPS_FIELD_NUMBER: _ClassVar[int]
    NUMBER_EPISODES_FIELD_NUMBER: _ClassVar[int]
    MEAN_REWARD_FIELD_NUMBER: _ClassVar[int]
    api_version: int
    demonstration_name: str
    number_steps: int
    number_episodes: int
    mean_reward: float
    def __init__(self, api_version: _Optional[int] = ..., demonstration_name: _Optional[str] = ..., number_steps: _Optional[int] = ..., number_episodes: _Optional[int] = ..., mean_reward: _Optional[float] = ...) -> None: ...
