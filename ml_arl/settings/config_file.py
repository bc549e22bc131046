"""Reading a YAML config file that may be broken or hostile.

A config file is plain YAML read with PyYAML's safe loader, within limits that keep a file from
exhausting the process before validation sees it:

* at most ``MAX_CONFIG_BYTES`` (1 MB) and UTF-8 (a UTF-8 byte-order mark is accepted; UTF-16 and
  UTF-32 are recognised by their byte-order mark and named);
* nesting at most ``MAX_DEPTH`` levels (PyYAML composes recursively: 10,000 levels would end in a
  RecursionError);
* at most ``MAX_NODES`` values once aliases are expanded, and no alias that refers to itself
  ("billion laughs" files are tiny but expand to gigabytes in every later copy);
* integers of at most ``MAX_INT_DIGITS`` digits (Python refuses to parse more than 4,300 and
  nothing in a config needs more than a few);
* only the tags plain YAML data needs (``!!str !!int !!float !!bool !!null !!map !!seq``):
  ``!!python/...`` and any other tag is an error, never constructed;
* dates stay strings (``run_id: 2024-01-01`` is a name, not a ``datetime.date``).

Every failure is a ``ConfigError`` with one line naming the file (and line, where there is one)
and what to change. Duplicate keys in a mapping are accepted as PyYAML and ML-Agents accept them
(the last one wins) and reported as warnings. Nothing here writes anything.
"""

from __future__ import annotations

import codecs
from typing import Any, Optional

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ml_arl.core.exceptions import ConfigError
from ml_arl.core.one_line import squeeze

MAX_CONFIG_BYTES = 1_000_000
MAX_DEPTH = 32
MAX_NODES = 100_000
MAX_INT_DIGITS = 30

_ALLOWED_TAGS = {
    "tag:yaml.org,2002:" + name for name in ("str", "int", "float", "bool", "null", "map", "seq", "merge")
}
_BOMS = [
    (codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"),
]


class _Refused(yaml.YAMLError):
    """A limit of this module was hit at ``mark``."""

    def __init__(self, problem: str, mark: Optional[yaml.Mark] = None):
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = mark


class _Loader(yaml.SafeLoader):
    """SafeLoader that counts nesting while composing and refuses unexpected tags and huge ints."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Optional[Node], index: Any) -> Optional[Node]:
        event = self.peek_event()
        tag = getattr(event, "tag", None)
        if tag is not None and tag != "!" and tag not in _ALLOWED_TAGS:
            raise _Refused(
                f"tag {tag.replace('tag:yaml.org,2002:', '!!')!r} is not allowed; a config holds plain values, "
                "lists and mappings: remove the tag",
                event.start_mark,
            )
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Refused(f"nested more than {MAX_DEPTH} levels deep; a config needs only a few", event.start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_yaml_int(self, node: ScalarNode) -> int:
        digits = sum(ch.isdigit() for ch in str(node.value))
        if digits > MAX_INT_DIGITS:
            raise _Refused(f"an integer of {digits} digits is out of range; use a smaller number", node.start_mark)
        value: int = super().construct_yaml_int(node)
        return value


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
# dates and times stay strings: drop the implicit timestamp resolver (a copy, not SafeLoader's table)
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _check_graph(root: Node) -> list[str]:
    """Expanded size within MAX_NODES, no alias cycles; warnings for duplicate keys."""
    sizes: dict[int, int] = {}
    warnings: list[str] = []
    # iterative post-order walk: (node, children done?)
    stack: list[tuple[Node, bool]] = [(root, False)]
    on_path: set[int] = set()
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            children = _children(node)
            sizes[key] = 1 + sum(sizes[id(c)] for c in children)
            if sizes[key] > MAX_NODES:
                raise _Refused(
                    f"expands to more than {MAX_NODES} values (aliases repeat their anchor's content); "
                    "write the repeated parts out or use fewer aliases",
                    node.start_mark,
                )
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise _Refused("an alias refers to a mapping or list that contains it; remove the cycle", node.start_mark)
        on_path.add(key)
        stack.append((node, True))
        if isinstance(node, MappingNode):
            seen: set[str] = set()
            for k, _ in node.value:
                if isinstance(k, ScalarNode):
                    if k.value in seen:
                        warnings.append(
                            f"line {k.start_mark.line + 1}: key '{k.value}' is given twice in one mapping; "
                            "the last one is used"
                        )
                    seen.add(k.value)
        for child in _children(node):
            if id(child) in on_path:
                raise _Refused("an alias refers to a mapping or list that contains it; remove the cycle", child.start_mark)
            if id(child) not in sizes:
                stack.append((child, False))
    return warnings


def _children(node: Node) -> list[Node]:
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, SequenceNode):
        return list(node.value)
    return []


def _decode(raw: bytes, path: str) -> str:
    for bom, name in _BOMS:
        if raw.startswith(bom):
            raise ConfigError([f"{path}: the file is {name}-encoded; save it as UTF-8"])
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise ConfigError(
            [f"{path}: line {line}: byte 0x{raw[err.start]:02x} is not UTF-8; save the file as UTF-8"]
        ) from None


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError([f"{path}: config file not found; check the path"]) from None
    except IsADirectoryError:
        raise ConfigError([f"{path}: is a directory, expected a YAML config file"]) from None
    except PermissionError:
        raise ConfigError([f"{path}: permission denied; make the config file readable"]) from None
    except OSError as err:
        raise ConfigError([f"{path}: cannot read the config file ({err.strerror or err})"]) from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(
            [f"{path}: larger than {MAX_CONFIG_BYTES // 1_000_000} MB; a config is a few kB: check that this is the right file"]
        )
    return raw


def parse_yaml(text: str, path: str) -> tuple[Any, list[str]]:
    """YAML text -> (plain Python data, warnings). Errors name ``path`` and the line."""
    loader: Optional[_Loader] = None
    try:
        loader = _Loader(text)
        node = loader.get_single_node()
        if node is None:
            return None, []
        warnings = _check_graph(node)
        return loader.construct_document(node), [f"{path}: {w}" for w in warnings]
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}:" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        kind = "" if isinstance(err, _Refused) else "YAML syntax error: "
        raise ConfigError([f"{path}:{where} {kind}{squeeze(problem)}"]) from None
    except (ValueError, TypeError, RecursionError) as err:  # a constructor refusing a value PyYAML resolved
        raise ConfigError([f"{path}: cannot read a value ({squeeze(str(err))}); check the file"]) from None
    finally:
        if loader is not None:
            loader.dispose()



def load_config_file(path: str) -> tuple[dict[str, Any], list[str]]:
    """A config file as a dict (empty for an empty or comment-only file) and warnings."""
    data, warnings = parse_yaml(_decode(_read(path), path), path)
    if data is None:
        return {}, warnings
    if not isinstance(data, dict):
        raise ConfigError([f"{path}: the top level must be a mapping of sections (behaviors:, env_settings:, ...)"])
    bad = [k for k in data if not isinstance(k, str)]
    if bad:
        raise ConfigError([f"{path}: section name {bad[0]!r} is not a name; top-level keys are section names such as behaviors"])
    return data, warnings
