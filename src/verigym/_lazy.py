"""Lazy package names (PEP 562): a package ``__init__`` says where each public name lives and
``__getattr__ = lazy_getattr(__name__, where)`` imports that module the first time the name is asked
for, so importing the package loads nothing heavy. Imports nothing of verigym.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_getattr"]


def lazy_getattr(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``where[name]`` is the module that defines ``name``
    (absolute, or relative to ``package`` when it starts with a dot)."""

    def __getattr__(name: str) -> Any:
        if name in where:
            return getattr(importlib.import_module(where[name], package), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
