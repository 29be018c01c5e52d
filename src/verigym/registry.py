"""One registry primitive for every extension axis: ``Registry[T]`` and the ``verigym.plugins`` group.

Environments, selection methods, losses, grader families and tool-call formats are each a
``Registry``: ``register(name, value)`` adds one (``value`` may be a ``"module:attr"`` string, imported
only when first asked for), ``get(name)`` returns it, ``names()`` lists them, and an unknown name is one
``UnknownNameError`` (a ``KeyError``, ``LookupError`` and ``ValueError``) whose message lists the known
names. The built-ins of an axis are found lazily, the first time the registry is used: ``builtins`` is
a mapping of ``name -> value or "module:attr"``, or a function returning one (it may also import modules
that register themselves); built-ins come first in ``names()``, then what was registered after.

A package adds to any axis from outside through one entry-point group, ``verigym.plugins``::

    [project.entry-points."verigym.plugins"]
    my-plugin = "my_package.verigym_plugin"          # a module that registers on import
    other = "my_package.plugin:register"             # or a function called with no arguments

The group is loaded once per process, when a registry is asked for a name it does not know (or for
its names); a plugin that fails to load is reported with a warning, never a crash, and listed by
``plugin_errors()``.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar, cast

__all__ = [
    "PLUGIN_GROUP",
    "Registry",
    "UnknownNameError",
    "forget_plugins",
    "import_target",
    "load_plugins",
    "plugin_errors",
]

PLUGIN_GROUP = "verigym.plugins"
"""The one entry-point group through which a package adds environments, selectors, losses, grader
families and tool formats."""

T = TypeVar("T")

Builtins = Mapping[str, Any] | Callable[[], Mapping[str, Any] | None]


class UnknownNameError(KeyError, ValueError):
    """No entry of a registry has this name; the message (one line) lists the known names.

    ``kind`` names the axis (``environment``, ``tool format``...), ``name`` what was asked for and
    ``known`` the names there are. Each axis raises its own subclass, so older ``except`` clauses hold.
    """

    def __init__(self, message: str, *, kind: str = "", name: str = "", known: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.kind = kind
        self.name = name
        self.known = tuple(known)

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0]) if self.args else ""


def import_target(spec: str) -> Any:
    """The object ``"package.module:attr"`` names (``attr`` may be dotted). Raises ``ImportError`` or
    ``AttributeError`` as importing and looking up do."""
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise ValueError(f"{spec!r} is not 'package.module:attr'")
    target: Any = importlib.import_module(module)
    for part in attr.split("."):
        target = getattr(target, part)
    return target


_plugins_lock = threading.RLock()
_plugins_loaded = False
_plugin_errors: dict[str, str] = {}
_loaded: set[str] = set()


def load_plugins(*, again: bool = False) -> None:
    """Load every ``verigym.plugins`` entry point once (``again``: reload the list, for tests that
    install a plugin at run time). A module registers on import; a callable is called."""
    global _plugins_loaded
    with _plugins_lock:
        if _plugins_loaded and not again:
            return
        _plugins_loaded = True  # before loading: a plugin that asks a registry does not recurse
        for ep in importlib.metadata.entry_points(group=PLUGIN_GROUP):
            key = f"{ep.name} = {ep.value}"
            if key in _plugin_errors or (again and key in _loaded):
                continue
            try:
                target = ep.load()
                if callable(target) and not isinstance(target, type):
                    target()
                _loaded.add(key)
            except Exception as exc:  # a broken plugin is said, never a crash of verigym
                _plugin_errors[key] = f"{type(exc).__name__}: {exc}"
                warnings.warn(f"verigym plugin {key}: {_plugin_errors[key]}", RuntimeWarning, stacklevel=2)


def forget_plugins() -> None:
    """Read the ``verigym.plugins`` group afresh on the next unknown name (for tests and notebooks
    that install or remove a plugin while running; what was registered stays registered)."""
    global _plugins_loaded
    with _plugins_lock:
        _plugins_loaded = False
        _loaded.clear()
        _plugin_errors.clear()


def plugin_errors() -> dict[str, str]:
    """The ``verigym.plugins`` entry points that failed to load, with why (one line each)."""
    return dict(_plugin_errors)


class Registry(Generic[T]):
    """Named entries of one kind (module doc). ``error`` is the ``UnknownNameError`` subclass an
    unknown name raises; ``make`` turns a loaded value into the entry (a class into an instance...);
    ``sort_builtins`` lists the built-ins by name; ``quick(name)`` finds one built-in cheaply (its
    value or None) before the built-ins are all looked for (environments: the module named like it)."""

    def __init__(
        self,
        kind: str,
        *,
        builtins: Builtins | None = None,
        error: type[UnknownNameError] = UnknownNameError,
        make: Callable[[Any], T] | None = None,
        sort_builtins: bool = False,
        quick: Callable[[str], Any] | None = None,
    ) -> None:
        self.kind = kind
        self.error = error
        self._builtins = builtins
        self._make = make
        self._sort = sort_builtins
        self._quick = quick
        self._entries: dict[str, Any] = {}
        self._resolved: dict[str, T] = {}
        self._builtin_names: tuple[str, ...] = ()
        self._state = "new"  # new -> loading -> ready
        self._lock = threading.RLock()

    # ---- built-ins ----------------------------------------------------------------------------

    def _ready(self) -> None:
        if self._state != "new":
            return
        with self._lock:
            if self._state != "new":
                return
            self._state = "loading"
            before = dict(self._entries)
            found = dict((self._builtins() if callable(self._builtins) else self._builtins) or {})
            added = {k: v for k, v in self._entries.items() if k not in before}  # registered on import
            merged: dict[str, Any] = {**found, **added}
            names = sorted(merged) if self._sort else list(merged)
            self._builtin_names = tuple(names)
            # a name registered before the built-ins were looked for keeps its value
            self._entries = {**{n: before.get(n, merged[n]) for n in names}, **before}
            self._state = "ready"

    def registered(self) -> dict[str, Any]:
        """What is registered so far, as given (``"module:attr"`` strings unimported), looking for no
        built-in or plugin: for a built-ins finder that imports modules which register themselves."""
        with self._lock:
            return dict(self._entries)

    @property
    def builtin_names(self) -> tuple[str, ...]:
        """The built-ins' names (found without importing them where the axis allows)."""
        self._ready()
        return self._builtin_names

    # ---- the registry -------------------------------------------------------------------------

    def register(self, name: str, value: T | str, *, replace: bool = True) -> T | str:
        """Add ``value`` (or a ``"module:attr"`` string, imported when first asked for) as ``name``;
        with ``replace`` False a name already there is a ``ValueError``."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {self.kind} name must be a non-empty string")
        if isinstance(value, str) and ":" not in value:
            raise ValueError(f"{self.kind} {name!r}: {value!r} is not 'package.module:attr'")
        if not replace:
            self._ready()
        with self._lock:
            if not replace and name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._entries[name] = value
            self._resolved.pop(name, None)
        return value

    @contextlib.contextmanager
    def scoped(self) -> Iterator[Registry[T]]:
        """Undo, on leaving, whatever was registered or removed inside (tests, a plugin tried out)."""
        self._ready()
        with self._lock:
            entries, resolved = dict(self._entries), dict(self._resolved)
        try:
            yield self
        finally:
            with self._lock:
                self._entries, self._resolved = entries, resolved

    def unregister(self, name: str) -> None:
        """Remove ``name`` (nothing when absent)."""
        with self._lock:
            self._entries.pop(name, None)
            self._resolved.pop(name, None)

    def _entry(self, name: str) -> Any | None:
        """The value ``name`` was registered or found as (None: nowhere, plugins included)."""
        with self._lock:
            if name in self._entries:
                return self._entries[name]
        if self._state == "new" and self._quick is not None:
            value = self._quick(name)
            if value is not None:
                return value
        self._ready()
        if name not in self._entries:
            load_plugins()
        return self._entries.get(name)

    def find(self, name: str) -> T | None:
        """The entry ``name``, or None when no built-in, registered entry or plugin has it."""
        if name in self._resolved:
            return self._resolved[name]
        value = self._entry(name)
        if value is None:
            return None
        if isinstance(value, str):
            value = import_target(value)
        entry = self._make(value) if self._make is not None else cast(T, value)
        with self._lock:
            if name in self._entries:
                self._resolved[name] = entry
        return entry

    def get(self, name: str, *default: Any) -> T:
        """The entry ``name``; an unknown name is ``error`` (an ``UnknownNameError``) listing the
        known names, unless a ``default`` is given (returned instead, as a mapping's ``get``)."""
        entry = self.find(name)
        if entry is None:
            if default:
                return cast(T, default[0])
            raise self.unknown(name)
        return entry

    def unknown(self, name: str) -> UnknownNameError:
        """The error for an unknown ``name``: ``unknown KIND 'NAME'; expected one of A, B, C``."""
        known = self.names()
        listing = ", ".join(known) or "none"
        return self.error(
            f"unknown {self.kind} {name!r}; expected one of {listing}", kind=self.kind, name=name, known=known
        )

    def names(self) -> tuple[str, ...]:
        """Every name: the built-ins first, then those registered or added by plugins."""
        self._ready()
        load_plugins()
        return tuple(self._entries)

    def target(self, name: str) -> str | None:
        """The ``"module:attr"`` an entry was registered as (None: registered as an object, or unknown)."""
        value = self._entry(name)
        return value if isinstance(value, str) else None

    def items(self) -> list[tuple[str, T]]:
        """Every entry, imported (``names()`` order)."""
        return [(n, self.get(n)) for n in self.names()]

    def values(self) -> list[T]:
        return [entry for _, entry in self.items()]

    def keys(self) -> tuple[str, ...]:
        return self.names()

    # ---- the mapping the registries were before (``TOOL_FORMATS[name]``, ``name in LOSSES``) ---

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def __setitem__(self, name: str, value: T) -> None:
        self.register(name, value)

    def __delitem__(self, name: str) -> None:
        if self.find(name) is None:
            raise self.unknown(name)
        self.unregister(name)

    def pop(self, name: str, *default: Any) -> Any:
        """Remove and return ``name`` (``default`` when given and absent)."""
        entry = self.find(name)
        if entry is None:
            if default:
                return default[0]
            raise self.unknown(name)
        self.unregister(name)
        return entry

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.find(name) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {list(self._entries)})"
