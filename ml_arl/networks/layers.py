"""The dense layers of the networks (torch): the MLP body, output heads and the LSTM, each
initialised under ``network_settings.init_scheme()``.
"""

from __future__ import annotations

import math
from typing import Optional

import torch
from mlagents_envs.base_env import BehaviorSpec
from torch import nn

from ml_arl.networks.conditioning import ConditionalBody, goal_columns, is_conditioned
from ml_arl.networks.encoders import ObservationEncoder
from ml_arl.settings import NetworkSettings

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


def mlp(in_size: int, hidden: int, layers: int, activation: str, scheme: str) -> nn.Sequential:
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
    goal observations and ``goal_conditioning_type`` is ``hyper`` (``ml_arl.networks.conditioning``)."""
    in_size, h, layers = encoder.out_size + extra_inputs, settings.hidden_units, settings.num_layers
    if not is_conditioned(spec, settings.goal_conditioning_type):
        return mlp(in_size, h, layers, settings.activation, settings.init_scheme())
    columns = goal_columns(spec, encoder.vector, encoder.visual, settings.hidden_units)
    return ConditionalBody(mlp(in_size, h, layers - 1, settings.activation, settings.init_scheme()), in_size, h, columns, ACTIVATIONS[settings.activation]())


def dense_head(in_size: int, out_size: int, role: str, scheme: str) -> nn.Linear:
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


def make_lstm(in_size: int, memory_size: int) -> nn.LSTM:
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


def run_lstm(
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




