"""Image observations of Unity builds in either layout: height x width x channels or channels-first.

com.unity.ml-agents 2.x describes a camera (or render texture, grid sensor...) observation as
``ObservationSpec.Visual(height, width, channels)`` with dimension properties
(TRANSLATIONAL_EQUIVARIANCE, TRANSLATIONAL_EQUIVARIANCE, NONE); 3.x as
``ObservationSpec.Visual(channels, height, width)`` with (NONE, TRANSLATIONAL_EQUIVARIANCE,
TRANSLATIONAL_EQUIVARIANCE). On the wire only the declared shape (and the properties) differ:

* PNG data is the same either way: one PNG (rows x columns x colours) or several concatenated
  when there are more than 3 channels, whose channels ``compressed_channel_mapping`` maps to the
  observation's channels. mlagents-envs 0.28 decodes it to (H, W, C), taking the channel count
  from shape[2]; 1.x to (C, H, W), from shape[0].
* uncompressed float data is written in the order of the declared shape (row-major).

mlagents-envs 0.28, which ml_arl decodes with, assumes (H, W, C) everywhere, so a 3.x build's
images would be refused (PNG) or read with the wrong axes (floats). ml_arl keeps ONE layout past
the environment: (H, W, C), as 0.28 delivers it (the networks transpose to NCHW themselves, and
the exported ONNX model takes NCHW as Unity feeds it). ``ml_arl.envs.adapters.unity_env`` and
``ml_arl.envs.adapters.unity_fast`` decide the layout of each observation once, from the behavior's
first observations (``image_layout``), hand the trainer a BehaviorSpec that describes the
arrays it gets (``hwc_behavior_spec``), and decode channels-first images to (H, W, C):
``protos_to_hwc`` rewrites generated-class messages so that mlagents-envs' own decoder reads
them as it reads a 2.x build's, ``chw_floats_to_hwc`` / ``decode_png`` serve the wire decoder.

It sits with the messages it reads: the Unity bridges (ml_arl.envs.adapters) and the .demo format
(ml_arl.demonstrations.format) both decode images through it. This module runs in worker processes: no torch.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Optional

import numpy as np
from mlagents_envs.base_env import BehaviorSpec, DimensionProperty, ObservationSpec
from mlagents_envs.rpc_utils import process_pixels

from ml_arl.protocol.communicator_objects.observation_pb2 import NONE as COMPRESSION_NONE

HWC = "hwc"  # (height, width, channels): com.unity.ml-agents 2.x, and what ml_arl works with
CHW = "chw"  # (channels, height, width): com.unity.ml-agents 3.x
MAX_GUESSED_CHANNELS = 4  # without telling properties, a first dimension up to this is channels


def _equivariant(prop: Any) -> bool:
    return bool(int(prop) & DimensionProperty.TRANSLATIONAL_EQUIVARIANCE)


def image_layout(shape: Sequence[int], dimension_properties: Sequence[Any] = ()) -> str:
    """HWC or CHW for a rank-3 observation of ``shape`` with these dimension properties.

    1. The properties decide when they single out the channel axis: the two
       TRANSLATIONAL_EQUIVARIANCE dimensions are height and width, the third is channels:
       (TE, TE, other) is HWC (2.x), (other, TE, TE) is CHW (3.x).
    2. Otherwise (no properties, as builds before dimension properties and custom sensors send;
       all three TE; none TE...) the shape decides: CHW when the first dimension looks like a
       channel count (1..MAX_GUESSED_CHANNELS) and the last does not (it is larger), else HWC,
       which is what mlagents-envs 0.28 assumes for every image."""
    if len(shape) != 3:
        raise ValueError(f"an image observation has 3 dimensions, not {len(shape)} ({tuple(shape)})")
    if len(dimension_properties) == 3:
        te = tuple(_equivariant(p) for p in dimension_properties)
        if te == (True, True, False):
            return HWC
        if te == (False, True, True):
            return CHW
    first, last = int(shape[0]), int(shape[2])
    if 1 <= first <= MAX_GUESSED_CHANNELS < last:
        return CHW
    return HWC


def hwc_shape(chw: Sequence[int]) -> tuple[int, int, int]:
    c, h, w = (int(v) for v in chw)
    return h, w, c


def chw_shape(hwc: Sequence[int]) -> tuple[int, int, int]:
    h, w, c = (int(v) for v in hwc)
    return c, h, w


def chw_observations(spec: BehaviorSpec) -> tuple[int, ...]:
    """Indices of the observations of a behavior (as the build describes it) that are CHW."""
    return tuple(
        i for i, o in enumerate(spec.observation_specs)
        if len(o.shape) == 3 and image_layout(o.shape, o.dimension_property) == CHW
    )


def hwc_observation_spec(obs: ObservationSpec) -> ObservationSpec:
    """A CHW observation's spec as the (H, W, C) arrays ml_arl hands on: shape and dimension
    properties permuted alike (so (NONE, TE, TE) becomes (TE, TE, NONE), as a 2.x build says)."""
    c, h, w = obs.dimension_property if len(obs.dimension_property) == 3 else (DimensionProperty.UNSPECIFIED,) * 3
    return ObservationSpec(hwc_shape(obs.shape), (h, w, c), obs.observation_type, obs.name)


def hwc_behavior_spec(spec: BehaviorSpec) -> tuple[BehaviorSpec, tuple[int, ...]]:
    """(the spec the trainer sees, indices of the observations the build sends CHW). A behavior
    without CHW images keeps its spec object unchanged."""
    chw = chw_observations(spec)
    if not chw:
        return spec, chw
    observation_specs = [hwc_observation_spec(o) if i in chw else o for i, o in enumerate(spec.observation_specs)]
    return BehaviorSpec(observation_specs, spec.action_spec), chw


def chw_floats_to_hwc(values: np.ndarray, chw: Sequence[int]) -> np.ndarray:
    """Uncompressed float data of a CHW observation (flat, in CHW order) as an (H, W, C) view."""
    return values.reshape(tuple(int(v) for v in chw)).transpose(1, 2, 0)


def decode_png(data: bytes, hwc: Sequence[int], mapping: Optional[Sequence[int]] = None) -> np.ndarray:
    """PNG bytes (one image or several concatenated) of an observation whose (H, W, C) shape is
    ``hwc``, whichever layout the build declared: mlagents-envs 0.28's process_pixels with C
    channels (the mapping, when given, decides the channels instead). Returns (H, W, C) float32;
    the caller checks the shape (a build may send images of another size)."""
    return process_pixels(data, int(hwc[2]), list(mapping) if mapping else None)  # type: ignore[no-any-return]


def proto_to_hwc(obs: Any) -> None:
    """Rewrites an ObservationProto (generated class) that a build sent CHW in place, so that
    mlagents-envs 0.28 reads it as the same image sent HWC: shape (C, H, W) -> (H, W, C), and
    uncompressed float data reordered. PNG data and the channel mapping stay as they are (PNGs
    do not depend on the declared layout). Anything that is not a well-formed 3-D observation is
    left alone for mlagents-envs to report."""
    shape = list(obs.shape)
    if len(shape) != 3:
        return
    if obs.compression_type == COMPRESSION_NONE:
        data = obs.float_data.data
        if len(data) == int(np.prod(shape)):
            values = chw_floats_to_hwc(np.asarray(data, dtype=np.float32), shape).ravel().tolist()
            del data[:]
            data.extend(values)
    obs.shape[:] = list(hwc_shape(shape))


def protos_to_hwc(agent_infos: Iterable[Any], chw: Sequence[int]) -> None:
    """``proto_to_hwc`` for observations ``chw`` of each AgentInfoProto (missing ones skipped)."""
    if not chw:
        return
    for info in agent_infos:
        observations = info.observations
        for index in chw:
            if index < len(observations):
                proto_to_hwc(observations[index])
