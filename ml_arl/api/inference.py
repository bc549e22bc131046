"""Policies from Python: ``load_policy(path)`` and ``evaluate(policy, env, episodes)``.

``load_policy`` takes a run folder (``results/<run-id>``), a checkpoint (``.pt``) or an ONNX model
(``.onnx``). A run folder or checkpoint acts through the same numpy muscle the workers use
(``ml_arl.acting.muscle``); an ``.onnx`` file through ONNX Runtime, as Unity would run it. Both
give ``act(observations, deterministic=None, action_mask=None)`` on numpy arrays, returning the
actions the environment takes (continuous ones already clamped and scaled as the workers send
them).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from typing import Any, Optional, Union

import numpy as np
from mlagents_envs.base_env import ActionTuple, BaseEnv, BehaviorSpec

from ml_arl.acting.muscle import masks_allowed
from ml_arl.core.behavior_specs import spec_from_plain
from ml_arl.core.exceptions import RunDirectoryError

Observations = Union[np.ndarray, Sequence[np.ndarray]]


def _batched(obs: Observations, shapes: list[tuple[int, ...]]) -> tuple[list[np.ndarray], bool]:
    """The observations as a list of [B, *shape] float32 arrays, and whether one unbatched
    observation was given (its actions are then returned without the batch axis)."""
    if isinstance(obs, np.ndarray):
        arrays = [np.asarray(obs, np.float32)]
    elif len(shapes) == 1 and not (len(obs) == 1 and np.ndim(obs[0]) >= len(shapes[0])):
        arrays = [np.asarray(obs, np.float32)]  # nested lists: one array
    else:
        arrays = [np.asarray(o, np.float32) for o in obs]
    if len(arrays) != len(shapes):
        raise ValueError(f"expected {len(shapes)} observation arrays (shapes {shapes}), got {len(arrays)}")
    single = arrays[0].ndim == len(shapes[0])
    if single:
        arrays = [a[None] for a in arrays]
    for a, shape in zip(arrays, shapes):
        if tuple(a.shape[1:]) != tuple(shape):
            raise ValueError(f"an observation of shape {tuple(a.shape[1:])} where the policy takes {tuple(shape)}")
    return arrays, single


def _unbatched(actions: Union[np.ndarray, ActionTuple], single: bool) -> Union[np.ndarray, ActionTuple]:
    if not single:
        return actions
    if isinstance(actions, ActionTuple):
        return ActionTuple(continuous=actions.continuous[0], discrete=actions.discrete[0])
    return actions[0]


def _plain(actions: ActionTuple, spec: BehaviorSpec) -> Union[np.ndarray, ActionTuple]:
    """Only continuous or only discrete actions: that array; both: the ActionTuple."""
    if spec.action_spec.continuous_size and spec.action_spec.discrete_size:
        return actions
    return actions.continuous if spec.action_spec.continuous_size else actions.discrete


class Policy:
    """A behavior's policy acting with ml_arl's numpy muscle (or a user trainer's muscle class)."""

    def __init__(self, behavior: str, spec: BehaviorSpec, weights: Any, muscle: Optional[str] = None,
                 deterministic: bool = True, seed: int = 0):
        from ml_arl.acting.env_runner import build_muscle

        self.behavior = behavior
        self.spec = spec
        self.deterministic = deterministic
        self.muscle, self.recurrent = build_muscle(muscle, weights, deterministic, seed)
        self._shapes = [tuple(o.shape) for o in spec.observation_specs]

    def act(self, observations: Observations, deterministic: Optional[bool] = None,
            action_mask: Optional[np.ndarray] = None, agent_ids: Optional[np.ndarray] = None
            ) -> Union[np.ndarray, ActionTuple]:
        """Actions for a batch of observations (or one observation). ``action_mask``: [B, sum(branches)]
        booleans, True = allowed. With memory, ``agent_ids`` names whose memory each row continues."""
        obs, single = _batched(observations, self._shapes)
        return _unbatched(_plain(self.action_tuple(obs, deterministic, action_mask, agent_ids), self.spec), single)

    def action_tuple(self, obs: list[np.ndarray], deterministic: Optional[bool] = None,
                     allowed: Optional[np.ndarray] = None, agent_ids: Optional[np.ndarray] = None) -> ActionTuple:
        """The ActionTuple an environment takes, for [B, *shape] observations."""
        self.muscle.deterministic = self.deterministic if deterministic is None else deterministic
        if allowed is not None:
            allowed = np.asarray(allowed, bool)
        if self.recurrent:
            ids = agent_ids if agent_ids is not None else np.arange(obs[0].shape[0])
            info = self.muscle.act(obs, allowed, ids)
        else:
            info = self.muscle.act(obs, allowed)
        return info.env_action

    def forget(self, agent_ids: Optional[np.ndarray] = None) -> None:
        if self.recurrent:
            self.muscle.forget(agent_ids)


class OnnxPolicy:
    """A policy from an exported ``.onnx`` model, run by ONNX Runtime with ML-Agents' contract
    (inputs obs_0.., action_masks; outputs (deterministic_)continuous_actions / discrete_actions)."""

    def __init__(self, path: str, deterministic: bool = True):
        import onnxruntime as ort

        self.path = path
        self.behavior = os.path.splitext(os.path.basename(path))[0]
        self.deterministic = deterministic
        self.session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        inputs = {i.name: i for i in self.session.get_inputs()}
        if "recurrent_in" in inputs:
            raise ValueError(f"{path}: a model with memory; load its checkpoint (.pt) instead, whose muscle keeps "
                             "each agent's memory")
        self.obs_names = sorted((n for n in inputs if n.startswith("obs_")), key=lambda n: int(n[4:]))
        self._shapes = [tuple(int(d) for d in inputs[n].shape[1:]) for n in self.obs_names]
        self.outputs = [o.name for o in self.session.get_outputs()]
        const = dict(zip(self.outputs, self.session.run(None, self._zeros()))) if self.obs_names else {}
        self.continuous_size = int(np.ravel(const["continuous_action_output_shape"])[0]) if "continuous_actions" in const else 0
        self.branches = tuple(int(b) for b in np.ravel(const["discrete_action_output_shape"])) if "discrete_actions" in const else ()

    def _zeros(self) -> dict[str, np.ndarray]:
        feed = {n: np.zeros((1, *s), np.float32) for n, s in zip(self.obs_names, self._shapes)}
        mask_input = [i for i in self.session.get_inputs() if i.name == "action_masks"]
        if mask_input:
            feed["action_masks"] = np.ones((1, int(mask_input[0].shape[1])), np.float32)
        return feed

    def act(self, observations: Observations, deterministic: Optional[bool] = None,
            action_mask: Optional[np.ndarray] = None, agent_ids: Optional[np.ndarray] = None
            ) -> Union[np.ndarray, ActionTuple]:
        """As ``Policy.act``; images are given as the environment gives them (height, width, channels)."""
        obs, single = _batched_onnx(observations, self._shapes)
        actions = self.action_tuple(obs, deterministic, action_mask)
        if self.continuous_size and self.branches:
            return _unbatched(actions, single)
        return _unbatched(actions.continuous if self.continuous_size else actions.discrete, single)

    def action_tuple(self, obs: list[np.ndarray], deterministic: Optional[bool] = None,
                     allowed: Optional[np.ndarray] = None, agent_ids: Optional[np.ndarray] = None) -> ActionTuple:
        deterministic = self.deterministic if deterministic is None else deterministic
        n = obs[0].shape[0]
        feed = {}
        for name, o, shape in zip(self.obs_names, obs, self._shapes):
            feed[name] = _channels_first(o, shape)
        if self.branches:
            feed["action_masks"] = (np.ones((n, sum(self.branches)), np.float32) if allowed is None
                                    else np.asarray(allowed, np.float32))
        prefix = "deterministic_" if deterministic else ""
        names = []
        if self.continuous_size:
            names.append(f"{prefix}continuous_actions")
        if self.branches:
            names.append(f"{prefix}discrete_actions")
        out = dict(zip(names, self.session.run(names, feed)))
        cont = out.get(f"{prefix}continuous_actions", np.zeros((n, 0), np.float32))
        disc = out.get(f"{prefix}discrete_actions", np.zeros((n, 0), np.int32))
        return ActionTuple(continuous=np.asarray(cont, np.float32), discrete=np.asarray(disc, np.int32))

    def forget(self, agent_ids: Optional[np.ndarray] = None) -> None:
        pass


def _channels_first(o: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """An image as the environment gives it ([B, H, W, C]) for a model that takes [B, C, H, W]."""
    if o.ndim == 4 and tuple(o.shape[1:]) != tuple(shape):
        return np.ascontiguousarray(o.transpose(0, 3, 1, 2))
    return o


def _batched_onnx(obs: Observations, shapes: list[tuple[int, ...]]) -> tuple[list[np.ndarray], bool]:
    """As ``_batched``, for a model whose images are channels-first while the env's are channels-last."""
    env_shapes = [(s[1], s[2], s[0]) if len(s) == 3 else s for s in shapes]
    return _batched(obs, env_shapes)


AnyPolicy = Union[Policy, OnnxPolicy]


def load_policy(path: str, behavior: Optional[str] = None, deterministic: bool = True) -> AnyPolicy:
    """A policy from a run folder, a checkpoint (.pt) or an ONNX model (.onnx)."""
    path = os.fspath(path)
    if path.endswith(".onnx"):
        if not os.path.isfile(path):
            raise RunDirectoryError(f"{path}: no such ONNX model")
        return OnnxPolicy(path, deterministic)
    if os.path.isdir(path):
        path = _checkpoint_in(path, behavior)
    if not os.path.isfile(path):
        raise RunDirectoryError(f"{path}: no such checkpoint or run folder")
    from ml_arl.results.checkpoints import load_torch

    try:
        state = load_torch(path)
    except Exception as err:  # noqa: BLE001 - any unreadable file: one line
        raise RunDirectoryError(f"{path}: cannot read this checkpoint ({type(err).__name__}: {err})") from None
    about = state.get("Behavior")
    if not isinstance(about, dict):
        raise RunDirectoryError(f"{path}: this checkpoint was written before ml_arl saved the behavior's spec in "
                                "checkpoints; load the .onnx model beside it instead")
    return _policy_from_state(state, about, deterministic)


def _checkpoint_in(folder: str, behavior: Optional[str]) -> str:
    """The newest checkpoint.pt of ``behavior`` under a run folder (the last phase's, where there are phases)."""
    found = sorted(glob.glob(os.path.join(folder, "**", "checkpoint.pt"), recursive=True), key=os.path.getmtime)
    by_behavior: dict[str, str] = {}
    for p in found:
        by_behavior[os.path.basename(os.path.dirname(p))] = p  # the newest wins
    if not by_behavior:
        raise RunDirectoryError(f"{folder}: no checkpoint in this folder; give a run folder (results/<run-id>), "
                                "a .pt checkpoint or an .onnx model")
    if behavior is None:
        if len(by_behavior) > 1:
            raise RunDirectoryError(f"{folder}: several behaviors ({', '.join(sorted(by_behavior))}); name one "
                                    "with behavior=")
        return next(iter(by_behavior.values()))
    if behavior not in by_behavior:
        raise RunDirectoryError(f"{folder}: no checkpoint of behavior {behavior!r}; there are "
                                f"{', '.join(sorted(by_behavior))}")
    return by_behavior[behavior]


def _policy_from_state(state: dict[str, Any], about: dict[str, Any], deterministic: bool) -> Policy:
    import torch

    from ml_arl.results.summary_writers import StatsReporter
    from ml_arl.settings.trainer_settings import TrainerSettings
    from ml_arl.trainers.trainer import trainer_class

    name = str(about["name"])
    spec = spec_from_plain(about["spec"])
    settings = TrainerSettings.model_validate(about["settings"])
    trainer = trainer_class(settings, name)(name, settings, spec, StatsReporter(name, []), None, torch.device("cpu"),
                                            False, 0)
    trainer.load_state(state, resume=False)
    snapshot = trainer.policy_snapshot()
    return Policy(name, spec, snapshot.weights, snapshot.muscle, deterministic)


def make_env(env: Union[str, BaseEnv], env_args: Optional[Sequence[str]] = None, seed: int = 0) -> BaseEnv:
    """A BaseEnv from anything ``--env`` takes (builtin:, gymnasium:, pettingzoo:, palaestrai:, a
    module path, a Unity build), or the BaseEnv itself."""
    if isinstance(env, BaseEnv):
        return env
    from ml_arl.envs.sources import is_python_source, resolve_env, unity_factory

    if is_python_source(env):
        return resolve_env(env, list(env_args or []), 1)(0, seed)
    from ml_arl.settings import build_run_options

    options = build_run_options({"env_settings": {"env_path": env, "env_args": list(env_args or []) or None}}, {},
                                "(evaluate)")
    return unity_factory(options, seed)(0, seed)


def evaluate(policy: AnyPolicy, env: Union[str, BaseEnv], episodes: int = 10, env_args: Optional[Sequence[str]] = None,
             seed: int = 0, max_steps: int = 1_000_000, deterministic: Optional[bool] = None) -> list[float]:
    """Play ``episodes`` episodes of the policy's behavior (the environment's only behavior, if the
    names differ) and return their returns, in the order they ended. Other behaviors get empty
    actions. An environment given by name is closed afterwards; a BaseEnv given is not."""
    if episodes < 1:
        raise ValueError("evaluate: episodes must be at least 1")
    own = not isinstance(env, BaseEnv)
    base = make_env(env, env_args, seed)
    try:
        base.reset()
        specs = dict(base.behavior_specs)
        from ml_arl.core.behavior_id import choose_behavior

        # the policy's behavior; where the names differ (a model renamed), the environment's only one
        name = choose_behavior(specs, policy.behavior if policy.behavior in specs else None, "the environment")
        returns: list[float] = []
        running: dict[int, float] = {}
        for _ in range(max_steps):
            decision, terminal = base.get_steps(name)
            for i, agent in enumerate(terminal.agent_id.tolist()):
                returns.append(running.pop(agent, 0.0) + float(terminal.reward[i]) + float(terminal.group_reward[i]))
            if len(terminal):
                policy.forget(terminal.agent_id)
            if len(returns) >= episodes:
                return returns[:episodes]
            for i, agent in enumerate(decision.agent_id.tolist()):
                running[agent] = running.get(agent, 0.0) + float(decision.reward[i]) + float(decision.group_reward[i])
            if len(decision):
                allowed = masks_allowed(decision.action_mask, len(decision), tuple(specs[name].action_spec.discrete_branches))
                base.set_actions(name, policy.action_tuple(list(decision.obs), deterministic, allowed, decision.agent_id))
            for other, spec in specs.items():
                if other != name:
                    d, _ = base.get_steps(other)
                    if len(d):
                        base.set_actions(other, spec.action_spec.empty_action(len(d)))
            base.step()
        raise RuntimeError(f"evaluate: {len(returns)} of {episodes} episodes ended within {max_steps} steps")
    finally:
        if own:
            base.close()
