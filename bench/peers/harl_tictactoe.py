"""Two-player tic-tac-toe from one harl run file, learned by palaestrAI 3.5.18 + palaestrai-agents 3.6.2 and by
arl-learn: how fast each player stops playing invalid moves, per move played (issue 51, item 5).

The run file (default bench/peers/palaestrai/tictactoe_harl.yml): a harl PPOBrain per player (rollouts of 512
moves, 8 epochs, minibatches of 64, harl's defaults otherwise), 300 games per worker on 2 workers under TakingTurns,
then a deterministic test game per worker. For each seed the file runs with ``seed: N``:

* ours: ``arl-learn FILE --run-id ttt-sN --seed N --results-dir DIR --force``; the per-move rewards are the
  ``steps`` rows of ``results.sqlite`` (one per move of a player, its own move's reward), a game is one
  (phase, player, worker, episode), games are ordered by the episode's end (``episodes.wall_time``);
* palaestrAI (``--palaestrai-venv``, made by ``bash bench/peers/install_palaestrai_harl.sh``; about an hour a seed
  on 2 cores): ``palaestrai -c runtime.conf.yaml database-create``, then ``experiment-start FILE`` in a folder
  of its own with a SQLite store; the per-move rewards from the store as ``bench/peers/palaestrai_store_moves.py``
  reads them (its docstring says from where). ``--palaestrai-stores`` reads stores of earlier runs instead,
  in the order of ``--seeds``.

Per player and seed: the share of invalid moves (reward <= -100: a taken tile) among the moves of the first and
of the last 100 training games, the mean per-game sum of rewards over the last 100, and the test games' sums.
Then each side's mean over seeds, and ours minus palaestrAI's.

    python bench/peers/harl_tictactoe.py --seeds 1 2 3 --palaestrai-stores /tmp/pal_ttt/seed{1,2,3}/palaestrai.db
    python bench/peers/harl_tictactoe.py --seeds 1 2 3 --palaestrai-venv .venv-palaestrai-harl
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

if os.path.realpath(sys.path[0] or os.curdir) == os.path.dirname(os.path.realpath(__file__)):  # run as a script:
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))  # bench.* from the root

from bench.peers.palaestrai_store_moves import moves as palaestrai_moves  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RUN_FILE = ROOT / "bench" / "peers" / "palaestrai" / "tictactoe_harl.yml"
PLAYERS = ("cross", "nought")
Games = dict[str, dict[str, list[list[float]]]]  # phase -> player -> games -> per-move rewards


def with_seed(run_file: Path, seed: int, into: Path) -> Path:
    text = run_file.read_text()
    lines = [f"seed: {seed}" if line.startswith("seed:") else line for line in text.splitlines()]
    if f"seed: {seed}" not in lines:
        raise SystemExit(f"{run_file}: no top-level 'seed:' line to set")
    into.mkdir(parents=True, exist_ok=True)
    path = into / "run.yml"
    path.write_text("\n".join(lines) + "\n")
    return path


def our_moves(store: Path) -> Games:
    with sqlite3.connect(store) as db:
        ends = {k[:4]: k[4] for k in db.execute("SELECT phase, behavior, worker, episode, wall_time FROM episodes")}
        games: dict[tuple, list[float]] = defaultdict(list)
        for phase, player, worker, episode, reward in db.execute(
                "SELECT phase, behavior, worker, episode, env_reward FROM steps ORDER BY rowid"):
            games[(phase, player, worker, episode)].append(float(reward))
    out: Games = defaultdict(dict)
    for key in sorted(games, key=lambda k: ends.get(k, float("inf"))):
        out[key[0]].setdefault(key[1], []).append(games[key])
    return dict(out)


def run_ours(run_file: Path, seed: int, results: Path) -> Games:
    subprocess.run([str(Path(sys.executable).with_name("arl-learn")), str(with_seed(run_file, seed, results / f"file-s{seed}")),
                    "--run-id", f"ttt-s{seed}", "--seed", str(seed), "--results-dir", str(results), "--force"],
                   check=True, stdout=subprocess.DEVNULL)
    return our_moves(results / f"ttt-s{seed}" / "results.sqlite")


def run_palaestrai(venv: Path, run_file: Path, seed: int, folder: Path) -> Path:
    path = with_seed(run_file, seed, folder)
    (folder / "runtime.conf.yaml").write_text(
        f"store_uri: sqlite:///{folder}/palaestrai.db\nlog_store_uri: sqlite:///{folder}/palaestrai-log.db\n"
        f"data_path: {folder}/_outputs\n")
    env = {**os.environ, "XDG_CONFIG_HOME": str(folder / "xdg")}
    binary = str(venv / "bin" / "palaestrai")
    for args in (["database-create"], ["experiment-start", str(path)]):
        with open(folder / f"{args[0]}.log", "w") as log:
            subprocess.run([binary, "-c", "runtime.conf.yaml", *args], cwd=folder, env=env, check=True, stdout=log,
                           stderr=subprocess.STDOUT, timeout=4 * 3600)
    return folder / "palaestrai.db"


def invalid_share(games: list[list[float]]) -> float:
    played = [r for game in games for r in game]
    return sum(r <= -100 for r in played) / max(1, len(played))


def scores(games: Games) -> dict[str, dict[str, float]]:
    train = next(v for k, v in games.items() if "train" in k)
    test = next((v for k, v in games.items() if "test" in k), {})
    out = {}
    for player in PLAYERS:
        g = train[player]
        tests = [sum(game) for game in test.get(player, [])]
        out[player] = {"games": len(g), "first": invalid_share(g[:100]), "last": invalid_share(g[-100:]),
                       "sum": statistics.fmean(sum(game) for game in g[-100:]),
                       "test_invalid": sum(r <= -100 for game in test.get(player, []) for r in game), "tests": tests}
    return out


def table(side: str, per_seed: dict[int, dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    print(f"\n{side}")
    print(f"{'seed':>4} {'player':>7} {'games':>5} {'invalid, first 100':>19} {'last 100':>9} {'sum, last 100':>14}  test games")
    for seed, by_player in per_seed.items():
        for player, s in by_player.items():
            print(f"{seed:>4} {player:>7} {s['games']:>5} {s['first']:>19.3f} {s['last']:>9.3f} {s['sum']:>14.1f}  "
                  f"{s['tests']} ({s['test_invalid']} invalid moves)")
    means = {p: {k: statistics.fmean(per_seed[s][p][k] for s in per_seed) for k in ("first", "last", "sum")}
             for p in PLAYERS}
    for p, m in means.items():
        print(f"mean {p:>7} {'':>5} {m['first']:>19.3f} {m['last']:>9.3f} {m['sum']:>14.1f}")
    return means


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-file", type=Path, default=RUN_FILE)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--palaestrai-venv", type=Path, help="run the palaestrAI side with this venv's palaestrai")
    parser.add_argument("--palaestrai-stores", type=Path, nargs="+", help="palaestrAI stores of earlier runs, one per seed")
    parser.add_argument("--keep", type=Path, help="keep the runs in this folder (default: a temporary one)")
    args = parser.parse_args()
    if args.palaestrai_stores and len(args.palaestrai_stores) != len(args.seeds):
        parser.error(f"--palaestrai-stores: {len(args.palaestrai_stores)} stores for {len(args.seeds)} seeds; give one per seed")
    with tempfile.TemporaryDirectory() as tmp:
        base = args.keep or Path(tmp)
        ours = {s: scores(run_ours(args.run_file.resolve(), s, base / "ours")) for s in args.seeds}
        theirs = {}
        for i, s in enumerate(args.seeds):
            if args.palaestrai_stores:
                theirs[s] = scores(palaestrai_moves(args.palaestrai_stores[i]))
            elif args.palaestrai_venv:
                store = run_palaestrai(args.palaestrai_venv.resolve(), args.run_file.resolve(), s, base / f"palaestrai-s{s}")
                theirs[s] = scores(palaestrai_moves(store))
    print(f"{args.run_file.name}: share of invalid moves among a player's moves, mean per-game reward sum")
    mine = table("arl-learn", ours)
    if theirs:
        other = table("palaestrAI 3.5.18 + palaestrai-agents 3.6.2", theirs)
        print("\nours - palaestrAI (invalid share: lower is better; sum: higher is better)")
        for p in PLAYERS:
            print(f"{p:>7}: invalid, last 100 {mine[p]['last'] - other[p]['last']:+.3f}; sum, last 100 "
                  f"{mine[p]['sum'] - other[p]['sum']:+.1f}")


if __name__ == "__main__":
    main()
