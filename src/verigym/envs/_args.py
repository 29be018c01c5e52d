"""One-line checks of the built-in environments' arguments: ``int_arg`` (an integer in a range)
and ``choice_arg`` (one of a list), each raising ``EnvArgError`` with the environment's and the
argument's name. (Was ``envs/_collection.py``; oracles are handed their task by ``envs.procedural``.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from verigym.envs.registry import EnvArgError

__all__ = ["choice_arg", "int_arg"]


def int_arg(env: str, name: str, value: Any, low: int, high: int) -> int:
    """``value`` if it is an integer in ``[low, high]``, else a one-line ``EnvArgError``."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise EnvArgError(f"{env}: {name} must be an integer from {low} to {high}, got {value!r}")
    return value


def choice_arg(env: str, name: str, value: Any, choices: Sequence[str]) -> str:
    """``value`` if it is one of ``choices``, else a one-line ``EnvArgError``."""
    if value not in choices:
        raise EnvArgError(f"{env}: {name} must be one of {', '.join(choices)}, got {value!r}")
    return str(value)
