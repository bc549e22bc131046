"""Torch layers as the numpy weights the workers act with (``ml_arl.core.actor_weights``): float32 copies on
the CPU, convolution kernels and flattened feature maps laid out channels-last as the numpy
encoders of ``ml_arl.acting.muscle`` read them."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ml_arl.core.actor_weights import Conv, Dense


def np32(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float32).numpy().copy()


def dense_weights(lin: nn.Linear) -> Dense:
    return Dense(np32(lin.weight.T), np32(lin.bias))


def conv_weights(conv: nn.Conv2d) -> Conv:
    assert conv.bias is not None
    # [out, in, kh, kw] -> [kh, kw, in, out]: contracts with channels-last windows in numpy
    padding = conv.padding
    assert not isinstance(padding, str)
    return Conv(np32(conv.weight.permute(2, 3, 1, 0)), np32(conv.bias), int(conv.stride[0]), int(padding[0]))


def flat_dense_weights(lin: nn.Linear, channels: int, height: int, width: int) -> Dense:
    """A dense layer over a (C, H, W) feature map flattened by torch, with its rows reordered to
    read the map flattened channels-last (H, W, C), as the numpy encoders hold it."""
    w = lin.weight.detach().reshape(lin.out_features, channels, height, width).permute(2, 3, 1, 0)
    return Dense(np32(w.reshape(-1, lin.out_features)), np32(lin.bias))
