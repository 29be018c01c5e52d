"""The token cursor of the math grader's hand-written readers (``_shared._reader``,
``_exact_path._rational``, ``_demanded._written``): tokens, a position, and the exception a reader
stops on when the text is not one it reads."""

from __future__ import annotations

import re
from typing import ClassVar

__all__ = ["Cursor", "scan"]


def scan(pattern: re.Pattern[str], s: str, stop: type[Exception]) -> list[re.Match[str]]:
    """``pattern``'s matches from the start of ``s``, each where the last ended; anything but blanks
    left unmatched raises ``stop``."""
    found: list[re.Match[str]] = []
    pos = 0
    while pos < len(s):
        m = pattern.match(s, pos)
        if m is None:
            if s[pos:].strip():
                raise stop
            break
        found.append(m)
        pos = m.end()
    return found


class Cursor:
    """``toks`` read from position ``i`` on; a subclass names the exception it stops on (``stop``)."""

    stop: ClassVar[type[Exception]]

    def __init__(self, toks: list[str]) -> None:
        self.toks = toks
        self.i = 0

    def peek(self, k: int = 0) -> str | None:
        return self.toks[self.i + k] if self.i + k < len(self.toks) else None

    def take(self, want: str | None = None) -> str:
        t = self.peek()
        if t is None or (want is not None and t != want):
            raise self.stop
        self.i += 1
        return t
