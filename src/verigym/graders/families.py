"""The grader-family registry: each family declares itself, with its suites and its bench verdict.

A family's module declares ``BENCH = GraderFamily(name, verdict, suites=..., ...)`` beside its
``bench_verdict``; nothing else lists it. The families are a ``verigym.registry.Registry``
(``FAMILIES``), so a ``verigym.plugins`` package adds one with ``register_family``.
``find_family(name)`` looks, in order, at families registered at run time (``register_family``), at
``verigym.graders.<name>`` when that module or package exists (a family is found under its own name,
importing that one module), at a dotted module path (its ``BENCH``, or the older convention of
module-level ``bench_verdict`` / ``SUITE_FIELDS`` / ``bench_warmup`` / ``check_suite_line``), and last
at every public module of ``verigym.graders`` and every public module of a family package that
declares a top-level ``BENCH`` (``swe`` in ``code/swe.py``; ``grader_families()``, which imports them
all: only for listing and for the error message).

Graders never import environments. An environment whose graders need the environment itself to be
measured (``repo_fix`` replays episodes through its tools) declares its family on its class, as
``grader_family``, and ``verigym.envs.registry.load_grader_family`` finds it there.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any

from verigym.registry import Registry, UnknownNameError

__all__ = [
    "FAMILIES",
    "GraderFamily",
    "UnknownFamilyError",
    "find_family",
    "grader_families",
    "register_family",
]


class UnknownFamilyError(UnknownNameError):
    """No grader family has this name (or the module named has no family)."""


@dataclass(frozen=True)
class GraderFamily:
    """A grader family as verifier-bench runs it.

    ``verdict(line)`` accepts (True) or rejects one suite line and raises on an infrastructure
    error; ``suites`` are its labeled suites' file names under ``tests/suites/``; ``fields`` the
    keys every line must have; ``check_line(line)`` raises ``ValueError`` for a malformed line;
    ``warmup()`` or ``warmup(jobs)`` runs once before timing. ``source`` is the module that
    declares it (set when found), which a bench child process imports to find it again.
    """

    name: str
    verdict: Callable[[dict[str, Any]], bool]
    suites: tuple[str, ...] = ()
    fields: tuple[str, ...] = ()
    warmup: Callable[..., Any] | None = None
    check_line: Callable[[dict[str, Any]], None] | None = None
    source: str = ""


_SKIP = frozenset({"bench", "families"})  # graders' public modules that are not families
_HERE = Path(__file__).parent


def _candidates() -> list[str]:
    """The modules that may declare a family: each public module or package of ``verigym.graders``,
    then each public module of those packages whose source declares a top-level ``BENCH``."""
    out: list[str] = []
    for info in pkgutil.iter_modules([str(_HERE)]):  # verigym.graders, not imported
        if info.name.startswith("_") or info.name in _SKIP:
            continue
        out.append(f"verigym.graders.{info.name}")
        if info.ispkg:
            for path in sorted((_HERE / info.name).glob("[!_]*.py")):
                if re.search(r"^BENCH\s*=", path.read_text(encoding="utf-8"), flags=re.MULTILINE):
                    out.append(f"verigym.graders.{info.name}.{path.stem}")
    return out


def _scan() -> dict[str, GraderFamily]:
    """The families of ``verigym.graders``: each candidate module is imported and its ``BENCH`` read."""
    out: dict[str, GraderFamily] = {}
    for path in _candidates():
        module = _import(path)
        family = None if module is None else _declared(module)
        if family is not None and family.name not in out:
            out[family.name] = family
    return out


FAMILIES: Registry[GraderFamily] = Registry(
    "grader family", builtins=lambda: _scan(), error=UnknownFamilyError, sort_builtins=True
)
"""Every grader family by name (``verigym.registry.Registry``): those of ``verigym.graders`` (found by
importing its public modules, only when a listing or an unknown name needs them), then those
registered (``register_family``) or added by a ``verigym.plugins`` package."""


def register_family(family: GraderFamily) -> GraderFamily:
    """Make ``family`` findable by its name in this process (a family outside ``verigym.graders``).

    Its ``source`` defaults to its verdict's module, which must declare it as ``BENCH`` for a bench
    child process to find it again."""
    family = replace(family, source=family.source or family.verdict.__module__)
    FAMILIES.register(family.name, family)
    return family


def _declared(module: ModuleType) -> GraderFamily | None:
    family = getattr(module, "BENCH", None)
    if isinstance(family, GraderFamily):
        return replace(family, source=family.source or module.__name__)
    verdict = getattr(module, "bench_verdict", None)  # the older, attribute-by-attribute convention
    if not callable(verdict):
        return None
    warm, check = getattr(module, "bench_warmup", None), getattr(module, "check_suite_line", None)
    return GraderFamily(
        name=module.__name__.rpartition(".")[2],
        verdict=verdict,
        fields=tuple(getattr(module, "SUITE_FIELDS", ())),
        warmup=warm if callable(warm) else None,
        check_line=check if callable(check) else None,
        source=module.__name__,
    )


def _import(path: str) -> ModuleType | None:
    try:
        return importlib.import_module(path)
    except ModuleNotFoundError as exc:
        if exc.name and path.startswith(exc.name):
            return None  # the module itself is missing, not one it imports
        raise


def grader_families() -> dict[str, GraderFamily]:
    """Every family: those of ``verigym.graders`` (each of its public modules is imported), those
    registered at run time and those of ``verigym.plugins`` packages, by name."""
    return dict(sorted(FAMILIES.items()))


def find_family(name: str) -> GraderFamily:
    """The family called ``name`` (or declared by the module at the dotted path ``name``)."""
    registered = FAMILIES.registered().get(name)
    if isinstance(registered, GraderFamily):
        return registered
    if name.isidentifier() and ((_HERE / f"{name}.py").is_file() or (_HERE / name / "__init__.py").is_file()):
        module = _import(f"verigym.graders.{name}")
        family = None if module is None else _declared(module)
        if family is not None and family.name == name:
            return family
    elif "." in name:
        module = _import(name)
        if module is None:
            raise UnknownFamilyError(f"grader family {name!r} is not available (no module {name})")
        family = _declared(module)
        if family is None:
            raise UnknownFamilyError(
                f"grader family {name!r}: {name} has no bench_verdict(line) function yet"
            )
        return family
    found = FAMILIES.find(name)  # every built-in, then the plugins
    if found is not None:
        return found
    raise FAMILIES.unknown(name)
