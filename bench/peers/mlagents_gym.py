"""Unity ML-Agents 1.1.0's own trainer on a gymnasium task (the reference side of issue 33's comparisons).

A gymnasium environment is wrapped as an ``mlagents_envs`` ``BaseEnv`` the way an ML-Agents user would write
one (nothing of ml_arl is imported: this runs in ML-Agents' own venv), and ML-Agents' ``TrainerController``,
``SubprocessEnvManager`` and ``TrainerFactory`` train it from an ML-Agents YAML config, as
``mlagents/trainers/learn.py`` does for a Unity build.

How episodes are reported (the same as the wrapper behind the earlier ML-Agents Hopper seeds 1-3):

* one ``BaseEnv`` per worker holds ``--copies`` gymnasium copies as agents 0..N-1 of one behavior (the
  config's behavior name, e.g. "Hopper"); ``--num-envs`` workers (SubprocessEnvManager's processes);
* observations are float32; ML-Agents' continuous actions (in [-1, 1] once clipped, as a Unity agent receives
  them) are mapped linearly onto the action space's bounds before ``env.step`` (Pendulum's torque is in [-2, 2];
  for the MuJoCo tasks' [-1, 1] the map is the identity), as ml_arl's gymnasium adapter does;
* a terminated episode is a TerminalSteps entry with interrupted=False, a time-limit truncation one with
  interrupted=True (terminated wins when both are set); the final observation and last reward go there;
* the copy is reset at once and the new episode's first decision step (reward 0) is in the same
  ``get_steps`` as the terminal step, as Unity does for an agent that ends its episode;
* every finished episode is appended by its worker to ``<results-dir>/<run-id>/episodes-w{worker_id}.csv``
  (columns wall_time,return,length,truncated); episodes cut by the end of training are not recorded.

The score of a run is the mean return of the last 10% of its episodes (all agents and both workers, in order
of ending by wall_time; at least one episode). At the end it prints
``SCORE seed=N score=X episodes=E wall_s=W``.

Needs ML-Agents 1.1.0's own venv (torch CPU, gymnasium + mujoco), never the project's .venv:
``make peer-mlagents`` makes it in ``.venv-mlagents`` (bench/peers/install_mlagents.sh; any folder:
``bash bench/peers/install_mlagents.sh VENV``); then:

    .venv-mlagents/bin/python bench/peers/mlagents_gym.py --config config/mujoco/mlagents-walker/Hopper-ppo.yaml \\
        --seed 4 --results-dir /tmp/mlref-runs

Defaults: --env Hopper-v5, --copies 8, --num-envs 2, --steps 500000 (overrides the behavior's max_steps),
--run-id <Behavior>-ppo-s<seed>. The run folder is replaced if it exists, unless ``--resume``.

Long SAC runs (ML-Agents' SAC takes over an hour for Hopper's 100k steps here) go across sessions:
``--checkpoint-interval N`` checkpoints every N steps with the replay buffer (``save_replay_buffer``; neither
changes what is learned), and ``--resume`` continues from the last checkpoint as ``mlagents-learn --resume``
does. Episodes that ended after that checkpoint are dropped from the episode files first: the resumed run
plays those steps again. ML-Agents 1.1.0's off-policy trainer restarts its count of gradient steps at
step / steps_per_update on a resume, leaving out ``buffer_init_steps``, and so takes no gradient step for the
next ``buffer_init_steps`` steps (off_policy_trainer.py, ``add_policy``), and its SAC checkpoint leaves out the
learned entropy coefficient, which a resume restarts at ``init_entcoef``; the driver counts the gradient steps
as the uninterrupted run does and saves the coefficient with the checkpoint, so that a resumed run learns as
one that never stopped. (Runs checkpointed before the driver saved the coefficient restart it on a resume.)
"""

from __future__ import annotations

import argparse
import csv
import glob
import importlib.util
import math
import os
import shutil
import sys
import time
from typing import Optional

# this script's folder (sys.path[0]) holds bench modules named like packages (palaestrai.py): off the path.
# Nothing of ml_arl or bench is imported: this runs in ML-Agents' own venv.
_HERE = os.path.dirname(os.path.realpath(__file__))
sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.curdir) != _HERE]

import numpy as np  # noqa: E402
import yaml  # noqa: E402
from mlagents_envs.base_env import (  # noqa: E402
    ActionSpec,
    ActionTuple,
    BaseEnv,
    BehaviorMapping,
    BehaviorSpec,
    DecisionSteps,
    DimensionProperty,
    ObservationSpec,
    ObservationType,
    TerminalSteps,
)


class GymBaseEnv(BaseEnv):
    """``copies`` gymnasium environments as agents 0..copies-1 of one ML-Agents behavior."""

    # No Unity academy behind it: SubprocessEnvManager's worker then sends no training analytics.
    academy_capabilities = None

    def __init__(
        self,
        env_id: str,
        behavior_name: str,
        copies: int,
        seed: int,
        worker_id: int = 0,
        episode_csv: Optional[str] = None,
    ) -> None:
        import gymnasium as gym

        self._envs = [gym.make(env_id) for _ in range(copies)]
        self._name = behavior_name
        self._seeds = [seed * 10_000 + worker_id * copies + i for i in range(copies)]
        self._seeded = False
        space = self._envs[0].action_space
        if not isinstance(space, gym.spaces.Box):
            raise ValueError(f"{env_id}: only continuous (Box) action spaces are supported, got {space}")
        self._low = space.low.astype(np.float32)
        self._high = space.high.astype(np.float32)
        obs_shape = self._envs[0].observation_space.shape
        self._spec = BehaviorSpec(
            observation_specs=[
                ObservationSpec(
                    shape=tuple(obs_shape),
                    dimension_property=(DimensionProperty.NONE,) * len(obs_shape),
                    observation_type=ObservationType.DEFAULT,
                    name="gym_obs",
                )
            ],
            action_spec=ActionSpec.create_continuous(int(np.prod(space.shape))),
        )
        self._n = copies
        self._ids = np.arange(copies, dtype=np.int32)
        self._obs = np.zeros((copies,) + tuple(obs_shape), dtype=np.float32)
        self._actions: Optional[np.ndarray] = None
        self._ep_return = np.zeros(copies, dtype=np.float64)
        self._ep_length = np.zeros(copies, dtype=np.int64)
        self._steps: tuple[DecisionSteps, TerminalSteps] = (
            DecisionSteps.empty(self._spec),
            TerminalSteps.empty(self._spec),
        )
        self._csv = None
        if episode_csv is not None:
            new = not os.path.exists(episode_csv)
            self._csv = open(episode_csv, "a", newline="")
            self._writer = csv.writer(self._csv)
            if new:
                self._writer.writerow(["wall_time", "return", "length", "truncated"])
                self._csv.flush()

    # --- BaseEnv -------------------------------------------------------------------------------------------
    @property
    def behavior_specs(self) -> BehaviorMapping:
        return BehaviorMapping({self._name: self._spec})

    def reset(self) -> None:
        for i, env in enumerate(self._envs):
            kwargs = {} if self._seeded else {"seed": self._seeds[i]}
            obs, _ = env.reset(**kwargs)
            if not self._seeded:
                env.action_space.seed(self._seeds[i])
            self._obs[i] = obs
        self._seeded = True
        self._ep_return[:] = 0.0
        self._ep_length[:] = 0
        self._actions = None
        self._steps = (self._decision(np.zeros(self._n, dtype=np.float32)), TerminalSteps.empty(self._spec))

    def set_actions(self, behavior_name: str, action: ActionTuple) -> None:
        self._check_name(behavior_name)
        cont = np.asarray(action.continuous, dtype=np.float32).reshape(self._n, -1)
        self._actions = cont.copy()

    def set_action_for_agent(self, behavior_name: str, agent_id: int, action: ActionTuple) -> None:
        self._check_name(behavior_name)
        if self._actions is None:
            self._actions = np.zeros((self._n, self._spec.action_spec.continuous_size), dtype=np.float32)
        self._actions[int(agent_id)] = np.asarray(action.continuous, dtype=np.float32).reshape(-1)

    def step(self) -> None:
        if self._actions is None:  # no action set: Unity's agents would act with zeros
            self._actions = np.zeros((self._n, self._spec.action_spec.continuous_size), dtype=np.float32)
        rewards = np.zeros(self._n, dtype=np.float32)
        t_obs, t_rew, t_int, t_ids = [], [], [], []
        for i, env in enumerate(self._envs):
            act = self._low + (np.clip(self._actions[i], -1.0, 1.0) + 1.0) * 0.5 * (self._high - self._low)
            obs, reward, terminated, truncated, _ = env.step(act)
            self._ep_return[i] += float(reward)
            self._ep_length[i] += 1
            if terminated or truncated:
                interrupted = bool(truncated and not terminated)
                t_obs.append(np.asarray(obs, dtype=np.float32))
                t_rew.append(float(reward))
                t_int.append(interrupted)
                t_ids.append(i)
                self._record(self._ep_return[i], int(self._ep_length[i]), interrupted)
                self._ep_return[i] = 0.0
                self._ep_length[i] = 0
                obs, _ = env.reset()
                rewards[i] = 0.0  # the new episode's first decision step
            else:
                rewards[i] = float(reward)
            self._obs[i] = obs
        self._actions = None
        if t_ids:
            k = len(t_ids)
            terminal = TerminalSteps(
                obs=[np.stack(t_obs).astype(np.float32)],
                reward=np.asarray(t_rew, dtype=np.float32),
                interrupted=np.asarray(t_int, dtype=bool),
                agent_id=np.asarray(t_ids, dtype=np.int32),
                group_id=np.zeros(k, dtype=np.int32),
                group_reward=np.zeros(k, dtype=np.float32),
            )
        else:
            terminal = TerminalSteps.empty(self._spec)
        self._steps = (self._decision(rewards), terminal)

    def get_steps(self, behavior_name: str) -> tuple[DecisionSteps, TerminalSteps]:
        self._check_name(behavior_name)
        return self._steps

    def close(self) -> None:
        for env in self._envs:
            env.close()
        if self._csv is not None:
            self._csv.close()
            self._csv = None

    # --- helpers -------------------------------------------------------------------------------------------
    def _decision(self, rewards: np.ndarray) -> DecisionSteps:
        return DecisionSteps(
            obs=[self._obs.copy()],
            reward=rewards.astype(np.float32),
            agent_id=self._ids.copy(),
            action_mask=None,
            group_id=np.zeros(self._n, dtype=np.int32),
            group_reward=np.zeros(self._n, dtype=np.float32),
        )

    def _record(self, ret: float, length: int, truncated: bool) -> None:
        if self._csv is not None:
            self._writer.writerow([f"{time.time():.6f}", f"{ret:.6f}", length, int(truncated)])
            self._csv.flush()

    def _check_name(self, behavior_name: str) -> None:
        if behavior_name != self._name:
            raise KeyError(f"unknown behavior {behavior_name!r} (this env has {self._name!r})")


class GymEnvFactory:
    """SubprocessEnvManager's env factory: (worker_id, side_channels) -> BaseEnv (side channels unused)."""

    def __init__(self, env_id: str, behavior_name: str, copies: int, seed: int, out_dir: str) -> None:
        self.env_id, self.behavior_name, self.copies, self.seed, self.out_dir = (
            env_id, behavior_name, copies, seed, out_dir)

    def __call__(self, worker_id: int, side_channels: list) -> BaseEnv:
        return GymBaseEnv(
            self.env_id, self.behavior_name, self.copies, self.seed, worker_id,
            episode_csv=os.path.join(self.out_dir, f"episodes-w{worker_id}.csv"),
        )


def read_episodes(run_dir: str) -> list[tuple[float, float, int, bool]]:
    """(wall_time, return, length, truncated) of every recorded episode of a run, in order of ending."""
    rows = []
    for path in sorted(glob.glob(os.path.join(run_dir, "episodes-w*.csv"))):
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                rows.append((float(r["wall_time"]), float(r["return"]), int(r["length"]), r["truncated"] == "1"))
    rows.sort(key=lambda r: r[0])
    return rows


def _count_gradient_steps_from_buffer_init() -> None:
    """On a resume, ML-Agents' off-policy trainer's counts of gradient (and reward-signal) steps as an
    uninterrupted run has them: (step - buffer_init_steps) / steps_per_update."""
    from mlagents.trainers.trainer.off_policy_trainer import OffPolicyTrainer

    add_policy = OffPolicyTrainer.add_policy

    def counted(self, parsed_behavior_id, policy):  # type: ignore[no-untyped-def]
        add_policy(self, parsed_behavior_id, policy)
        taken = self._step - self.hyperparameters.buffer_init_steps
        self.update_steps = int(max(1, taken / self.steps_per_update))
        self.reward_signal_update_steps = int(max(1, taken / self.reward_signal_steps_per_update))

    OffPolicyTrainer.add_policy = counted


def _checkpoint_entropy_coefficient() -> None:
    """ML-Agents 1.1.0's SAC checkpoints leave out its learned entropy coefficient: TorchSACOptimizer.get_modules
    lists the networks and the three optimizers but not ``_log_ent_coef``, so a resume starts it again at
    ``init_entcoef`` under critics and an actor trained with a smaller one. Listing it makes the checkpoint
    carry it; a checkpoint written without it still loads (ML-Agents warns that the key is missing)."""
    from mlagents.trainers.sac.optimizer_torch import TorchSACOptimizer

    get_modules = TorchSACOptimizer.get_modules

    def with_coefficient(self):  # type: ignore[no-untyped-def]
        modules = get_modules(self)
        modules["Optimizer:log_ent_coef"] = self._log_ent_coef
        return modules

    TorchSACOptimizer.get_modules = with_coefficient


def _drop_episodes_after_checkpoint(run_dir: str, behavior: str) -> None:
    """Before a resume: keep only the episodes that ended before the behavior's last checkpoint was written."""
    checkpoint = os.path.join(run_dir, behavior, "checkpoint.pt")
    if not os.path.isfile(checkpoint):
        raise SystemExit(f"{checkpoint}: no checkpoint to resume from (run without --resume first)")
    saved_at = os.path.getmtime(checkpoint)
    for path in glob.glob(os.path.join(run_dir, "episodes-w*.csv")):
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
        kept = rows[:1] + [r for r in rows[1:] if float(r[0]) <= saved_at]
        with open(path + ".tmp", "w", newline="") as f:
            csv.writer(f).writerows(kept)
        os.replace(path + ".tmp", path)


def score(returns: list[float]) -> float:
    """Mean return of the last 10% of episodes (at least one)."""
    if not returns:
        return math.nan
    tail = returns[-max(1, len(returns) // 10):]
    return float(np.mean(tail))


def _legacy_onnx_export() -> None:
    """ML-Agents 1.1.0 exports with the TorchScript exporter; torch >= 2.9 defaults to dynamo."""
    import torch

    export = torch.onnx.export
    if getattr(export, "_mlagents_legacy", False):
        return

    def legacy(*args, **kwargs):
        kwargs.setdefault("dynamo", False)
        return export(*args, **kwargs)

    legacy._mlagents_legacy = True  # type: ignore[attr-defined]
    torch.onnx.export = legacy


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="ML-Agents trainer YAML (behaviors, env_settings, ...)")
    parser.add_argument("--env", default="Hopper-v5", help="gymnasium id (default Hopper-v5)")
    parser.add_argument("--behavior", default=None,
                        help="behavior name (default: the config's only behavior, else the env id's prefix)")
    parser.add_argument("--copies", type=int, default=8, help="gymnasium copies per worker (agents)")
    parser.add_argument("--num-envs", type=int, default=2, help="env worker processes")
    parser.add_argument("--steps", type=int, default=500_000, help="max_steps of the behavior")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--results-dir", default="results")
    parser.add_argument("--run-id", default=None)
    parser.add_argument("--checkpoint-interval", type=int, default=None,
                        help="checkpoint (and replay buffer) every N steps, to --resume from")
    parser.add_argument("--resume", action="store_true", help="continue the run from its last checkpoint")
    args = parser.parse_args(argv)
    if importlib.util.find_spec("mlagents") is None:  # ML-Agents' trainer: only its own venv has it
        raise SystemExit(
            f"{sys.executable} has no ML-Agents trainer (mlagents 1.1.0): run this with ML-Agents' own venv, which "
            "`make peer-mlagents` makes: .venv-mlagents/bin/python bench/peers/mlagents_gym.py ..."
        )

    _legacy_onnx_export()
    from mlagents import torch_utils
    from mlagents.plugins.stats_writer import register_stats_writer_plugins
    from mlagents.plugins.trainer_type import register_trainer_plugins
    from mlagents.trainers.environment_parameter_manager import EnvironmentParameterManager
    from mlagents.trainers.learn import write_run_options, write_timing_tree, write_training_status
    from mlagents.trainers.settings import RunOptions
    from mlagents.trainers.stats import StatsReporter
    from mlagents.trainers.subprocess_env_manager import SubprocessEnvManager
    from mlagents.trainers.trainer import TrainerFactory
    from mlagents.trainers.trainer_controller import TrainerController
    from mlagents.trainers.training_status import GlobalTrainingStatus
    from mlagents_envs import logging_util

    register_trainer_plugins()  # fills TrainerFactory's trainer types (mlagents-learn does it in its parser)
    logging_util.set_log_level(logging_util.INFO)

    with open(args.config) as f:
        config = yaml.safe_load(f)
    behaviors = config.get("behaviors") or {}
    behavior = args.behavior or (next(iter(behaviors)) if len(behaviors) == 1 else args.env.split("-")[0])
    if behavior not in behaviors:
        raise SystemExit(f"{args.config}: no behavior {behavior!r} (has {sorted(behaviors)})")
    behaviors[behavior]["max_steps"] = args.steps
    if args.checkpoint_interval:
        behaviors[behavior]["checkpoint_interval"] = args.checkpoint_interval
        behaviors[behavior].setdefault("hyperparameters", {})["save_replay_buffer"] = True
    env_settings = config.setdefault("env_settings", {})
    # env_path is never launched here, but ML-Agents wants one set when num_envs > 1
    env_settings["env_path"] = f"gymnasium:{args.env}"
    env_settings.update(num_envs=args.num_envs, num_areas=args.copies, seed=args.seed)
    run_id = args.run_id or f"{behavior}-ppo-s{args.seed}"
    config.setdefault("checkpoint_settings", {}).update(
        run_id=run_id, results_dir=os.path.abspath(args.results_dir), force=not args.resume, resume=args.resume)
    options = RunOptions.from_dict(config)

    ckpt = options.checkpoint_settings
    write_path = ckpt.write_path
    _checkpoint_entropy_coefficient()
    if args.resume:
        _count_gradient_steps_from_buffer_init()
        _drop_episodes_after_checkpoint(write_path, behavior)
        GlobalTrainingStatus.load_state(os.path.join(ckpt.run_logs_dir, "training_status.json"))
    elif os.path.isdir(write_path):
        shutil.rmtree(write_path)
    os.makedirs(ckpt.run_logs_dir, exist_ok=True)

    torch_utils.set_torch_config(options.torch_settings)
    for sw in register_stats_writer_plugins(options):
        StatsReporter.add_writer(sw)

    factory = GymEnvFactory(args.env, behavior, args.copies, args.seed, write_path)
    env_manager = SubprocessEnvManager(factory, options, options.env_settings.num_envs)
    param_manager = EnvironmentParameterManager(options.environment_parameters, args.seed, restore=args.resume)
    trainer_factory = TrainerFactory(
        trainer_config=options.behaviors,
        output_path=write_path,
        train_model=True,
        load_model=args.resume,
        seed=args.seed,
        param_manager=param_manager,
        init_path=None,
        multi_gpu=False,
    )
    tc = TrainerController(trainer_factory, write_path, run_id, param_manager, True, args.seed)

    started = time.perf_counter()
    try:
        tc.start_learning(env_manager)
    finally:
        env_manager.close()
        write_run_options(write_path, options)
        write_timing_tree(ckpt.run_logs_dir)
        write_training_status(ckpt.run_logs_dir)
    wall = time.perf_counter() - started

    episodes = read_episodes(write_path)
    returns = [r[1] for r in episodes]
    truncated = sum(1 for r in episodes if r[3])
    print(f"episodes: {len(episodes)} ({truncated} truncated by the time limit) in {write_path}", flush=True)
    print(f"SCORE seed={args.seed} score={score(returns):.1f} episodes={len(returns)} wall_s={wall:.0f}", flush=True)


if __name__ == "__main__":
    main()
