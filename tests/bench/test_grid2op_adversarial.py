"""bench/learning/grid2op_adversarial.py's reading of a run: the matrix cells from results.sqlite, and the
table's means, intervals over seeds and paired differences from the reconnect rule, against hand values."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from bench.learning.grid2op_adversarial import cells, main, table


def _run(folder: Path, returns: dict[str, list[float]]) -> None:
    folder.mkdir(parents=True)
    with sqlite3.connect(folder / "results.sqlite") as db:
        db.execute("CREATE TABLE episodes (phase TEXT, mode TEXT, behavior TEXT, env_reward REAL)")
        db.execute("INSERT INTO episodes VALUES ('operate', 'train', 'Operator', 999.0)")
        for phase, values in returns.items():
            for value in values:
                db.execute("INSERT INTO episodes VALUES (?, 'test', 'Operator', ?)", (phase, value))
                db.execute("INSERT INTO episodes VALUES (?, 'test', 'Opponent', ?)", (phase, -value))


def _returns(shift: float) -> dict[str, list[float]]:
    return {"matrix.learned-vs-random_line_attack": [400 + shift, 420 + shift],
            "matrix.grid2op_reconnect-vs-random_line_attack": [380, 380],
            "matrix.grid2op_greedy-vs-random_line_attack": [450, 470],
            "matrix.br-Opponent-vs-learned": [200 + shift],
            "matrix.br-Opponent-vs-grid2op_reconnect": [190, 194],
            "matrix.br-Opponent-vs-grid2op_greedy": [205]}


def test_cells_split_the_matrix_phases_by_operator_and_column(tmp_path: Path) -> None:
    _run(tmp_path / "adv0", _returns(0.0))
    found = cells(tmp_path / "adv0" / "results.sqlite")
    assert found[("learned", "random_line_attack")] == [400.0, 420.0]
    assert found[("grid2op_reconnect", "best_response")] == [190.0, 194.0]
    assert set(found) == {(o, c) for o in ("learned", "grid2op_reconnect", "grid2op_greedy")
                          for c in ("random_line_attack", "best_response")}


def test_the_table_pairs_each_seed_with_the_rule(tmp_path: Path) -> None:
    per_seed = {("learned", "random_line_attack"): [410.0, 430.0], ("grid2op_reconnect", "random_line_attack"): [380.0, 390.0],
                ("learned", "best_response"): [200.0, 200.0], ("grid2op_reconnect", "best_response"): [192.0, 196.0]}
    lines = table(per_seed, ["learned", "grid2op_reconnect"])
    # differences 30 and 40: mean 35, sd 7.07, t(1) 12.706 -> half-width 63.5
    assert "| learned | random_line_attack | 420.0 | [292.9, 547.1] | 410.0 / 430.0 | +35.0 [-28.5, +98.5] |" in lines
    assert "| learned | best_response | 200.0 | [200.0, 200.0] | 200.0 / 200.0 | +6.0 [-19.4, +31.4] |" in lines


def test_report_only_reads_every_seed_and_names_a_run_that_did_not_finish(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _run(tmp_path / "adv0", _returns(0.0))
    _run(tmp_path / "adv1", _returns(10.0))
    assert main(["--seeds", "0", "1", "--results-dir", str(tmp_path), "--report-only"]) == 0
    out = capsys.readouterr().out
    assert "| learned | random_line_attack | 415.0 |" in out and "+35.0" in out
    unfinished = _returns(0.0)
    del unfinished["matrix.br-Opponent-vs-grid2op_greedy"]
    _run(tmp_path / "adv2", unfinished)
    with pytest.raises(SystemExit, match="adv2: no test episodes of grid2op_greedy against best_response"):
        main(["--seeds", "2", "--results-dir", str(tmp_path), "--report-only"])
