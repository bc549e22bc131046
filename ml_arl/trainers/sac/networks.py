"""SAC's critics, as ML-Agents lays them out: a state-value network V (and its slowly moving
target copy) and two Q networks. Each has its own observation encoder and MLP body and one
output per reward stream; a Q network also takes the continuous actions next to the encoded
observations and, with discrete actions, gives a value per discrete action of every branch.
They share the actor's observation normalizer (updated by the trainer).

With ``network_settings.memory`` each critic has an LSTM between its body and its head (as
ML-Agents' network body), run over sequences: rows ``s * L + j``, from memories [S, memory_size]."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import torch
from mlagents_envs.base_env import BehaviorSpec
from torch import nn
from torch.nn import functional as F

from ml_arl.networks.encoders import Normalizer, ObservationEncoder
from ml_arl.networks.layers import dense_head, make_lstm, mlp_body, run_lstm
from ml_arl.settings import NetworkSettings

# networks.ACTIVATIONS as functions
ACTIVATION_FUNCTIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"swish": F.silu, "tanh": torch.tanh}


class Critic(nn.Module):
    """obs (+ continuous actions) -> [B, streams, outputs]."""

    def __init__(
        self,
        spec: BehaviorSpec,
        settings: NetworkSettings,
        normalizer: Normalizer,
        streams: int,
        action_inputs: int = 0,
        outputs: int = 1,
    ):
        super().__init__()
        self.streams = streams
        self.outputs = outputs
        self.action_inputs = action_inputs
        self.encoder = ObservationEncoder(spec, settings, normalizer)
        # goal-conditioned (a hypernetwork layer last) as the actor's body, when it is
        self.body = mlp_body(spec, settings, self.encoder, action_inputs)
        self.memory_size = settings.memory.memory_size if settings.memory is not None else 0
        self.lstm = make_lstm(settings.hidden_units, self.memory_size) if self.memory_size else None
        self.head = dense_head(self.memory_size // 2 if self.lstm is not None else settings.hidden_units, streams * outputs, "value", settings.init_scheme())
        # a plain body's layers called as functions: a gradient step evaluates a critic seven times,
        # and nn.Module's call machinery would cost more than these small layers
        self.plain = isinstance(self.body, nn.Sequential)
        linears = [m for m in self.body.modules() if isinstance(m, nn.Linear)] if self.plain else []
        self._layers = [(lin, ACTIVATION_FUNCTIONS[settings.activation]) for lin in linears]

    def features(self, obs: list[torch.Tensor], actions: torch.Tensor | None = None) -> torch.Tensor:
        """The body's output [B, hidden] (the LSTM's input with memory)."""
        x = self.encoder.forward(obs)  # (no hooks on these modules: skips nn.Module's call machinery)
        if self.action_inputs:
            assert actions is not None
            x = torch.cat([x, actions], dim=1)
        if not self.plain:
            x = self.body(x)
        for lin, activation in self._layers:
            x = activation(F.linear(x, lin.weight, lin.bias))
        return x

    def _out(self, x: torch.Tensor) -> torch.Tensor:
        head = self.head
        return F.linear(x, head.weight, head.bias).reshape(-1, self.streams, self.outputs)

    def forward(self, obs: list[torch.Tensor], actions: torch.Tensor | None = None, memories: torch.Tensor | None = None) -> torch.Tensor:
        """[B, streams, outputs]; with memory, B rows of sequences from ``memories`` [S, memory_size]."""
        x = self.features(obs, actions)
        if self.lstm is not None:
            assert memories is not None, "a critic with memory runs over sequences from given memories"
            x = run_lstm(self.lstm, x, memories)[0]
        return self._out(x)

    def over_trajectory(
        self, obs: list[torch.Tensor], memory: torch.Tensor, sequence_length: int, actions: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One trajectory [T rows] as one unbroken sequence from ``memory`` [1, memory_size], run in
        pieces of ``sequence_length``: its outputs [T, streams, outputs], for each step the memory
        before its piece [T, memory_size] (as ML-Agents records critic memories), and the memory
        after the last step [1, memory_size]."""
        assert self.lstm is not None
        x = self.features(obs, actions)
        outs, before = [], []
        for first in range(0, x.shape[0], sequence_length):
            piece = x[first : first + sequence_length]
            before.append(memory.expand(piece.shape[0], -1))
            out, after = run_lstm(self.lstm, piece, memory)
            assert after is not None
            outs.append(out)
            memory = after
        return self._out(torch.cat(outs)), torch.cat(before), memory

def soft_update(source: nn.Module | Sequence[torch.Tensor], target: nn.Module | Sequence[torch.Tensor], tau: float) -> None:
    """target <- tau * source + (1 - tau) * target, parameter by parameter (ML-Agents' soft_update).
    Takes modules or their parameter lists (a trainer keeps the lists: no module walk per step)."""
    src: list[torch.Tensor] = list(source.parameters()) if isinstance(source, nn.Module) else list(source)
    tgt: list[torch.Tensor] = list(target.parameters()) if isinstance(target, nn.Module) else list(target)
    with torch.no_grad():
        torch._foreach_mul_(tgt, 1.0 - tau)
        torch._foreach_add_(tgt, src, alpha=tau)


@contextmanager
def frozen(params: Sequence[torch.Tensor]) -> Iterator[None]:
    """What runs inside records no gradient path to ``params`` (gradients still reach the
    inputs): a network scored as a fixed function, without a copy of its weights."""
    before = [p.requires_grad for p in params]
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, flag in zip(params, before):
            p.requires_grad_(flag)
