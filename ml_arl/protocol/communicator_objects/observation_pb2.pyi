from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CompressionTypeProto(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NONE: _ClassVar[CompressionTypeProto]
    PNG: _ClassVar[CompressionTypeProto]

class ObservationTypeProto(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DEFAULT: _ClassVar[ObservationTypeProto]
    GOAL_SIGNAL: _ClassVar[ObservationTypeProto]
NONE: CompressionTypeProto
PNG: CompressionTypeProto
DEFAULT: ObservationTypeProto
GOAL_SIGNAL: ObservationTypeProto

class ObservationProto(_message.Message):
    __slots__ = ("shape", "compression_type", "compressed_data", "float_data", "compressed_channel_mapping", "dimension_properties", "observation_type", "name")
    class FloatData(_message.Message):
        __slots__ = ("data",)
        DATA_FIELD_NUMBER: _ClassVar[int]
        data: _containers.RepeatedScalarFieldContainer[float]
        def __init__(self, data: _Optional[_Iterable[float]] = ...) -> None: ...
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    COMPRESSION_TYPE_FIELD_NUMBER: _ClassVar[int]
    COMPRESSED_DATA_FIELD_NUMBER: _ClassVar[int]
    FLOAT_DATA_FIELD_NUMBER: _ClassVar[int]
    COMPRESSED_CHANNEL_MAPPING_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    shape: _containers.RepeatedScalarFieldContainer[int]
    compression_type: CompressionTypeProto
    compressed_data: bytes
    float_data: ObservationProto.FloatData
    compressed_channel_mapping: _containers.RepeatedScalarFieldContainer[int]
    dimension_properties: _containers.RepeatedScalarFieldContainer[int]
    observation_type: ObservationTypeProto
    name: str
    def __init__(self, shape: _Optional[_Iterable[int]] = ..., compression_type: _Optional[_Union[CompressionTypeProto, str]] = ..., compressed_data: _Optional[bytes] = ..., float_data: _Optional[_Union[ObservationProto.FloatData, _Mapping]] = ..., compressed_channel_mapping: _Optional[_Iterable[int]] = ..., dimension_properties: _Optional[_Iterable[int]] = ..., observation_type: _Optional[_Union[ObservationTypeProto, str]] = ..., name: _Optional[str] = ...) -> None: ...
