"""A phase with a ``matrix`` (ours): every pairing of the players it lists, each a test phase of
its own, for a resilience matrix (arl-report prints it).

    phases:
      - name: matrix
        mode: test
        episodes: 32
        matrix:
          Defender: [learned, volt_var_droop, no_op]
          Attacker: [learned, greedy, random, none]
        best_response:
          Attacker: {max_steps: 80000}

becomes the test phases ``matrix.learned-vs-learned``, ``matrix.learned-vs-greedy``, ... (the
first behavior's players vary slowest): ``learned`` is the behavior's own brain, any other name a
fixed policy that plays it (``play``; ``none`` is ``no_op``: no action). Each cell phase keeps
the rest of the matrix phase's settings and records its ``group`` (the matrix phase's name) and
``cell`` (behavior -> player), which arl-report reads back from configuration.yaml.

``best_response`` adds, for each behavior it names and each pairing of the other behaviors'
players, a best response: a train phase ``<matrix>.br-<behavior>-vs-<players>.train`` in which a
fresh brain of that behavior (its first weights, optimizer and step count: ``load: {initial:
true}``) learns ``max_steps`` steps against those players alone (a learned player acting with
its most likely action when the matrix is deterministic, as in the test), then a test phase
``<matrix>.br-<behavior>-vs-<players>`` like the matrix's cells, whose cell gives the behavior the
player ``best_response``. The same budget for every pairing: each player is measured against an
opponent trained as long against it. A phase after the matrix takes the behavior's brain back from
the last phase that trained it before the best responses (unless it has a ``load`` of its own).
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

LEARNED = "learned"
BEST_RESPONSE = "best_response"


def deep_merged(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        out[key] = deep_merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _tag(name: str) -> str:
    return name.replace(":", "_").replace(".", "_")


def _learns(phase: dict[str, Any], behavior: str) -> bool:
    """Whether a raw phase trains ``behavior`` (PhaseSettings.learns, before validation)."""
    learn, act = phase.get("learn"), phase.get("act")
    return (phase.get("mode", "train") == "train" and (learn is None or behavior in learn)
            and behavior not in (phase.get("play") or {}) and (act is None or behavior in act))


def _budgets(where: str, best: Any, matrix: dict[str, Any], problems: list[str]) -> dict[str, int]:
    fix = f"{where}: expected a mapping of a matrix behavior -> {{max_steps: N}} (the steps each best response trains)"
    if not isinstance(best, dict) or not best:
        problems.append(fix)
        return {}
    out: dict[str, int] = {}
    for behavior, budget in best.items():
        steps = budget.get("max_steps") if isinstance(budget, dict) and set(budget) == {"max_steps"} else None
        if behavior not in matrix:
            problems.append(f"{where}.{behavior}: not a behavior of the matrix ({', '.join(matrix)})")
        elif len(matrix) < 2:
            problems.append(f"{where}.{behavior}: a best response needs another behavior in the matrix to respond to")
        elif not isinstance(steps, int) or isinstance(steps, bool) or steps <= 0:
            problems.append(fix)
        else:
            out[str(behavior)] = steps
    return out


def _best_responses(name: str, phase: dict[str, Any], matrix: dict[str, Any], budgets: dict[str, int],
                    sources: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The train and test phases of every best response of one matrix phase. ``sources``: where each
    responding behavior's own brain comes back from (the responses to another behavior's learned
    player face that player, not the last response trained)."""
    out: list[dict[str, Any]] = []
    shared = {k: copy.deepcopy(v) for k, v in phase.items() if k in ("environment_parameters", "behaviors", "act")}
    for k, (behavior, steps) in enumerate(budgets.items()):
        others = [b for b in matrix if b != behavior]
        back = {b: copy.deepcopy(sources[b]) for b in list(budgets)[:k]}  # the brains the earlier responses replaced
        for players in itertools.product(*(matrix[o] for o in others)):
            against = dict(zip(others, players))
            play = {o: {"name": "no_op" if p == "none" else p} for o, p in against.items() if p != LEARNED}
            stem = f"{name}.br-{_tag(behavior)}-vs-{'-'.join(_tag(p) for p in players)}"
            train = {**copy.deepcopy(shared), "name": f"{stem}.train", "mode": "train", "learn": [behavior],
                     "max_steps": steps, "play": copy.deepcopy(play), "load": {**back, behavior: {"initial": True}}}
            if phase.get("deterministic"):  # the learned players it responds to act as they will in its test
                steady = {o: {"network_settings": {"deterministic": True}} for o, p in against.items() if p == LEARNED}
                train["behaviors"] = deep_merged(train.get("behaviors") or {}, steady)
            out.append(train)
            back = {}
            test = {k: copy.deepcopy(v) for k, v in phase.items() if k not in ("matrix", "best_response")}
            test.update({"name": stem, "play": play, "group": name,
                         "cell": {b: BEST_RESPONSE if b == behavior else against[b] for b in matrix}})
            out.append(test)
    return out


def expand_matrices(data: dict[str, Any], problems: list[str]) -> None:
    """Replace each raw phase with a ``matrix`` by its cell phases and best responses (in place on
    ``data``, a copy)."""
    phases = data.get("phases")
    if not isinstance(phases, list):
        return
    out: list[Any] = []
    restore: dict[str, dict[str, Any]] = {}  # behavior -> the load that gives its brain back after best responses
    responses: set[str] = set()  # the best responses' train phases (never a brain to give back)

    def emit(entry: Any) -> None:
        """The next phase: the first after a matrix's best responses takes the brains back."""
        if isinstance(entry, dict) and restore:
            load = entry.setdefault("load", {})
            if isinstance(load, dict):
                for behavior, source in restore.items():
                    load.setdefault(behavior, source)
        restore.clear()
        out.append(entry)

    for phase in phases:
        if not isinstance(phase, dict) or "matrix" not in phase:
            emit(phase)
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
        if any(BEST_RESPONSE in players for players in matrix.values()):
            problems.append(f"{where}: '{BEST_RESPONSE}' is the best responses' player; give them with best_response")
            continue
        budgets = _budgets(f"phases.{name}.best_response", phase["best_response"], matrix, problems) \
            if "best_response" in phase else {}
        for players in itertools.product(*matrix.values()):
            cell = dict(zip(matrix, players))
            entry = {k: copy.deepcopy(v) for k, v in phase.items() if k not in ("matrix", "best_response")}
            entry["name"] = f"{name}.{'-vs-'.join(_tag(p) for p in players)}"
            entry["play"] = {b: {"name": "no_op" if p == "none" else p} for b, p in cell.items() if p != LEARNED}
            entry["group"] = name
            entry["cell"] = cell
            emit(entry)
        sources = {}
        for behavior in budgets:
            trained = [p for p in out if isinstance(p, dict) and p.get("name") not in responses and _learns(p, behavior)]
            sources[behavior] = {"phase": trained[-1]["name"]} if trained else {"initial": True}
        blocks = _best_responses(name, phase, matrix, budgets, sources)
        responses.update(p["name"] for p in blocks if p["mode"] == "train")
        out.extend(blocks)
        restore.update(sources)
    data["phases"] = out
