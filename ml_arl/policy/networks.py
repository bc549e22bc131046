"""Actor-critic networks (torch) for vector and visual observations and hybrid action spaces.

One module holds the observation normalizer, the actor (observation encoder, MLP body with
Swish, a Gaussian head with a state-independent log-std, a categorical head per discrete
branch) and the critic (its own encoder and MLP body unless ``shared_critic``). The same
maths runs in numpy inside the workers (``ml_arl.policy.muscle``); ``muscle_weights()`` is the
hand-over.

Observations: every rank-1/2 observation is flattened and concatenated (and normalised when
``normalize``), except variable-length ones (a BufferSensor's: ``VARIABLE_SIZE`` among the
dimension properties), which go through the entity attention of ``ml_arl.policy.attention``,
appended after the other encodings; every rank-3 observation is an image, delivered as mlagents-envs 0.28 decodes
it (height, width, channels), and goes through its own encoder (``vis_encode_type``, each in
the layout of ML-Agents' encoder of that name: ``simple``, ``nature_cnn``, ``resnet``, ``match3``
or ``fully_connected``; ``MIN_RESOLUTION`` holds the smallest images each takes). The encoder
input is channels-first, as in the exported ONNX model; ``ObservationEncoder`` transposes the
env's layout.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Optional

import numpy as np
import torch
from mlagents_envs.base_env import BehaviorSpec
from torch import nn

from ml_arl.messages import (
    ActorWeights,
    Conv,
    Dense,
    LSTMWeights,
    ResidualBlockWeights,
    ResNetStackWeights,
    VisualEncoderKind,
    VisualEncoderWeights,
)
from ml_arl.policy.attention import EntityEncoder, is_variable_length, variable_indices, variable_length_problem
from ml_arl.policy.conditioning import ConditionalBody, goal_columns, is_conditioned
from ml_arl.policy.constants import LOG_SIGMA_MAX, LOG_SIGMA_MIN, MASK_LOGIT, NORM_CLIP, TANH_EPSILON
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


def _np32(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float32).numpy().copy()


def _dense_weights(lin: nn.Linear) -> Dense:
    return Dense(_np32(lin.weight.T), _np32(lin.bias))


def _conv_weights(conv: nn.Conv2d) -> Conv:
    assert conv.bias is not None
    # [out, in, kh, kw] -> [kh, kw, in, out]: contracts with channels-last windows in numpy
    padding = conv.padding
    assert not isinstance(padding, str)
    return Conv(_np32(conv.weight.permute(2, 3, 1, 0)), _np32(conv.bias), int(conv.stride[0]), int(padding[0]))


def _flat_dense_weights(lin: nn.Linear, channels: int, height: int, width: int) -> Dense:
    """A dense layer over a (C, H, W) feature map flattened by torch, with its rows reordered to
    read the map flattened channels-last (H, W, C), as the numpy encoders hold it."""
    w = lin.weight.detach().reshape(lin.out_features, channels, height, width).permute(2, 3, 1, 0)
    return Dense(_np32(w.reshape(-1, lin.out_features)), _np32(lin.bias))


def _kaiming_leaky(layer: nn.Module) -> None:
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
            _kaiming_leaky(conv)
            self.convs.append(conv)
            c, h, w = out_c, _conv_out(h, kernel, stride), _conv_out(w, kernel, stride)
        self.final_shape = (c, h, w)
        self.dense = nn.Linear(c * h * w, out_size)
        _kaiming_leaky(self.dense)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for conv in self.convs:
            x = nn.functional.leaky_relu(conv(x), LEAKY_SLOPE)
        return nn.functional.leaky_relu(self.dense(x.reshape(-1, self.dense.in_features)), LEAKY_SLOPE)

    def weights(self) -> VisualEncoderWeights:
        convs = tuple(_conv_weights(conv) for conv in self.convs if isinstance(conv, nn.Conv2d))
        dense = _flat_dense_weights(self.dense, *self.final_shape)
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
        return ResidualBlockWeights(_conv_weights(self.conv_a), _conv_weights(self.conv_b))


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
        return ResNetStackWeights(_conv_weights(self.conv), POOL_KERNEL, POOL_STRIDE, blocks)


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
        _kaiming_leaky(self.dense)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for stack in self.stacks:
            x = stack(x)
        x = nn.functional.silu(x)
        return torch.relu(self.dense(x.reshape(-1, self.dense.in_features)))

    def weights(self) -> VisualEncoderWeights:
        stacks = tuple(s.weights() for s in self.stacks if isinstance(s, ResNetStack))
        return VisualEncoderWeights("resnet", _flat_dense_weights(self.dense, *self.final_shape), stacks=stacks)


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
    """Running mean and variance (parallel Welford); output clamp((x - mean) / std, -5, 5)."""

    count: torch.Tensor
    mean: torch.Tensor
    var: torch.Tensor

    def __init__(self, size: int):
        super().__init__()
        self.register_buffer("count", torch.tensor(1e-4, dtype=torch.float64))
        self.register_buffer("mean", torch.zeros(size, dtype=torch.float64))
        self.register_buffer("var", torch.ones(size, dtype=torch.float64))

    def update(self, x: torch.Tensor) -> None:
        x = x.detach().to(torch.float64)
        n = x.shape[0]
        if n == 0:
            return
        batch_mean = x.mean(0)
        batch_var = x.var(0, unbiased=False)
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


ACTIVATIONS = {"swish": nn.SiLU, "tanh": nn.Tanh}  # SiLU is Swish: x * sigmoid(x), as ML-Agents uses


# network_settings.init_scheme(): "mlagents" (the default with swish, ML-Agents' activation) is
# ML-Agents' (layers.py, distributions.py, decoders.py): the body LeCun normal (Kaiming "linear",
# N(0, 1/fan_in)), the action heads the same times a gain, the value heads Xavier uniform. With 2 to
# 8 inputs an orthogonal first layer gives pre-activations a quarter to a half of that scale, and an
# ML-Agents config tuned under it learns slower: the Unity stand-in's Seeker took 20k steps instead
# of 14k to a mean reward of 0.6 (docs/benchmarks/mujoco.md). "orthogonal" (the default with tanh)
# is CleanRL's and SB3's: orthogonal with the activation's gain, heads of gain 0.01 (actions) and 1
# (values); hyperparameters tuned there (rl-zoo's CartPole) want it.
# Head roles -> (ML-Agents' init, its gain, the orthogonal gain).
HEAD_INIT = {
    "mu": ("kaiming", 0.2, 0.01),
    "log_sigma": ("kaiming", 0.2, 0.01),
    "logits": ("kaiming", 0.1, 0.01),
    "value": ("xavier", 1.0, 1.0),
}


def _mlp(in_size: int, hidden: int, layers: int, activation: str, scheme: str) -> nn.Sequential:
    mods: list[nn.Module] = []
    size = in_size
    for _ in range(layers):
        lin = nn.Linear(size, hidden)
        if scheme == "mlagents":
            nn.init.kaiming_normal_(lin.weight, nonlinearity="linear")
        else:
            nn.init.orthogonal_(lin.weight, gain=math.sqrt(2) if activation == "swish" else nn.init.calculate_gain("tanh"))
        nn.init.zeros_(lin.bias)
        mods += [lin, ACTIVATIONS[activation]()]
        size = hidden
    return nn.Sequential(*mods)


def mlp_body(spec: BehaviorSpec, settings: NetworkSettings, encoder: ObservationEncoder, extra_inputs: int = 0) -> nn.Module:
    """The dense body over ``encoder``'s output (and ``extra_inputs`` columns after it): ``num_layers``
    layers of ``hidden_units``, the last one goal-conditioned by a hypernetwork when the behavior has
    goal observations and ``goal_conditioning_type`` is ``hyper`` (``ml_arl.policy.conditioning``)."""
    in_size, h, layers = encoder.out_size + extra_inputs, settings.hidden_units, settings.num_layers
    if not is_conditioned(spec, settings.goal_conditioning_type):
        return _mlp(in_size, h, layers, settings.activation, settings.init_scheme())
    columns = goal_columns(spec, encoder.vector, encoder.visual, settings.hidden_units)
    return ConditionalBody(_mlp(in_size, h, layers - 1, settings.activation, settings.init_scheme()), in_size, h, columns, ACTIVATIONS[settings.activation]())


def _head(in_size: int, out_size: int, role: str, scheme: str) -> nn.Linear:
    """An output layer (``role``: a key of HEAD_INIT) under the initialisation ``scheme``."""
    lin = nn.Linear(in_size, out_size)
    mlagents_init, mlagents_gain, orthogonal_gain = HEAD_INIT[role]
    if scheme != "mlagents":
        nn.init.orthogonal_(lin.weight, gain=orthogonal_gain)
    elif mlagents_init == "kaiming":
        nn.init.kaiming_normal_(lin.weight, nonlinearity="linear")
        with torch.no_grad():
            lin.weight.mul_(mlagents_gain)
    else:
        nn.init.xavier_uniform_(lin.weight, gain=mlagents_gain)
    nn.init.zeros_(lin.bias)
    return lin


def _lstm(in_size: int, memory_size: int) -> nn.LSTM:
    """ML-Agents' LSTM layer: hidden size memory_size / 2, Xavier-uniform weights per gate, zero
    biases plus 1 on the forget gate (in both of torch's biases, as ML-Agents' lstm_layer)."""
    hidden = memory_size // 2
    lstm = nn.LSTM(in_size, hidden, batch_first=True)
    for name, param in lstm.named_parameters():
        for gate in range(4):
            block = param.data[gate * hidden : (gate + 1) * hidden]
            if "weight" in name:
                nn.init.xavier_uniform_(block)
            else:
                nn.init.zeros_(block)
                if gate == 1:
                    block.add_(1.0)
    return lstm


def _run_lstm(
    lstm: Optional[nn.LSTM], x: torch.Tensor, memories: Optional[torch.Tensor]
) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
    """``lstm`` over [S * L, in] rows (S sequences of L steps) from ``memories`` [S, 2H] (zeros when
    None: every row its own sequence); returns [S * L, H] and the memories after each sequence
    [S, 2H]. Without an LSTM: ``x`` and None."""
    if lstm is None:
        return x, None
    half = lstm.hidden_size
    if memories is None:
        memories = x.new_zeros(x.shape[0], 2 * half)
    seqs = memories.shape[0]
    h0 = memories[:, :half].unsqueeze(0).contiguous()
    c0 = memories[:, half:].unsqueeze(0).contiguous()
    out, (h1, c1) = lstm(x.reshape(seqs, -1, x.shape[1]), (h0, c0))
    return out.reshape(-1, half), torch.cat([h1[0], c1[0]], dim=1)




class ActionDistribution:
    """The actor's distribution over one batch: a Gaussian over the continuous actions (squashed
    by tanh for SAC, as ML-Agents' ``tanh_squash``) and a masked categorical per discrete branch.

    Continuous actions are what the trainer stores: the raw sample for PPO (the env receives
    ``clamp(a, -3, 3) / 3``), the tanh-squashed sample for SAC (the env receives it as is)."""

    def __init__(self, mu: Optional[torch.Tensor], std: Optional[torch.Tensor], branch_logits: list[torch.Tensor], tanh_squash: bool):
        self.mu = mu
        self.std = std
        self.branch_logits = branch_logits
        self.tanh_squash = tanh_squash
        # no argument validation: its checks (finite mean, positive std, real samples) are several
        # tensor ops per call, a noticeable part of a small network's training step
        self.normal = torch.distributions.Normal(mu, std, validate_args=False) if mu is not None and std is not None else None
        self._branch_log_probs: Optional[list[torch.Tensor]] = None

    def branch_log_probs(self) -> list[torch.Tensor]:
        """log-softmax of each discrete branch: [B, size] per branch."""
        if self._branch_log_probs is None:
            self._branch_log_probs = [torch.log_softmax(logits, dim=-1) for logits in self.branch_logits]
        return self._branch_log_probs

    def continuous_log_probs(self, continuous: torch.Tensor) -> torch.Tensor:
        """Per-dimension log-densities [B, n_cont] of stored continuous actions."""
        assert self.normal is not None
        if not self.tanh_squash:
            return self.normal.log_prob(continuous)
        capped = torch.clamp(continuous, -1.0 + TANH_EPSILON, 1.0 - TANH_EPSILON)
        return self.normal.log_prob(torch.atanh(capped)) - torch.log(1.0 - capped.pow(2) + TANH_EPSILON)

    def sample_raw(self) -> torch.Tensor:
        """A reparameterised sample of the Gaussian, before any squashing."""
        assert self.normal is not None
        return self.normal.rsample()

    def sample_continuous(self) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterised sample (squashed for SAC) and its per-dimension log-densities."""
        assert self.normal is not None
        raw = self.normal.rsample()
        log_probs = self.normal.log_prob(raw)
        if not self.tanh_squash:
            return raw, log_probs
        # log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)): exact, and its gradient does not vanish
        # where tanh(u) rounds to +-1 (log(1 - a^2 + eps) is flat there, so a saturated dimension
        # would get no entropy pull back)
        log_det = 2.0 * (math.log(2.0) - raw - torch.nn.functional.softplus(-2.0 * raw))
        return torch.tanh(raw), log_probs - log_det

    def sample_discrete(self) -> torch.Tensor:
        """One action per branch, [B, n_branches] int64."""
        picks = [torch.multinomial(lp.exp(), 1) for lp in self.branch_log_probs()]
        return torch.cat(picks, dim=1) if picks else torch.zeros((0, 0), dtype=torch.int64)

    def log_probs(self, continuous: torch.Tensor, discrete: torch.Tensor) -> torch.Tensor:
        """[B, D]: the log-probability of stored actions per continuous dimension, then per discrete
        branch (ML-Agents' ActionLogProbs.flatten(); the workers store the same columns)."""
        parts: list[torch.Tensor] = []
        if self.normal is not None:
            parts.append(self.continuous_log_probs(continuous))
        for i, logp in enumerate(self.branch_log_probs()):
            parts.append(logp.gather(1, discrete[:, i : i + 1].long()))
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)

    def entropy(self) -> torch.Tensor:
        """[B]: the Gaussian's (before squashing) averaged over continuous dimensions, as ML-Agents,
        plus each branch's."""
        entropies: list[torch.Tensor] = []
        if self.normal is not None:
            entropies.append(self.normal.entropy().mean(-1))
        for logp in self.branch_log_probs():
            entropies.append(-(logp.exp() * logp).sum(-1))
        return entropies[0] if len(entropies) == 1 else torch.stack(entropies).sum(0)


class ActorCritic(nn.Module):
    """The actor (encoder, MLP body, action heads) and a critic with one value head per reward
    stream. PPO uses a state-independent log std; SAC (``conditional_sigma``, ``tanh_squash``)
    a log-sigma head and tanh-squashed actions, as ML-Agents' actors.

    With ``settings.memory`` the actor has an LSTM between the body and the heads (hidden size
    memory_size / 2; a memory is [h, c], memory_size wide, as ML-Agents'). Its inputs are then
    sequences: ``N = S * sequence_length`` rows, row ``s * L + j`` being step j of sequence s,
    with ``memories`` [S, memory_size] the memory before each sequence's first step. The critic has
    an LSTM of its own after its body (the actor's with ``shared_critic``), as ML-Agents'; its
    memories are kept by the trainer."""

    def __init__(
        self,
        spec: BehaviorSpec,
        settings: NetworkSettings,
        shared_critic: bool = False,
        *,
        streams: Sequence[str] = ("extrinsic",),
        conditional_sigma: bool = False,
        tanh_squash: bool = False,
        critic: bool = True,
    ):
        super().__init__()
        problem = variable_length_problem(spec, settings.goal_conditioning_type) or check_visual_support(spec, settings)
        if problem is not None:
            raise ValueError(problem)
        self.spec = spec
        self.n_cont = spec.action_spec.continuous_size
        self.branches = tuple(int(b) for b in spec.action_spec.discrete_branches)
        self.normalize = settings.normalize
        self.normalizer = Normalizer(vector_size(spec))
        h = self.hidden_units = settings.hidden_units
        self.activation = settings.activation
        self.streams = tuple(streams)
        self.tanh_squash = tanh_squash
        self.encoder = ObservationEncoder(spec, settings, self.normalizer)
        self.in_size = self.encoder.out_size
        self.body = mlp_body(spec, settings, self.encoder)
        self.memory_size = settings.memory.memory_size if settings.memory is not None else 0
        self.lstm = _lstm(h, self.memory_size) if self.memory_size else None
        head_in = self.memory_size // 2 if self.memory_size else h
        self.shared_critic = shared_critic
        # SAC (critic=False) keeps its value and Q networks apart (ml_arl.trainers.sac_networks)
        self.critic_encoder = self.encoder if shared_critic or not critic else ObservationEncoder(spec, settings, self.normalizer)
        self.critic_body = self.body if shared_critic or not critic else mlp_body(spec, settings, self.critic_encoder)
        # Heads exist only for the action kinds the behavior has (no zero-sized layers).
        scheme = settings.init_scheme()
        self.mu = _head(head_in, self.n_cont, "mu", scheme) if self.n_cont else None
        self.log_std: nn.Parameter = nn.Parameter(torch.zeros(self.n_cont))
        self.log_sigma = _head(head_in, self.n_cont, "log_sigma", scheme) if self.n_cont and conditional_sigma else None
        self.logits = _head(head_in, sum(self.branches), "logits", scheme) if self.branches else None
        self.critic_lstm = self.lstm if shared_critic else _lstm(h, self.memory_size) if self.memory_size and critic else None
        self.value_head = _head(head_in, len(self.streams), "value", scheme) if critic else None

    def actor_parameters(self) -> list[nn.Parameter]:
        """The parameters of what the workers act with (encoder, body, heads)."""
        heads = [m for m in (self.lstm, self.mu, self.log_sigma, self.logits) if m is not None]
        params = list(self.encoder.parameters()) + list(self.body.parameters())
        params += [p for m in heads for p in m.parameters()]
        return params + ([self.log_std] if self.n_cont and self.log_sigma is None else [])

    # ------------------------------------------------------------------ pieces
    def vector_part(self, obs: list[torch.Tensor]) -> Optional[torch.Tensor]:
        """The flattened vector observations (what the normalizer sees), None if there are none."""
        return self.encoder.vector_part(obs) if self.encoder.vector else None

    def critic_features(self, obs: list[torch.Tensor]) -> torch.Tensor:
        """The critic's body output [B, h] (before its LSTM, if any)."""
        return self.critic_body(self.critic_encoder(obs))  # type: ignore[no-any-return]

    def critic_recurrent(
        self, features: torch.Tensor, memories: Optional[torch.Tensor]
    ) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """The critic's LSTM over its body's output, as ``recurrent`` for the actor."""
        return _run_lstm(self.critic_lstm, features, memories)

    def values(self, obs: list[torch.Tensor], memories: Optional[torch.Tensor] = None) -> torch.Tensor:
        """[B, streams]: the critic's value of each reward stream (with memory: sequences from
        ``memories`` [S, memory_size], as the actor's)."""
        assert self.value_head is not None, "this network has no critic"
        return self.value_head(_run_lstm(self.critic_lstm, self.critic_features(obs), memories)[0])

    def value(self, obs: list[torch.Tensor]) -> torch.Tensor:
        """[B]: the first stream's value."""
        return self.values(obs)[:, 0]

    def _branch_logits(self, hidden: torch.Tensor, masks: Optional[torch.Tensor]) -> list[torch.Tensor]:
        assert self.logits is not None
        logits = self.logits(hidden)
        if masks is not None:
            logits = torch.where(masks, logits, torch.full_like(logits, MASK_LOGIT))
        return list(torch.split(logits, list(self.branches), dim=1))

    def _distribution(self, hidden: torch.Tensor, masks: Optional[torch.Tensor]) -> ActionDistribution:
        mu = std = None
        if self.mu is not None:
            mu = self.mu(hidden)
            if self.log_sigma is not None:
                std = torch.clamp(self.log_sigma(hidden), LOG_SIGMA_MIN, LOG_SIGMA_MAX).exp()
            else:
                std = self.log_std.exp().expand_as(mu)
        logits = self._branch_logits(hidden, masks) if self.branches else []
        return ActionDistribution(mu, std, logits, self.tanh_squash)

    def recurrent(
        self, hidden: torch.Tensor, memories: Optional[torch.Tensor]
    ) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """The LSTM over the body's output [S * L, h], from ``memories`` [S, memory_size] (zeros when
        None: every row its own sequence); returns [S * L, memory_size / 2] and the memories after
        each sequence [S, memory_size]. Without memory, the input and None."""
        return _run_lstm(self.lstm, hidden, memories)

    def distribution(
        self, obs: list[torch.Tensor], masks: Optional[torch.Tensor], memories: Optional[torch.Tensor] = None
    ) -> ActionDistribution:
        """The actor's action distribution for a batch of observations (sequences with memory; see the class)."""
        return self._distribution(self.recurrent(self.body(self.encoder(obs)), memories)[0], masks)

    def evaluate(
        self,
        obs: list[torch.Tensor],
        masks: Optional[torch.Tensor],
        continuous: torch.Tensor,
        discrete: torch.Tensor,
        memories: Optional[torch.Tensor] = None,
        critic_memories: Optional[torch.Tensor] = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Log-probabilities [B, D] (per continuous dimension and discrete branch, ``ActionDistribution.log_probs``)
        and entropy of given actions, and the values [B, streams], in one pass (with memory: rows are
        sequences starting from ``memories`` and ``critic_memories``, see the class)."""
        hidden = self.recurrent(self.body(self.encoder(obs)), memories)[0]
        dist = self._distribution(hidden, masks)
        assert self.value_head is not None, "this network has no critic"
        critic_hidden = hidden if self.shared_critic else _run_lstm(self.critic_lstm, self.critic_features(obs), critic_memories)[0]
        return dist.log_probs(continuous, discrete), dist.entropy(), self.value_head(critic_hidden)

    def muscle_weights(self) -> ActorWeights:
        """The actor as numpy arrays (float32), for ml_arl.policy.muscle.Muscle."""
        encoders = []
        for enc in self.encoder.encoders:
            assert isinstance(enc, (VisualEncoder, ResNetEncoder))
            encoders.append(enc.weights())
        conditional = self.body if isinstance(self.body, ConditionalBody) else None
        plain = conditional.plain if conditional is not None else self.body
        assert isinstance(plain, nn.Sequential)
        linears = [m for m in plain if isinstance(m, nn.Linear)]
        hidden = self.hidden_units
        empty = Dense(np.zeros((hidden, 0), np.float32), np.zeros(0, np.float32))
        return ActorWeights(
            body=tuple(_dense_weights(lin) for lin in linears),
            activation=self.activation,  # type: ignore[arg-type]
            mu=_dense_weights(self.mu) if self.mu is not None else empty,
            log_std=_np32(self.log_std),
            log_sigma=_dense_weights(self.log_sigma) if self.log_sigma is not None else None,
            tanh_squash=self.tanh_squash,
            logits=_dense_weights(self.logits) if self.logits is not None else empty,
            branches=self.branches,
            visual=tuple(self.encoder.visual),
            encoders=tuple(encoders),
            norm_mean=_np32(self.normalizer.mean) if self.normalize else None,
            norm_std=_np32(self.normalizer.std()) if self.normalize else None,
            lstm=self._lstm_weights(),
            entities=self.encoder.entities.weights() if self.encoder.entities is not None else None,
            hyper=conditional.weights() if conditional is not None else None,
        )

    def _lstm_weights(self) -> Optional[LSTMWeights]:
        if self.lstm is None:
            return None
        params = dict(self.lstm.named_parameters())
        bias = params["bias_ih_l0"] + params["bias_hh_l0"]
        return LSTMWeights(_np32(params["weight_ih_l0"].T), _np32(params["weight_hh_l0"].T), _np32(bias))
