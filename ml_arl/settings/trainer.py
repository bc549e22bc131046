"""The settings of one behavior (``behaviors.<name>`` and ``default_settings``): the trainer,
its hyperparameters, network, reward signals, self-play and objective, with ML-Agents' keys
and defaults.

Defaults that ML-Agents derives from other keys (beta and epsilon schedules, self-play
team_change, checkpoint_interval with even_checkpoints) are filled in ``mode="before"``
validators that return a new mapping, and only from inputs that are themselves valid; a
validated model is never changed afterwards.
"""

from __future__ import annotations

import difflib
from typing import Any, Literal, Optional

from pydantic import Field, ValidationInfo, field_validator, model_validator

from ml_arl import limits
from ml_arl.import_path import is_import_path
from ml_arl.objectives import ROLE_OBJECTIVES
from ml_arl.settings.values import Float, Int, Strict, valid_input

ScheduleType = Literal["linear", "constant"]


class PPOSettings(Strict):
    batch_size: Int = Field(1024, gt=0)
    buffer_size: Int = Field(10240, gt=0)
    learning_rate: Float = Field(3.0e-4, gt=0)
    beta: Float = Field(5.0e-3, ge=0)
    epsilon: Float = Field(0.2, gt=0)
    lambd: Float = Field(0.95, ge=0, le=1)
    num_epoch: Int = Field(3, gt=0)
    shared_critic: bool = False
    learning_rate_schedule: ScheduleType = "linear"
    beta_schedule: Optional[ScheduleType] = None  # default: learning_rate_schedule
    epsilon_schedule: Optional[ScheduleType] = None  # default: learning_rate_schedule
    # ml_arl extensions; the defaults are ML-Agents' behaviour.
    clip_value_loss: bool = True  # ML-Agents clips the value change per update to +-epsilon
    max_grad_norm: Optional[Float] = Field(None, gt=0)  # clip the gradient norm (SB3 uses 0.5)

    @model_validator(mode="before")
    @classmethod
    def _inherit_schedules(cls, data: Any) -> Any:
        # As in ML-Agents: beta and epsilon follow the learning-rate schedule unless given.
        if not isinstance(data, dict):
            return data
        ok, schedule = valid_input(cls, "learning_rate_schedule", data)
        if not ok:
            return data
        return {
            **data,
            "beta_schedule": schedule if data.get("beta_schedule") is None else data["beta_schedule"],
            "epsilon_schedule": schedule if data.get("epsilon_schedule") is None else data["epsilon_schedule"],
        }


class MemorySettings(Strict):
    sequence_length: Int = Field(64, gt=0)
    memory_size: Int = Field(128, gt=0)


class NetworkSettings(Strict):
    normalize: bool = False
    hidden_units: Int = Field(128, gt=0)
    num_layers: Int = Field(2, ge=1, le=1000)
    vis_encode_type: Literal["fully_connected", "match3", "simple", "nature_cnn", "resnet"] = "simple"
    memory: Optional[MemorySettings] = None

    @field_validator("memory", mode="before")
    @classmethod
    def _memory(cls, value: Any) -> Any:
        if value is not None:
            raise ValueError("recurrent networks (LSTM) are not supported yet; remove 'memory'")
        return value
    goal_conditioning_type: Literal["hyper", "none"] = "hyper"
    deterministic: bool = False
    # ml_arl extension: hidden-layer activation; ML-Agents always uses swish.
    activation: Literal["swish", "tanh"] = "swish"


class RewardSignalSettings(Strict):
    gamma: Float = Field(0.99, ge=0, le=1)
    strength: Float = 1.0
    network_settings: NetworkSettings = Field(default_factory=lambda: NetworkSettings())


class RewardSignals(Strict):
    extrinsic: RewardSignalSettings = Field(default_factory=lambda: RewardSignalSettings())


class ObjectiveSettings(Strict):
    """What the behavior's agents maximise: a built-in objective or a class by import path."""

    name: str = "reward"  # reward | negated_reward | scaled_sum | pkg.module:Class
    params: dict[str, Any] = Field(default_factory=dict)


class SelfPlaySettings(Strict):
    """ML-Agents' self-play (ghost trainer) settings and defaults."""

    save_steps: Int = Field(20000, gt=0)
    team_change: Optional[Int] = Field(None, gt=0)  # default 5 x save_steps
    swap_steps: Int = Field(2000, gt=0)
    window: Int = Field(10, gt=0)
    play_against_latest_model_ratio: Float = Field(0.5, ge=0, le=1)
    initial_elo: Float = 1200.0
    # ml_arl extension: the ELO K-factor. 1 is ML-Agents' rule (ELO moves by less than 1 per game).
    elo_k_factor: Float = Field(1.0, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _team_change(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("team_change") is not None:
            return data
        ok, save_steps = valid_input(cls, "save_steps", data)
        if not ok:
            return data
        # capped at the largest integer setting: a step count beyond it is never reached
        return {**data, "team_change": min(5 * save_steps, limits.MAX_INT)}


class TrainerSettings(Strict):
    trainer_type: str = "ppo"  # ppo, or a user trainer class pkg.module:Class (ml_arl.trainers.base.Trainer)
    # PPOSettings for ppo; for a user trainer, the mapping its class receives unchanged
    hyperparameters: Any = Field(default=None, validate_default=True)
    checkpoint_interval: Int = Field(500000, gt=0)  # with even_checkpoints: max_steps // keep_checkpoints
    network_settings: NetworkSettings = Field(default_factory=lambda: NetworkSettings())
    reward_signals: RewardSignals = Field(default_factory=lambda: RewardSignals())
    init_path: Optional[str] = None
    keep_checkpoints: Int = Field(5, ge=1)
    even_checkpoints: bool = False
    max_steps: Int = Field(500000, gt=0)
    time_horizon: Int = Field(64, gt=0)
    summary_freq: Int = Field(50000, gt=0)
    threaded: bool = False
    self_play: Optional[SelfPlaySettings] = None
    # ml_arl (Adversarial Resilience Learning): what the agents maximise. role is shorthand:
    # attacker = the negated environment reward, defender = the environment reward.
    objective: Optional[ObjectiveSettings] = None
    role: Optional[Literal["attacker", "defender"]] = None

    @model_validator(mode="before")
    @classmethod
    def _even_checkpoints(cls, data: Any) -> Any:
        # As in ML-Agents: even_checkpoints spreads keep_checkpoints checkpoints over max_steps.
        if not isinstance(data, dict):
            return data
        ok, even = valid_input(cls, "even_checkpoints", data)
        if not (ok and even):
            return data
        steps_ok, max_steps = valid_input(cls, "max_steps", data)
        keep_ok, keep = valid_input(cls, "keep_checkpoints", data)
        given_ok = valid_input(cls, "checkpoint_interval", data)[0]  # a bad value given stays an error
        if not (steps_ok and keep_ok and given_ok):
            return data
        return {**data, "checkpoint_interval": max(1, max_steps // keep)}

    @field_validator("trainer_type")
    @classmethod
    def _trainer_type(cls, value: str) -> str:
        if value in ("sac", "poca"):
            raise ValueError(f"trainer '{value}' is not supported yet; use ppo or a trainer class pkg.module:Class")
        if value != "ppo" and not is_import_path(value):
            hint = "did you mean 'ppo'? " if difflib.get_close_matches(value, ["ppo"], n=1, cutoff=0.5) else ""
            raise ValueError(f"{hint}expected 'ppo' or the import path of a trainer class, pkg.module:Class")
        return value

    @field_validator("hyperparameters", mode="before")
    @classmethod
    def _hyperparameters(cls, value: Any, info: ValidationInfo) -> Any:
        if info.data.get("trainer_type", "ppo") == "ppo":
            return value if isinstance(value, PPOSettings) else PPOSettings.model_validate(value or {})
        if value is not None and not isinstance(value, dict):
            raise ValueError("expected a mapping of hyperparameters for the trainer class")
        return dict(value or {})

    def objective_spec(self) -> tuple[str, dict[str, Any]]:
        """(name, params) of the objective: role shorthand, the objective given, or the reward."""
        if self.objective is not None:
            return self.objective.name, dict(self.objective.params)
        if self.role is not None:
            return ROLE_OBJECTIVES[self.role], {}
        return "reward", {}
