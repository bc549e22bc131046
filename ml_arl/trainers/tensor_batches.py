"""Typed batches (dataclasses of tensors: PPO's, POCA's, the reward signals') taken row by row or
moved, field by field, by one helper instead of a hand-written copy of every field per class."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar, Union

import torch

B = TypeVar("B")
Index = Union[torch.Tensor, slice]


def map_tensors(batch: B, fn: Callable[[torch.Tensor], torch.Tensor], rows_only: bool = False) -> B:
    """A new batch of the same class with ``fn`` applied to every tensor field: lists of tensors
    (one per observation) element by element; None stays None. With ``rows_only`` a tensor with no
    rows (an estimate not computed yet, ``torch.zeros(0)``) stays as it is."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(batch):  # type: ignore[arg-type]
        value = getattr(batch, field.name)
        if isinstance(value, list):
            values[field.name] = [fn(t) for t in value]
        elif isinstance(value, torch.Tensor) and not (rows_only and value.shape[0] == 0):
            values[field.name] = fn(value)
        else:
            values[field.name] = value
    return type(batch)(**values)


def select_rows(batch: B, idx: Index) -> B:
    """The rows ``idx`` (indices, a boolean mask or a slice) of every field: a minibatch."""
    return map_tensors(batch, lambda t: t[idx], rows_only=True)


def to_numpy(batch: Any) -> dict[str, Any]:
    """A batch's fields as numpy (lists of arrays for lists of tensors; other values as they are):
    what crosses to another learner (ml_arl.trainers.learner_protocol)."""
    out: dict[str, Any] = {}
    for field in dataclasses.fields(batch):
        value = getattr(batch, field.name)
        if isinstance(value, list):
            out[field.name] = [t.detach().cpu().numpy() for t in value]
        elif isinstance(value, torch.Tensor):
            out[field.name] = value.detach().cpu().numpy()
        else:
            out[field.name] = value
    return out


def from_numpy(cls: Callable[..., B], data: dict[str, Any], device: torch.device) -> B:
    """``to_numpy``'s batch back as tensors on ``device``."""
    values: dict[str, Any] = {}
    for name, value in data.items():
        if isinstance(value, list):
            values[name] = [torch.as_tensor(v, device=device) for v in value]
        elif value is not None and hasattr(value, "dtype"):
            values[name] = torch.as_tensor(value, device=device)
        else:
            values[name] = value
    return cls(**values)
