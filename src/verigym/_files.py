"""Reading user files (configs, datasets) with one-line errors that name the file and, where it helps,
the line: a directory given for a file, bytes that are not UTF-8, TOML that does not parse, a JSON
Lines row that is not JSON (``read_jsonl``: ``path:line: invalid JSON (... at column N)``)."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["FileProblem", "iter_lines", "parse_jsonl", "read_jsonl", "read_toml"]


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
