"""Our environment workers as a gymnasium vector environment: ``make_vec_env(config_or_env, num_envs=...)``.

The workers are arl-learn's (worker processes, the in-process manager or Ray actors, as
``env_settings`` chooses), with their deadlines and restart quotas; a user steps them with their
own policy and learner. Each agent of the chosen behavior in each worker is one sub-environment,
in worker order, then agent-id order: ``num_envs`` workers of a gymnasium task give ``num_envs``
sub-environments, ``num_areas`` copies per worker multiply them.

Spaces: one observation is a ``Box``; several, a ``Tuple`` of them. Continuous actions are a
``Box(-1, 1)``, one discrete branch a ``Discrete``, several a ``MultiDiscrete``, both a ``Tuple``
(continuous, discrete). Action masks, where the environment gives them, are in
``infos["action_mask"]`` (True = allowed).

Episodes reset themselves in the step that ends them (gymnasium's same-step autoreset, as
ML-Agents' environments do): ``step`` returns the next episode's first observation, with the last
one of the episode that ended in ``infos["final_obs"]`` (masked by ``infos["_final_obs"]``). A
worker that fails is restarted within its quota; its sub-environments come back reset, with
``truncated`` set and ``infos["restarted"]``. ``reset(seed=...)``: each worker's environment is
seeded when it starts (``env_settings.seed``, or ``seed=`` here), so a reset seed is not used.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Optional, Union

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import batch_space
from mlagents_envs.base_env import ActionTuple, BehaviorSpec, DecisionSteps, TerminalSteps

from ml_arl.acting.muscle import masks_allowed
from ml_arl.acting.worker_protocol import ActCommand, ObservationReply, WorkerReply
from ml_arl.core.behavior_id import choose_behavior
from ml_arl.envs.backends.env_manager import EnvManager


def observation_space(spec: BehaviorSpec) -> spaces.Space[Any]:
    boxes = [spaces.Box(-np.inf, np.inf, tuple(o.shape), np.float32) for o in spec.observation_specs]
    return boxes[0] if len(boxes) == 1 else spaces.Tuple(boxes)


def action_space(spec: BehaviorSpec) -> spaces.Space[Any]:
    a = spec.action_spec
    cont = spaces.Box(-1.0, 1.0, (a.continuous_size,), np.float32) if a.continuous_size else None
    disc: Optional[spaces.Space[Any]] = None
    if a.discrete_size == 1:
        disc = spaces.Discrete(a.discrete_branches[0])
    elif a.discrete_size > 1:
        disc = spaces.MultiDiscrete(list(a.discrete_branches))
    if cont is not None and disc is not None:
        return spaces.Tuple((cont, disc))
    if cont is not None:
        return cont
    if disc is None:
        raise ValueError("the behavior has no actions")
    return disc


# gymnasium >= 1.1 names the modes (its vector wrappers read this one); 1.0, which palaestrai 3.5.18
# pins, has no names: a plain one then
_MODES: Any = getattr(gymnasium.vector, "AutoresetMode", None)
SAME_STEP: Any = _MODES.SAME_STEP if _MODES is not None else "SameStep"


class ArlVectorEnv(gymnasium.vector.VectorEnv):  # type: ignore[misc]
    metadata = {"autoreset_mode": SAME_STEP}

    def __init__(self, manager: EnvManager, behavior: Optional[str] = None):
        self.manager = manager
        specs = manager.start()
        try:
            self.behavior = behavior = choose_behavior(specs, behavior, "the environment")
            self.spec_ = specs[behavior]
            self.single_observation_space = observation_space(self.spec_)
            self.single_action_space = action_space(self.spec_)
            self.workers = list(range(manager.num_workers))
            first = self._observe(self.workers)
            self.slots: list[tuple[int, int]] = []  # (worker, agent id) of each sub-environment
            for wid in self.workers:
                decision, _ = first[wid]
                self.slots += [(wid, int(agent)) for agent in sorted(decision.agent_id.tolist())]
            if not self.slots:
                raise ValueError(f"no agent of {behavior} asks for a decision after a reset")
            self._slot_of = {key: slot for slot, key in enumerate(self.slots)}
            self._worker_slots: dict[int, list[tuple[int, int]]] = {wid: [] for wid in self.workers}  # (slot, agent)
            for slot, (wid, agent) in enumerate(self.slots):
                self._worker_slots[wid].append((slot, agent))
        except BaseException:
            manager.close()
            raise
        self.num_envs = len(self.slots)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._last = first
        self.closed = False

    # ------------------------------------------------------------------ the workers
    def _observe(self, workers: list[int]) -> dict[int, tuple[DecisionSteps, TerminalSteps]]:
        replies = self._exchange({wid: ActCommand() for wid in workers})
        missing = [wid for wid, steps in replies.items() if steps is None]
        if missing:  # restarted while being asked: ask the new one
            replies.update({wid: steps for wid, steps in self._observe(missing).items()})
        return {wid: steps for wid, steps in replies.items() if steps is not None}

    def _exchange(self, commands: dict[int, ActCommand]) -> dict[int, Optional[tuple[DecisionSteps, TerminalSteps]]]:
        replies: Mapping[int, Optional[WorkerReply]] = self.manager.exchange(dict(commands))
        out: dict[int, Optional[tuple[DecisionSteps, TerminalSteps]]] = {}
        for wid, reply in replies.items():
            if reply is None:
                out[wid] = None
            else:
                assert isinstance(reply, ObservationReply), reply
                out[wid] = reply.steps[self.behavior]
        return out

    # ------------------------------------------------------------------ gymnasium
    def reset(self, *, seed: Optional[Union[int, list[int]]] = None, options: Optional[dict[str, Any]] = None
              ) -> tuple[Any, dict[str, Any]]:
        self.manager.reset()
        self._last = self._observe(self.workers)
        obs, mask = self._gather(self._last)
        return obs, self._infos(mask)

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        per_worker = self._split(actions)
        replies = self._exchange({wid: ActCommand({self.behavior: a}) for wid, a in per_worker.items()})
        restarted = [wid for wid, steps in replies.items() if steps is None]
        fresh = self._observe(restarted) if restarted else {}
        n = self.num_envs
        rewards = np.zeros(n, np.float32)
        terminated = np.zeros(n, bool)
        truncated = np.zeros(n, bool)
        final_obs = np.full(n, None, object)
        has_final = np.zeros(n, bool)
        was_restarted = np.zeros(n, bool)
        current: dict[int, tuple[DecisionSteps, TerminalSteps]] = {}
        for wid in self.workers:
            steps = replies.get(wid)
            if steps is None:
                current[wid] = fresh[wid]
                continue
            current[wid] = steps
            _, terminal = steps
            if not len(terminal):
                continue
            ended = {int(a): i for i, a in enumerate(terminal.agent_id.tolist())}
            for slot, agent in self._worker_slots[wid]:
                i = ended.get(agent)
                if i is None:
                    continue
                rewards[slot] = terminal.reward[i] + terminal.group_reward[i]
                truncated[slot] = bool(terminal.interrupted[i])
                terminated[slot] = not truncated[slot]
                final_obs[slot] = self._row([o[i] for o in terminal.obs])
                has_final[slot] = True
        obs, mask = self._gather(current, rewards, skip_ended=has_final)
        for slot, (wid, _) in enumerate(self.slots):
            if wid in restarted:
                truncated[slot], was_restarted[slot] = True, True
        self._last = current
        infos = self._infos(mask)
        if has_final.any():
            infos.update({"final_obs": final_obs, "_final_obs": has_final})
        if was_restarted.any():
            infos.update({"restarted": was_restarted, "_restarted": was_restarted})
        return obs, rewards, terminated, truncated, infos

    def close_extras(self, **kwargs: Any) -> None:
        if not self.closed:
            self.closed = True
            self.manager.close()

    # ------------------------------------------------------------------ arrays
    def _row(self, parts: list[np.ndarray]) -> Any:
        return parts[0] if len(parts) == 1 else tuple(parts)

    def _gather(self, steps: dict[int, tuple[DecisionSteps, TerminalSteps]], rewards: Optional[np.ndarray] = None,
                skip_ended: Optional[np.ndarray] = None) -> tuple[Any, Optional[np.ndarray]]:
        """Each sub-environment's observation (and action mask) from its worker's decision steps;
        the reward of one whose episode goes on is added to ``rewards``."""
        n_obs = len(self.spec_.observation_specs)
        masks: Optional[np.ndarray] = None
        branches = tuple(self.spec_.action_spec.discrete_branches)
        columns: list[list[np.ndarray]] = [[] for _ in range(n_obs)]
        for wid in self.workers:
            decision, _ = steps[wid]
            rows = {int(a): i for i, a in enumerate(decision.agent_id.tolist())}
            slots = self._worker_slots[wid]
            missing = [agent for _, agent in slots if agent not in rows]
            if missing:
                raise RuntimeError(f"worker {wid}: agent {missing[0]} of {self.behavior} asked for no decision; make_vec_env "
                                   "needs every agent to decide every step (gymnasium's contract)")
            picked = np.fromiter((rows[agent] for _, agent in slots), np.intp, len(slots))
            for k in range(n_obs):
                columns[k].append(decision.obs[k][picked])
            if rewards is not None:
                gained = (decision.reward[picked] + decision.group_reward[picked]).astype(np.float32)
                for (slot, _), r in zip(slots, gained):
                    if skip_ended is None or not skip_ended[slot]:
                        rewards[slot] += r
            if branches and decision.action_mask is not None:
                allowed = masks_allowed(decision.action_mask, len(decision), branches)
                assert allowed is not None
                if masks is None:
                    masks = np.ones((self.num_envs, sum(branches)), bool)
                masks[[slot for slot, _ in slots]] = allowed[picked]
        # the workers' slots are consecutive, in worker order: concatenating gives slot order
        stacked = [np.concatenate(c).astype(np.float32, copy=False) for c in columns]
        obs = stacked[0] if n_obs == 1 else tuple(stacked)
        return obs, masks

    def _infos(self, mask: Optional[np.ndarray]) -> dict[str, Any]:
        if mask is None:
            return {}
        return {"action_mask": mask, "_action_mask": np.ones(self.num_envs, bool)}

    def _split(self, actions: Any) -> dict[int, ActionTuple]:
        """The batch of actions as each worker's ActionTuple, rows in the order its agents decide."""
        a = self.spec_.action_spec
        if a.continuous_size and a.discrete_size:
            cont, disc = (np.asarray(x) for x in actions)
        elif a.continuous_size:
            cont, disc = np.asarray(actions), np.zeros((self.num_envs, 0))
        else:
            cont, disc = np.zeros((self.num_envs, 0)), np.asarray(actions)
        cont = cont.reshape(self.num_envs, a.continuous_size).astype(np.float32)
        disc = disc.reshape(self.num_envs, a.discrete_size).astype(np.int32)
        slot_of = self._slot_of
        out: dict[int, ActionTuple] = {}
        for wid in self.workers:
            decision, _ = self._last[wid]
            order = [slot_of[(wid, int(agent))] for agent in decision.agent_id.tolist() if (wid, int(agent)) in slot_of]
            if len(order) != len(decision):
                raise RuntimeError(f"worker {wid}: agents of {self.behavior} changed ({decision.agent_id.tolist()}); "
                                   "make_vec_env needs a fixed set of agents")
            out[wid] = ActionTuple(continuous=cont[order], discrete=disc[order])
        return out


def make_vec_env(config_or_env: Any = None, num_envs: Optional[int] = None, behavior: Optional[str] = None,
                 **flags: Any) -> ArlVectorEnv:
    """A gymnasium vector environment over arl-learn's workers. ``config_or_env``: a config (YAML
    path, dict or RunOptions: its env_settings are used) or anything ``--env`` takes
    (``gymnasium:CartPole-v1``, ``builtin:Reach``, ``pkg.module:make_env``, a Unity build);
    ``num_envs``: worker count; ``flags``: arl-learn's flags by long name (``num_areas=4``,
    ``seed=1``, ``env_args=[...]``, ``timeout_wait=60``)."""
    from ml_arl.api.train import options_from, overrides_from
    from ml_arl.envs.backends.factory import create_env_manager
    from ml_arl.results.run_folder import resolve_seed

    config = config_or_env
    if isinstance(config, (str, os.PathLike)) and not str(config).endswith((".yaml", ".yml")):
        flags["env"] = os.fspath(config)
        config = None
    if num_envs is not None:
        flags["num_envs"] = num_envs
    options = options_from(config, overrides_from(flags))
    manager = create_env_manager(options, resolve_seed(options))
    return ArlVectorEnv(manager, behavior)
