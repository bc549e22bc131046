"""``palaestrai:<run file>``: the environment of a palaestrAI run file, as an ``--env`` source.

A run file given to arl-learn becomes a config whose ``env_path`` is this source (see
ml_arl.palaestrai.runfile); the factory carries the environment definitions and each agent's
wiring to the workers, where each builds its own ``PalaestraiEnv`` with ``make_env``.
"""

from __future__ import annotations

from typing import Any, Optional

from ml_arl.core.exceptions import ConfigError, EnvironmentSourceError
from ml_arl.palaestrai.definitions import AgentWiring, EnvironmentSpec
from ml_arl.palaestrai.env import PalaestraiEnv
from ml_arl.settings.config_file import load_config_file


def make_env(environments: list[tuple[EnvironmentSpec, ...]], agents: list[AgentWiring], taking_turns: bool,
             worker_id: int = 0, seed: int = 0, phase_limits: Optional[list[tuple[Optional[int], int]]] = None,
             phase_agents: Optional[list[Optional[list[str]]]] = None) -> PalaestraiEnv:
    return PalaestraiEnv(environments, agents, taking_turns, seed=seed, worker_id=worker_id, phase_limits=phase_limits,
                         phase_agents=phase_agents)


def palaestrai_env_kwargs(env_path: str, path: str) -> dict[str, Any]:
    """``make_env``'s arguments for the run file at ``path`` (ml_arl.envs.sources builds the factory)."""
    from ml_arl.palaestrai.runfile import is_run_file, read

    data, _ = load_config_file(path)
    if not is_run_file(data):
        raise EnvironmentSourceError(f"--env {env_path}: {path} is not a palaestrAI run file (it has no schedule)")
    try:
        # said when the file was read; its classes are imported where they are built (the workers)
        translation = read(data, path, check_environment=False, log_warnings=False, import_plugins=False)
    except ConfigError as err:
        raise EnvironmentSourceError(f"--env {env_path}: {err.problems[0]}") from None
    return {"environments": translation.environments, "agents": translation.agents, "taking_turns": translation.taking_turns,
            "phase_limits": translation.phase_limits, "phase_agents": translation.phase_agents}
