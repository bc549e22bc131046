"""``--env palaestrai:<run file>``: the environment of a palaestrAI run file, one behavior per agent
(ml_arl.palaestrai)."""

from __future__ import annotations

from typing import Any

from ml_arl.core.env_factory import EnvFactory
from ml_arl.envs.sources.registry import EnvSource


def factory(env_path: str, rest: str, kwargs: dict[str, Any], num_areas: int, probe: bool) -> EnvFactory:
    from ml_arl.palaestrai.env_source import make_env, palaestrai_env_kwargs

    return EnvFactory(f"palaestrAI run file {rest}", make_env, palaestrai_env_kwargs(env_path, rest), True, True,
                      preload=PRELOAD)


# What every palaestrAI worker imports whatever the run file names: the adapter, palaestrAI's agent
# and environment packages, and its Memory (pandas), imported by the fork server once (a worker
# forked from it shares them). The run file's own classes are not: they may start threads on import.
PRELOAD = ("ml_arl.palaestrai.env", "ml_arl.palaestrai.muscles", "palaestrai.agent.memory", "palaestrai.environment")


SOURCE = EnvSource(prefix="palaestrai", form="palaestrai:<run file>", summary="a palaestrAI run file's environment", order=14, make=factory)
