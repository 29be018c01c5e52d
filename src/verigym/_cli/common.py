"""Shared CLI helpers: one-line errors with exit code 2, the rich console, key=value parsing."""

from __future__ import annotations

from typing import Any, NoReturn

import typer
from rich.console import Console

__all__ = ["console", "fail", "parse_kv"]

console = Console(stderr=False)
_err = Console(stderr=True)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print one clear line (no traceback) and exit with ``code``."""
    _err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _coerce(value: str) -> Any:
    lowered = value.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


def parse_kv(items: list[str] | None, flag: str) -> dict[str, Any]:
    """Parse repeated ``key=value`` flags; ints, floats and booleans are converted."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            fail(f"{flag} {item!r}: expected key=value")
        out[key.strip()] = _coerce(value.strip())
    return out
