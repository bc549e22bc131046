"""The registry of environment sources: where an ``--env`` value comes from.

Each source is one module of this package that defines ``SOURCE``, an ``EnvSource``: it says
whether an ``--env`` value is its own (``claims``), checks the value and its ``--env-args``, makes
the ``EnvFactory`` a worker builds its environment with (``factory``), and names itself in
``arl-learn --help`` (``form``, ``summary``) and in its errors. The registry finds the modules by
listing the package, so a new source is one file. Sources are asked in ``order``; the Unity
source, which takes any other value (a build's path, or nothing for the Editor), is asked last.
"""

from __future__ import annotations

import os
import pkgutil
from collections.abc import Callable
from functools import cache
from typing import Any, Optional

from ml_arl.core.env_factory import EnvFactory
from ml_arl.core.exceptions import EnvironmentSourceError
from ml_arl.core.import_path import resolve

Make = Callable[[str, str, dict[str, Any], int, bool], EnvFactory]


class EnvSource:
    """One kind of ``--env`` value.

    ``prefix``: the source claims ``<prefix>:<rest>`` (or ``claims(env_path)`` says what it takes);
    ``form`` and ``summary``: how ``--help`` and the errors name it; ``order``: when it is asked
    (the module path at 90 and Unity at 100 come last); ``python`` False: a Unity build or the
    Editor, built from the run's options instead; ``make(env_path, rest, kwargs, num_areas, probe)``:
    the factory, its arguments checked (``rest``: what follows the prefix; ``probe`` False, for
    ``--check``: nothing is built), or EnvironmentSourceError in one line."""

    def __init__(self, *, form: str, summary: str, prefix: Optional[str] = None, order: int = 10,
                 python: bool = True, make: Optional[Make] = None,
                 claims: Optional[Callable[[Optional[str]], bool]] = None):
        self.form, self.summary, self.prefix, self.order, self.python = form, summary, prefix, order, python
        self._make, self._claims = make, claims
        self.name = ""  # its module's name, less "_source" (set by the registry)

    def claims(self, env_path: Optional[str]) -> bool:
        if self._claims is not None:
            return self._claims(env_path)
        if not env_path or self.prefix is None:
            return False
        kind, sep, _ = env_path.partition(":")
        return bool(sep) and kind == self.prefix

    def factory(self, env_path: str, rest: str, kwargs: dict[str, Any], num_areas: int, probe: bool) -> EnvFactory:
        if self._make is None:
            raise EnvironmentSourceError(f"--env {env_path}: {self.form} is not built from --env alone")
        return self._make(env_path, rest, kwargs, num_areas, probe)


@cache
def sources() -> tuple[EnvSource, ...]:
    """Every source of this package, in the order they are asked."""
    package = __name__.rpartition(".")[0]
    found = []
    for module in pkgutil.iter_modules([os.path.dirname(__file__)]):
        if module.name.endswith("_source"):
            source = resolve(f"{package}.{module.name}:SOURCE")
            assert isinstance(source, EnvSource), module.name
            source.name = module.name.removesuffix("_source")
            found.append(source)
    return tuple(sorted(found, key=lambda s: (s.order, s.form)))


def source_for(env_path: Optional[str]) -> EnvSource:
    """The first source that claims ``env_path``; the Unity source claims what no other does."""
    for source in sources():
        if source.claims(env_path):
            return source
    raise EnvironmentSourceError(f"--env {env_path}: no source takes it; the forms are: {forms()}")


def forms() -> str:
    return ", ".join(s.form for s in sources())


def help_text() -> str:
    """The --env help: one line per source."""
    return "environment, one of: " + "; ".join(f"{s.form} ({s.summary})" for s in sources())
