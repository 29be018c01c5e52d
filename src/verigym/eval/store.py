"""The results store: one JSON line per ``(task_id, sample_index)``, appended as each finishes.

- ``ResultsWriter`` appends each record as it finishes (the records of one event-loop turn in one
  write), so a killed process loses at most that turn's records.
- ``iter_records`` streams a file back one record at a time (``load_records`` lists them); a torn
  last line (a crash mid-write) is ignored, a bad line anywhere else is an error naming the line.
- ``prepare_resume`` implements ``--resume``: it keeps the finished records (the latest per key),
  drops errored ones so they are redone, rewrites the file without torn or duplicate lines, and
  returns the keys to skip. It streams: memory holds the keys, never the records.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import NoReturn

from pydantic import ValidationError

from verigym._files import open_atomic
from verigym.types import Record

__all__ = [
    "ResultsWriter",
    "StoreError",
    "iter_latest",
    "iter_records",
    "key",
    "latest",
    "load_records",
    "prepare_resume",
    "write_records",
]


class StoreError(ValueError):
    """A results file that cannot be read (names the file and line)."""


def key(record: Record) -> tuple[str, int]:
    """The identity of a record: ``(task_id, sample_index)``."""
    return (record.task_id, record.sample_index)


def _numbered(path: Path) -> Iterator[tuple[int, Record]]:
    """``(line number, record)`` for each record line of ``path``, read one line at a time."""
    with path.open("rb") as fh:
        bad: tuple[int, ValidationError] | None = None
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            if bad is not None:  # a bad line with more records after it: not a torn tail
                _raise(path, *bad)
            try:
                record = Record.model_validate_json(line)
            except ValidationError as exc:
                bad = (number, exc)  # a crash while the last line was being written, if nothing follows
                continue
            yield number, record


def _raise(path: Path, number: int, exc: ValidationError) -> NoReturn:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "record"
    raise StoreError(f"{path}:{number}: not a results record ({where}: {first['msg']})") from None


def iter_records(path: str | Path) -> Iterator[Record]:
    """The records in ``path`` in file order, one at a time (none if it does not exist); a torn last
    line is skipped."""
    path = Path(path)
    if path.exists():
        for _, record in _numbered(path):
            yield record


def iter_latest(path: str | Path) -> Iterator[Record]:
    """The latest record of each key in ``path``, one at a time (two passes; memory holds the keys)."""
    path = Path(path)
    if not path.exists():
        return
    last = {key(record): number for number, record in _numbered(path)}
    wanted = set(last.values())
    del last
    for number, record in _numbered(path):
        if number in wanted:
            yield record


def load_records(path: str | Path) -> list[Record]:
    """All records in ``path`` in file order ([] if it does not exist); a torn last line is skipped."""
    return list(iter_records(path))


def latest(records: Iterable[Record]) -> dict[tuple[str, int], Record]:
    """The last record of each key (a later line replaces an earlier one)."""
    out: dict[tuple[str, int], Record] = {}
    for record in records:
        out[key(record)] = record
    return out


def write_records(path: str | Path, records: Iterable[Record]) -> None:
    """Atomically replace ``path`` with exactly ``records``."""
    with open_atomic(path) as fh:
        for record in records:
            fh.write(record.model_dump_json())
            fh.write("\n")


def prepare_resume(path: str | Path, *, whole_groups_of: int | None = None) -> set[tuple[str, int]]:
    """Compact ``path`` for a resumed run: returns the keys of the kept (finished) records.

    Errored records are removed so that the run redoes them; a torn last line disappears. With
    ``whole_groups_of=k`` (a rubric with group graders) a task is kept only when all its samples
    ``0..k-1`` finished, so group graders always see a whole group. Two passes over the file: the
    first finds each key's latest line, the second copies the kept lines unchanged.
    """
    path = Path(path)
    if not path.exists():
        return set()
    last: dict[tuple[str, int], tuple[int, bool]] = {}  # key -> (its latest line, finished)
    for number, record in _numbered(path):
        last[key(record)] = (number, record.error is None)
    kept = {k for k, (_, ok) in last.items() if ok}
    if whole_groups_of is not None:
        done: dict[str, set[int]] = {}
        for task_id, index in kept:
            done.setdefault(task_id, set()).add(index)
        full = {t for t, idx in done.items() if set(range(whole_groups_of)) <= idx}
        kept = {k for k in kept if k[0] in full}
    lines = {last[k][0] for k in kept}
    with path.open("rb") as src, open_atomic(path, text=False) as dst:
        for number, line in enumerate(src, start=1):
            if number in lines:
                dst.write(line if line.endswith(b"\n") else line + b"\n")
    return kept


class ResultsWriter:
    """Appends records to a JSONL file, each line handed to the kernel in the turn of the event loop
    that produced it. Use as a context manager.

    Outside an event loop a record is written at once. Inside one, the lines of one loop turn are
    joined and written by a callback at the start of the next turn: one ``write`` call for the
    records that finished together, instead of one each, and still before the loop waits for
    anything. A killed process loses at most the records of its last turn, never half a line that
    a later append would glue onto (a torn tail is cut when the file is opened again).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._repair_tail()
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._pending: list[bytes] = []
        self.written = 0

    def _repair_tail(self) -> None:
        """Cut a torn last line so the next append starts on a fresh line."""
        if not self.path.exists() or (size := self.path.stat().st_size) == 0:
            return
        with self.path.open("rb+") as fh:
            end = size
            while end > 0:  # look back for the last newline, a block at a time
                start = max(0, end - 65536)
                fh.seek(start)
                block = fh.read(end - start)
                if end == size and block.endswith(b"\n"):
                    return
                cut = block.rfind(b"\n")
                if cut >= 0:
                    fh.truncate(start + cut + 1)
                    return
                end = start
            fh.truncate(0)

    def write(self, record: Record) -> None:
        line = record.__pydantic_serializer__.to_json(record) + b"\n"
        self.written += 1
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._write(line)
            return
        if not self._pending:
            loop.call_soon(self.flush)
        self._pending.append(line)

    def flush(self) -> None:
        """Write the lines waiting for the end of this loop turn."""
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            self._write(data)

    def _write(self, data: bytes) -> None:
        if self._fd is None:
            raise ValueError(f"{self.path}: the results writer is closed")
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    def close(self) -> None:
        if self._fd is not None:
            self.flush()
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> ResultsWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
