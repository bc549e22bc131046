"""Observation encoders (torch): the normalizer, the image encoders in the layouts of ML-Agents'
(``vis_encode_type``: ``simple``, ``nature_cnn``, ``resnet``, ``match3``, ``fully_connected``;
``MIN_RESOLUTION`` holds the smallest images each takes) and ``ObservationEncoder``, which flattens
and concatenates every rank-1/2 observation (normalised when ``normalize``), sends
variable-length ones through the entity attention of ``ml_arl.networks.attention`` and every image
(height, width, channels, as mlagents-envs 0.28 decodes it) through its own encoder, channels-first
as in the exported ONNX model. The helpers that turn layers into the workers' numpy weights too.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch
from mlagents_envs.base_env import BehaviorSpec
from torch import nn

from ml_arl.core.actor_constants import NORM_CLIP
from ml_arl.core.actor_weights import ResidualBlockWeights, ResNetStackWeights, VisualEncoderKind, VisualEncoderWeights
from ml_arl.networks.attention import EntityEncoder, is_variable_length, variable_indices, variable_length_problem
from ml_arl.networks.numpy_weights import conv_weights, flat_dense_weights
from ml_arl.settings import NetworkSettings


def obs_size(spec: BehaviorSpec) -> int:
    return int(sum(int(np.prod(o.shape)) for o in spec.observation_specs))


def visual_indices(spec: BehaviorSpec) -> list[int]:
    return [i for i, o in enumerate(spec.observation_specs) if len(o.shape) == 3]


def vector_indices(spec: BehaviorSpec) -> list[int]:
    """The observations flattened into the vector part (not images, not variable-length)."""
    return [i for i, o in enumerate(spec.observation_specs) if len(o.shape) != 3 and not is_variable_length(o)]


def vector_size(spec: BehaviorSpec) -> int:
    return int(sum(int(np.prod(spec.observation_specs[i].shape)) for i in vector_indices(spec)))


# The image encoders, in the layouts of ML-Agents' (torch_entities/encoders.py). Convolution
# stacks: (kernel, stride, output channels) of each convolution, each followed by LeakyReLU, then
# a dense layer and LeakyReLU. fully_connected is the dense layer alone.
CONV_LAYOUTS: dict[VisualEncoderKind, tuple[tuple[int, int, int], ...]] = {
    "simple": ((8, 4, 16), (4, 2, 32)),
    "nature_cnn": ((8, 4, 32), (4, 2, 64), (3, 1, 64)),  # the Nature DQN stack (Mnih et al. 2015)
    "match3": ((3, 1, 35), (3, 1, 144)),  # small kernels for boards (King's Candy Crush tester)
    "fully_connected": (),
}
# resnet: per stack, a 3x3 convolution (padding 1) to these channels, a 3x3 max-pool of stride 2
# and RESNET_BLOCKS residual blocks; then Swish, a dense layer and ReLU
RESNET_CHANNELS = (16, 32, 32)
RESNET_BLOCKS = 2
POOL_KERNEL, POOL_STRIDE = 3, 2
LEAKY_SLOPE = 0.01
# ML-Agents' MIN_RESOLUTION_FOR_ENCODER: the smallest height and width each encoder takes
MIN_RESOLUTION: dict[VisualEncoderKind, int] = {"fully_connected": 1, "match3": 5, "simple": 20, "nature_cnn": 36, "resnet": 15}


def _conv_out(size: int, kernel: int, stride: int, padding: int = 0) -> int:
    return (size + 2 * padding - kernel) // stride + 1


def kaiming_leaky(layer: nn.Module) -> None:
    assert isinstance(layer, (nn.Linear, nn.Conv2d)) and layer.bias is not None
    nn.init.kaiming_normal_(layer.weight, a=LEAKY_SLOPE, nonlinearity="leaky_relu")
    nn.init.zeros_(layer.bias)


class VisualEncoder(nn.Module):
    """A convolution stack (``simple``, ``nature_cnn``, ``match3``; no convolution for
    ``fully_connected``): image [B, C, H, W] -> [B, out_size]; each convolution (``CONV_LAYOUTS``)
    and the final dense layer are followed by LeakyReLU."""

    def __init__(self, height: int, width: int, channels: int, out_size: int, kind: VisualEncoderKind):
        super().__init__()
        self.kind = kind
        self.convs = nn.ModuleList()
        c, h, w = channels, height, width
        for kernel, stride, out_c in CONV_LAYOUTS[kind]:
            conv = nn.Conv2d(c, out_c, kernel, stride)
            kaiming_leaky(conv)
            self.convs.append(conv)
            c, h, w = out_c, _conv_out(h, kernel, stride), _conv_out(w, kernel, stride)
        self.final_shape = (c, h, w)
        self.dense = nn.Linear(c * h * w, out_size)
        kaiming_leaky(self.dense)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for conv in self.convs:
            x = nn.functional.leaky_relu(conv(x), LEAKY_SLOPE)
        return nn.functional.leaky_relu(self.dense(x.reshape(-1, self.dense.in_features)), LEAKY_SLOPE)

    def weights(self) -> VisualEncoderWeights:
        convs = tuple(conv_weights(conv) for conv in self.convs if isinstance(conv, nn.Conv2d))
        dense = flat_dense_weights(self.dense, *self.final_shape)
        return VisualEncoderWeights(self.kind, dense, convs=convs)


class ResidualBlock(nn.Module):
    """ML-Agents' ResNetBlock: x + conv(swish(conv(swish(x)))), 3x3 convolutions with padding 1."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv_a = nn.Conv2d(channels, channels, 3, 1, padding=1)
        self.conv_b = nn.Conv2d(channels, channels, 3, 1, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        silu = nn.functional.silu
        return x + self.conv_b(silu(self.conv_a(silu(x))))

    def weights(self) -> ResidualBlockWeights:
        return ResidualBlockWeights(conv_weights(self.conv_a), conv_weights(self.conv_b))


class ResNetStack(nn.Module):
    """3x3 convolution (padding 1) -> 3x3 max-pool of stride 2 -> residual blocks."""

    def __init__(self, in_channels: int, channels: int, blocks: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, channels, 3, 1, padding=1)
        self.blocks = nn.ModuleList(ResidualBlock(channels) for _ in range(blocks))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.max_pool2d(self.conv(x), POOL_KERNEL, POOL_STRIDE)
        for block in self.blocks:
            x = block(x)
        return x

    def weights(self) -> ResNetStackWeights:
        blocks = tuple(b.weights() for b in self.blocks if isinstance(b, ResidualBlock))
        return ResNetStackWeights(conv_weights(self.conv), POOL_KERNEL, POOL_STRIDE, blocks)


class ResNetEncoder(nn.Module):
    """ML-Agents' ResNet encoder (after IMPALA's, Espeholt et al. 2018): image [B, C, H, W] ->
    a stack per ``RESNET_CHANNELS`` -> Swish -> dense -> ReLU -> [B, out_size]. The convolutions
    keep torch's default init, as ML-Agents' do (Kaiming gains would grow the residual sums block
    after block)."""

    def __init__(self, height: int, width: int, channels: int, out_size: int):
        super().__init__()
        self.stacks = nn.ModuleList()
        c, h, w = channels, height, width
        for out_c in RESNET_CHANNELS:
            self.stacks.append(ResNetStack(c, out_c, RESNET_BLOCKS))
            c, h, w = out_c, _conv_out(h, POOL_KERNEL, POOL_STRIDE), _conv_out(w, POOL_KERNEL, POOL_STRIDE)
        self.final_shape = (c, h, w)
        self.dense = nn.Linear(c * h * w, out_size)
        kaiming_leaky(self.dense)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for stack in self.stacks:
            x = stack(x)
        x = nn.functional.silu(x)
        return torch.relu(self.dense(x.reshape(-1, self.dense.in_features)))

    def weights(self) -> VisualEncoderWeights:
        stacks = tuple(s.weights() for s in self.stacks if isinstance(s, ResNetStack))
        return VisualEncoderWeights("resnet", flat_dense_weights(self.dense, *self.final_shape), stacks=stacks)


def visual_encoder(kind: VisualEncoderKind, height: int, width: int, channels: int, out_size: int) -> nn.Module:
    """The encoder ``network_settings.vis_encode_type`` names, for images of this size."""
    if kind == "resnet":
        return ResNetEncoder(height, width, channels, out_size)
    return VisualEncoder(height, width, channels, out_size, kind)


def encoder_problem(kind: str, index: int, height: int, width: int) -> Optional[str]:
    """Why image observation ``index`` cannot go through the ``kind`` encoder (None if it can)."""
    if kind not in MIN_RESOLUTION:
        return f"'{kind}' is not an image encoder; use one of {', '.join(MIN_RESOLUTION)}"
    need = MIN_RESOLUTION[kind]
    if min(height, width) >= need:
        return None
    fits = [f"'{k}'" for k, m in sorted(MIN_RESOLUTION.items(), key=lambda km: -km[1]) if m <= min(height, width)]
    choice = fits[0] if len(fits) == 1 else f"{', '.join(fits[:-1])} or {fits[-1]}"
    return f"observation {index} is {height}x{width} pixels; '{kind}' needs at least {need}x{need} (for images this small use {choice})"


def check_visual_support(spec: BehaviorSpec, settings: NetworkSettings) -> Optional[str]:
    """Why this behavior's images cannot be encoded with ``settings`` (None if they can)."""
    for i in visual_indices(spec):
        h, w, _ = spec.observation_specs[i].shape
        problem = encoder_problem(settings.vis_encode_type, i, int(h), int(w))
        if problem is not None:
            return f"network_settings.vis_encode_type: {problem}"
    return None


def _image_shape(spec: BehaviorSpec, index: int) -> tuple[int, int, int]:
    h, w, c = spec.observation_specs[index].shape
    return int(h), int(w), int(c)


class ObservationEncoder(nn.Module):
    """Every observation of a behavior -> one feature vector: [normalised vectors, image encodings,
    attention over the variable-length observations' entities]."""

    def __init__(self, spec: BehaviorSpec, settings: NetworkSettings, normalizer: Normalizer):
        super().__init__()
        problem = variable_length_problem(spec)
        if problem is not None:
            raise ValueError(problem)
        self.visual = visual_indices(spec)
        self.variable = variable_indices(spec)
        self.vector = vector_indices(spec)
        self.normalize = settings.normalize
        self._normalizer = [normalizer]  # shared with the owner; a list keeps it out of this module's state
        self.encoders = nn.ModuleList(
            visual_encoder(settings.vis_encode_type, *_image_shape(spec, i), settings.hidden_units) for i in self.visual
        )
        own_size = vector_size(spec) + settings.hidden_units * len(self.visual)
        self.entities = EntityEncoder(spec, self.variable, own_size) if self.variable else None
        self.out_size = own_size + (self.entities.out_size if self.entities is not None else 0)

    def vector_part(self, obs: list[torch.Tensor]) -> torch.Tensor:
        parts = [obs[i].reshape(obs[i].shape[0], -1) for i in self.vector]
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)

    def forward(self, obs: list[torch.Tensor], channels_first: bool = False) -> torch.Tensor:
        feats: list[torch.Tensor] = []
        if self.vector:
            x = self.vector_part(obs)
            feats.append(self._normalizer[0](x) if self.normalize else x)
        for i, enc in zip(self.visual, self.encoders):
            img = obs[i] if channels_first else obs[i].permute(0, 3, 1, 2)
            feats.append(enc(img))
        if self.entities is not None:
            own = (feats[0] if len(feats) == 1 else torch.cat(feats, dim=1)) if feats else None
            feats.append(self.entities(own, obs))
        return feats[0] if len(feats) == 1 else torch.cat(feats, dim=1)


class Normalizer(nn.Module):
    """Running mean and variance (parallel Welford); output clamp((x - mean) / std, -5, 5).

    It starts as ML-Agents' does: one pseudo-sample of mean 0 and variance 1 (its
    normalization_steps 1, running_variance 1), which the first batch outweighs only by its size."""

    count: torch.Tensor
    mean: torch.Tensor
    var: torch.Tensor

    def __init__(self, size: int):
        super().__init__()
        self.register_buffer("count", torch.tensor(1.0, dtype=torch.float64))
        self.register_buffer("mean", torch.zeros(size, dtype=torch.float64))
        self.register_buffer("var", torch.ones(size, dtype=torch.float64))

    @staticmethod
    def moments(x: torch.Tensor) -> torch.Tensor:
        """A batch's [n, mean..., variance...] (float64): what ``add_moments`` takes in, and what the
        learners of a group all-gather to take in each other's batches (reward signals' normalizers)."""
        x = x.detach().to(torch.float64)
        n = x.new_tensor([float(x.shape[0])])
        if x.shape[0] == 0:
            return torch.cat([n, x.new_zeros(2 * x.shape[1])])
        return torch.cat([n, x.mean(0), x.var(0, unbiased=False)])

    def update(self, x: torch.Tensor) -> None:
        x = x.detach().to(torch.float64)
        if x.shape[0]:
            self._add(x.shape[0], x.mean(0), x.var(0, unbiased=False))

    def add_moments(self, moments: torch.Tensor) -> None:
        """Take in a batch given by its ``moments`` (``Normalizer.moments``)."""
        n = float(moments[0])
        if n == 0:
            return
        size = (moments.shape[0] - 1) // 2
        self._add(n, moments[1 : 1 + size].to(self.mean.device), moments[1 + size :].to(self.mean.device))

    def _add(self, n: float, batch_mean: torch.Tensor, batch_var: torch.Tensor) -> None:
        """Chan's parallel update with a batch of ``n`` rows."""
        total = self.count + n
        delta = batch_mean - self.mean
        new_mean = self.mean + delta * n / total
        m2 = self.var * self.count + batch_var * n + delta.pow(2) * self.count * n / total
        self.mean.copy_(new_mean)
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def std(self) -> torch.Tensor:
        return torch.sqrt(self.var + 1e-8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp((x - self.mean.float()) / self.std().float(), -NORM_CLIP, NORM_CLIP)

