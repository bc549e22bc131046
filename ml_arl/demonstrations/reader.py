"""Reading .demo files: ``load_demonstrations`` (arrays for behavioral cloning and GAIL) and
``check_demonstrations`` (one line per problem, for a config check before a run starts).

Records pair as in ML-Agents' ``demo_to_buffer``: a step is record i's observations and action
with the reward and done of record i + 1. Where ML-Agents also pairs an episode's terminal record
with the next episode's first record (a step that never happened), ml_arl does not: a terminal
record only ends its episode and gives the last step's next observation. Records pair within one
file and one episode (AgentInfo ``id``; Unity writes the episode id there), so a file that stops
mid-episode loses only its last record.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
from mlagents_envs.base_env import ActionSpec, BehaviorSpec

from ml_arl.core.behavior_specs import is_variable_length
from ml_arl.core.exceptions import ConfigError
from ml_arl.demonstrations.format import (
    DemoFile,
    DemoFormatError,
    FileSpec,
    file_spec,
    observation_array,
    parse_demo,
    png_problem,
)

DEMO_SUFFIX = ".demo"


@dataclass(frozen=True)
class Demonstrations:
    """Every step of one or more .demo files, in file order (files sorted by name), as arrays.

    ``obs`` and ``next_obs`` have ml_arl's layout (the one our envs give; images (H, W, C), as
    mlagents-envs 0.28 decodes them). ``next_obs`` is the observation after each step: the next
    step's, or at an episode's end its terminal observation (GAIL with absorbing states, offline
    value targets need it; BC does not). It costs a second copy of the observations."""

    spec: BehaviorSpec
    obs: list[np.ndarray]  # one [N, *shape] float32 array per observation
    next_obs: list[np.ndarray]  # one [N, *shape] float32 array per observation
    continuous: np.ndarray  # [N, n_continuous] float32, as the environment received them
    discrete: np.ndarray  # [N, n_branches] int32
    rewards: np.ndarray  # [N] float32: the environment reward that followed each step
    dones: np.ndarray  # [N] bool: the episode ended after this step
    interrupted: np.ndarray  # [N] bool: ... because of a max-step cut (done is True too)
    episodes: int  # finished episodes (ended by a terminal record)
    steps: int  # N; a file's number_steps counts records, one more per finished episode
    mean_reward: float  # mean return of the finished episodes; nan without any
    files: tuple[str, ...]


class _DemoError(Exception):
    """One line: the file (or folder) and what is wrong with it."""


# ------------------------------------------------------------------------------------ public API


def load_demonstrations(path: str, where: str = "") -> Demonstrations:
    """The steps of a .demo file, or of every .demo file in a folder (all of one spec). Every
    problem is a ConfigError with one line naming the file (after ``where``, the config key)."""
    try:
        return _load(demo_files(path))
    except _DemoError as err:
        raise ConfigError([_prefixed(where, str(err))]) from None


def check_demonstrations(path: str, spec: BehaviorSpec, where: str = "", behavior: Optional[str] = None) -> Optional[str]:
    """None when ``path`` (a .demo file or a folder of them) can be read and matches ``spec``, else
    one line: ``where`` (the config key), the file, what differs or is wrong, and what to do.
    Reads every record and checks every PNG's bytes, but decodes no image."""
    other = f"behavior {behavior}" if behavior else "the behavior"
    try:
        for file in demo_files(path):
            demo, fs = _read(file)
            _check_records(file, demo, fs)
            difference = spec_difference(fs.spec, spec, other)
            if difference is not None:
                return _prefixed(
                    where,
                    f"{file}: {difference}; record demonstrations of {behavior or 'this behavior'} "
                    "(arl-learn --record-demo) or point demo_path at ones that match",
                )
    except _DemoError as err:
        return _prefixed(where, str(err))
    return None


def demo_files(path: str) -> list[str]:
    """``path`` if it is a .demo file, else the .demo files in folder ``path``, sorted by name."""
    if os.path.isdir(path):
        try:
            names = sorted(n for n in os.listdir(path) if n.endswith(DEMO_SUFFIX))
        except OSError as err:
            raise _DemoError(f"{path}: cannot list the folder ({err.strerror or err})") from None
        files = [os.path.join(path, n) for n in names if os.path.isfile(os.path.join(path, n))]
        if not files:
            raise _DemoError(
                f"{path}: the folder holds no {DEMO_SUFFIX} files; record some (arl-learn --record-demo {path}, "
                "or Unity's Demonstration Recorder) or point demo_path at a .demo file"
            )
        return files
    if os.path.isfile(path):
        if not path.endswith(DEMO_SUFFIX):
            raise _DemoError(f"{path}: is not a {DEMO_SUFFIX} file; give a .demo file or a folder of them")
        return [path]
    raise _DemoError(f"{path}: no such file or folder; give a .demo file or a folder of them")


def spec_difference(demo: BehaviorSpec, spec: BehaviorSpec, other: str, this: str = "the demo") -> Optional[str]:
    """What differs between a demo's spec (``this``) and ``other``'s (e.g. "behavior Reach"): the
    number of observations, an observation's shape, or the actions; None if nothing a learner uses differs."""
    ours, theirs = demo.observation_specs, spec.observation_specs
    if len(ours) != len(theirs):
        return f"{this} has {len(ours)} observations, {other} has {len(theirs)}"
    for index, (a, b) in enumerate(zip(ours, theirs)):
        if tuple(a.shape) != tuple(b.shape):
            return f"obs {index} is {tuple(a.shape)} in {this}, {tuple(b.shape)} in {other}"
        if is_variable_length(a) != is_variable_length(b):
            kinds = ("variable-length (a BufferSensor's)", "of fixed size")
            return f"obs {index} is {kinds[not is_variable_length(a)]} in {this}, {kinds[not is_variable_length(b)]} in {other}"
    if _actions_text(demo.action_spec) != _actions_text(spec.action_spec):
        return f"the actions are {_actions_text(demo.action_spec)} in {this}, {_actions_text(spec.action_spec)} in {other}"
    return None


# ------------------------------------------------------------------------------------ reading


def _prefixed(where: str, text: str) -> str:
    return f"{where}: {text}" if where else text


def _actions_text(action_spec: ActionSpec) -> str:
    parts = []
    if action_spec.continuous_size:
        parts.append(f"{action_spec.continuous_size} continuous")
    if action_spec.discrete_branches:
        parts.append(f"discrete branches {tuple(int(b) for b in action_spec.discrete_branches)}")
    return " + ".join(parts) or "none"


def _read(file: str) -> tuple[DemoFile, FileSpec]:
    try:
        with open(file, "rb") as f:
            data = f.read()
    except OSError as err:
        raise _DemoError(f"{file}: cannot read ({err.strerror or err})") from None
    try:
        demo = parse_demo(data)
        return demo, file_spec(demo)
    except DemoFormatError as err:
        raise _DemoError(f"{file}: not a readable .demo file: {err}; record it again or remove it") from None


def _record_actions(record: Any, index: int, action_spec: ActionSpec, file: str) -> tuple[list[float], list[int]]:
    """A record's (continuous, discrete) actions; old files keep them in vector_actions_deprecated.
    A terminal record may carry none (zeros)."""
    action = record.action_info
    cont, disc = list(action.continuous_actions), [int(a) for a in action.discrete_actions]
    if not cont and not disc and len(action.vector_actions_deprecated):
        if action_spec.continuous_size:
            cont = list(action.vector_actions_deprecated)
        else:
            disc = [int(a) for a in action.vector_actions_deprecated]
    n_cont, n_disc = action_spec.continuous_size, len(action_spec.discrete_branches)
    if not cont and not disc and record.agent_info.done:
        return [0.0] * n_cont, [0] * n_disc
    if len(cont) != n_cont or len(disc) != n_disc:
        raise _DemoError(
            f"{file}: not a readable .demo file: record {index} has {len(cont)} continuous and {len(disc)} "
            f"discrete actions where the brain parameters say {n_cont} and {n_disc}; record it again or remove it"
        )
    return cont, disc


def _check_records(file: str, demo: DemoFile, fs: FileSpec) -> None:
    """Every record's actions fit the spec, its float observations hold the declared values and its
    PNG observations are whole (their chunks' CRCs; no image is decoded)."""
    sizes = [int(np.prod(shape)) for shape in fs.declared]
    for index, record in enumerate(demo.records):
        _record_actions(record, index, fs.spec.action_spec, file)
        for k, obs in enumerate(record.agent_info.observations):
            if not obs.compression_type and len(obs.float_data.data) != sizes[k]:
                raise _DemoError(
                    f"{file}: not a readable .demo file: record {index} obs {k} holds {len(obs.float_data.data)} "
                    f"values for shape {fs.declared[k]}; record it again or remove it"
                )
            problem = png_problem(obs.compressed_data) if obs.compression_type else None
            if problem is not None:
                raise _DemoError(f"{file}: not a readable .demo file: record {index} obs {k}: {problem}; record it again or remove it")


@dataclass
class _FileSteps:
    obs: list[np.ndarray]
    next_obs: list[np.ndarray]
    continuous: np.ndarray
    discrete: np.ndarray
    rewards: np.ndarray
    dones: np.ndarray
    interrupted: np.ndarray
    returns: list[float]  # of the finished episodes


def _file_steps(file: str, demo: DemoFile, fs: FileSpec) -> _FileSteps:
    records = demo.records
    infos = [r.agent_info for r in records]
    done = np.array([i.done for i in infos], bool)
    ids = np.array([i.id for i in infos], np.int64)
    steps = np.flatnonzero(~done[:-1] & (ids[1:] == ids[:-1]))  # record i pairs with record i + 1
    action_spec = fs.spec.action_spec
    actions = [_record_actions(records[i], int(i), action_spec, file) for i in steps]
    continuous = np.array([a[0] for a in actions], np.float32).reshape(len(steps), action_spec.continuous_size)
    discrete = np.array([a[1] for a in actions], np.int32).reshape(len(steps), len(action_spec.discrete_branches))
    rewards = np.array([infos[i + 1].reward for i in steps], np.float32)
    dones = done[steps + 1]
    interrupted = dones & np.array([infos[i + 1].max_step_reached for i in steps], bool)
    obs, next_obs = [], []
    for k, (declared, obs_spec) in enumerate(zip(fs.declared, fs.spec.observation_specs)):
        shape, chw = tuple(obs_spec.shape), k in fs.chw
        try:
            every = np.stack([observation_array(info.observations[k], declared, chw, shape) for info in infos])
        except DemoFormatError as err:
            raise _DemoError(f"{file}: not a readable .demo file: obs {k}: {err}; record it again or remove it") from None
        obs.append(every[steps])
        next_obs.append(every[steps + 1])
    returns: list[float] = []
    total, episode = 0.0, None
    for i, reward, ended in zip(steps.tolist(), rewards.tolist(), dones.tolist()):
        if ids[i] != episode:
            total, episode = 0.0, ids[i]
        total += reward
        if ended:
            returns.append(total)
            total, episode = 0.0, None
    return _FileSteps(obs, next_obs, continuous, discrete, rewards, dones, interrupted, returns)


def _load(files: list[str]) -> Demonstrations:
    spec: Optional[BehaviorSpec] = None
    parts: list[_FileSteps] = []
    for file in files:
        demo, fs = _read(file)
        if spec is None:
            spec = fs.spec
        else:
            difference = spec_difference(fs.spec, spec, files[0], "this file")
            if difference is not None:
                raise _DemoError(f"{file}: {difference}; a folder of demonstrations holds one behavior's files only")
        parts.append(_file_steps(file, demo, fs))
    assert spec is not None
    returns = [r for p in parts for r in p.returns]
    n_obs = len(spec.observation_specs)
    return Demonstrations(
        spec=spec,
        obs=[np.concatenate([p.obs[k] for p in parts]) for k in range(n_obs)],
        next_obs=[np.concatenate([p.next_obs[k] for p in parts]) for k in range(n_obs)],
        continuous=np.concatenate([p.continuous for p in parts]),
        discrete=np.concatenate([p.discrete for p in parts]),
        rewards=np.concatenate([p.rewards for p in parts]),
        dones=np.concatenate([p.dones for p in parts]),
        interrupted=np.concatenate([p.interrupted for p in parts]),
        episodes=len(returns),
        steps=sum(len(p.rewards) for p in parts),
        mean_reward=float(np.mean(returns)) if returns else float("nan"),
        files=tuple(files),
    )
