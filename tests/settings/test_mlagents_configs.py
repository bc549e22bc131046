"""Configs in the layout of Unity ML-Agents' own example configs (written here, one per trainer type
and option, in tests/mlagents_style/) are accepted by arl-learn as they are: every key ML-Agents 1.1.0
takes, each trainer type, memory, reward signals, imitation, self-play, encoders, goal conditioning,
curricula and samplers. That they also train is the learning tests' job (tests/test_*learning*.py,
test_sac.py, test_poca.py, test_memory.py, ...)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ml_arl.settings import build_run_options
from ml_arl.settings.config_file import load_config_file

CONFIGS = sorted((Path(__file__).parents[1] / "mlagents_style").glob("*.yaml"))


def test_there_is_a_config_per_feature() -> None:
    assert len(CONFIGS) >= 10


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_ml_agents_config_is_accepted(path: Path) -> None:
    options = build_run_options(load_config_file(str(path))[0], {}, str(path))
    assert options.behaviors


def test_accepted_settings_keep_their_values() -> None:
    def load(name: str):  # type: ignore[no-untyped-def]
        path = Path(__file__).parents[1] / "mlagents_style" / f"{name}.yaml"
        return build_run_options(load_config_file(str(path))[0], {}, str(path))

    hallway = load("Hallway-sac-memory-curiosity").behaviors["Hallway"]
    assert hallway.trainer_type == "sac" and hallway.network_settings.memory is not None
    assert hallway.network_settings.memory.memory_size == 128
    assert hallway.reward_signals.curiosity is not None and hallway.reward_signals.curiosity.network_settings.hidden_units == 256  # encoding_size, ML-Agents' alias
    dungeon = load("DungeonEscape-poca-memory").behaviors["DungeonEscape"]
    assert dungeon.trainer_type == "poca" and dungeon.network_settings.memory is not None
    soccer = load("SoccerTwos-poca-selfplay").behaviors["SoccerTwos"]
    assert soccer.trainer_type == "poca" and soccer.self_play is not None and soccer.self_play.team_change == 200000
    walker = load("Walker-all-keys").behaviors["Walker"]
    assert walker.max_steps == 30_000_000
    match3 = load("Match3-encoders").behaviors
    assert {name: s.network_settings.vis_encode_type for name, s in match3.items()} == {
        "Match3SimpleHeuristic": "match3", "Match3VectorObs": "nature_cnn", "Match3VisualObs": "resnet"}
    walljump = load("WallJump-curriculum")
    assert walljump.environment_parameters is not None and set(walljump.environment_parameters) == {"big_wall_height", "gravity", "mass"}
