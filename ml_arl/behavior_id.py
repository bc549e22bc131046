"""Behavior ids as Unity sends them, ``<brain name>?team=<n>`` (ML-Agents' BehaviorIdentifiers): the
config's ``behaviors`` section is keyed by the brain name; self-play tells teams apart by the query."""

from __future__ import annotations


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
