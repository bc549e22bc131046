"""Choose and build the EnvManager a run asks for (env_settings.manager: subprocess, inprocess or ray)."""

from __future__ import annotations

from ml_arl.envs.backends.env_manager import EnvManager, WorkerErrorLog
from ml_arl.envs.backends.inprocess_env_manager import InProcessEnvManager
from ml_arl.envs.backends.subprocess_env_manager import SubprocessEnvManager
from ml_arl.envs.sources import is_python_source, resolve_env, unity_factory
from ml_arl.settings import RunOptions


def create_env_manager(options: RunOptions, seed: int) -> EnvManager:
    env = options.env_settings
    if is_python_source(env.env_path):
        factory = resolve_env(env.env_path, env.env_args, env.num_areas)
    else:
        factory = unity_factory(options, seed)
    # worker tracebacks: run_logs/worker_errors.log once the controller has prepared the run folder
    error_log = WorkerErrorLog(options.checkpoint_settings.run_logs_dir)
    if env.manager == "ray":
        from ml_arl.envs.backends.ray_env_manager import RayEnvManager  # Ray is optional: imported only when asked for

        return RayEnvManager(factory, env, seed, error_log, run_id=options.checkpoint_settings.run_id)
    if env.manager == "inprocess":
        return InProcessEnvManager(factory, env, seed, error_log)
    return SubprocessEnvManager(factory, env, seed, error_log)
