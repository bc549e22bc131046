"""The quick start: the environments step while this process is still importing torch (issue 49).

A run's first environment step used to wait for torch: the trainers (torch) built the first
policy, and the workers could not act without one. For a fresh PPO run of vector observations the
first policy needs no torch: ``initial_actor`` draws the actor's first weights in numpy, from the
same distributions ``ml_arl.networks.layers`` draws them from (LeCun normal under ML-Agents'
scheme, orthogonal under CleanRL's, heads scaled by their gains, zero biases). ``QuickStart``, a
thread started right after the workers are launched, starts the environments, sends each behavior
that policy and steps, holding the batches, until each behavior has a buffer's worth of steps or
the run is ready to take over. The controller then loads those weights into each new trainer's
actor (so what was acted is on-policy) and routes the held batches first, as if its own loop had
stepped them.

With phases, it acts as the first phase asks: a behavior the phase ``play``s acts with that fixed
policy, one it does not learn acts without collecting (unless the store records every step or
``--record-demo`` records it), and the steps held are those of the behaviors that learn.

A run the quick start cannot serve exactly starts as before, with no thread: another trainer, a
behavior with images, memory, goal conditioning, self-play or an ``init_path``; ``--resume``,
``--initialize-from``, ``--inference``, ``--deterministic``, environment parameters, a first phase
that tests, loads a brain or leaves a behavior out (``act``), or workers not in subprocesses.
``run_problem`` and ``behavior_problem`` say why (logged at debug).

This module imports no torch: it runs while torch is being imported.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from typing import Optional

import numpy as np
from mlagents_envs.base_env import BehaviorSpec, ObservationType

from ml_arl.core.actor_weights import ActorWeights, Dense, PolicyMessage, PolicySnapshot
from ml_arl.core.behavior_id import brain_name
from ml_arl.core.experience import StepBatch
from ml_arl.envs.backends.env_manager import EnvManager
from ml_arl.settings import NetworkSettings, RunOptions, TrainerSettings
from ml_arl.training.policy_message import fixed_policy_snapshot, policy_message

logger = logging.getLogger(__name__)

HALT_TIMEOUT_S = 60.0  # a step in the thread is bounded by the workers' own reply deadline

# (ML-Agents' gain, the orthogonal gain) of each head; ml_arl.networks.layers.HEAD_INIT
_HEAD_GAINS = {"mu": (0.2, 0.01), "logits": (0.1, 0.01)}


def run_problem(options: RunOptions) -> Optional[str]:
    """Why the quick start cannot serve this run (None: it can, behavior by behavior)."""
    env, cp = options.env_settings, options.checkpoint_settings
    first = options.phases[0] if options.phases else None
    reasons = [
        (env.manager != "subprocess", f"env_settings.manager is {env.manager}"),
        (env.deterministic, "--deterministic"),
        (cp.resume, "--resume"),
        (cp.inference, "--inference"),
        (cp.initialize_from is not None, "--initialize-from"),
        (bool(options.environment_parameters), "the run has environment parameters"),
        (first is not None and first.mode != "train", "the first phase tests"),
        (first is not None and bool(first.load), "the first phase loads a brain"),
        (first is not None and first.act is not None, "the first phase leaves behaviors out"),
        (first is not None and bool(first.environment_parameters), "the first phase has environment parameters"),
    ]
    return next((why for bad, why in reasons if bad), None)


def behavior_problem(spec: BehaviorSpec, settings: TrainerSettings) -> Optional[str]:
    """Why the quick start cannot act for this behavior exactly as its trainer would."""
    net = settings.network_settings
    goal = any(o.observation_type == ObservationType.GOAL_SIGNAL for o in spec.observation_specs)
    reasons = [
        (settings.trainer_type != "ppo", f"trainer_type {settings.trainer_type}"),
        (settings.init_path is not None, "init_path"),
        (settings.self_play is not None, "self_play"),
        (net.memory is not None, "memory"),
        (any(len(o.shape) != 1 for o in spec.observation_specs), "observations that are not vectors"),
        (goal and net.goal_conditioning_type == "hyper", "goal conditioning"),
        (net.activation not in ("swish", "tanh"), f"activation {net.activation}"),
    ]
    return next((why for bad, why in reasons if bad), None)


def _orthogonal(rng: np.random.Generator, rows: int, cols: int, gain: float) -> np.ndarray:
    """[rows, cols] with orthonormal rows or columns (the smaller side), times ``gain``: torch's
    ``orthogonal_`` of an [out=cols, in=rows] weight, transposed."""
    flat = rng.standard_normal((max(rows, cols), min(rows, cols)))
    q, r = np.linalg.qr(flat)
    q *= np.sign(np.diag(r))
    w = q if rows >= cols else q.T
    return (gain * w).astype(np.float32)


def _dense(rng: np.random.Generator, rows: int, cols: int, scheme: str, mlagents_gain: float, orthogonal_gain: float) -> Dense:
    if scheme == "mlagents":  # LeCun normal: N(0, 1 / fan_in), times the head's gain
        w = (rng.standard_normal((rows, cols)) * (mlagents_gain / math.sqrt(rows))).astype(np.float32)
    else:
        w = _orthogonal(rng, rows, cols, orthogonal_gain)
    return Dense(w, np.zeros(cols, np.float32))


def initial_actor(spec: BehaviorSpec, net: NetworkSettings, seed: int) -> ActorWeights:
    """A fresh actor of ``ml_arl.networks.actor_critic.ActorCritic`` for a behavior of vector
    observations, drawn in numpy (``behavior_problem`` is None for it)."""
    rng = np.random.default_rng(seed)
    scheme, h = net.init_scheme(), net.hidden_units
    body_gain = math.sqrt(2) if net.activation == "swish" else 5.0 / 3.0  # torch's calculate_gain("tanh")
    vector = size = int(sum(int(np.prod(o.shape)) for o in spec.observation_specs))
    body = []
    for _ in range(net.num_layers):
        body.append(_dense(rng, size, h, scheme, 1.0, body_gain))
        size = h
    n_cont = int(spec.action_spec.continuous_size)
    branches = tuple(int(b) for b in spec.action_spec.discrete_branches)
    empty = Dense(np.zeros((h, 0), np.float32), np.zeros(0, np.float32))
    mu = _dense(rng, h, n_cont, scheme, *_HEAD_GAINS["mu"]) if n_cont else empty
    logits = _dense(rng, h, sum(branches), scheme, *_HEAD_GAINS["logits"]) if branches else empty
    return ActorWeights(
        body=tuple(body),
        activation=net.activation,  # type: ignore[arg-type]
        mu=mu,
        log_std=np.full(n_cont, float(net.log_std_init), np.float32),
        logits=logits,
        branches=branches,
        # the Normalizer's start: mean 0, variance 1 (ml_arl.networks.encoders.Normalizer)
        norm_mean=np.zeros(vector, np.float32) if net.normalize else None,
        norm_std=np.full(vector, math.sqrt(1.0 + 1e-8), np.float32) if net.normalize else None,
    )


class QuickStart(threading.Thread):
    """Start the environments and step them with ``initial_actor`` policies while the trainers
    are being built; ``take()`` hands over what it did. See the module's docstring."""

    def __init__(self, options: RunOptions, env_manager: EnvManager, seed: int):
        super().__init__(name="ml_arl-quick-start", daemon=True)
        self.options = options
        self.env_manager = env_manager
        self.seed = seed
        self.specs: dict[str, BehaviorSpec] = {}
        self.weights: dict[str, ActorWeights] = {}  # brain -> the actor its behaviors acted with
        self.batches: list[StepBatch] = []
        self.first_step_time: Optional[float] = None  # time.time() when the first steps arrived
        self.start_seconds = 0.0  # how long the environments took to start
        self._halting = threading.Event()  # not ``_stop``: threading.Thread has one of its own
        self._error: Optional[BaseException] = None

    def run(self) -> None:
        try:
            begun = time.monotonic()
            self.specs = self.env_manager.start()
            self.start_seconds = time.monotonic() - begun
            targets = self._policies()
            if targets:
                self._step(targets)
        except BaseException as err:  # noqa: BLE001 - travels to the main thread through take()
            self._error = err

    def _policies(self) -> dict[str, int]:
        """Send each behavior its first policy (teams of one brain share theirs), as the first phase
        asks; the steps to hold per brain that learns (empty: the run starts without the quick start)."""
        options = self.options
        phase = options.phases[0] if options.phases else None
        record = options.results_store.record_steps or options.checkpoint_settings.record_demo is not None
        brains = sorted({brain_name(b) for b in self.specs})
        messages: dict[str, PolicyMessage] = {}
        targets: dict[str, int] = {}
        for behavior, spec in sorted(self.specs.items()):
            brain, settings = brain_name(behavior), options.phase_settings_for(behavior, phase)
            problem = behavior_problem(spec, settings)
            if problem is not None:
                logger.debug("Quick start: not for this run (%s: %s)", behavior, problem)
                return {}
            if brain not in self.weights:
                self.weights[brain] = initial_actor(spec, settings.network_settings, self.seed * 7907 + brains.index(brain))
            played = phase.plays(brain) if phase is not None else None
            learns = phase is None or phase.learns(brain)
            snapshot = (
                fixed_policy_snapshot(played.name, played.params, brain, spec, 0) if played is not None
                else PolicySnapshot(0, self.weights[brain])
            )
            messages[behavior] = policy_message(snapshot, settings, phase, learns or record)
            if learns:
                steps = phase.max_steps if phase is not None and phase.max_steps is not None else settings.max_steps
                targets[brain] = min(settings.hyperparameters.buffer_size, steps)  # type: ignore[attr-defined]
        for behavior, message in messages.items():
            self.env_manager.set_policy(behavior, message)
        return targets

    def _step(self, targets: dict[str, int]) -> None:
        held = dict.fromkeys(targets, 0)
        while not self._halting.is_set() and any(held[b] < targets[b] for b in targets):
            batches = self.env_manager.step()
            if batches and self.first_step_time is None:
                self.first_step_time = time.time()
            self.batches.extend(batches)
            for batch in batches:
                for traj in batch.trajectories:
                    brain = brain_name(traj.behavior)
                    held[brain] = held.get(brain, 0) + len(traj)
                if batch.new_specs:  # a behavior with no policy yet: the trainers take it from here
                    return

    def halt(self) -> None:
        """Stop stepping and wait for the thread (the env manager is the caller's again)."""
        self._halting.set()
        if self.is_alive():
            self.join(HALT_TIMEOUT_S)
        if self.is_alive():
            raise RuntimeError(f"the quick start did not stop within {HALT_TIMEOUT_S:.0f} s")

    def take(self) -> dict[str, BehaviorSpec]:
        """Halt, then the environments' specs; what the thread raised is raised here."""
        self.halt()
        if self._error is not None:
            raise self._error
        return dict(self.specs)

    def held(self) -> list[StepBatch]:
        """The batches stepped, once (in the order they arrived)."""
        batches, self.batches = self.batches, []
        return batches
