"""Reading user files (configs, datasets) with one-line errors that name the file and, where it helps,
the line: a directory given for a file, bytes that are not UTF-8, TOML that does not parse, a JSON
Lines row that is not JSON (``read_jsonl``: ``path:line: invalid JSON (... at column N)``).

Writing run files: ``write_atomic`` (and ``write_json``) is the one way a run's files (configs,
summaries, reports, checkpoint pointers) are written: a temporary file in the same folder, flushed
and synced, then ``os.replace``d over the target, so a kill at any moment leaves the old file or the
new one, never an empty or half-written one; content that has not changed is not rewritten.
Appending (``results.jsonl``, ``metrics.jsonl``: append, flush) is the only other way, and
``tests/core/test_run_files.py`` holds the code to that.

The file layer's one fault-injection point: ``file_op(op, path)`` announces each operation of a run's
checkpoints and resume (``write_atomic``/``open_atomic`` announce "write" and "replace"; ``replace``,
``remove_tree``, ``remove_file`` and ``make_dir`` their own; a caller announces what it writes or reads
another way). A hook installed with ``file_hook`` (tests, soaks) may raise there, as a kill or a full
disk would, so every kill point of a checkpoint cycle can be tried in turn, without timing."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import tomllib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "FileHook",
    "FileProblem",
    "file_hook",
    "file_op",
    "iter_lines",
    "make_dir",
    "open_atomic",
    "parse_jsonl",
    "read_jsonl",
    "read_toml",
    "remove_file",
    "remove_tree",
    "replace",
    "write_atomic",
    "write_json",
]


class FileProblem(ValueError):
    """A user file that cannot be read as asked; the message is one line naming the file."""


def _check(path: Path, where: str) -> None:
    if path.is_dir():
        raise FileProblem(f"{where}: is a directory, not a file")
    if not path.exists():
        raise FileProblem(f"{where}: no such file")


def _decode(data: bytes, where: str, line: int | None = None) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        at = line if line is not None else data[: exc.start].count(b"\n") + 1
        raise FileProblem(f"{where}:{at}: not UTF-8 text (byte 0x{data[exc.start]:02x})") from None


def read_toml(path: str | Path, where: str | None = None) -> dict[str, Any]:
    """The tables of a TOML file; every failure is one ``FileProblem`` line starting with ``where``."""
    path = Path(path)
    where = where or str(path)
    _check(path, where)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise FileProblem(f"{where}: cannot read ({exc.strerror})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise FileProblem(
            f"{where}: line {line}: not UTF-8 text (byte 0x{data[exc.start]:02x}), not a TOML file"
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FileProblem(f"{where}: not valid TOML: {exc}") from None


def iter_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of each line of a UTF-8 text file; a line that is not UTF-8 is a
    ``FileProblem`` naming ``path:line``."""
    path = Path(path)
    _check(path, str(path))
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise FileProblem(f"{path}: cannot read ({exc.strerror})") from None
    with fh:
        for number, raw in enumerate(fh, start=1):
            yield number, _decode(raw, str(path), number)


def read_jsonl(
    path: str | Path, *, error: type[Exception] = FileProblem, objects: bool = False
) -> Iterator[tuple[str, Any]]:
    """``("path:line", value)`` of each non-blank line of a JSON Lines file, read line by line.

    Every failure is one ``error`` line (``FileProblem`` unless a caller names its own type, e.g. a
    dataset's ``DatasetError``): the file's problems as ``iter_lines`` words them, a line that does not
    parse as ``path:line: invalid JSON (msg at column N)``, and with ``objects`` a line that is not a
    JSON object as ``path:line: expected a JSON object, got TYPE``.
    """
    path = Path(path)
    try:
        yield from parse_jsonl(iter_lines(path), path, error=error, objects=objects)
    except FileProblem as exc:
        if isinstance(exc, error):
            raise
        raise error(str(exc)) from None


def parse_jsonl(
    lines: Iterable[tuple[int, str]],
    source: str | Path,
    *,
    error: type[Exception] = FileProblem,
    objects: bool = False,
) -> Iterator[tuple[str, Any]]:
    """``("source:line", value)`` of each non-blank ``(line number, text)``, with ``read_jsonl``'s
    errors for a line (for text read another way, e.g. decompressed)."""
    for number, line in lines:
        if not line.strip():
            continue
        where = f"{source}:{number}"
        try:
            value = json.loads(line.rstrip("\r\n"))  # a column within the line, as written
        except json.JSONDecodeError as exc:
            raise error(f"{where}: invalid JSON ({exc.msg} at column {exc.colno})") from None
        if objects and not isinstance(value, dict):
            raise error(f"{where}: expected a JSON object, got {type(value).__name__}")
        yield where, value


def write_atomic(path: str | Path, data: str | bytes, *, encoding: str = "utf-8") -> bool:
    """Replace ``path`` with ``data`` atomically (a temporary file in the same folder, synced, then
    ``os.replace``); a file that already holds exactly ``data`` is left alone. Returns whether it
    wrote. A hard-linked copy of the old file elsewhere keeps the old content."""
    path = Path(path)
    raw = data.encode(encoding) if isinstance(data, str) else data
    try:
        if path.stat().st_size == len(raw) and path.read_bytes() == raw:
            return False
    except OSError:  # missing (or unreadable: the replace below says why)
        pass
    with open_atomic(path, text=False) as fh:
        fh.write(raw)
    return True


def write_json(path: str | Path, value: object, *, indent: int | None = 2, default: object = None) -> bool:
    """``write_atomic`` of ``value`` as JSON (and a final newline) that is always valid JSON: each
    non-finite float becomes ``null`` and, when ``value`` is a dict, the replaced paths are listed
    under ``"non_finite"`` (``{path: "inf"}``), so a reader sees why a number is missing."""
    from verigym._numbers import json_safe

    found: dict[str, str] = {}
    safe = json_safe(value, found=found)
    if found and isinstance(safe, dict):
        safe["non_finite"] = {**safe.get("non_finite", {}), **found}
    text = json.dumps(safe, indent=indent, allow_nan=False, default=default)  # type: ignore[arg-type]
    return write_atomic(path, text + "\n")


@contextlib.contextmanager
def open_atomic(path: str | Path, *, text: bool = True) -> Iterator[Any]:
    """A new file to stream into (text, UTF-8, unless ``text=False``) that replaces ``path`` only
    when the block ends without an error: ``write_atomic`` for content written piece by piece."""
    path = Path(path)
    file_op("write", path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w" if text else "wb", encoding="utf-8" if text else None) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        file_op("replace", path)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


FileHook = Callable[[str, Path], None]
"""``hook(op, path)`` before each announced file operation; raising fails the operation."""

_hook: FileHook | None = None


def file_op(op: str, path: str | Path) -> None:
    """Announce a file operation about to happen: ``op`` is "read", "write", "replace", "remove" or
    "mkdir". Nothing happens unless a ``file_hook`` is installed."""
    if _hook is not None:
        _hook(op, Path(path))


@contextlib.contextmanager
def file_hook(hook: FileHook) -> Iterator[None]:
    """Install ``hook`` for the block (one at a time; the previous one comes back after)."""
    global _hook
    previous, _hook = _hook, hook
    try:
        yield
    finally:
        _hook = previous


def replace(src: str | Path, dst: str | Path) -> None:
    """``os.replace(src, dst)`` (a file or a folder renamed into place), announced as "replace"."""
    file_op("replace", dst)
    os.replace(src, dst)


def remove_tree(path: str | Path) -> None:
    """Remove a folder and everything in it (nothing there: nothing to do), announced as "remove"."""
    if os.path.lexists(path):
        file_op("remove", path)
        shutil.rmtree(path, ignore_errors=True)


def remove_file(path: str | Path) -> None:
    """Remove a file (nothing there: nothing to do), announced as "remove"."""
    if os.path.lexists(path):
        file_op("remove", path)
        Path(path).unlink(missing_ok=True)


def make_dir(path: str | Path) -> None:
    """Create a folder and its parents (there already: nothing to do), announced as "mkdir"."""
    if not Path(path).is_dir():
        file_op("mkdir", path)
        Path(path).mkdir(parents=True, exist_ok=True)
