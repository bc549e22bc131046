"""arl-learn: command-line flags -> RunOptions -> TrainerController.

Flags mean what they mean for mlagents-learn. A flag overrides the config file only when it is
typed: argparse defaults are suppressed, so only typed flags reach the merge.
Exit codes: 0 finished or interrupted with Ctrl-C (a checkpoint is saved), 1 the run failed,
2 the configuration or command line is invalid.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from types import FrameType
from typing import Any, Optional

from ml_arl.exceptions import (
    ArlError,
    ConfigError,
    EnvironmentSourceError,
    RestartQuotaExceeded,
    RunDirectoryError,
    TrainerThreadError,
    WorkerError,
)

logger = logging.getLogger("ml_arl")

EXAMPLES = """\
examples:
  arl-learn config/ppo/Reach.yaml --run-id reach
  arl-learn config/ppo/CartPole.yaml --run-id cp --num-envs 4
  arl-learn config/ppo/CartPole.yaml --run-id cp --resume       # continue at the saved step
  arl-learn config/ppo/Reach.yaml --run-id reach2 --initialize-from reach
  arl-learn config/ppo/Reach.yaml --env builtin:ReachDiscrete --run-id rd --force
  arl-learn my.yaml --env mypkg.envs:make_env --env-args size=8   # your own BaseEnv factory
  arl-learn config/ppo/Ball.yaml --env ./builds/Ball.x86_64 --num-envs 4 --no-graphics --run-id ball
  arl-learn config/ppo/Ball.yaml --run-id editor-run              # then press Play in the Unity Editor
  arl-learn config/arl/GridDefense.yaml --run-id grid              # attacker vs defender, in phases
  arl-report results/grid                                          # table + results/grid/report.png
  arl-learn config/ppo/Tag-selfplay.yaml --run-id tag              # self-play with ELO
  tensorboard --logdir results
"""

# flag destination -> config section ("" = top level)
_ROUTES = {
    "checkpoint_settings": ("run_id", "resume", "force", "initialize_from", "inference", "results_dir"),
    "env_settings": (
        "env_path", "env_args", "base_port", "num_envs", "num_areas", "timeout_wait", "seed",
        "max_lifetime_restarts", "restarts_rate_limit_n", "restarts_rate_limit_period_s", "listen_address",
    ),
    "engine_settings": (
        "width", "height", "quality_level", "time_scale", "target_frame_rate", "capture_frame_rate",
        "no_graphics", "no_graphics_monitor",
    ),
    "torch_settings": ("device",),
    "": ("debug",),
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit 2, as for config errors
        self.exit(2, f"arl-learn: error: {message} (see arl-learn --help)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="arl-learn",
        description="Train reinforcement-learning agents (ML-Agents compatible configs).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        argument_default=argparse.SUPPRESS,
    )
    p.add_argument(
        "trainer_config_path", metavar="CONFIG", nargs="?",
        help="YAML run configuration; without one, every behavior trains with the default settings",
    )
    p.add_argument(
        "--check", action="store_true",
        help="validate the config and flags (everything that can be checked without starting an environment), "
        "print the merged configuration and exit: 0 valid, 2 not",
    )
    p.add_argument(
        "--env", dest="env_path",
        help="environment: a Unity build (path), builtin:<Name>, gymnasium:<EnvId> or package.module:factory; "
        "leave out to train in the Unity Editor (port 5004)",
    )
    p.add_argument("--resume", action="store_true", help="continue the run --run-id from its last checkpoint")
    p.add_argument("--force", action="store_true", help="overwrite the results of an existing --run-id")
    p.add_argument("--run-id", help="name of the run; results go to <results-dir>/<run-id> (default: ppo)")
    p.add_argument("--initialize-from", metavar="RUN_ID", help="start from the weights of an earlier run, at step 0")
    p.add_argument("--seed", type=int, help="random seed; worker i gets seed + i (default: -1 = random)")
    p.add_argument("--inference", action="store_true", help="act without training (use with --resume)")
    p.add_argument("--base-port", type=int, help="first port for Unity workers (default: 5005)")
    p.add_argument("--num-envs", type=int, help="number of environment worker processes (default: 1)")
    p.add_argument("--num-areas", type=int, help="training areas per environment instance: more agents per worker (default: 1)")
    p.add_argument("--debug", action="store_true", help="debug logging")
    p.add_argument(
        "--env-args", nargs=argparse.REMAINDER,
        help="everything after it goes to the environment: a Unity build's command line, or key=value for Python envs",
    )
    p.add_argument("--max-lifetime-restarts", type=int, help="restarts allowed per worker, -1 = unlimited (default: 10)")
    p.add_argument("--restarts-rate-limit-n", type=int, help="restarts allowed per worker within the period, -1 = no limit (default: 1)")
    p.add_argument("--restarts-rate-limit-period-s", type=int, help="period of the restart rate limit in seconds (default: 60)")
    p.add_argument("--results-dir", help="base folder of results (default: results)")
    p.add_argument("--timeout-wait", type=int, help="seconds to wait for an environment to start or answer (default: 60)")
    p.add_argument(
        "--listen-address", metavar="ADDR",
        help="address the port for Unity builds / the Editor listens on (default: localhost; 0.0.0.0 = every interface)",
    )
    eng = p.add_argument_group("engine configuration (Unity builds)")
    eng.add_argument("--width", type=int, help="window width (default: 84)")
    eng.add_argument("--height", type=int, help="window height (default: 84)")
    eng.add_argument("--quality-level", type=int, help="quality level (default: 5)")
    eng.add_argument("--time-scale", type=float, help="time scale (default: 20)")
    eng.add_argument("--target-frame-rate", type=int, help="target frame rate (default: -1)")
    eng.add_argument("--capture-frame-rate", type=int, help="capture frame rate (default: 60)")
    eng.add_argument("--no-graphics", action="store_true", help="run builds without graphics")
    eng.add_argument("--no-graphics-monitor", action="store_true", help="graphics only for worker 0")
    tch = p.add_argument_group("torch configuration")
    tch.add_argument("--torch-device", dest="device", help="cpu, cuda or cuda:N (default: cuda if available)")
    return p


def parse_options(argv: list[str]) -> Any:
    return _parse(argv)[0]


def _parse(argv: list[str]) -> tuple[Any, bool]:
    """(RunOptions, --check given)."""
    from ml_arl.settings import build_run_options, load_config_file

    args = vars(build_parser().parse_args(argv))
    path = args.pop("trainer_config_path", None)
    check = bool(args.pop("check", False))
    overrides: dict[str, dict[str, Any]] = {}
    for section, keys in _ROUTES.items():
        typed = {k: args[k] for k in keys if k in args}
        if typed:
            overrides[section] = typed
    if path is None:
        return build_run_options({}, overrides, "(no config file)"), check
    data = load_config_file(path)
    if not data:
        logger.warning("%s: the config is empty; every behavior trains with the default settings", path)
    return build_run_options(data, overrides, path), check


def one_line(text: str) -> str:
    """A message as one printable line: line breaks and other control characters shown escaped."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def check_only(options: Any) -> int:
    """--check: what can be checked without an environment, then the merged configuration on stdout."""
    import yaml

    from ml_arl.envs.sources import is_python_source, resolve_env, unity_factory
    from ml_arl.results_dir import resolve_seed, validate_run_directories

    validate_run_directories(options)
    env = options.env_settings
    if is_python_source(env.env_path):
        resolve_env(env.env_path, env.env_args, env.num_areas)
    elif env.env_path is not None:
        unity_factory(options, resolve_seed(options))
    from ml_arl.trainer_controller import choose_device

    choose_device(options.torch_settings.device)
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml's when PyYAML has it: same output, faster
    sys.stdout.write(yaml.dump(options.as_dict(), Dumper=dumper, sort_keys=False))
    logger.info("The configuration is valid.")
    return 0


def _configure_logging(debug: bool, stream: Any = None) -> None:
    fmt = "%(asctime)s +%(relativeCreated)d ms %(levelname)s [%(filename)s:%(lineno)d] %(message)s" if debug else "[%(levelname)s] %(message)s"
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.INFO, format=fmt, stream=stream or sys.stdout, force=True
    )
    for noisy in ("matplotlib", "PIL", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _sigterm(signum: int, frame: Optional[FrameType]) -> None:
    raise KeyboardInterrupt


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    _configure_logging("--debug" in argv, stream=sys.stderr)  # warnings while reading the config
    try:
        options, check = _parse(argv)
        if check:
            return check_only(options)
    except (ConfigError, RunDirectoryError, EnvironmentSourceError) as err:
        problems = err.problems if isinstance(err, ConfigError) else [str(err)]
        for problem in problems:
            sys.stderr.write(f"arl-learn: error: {one_line(problem)}\n")
        return err.exit_code
    _configure_logging(options.debug)
    signal.signal(signal.SIGTERM, _sigterm)
    if options.env_settings.manager == "subprocess":
        from ml_arl.envs.forkserver import prestart

        prestart()  # the worker server boots while the run directory is checked and the env resolved
    env_manager = None
    try:
        from ml_arl.envs.managers import create_env_manager
        from ml_arl.results_dir import resolve_seed, validate_run_directories

        validate_run_directories(options)  # --force deletes only once everything has been checked
        seed = resolve_seed(options)
        # Workers start now and import their env while this process imports torch.
        env_manager = create_env_manager(options, seed)
        env_manager.launch()
        logger.debug("Launched %d environment worker(s); importing torch", options.env_settings.num_envs)
        from ml_arl.trainer_controller import TrainerController

        controller = TrainerController(options, env_manager, seed)
        env_manager = None  # the controller owns it now and closes it
        controller.start_learning()
    except ConfigError as err:
        for problem in err.problems:
            logger.error("%s", one_line(problem))
        return err.exit_code
    except (WorkerError, RestartQuotaExceeded, TrainerThreadError) as err:
        logger.error("Training stopped: %s", err)
        return err.exit_code
    except ArlError as err:
        logger.error("%s", one_line(str(err)))
        return err.exit_code
    except KeyboardInterrupt:
        logger.info("Interrupted before training started.")
        return 0
    finally:
        if env_manager is not None:
            env_manager.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
