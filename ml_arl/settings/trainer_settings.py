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
import logging
from typing import Any, Literal, Optional

from pydantic import Field, ValidationInfo, field_validator, model_validator

import ml_arl.settings.bounds as bounds
from ml_arl.core.import_path import is_import_path
from ml_arl.core.objectives import ROLE_OBJECTIVES
from ml_arl.settings.values import Float, Int, Strict, valid_input

logger = logging.getLogger(__name__)

ScheduleType = Literal["linear", "constant"]


class _ClippedPolicySettings(Strict):
    """The keys PPO and POCA share, with ML-Agents' defaults."""

    batch_size: Int = Field(1024, gt=0)
    buffer_size: Int = Field(10240, gt=0)
    learning_rate: Float = Field(3.0e-4, gt=0)
    beta: Float = Field(5.0e-3, ge=0)
    epsilon: Float = Field(0.2, gt=0)
    lambd: Float = Field(0.95, ge=0, le=1)
    num_epoch: Int = Field(3, gt=0)
    learning_rate_schedule: ScheduleType = "linear"
    beta_schedule: Optional[ScheduleType] = None  # default: learning_rate_schedule
    epsilon_schedule: Optional[ScheduleType] = None  # default: learning_rate_schedule
    max_grad_norm: Optional[Float] = Field(None, gt=0)  # ml_arl extension: clip the gradient norm (SB3 uses 0.5)
    # ml_arl extension: clip the actor's and the critic's gradients each to max_grad_norm on its own (harl's PPO, which
    # steps them with two optimizers) instead of jointly. Joint clipping lets a critic whose loss is in the reward's
    # units (tic-tac-toe's -100 / -1000) shrink the actor's step at every minibatch whose value error is large
    max_grad_norm_per_network: bool = False

    @model_validator(mode="after")
    def _per_network_needs_a_norm(self) -> _ClippedPolicySettings:
        if self.max_grad_norm_per_network and self.max_grad_norm is None:
            raise ValueError("max_grad_norm_per_network needs max_grad_norm; set max_grad_norm (e.g. 0.5) or remove it")
        return self

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


class PPOSettings(_ClippedPolicySettings):
    shared_critic: bool = False
    # ml_arl extensions.
    # false (the default): the value loss is plain (R - V)^2, which is what ML-Agents 1.1.0 computes: its
    # trust_region_value_loss clips around the "old values" it reads from the buffer, but
    # RewardSignalUtil.value_estimates_key returns the returns' key (mlagents/trainers/buffer.py), so the
    # old values are the returns and the clip never acts. true: the clip as written (the value moves at
    # most +-epsilon per update), which stalls critics whose values are large (docs/benchmarks/mujoco.md).
    clip_value_loss: bool = False


class SACSettings(Strict):
    """ML-Agents' SAC hyperparameters and defaults (sac/optimizer_torch.py: SACSettings)."""

    batch_size: Int = Field(128, gt=0)
    buffer_size: Int = Field(50000, gt=0)
    buffer_init_steps: Int = Field(0, ge=0)
    learning_rate: Float = Field(3.0e-4, gt=0)
    learning_rate_schedule: ScheduleType = "constant"
    tau: Float = Field(0.005, gt=0, le=1)
    steps_per_update: Float = Field(1.0, gt=0)
    save_replay_buffer: bool = False
    init_entcoef: Float = Field(1.0, gt=0)
    reward_signal_steps_per_update: Optional[Float] = Field(None, gt=0)  # default: steps_per_update

    @model_validator(mode="before")
    @classmethod
    def _reward_signal_steps(cls, data: Any) -> Any:
        # As in ML-Agents: reward signals update as often as the policy unless told otherwise.
        if not isinstance(data, dict) or data.get("reward_signal_steps_per_update") is not None:
            return data
        ok, steps = valid_input(cls, "steps_per_update", data)
        return {**data, "reward_signal_steps_per_update": steps} if ok else data


class POCASettings(_ClippedPolicySettings):
    """ML-Agents' POCASettings: its keys and defaults (no shared_critic: POCA's critic is its own)."""


# The built-in trainer types, in one table: each one's hyperparameters model and its trainer class
# (an import path: the settings stay torch-free; ml_arl.trainers.trainer.trainer_class imports the class).
BUILTIN_TRAINERS: dict[str, tuple[type[Strict], str]] = {
    "ppo": (PPOSettings, "ml_arl.trainers.ppo.trainer:PPOTrainer"),
    "sac": (SACSettings, "ml_arl.trainers.sac.trainer:SACTrainer"),
    "poca": (POCASettings, "ml_arl.trainers.poca.trainer:POCATrainer"),
}
HYPERPARAMETER_MODELS: dict[str, type[Strict]] = {name: model for name, (model, _) in BUILTIN_TRAINERS.items()}


class MemorySettings(Strict):
    sequence_length: Int = Field(64, gt=0)
    memory_size: Int = Field(128, gt=0)

    @field_validator("memory_size")
    @classmethod
    def _even(cls, value: int) -> int:
        if value % 2:
            raise ValueError("must be even: the memory holds the LSTM's h and c, half each")
        return value


class NetworkSettings(Strict):
    normalize: bool = False
    hidden_units: Int = Field(128, gt=0)
    num_layers: Int = Field(2, ge=1, le=1000)
    vis_encode_type: Literal["fully_connected", "match3", "simple", "nature_cnn", "resnet"] = "simple"
    memory: Optional[MemorySettings] = None
    goal_conditioning_type: Literal["hyper", "none"] = "hyper"
    deterministic: bool = False
    # ml_arl extension: hidden-layer activation; ML-Agents always uses swish.
    activation: Literal["swish", "tanh"] = "swish"
    # ml_arl extension: how the layers start. mlagents: ML-Agents' (LeCun-normal body, small action
    # heads, Xavier value heads); orthogonal: CleanRL's and Stable-Baselines3's. Unset: the
    # activation's own framework, swish -> mlagents, tanh -> orthogonal (ml_arl.networks.actor_critic).
    initialization: Optional[Literal["mlagents", "orthogonal"]] = None
    # ml_arl extension (Stable-Baselines3's log_std_init): the log standard deviation continuous
    # actions start with; 0 (a deviation of 1) is ML-Agents'. PPO's and POCA's deviation is one
    # learned value per action; SAC's is a head of the network, whose bias starts here.
    log_std_init: Float = Field(0.0, ge=-5.0, le=2.0)

    def init_scheme(self) -> str:
        """The initialisation the networks use: ``initialization``, else the activation's."""
        return self.initialization or ("mlagents" if self.activation == "swish" else "orthogonal")


class RewardSignalSettings(Strict):
    gamma: Float = Field(0.99, ge=0, le=1)
    strength: Float = 1.0
    network_settings: NetworkSettings = Field(default_factory=lambda: NetworkSettings())
    # ml_arl extension (PPO and POCA): divide the rewards by the running standard deviation of the
    # discounted return, as SB3's VecNormalize and CleanRL (ml_arl.trainers.return_scale)
    normalize: bool = False


class LearnedSignalSettings(RewardSignalSettings):
    """A reward signal with a network of its own (curiosity, RND, GAIL)."""

    learning_rate: Float = Field(3.0e-4, gt=0)
    # ML-Agents' deprecated alias of network_settings.hidden_units; moved there when given
    encoding_size: Optional[Int] = Field(None, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _encoding_size(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("encoding_size") is None:
            return data
        ok, size = valid_input(cls, "encoding_size", data)
        if not ok:
            return data
        network = data.get("network_settings") or {}
        if not isinstance(network, dict):
            return data
        logger.warning("reward signal key 'encoding_size' is deprecated; use network_settings.hidden_units (set to %d)", size)
        return {**data, "network_settings": {**network, "hidden_units": size}}


class CuriositySettings(LearnedSignalSettings):
    pass


class RNDSettings(LearnedSignalSettings):
    learning_rate: Float = Field(1.0e-4, gt=0)


class GAILSettings(LearnedSignalSettings):
    demo_path: str = Field(min_length=1)
    use_actions: bool = False
    use_vail: bool = False


class RewardSignals(Strict):
    """The reward signals a behavior learns from. Without ``reward_signals`` in the config a
    behavior has the extrinsic signal alone; with it, exactly the signals listed (ML-Agents)."""

    extrinsic: Optional[RewardSignalSettings] = None
    curiosity: Optional[CuriositySettings] = None
    gail: Optional[GAILSettings] = None
    rnd: Optional[RNDSettings] = None

    @model_validator(mode="after")
    def _at_least_one(self) -> RewardSignals:
        if not self.items():
            raise ValueError("no reward signal given; add at least one of extrinsic, curiosity, gail, rnd")
        return self

    def items(self) -> list[tuple[str, RewardSignalSettings]]:
        """(name, settings) of each signal given, in ML-Agents' order."""
        named = [("extrinsic", self.extrinsic), ("curiosity", self.curiosity), ("gail", self.gail), ("rnd", self.rnd)]
        return [(name, signal) for name, signal in named if signal is not None]


class BehavioralCloningSettings(Strict):
    """ML-Agents' behavioral_cloning: imitate the demonstrations in demo_path alongside the RL loss."""

    demo_path: str = Field(min_length=1)
    steps: Int = Field(0, ge=0)  # 0: constant strength; otherwise it decays linearly to 0 over this many steps
    strength: Float = Field(1.0, ge=0)  # BC learning rate = the policy's learning rate x strength
    samples_per_update: Int = Field(0, ge=0)  # 0: every demonstration sample each update
    num_epoch: Optional[Int] = Field(None, gt=0)  # default: the trainer's num_epoch (1 for SAC)
    batch_size: Optional[Int] = Field(None, gt=0)  # default: the trainer's batch_size


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
        return {**data, "team_change": min(5 * save_steps, bounds.MAX_INT)}


class TrainerSettings(Strict):
    trainer_type: str = "ppo"  # ppo, or a user trainer class pkg.module:Class (ml_arl.trainers.trainer.Trainer)
    # PPOSettings for ppo; for a user trainer, the mapping its class receives unchanged
    hyperparameters: Any = Field(default=None, validate_default=True)
    checkpoint_interval: Int = Field(500000, gt=0)  # with even_checkpoints: max_steps // keep_checkpoints
    network_settings: NetworkSettings = Field(default_factory=lambda: NetworkSettings())
    reward_signals: RewardSignals = Field(default_factory=lambda: RewardSignals(extrinsic=RewardSignalSettings()))
    init_path: Optional[str] = None
    keep_checkpoints: Int = Field(5, ge=1)
    even_checkpoints: bool = False
    max_steps: Int = Field(500000, gt=0)
    time_horizon: Int = Field(64, gt=0)
    summary_freq: Int = Field(50000, gt=0)
    threaded: bool = False
    self_play: Optional[SelfPlaySettings] = None
    behavioral_cloning: Optional[BehavioralCloningSettings] = None
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
        if value not in HYPERPARAMETER_MODELS and not is_import_path(value):
            close = difflib.get_close_matches(value, list(HYPERPARAMETER_MODELS), n=1, cutoff=0.5)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise ValueError(f"{hint}expected 'ppo', 'sac', 'poca' or the import path of a trainer class, pkg.module:Class")
        return value

    @field_validator("hyperparameters", mode="before")
    @classmethod
    def _hyperparameters(cls, value: Any, info: ValidationInfo) -> Any:
        model = HYPERPARAMETER_MODELS.get(info.data.get("trainer_type", "ppo"))
        if model is not None:
            return value if isinstance(value, model) else model.model_validate(value or {})
        if value is not None and not isinstance(value, dict):
            raise ValueError("expected a mapping of hyperparameters for the trainer class")
        return dict(value or {})

    @model_validator(mode="after")
    def _normalize_on_policy(self) -> TrainerSettings:
        # SAC replays old steps, whose rewards a running scale would weigh by the scale of their time
        if self.trainer_type == "sac":
            for name, signal in self.reward_signals.items():
                if signal.normalize:
                    raise ValueError(f"reward_signals.{name}.normalize is for ppo and poca; remove it for sac")
        return self

    def objective_spec(self) -> tuple[str, dict[str, Any]]:
        """(name, params) of the objective: role shorthand, the objective given, or the reward."""
        if self.objective is not None:
            return self.objective.name, dict(self.objective.params)
        if self.role is not None:
            return ROLE_OBJECTIVES[self.role], {}
        return "reward", {}
