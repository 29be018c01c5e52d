"""Find environments by name: ``load_env(name, **kwargs)``, ``list_envs()``, ``register_env``.

The environments are a ``verigym.registry.Registry`` (``ENVS``). Names resolve, in order, to:
environments registered at run time with ``register_env`` (or ``ENVS.register``); the built-ins;
environments a package adds through the ``verigym.plugins`` entry-point group (a module that calls
``register_env`` on import, see ``verigym.registry``); and, deprecated, the older ``verigym.envs``
group of one environment per entry point::

    [project.entry-points."verigym.envs"]     # deprecated: use verigym.plugins
    my-env = "my_package.envs:MyEnv"

A name may be an env-server address, ``http://HOST:PORT`` (``openenv+http://`` / ``ors+http://`` to
force the protocol; several joined by commas share the sessions): ``verigym.envs.remote.RemoteEnv``.
A name may also be an import spec, ``package.module:attr`` or ``path/to/file.py:attr``, where
``attr`` is an ``Environment`` instance, class or factory function, or ``rg:DATASET`` for a
reasoning-gym dataset (``verigym.envs.builtin.rg``; needs the optional ``reasoning-gym`` package).

A built-in is a public module of ``verigym.envs.builtin`` with a public class whose body sets ``name =
"..."`` (and ``description = "..."``) as string literals: nothing lists it, and the registry reads
those two from the module's source, so nothing is imported until one is loaded (the module named
like the environment is looked at first, e.g. ``verigym.envs.builtin.wordle`` for ``wordle``).

Errors are one line for the CLI: an unknown name raises ``UnknownEnvError`` listing the known
names; keyword arguments the factory does not take, or values it rejects, raise
``EnvArgError`` naming the argument.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.metadata
import importlib.util
import inspect
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verigym.registry import PLUGIN_GROUP, Registry, UnknownNameError

if TYPE_CHECKING:
    from verigym.envs.base import Environment
    from verigym.graders.families import GraderFamily

__all__ = [
    "ENVS",
    "EnvArgError",
    "EnvError",
    "UnknownEnvError",
    "env_arguments",
    "env_defaults",
    "list_envs",
    "load_env",
    "load_grader_family",
    "register_env",
]

ENTRY_POINT_GROUP = "verigym.envs"


class EnvError(Exception):
    """An environment could not be loaded; the message is one line."""


class UnknownEnvError(EnvError, UnknownNameError):
    """No environment has this name (the registry's ``UnknownNameError``, listing the known names)."""


class EnvArgError(EnvError, ValueError):
    """An environment argument is unknown, missing or has a bad value."""


@dataclass(frozen=True)
class _Entry:
    target: str | Callable[..., Any]
    description: str


_HERE = Path(__file__).parent / "builtin"  # the built-in environments


@functools.cache
def _declared(path: Path) -> dict[str, _Entry]:
    """The environments a module of ``verigym.envs.builtin`` declares, read from its source (not imported):
    each public top-level class whose body sets ``name = "..."`` (and ``description = "..."``)."""
    out: dict[str, _Entry] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):
            continue
        literals = {
            target.id: stmt.value.value
            for stmt in node.body
            if isinstance(stmt, ast.Assign)
            and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str)
            for target in stmt.targets
            if isinstance(target, ast.Name)
        }
        if "name" in literals:
            target = f"verigym.envs.builtin.{path.stem}:{node.name}"
            out.setdefault(literals["name"], _Entry(target, literals.get("description", "")))
    return out


@functools.cache
def _builtins() -> dict[str, _Entry]:
    """Every built-in environment: those declared in the public modules of ``verigym.envs.builtin``."""
    out: dict[str, _Entry] = {}
    for path in sorted(_HERE.glob("[!_]*.py")):
        for name, entry in _declared(path).items():
            out.setdefault(name, entry)
    return out


def _builtin(name: str) -> _Entry | None:
    # The module named like the environment first (most are), so loading one reads one file.
    path = _HERE / f"{name}.py"
    if name.isidentifier() and not name.startswith("_") and path.is_file():
        entry = _declared(path).get(name)
        if entry is not None:
            return entry
    return _builtins().get(name)


def _named_like(name: str) -> str | None:
    """The built-in declared in the module named like ``name`` (most are), reading that one file."""
    path = _HERE / f"{name}.py"
    if name.isidentifier() and not name.startswith("_") and path.is_file():
        entry = _declared(path).get(name)
        if entry is not None and isinstance(entry.target, str):
            return entry.target
    return None


ENVS: Registry[Any] = Registry(
    "environment",
    builtins=lambda: {name: entry.target for name, entry in _builtins().items()},
    error=UnknownEnvError,
    quick=_named_like,
)
"""Every environment factory by name: the built-ins (found by reading their modules), then those
registered (``register_env``) or added by a ``verigym.plugins`` package."""

_DESCRIBED: dict[str, str] = {}  # descriptions given to register_env


def register_env(name: str, factory: str | Callable[..., Any], description: str = "") -> None:
    """Register ``factory`` (a callable, or an import path ``module:attr``) under ``name``.

    It takes precedence over built-ins and entry points of the same name.
    """
    if not name or not isinstance(name, str):
        raise ValueError("an environment name must be a non-empty string")
    if isinstance(factory, str) and ":" not in factory:
        raise ValueError(f"import path {factory!r} must look like 'package.module:attr'")
    ENVS.register(name, factory)
    _DESCRIBED[name] = description or _describe(factory)


def _describe(target: Any) -> str:
    if isinstance(target, str):
        return ""
    text = getattr(target, "description", None)
    if isinstance(text, str) and text:
        return text
    doc = inspect.getdoc(target) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    """The deprecated ``verigym.envs`` group (one environment per entry point)."""
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def _old_group(ep: importlib.metadata.EntryPoint) -> Any:
    warnings.warn(
        f"environment {ep.name!r} comes from the entry-point group {ENTRY_POINT_GROUP!r}, which is "
        f"deprecated: declare it in {PLUGIN_GROUP!r} (a module that calls register_env)",
        DeprecationWarning,
        stacklevel=3,
    )
    return ep.load()


def list_envs() -> dict[str, str]:
    """Every known environment name with a one-line description, sorted by name.

    Built-ins are described without importing them; plugins' and entry points' are loaded to read
    their ``description`` (a package that fails to load says so in its description).
    """
    out: dict[str, str] = {}
    for name, ep in _entry_points().items():
        try:
            out[name] = _describe(_old_group(ep)) or f"(from {ep.value})"
        except Exception as exc:
            out[name] = f"(cannot load {ep.value}: {type(exc).__name__}: {exc})"
    builtins = _builtins()
    for name in ENVS.names():
        if name in _DESCRIBED:
            out[name] = _DESCRIBED[name]
        elif name in builtins and ENVS.target(name) == builtins[name].target:
            out[name] = builtins[name].description
        else:  # added by a plugin without register_env's description
            target = ENVS.target(name)
            out[name] = f"(from {target})" if target else _describe(ENVS.get(name))
    return dict(sorted(out.items()))


def _import_attr(spec: str) -> Any:
    module_part, _, attr = spec.rpartition(":")
    if not module_part or not attr:
        raise UnknownEnvError(f"cannot load {spec!r}: expected 'package.module:attr' or 'file.py:attr'")
    if module_part.endswith(".py"):
        path = Path(module_part)
        if not path.is_file():
            raise UnknownEnvError(f"cannot load {spec!r}: {path} is not a file")
        mod_name = f"_verigym_env_{abs(hash(str(path.resolve())))}"
        module = sys.modules.get(mod_name)
        if module is None:
            loader_spec = importlib.util.spec_from_file_location(mod_name, path)
            if loader_spec is None or loader_spec.loader is None:
                raise UnknownEnvError(f"cannot load {spec!r}: {path} is not a Python file")
            module = importlib.util.module_from_spec(loader_spec)
            sys.modules[mod_name] = module
            try:
                loader_spec.loader.exec_module(module)
            except Exception:
                del sys.modules[mod_name]
                raise
    else:
        try:
            module = importlib.import_module(module_part)
        except ModuleNotFoundError as exc:
            raise UnknownEnvError(f"cannot load {spec!r}: no module named {exc.name!r}") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise UnknownEnvError(f"cannot load {spec!r}: {module_part} has no attribute {attr!r}") from None


def _is_address(name: str) -> bool:
    """Whether ``name`` is an env-server address (``verigym.envs.remote``): ``http(s)://``, optionally
    ``openenv+`` / ``ors+`` before it, several joined by commas."""
    head = name.split(",", 1)[0].strip()
    scheme = head.partition("://")[0]
    return "://" in head and scheme.rpartition("+")[2] in ("http", "https")


def _resolve(name: str) -> Any:
    if _is_address(name):  # an environment served over HTTP (OpenEnv or the Open Reward Standard)
        return functools.partial(_import_attr("verigym.envs.remote:RemoteEnv"), name)
    target = ENVS.target(name)
    if target is not None:  # a built-in or a name registered by import path: one-line import errors
        return _import_attr(target)
    factory = ENVS.find(name)
    if factory is not None:
        return factory
    ep = _entry_points().get(name)
    if ep is not None:
        return _old_group(ep)
    if name.startswith("rg:") and len(name) > 3:
        # by import path, like the built-ins (envs.rg imports this module)
        return functools.partial(_import_attr("verigym.envs.builtin.rg:rg_env"), name[3:])
    if ":" in name:
        return _import_attr(name)
    known = tuple(list_envs())
    raise UnknownEnvError(
        f"unknown environment {name!r}; expected one of {', '.join(known) or 'none'}",
        kind="environment",
        name=name,
        known=known,
    )


def _check_kwargs(name: str, factory: Callable[..., Any], kwargs: dict[str, Any]) -> None:
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):
        return
    params = {p.name: p for p in sig.parameters.values() if p.kind not in (p.VAR_POSITIONAL,)}
    takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
    named = [n for n, p in params.items() if p.kind is not p.VAR_KEYWORD]
    listing = ", ".join(named) or "none"
    if not takes_any:
        for key in kwargs:
            if key not in params:
                raise EnvArgError(f"environment {name!r} has no argument {key!r} (its arguments: {listing})")
    for pname, p in params.items():
        required = p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        if required and pname not in kwargs:
            raise EnvArgError(f"environment {name!r} needs argument {pname!r} (its arguments: {listing})")


def env_arguments(name: str) -> str:
    """The keyword arguments ``name`` accepts, as ``level=1, verbose=False`` ('' when unknown).

    Imports the environment's module (not done by ``list_envs`` for built-ins).
    """
    target = _resolve(name)
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return ""
    parts = []
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            parts.append(f"**{p.name}" if p.kind is p.VAR_KEYWORD else f"*{p.name}")
        else:
            parts.append(p.name if p.default is p.empty else f"{p.name}={p.default!r}")
    return ", ".join(parts)


def env_defaults(name: str) -> dict[str, Any]:
    """The keyword arguments of ``name``'s factory that have a default, with it ({} when unknown, or
    for an instance): what an argument is when nobody sets it. Imports the environment's module."""
    target = _resolve(name)
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return {}
    return {
        p.name: p.default
        for p in sig.parameters.values()
        if p.default is not p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }


def load_env(name: str, **kwargs: Any) -> Environment:
    """The environment called ``name`` built with ``kwargs`` (see the module docstring)."""
    from verigym.envs.base import Environment

    target = _resolve(name)
    if isinstance(target, Environment):
        if kwargs:
            raise EnvArgError(
                f"environment {name!r} is an instance and takes no arguments, got {sorted(kwargs)}"
            )
        return target
    if not callable(target):
        raise EnvError(
            f"environment {name!r} resolves to {type(target).__name__}, not an Environment or factory"
        )
    _check_kwargs(name, target, kwargs)
    try:
        env = target(**kwargs)
    except EnvArgError:
        raise
    except (TypeError, ValueError) as exc:
        raise EnvArgError(f"bad argument for environment {name!r}: {exc}") from None
    if not isinstance(env, Environment):
        raise EnvError(f"environment {name!r}: factory returned {type(env).__name__}, not an Environment")
    return env


def load_grader_family(name: str) -> GraderFamily:
    """The grader family ``name``: one of ``verigym.graders`` (``graders.families.find_family``), or
    the ``grader_family`` the environment called ``name`` declares (``repo_fix``: its grader stack,
    measured through the environment), registered so ``graders.bench.run_bench(name)`` finds it."""
    from verigym.graders.families import UnknownFamilyError, find_family, register_family

    try:
        return find_family(name)
    except UnknownFamilyError as exc:
        if name not in list_envs():
            raise
        family = getattr(_resolve(name), "grader_family", None)
        if family is None:
            raise UnknownFamilyError(f"{exc}; environment {name!r} declares no grader_family") from None
    return register_family(family)
