"""Tasks from files, from in-memory records (HF ``datasets`` included), and from seeded generators.

- ``load_jsonl`` / ``load_parquet`` / ``load_tasks``: one task per row; the field mapping says
  which column is the question (text, or a list of ``{"role", "content"}`` messages), the
  answer and the id; the other columns (or those named in ``info``) go to ``Task.info``.
- ``from_records``: the same for any iterable of dicts (a ``datasets.Dataset`` is one; the
  ``datasets`` package is not needed).
- ``procedural_tasks``: a generator ``(rng) -> Task`` drawn deterministically per
  ``(name, seed, split, index)`` as reasoning-gym does. Splits are disjoint by content: a task
  belongs to ``test`` when a hash of its prompt falls in the first ``test_fraction`` of the
  range, so no train task ever equals a test task, whatever the seeds.

A malformed row raises ``DatasetError`` with one line naming ``file:line`` and the field
expected.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict, Unpack

import pydantic_core

from verigym._files import read_jsonl
from verigym.types import Message, Task

__all__ = [
    "SPLITS",
    "DatasetError",
    "from_records",
    "load_jsonl",
    "load_parquet",
    "load_tasks",
    "procedural_tasks",
    "prompt_text",
    "split_of",
]

SPLITS = ("train", "test")


class DatasetError(ValueError):
    """A dataset file or row is not what was expected; the message is one line naming where."""


def _jsonable(value: Any) -> Any:
    return pydantic_core.to_jsonable_python(value, fallback=str)


def _prompt(
    value: Any, where: str, field: str, template: str | None, row: Mapping[str, Any]
) -> list[Message]:
    if isinstance(value, str):
        if template is not None:
            try:
                value = template.format(**{str(k): v for k, v in row.items()})
            except (KeyError, IndexError, ValueError) as exc:
                raise DatasetError(
                    f"{where}: template needs field {exc} which the row does not have"
                ) from None
        return [Message(role="user", content=value)]
    if isinstance(value, list) and value and all(isinstance(m, Mapping) for m in value):
        try:
            return [Message(role=m["role"], content=m.get("content") or "") for m in value]
        except Exception:
            raise DatasetError(
                f"{where}: field {field!r} must hold messages with role system/user/assistant/tool and content"
            ) from None
    raise DatasetError(
        f"{where}: field {field!r} must be a string or a list of messages, got {type(value).__name__}"
    )


def _answer(value: Any, where: str, field: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        raise DatasetError(f"{where}: field {field!r} must be a string or a number, got {value!r}")
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(_jsonable(value))


class _Fields(TypedDict, total=False):
    """The keywords that map a row's fields to a task, each optional (see ``from_records``; the
    defaults are ``_build``'s)."""

    question: str
    answer: str | None
    id: str | None
    info: Sequence[str] | None
    template: str | None


def _build(
    rows: Iterable[tuple[str, Any]],
    *,
    id_prefix: str,
    columns: tuple[str, Sequence[str]] | None = None,
    question: str = "question",
    answer: str | None = "answer",
    id: str | None = None,
    info: Sequence[str] | None = None,
    template: str | None = None,
) -> list[Task]:
    """Tasks from ``(where, row)`` pairs mapped by the ``_Fields``; ``columns``: ``(file, names)``
    of a file whose columns are known up front, checked for the needed fields before any row."""
    needed = [question] + ([answer] if answer else []) + ([id] if id else []) + list(info or [])
    if columns is not None:
        source, names = columns
        for field in needed:
            if field not in names:
                raise DatasetError(f"{source}: missing column {field!r} (columns: {', '.join(names)})")
    tasks: list[Task] = []
    seen: dict[str, str] = {}
    for index, (where, row) in enumerate(rows):
        if not isinstance(row, Mapping):
            raise DatasetError(
                f"{where}: expected an object with field {question!r}, got {type(row).__name__}"
            )
        keys = ", ".join(map(str, row)) or "none"
        for field in needed:
            if field not in row:
                raise DatasetError(f"{where}: missing field {field!r} (row has: {keys})")
        prompt = _prompt(row[question], where, question, template, row)
        ref = _answer(row[answer], where, answer) if answer else None
        if id:
            if row[id] is None or isinstance(row[id], list | dict):
                raise DatasetError(f"{where}: field {id!r} must be a string or a number, got {row[id]!r}")
            task_id = str(row[id])
        else:
            task_id = f"{id_prefix}-{index}"
        if task_id in seen:
            raise DatasetError(f"{where}: duplicate id {task_id!r} (first at {seen[task_id]})")
        seen[task_id] = where
        used = {question, answer, id}
        names = list(info) if info is not None else [k for k in row if k not in used]
        hidden = {str(k): _jsonable(row[k]) for k in names}
        tasks.append(Task(id=task_id, prompt=tuple(prompt), answer=ref, info=hidden))
    return tasks


def from_records(
    rows: Iterable[Mapping[str, Any]], *, source: str = "records", **fields: Unpack[_Fields]
) -> list[Task]:
    """Tasks from dicts (a list, a generator, an HF ``datasets.Dataset``...).

    ``fields``: which field is the question (``question``, default "question"; ``template``: an
    optional ``str.format`` template over the row's fields for the user message), the answer
    (``answer``, default "answer"; None: tasks have no answer) and the id (``id``, default None:
    ``{source}-{index}``); ``info``: the fields copied into ``Task.info`` (None: every other field).
    """
    return _build(((f"{source}:{i}", row) for i, row in enumerate(rows)), id_prefix=source, **fields)


def _jsonl_rows(path: Path) -> Iterable[tuple[str, Any]]:
    return read_jsonl(path, error=DatasetError)


def _parquet_rows(path: Path, table: Any) -> Iterator[tuple[str, Any]]:
    """``table``'s rows as ``(file:row N, row)``, counting from 1 (converted when first iterated)."""
    for i, row in enumerate(table.to_pylist(), start=1):
        yield f"{path}:row {i}", row


def _check_file(path: str | Path) -> Path:
    p = Path(path)
    if p.is_dir():
        raise DatasetError(f"{p}: is a directory, not a file")
    if not p.is_file():
        raise DatasetError(f"{p}: no such file")
    return p


def load_jsonl(path: str | Path, **fields: Unpack[_Fields]) -> list[Task]:
    """Tasks from a JSON Lines file, one object per line (blank lines skipped). See ``from_records``."""
    p = _check_file(path)
    return _build(_jsonl_rows(p), id_prefix=p.stem, **fields)


def load_parquet(path: str | Path, **fields: Unpack[_Fields]) -> list[Task]:
    """Tasks from a Parquet file, one per row (rows are named ``file:row N``, counting from 1)."""
    import pyarrow.parquet as pq

    p = _check_file(path)
    try:
        table = pq.read_table(p)
    except Exception as exc:
        raise DatasetError(f"{p}: not a readable Parquet file ({type(exc).__name__})") from None
    return _build(_parquet_rows(p, table), id_prefix=p.stem, columns=(str(p), table.column_names), **fields)


def load_tasks(path: str | Path, **fields: Unpack[_Fields]) -> list[Task]:
    """``load_jsonl`` or ``load_parquet`` by the file's suffix (``.jsonl``/``.ndjson``/``.parquet``)."""
    suffix = Path(path).suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return load_jsonl(path, **fields)
    if suffix in (".parquet", ".pq"):
        return load_parquet(path, **fields)
    raise DatasetError(f"{path}: unknown dataset format {suffix!r} (expected .jsonl or .parquet)")


def split_of(key: str, test_fraction: float = 0.2) -> str:
    """``test`` or ``train``, from a stable hash of ``key`` (the same on every machine and run)."""
    bucket = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2.0**64
    return "test" if bucket < test_fraction else "train"


def prompt_text(task: Task) -> str:
    """A task's prompt as one string: what decides its split unless a generator says otherwise."""
    return "\n".join(f"{m.role}:{m.content}" for m in task.prompt)


def procedural_tasks(
    generate: Callable[[random.Random], Task],
    n: int,
    *,
    seed: int = 0,
    split: str = "test",
    name: str = "task",
    test_fraction: float = 0.2,
    key: Callable[[Task], str] = prompt_text,
    max_attempts: int = 1000,
) -> list[Task]:
    """``n`` tasks from ``generate(rng)``; task ``i`` depends only on ``(name, seed, split, i)``.

    ``generate`` may return any id; it is replaced by ``{name}-{split}-{seed}-{i}``. A draw whose
    ``key`` (default: the prompt text) hashes into the other split is redrawn from the same
    stream, so splits never share a task.
    """
    if split not in SPLITS:
        raise DatasetError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
    if n < 0:
        raise DatasetError(f"number of tasks must be ≥ 0, got {n}")
    out: list[Task] = []
    for index in range(n):
        rng = random.Random(f"verigym/{name}/{seed}/{split}/{index}")
        for _ in range(max_attempts):
            task = generate(rng)
            if split_of(key(task), test_fraction) == split:
                break
        else:
            raise DatasetError(
                f"{name}: no {split} task after {max_attempts} draws (the task space is too small to split)"
            )
        out.append(task.model_copy(update={"id": f"{name}-{split}-{seed}-{index}"}))
    return out
