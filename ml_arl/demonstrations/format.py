"""Unity ML-Agents' .demo file, byte by byte, with mlagents-envs 0.28's generated protobuf classes.

A .demo file is a sequence of varint-length-delimited protobuf messages:

1. at offset 0, a ``DemonstrationMetaProto`` (api_version, demonstration_name, number_steps,
   number_episodes, mean_reward) within the first ``META_BYTES`` (33) bytes; Unity writes it once
   when recording starts and again, with the totals, when it stops;
2. at offset 33, a ``BrainParametersProto`` (the behavior's name and action spec);
3. from there to the end, one ``AgentInfoActionPairProto`` per record: the agent's AgentInfo at a
   decision (observations, the reward received since the previous decision, done, max_step_reached)
   and the action taken at it. An episode's last record is its terminal AgentInfo: done (and
   max_step_reached when the episode was cut, not finished), with a zero action. ``number_steps``
   counts records, terminal ones included: ML-Agents' loader reads exactly that many.

The observation specs are not in the brain parameters: a reader takes them from the first record's
observations (shape, dimension properties, observation type, name). Images are either
PNG-compressed (one or more concatenated 3-colour PNGs whose channels ``compressed_channel_mapping``
maps to the observation's channels) or float data; ml_arl hands on images as (H, W, C) whatever
layout a build declared (``ml_arl.protocol.image_layout``), and so does this module.

This module knows the bytes; ``reader`` and ``writer`` turn them into arrays and back.
"""

from __future__ import annotations

import io
import struct
import zlib
from dataclasses import dataclass
from typing import Any, Optional, cast

import numpy as np
from google.protobuf.internal.decoder import _DecodeVarint32  # type: ignore[attr-defined]
from google.protobuf.internal.encoder import _VarintBytes  # type: ignore[attr-defined]
from google.protobuf.message import DecodeError
from mlagents_envs.base_env import ActionSpec, BehaviorSpec, DimensionProperty, ObservationSpec
from mlagents_envs.exception import UnityObservationException
from mlagents_envs.rpc_utils import behavior_spec_from_proto

from ml_arl.protocol.communicator_objects.agent_info_action_pair_pb2 import AgentInfoActionPairProto
from ml_arl.protocol.communicator_objects.brain_parameters_pb2 import ActionSpecProto, BrainParametersProto
from ml_arl.protocol.communicator_objects.demonstration_meta_pb2 import DemonstrationMetaProto
from ml_arl.protocol.communicator_objects.observation_pb2 import NONE as COMPRESSION_NONE
from ml_arl.protocol.communicator_objects.observation_pb2 import PNG as COMPRESSION_PNG
from ml_arl.protocol.communicator_objects.observation_pb2 import ObservationProto, ObservationTypeProto
from ml_arl.protocol.communicator_objects.space_type_pb2 import continuous as SPACE_CONTINUOUS
from ml_arl.protocol.communicator_objects.space_type_pb2 import discrete as SPACE_DISCRETE
from ml_arl.protocol.image_layout import chw_floats_to_hwc, decode_png, hwc_behavior_spec

META_BYTES = 33  # the metadata lies in bytes [0, 33); the brain parameters start at 33
API_VERSION = 1  # what Unity's DemonstrationWriter writes (DemonstrationMetaData.ApiVersion)
SUPPORTED_API_VERSIONS = (0, 1)  # what ML-Agents' loader accepts
# (height, width, channels): translational equivariance along height and width, none along channels
_HWC_PROPERTIES = [
    int(DimensionProperty.TRANSLATIONAL_EQUIVARIANCE), int(DimensionProperty.TRANSLATIONAL_EQUIVARIANCE),
    int(DimensionProperty.NONE),
]


class DemoFormatError(Exception):
    """The bytes are not a .demo file ml_arl can read; the message says why, in one line (without
    the file's name, which the caller adds)."""


# ------------------------------------------------------------------------------------ framing


def delimited(message: Any) -> bytes:
    """A message with its varint length in front (protobuf's writeDelimitedTo)."""
    payload = message.SerializeToString()
    return bytes(_VarintBytes(len(payload))) + payload


def _read_delimited(data: bytes, pos: int, what: str) -> tuple[bytes, int]:
    """(the payload of the delimited message at ``pos``, the offset after it)."""
    try:
        size, start = _DecodeVarint32(data, pos)
    except (IndexError, DecodeError):
        raise DemoFormatError(f"the length of the {what} at byte {pos} is cut off: the file is truncated") from None
    end = start + size
    if end > len(data):
        raise DemoFormatError(
            f"the {what} at byte {pos} needs {size} bytes but the file ends {len(data) - start} bytes later: "
            "the file is truncated"
        )
    return data[start:end], end


def _parse(message: Any, payload: bytes, what: str, pos: int) -> None:
    try:
        message.ParseFromString(payload)
    except (DecodeError, RuntimeError, ValueError) as err:
        raise DemoFormatError(f"the {what} at byte {pos} is not readable ({err}): the file is damaged") from None


@dataclass
class DemoFile:
    """A .demo file's messages, parsed but not decoded."""

    meta: Any  # DemonstrationMetaProto
    brain: Any  # BrainParametersProto
    records: list[Any]  # AgentInfoActionPairProto, in file order


def parse_demo(data: bytes) -> DemoFile:
    """Split a .demo file into its messages, as ML-Agents' loader reads it: the metadata at 0, the
    brain parameters at META_BYTES, then records to the end of the data, or until ``number_steps``
    records when the metadata gives a count. Raises DemoFormatError."""
    if len(data) <= META_BYTES:
        raise DemoFormatError(f"the file has {len(data)} bytes, fewer than the {META_BYTES + 1} of a .demo header")
    meta = DemonstrationMetaProto()
    payload, _ = _read_delimited(data, 0, "metadata")
    _parse(meta, payload, "metadata", 0)
    if meta.api_version not in SUPPORTED_API_VERSIONS:
        raise DemoFormatError(
            f"api_version {meta.api_version} is not one ML-Agents reads ({', '.join(map(str, SUPPORTED_API_VERSIONS))})"
        )
    brain = BrainParametersProto()
    payload, pos = _read_delimited(data, META_BYTES, "brain parameters")
    _parse(brain, payload, "brain parameters", META_BYTES)
    records: list[Any] = []
    expected = meta.number_steps if meta.number_steps > 0 else None  # 0: Unity never closed the file
    while pos < len(data) and (expected is None or len(records) < expected):
        record = AgentInfoActionPairProto()
        payload, end = _read_delimited(data, pos, f"record {len(records)}")
        _parse(record, payload, f"record {len(records)}", pos)
        records.append(record)
        pos = end
    if expected is not None and len(records) < expected:
        raise DemoFormatError(
            f"the metadata counts {expected} records but the file holds {len(records)}: the file is truncated"
        )
    if not records:
        raise DemoFormatError("the file holds no recorded steps")
    return DemoFile(meta, brain, records)


def meta_header(name: str, records: int, episodes: int, mean_reward: float) -> bytes:
    """The first META_BYTES bytes of a file: the delimited metadata, zero-padded. A name too long
    to fit is shortened (Unity reserves 32 bytes for the message and one for its length)."""
    meta = DemonstrationMetaProto(
        api_version=API_VERSION, number_steps=records, number_episodes=episodes, mean_reward=mean_reward,
    )
    encoded = name.encode("utf-8")
    while True:
        meta.demonstration_name = encoded.decode("utf-8", errors="ignore")
        header = delimited(meta)
        if len(header) <= META_BYTES:
            return header + bytes(META_BYTES - len(header))
        encoded = encoded[:-1]


# ------------------------------------------------------------------------------------ specs


def brain_parameters(name: str, action_spec: ActionSpec) -> Any:
    """BrainParametersProto as Unity writes it into a demo: the action spec, plus the deprecated
    vector-action fields older loaders read (for a behavior that is not hybrid)."""
    brain = BrainParametersProto(brain_name=name, is_training=False)
    branches = [int(b) for b in action_spec.discrete_branches]
    brain.action_spec.CopyFrom(
        ActionSpecProto(
            num_continuous_actions=action_spec.continuous_size, num_discrete_actions=len(branches),
            discrete_branch_sizes=branches,
        )
    )
    if action_spec.continuous_size and not branches:
        brain.vector_action_space_type_deprecated = SPACE_CONTINUOUS
        brain.vector_action_size_deprecated.append(action_spec.continuous_size)
    elif branches and not action_spec.continuous_size:
        brain.vector_action_space_type_deprecated = SPACE_DISCRETE
        brain.vector_action_size_deprecated.extend(branches)
    return brain


@dataclass(frozen=True)
class FileSpec:
    """A file's behavior spec as ml_arl sees it (images (H, W, C)) and how its records declare
    their observations (``declared``: the shapes as written; ``chw``: the channels-first images)."""

    spec: BehaviorSpec
    declared: tuple[tuple[int, ...], ...]
    chw: tuple[int, ...]


def file_spec(demo: DemoFile) -> FileSpec:
    """The spec as ML-Agents builds it (the brain parameters' actions, the first record's
    observations), with channels-first images turned (H, W, C); then every record's observations
    checked against it. Raises DemoFormatError."""
    try:
        declared_spec = behavior_spec_from_proto(demo.brain, demo.records[0].agent_info)
    except (ValueError, IndexError) as err:  # an unknown observation type, no action sizes ...
        raise DemoFormatError(f"the brain parameters or the first record do not describe a behavior ({err})") from None
    declared = tuple(tuple(int(v) for v in o.shape) for o in declared_spec.observation_specs)
    for index, record in enumerate(demo.records):
        shapes = tuple(tuple(o.shape) for o in record.agent_info.observations)
        if shapes != declared:
            raise DemoFormatError(
                f"record {index} has observations {_shapes(shapes)} where the first record has {_shapes(declared)}; "
                "a .demo file holds one behavior"
            )
    spec, chw = hwc_behavior_spec(declared_spec)
    return FileSpec(spec, declared, chw)


def _shapes(shapes: tuple[tuple[int, ...], ...]) -> str:
    return ", ".join(str(s) for s in shapes) or "none"


# ------------------------------------------------------------------------------------ observations


def _png_lossless(image: np.ndarray) -> bool:
    """The (H, W, C) image is 8-bit values / 255, as decoded PNGs are: PNG keeps it exactly."""
    scaled = np.rint(image * 255.0)
    if scaled.min(initial=0.0) < 0 or scaled.max(initial=0.0) > 255:
        return False
    return bool(np.array_equal(scaled.astype(np.float32) / 255.0, image))


def _png_bytes(image: np.ndarray) -> tuple[bytes, list[int]]:
    """(H, W, C) values in [0, 1] as concatenated RGB PNGs and the channel mapping that reads
    them back exactly: channel k is colour k % 3 of PNG k // 3; padding colours map to -1."""
    from PIL import Image

    h, w, c = image.shape
    pixels = np.rint(image * 255.0).astype(np.uint8)
    padded = np.zeros((h, w, -(-c // 3) * 3), np.uint8)
    padded[..., :c] = pixels
    out = io.BytesIO()
    for start in range(0, padded.shape[2], 3):
        Image.fromarray(padded[..., start : start + 3], mode="RGB").save(out, format="PNG")
    return out.getvalue(), list(range(c)) + [-1] * (padded.shape[2] - c)


def observation_proto(array: np.ndarray, spec: ObservationSpec, compress: bool = True) -> Any:
    """One observation as an ObservationProto, declared with ``spec``'s shape (images (H, W, C),
    as ml_arl holds them, with the dimension properties that say so, as a 2.x build's). An image is PNG-compressed when ``compress`` and PNG keeps its values
    exactly (8-bit values in [0, 1], as images decoded from a build are); else float data."""
    properties = _HWC_PROPERTIES if len(spec.shape) == 3 else [int(p) for p in spec.dimension_property]
    proto = ObservationProto(
        shape=[int(v) for v in spec.shape],
        dimension_properties=properties,
        observation_type=cast(ObservationTypeProto, int(spec.observation_type.value)),
        name=spec.name,
    )
    if compress and array.ndim == 3 and _png_lossless(array):
        proto.compression_type = COMPRESSION_PNG
        proto.compressed_data, mapping = _png_bytes(array)
        proto.compressed_channel_mapping.extend(mapping)
    else:
        proto.compression_type = COMPRESSION_NONE
        proto.float_data.data.extend(np.asarray(array, np.float32).ravel().tolist())
    return proto


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_problem(data: bytes) -> Optional[str]:
    """None if ``data`` is one or more whole PNG images (each from its signature to its IEND chunk,
    every chunk's CRC right), else what is wrong. Checks the bytes without decoding them: cheap
    enough for every image of a .demo before a run starts (decoding waits for the loader)."""
    view, pos = memoryview(data), 0
    if not data:
        return "no image bytes"
    while pos < len(data):
        if bytes(view[pos : pos + 8]) != PNG_SIGNATURE:
            return f"no PNG signature at byte {pos}"
        pos += 8
        kind = b""
        while kind != b"IEND":
            if pos + 12 > len(data):
                return f"the PNG is cut off at byte {pos}"
            length, kind = struct.unpack(">I4s", view[pos : pos + 8])
            end = pos + 12 + length
            if end > len(data):
                return f"the PNG is cut off at byte {pos}"
            if zlib.crc32(view[pos + 4 : end - 4]) != struct.unpack(">I", view[end - 4 : end])[0]:
                return f"the PNG chunk at byte {pos} is damaged (its CRC does not match)"
            pos = end
    return None


def observation_array(proto: Any, declared: tuple[int, ...], chw: bool, shape: tuple[int, ...]) -> np.ndarray:
    """An ObservationProto as a float32 array of ``shape`` (the spec's; images (H, W, C)):
    float data reshaped from its ``declared`` shape (channels-first images transposed), PNGs
    decoded with mlagents-envs 0.28's decoder. Raises DemoFormatError."""
    if proto.compression_type == COMPRESSION_NONE:
        values = np.asarray(proto.float_data.data, dtype=np.float32)
        if values.size != int(np.prod(declared)):
            raise DemoFormatError(f"an observation declared {declared} holds {values.size} values")
        return chw_floats_to_hwc(values, declared) if chw else values.reshape(declared)
    if len(shape) != 3:
        raise DemoFormatError(f"a compressed observation of shape {declared}: only images (3 dimensions) are compressed")
    try:
        image = decode_png(proto.compressed_data, shape, list(proto.compressed_channel_mapping))
    except (OSError, ValueError, UnityObservationException) as err:  # PIL's UnidentifiedImageError is an OSError
        raise DemoFormatError(f"a PNG observation does not decode ({err})") from None
    except Exception:  # noqa: BLE001 - PIL's parsers raise other kinds for damaged bytes too (SyntaxError, AttributeError)
        raise DemoFormatError("a PNG observation does not decode (its bytes are damaged)") from None
    if tuple(image.shape) != tuple(shape):
        raise DemoFormatError(f"a PNG observation decodes to {tuple(image.shape)}, not {tuple(shape)}")
    return np.asarray(image, np.float32)
