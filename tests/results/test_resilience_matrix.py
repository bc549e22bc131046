"""arl-report's resilience matrix (ml_arl.results.resilience_matrix): the paired differences of the learned
player over runs, against hand values, and where they are left out."""

from __future__ import annotations

import pytest

from ml_arl.results.resilience_matrix import Matrix, format_matrix, paired, paired_differences


def _matrix() -> Matrix:
    m = Matrix("m", "Defender", ["learned", "rule"], ["attack", "best_response"])
    # per run, the episodes' returns; run means: learned 11 / 14 / 20, rule 9 / 10 / 15 (differences 2, 4, 5)
    m.cells[("learned", "attack")] = [[10.0, 12.0], [14.0], [20.0, 20.0]]
    m.cells[("rule", "attack")] = [[9.0], [8.0, 12.0], [15.0]]
    m.cells[("learned", "best_response")] = [[5.0], [5.0], []]  # the third run has no episode here
    m.cells[("rule", "best_response")] = [[4.0], [6.0], [1.0]]
    return m


def test_paired_is_the_t_interval_of_the_per_run_differences() -> None:
    mean, low, high, runs = paired(_matrix().cells[("learned", "attack")], _matrix().cells[("rule", "attack")])  # type: ignore[misc]
    # differences 2, 4, 5: mean 11/3, sd 1.5275, t(2) 4.3027 -> half-width 3.7946
    assert runs == 3 and mean == pytest.approx(11 / 3)
    assert (low, high) == (pytest.approx(11 / 3 - 3.7946, abs=1e-3), pytest.approx(11 / 3 + 3.7946, abs=1e-3))


def test_runs_without_episodes_in_a_cell_leave_the_pairing_and_one_run_is_none() -> None:
    m = _matrix()
    est = paired(m.cells[("learned", "best_response")], m.cells[("rule", "best_response")])
    assert est is not None and est[3] == 2 and est[0] == pytest.approx(0.0)  # differences +1 and -1
    assert paired([[1.0]], [[0.0]]) is None


def test_the_report_lines_name_the_players_the_columns_and_the_runs() -> None:
    lines = paired_differences(_matrix())
    assert lines == ["paired over 2-3 runs, learned minus rule (95 % t-interval): against attack +3.67 [-0.13, +7.46], "
                     "against best_response +0.00 [-12.71, +12.71]"]
    assert lines[0] in format_matrix(_matrix(), 3)


def test_without_a_learned_player_or_with_one_run_there_is_no_pairing() -> None:
    m = _matrix()
    m.rows = ["droop", "rule"]
    m.cells = {("droop" if k[0] == "learned" else k[0], k[1]): v for k, v in m.cells.items()}
    assert paired_differences(m) == []
    one = _matrix()
    one.cells = {k: v[:1] for k, v in one.cells.items()}
    assert paired_differences(one) == []
