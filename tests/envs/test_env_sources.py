"""The registry of environment sources (ml_arl.envs.sources): one file per source, each found by
listing the package, asked in its order, named in --help and in its errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from ml_arl.cli.learn import build_parser
from ml_arl.core.exceptions import EnvironmentSourceError
from ml_arl.envs.sources import is_python_source, resolve_env
from ml_arl.envs.sources.registry import EnvSource, help_text, source_for, sources

FOLDER = Path(__file__).resolve().parents[2] / "ml_arl" / "envs" / "sources"


def test_every_source_file_is_one_registered_source() -> None:
    files = sorted(p.stem.removesuffix("_source") for p in FOLDER.glob("*_source.py"))
    found = sorted(s.name for s in sources())
    assert found == files and len(files) == 7
    assert all(isinstance(s, EnvSource) and s.form and s.summary for s in sources())
    orders = [s.order for s in sources()]
    assert orders == sorted(orders) and not sources()[-1].python  # Unity takes what is left, last


@pytest.mark.parametrize("env_path, form", [
    ("builtin:Reach", "builtin:<Name>"),
    ("gymnasium:CartPole-v1", "gymnasium:<EnvId>"),
    ("pettingzoo:pettingzoo.classic.rps_v2", "pettingzoo:<module>[:<attr>]"),
    ("grid2op:l2rpn_case14_sandbox", "grid2op:<name>"),
    ("palaestrai:run.yml", "palaestrai:<run file>"),
    ("my_pkg.envs:make", "package.module:factory"),
    ("builds/Ball.x86_64", "path/to/Build"),
    ("builds/Ball", "path/to/Build"),
    ("Ball.x86_64:x", "path/to/Build"),  # a build's name, not a module
    (None, "path/to/Build"),  # the Editor
    ("builtin", "path/to/Build"),  # no colon: a path
])
def test_each_value_goes_to_its_source(env_path: str, form: str) -> None:
    assert source_for(env_path).form == form
    assert is_python_source(env_path) == (form != "path/to/Build")


def test_help_names_every_source() -> None:
    text = help_text()
    assert all(s.form in text for s in sources())
    env = next(a for a in build_parser()._actions if "--env" in a.option_strings)
    assert env.help == text


def test_a_source_checks_its_value_in_one_line() -> None:
    with pytest.raises(EnvironmentSourceError, match=r"^--env builtin:Nope: no built-in environment 'Nope'; available: "):
        resolve_env("builtin:Nope")
    with pytest.raises(EnvironmentSourceError, match="not a Python environment"):
        resolve_env("builds/Ball.x86_64")
    assert resolve_env("builtin:Reach", ["n_agents=2"]).kwargs == {"n_agents": 2, "num_areas": 1}
