"""pydantic's validation errors as one-line problems: the key path, the bad value, and what to
write instead (the closest valid key, the allowed values, or that a feature is not supported
yet).
"""

from __future__ import annotations

import difflib
from typing import Any, Optional

from pydantic import BaseModel, ValidationError

from ml_arl.settings.trainer_settings import HYPERPARAMETER_MODELS, PPOSettings
from ml_arl.settings.values import key_text, short


def _untyped_field_model(part: Any, node: Any) -> Optional[type[BaseModel]]:
    """The model an untyped field (Any) follows, for the "did you mean" hint: hyperparameters
    follow the section's trainer_type (PPO's for a user trainer)."""
    if part != "hyperparameters":
        return None
    trainer_type = node.get("trainer_type", "ppo") if isinstance(node, dict) else "ppo"
    return HYPERPARAMETER_MODELS.get(str(trainer_type), PPOSettings)



def _fields_at(model: type[BaseModel], loc: tuple[Any, ...], data: Any = None) -> list[str]:
    """Valid key names at ``loc`` (the path to a nested section inside ``model``; ``data`` is
    the input validated, for sections whose model depends on a sibling key)."""
    current: Optional[type[BaseModel]] = model
    node = data
    for part in loc:
        parent = node
        node = node[part] if isinstance(node, (dict, list)) and _has(node, part) else None
        if isinstance(part, int):  # an item of a list of sections (phases)
            continue
        field = current.model_fields.get(str(part)) if current is not None else None
        untyped = _untyped_field_model(part, parent) if field is not None else None
        if untyped is not None:
            current = untyped
            continue
        current = _model_in(field.annotation) if field is not None else None
    return list(current.model_fields) if current is not None else []


def _has(node: Any, part: Any) -> bool:
    if isinstance(node, dict):
        return part in node
    return isinstance(part, int) and 0 <= part < len(node)


def _model_in(annotation: Any) -> Optional[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if getattr(annotation, "__origin__", None) is dict:
        return None
    for arg in getattr(annotation, "__args__", ()) or ():
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
        if getattr(arg, "__origin__", None) is list:
            return _model_in(arg)
    return None


def describe(error: Any, prefix: tuple[Any, ...], model: type[BaseModel], data: Any = None) -> str:
    """One pydantic error (from ``model``'s validation, at ``prefix`` in the config) as one line."""
    # pydantic adds union members / validator tags to some locations; drop them for the user.
    rel = tuple(
        p for p in error["loc"]
        if not (isinstance(p, str) and (p.startswith("function-") or p in ("float", "dict[str,any]", "constrained-float")))
    )
    clean = tuple(prefix) + rel
    path = ".".join(key_text(p) for p in clean) or "(top level)"
    kind = error["type"]
    value = error.get("input")
    if kind == "extra_forbidden":
        key = str(clean[-1])
        valid = _fields_at(model, rel[:-1], data)
        if len(rel) >= 2 and rel[-2] == "hyperparameters" and key not in valid:
            owners = [name for name, other in HYPERPARAMETER_MODELS.items() if key in other.model_fields]
            if owners:
                return f"{path}: '{key}' is a {owners[0].upper()} hyperparameter, not one of this trainer_type's; remove it"
        close = difflib.get_close_matches(key, valid, n=1, cutoff=0.5)
        hint = f"; did you mean '{close[0]}'?" if close else (f"; valid keys: {', '.join(valid)}" if valid else "")
        return f"{path}: unknown key '{key}'{hint}"
    if kind == "literal_error":
        expected = error.get("ctx", {}).get("expected", "")
        close_msg = ""
        if isinstance(value, str):
            options = [o.strip(" '") for o in str(expected).replace(" or ", ",").split(",")]
            close = difflib.get_close_matches(value, options, n=1, cutoff=0.5)
            if close:
                close_msg = f"; did you mean '{close[0]}'?"
        return f"{path}: {short(value)} is not allowed, expected {expected}{close_msg}"
    if kind == "missing":
        return f"{path}: required key is missing"
    msg = error["msg"].removeprefix("Value error, ")
    if isinstance(value, dict):  # a section's own check (a model validator): its path says where
        return f"{path}: {msg}"
    return f"{path}: {short(value)} is invalid: {msg[0].lower() + msg[1:]}"


def validate(model: type[BaseModel], data: Any, prefix: tuple[Any, ...]) -> tuple[Any, list[str]]:
    """(the validated model, []) or (None, one line per problem, with ``prefix`` as the key path)."""
    try:
        return model.model_validate(data), []
    except ValidationError as err:
        return None, [describe(e, prefix, model, data) for e in err.errors()]
