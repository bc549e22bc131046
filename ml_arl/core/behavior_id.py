"""Behavior ids as Unity sends them, ``<brain name>?team=<n>`` (ML-Agents' BehaviorIdentifiers): the
config's ``behaviors`` section is keyed by the brain name; self-play tells teams apart by the query."""

from __future__ import annotations

from collections.abc import Iterable


def brain_name(behavior_id: str) -> str:
    """"Name?team=1" -> "Name"; "Name" -> "Name"."""
    return behavior_id.split("?", 1)[0]


def team_of(behavior_id: str) -> str:
    """"Name?team=1" -> "1"; "Name" -> "Name" (a behavior without a team is its own team)."""
    name, _, query = behavior_id.partition("?")
    for part in query.split("&"):
        key, _, value = part.partition("=")
        if key == "team" and value:
            return value
    return name


def choose_behavior(names: Iterable[str], behavior: str | None, where: str) -> str:
    """``behavior`` if ``where`` (e.g. "this run", "the environment") has it; with none asked for, the
    only one there is; else a ValueError in one line naming what there is."""
    names = list(names)
    listed = ", ".join(names) or "(none yet)"
    if behavior is None:
        if len(names) != 1:
            raise ValueError(f"{where} has behaviors {listed}; name one with behavior=")
        return names[0]
    if behavior not in names:
        raise ValueError(f"{where} has no behavior {behavior!r}; it has {listed}")
    return behavior
