"""A phase with a ``matrix`` (ours): every pairing of the players it lists, each a test phase of
its own, for a resilience matrix (arl-report prints it).

    phases:
      - name: matrix
        mode: test
        episodes: 32
        matrix:
          Defender: [learned, volt_var_droop, no_op]
          Attacker: [learned, greedy, random, none]

becomes the test phases ``matrix.learned-vs-learned``, ``matrix.learned-vs-greedy``, ... (the
first behavior's players vary slowest): ``learned`` is the behavior's own brain, any other name a
fixed policy that plays it (``play``; ``none`` is ``no_op``: no action). Each cell phase keeps
the rest of the matrix phase's settings and records its ``group`` (the matrix phase's name) and
``cell`` (behavior -> player), which arl-report reads back from configuration.yaml.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

LEARNED = "learned"


def expand_matrices(data: dict[str, Any], problems: list[str]) -> None:
    """Replace each raw phase with a ``matrix`` by its cell phases (in place on ``data``, a copy)."""
    phases = data.get("phases")
    if not isinstance(phases, list):
        return
    out: list[Any] = []
    for phase in phases:
        if not isinstance(phase, dict) or "matrix" not in phase:
            out.append(phase)
            continue
        name = str(phase.get("name", "matrix"))
        where = f"phases.{name}.matrix"
        matrix = phase["matrix"]
        if (not isinstance(matrix, dict) or not matrix
                or not all(isinstance(v, list) and v and all(isinstance(p, str) and p for p in v) for v in matrix.values())):
            problems.append(f"{where}: expected a mapping of behavior -> a list of players (learned or a policy name)")
            continue
        if phase.get("mode", "train") != "test":
            problems.append(f"{where}: a matrix plays its pairings in test mode; give the phase mode: test")
            continue
        if "play" in phase:
            problems.append(f"{where}: a matrix sets each pairing's players itself; remove the phase's play")
            continue
        for players in itertools.product(*matrix.values()):
            cell = dict(zip(matrix, players))
            entry = {k: copy.deepcopy(v) for k, v in phase.items() if k != "matrix"}
            entry["name"] = f"{name}.{'-vs-'.join(p.replace(':', '_').replace('.', '_') for p in players)}"
            entry["play"] = {b: {"name": "no_op" if p == "none" else p} for b, p in cell.items() if p != LEARNED}
            entry["group"] = name
            entry["cell"] = cell
            out.append(entry)
    data["phases"] = out
