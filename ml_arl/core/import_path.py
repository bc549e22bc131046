"""One resolver for every ``package.module:Name`` a user writes (trainer classes, muscles,
objectives, environment factories).

``resolve(path)`` imports the module and follows the dotted name after the colon; every failure
is an ``ImportPathError`` whose message is one line and ends with what to fix. Callers prefix
the config key or flag it came from. Torch-free (workers use it for muscle classes).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any


class ImportPathError(ValueError):
    """An import path that cannot be resolved; the message is one line."""


def split(path: str) -> tuple[str, str]:
    """``"pkg.module:Name.attr"`` -> ``("pkg.module", "Name.attr")``; ImportPathError if it is not one."""
    module, sep, name = path.partition(":")
    if not (
        sep and module and name
        and all(part.isidentifier() for part in module.split("."))
        and all(part.isidentifier() for part in name.split("."))
    ):
        raise ImportPathError(f"{path!r} is not an import path; write it as package.module:Name")
    return module, name


def is_import_path(path: str) -> bool:
    try:
        split(path)
    except ImportPathError:
        return False
    return True


def load_module(module_name: str) -> Any:
    """The module ``module_name`` (``package.module``), imported; ImportPathError if it cannot be."""
    if not module_name or not all(part.isidentifier() for part in module_name.split(".")):
        raise ImportPathError(f"{module_name!r} is not a module path; write it as package.module")
    try:
        return importlib.import_module(module_name)
    except ImportError as err:
        raise ImportPathError(f"cannot import module {module_name!r} ({err}); is it installed and on PYTHONPATH?") from None


def resolve(path: str) -> Any:
    """The object ``path`` names (the module is imported)."""
    module_name, name = split(path)
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as err:
        raise ImportPathError(f"cannot import module {module_name!r} ({err}); is it on PYTHONPATH?") from None
    for part in name.split("."):
        if not hasattr(target, part):
            raise ImportPathError(f"module {module_name!r} has no attribute {name!r}")
        target = getattr(target, part)
    return target


def find(path: str) -> None:
    """Check that the module ``path`` (package.module:Name) names can be found, without running
    it (its parent packages are imported); ImportPathError if not. What it defines is checked
    where it is imported."""
    module_name, _ = split(path)
    try:
        spec = importlib.util.find_spec(module_name)
    except (ImportError, ValueError) as err:
        raise ImportPathError(f"cannot import module {module_name!r} ({err}); is it on PYTHONPATH?") from None
    if spec is None:
        raise ImportPathError(f"cannot import module {module_name!r} (No module named {module_name!r}); is it on PYTHONPATH?")


def resolve_class(path: str, base: type) -> type:
    """The class ``path`` names, which must be ``base`` or a subclass of it."""
    cls = resolve(path)
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise ImportPathError(f"{path} is not a subclass of {base.__module__}.{base.__qualname__}")
    return cls
