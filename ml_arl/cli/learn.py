"""arl-learn: command-line flags -> RunOptions -> TrainerController.

Flags mean what they mean for mlagents-learn. A flag overrides the config file only when it is
typed: argparse defaults are suppressed, so only typed flags reach the merge.
Exit codes: 0 finished or interrupted with Ctrl-C (a checkpoint is saved), 1 the run failed,
2 the configuration or command line is invalid.
"""

from __future__ import annotations

import argparse
import atexit
import logging
import os
import signal
import sys
import threading
from types import FrameType
from typing import Any, NoReturn, Optional

from ml_arl.api.train import InterruptedWhileStopping, options_from, train_options
from ml_arl.cli.logs import configure_logging
from ml_arl.core.exceptions import (
    ArlError,
    ConfigError,
    EnvironmentSourceError,
    RestartQuotaExceeded,
    RunDirectoryError,
    TrainerThreadError,
    WorkerError,
)
from ml_arl.core.one_line import one_line
from ml_arl.settings import RunOptions, cli_flags

logger = logging.getLogger("ml_arl")

EXAMPLES = """\
examples:
  arl-learn config/ppo/Reach.yaml --run-id reach
  arl-learn config/ppo/CartPole.yaml --run-id cp --num-envs 4
  arl-learn config/ppo/CartPole.yaml --run-id cp --resume       # continue at the saved step
  arl-learn config/ppo/Reach.yaml --run-id reach2 --initialize-from reach
  arl-learn config/ppo/Reach.yaml --env builtin:ReachDiscrete --run-id rd --force
  arl-learn config/ppo/Reach.yaml --run-id reach --resume --inference --record-demo demos   # .demo files
  arl-learn my.yaml --env mypkg.envs:make_env --env-args size=8   # your own BaseEnv factory
  arl-learn config/ppo/Ball.yaml --env ./builds/Ball.x86_64 --num-envs 4 --no-graphics --run-id ball
  arl-learn config/ppo/Ball.yaml --run-id editor-run              # then press Play in the Unity Editor
  arl-learn config/arl/GridDefense.yaml --run-id grid              # attacker vs defender, in phases
  arl-report results/grid                                          # table + results/grid/report.png
  arl-learn config/ppo/Tag-selfplay.yaml --run-id tag              # self-play with ELO
  arl-learn config/poca/SoccerLine.yaml --run-id soccer           # POCA teams in self-play
  tensorboard --logdir results
"""

# Every flag that sets a setting is declared on that setting (ml_arl.settings, setting(flag=...)).
FLAGS = cli_flags(RunOptions)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit 2, as for config errors
        self.exit(2, f"arl-learn: error: {message} (see arl-learn --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """arl-learn's flags: CONFIG and --check, then one flag per setting that has one, grouped as
    the settings declare (engine configuration, torch configuration)."""
    p = _Parser(
        prog="arl-learn",
        description="Train reinforcement-learning agents (ML-Agents compatible configs).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        argument_default=argparse.SUPPRESS,  # only typed flags reach the merge
    )
    p.add_argument(
        "trainer_config_path", metavar="CONFIG", nargs="?",
        help="YAML run configuration; without one, every behavior trains with the default settings",
    )
    p.add_argument(
        "--check", action="store_true",
        help="validate the config and flags (everything that can be checked without starting an environment: "
        "none is started), print the merged configuration and exit: 0 valid, 2 not",
    )
    p.add_argument(
        "--check-wiring", action="store_true",
        help="--check, then start the environment once in this process and check it against the config: a "
        "palaestrAI run file's sensors and actuators, a Python environment's behaviors; exit 0 valid, 2 not",
    )
    groups: dict[str, argparse._ArgumentGroup] = {}
    for flag in FLAGS:
        if flag.group is not None and flag.group not in groups:
            groups[flag.group] = p.add_argument_group(flag.group)
        flag.add_to(p if flag.group is None else groups[flag.group])
    from ml_arl.envs.sources.registry import help_text

    for action in p._actions:  # --env names every environment source there is (ml_arl.envs.sources)
        if "--env" in action.option_strings:
            action.help = help_text()
    return p


def parse_options(argv: list[str]) -> RunOptions:
    return _parse(argv)[0]


def _parse(argv: list[str]) -> tuple[RunOptions, Optional[str]]:
    """(RunOptions, "check" or "wiring" when --check or --check-wiring was given)."""
    args = vars(build_parser().parse_args(argv))
    path = args.pop("trainer_config_path", None)
    wiring = bool(args.pop("check_wiring", False))
    check = "wiring" if wiring else "check" if args.pop("check", False) else None
    overrides: dict[str, dict[str, Any]] = {}
    for flag in FLAGS:
        if flag.name in args:
            overrides.setdefault(flag.section, {})[flag.name] = args[flag.name]
    return options_from(path, overrides, check_environment=wiring, import_plugins=check is not None), check


def check_only(options: RunOptions, wiring: bool = False) -> int:
    """--check: what can be checked without starting an environment, then the merged
    configuration on stdout. ``wiring`` (--check-wiring): also start a Python environment once
    here and name its behaviors (a run file's wiring was checked as it was read)."""
    import yaml

    from ml_arl.envs.sources import is_python_source, probe_env, resolve_env, unity_factory
    from ml_arl.results.run_folder import resolve_seed, validate_run_directories

    validate_run_directories(options)
    env = options.env_settings
    if is_python_source(env.env_path):
        factory = resolve_env(env.env_path, env.env_args, env.num_areas, probe=wiring)
        if wiring:
            probe_env(factory, resolve_seed(options))
    elif env.env_path is not None:
        unity_factory(options, resolve_seed(options))
    if options.torch_settings.device not in (None, "cpu"):  # only a named device needs torch to be checked
        from ml_arl.training.controller import choose_device

        choose_device(options.torch_settings.device)
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml's when PyYAML has it: same output, faster
    sys.stdout.write(yaml.dump(options.as_dict(), Dumper=dumper, sort_keys=False))
    logger.info("The configuration is valid.")
    return 0


def _sigterm(signum: int, frame: Optional[FrameType]) -> None:
    raise KeyboardInterrupt


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    configure_logging("--debug" in argv, stream=sys.stderr)  # warnings while reading the config
    try:
        options, check = _parse(argv)
        if check:
            return check_only(options, wiring=check == "wiring")
    except (ConfigError, RunDirectoryError, EnvironmentSourceError) as err:
        problems = err.problems if isinstance(err, ConfigError) else [str(err)]
        for problem in problems:
            sys.stderr.write(f"arl-learn: error: {one_line(problem)}\n")
        return err.exit_code
    configure_logging(options.debug)
    signal.signal(signal.SIGTERM, _sigterm)
    # Ctrl-C saves and stops the run however arl-learn was started: a shell without job control
    # starts a background command with SIGINT ignored, and Python keeps it so
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        train_options(options)
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
    except InterruptedWhileStopping:
        logger.warning("Interrupted again while stopping: the final checkpoint may be missing; those saved before are intact.")
    except KeyboardInterrupt:
        logger.info("Interrupted before training started.")
    return 0


def run() -> NoReturn:
    """The ``arl-learn`` command: ``main()``, then exit with its code as ``sys.exit`` would, but
    without the interpreter's teardown of every loaded module (with torch loaded it takes seconds
    after the run is over): exit handlers run and output is flushed, then the process ends. If
    another thread is still running (sys.exit waits for those), it is ``sys.exit`` itself."""
    import faulthandler

    if hasattr(signal, "SIGUSR2"):  # `kill -USR2 PID`: every thread's Python stack on stderr (a run that seems stuck)
        faulthandler.register(signal.SIGUSR2, all_threads=True)
    code = main()
    if threading.active_count() > 1:
        sys.exit(code)
    atexit._run_exitfuncs()  # what the interpreter runs at exit: multiprocessing's, logging's, weakref finalizers
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can be said
            pass
    os._exit(code)


if __name__ == "__main__":
    run()
