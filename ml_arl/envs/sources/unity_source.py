"""A Unity player build (``--env path/to/Build.x86_64``) or the Unity Editor (no ``--env``): any
value no other source claims. The build and every port it needs are checked before any worker
starts; with ``manager: ray`` each actor checks them on its own node
(ml_arl.envs.adapters.unity_nodes)."""

from __future__ import annotations

import logging
from typing import Any, Optional

from ml_arl.core.env_factory import EnvFactory
from ml_arl.core.exceptions import EnvironmentSourceError
from ml_arl.envs.sources.registry import EnvSource

logger = logging.getLogger(__name__)


def claims(env_path: Optional[str]) -> bool:
    return True


def factory_from_options(options: Any, seed: int) -> EnvFactory:
    """The factory of a Unity build (``env_settings.env_path``) or of the Editor (no env_path).
    Checks the build and the ports now; ``options`` is a RunOptions."""
    import os

    from mlagents_envs import env_utils

    from ml_arl.envs.adapters.unity_env import EDITOR_PORT, make_unity_env, port_is_free
    from ml_arl.settings import lesson_values, resolve_parameter_seeds

    env = options.env_settings
    engine = options.engine_settings
    file_name: Optional[str] = None
    on_nodes = env.manager == "ray"
    if on_nodes and not env.env_path:
        raise EnvironmentSourceError(
            "manager: ray needs a Unity build (--env path/to/Build.x86_64): the Unity Editor runs on this machine "
            "only; train in the Editor with manager: subprocess"
        )
    if on_nodes:
        # the build and its ports are checked by each actor on its own node (ml_arl.envs.adapters.unity_nodes)
        file_name = os.path.abspath(env.env_path)
        logger.info(
            "Unity build %s: not checked here (manager: ray); each worker checks it and picks a free port from "
            "%d up on its own Ray node", file_name, env.base_port,
        )
    elif env.env_path:
        launch = env_utils.validate_environment_path(env.env_path)
        if launch is None or os.path.isdir(launch):
            raise EnvironmentSourceError(
                f"--env {env.env_path}: no Unity build found there (also tried the .x86_64 and .x86 "
                "extensions); check the path, or leave --env out to train in the Unity Editor"
            )
        if not os.access(launch, os.X_OK):
            raise EnvironmentSourceError(f"--env {env.env_path}: {launch} is not executable; run chmod +x {launch}")
        file_name = os.path.abspath(launch)
        ports = [env.base_port + i for i in range(env.num_envs)]
        if ports[-1] > 65535:
            raise EnvironmentSourceError(
                f"--base-port: {env.base_port} + {env.num_envs} workers runs past port 65535; use a lower --base-port"
            )
        for worker_id, port in enumerate(ports):
            if not port_is_free(port, env.listen_address):
                raise EnvironmentSourceError(
                    f"--base-port: port {port} (worker {worker_id}) is already in use, maybe by another training "
                    f"run or Unity process; pick free ports with --base-port (e.g. --base-port {env.base_port + 100})"
                )
    elif not port_is_free(EDITOR_PORT, env.listen_address):
        raise EnvironmentSourceError(
            f"port {EDITOR_PORT} (the Unity Editor's) is already in use, maybe by another arl-learn or "
            "mlagents-learn waiting for the Editor; stop it, or pass --env to train a build"
        )
    kwargs = {
        "file_name": file_name,
        "base_port": env.base_port,
        "no_graphics": engine.no_graphics,
        "no_graphics_monitor": engine.no_graphics_monitor,
        "timeout_wait": env.timeout_wait,
        "additional_args": list(env.env_args or []),
        "log_folder": os.path.abspath(options.checkpoint_settings.run_logs_dir),
        "num_areas": env.num_areas,
        "engine": {
            "width": engine.width,
            "height": engine.height,
            "quality_level": engine.quality_level,
            "time_scale": engine.time_scale,
            "target_frame_rate": engine.target_frame_rate,
            "capture_frame_rate": engine.capture_frame_rate,
        },
        # the first lessons' values; the controller sends the current ones when a phase begins
        "environment_parameters": lesson_values(resolve_parameter_seeds(options.environment_parameters, seed)),
        "listen_address": env.listen_address,
        "debug": options.debug,
        "fast_bridge": env.fast_bridge,
    }
    description = f"Unity build {file_name}" if file_name else f"Unity Editor (port {EDITOR_PORT})"
    if on_nodes:
        from ml_arl.envs.adapters.unity_nodes import make_unity_env_on_node

        return EnvFactory(description + " (on the Ray nodes)", make_unity_env_on_node, kwargs, pass_worker_id=True)
    if file_name is None:
        logger.info(
            "Listening on port %d. Start training by pressing the Play button in the Unity Editor "
            "(waiting up to %d s, --timeout-wait).", EDITOR_PORT, env.timeout_wait,
        )
    return EnvFactory(description, make_unity_env, kwargs, pass_worker_id=True, pass_seed=True)


SOURCE = EnvSource(form="path/to/Build", summary="a Unity build; leave --env out to train in the Unity Editor, port 5004", order=100, python=False, claims=claims)
