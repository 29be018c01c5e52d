"""Strictness modes of the math grader and their parsing (no heavy imports)."""

from __future__ import annotations

import functools
import re

__all__ = ["MODES", "parse_mode"]

MODES = ("equivalent", "simplest_form", "exact_decimal", "with_units")

_MODE = re.compile(r"\s*([a-z_]+)\s*(?:[:(]\s*(\d+)\s*\)?)?\s*")


@functools.lru_cache(maxsize=256)  # a few mode strings, checked on every call
def parse_mode(mode: str) -> tuple[str, int | None]:
    """``"exact_decimal:2"`` / ``"exact_decimal(2)"`` -> ("exact_decimal", 2); validates the name."""
    m = _MODE.fullmatch(mode or "equivalent")
    if not m or m.group(1) not in MODES:
        raise ValueError(f"unknown math mode {mode!r}; expected one of {', '.join(MODES)} (exact_decimal:N)")
    places = int(m.group(2)) if m.group(2) else None
    if m.group(1) == "exact_decimal" and places is None:
        raise ValueError("mode exact_decimal needs a number of places, e.g. 'exact_decimal:2'")
    return m.group(1), places
