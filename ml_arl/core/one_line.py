"""Text for one-line messages: what an error says, fit for a log line or a terminal."""

from __future__ import annotations

from typing import Union


def one_line(text: str) -> str:
    """A message as one printable line: line breaks and other control characters shown escaped
    (what arl-learn prints last: nothing of a hostile file name or value is hidden or run)."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def squeeze(what: Union[str, BaseException], limit: int = 0) -> str:
    """An error's text with every run of whitespace (line breaks included) as one space, cut to
    ``limit`` characters when given; an exception without text gives its type's name."""
    text = " ".join(str(what).split())
    if not text and isinstance(what, BaseException):
        text = type(what).__name__
    return text[: limit - 3] + "..." if limit and len(text) > limit else text
