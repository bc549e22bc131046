"""Value types every settings module shares: the numbers YAML gives (``5.0e5`` for an integer,
``"3.0e-4"`` for a float), run names, the strict base model, and small helpers for one-line
messages and for merging raw config mappings.

Imports nothing from the rest of the settings package.
"""

from __future__ import annotations

import copy
import math
import re
from functools import cache
from typing import Annotated, Any, Optional

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, TypeAdapter, ValidationError

import ml_arl.settings.bounds as bounds


def to_int(value: Any) -> Any:
    """Accept 5.0e5, 500000.0 and "5.0e5" for integer keys, as ML-Agents does (int(float(v)));
    anything beyond +-2**53 is out of range (a typo, and not exact as a float)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    elif isinstance(value, str) and len(value) <= 40:
        try:
            as_float = float(value)
        except ValueError:
            return value
        if as_float.is_integer():
            value = int(as_float)
    if isinstance(value, int) and abs(value) > bounds.MAX_INT:
        raise ValueError(f"out of range (at most {bounds.MAX_INT:.3g} in absolute value)")
    return value


def to_float(value: Any) -> Any:
    """YAML 1.1 reads "3.0e-4" (no sign after e) as a string; accept it as a number."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def number(value: Any) -> Optional[float]:
    """``value`` as a finite float (numbers and numeric strings; not booleans), else None."""
    value = to_float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        as_float = float(value)
    except OverflowError:
        return None
    return as_float if math.isfinite(as_float) else None


Int = Annotated[int, BeforeValidator(to_int)]
Float = Annotated[float, BeforeValidator(to_float)]


class Strict(BaseModel):
    """Base of every settings model: unknown keys are errors, and inf and nan are never
    meaningful settings (YAML's .inf / .nan, or 1e999)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


_RUN_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def check_run_name(value: str) -> str:
    """A run id names one folder inside the results folder: never a path (no escapes, no absolute paths)."""
    if not _RUN_NAME.match(value) or value in (".", ".."):
        raise ValueError(
            "is not a run name; use letters, digits, '-', '_' and '.' (one folder name: no '/', not '.' or '..')"
        )
    return value


RunName = Annotated[str, AfterValidator(check_run_name)]


@cache
def _field_adapter(model: type[BaseModel], name: str) -> TypeAdapter[Any]:
    field = model.model_fields[name]
    annotation: Any = field.annotation
    return TypeAdapter(Annotated[(annotation, *field.metadata)] if field.metadata else annotation)


def valid_input(model: type[BaseModel], name: str, data: dict[str, Any]) -> tuple[bool, Any]:
    """(True, value) when the raw ``data`` gives field ``name`` of ``model`` a valid value (its
    default when absent), else (False, None). For defaults derived from other keys in a
    ``mode="before"`` validator: they are derived only from inputs that will validate."""
    if name not in data:
        return True, model.model_fields[name].get_default(call_default_factory=True)
    try:
        return True, _field_adapter(model, name).validate_python(data[name])
    except ValidationError:
        return False, None


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """A new mapping: ``base`` with ``override`` merged in, nested mappings key by key."""
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def flat_items(tree: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Every leaf of nested mappings and lists as (dotted key, value); list items by their index
    (``phases.1.max_steps``), empty mappings and lists as leaves."""
    if isinstance(tree, list) and tree:
        items: Any = enumerate(tree)
    elif isinstance(tree, dict) and tree:
        items = tree.items()
    else:
        return [(prefix, tree)] if prefix else []
    out: list[tuple[str, Any]] = []
    for name, child in items:
        out += flat_items(child, f"{prefix}.{name}" if prefix else str(name))
    return out


def key_text(part: Any) -> str:
    """A key in a dotted path: as written when it is a plain name, quoted (escapes shown) otherwise."""
    text = str(part)
    if text and text.isprintable() and not any(ch.isspace() or ch in ".'\"" for ch in text) and len(text) <= 60:
        return text
    return short(text)


def short(value: Any, limit: int = 60) -> str:
    """repr of a value for a one-line message, cut to ``limit`` characters."""
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
