"""Every old import path verigym still answers, in one table, with the version that removes it.

A module that moved keeps its old path for a deprecation period: importing the old path warns
(``DeprecationWarning`` naming the new path and the removal version) and gives the same objects.
The old paths have no files: ``ALIASES`` lists them and ``install()`` (called by
``verigym/__init__.py``, so before any ``verigym.*`` import is resolved) puts a finder on
``sys.meta_path`` that builds each old module from its new one. verigym's own code never imports an
old path, and an alias is deleted from the table in the version it names
(``tests/core/test_deprecated.py`` checks all three).

An entry is the old dotted path, its new home (a module, whose public names and attributes the old
path gives, or ``{name: module}`` when the names went to several modules), the version it was
deprecated in and the version that removes it. A private module needs no alias: it is just moved.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

__all__ = ["ALIASES", "Alias", "install"]


@dataclass(frozen=True)
class Alias:
    """``old`` now lives at ``new`` (one module, or the module of each name); goes in ``removal``."""

    old: str
    new: str | Mapping[str, str]
    since: str
    removal: str

    @property
    def modules(self) -> tuple[str, ...]:
        """The modules that now hold what ``old`` gave, in order of first mention."""
        return (self.new,) if isinstance(self.new, str) else tuple(dict.fromkeys(self.new.values()))

    @property
    def message(self) -> str:
        where = self.new if isinstance(self.new, str) else " or ".join(self.modules)
        return f"{self.old} is deprecated and goes in verigym {self.removal}: import from {where}"


ALIASES: tuple[Alias, ...] = (
    Alias("verigym.envs.extras", "verigym.envs.prepare", since="0.1", removal="0.3"),
    Alias("verigym.policies.chat", "verigym.policies.local.chat", since="0.1", removal="0.3"),
    Alias("verigym.policies.lora", "verigym.policies.local.lora", since="0.1", removal="0.3"),
    Alias(
        "verigym.train.sampling",
        {
            "DifficultyTracker": "verigym.train.group_filters",
            "has_signal": "verigym.train.group_filters",
            "lead_length_rewards": "verigym.train.shaping",
            "soft_overlong": "verigym.train.shaping",
            "token_cost": "verigym.train.shaping",
        },
        since="0.1",
        removal="0.3",
    ),
    Alias(
        "verigym.mcp_tools",
        dict.fromkeys(("MCPError", "MCPToolError", "MCPTools"), "verigym.tools"),  # its three names only
        since="0.1",
        removal="0.3",
    ),
    Alias("verigym.graders.sandbox", "verigym.graders.code.sandbox", since="0.1", removal="0.3"),
    Alias("verigym.graders.swe", "verigym.graders.code.swe", since="0.1", removal="0.3"),
)
"""The old paths still answered; one line each (``docs/architecture.md`` points here)."""

_BY_OLD: dict[str, Alias] = {a.old: a for a in ALIASES}


def _fill(module: ModuleType, alias: Alias) -> None:
    """Give ``module`` (the old path) the objects of ``alias``'s new home."""
    module.__doc__ = (
        f"Deprecated path, kept until verigym {alias.removal}: moved to {' and '.join(alias.modules)}. "
        "Import from there."
    )
    if isinstance(alias.new, str):
        target = importlib.import_module(alias.new)
        names: Sequence[str] = list(getattr(target, "__all__", ()))
        for name in names:
            setattr(module, name, getattr(target, name))

        def __getattr__(name: str) -> Any:  # the rest of the module's attributes, as before
            return getattr(target, name)

        module.__getattr__ = __getattr__  # type: ignore[method-assign]
    else:
        names = sorted(alias.new)
        for name, where in alias.new.items():
            setattr(module, name, getattr(importlib.import_module(where), name))
    module.__all__ = list(names)  # type: ignore[attr-defined]


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old paths of ``ALIASES`` and builds each, with its warning, from its new home."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _BY_OLD:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None  # the default module

    def exec_module(self, module: ModuleType) -> None:
        alias = _BY_OLD[module.__name__]
        # stacklevel 2 is the importing line: warnings skips importlib's own frames
        warnings.warn(alias.message, DeprecationWarning, stacklevel=2)
        _fill(module, alias)


def install() -> None:
    """Answer the old paths from now on in this process (idempotent)."""
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
