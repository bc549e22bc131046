"""What a results store holds for one run, as the readers see it (arl-report, arl-study, the plots):
its episodes grouped by (phase, behavior), in the order they were recorded, and its phases.

Both stores fill it: ``ml_arl.results.sqlite_store`` (one file per run) and
``ml_arl.results.server_store`` (one PostgreSQL database for many runs).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from ml_arl.core.exceptions import ArlError

# the columns a reader selects, in this order, from the episodes table
EPISODE_COLUMNS = ("run", "phase", "mode", "behavior", "length", "env_reward", "objective", "elo", "wall_time")
PHASE_COLUMNS = ("phase", "idx", "mode", "state")


class StoreError(ArlError):
    """The results database could not be opened or written (disk full, permissions, a server down, ...)."""

    exit_code = 1


class StoreReadError(StoreError):
    """The results database is missing, empty or not an ml_arl results database."""

    exit_code = 2


@dataclass
class EpisodeSeries:
    """The episodes of one behavior in one phase, in the order they were recorded."""

    phase: str
    mode: str
    behavior: str
    length: list[int] = field(default_factory=list)
    env_reward: list[float] = field(default_factory=list)
    objective: list[float] = field(default_factory=list)
    elo: list[Optional[float]] = field(default_factory=list)
    wall_time: list[float] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.length)

    @property
    def final_elo(self) -> Optional[float]:
        return next((e for e in reversed(self.elo) if e is not None), None)


@dataclass
class PhaseInfo:
    phase: str
    index: Optional[int]  # None: the phase has episodes but no row in ``phases``
    mode: str
    state: str


@dataclass
class RunResults:
    path: str  # where it was read: a results.sqlite, or a server's URL (password hidden) and the run
    runs: list[str]
    phases: list[PhaseInfo]  # recorded order (idx), then order of first appearance
    series: list[EpisodeSeries]  # phase order, then behaviors in order of first appearance

    @property
    def behaviors(self) -> list[str]:
        return list(dict.fromkeys(s.behavior for s in self.series))

    @property
    def episode_count(self) -> int:
        return sum(len(s) for s in self.series)


def group_episodes(path: str, phase_rows: Iterable[Sequence[Any]], rows: Sequence[Sequence[Any]]) -> RunResults:
    """RunResults from the rows of ``phases`` (PHASE_COLUMNS, by idx) and of ``episodes``
    (EPISODE_COLUMNS, in the order they were written)."""
    recorded = {p: PhaseInfo(p, idx, mode, state) for p, idx, mode, state in phase_rows}
    groups: dict[tuple[str, str], EpisodeSeries] = {}
    first_seen: dict[str, int] = {}
    runs: dict[str, None] = {}
    for i, (run, phase, mode, behavior, length, env_reward, objective, elo, wall_time) in enumerate(rows):
        runs[run] = None
        first_seen.setdefault(phase, i)
        series = groups.get((phase, behavior))
        if series is None:
            mode = recorded[phase].mode if phase in recorded else mode
            series = groups[(phase, behavior)] = EpisodeSeries(phase, mode, behavior)
        series.length.append(length)
        series.env_reward.append(env_reward)
        series.objective.append(objective)
        series.elo.append(elo)
        series.wall_time.append(wall_time)

    inf = len(rows) + len(recorded) + 1

    def order(phase: str) -> tuple[int, int]:
        info = recorded.get(phase)
        index = info.index if info is not None and info.index is not None else inf
        return (index, first_seen.get(phase, inf))

    phase_names = sorted(set(recorded) | set(first_seen), key=order)
    phases = [recorded.get(p) or PhaseInfo(p, None, _phase_mode(groups, p), "") for p in phase_names]
    rank = {p: i for i, p in enumerate(phase_names)}
    series_list = sorted(groups.values(), key=lambda s: rank[s.phase])  # stable: behaviors keep first appearance
    return RunResults(path=path, runs=list(runs), phases=phases, series=series_list)


def _phase_mode(groups: dict[tuple[str, str], EpisodeSeries], phase: str) -> str:
    return next((s.mode for (p, _), s in groups.items() if p == phase), "")
