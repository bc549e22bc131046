"""The per-move rewards of each agent, game by game, from a palaestrAI 3.5.18 store (SQLite), standard library only.

Written for bench/peers/palaestrai/tictactoe_harl.yml (palaestrai_environments' TicTacToe, two players under
TakingTurns); the same reading should hold under Vanilla (every agent acts each step), checked on TakingTurns only.

    moves(store) -> {phase: {agent: [[reward of move 1, reward of move 2, ...], ...one list per game]}}
    python bench/peers/palaestrai_store_moves.py STORE.db        # prints a summary per phase and agent

What each number is: the reward the environment gave for one move of that agent, i.e. for TicTacToe
1 (a valid move that neither wins nor fills the board), 10 (a winning move), 0 (the move that fills the
board without a win: a draw), -100 (a move on a taken tile: nothing is placed and the turn passes on) or
-1000 (the invalid move that is the fifth invalid move in a row, counting both players' moves: it ends the game).
A player's loss is not in its own list: the winner's move earns 10 and the loser gets no reward for it.

Where it comes from (palaestrAI 3.5.18's schema):

* ``muscle_actions``: one row per ``MuscleUpdateRequest`` a rollout worker (muscle) sent to its brain.
  Under TakingTurns a muscle is asked to act only on its own turn, and that request carries the reward of
  the agent's own previous move (the simulation controller keeps the last rewards per agent and updates
  them only for the agent that just moved). The rollout worker stores that reward together with the
  action it belongs to: a row's ``actuator_setpoints`` (the move, a jsonpickled ``ActuatorInformation``
  list) and its ``rewards`` (a jsonpickled ``RewardInformation`` list; the number is
  ``[...]["py/state"]["value"]``) are the same move and that move's own reward, not the other player's
  move after it. ``simtimes`` holds the environment's tick before the move, ``sensor_readings`` the board
  the agent saw. The last move of each player in a game is stored by the terminal update that every agent
  gets when the game ends: that row has ``done`` = 1 (both players' last rows have it). The first request
  of a game has nothing to report and is not stored, so a game's rows are exactly the agent's moves.
  Rows without ``actuator_setpoints`` or ``rewards`` (none are expected) are left out.
  Not used: ``applied_actuator_setpoints`` (in 3.5.18 it does not hold the move that was applied: in the
  tic-tac-toe runs, on ~83% of the rows, it held the next move of the game, the other player's),
  ``objective`` (the objective's value, here DummyObjective's copy of the reward), and ``world_states``
  (one row per environment step, ``setpoints`` and ``state_dump``, but no rewards; on up to about 1 step in 500 it
  holds the next step's move or board).
* ``muscle_actions.agent_id`` -> ``agents`` (``name``: the agent's name in the run file, one row per agent and
  phase) -> ``agents.experiment_run_phase_id`` -> ``experiment_run_phases`` (``uid``: the phase's name in the
  run file, e.g. ``phase_train``; ``number``: its position in the schedule). The keys of the result are the
  phase ``uid`` values and the agent names. A store with more than one run instance
  (``experiment_run_instances``) is read for its last one only (a warning is logged).

How games are split and ordered: a game is one (agent, ``rollout_worker_uid``, ``episode``) group of rows:
``rollout_worker_uid`` names the agent's muscle in one worker (one per worker and agent), ``episode`` is that
worker's episode counter. Within a game the moves are in ``decision_index`` order (the muscle's count of its
decisions in the episode; ``id`` breaks ties). Games are first listed per worker in episode order, then the
workers' lists are merged by each game's end time. A game's end time is the ``walltime`` of the latest of
its ``done`` rows over both agents (the two come from the same terminal update, a few to ~75 ms apart; walltime
is the rollout worker's ``datetime.now()`` when it sent the request). The store does not link an agent's muscle
to the other agent's muscle in the same worker (nor to ``environments.worker_uid``), so muscles are matched
by their done rows: each muscle of the second agent goes with the first agent's muscle whose done rows are
nearest on average over their common episodes. All agents' lists are thus in the same game order (ties by
worker, then episode). A game without a ``done`` row (a run that was stopped) is left out (a warning is
logged).
"""

from __future__ import annotations

import json
import logging
import sqlite3
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

LOG = logging.getLogger(__name__)


def _numbers(value: Any) -> list[float]:
    """The numbers in a jsonpickled value: a number, a list of numbers, or a dict with py/state or value."""
    if isinstance(value, bool):
        return [float(value)]
    if isinstance(value, (int, float)):
        return [float(value)]
    if isinstance(value, list):
        return [x for item in value for x in _numbers(item)]
    if isinstance(value, dict):
        for key in ("py/state", "value", "py/newargs", "py/reduce"):
            if key in value:
                return _numbers(value[key])
    raise ValueError(f"no number in stored reward value {value!r}")


def _reward(rewards_json: str, row_id: int) -> float:
    """The reward of one muscle_actions row: the value of its RewardInformation (summed if there are several)."""
    rewards = json.loads(rewards_json)
    values = [x for info in rewards for x in _numbers(info.get("py/state", info)["value"])]
    if len(values) != 1:
        LOG.warning("muscle_actions row %d holds %d reward values %s; their sum is taken", row_id, len(values), values)
    return float(sum(values))


def _time(walltime: Any) -> float:
    """A stored walltime (SQLAlchemy's text, naive local time or with an offset) in seconds."""
    return datetime.fromisoformat(str(walltime)).timestamp()


def moves(store: Path) -> dict[str, dict[str, list[list[float]]]]:
    """{phase uid: {agent name: [the rewards of that agent's moves, one list per game, in play order]}}."""
    db = sqlite3.connect(f"file:{Path(store)}?mode=ro", uri=True)
    try:
        instances = [i for (i,) in db.execute("SELECT id FROM experiment_run_instances ORDER BY id")]
        if not instances:
            LOG.warning("%s holds no experiment run instance", store)
            return {}
        if len(instances) > 1:
            LOG.warning(
                "%s holds %d experiment run instances; only the last (id %d) is read",
                store,
                len(instances),
                instances[-1],
            )
        rows = db.execute(
            "SELECT p.number, p.uid, a.name, m.rollout_worker_uid, m.episode, m.decision_index, m.id, m.walltime,"
            " m.done, m.rewards, m.actuator_setpoints"
            " FROM muscle_actions m JOIN agents a ON a.id = m.agent_id"
            " JOIN experiment_run_phases p ON p.id = a.experiment_run_phase_id"
            " WHERE p.experiment_run_instance_id = ?",
            (instances[-1],),
        ).fetchall()
    finally:
        db.close()

    # (phase number, phase uid) -> agent -> (worker, episode) -> [(decision, id, walltime, done, reward)]
    games: dict[tuple[int, str], dict[str, dict[tuple[str, int], list[tuple[int, int, float, bool, float]]]]] = {}
    skipped = 0
    for number, phase, agent, worker, episode, decision, row_id, walltime, done, rewards, setpoints in rows:
        if not rewards or not setpoints or rewards == "null" or setpoints == "null":
            skipped += 1
            continue
        game = games.setdefault((number, phase), {}).setdefault(agent, {}).setdefault((worker or "", episode), [])
        game.append(
            (
                decision if decision is not None else row_id,
                row_id,
                _time(walltime),
                bool(done),
                _reward(rewards, row_id),
            )
        )
    if skipped:
        LOG.info("%s: %d muscle_actions rows without a move or a reward left out", store, skipped)

    result: dict[str, dict[str, list[list[float]]]] = {}
    for (_, phase), agents in sorted(games.items()):
        ended: dict[str, dict[tuple[str, int], tuple[float, list[float]]]] = {}  # agent -> game -> (end, rewards)
        for agent, by_game in sorted(agents.items()):
            ended[agent] = {}
            for (worker, episode), game in by_game.items():
                game.sort(key=lambda move: (move[0], move[1]))
                if not game[-1][3]:
                    LOG.warning(
                        "%s: %s/%s, worker %s, episode %s has no done row (%d moves); left out",
                        store,
                        phase,
                        agent,
                        worker,
                        episode,
                        len(game),
                    )
                    continue
                ended[agent][(worker, episode)] = (game[-1][2], [move[4] for move in game])
        end = _game_ends(store, phase, ended)
        result[phase] = {
            agent: [rewards for key, (_, rewards) in sorted(games_.items(), key=lambda kv: end[kv[0]])]
            for agent, games_ in ended.items()
        }
    return result


def _game_ends(
    store: Path, phase: str, ended: dict[str, dict[tuple[str, int], tuple[float, list[float]]]]
) -> dict[tuple[str, int], tuple[float, str, int]]:
    """Each game's sort key (end time, worker, episode), the same for all agents' rows of one game: the end
    time is the latest done row of that game over the agents, the worker is the first agent's muscle uid.

    The store does not say which muscles (rollout_worker_uid) of different agents play in the same worker, so
    they are matched by their done rows: all agents of one worker get the terminal update of a game at once,
    so each muscle of an agent goes with the other agent's muscle whose done rows are nearest on the average
    over their common episodes (greedily, nearest pair first). Where that fails (agents with different numbers of
    muscles), each agent's games are ordered by their own done rows (a warning is logged)."""
    own = {(agent, *key): t for agent, games in ended.items() for key, (t, _) in games.items()}
    agents = sorted(ended)
    muscles = {agent: sorted({worker for worker, _ in ended[agent]}) for agent in agents}
    if len({len(m) for m in muscles.values()}) > 1:
        LOG.warning(
            "%s: %s: agents have different numbers of muscles %s; each agent's games are ordered by "
            "their own done rows",
            store,
            phase,
            {a: len(m) for a, m in muscles.items()},
        )
        return {(worker, e): (t, worker, e) for (_, worker, e), t in own.items()}
    groups = {worker: [(agents[0], worker)] for worker in muscles[agents[0]]}  # first agent's muscle -> group
    for agent in agents[1:]:
        costs = []
        for lead in groups:
            for worker in muscles[agent]:
                common = [e for w, e in ended[agents[0]] if w == lead and (worker, e) in ended[agent]]
                if common:
                    cost = sum(abs(ended[agents[0]][(lead, e)][0] - ended[agent][(worker, e)][0]) for e in common)
                    costs.append((cost / len(common), lead, worker))
        taken_lead, taken = set(), set()
        for _, lead, worker in sorted(costs):
            if lead not in taken_lead and worker not in taken:
                groups[lead].append((agent, worker))
                taken_lead.add(lead)
                taken.add(worker)
    end: dict[tuple[str, int], tuple[float, str, int]] = {}
    for members in groups.values():
        episodes = {e for agent, worker in members for w, e in ended[agent] if w == worker}
        for e in episodes:
            t = max(ended[agent][(worker, e)][0] for agent, worker in members if (worker, e) in ended[agent])
            for _, worker in members:
                end[(worker, e)] = (t, members[0][1], e)
    for agent in agents:  # a muscle left without a group keeps its own done rows
        for key, (t, _) in ended[agent].items():
            end.setdefault(key, (t, *key))
    return end


def _summary(store: Path) -> None:
    for phase, agents in moves(store).items():
        for agent, games in agents.items():
            n_moves = sum(len(g) for g in games)
            invalid = sum(r <= -100 for g in games for r in g)
            sums = [sum(g) for g in games]
            mean = sum(sums) / len(sums) if sums else float("nan")
            print(
                f"{phase} {agent}: {len(games)} games, {n_moves} moves, {invalid} invalid "
                f"({invalid / max(n_moves, 1):.1%}), mean game sum {mean:.1f}"
            )
            for label, part in (("first 100", games[:100]), ("last 100", games[-100:])):
                if len(games) > 100:
                    m = sum(len(g) for g in part)
                    bad = sum(r <= -100 for g in part for r in g)
                    print(
                        f"  {label}: {bad}/{m} invalid ({bad / max(m, 1):.1%}), "
                        f"mean game sum {sum(sum(g) for g in part) / len(part):.1f}"
                    )
            if len(games) <= 4:
                for g in games:
                    print(f"  {g} (sum {sum(g):g})")


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} STORE.db")
    _summary(Path(sys.argv[1]))
