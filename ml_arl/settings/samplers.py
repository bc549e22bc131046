"""The values of environment_parameters: a number or one of ML-Agents' samplers, with ML-Agents'
keys and defaults, as a pydantic discriminated union on ``sampler_type``.

``check_values`` validates ``{name: float | Sampler}`` and keeps the result as plain data:
floats, and ``{"sampler_type": ..., "sampler_parameters": {..., "seed": int}}`` with every
parameter filled in (seed -1 = derived from the run seed), describing its problems one line
each. Curricula, whose lessons hold such values, are ``ml_arl.settings.parameters``.
"""

from __future__ import annotations

import difflib
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

import ml_arl.settings.bounds as bounds
from ml_arl.settings.values import Strict, number, short, to_int

SAMPLER_TYPES = ("constant", "uniform", "gaussian", "multirangeuniform")  # as ML-Agents orders them

# Errors whose message is final; the rest are described by _problem.
_OWN = "arl_sampler"


def _as_number(value: Any) -> float:
    as_float = number(value)
    if as_float is None:
        raise PydanticCustomError(_OWN, f"{short(value)} is not a number")
    return as_float


def _as_seed(value: Any) -> int:
    try:
        seed = to_int(value)
    except ValueError:
        seed = None
    if not isinstance(seed, int) or isinstance(seed, bool) or not -1 <= seed <= bounds.MAX_SEED:
        raise PydanticCustomError(_OWN, f"{short(value)} is not an integer from -1 to {bounds.MAX_SEED}")
    return seed


def _as_intervals(value: Any) -> Any:
    ok = isinstance(value, list) and value and all(
        isinstance(iv, list) and len(iv) == 2 and all(number(v) is not None for v in iv) for iv in value
    )
    if not ok:
        raise PydanticCustomError(_OWN, f"{short(value)} is invalid; give a list of [min, max] pairs")
    return value


def _ordered(interval: list[float]) -> list[float]:
    low, high = interval
    if low > high:
        raise PydanticCustomError(_OWN, f"[{low}, {high}] has min > max; swap them")
    return interval


Number = Annotated[float, BeforeValidator(_as_number)]
Seed = Annotated[int, BeforeValidator(_as_seed)]
Interval = Annotated[list[Number], AfterValidator(_ordered)]


def _seed() -> Any:
    return Field(-1, description="-1: the run seed + the sampler's position among the samplers")


class ConstantParameters(Strict):
    value: Number = 0.0
    seed: Seed = _seed()


class UniformParameters(Strict):
    min_value: Number = 0.0
    max_value: Number = 1.0
    seed: Seed = _seed()

    @model_validator(mode="after")
    def _min_max(self) -> UniformParameters:
        if self.min_value > self.max_value:
            raise PydanticCustomError(
                _OWN, f"min_value {self.min_value} is larger than max_value {self.max_value}; swap them"
            )
        return self


class GaussianParameters(Strict):
    mean: Number = 1.0
    st_dev: Number = 1.0
    seed: Seed = _seed()


class MultiRangeUniformParameters(Strict):
    intervals: Annotated[list[Interval], BeforeValidator(_as_intervals)] = Field(default_factory=lambda: [[0.0, 1.0]])
    seed: Seed = _seed()


def _empty_is_default(value: Any) -> Any:
    return value or {}  # sampler_parameters left empty (null, {}): every parameter at its default


class ConstantSampler(Strict):
    sampler_type: Literal["constant"]
    sampler_parameters: Annotated[ConstantParameters, BeforeValidator(_empty_is_default)] = Field(
        default_factory=lambda: ConstantParameters()
    )


class UniformSampler(Strict):
    sampler_type: Literal["uniform"]
    sampler_parameters: Annotated[UniformParameters, BeforeValidator(_empty_is_default)] = Field(
        default_factory=lambda: UniformParameters()
    )


class GaussianSampler(Strict):
    sampler_type: Literal["gaussian"]
    sampler_parameters: Annotated[GaussianParameters, BeforeValidator(_empty_is_default)] = Field(
        default_factory=lambda: GaussianParameters()
    )


class MultiRangeUniformSampler(Strict):
    sampler_type: Literal["multirangeuniform"]
    sampler_parameters: Annotated[MultiRangeUniformParameters, BeforeValidator(_empty_is_default)] = Field(
        default_factory=lambda: MultiRangeUniformParameters()
    )


Sampler = Annotated[
    Union[ConstantSampler, UniformSampler, GaussianSampler, MultiRangeUniformSampler],
    Field(discriminator="sampler_type"),
]
_PARAMETERS: dict[str, type[BaseModel]] = {
    "constant": ConstantParameters, "uniform": UniformParameters,
    "gaussian": GaussianParameters, "multirangeuniform": MultiRangeUniformParameters,
}


def _as_parameter_number(value: Any) -> float:
    as_float = number(value)
    if as_float is None:
        raise PydanticCustomError(
            _OWN, f"{short(value)} is invalid; give a number or a sampler {{sampler_type: ..., sampler_parameters: ...}}"
        )
    return as_float


def _sampler_keys(value: Any) -> Any:
    """Checked before sampler_type: keys a sampler does not have."""
    if isinstance(value, dict):
        unknown = sorted(set(value) - {"sampler_type", "sampler_parameters"}, key=str)
        if unknown:
            raise PydanticCustomError(
                _OWN, f"unknown key '{unknown[0]}'; a sampler has sampler_type and sampler_parameters, a curriculum has curriculum"
            )
    return value


def _branch(value: Any) -> str:
    return "sampler" if isinstance(value, (dict, BaseModel)) else "number"


ParameterValue = Annotated[
    Union[Annotated[Annotated[float, BeforeValidator(_as_parameter_number)], Tag("number")], Annotated[Sampler, Tag("sampler")]],
    Discriminator(_branch),
    BeforeValidator(_sampler_keys),
]


def _plain(params: dict[str, Any]) -> dict[str, Any]:
    return {key: value.model_dump() if isinstance(value, BaseModel) else value for key, value in params.items()}


# Validated as {name: float | Sampler}; kept as plain data.
_ADAPTER: TypeAdapter[dict[str, Any]] = TypeAdapter(Annotated[dict[str, ParameterValue], AfterValidator(_plain)])


def _problem(error: Any, raw: dict[str, Any], where: str) -> str:
    """One error of _ADAPTER as one line. Its loc is (key, branch, sampler type, ...)."""
    loc = error["loc"]
    key = loc[0]
    if loc[1:] == ("[key]",):
        return f"{where}: {short(key)} is not a parameter name; parameter names are strings"
    # keys as written; an interval's index is not shown
    rest = [str(p) for p in loc[3:] if not isinstance(p, int)]
    path = ".".join([f"{where}.{key}", *rest])
    kind = error["type"]
    if kind == _OWN:
        return f"{path}: {error['msg']}"
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        given = raw[key].get("sampler_type")
        close = difflib.get_close_matches(str(given), list(SAMPLER_TYPES), n=1, cutoff=0.5)
        hint = f"; did you mean '{close[0]}'?" if close else f"; expected one of {', '.join(SAMPLER_TYPES)}"
        return f"{path}.sampler_type: {short(given)} is not a sampler{hint}"
    if kind in ("extra_forbidden", "invalid_key") and len(loc) == 5:  # invalid_key: not a string
        valid = ", ".join(_PARAMETERS[loc[2]].model_fields)
        return f"{where}.{key}.sampler_parameters: unknown key '{loc[4]}' for a {loc[2]} sampler; valid keys: {valid}"
    if kind == "model_type" and len(loc) == 4:
        return f"{path}: expected a mapping, got {short(error.get('input'))}"
    return f"{path}: {short(error.get('input'))} is invalid: {error['msg']}"  # not expected


def _order(error: Any, raw: dict[str, Any]) -> tuple[int, int]:
    """Problems in the order the keys are written (pydantic reports unknown keys last)."""
    loc = error["loc"]
    keys = list(raw)
    first = keys.index(loc[0]) if loc[0] in keys else len(keys)
    given = raw.get(loc[0])
    parameters = given.get("sampler_parameters") if isinstance(given, dict) else None
    if len(loc) > 4 and isinstance(parameters, dict) and loc[4] in parameters:
        return first, list(parameters).index(loc[4])
    return first, len(parameters) if isinstance(parameters, dict) else 0


def check_values(raw: dict[str, Any], where: str) -> tuple[Optional[dict[str, Any]], list[str]]:
    """(the values as plain data, []) or (None, one line per problem, each starting with ``where``)."""
    try:
        return _ADAPTER.validate_python(raw), []
    except ValidationError as err:
        errors = sorted(err.errors(), key=lambda e: _order(e, raw))
        return None, [_problem(e, raw, where) for e in errors]
