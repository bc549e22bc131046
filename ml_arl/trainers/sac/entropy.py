"""SAC's entropy coefficients (ml_arl.trainers.sac.trainer): learned as logs, one for the continuous
actions and one per discrete branch, each pulled towards its target entropy at ML-Agents' scales."""

from __future__ import annotations

import math

import torch

DISCRETE_TARGET_ENTROPY_SCALE = 0.2  # ML-Agents' fixed SAC internals
CONTINUOUS_TARGET_ENTROPY_SCALE = 1.0


class EntropyCoefficients:
    """SAC's entropy coefficients, learned as logs: one for the continuous actions, one per
    discrete branch, each pulled towards its target entropy (ML-Agents' scales)."""

    def __init__(self, init: float, n_cont: int, branches: tuple[int, ...], device: torch.device):
        log_init = math.log(init)
        self.cont = torch.full((1,), log_init, device=device, requires_grad=True) if n_cont else None
        self.disc = torch.full((len(branches),), log_init, device=device, requires_grad=True) if branches else None
        self.target_cont = -CONTINUOUS_TARGET_ENTROPY_SCALE * float(n_cont)
        self.target_disc = (
            torch.tensor([DISCRETE_TARGET_ENTROPY_SCALE * math.log(b) for b in branches], dtype=torch.float32, device=device)
            if branches else None
        )
        self._named = [(key, a) for key, a in (("continuous", self.cont), ("discrete", self.disc)) if a is not None]

    def parameters(self) -> list[torch.Tensor]:
        return [alpha for _, alpha in self._named]

    def stat_names(self) -> list[str]:
        return [f"Policy/{key.capitalize()} Entropy Coeff" for key, _ in self._named]

    def stats(self) -> list[torch.Tensor]:
        """The coefficients themselves (not their logs), each averaged over its branches."""
        return [alpha.exp().mean() for _, alpha in self._named]

    def state(self) -> dict[str, torch.Tensor]:
        return {key: alpha.detach().clone() for key, alpha in self._named}

    def load_state(self, state: dict[str, torch.Tensor]) -> None:
        with torch.no_grad():
            for key, alpha in self._named:
                alpha.copy_(state[key])
