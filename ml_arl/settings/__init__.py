"""The run configuration: schema, defaults, YAML loading, validation and the CLI flags.

The schema follows ML-Agents' ``mlagents-learn`` YAML (behaviors, default_settings,
env_settings, engine_settings, environment_parameters, checkpoint_settings, torch_settings,
debug) with the same defaults. Validation is strict and reports every problem at once, one line
each, naming the file, the key path, the bad value and the closest valid key.

Modules (each imports the others directly, never this package; none imports ml_arl.cli.learn):
  values    shared value types (YAML numbers, run names), the strict base model, message helpers
  flags     ``setting(..., flag=...)``: a setting's arl-learn flag; ``cli_flags`` reads them back
  trainer   one behavior's settings (TrainerSettings, PPOSettings, SelfPlaySettings ...)
  samplers  the values of environment_parameters: numbers and the sampler union
  parameters  environment_parameters: values and curricula (lessons, completion_criteria);
            resolve_parameter_seeds, lesson_values
  errors    pydantic errors as one-line problems
  run       the run's sections and RunOptions (settings_for, phase_settings_for, as_dict)
  build     build_run_options: the CLI merge and cross-section checks (ml_arl.settings.config_file reads the file)
"""

from ml_arl.settings.build import build_run_options
from ml_arl.settings.flags import CliFlag, cli_flags, setting
from ml_arl.settings.parameters import (
    CompletionCriteria,
    EnvironmentParameters,
    curricula_criteria,
    is_curriculum,
    lesson_values,
    resolve_parameter_seeds,
)
from ml_arl.settings.run import (
    CheckpointSettings,
    EngineSettings,
    EnvSettings,
    LoadSettings,
    PhaseSettings,
    ResultsStoreSettings,
    RunOptions,
    TorchSettings,
    TrackerSettings,
)
from ml_arl.settings.samplers import (
    ConstantSampler,
    GaussianSampler,
    MultiRangeUniformSampler,
    Sampler,
    UniformSampler,
)
from ml_arl.settings.trainer_settings import (
    BehavioralCloningSettings,
    CuriositySettings,
    GAILSettings,
    LearnedSignalSettings,
    MemorySettings,
    NetworkSettings,
    ObjectiveSettings,
    POCASettings,
    PPOSettings,
    RewardSignals,
    RewardSignalSettings,
    RNDSettings,
    SACSettings,
    ScheduleType,
    SelfPlaySettings,
    TrainerSettings,
)
from ml_arl.settings.values import Float, Int, RunName, check_run_name

__all__ = [
    "BehavioralCloningSettings",
    "CuriositySettings",
    "GAILSettings",
    "LearnedSignalSettings",
    "RNDSettings",
    "SACSettings",
    "CheckpointSettings",
    "CliFlag",
    "CompletionCriteria",
    "ConstantSampler",
    "EngineSettings",
    "EnvSettings",
    "EnvironmentParameters",
    "Float",
    "GaussianSampler",
    "Int",
    "LoadSettings",
    "TrackerSettings",
    "MemorySettings",
    "MultiRangeUniformSampler",
    "NetworkSettings",
    "ObjectiveSettings",
    "POCASettings",
    "PPOSettings",
    "PhaseSettings",
    "ResultsStoreSettings",
    "RewardSignalSettings",
    "RewardSignals",
    "RunName",
    "RunOptions",
    "Sampler",
    "ScheduleType",
    "SelfPlaySettings",
    "TorchSettings",
    "TrainerSettings",
    "UniformSampler",
    "build_run_options",
    "check_run_name",
    "cli_flags",
    "curricula_criteria",
    "is_curriculum",
    "lesson_values",
    "resolve_parameter_seeds",
    "setting",
]
