"""The study file's keys, checked as strictly as a run config (unknown keys are errors, with the
closest valid key).

The search samplers speak environment_parameters' vocabulary (ML-Agents' ``uniform``,
``gaussian``, ``multirangeuniform``, same keys) plus ``log_uniform``, ``int_uniform`` and
``choice``. A sampler's ``seed`` is accepted (environment_parameters has it) and has no effect: the
study's ``sampler_seed`` decides what Optuna draws.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BeforeValidator, Field, field_validator, model_validator

from ml_arl.settings.samplers import GaussianParameters, MultiRangeUniformParameters, UniformParameters
from ml_arl.settings.values import Float, Int, Strict

DEFAULT_TAG = "Environment/Cumulative Reward"
_MEAN_LAST = re.compile(r"^mean_last_([1-9][0-9]{0,5})$")


def _empty_is_default(value: Any) -> Any:
    return value or {}


class LogUniformParameters(Strict):
    min_value: Float = 1e-5
    max_value: Float = 1e-1

    @model_validator(mode="after")
    def _range(self) -> LogUniformParameters:
        if self.min_value <= 0:
            raise ValueError(f"min_value {self.min_value} must be above 0 for a log_uniform sampler")
        if self.min_value > self.max_value:
            raise ValueError(f"min_value {self.min_value} is larger than max_value {self.max_value}; swap them")
        return self


class IntUniformParameters(Strict):
    min_value: Int = 0
    max_value: Int = 10
    step: Int = Field(1, ge=1)

    @model_validator(mode="after")
    def _range(self) -> IntUniformParameters:
        if self.min_value > self.max_value:
            raise ValueError(f"min_value {self.min_value} is larger than max_value {self.max_value}; swap them")
        return self


Scalar = Union[bool, int, float, str, None]


class ChoiceParameters(Strict):
    values: list[Scalar] = Field(min_length=1)

    @field_validator("values")
    @classmethod
    def _distinct(cls, values: list[Scalar]) -> list[Scalar]:
        if len({repr(v) for v in values}) != len(values):
            raise ValueError("lists a value twice; give each value once")
        return values


class _Sampler(Strict):
    sampler_type: str
    sampler_parameters: Any


class UniformSearch(_Sampler):
    sampler_type: Literal["uniform"]
    sampler_parameters: Annotated[UniformParameters, BeforeValidator(_empty_is_default)]


class GaussianSearch(_Sampler):
    sampler_type: Literal["gaussian"]
    sampler_parameters: Annotated[GaussianParameters, BeforeValidator(_empty_is_default)]

    @model_validator(mode="after")
    def _positive(self) -> GaussianSearch:
        if self.sampler_parameters.st_dev <= 0:
            raise ValueError(f"st_dev {self.sampler_parameters.st_dev} must be above 0")
        return self


class MultiRangeUniformSearch(_Sampler):
    sampler_type: Literal["multirangeuniform"]
    sampler_parameters: Annotated[MultiRangeUniformParameters, BeforeValidator(_empty_is_default)]


class LogUniformSearch(_Sampler):
    sampler_type: Literal["log_uniform"]
    sampler_parameters: Annotated[LogUniformParameters, BeforeValidator(_empty_is_default)]


class IntUniformSearch(_Sampler):
    sampler_type: Literal["int_uniform"]
    sampler_parameters: Annotated[IntUniformParameters, BeforeValidator(_empty_is_default)]


class ChoiceSearch(_Sampler):
    sampler_type: Literal["choice"]
    sampler_parameters: ChoiceParameters


SearchSampler = Annotated[
    Union[UniformSearch, GaussianSearch, MultiRangeUniformSearch, LogUniformSearch, IntUniformSearch, ChoiceSearch],
    Field(discriminator="sampler_type"),
]
SEARCH_SAMPLERS = ("uniform", "gaussian", "multirangeuniform", "log_uniform", "int_uniform", "choice")
GRID_SAMPLERS = ("int_uniform", "choice")  # the ones with a finite set of values


class MetricSettings(Strict):
    tag: str = DEFAULT_TAG  # a TensorBoard tag the runs write
    reduce: str = "last"  # last | max | min | mean (of every summary: how soon it learned) | mean_last_<K>
    direction: Literal["maximize", "minimize"] = "maximize"
    behavior: Optional[str] = None  # whose tag; needed when the config has several behaviors
    phase: Optional[str] = None  # with phases: whose summaries (default: the last phase)

    @field_validator("reduce")
    @classmethod
    def _reduce(cls, value: str) -> str:
        if value not in ("last", "max", "min", "mean") and not _MEAN_LAST.match(value):
            raise ValueError(f"{value!r} is not a reduction; use last, max, min, mean or mean_last_<K> (e.g. mean_last_5)")
        return value

    def last_k(self) -> Optional[int]:
        """K of mean_last_K (None for the other reductions)."""
        match = _MEAN_LAST.match(self.reduce)
        return int(match.group(1)) if match else None


class StudySettings(Strict):
    config: str  # the base arl-learn config, relative to the study file
    mode: Literal["optimize", "grid"] = "optimize"  # grid: every combination, its run files written first
    trials: Optional[Int] = Field(None, ge=1, le=100_000)  # default: 20 with a search, 1 without
    parallel: Int = Field(1, ge=1, le=256)  # trials at once on this machine
    seeds: list[Int] = Field(default_factory=lambda: [0], min_length=1, max_length=1000)
    metric: MetricSettings = Field(default_factory=MetricSettings)
    sampler: Literal["tpe", "random", "grid"] = "tpe"
    sampler_seed: Int = 0  # what Optuna's sampler draws from
    pruner: Literal["median", "hyperband", "none"] = "median"
    startup_trials: Int = Field(4, ge=0)  # the median pruner prunes nothing before this many trials ended
    warmup_steps: Optional[Int] = Field(None, ge=0)  # nor before this step of a run (default: a quarter of max_steps)
    max_steps: Optional[Int] = Field(None, ge=1)  # every behavior's max_steps in every trial (default: the config's)
    timeout_s: Optional[Float] = Field(None, gt=0)  # no trial starts after this many seconds of the study
    trial_timeout_s: Optional[Float] = Field(None, gt=0)  # a run still going after this is stopped and fails
    report_interval_s: Float = Field(5.0, gt=0, le=3600)  # how often the runs' summaries are read for pruning
    search: dict[str, SearchSampler] = Field(default_factory=dict)

    @field_validator("seeds")
    @classmethod
    def _distinct_seeds(cls, seeds: list[int]) -> list[int]:
        if len(set(seeds)) != len(seeds):
            raise ValueError("lists a seed twice; give each seed once")
        if any(s < 0 for s in seeds):
            raise ValueError("has a negative seed; seeds are 0 or more")
        return seeds

    @field_validator("timeout_s", "trial_timeout_s", "report_interval_s")
    @classmethod
    def _finite(cls, value: Optional[float]) -> Optional[float]:
        if value is not None and not math.isfinite(value):
            raise ValueError("must be a finite number of seconds")
        return value

    @property
    def n_trials(self) -> int:
        if self.trials is not None:
            return self.trials
        return 20 if self.search else 1

    @property
    def pruning(self) -> str:
        """The pruner: as given; a grid study (mode: grid) prunes nothing unless it says so."""
        if self.mode == "grid" and "pruner" not in self.model_fields_set:
            return "none"
        return self.pruner
