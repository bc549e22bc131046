"""Adam without torch.optim.

Constructing any ``torch.optim.Optimizer`` imports ``torch._dynamo`` (the compiler stack: its
``__init__`` is wrapped in ``torch._disable_dynamo``). On a 2-core machine that import takes about
1.2 s, which is on the critical path of every run: the first update cannot start before the
optimizer exists, and on small tasks 1.2 s is a fifth of the whole training. So the trainers use
this class: the same update rule, defaults and ``state_dict`` layout as ``torch.optim.Adam``
(checkpoints load in either), computed by torch's own kernels: ``torch._fused_adam_`` on CPU and
CUDA (what ``torch.optim.Adam(fused=True)`` calls), ``torch._foreach_*`` elsewhere (what
``foreach=True`` calls). tests/trainers/test_maths.py checks both against ``torch.optim.Adam``.

Importing torch.optim in a background thread while the workers start does not hide the cost: the
import is Python work that needs the GIL, which the main thread holds while it builds the run
(docs/research/first-update-adam.md has the first update's time). Both optimizers
give bit-identical parameters, and each loads the other's state_dict.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, Optional

import torch

FUSED_DEVICES = ("cpu", "cuda")


class Adam:
    def __init__(
        self,
        params: Iterable[torch.Tensor],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        fused: bool | None = None,
    ):
        self.params = list(params)
        if not self.params:
            raise ValueError("Adam got an empty parameter list")
        self.lr = float(lr)
        self.betas = (float(betas[0]), float(betas[1]))
        self.eps = float(eps)
        devices = {p.device.type for p in self.params}
        self.fused = all(d in FUSED_DEVICES for d in devices) if fused is None else fused
        self.exp_avgs = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]
        self.exp_avg_sqs = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]
        # One step counter per parameter, as torch keeps them (the fused kernel reads them there).
        self.state_steps = [torch.zeros((), dtype=torch.float32, device=p.device) for p in self.params]

    @property
    def step_count(self) -> int:
        """Steps taken (restored with the state): the largest per-parameter step counter."""
        return int(max(float(s) for s in self.state_steps))

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def _stepped(self) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]:
        """(params, grads, exp_avgs, exp_avg_sqs, steps) of the parameters that have a gradient."""
        indices = [i for i, p in enumerate(self.params) if p.grad is not None]
        params = [self.params[i] for i in indices]
        grads = [p.grad for p in params]
        exp_avgs = [self.exp_avgs[i] for i in indices]
        exp_avg_sqs = [self.exp_avg_sqs[i] for i in indices]
        steps = [self.state_steps[i] for i in indices]
        return params, grads, exp_avgs, exp_avg_sqs, steps  # type: ignore[return-value]

    @staticmethod
    @torch.no_grad()
    def step_all(optimizers: Sequence[Adam]) -> None:
        """``step()`` of each optimizer, with one fused kernel call for those that share their
        settings (the update is per parameter: the result is the same as stepping each)."""
        first = optimizers[0]
        same = all(
            o.fused and (o.lr, o.betas, o.eps) == (first.lr, first.betas, first.eps) for o in optimizers
        )
        if not same:
            for o in optimizers:
                o.step()
            return
        lists: tuple[list[torch.Tensor], ...] = ([], [], [], [], [])
        for o in optimizers:
            for into, part in zip(lists, o._stepped()):
                into.extend(part)
        params, grads, exp_avgs, exp_avg_sqs, steps = lists
        if not params:
            return
        torch._foreach_add_(steps, 1)
        torch._fused_adam_(
            params, grads, exp_avgs, exp_avg_sqs, [], steps,  # type: ignore[arg-type]
            lr=first.lr, beta1=first.betas[0], beta2=first.betas[1], weight_decay=0.0, eps=first.eps,
            amsgrad=False, maximize=False,
        )

    @torch.no_grad()
    def step(self) -> None:
        params, grads, exp_avgs, exp_avg_sqs, steps = self._stepped()
        if not params:
            return
        beta1, beta2 = self.betas
        torch._foreach_add_(steps, 1)
        if self.fused:
            torch._fused_adam_(
                params, grads, exp_avgs, exp_avg_sqs, [], steps,  # type: ignore[arg-type]
                lr=self.lr, beta1=beta1, beta2=beta2, weight_decay=0.0, eps=self.eps,
                amsgrad=False, maximize=False,
            )
            return
        torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)  # type: ignore[arg-type]
        torch._foreach_mul_(exp_avg_sqs, beta2)
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - beta2)  # type: ignore[arg-type]
        step_sizes, denominators = [], torch._foreach_sqrt(exp_avg_sqs)
        for k, s in enumerate(steps):
            n = float(s)
            step_sizes.append(-self.lr / (1 - beta1**n))
            denominators[k].div_(math.sqrt(1 - beta2**n)).add_(self.eps)
        torch._foreach_addcdiv_(params, exp_avgs, denominators, step_sizes)

    # ------------------------------------------------------------------ torch.optim.Adam's layout
    def state_dict(self) -> dict[str, Any]:
        n = len(self.params)
        return {
            "state": {
                i: {"step": self.state_steps[i].clone(), "exp_avg": self.exp_avgs[i].clone(), "exp_avg_sq": self.exp_avg_sqs[i].clone()}
                for i in range(n)
            },
            "param_groups": [
                {
                    "lr": self.lr, "betas": self.betas, "eps": self.eps, "weight_decay": 0.0, "amsgrad": False,
                    "maximize": False, "foreach": None, "capturable": False, "differentiable": False,
                    "fused": self.fused, "params": list(range(n)),
                }
            ],
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Accepts what ``state_dict`` (or ``torch.optim.Adam.state_dict``) wrote for the same
        parameters; raises ValueError when it belongs to other parameters."""
        groups = state_dict.get("param_groups")
        state = state_dict.get("state")
        if not isinstance(groups, list) or len(groups) != 1 or not isinstance(state, dict):
            raise ValueError("the optimizer state is not a single-group Adam state")
        ids = list(groups[0]["params"])
        if len(ids) != len(self.params):
            raise ValueError(f"the optimizer state has {len(ids)} parameters, the network {len(self.params)}")
        loaded: list[Optional[dict[str, Any]]] = []
        for p, pid in zip(self.params, ids):
            entry = state.get(pid)
            if entry is None:  # never stepped: keep zeros
                loaded.append(None)
                continue
            if tuple(entry["exp_avg"].shape) != tuple(p.shape):
                raise ValueError(f"optimizer state shape {tuple(entry['exp_avg'].shape)} does not match parameter shape {tuple(p.shape)}")
            loaded.append(entry)
        for k, entry in enumerate(loaded):
            if entry is None:
                continue
            p = self.params[k]
            self.exp_avgs[k] = entry["exp_avg"].to(device=p.device, dtype=p.dtype).clone()
            self.exp_avg_sqs[k] = entry["exp_avg_sq"].to(device=p.device, dtype=p.dtype).clone()
            self.state_steps[k] = torch.as_tensor(entry["step"], dtype=torch.float32).to(p.device).clone().reshape(())
        group = groups[0]
        self.lr = float(group.get("lr", self.lr))
        betas = group.get("betas", self.betas)
        self.betas = (float(betas[0]), float(betas[1]))
        self.eps = float(group.get("eps", self.eps))


@torch.no_grad()
def clip_grad_norm(params: Sequence[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Scale the gradients so their joint L2 norm is at most ``max_norm``; returns the norm before.

    The rule of ``torch.nn.utils.clip_grad_norm_`` (coefficient max_norm / (norm + 1e-6), capped
    at 1) in four kernel calls, without its per-call grouping by device and dtype: on a small
    network that wrapper costs more than the clipping.
    """
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return torch.zeros(())
    total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
    torch._foreach_mul_(grads, torch.clamp(max_norm / (total + 1e-6), max=1.0))
    return total
