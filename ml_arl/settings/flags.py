"""Command-line flags declared on the settings they override.

A setting that ``arl-learn`` can override is declared with ``setting(default, flag="--num-envs",
help=...)``: the flag's name, its help and its default live with the field. ``cli_flags(model)``
reads them back from the run options model (its own fields and those of its sections, one level
down) for ``ml_arl.cli.learn``, which builds argparse from them and routes typed flags to their section.
A section field may carry ``flag_group=`` (``section(...)``): the argparse group its flags go in.

Imports nothing from the rest of the settings package (the model is passed in).
"""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional, Union

from pydantic import BaseModel, Field
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined


def setting(
    default: Any = PydanticUndefined,
    *,
    flag: Optional[str] = None,
    help: Optional[str] = None,
    metavar: Optional[str] = None,
    remainder: bool = False,
    **field: Any,
) -> Any:
    """``Field(default, **field)`` for a setting; with ``flag``, the arl-learn flag that overrides
    it, ``help`` its help line (the default is appended to it in --help), ``metavar`` its value's
    name, ``remainder`` True for a flag that takes the rest of the command line."""
    extra: dict[str, Any] = {}
    if flag is not None:
        extra["flag"] = flag
        if metavar is not None:
            extra["metavar"] = metavar
        if remainder:
            extra["remainder"] = True
    return Field(default, description=help, json_schema_extra=extra or None, **field)


def section(factory: Callable[[], Any], *, flag_group: Optional[str] = None) -> Any:
    """A section of the run options (a nested settings model), made by ``factory`` when the config
    leaves it out; ``flag_group`` titles the --help group of its flags (none: the main list)."""
    return Field(default_factory=factory, json_schema_extra={"flag_group": flag_group} if flag_group else None)


@dataclass(frozen=True)
class CliFlag:
    """One flag: ``option`` (``--num-envs``) sets ``section.name`` (section "" = the top level)."""

    option: str
    section: str
    name: str  # the field, and argparse's dest
    help: str  # with "(default: ...)" appended where there is a default to show
    type: Optional[type]  # int, float or str; None for a switch or a remainder
    switch: bool  # a bool setting: the flag takes no value and sets True
    remainder: bool  # takes everything after it
    metavar: Optional[str]
    group: Optional[str]  # argparse group title; None for the main list

    def add_to(self, parser: Union[argparse.ArgumentParser, argparse._ArgumentGroup]) -> None:
        """Add this flag to ``parser`` (or one of its groups)."""
        kwargs: dict[str, Any] = {"dest": self.name, "help": self.help}
        if self.switch:
            kwargs["action"] = "store_true"
        elif self.remainder:
            kwargs["nargs"] = argparse.REMAINDER
        elif self.type is not None and self.type is not str:
            kwargs["type"] = self.type
        if self.metavar is not None:
            kwargs["metavar"] = self.metavar
        parser.add_argument(self.option, **kwargs)


def _extra(field: FieldInfo) -> dict[str, Any]:
    extra = field.json_schema_extra
    return extra if isinstance(extra, dict) else {}


def _value_type(annotation: Any) -> Any:
    """The value type under Optional[...] and Annotated[...]."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin is Union or origin is types.UnionType:
            others = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(others) != 1:
                return annotation
            annotation = others[0]
        else:
            return annotation


def _show_default(value: Any) -> str:
    return format(value, "g") if isinstance(value, float) else str(value)


def _flag(section_name: str, name: str, field: FieldInfo, group: Optional[str]) -> Optional[CliFlag]:
    extra = _extra(field)
    option = extra.get("flag")
    if not isinstance(option, str):
        return None
    value_type = _value_type(field.annotation)
    remainder = bool(extra.get("remainder"))
    switch = value_type is bool
    if not (switch or remainder or value_type in (int, float, str)):
        raise TypeError(f"{section_name}.{name}: a flag needs a bool, int, float or str setting, not {value_type}")
    if switch and field.default is not False:
        raise TypeError(f"{section_name}.{name}: a switch flag sets True, so the setting's default must be False")
    help_text = field.description or ""
    default = field.get_default(call_default_factory=True)
    if not switch and default is not None:
        help_text = f"{help_text} (default: {_show_default(default)})"
    return CliFlag(
        option=option, section=section_name, name=name, help=help_text,
        type=None if switch or remainder else value_type, switch=switch, remainder=remainder,
        metavar=extra.get("metavar"), group=group,
    )


def cli_flags(model: type[BaseModel]) -> list[CliFlag]:
    """Every flag declared on ``model``'s fields and on its sections' fields, in field order."""
    flags: list[CliFlag] = []
    for name, field in model.model_fields.items():
        own = _flag("", name, field, None)
        if own is not None:
            flags.append(own)
        sub = field.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            group = _extra(field).get("flag_group")
            flags += [f for n, f_info in sub.model_fields.items() if (f := _flag(name, n, f_info, group)) is not None]
    seen: set[str] = set()
    for flag in flags:
        if flag.name in seen:
            raise TypeError(f"two flags set a setting named {flag.name!r}; argparse needs one dest per flag")
        seen.add(flag.name)
    return flags
