"""The Operator's discrete action set on a Grid2Op grid, and which of its actions are allowed now.

The order (docs/grid2op.md): 0 do nothing; 1..n_line reconnect line i; then the unitary ``set_bus``
topologies of the substations with at most ``topology_max_elements`` elements (each substation's
reference topology, all on bus 1, added when missing); then, with ``redispatch``, +step and -step on
each redispatchable generator.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np


def _substation_targets(env: Any, sub: int) -> list[np.ndarray]:
    """The distinct unitary bus assignments grid2op lists for one substation, the reference first."""
    space = env.action_space
    found = space.get_all_unitary_topologies_set(space, sub_id=sub, add_alone_line=False)
    start, stop = int(env.sub_info[:sub].sum()), int(env.sub_info[: sub + 1].sum())
    targets: list[np.ndarray] = []
    for act in found:
        buses = np.asarray(act.set_bus[start:stop]).astype(np.int64)
        if not any(np.array_equal(buses, t) for t in targets):
            targets.append(buses)
    ref = np.ones(int(env.sub_info[sub]), np.int64)
    if targets and not any(np.array_equal(ref, t) for t in targets):
        targets.insert(0, ref)
    return targets


class OperatorActions:
    """The grid2op actions behind the Operator's branch, their labels, and the mask over them."""

    def __init__(self, env: Any, options: dict[str, Any]):
        space = env.action_space
        self.n_line = int(env.n_line)
        self.actions: list[Any] = [space({})]
        self.labels = ["do nothing"]
        for line in range(self.n_line):
            self.actions.append(space({"set_line_status": [(line, 1)]}))
            self.labels.append(f"reconnect line {env.name_line[line]}")
        topo_sub: list[int] = []
        topo_target: list[np.ndarray] = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for sub in range(int(env.n_sub) if space.supports_type("set_bus") else 0):
                if env.sub_info[sub] > options["topology_max_elements"]:
                    continue
                for buses in _substation_targets(env, sub):
                    self.actions.append(space({"set_bus": {"substations_id": [(sub, buses.tolist())]}}))
                    self.labels.append(f"substation {sub} buses {''.join(map(str, buses))}")
                    topo_sub.append(sub)
                    topo_target.append(buses)
        self.topo_sub = np.asarray(topo_sub, np.int64)
        self.topo_start = 1 + self.n_line
        self.redispatch_start = self.topo_start + len(topo_sub)
        if options["redispatch"] and space.supports_type("redispatch"):
            self._add_redispatch(env, options["redispatch_step"])
        self.sub_start = np.concatenate([[0], np.cumsum(env.sub_info)]).astype(np.int64)
        # each topology action's substation (as a mask over topo_vect) and its target buses there
        self.topo_at = np.zeros((len(topo_sub), int(env.dim_topo)), bool)
        self.topo_full = np.zeros((len(topo_sub), int(env.dim_topo)), np.int64)
        for j, (sub, buses) in enumerate(zip(topo_sub, topo_target)):
            start, stop = self.sub_start[sub], self.sub_start[sub + 1]
            self.topo_at[j, start:stop] = True
            self.topo_full[j, start:stop] = buses

    def _add_redispatch(self, env: Any, step: float) -> None:
        space = env.action_space
        for gen in np.flatnonzero(env.gen_redispatchable):
            up = float(env.gen_max_ramp_up[gen]) * step
            down = float(env.gen_max_ramp_down[gen]) * step
            if up > 0:
                self.actions.append(space({"redispatch": [(int(gen), up)]}))
                self.labels.append(f"redispatch generator {env.name_gen[gen]} +{up:g} MW")
            if down > 0:
                self.actions.append(space({"redispatch": [(int(gen), -down)]}))
                self.labels.append(f"redispatch generator {env.name_gen[gen]} -{down:g} MW")

    def __len__(self) -> int:
        return len(self.actions)

    def mask(self, obs: Any) -> np.ndarray:
        """The forbidden actions under ``obs`` (True = not allowed): reconnecting a connected line or one
        in cooldown; a topology at a substation in cooldown, with a disconnected element, or already in place."""
        forbidden = np.zeros(len(self.actions), bool)
        status = np.asarray(obs.line_status, bool)
        line_cd = np.asarray(obs.time_before_cooldown_line) > 0
        forbidden[1: 1 + self.n_line] = status | line_cd
        if len(self.topo_sub):
            sub_cd = np.asarray(obs.time_before_cooldown_sub) > 0
            topo = np.asarray(obs.topo_vect)[None, :]
            same = ((topo == self.topo_full) | ~self.topo_at).all(axis=1)
            cut = ((topo < 1) & self.topo_at).any(axis=1)
            forbidden[self.topo_start: self.redispatch_start] = sub_cd[self.topo_sub] | cut | same
        return forbidden
