"""What libraries print (warnings, transformers' log lines, load bars) kept out of a user's terminal.

The CLI calls ``capture(command, verbose=...)`` before any command runs. From then on Python warnings
and the ``transformers`` loggers are held in memory and written to the run's ``library.log`` once a
command names its run directory (``to_run_dir``), or at exit to ``$VERIGYM_HOME/logs/<command>.log``;
load bars are off. ``--verbose`` shows all of it on stderr as well. A library user who never calls
``capture`` sees the libraries as they are.

``strict_deprecations()`` (set by the test suite, and in CLI processes by
``VERIGYM_STRICT_DEPRECATIONS=1``) makes a ``FutureWarning`` or ``DeprecationWarning`` that transformers,
torch or peft raise on a call verigym made an error, so the next deprecation is found in CI, not by users.
A warning a library raises on its own calls into another (peft into transformers) is left alone.
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.machinery
import logging
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any, TextIO

__all__ = ["capture", "home", "strict_deprecations", "to_run_dir"]

STRICT_ENV = "VERIGYM_STRICT_DEPRECATIONS"
_WATCHED = ("transformers", "torch", "peft")
_DISPATCH = ("torch", "functools", "contextlib", "accelerate")  # frames between a call and its library


def home() -> Path:
    """verigym's own directory: ``$VERIGYM_HOME``, default ``~/.verigym``."""
    return Path(os.environ.get("VERIGYM_HOME") or "~/.verigym").expanduser()


class _Sink:
    """Library lines: held until a file is named, then appended there (and echoed when verbose)."""

    def __init__(self, command: str, verbose: bool) -> None:
        self.command, self.verbose = command, verbose
        self.held: list[str] = []
        self.path: Path | None = None
        self.file: TextIO | None = None

    def write(self, line: str) -> None:
        line = line.rstrip("\n") + "\n"
        if self.verbose:
            sys.stderr.write(line)
        self.held.append(line)
        if self.path is not None:
            self.flush()

    def flush(self) -> None:
        """Append what is held to ``path`` (created at the first line, so a quiet run leaves no file)."""
        if self.path is None or not self.held:
            return
        try:
            if self.file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.file = self.path.open("a", encoding="utf-8")
            self.file.writelines(self.held)
            self.file.flush()
        except OSError:
            return
        self.held = []

    def close(self) -> None:
        if self.path is None:
            self.path = home() / "logs" / f"{self.command}.log"
        self.flush()
        if self.file is not None:
            self.file.close()


class _Handler(logging.Handler):
    def __init__(self, sink: _Sink) -> None:
        super().__init__(logging.INFO)
        self.sink = sink
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.sink.write(self.format(record))


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``hook`` once ``transformers`` is imported (it sets its stderr handler up at import)."""

    def __init__(self, hook: Any) -> None:
        self.hook = hook

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if fullname != "transformers":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        loader, hook = spec.loader, self.hook

        class _Loader(importlib.abc.Loader):
            def create_module(self, spec: Any) -> Any:
                return loader.create_module(spec)

            def exec_module(self, module: ModuleType) -> None:
                loader.exec_module(module)
                hook()

        spec.loader = _Loader()
        return spec


_sink: _Sink | None = None


def capture(command: str, *, verbose: bool = False) -> None:
    """Route library warnings, log lines and load bars away from the terminal (module doc)."""
    global _sink
    if _sink is not None:
        return
    sink = _sink = _Sink(command, verbose)
    atexit.register(sink.close)
    if not verbose:
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # transformers' "Loading weights" bar too

    def show(
        message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None
    ) -> None:
        sink.write(warnings.formatwarning(message, category, filename, lineno, line))

    warnings.showwarning = show
    if "transformers" in sys.modules:
        _route_transformers(sink)
    else:
        sys.meta_path.insert(0, _AfterImport(lambda: _route_transformers(sink)))
    if os.environ.get(STRICT_ENV) == "1":
        strict_deprecations()


def _route_transformers(sink: _Sink) -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity(logging.INFO if sink.verbose else logging.WARNING)
    root = logging.getLogger("transformers")
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.addHandler(_Handler(sink))
    if not sink.verbose:
        hf_logging.disable_progress_bar()


def to_run_dir(run_dir: str | Path) -> None:
    """Write the held library lines, and every later one, to ``run_dir/library.log`` (CLI only)."""
    if _sink is not None and _sink.path is None:
        _sink.path = Path(run_dir) / "library.log"
        _sink.flush()


# ---- deprecations as errors ---------------------------------------------------------------------


def _package(frame: FrameType) -> str:
    return str(frame.f_globals.get("__name__", "")).partition(".")[0]


def _called_by_verigym(frame: FrameType | None) -> bool:
    """``frame`` raised the warning: is the first caller outside its library (and torch's dispatch) ours?"""
    if frame is None or (emitter := _package(frame)) not in _WATCHED:
        return False
    while frame is not None and _package(frame) in (emitter, *_DISPATCH):
        frame = frame.f_back
    return frame is not None and _package(frame) == "verigym"


def strict_deprecations() -> None:
    """Deprecations that transformers, torch or peft raise on verigym's own calls become errors."""
    if getattr(warnings.warn, "_verigym_strict", False):
        return
    original = warnings.warn

    def warn(message: Any, category: Any = None, stacklevel: int = 1, source: Any = None, **kw: Any) -> None:
        kind = category or (type(message) if isinstance(message, Warning) else UserWarning)
        if issubclass(kind, (FutureWarning, DeprecationWarning)) and _called_by_verigym(sys._getframe(1)):
            raise kind(f"verigym calls a deprecated API: {message}")
        original(message, category, stacklevel + 1, source, **kw)

    warn._verigym_strict = True  # type: ignore[attr-defined]
    warnings.warn = warn
