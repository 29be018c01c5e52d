"""Reading and writing a run folder's record: ``read_run`` for a folder of any kind, ``write_header``
for ``run.json``, ``with_header`` for a summary about to be written.

``read_run(path)`` gives a ``RunRecord``: the header (``run.json``, else ``summary.json``'s ``run``),
the typed summary (None while a run is going or after it was killed), and the folder's files. Runs
written before the record was versioned (no ``format_version``) still read: their kind is told from
their summary's keys or their files, ``format_version`` is 0 and ``header`` None. A ``format_version``
newer than ``FORMAT_VERSION`` (or not a version at all) is refused with one ``RunFormatError`` line
that names the file and both versions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from verigym._files import write_json
from verigym.record._header import FORMAT_VERSION, RUN_FILE, RunHeader, RunKind
from verigym.record._summaries import EvalSummary, SelectSummary, Summary, TrainSummary

__all__ = [
    "RunFormatError",
    "RunRecord",
    "check_format_version",
    "read_header",
    "read_run",
    "with_header",
    "write_header",
]

_SUMMARY_TYPES: dict[str, type[EvalSummary | TrainSummary | SelectSummary]] = {
    "eval": EvalSummary,
    "train": TrainSummary,
    "select": SelectSummary,
}
_SUMMARY_FILES = ("summary.json", "sft_summary.json")


class RunFormatError(ValueError):
    """A run folder or run file that cannot be read as a run record; the message is one line naming the file."""


class RunRecord(BaseModel):
    """A run folder as read by ``read_run``."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    path: Path
    kind: RunKind
    format_version: int  # 0: written before run records were versioned
    header: RunHeader | None = None
    summary: Summary | None = None

    @property
    def finished(self) -> bool:
        """The run wrote its summary."""
        return self.summary is not None

    def file(self, name: str) -> Path | None:
        """``path / name`` when that file exists."""
        path = self.path / name
        return path if path.is_file() else None

    @property
    def results_file(self) -> Path | None:
        """``results.jsonl`` (eval, select), when there is one."""
        return self.file("results.jsonl")

    @property
    def metrics_file(self) -> Path | None:
        """``metrics.jsonl`` (train), when there is one."""
        return self.file("metrics.jsonl")

    def metrics(self) -> list[dict[str, Any]]:
        """The rows of ``metrics.jsonl`` (one a step, in file order; a torn line is skipped)."""
        path = self.metrics_file
        if path is None:
            return []
        rows = []
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict):
                rows.append(row)
        return rows


def check_format_version(value: object, where: str | Path) -> int:
    """``value`` as a format version this verigym reads, else a ``RunFormatError`` naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RunFormatError(
            f"{where}: format_version {value!r} is not a run-record version (this verigym reads 1 to {FORMAT_VERSION})"
        )
    if value > FORMAT_VERSION:
        raise RunFormatError(
            f"{where}: format_version {value} is newer than this verigym reads ({FORMAT_VERSION}); "
            "upgrade verigym to read it"
        )
    return value


def _load_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_bytes())
    except OSError as exc:
        raise RunFormatError(f"{path}: cannot read ({exc.strerror})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunFormatError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise RunFormatError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def _invalid(path: Path, exc: ValidationError, prefix: str = "") -> RunFormatError:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ()))
    return RunFormatError(f"{path}: {prefix}{where}: {first['msg']}")


def _header(data: Mapping[str, Any], path: Path, prefix: str = "") -> RunHeader:
    try:
        return RunHeader.model_validate(data)
    except ValidationError as exc:
        raise _invalid(path, exc, prefix) from None


def read_header(path: str | Path) -> RunHeader | None:
    """The header in ``run.json`` of the folder ``path`` (or the file itself); None when there is none.
    A newer or unknown ``format_version`` is a ``RunFormatError``."""
    path = Path(path)
    file = path / RUN_FILE if path.is_dir() else path
    if not file.is_file():
        return None
    data = _load_json(file)
    check_format_version(data.get("format_version"), file)
    return _header(data, file)


def _legacy_kind(data: Mapping[str, Any], folder: Path) -> RunKind | None:
    """The kind of a run written before headers, from its summary's keys, else its files."""
    if "methods" in data and "oracle_pass_at_n" in data:
        return "select"
    if "pass_at_k" in data or "n_samples" in data:
        return "eval"
    if "steps" in data or any(k.startswith("pass_at_1") for k in data):
        return "train"
    for name, kind in (
        ("metrics.jsonl", "train"),
        ("train_config.json", "train"),
        ("scorecard.json", "suite"),
        ("profile.jsonl", "profile"),
        ("results.jsonl", "eval"),
        ("config.json", "eval"),
    ):
        if (folder / name).is_file():
            return kind  # type: ignore[return-value]
    return None


def read_run(path: str | Path) -> RunRecord:
    """The run record of a run folder of any kind (``path``: the folder, or a file in it).

    Every failure is one ``RunFormatError`` line naming the file: no run there, a file that is not
    JSON, a field of the wrong type, a ``format_version`` this verigym does not read.
    """
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    if not folder.is_dir():
        raise RunFormatError(f"{path}: no such run folder")
    header = read_header(folder)
    summary_file = next((folder / n for n in _SUMMARY_FILES if (folder / n).is_file()), None)
    data = _load_json(summary_file) if summary_file is not None else {}
    version = 0
    if summary_file is not None and "format_version" in data:
        version = check_format_version(data["format_version"], summary_file)
        if isinstance(data.get("run"), dict):
            run = data["run"]
            check_format_version(run.get("format_version", version), summary_file)
            from_summary = _header(run, summary_file, "run.")
            header = header or from_summary  # run.json is rewritten when the run ends, so it is as new
    if header is not None:
        version = max(version, header.format_version)
        kind: RunKind | None = header.kind
    else:
        kind = _legacy_kind(data, folder)
    if kind is None:
        raise RunFormatError(
            f"{folder}: not a verigym run folder (no {RUN_FILE}, summary.json, results.jsonl or metrics.jsonl)"
        )
    summary: Summary | None = None
    model = _SUMMARY_TYPES.get(kind)
    if summary_file is not None and model is not None:
        try:
            summary = model.model_validate(data)
        except ValidationError as exc:
            raise _invalid(summary_file, exc) from None
    return RunRecord(path=folder, kind=kind, format_version=version, header=header, summary=summary)


def write_header(folder: str | Path, header: RunHeader) -> Path:
    """Write ``folder/run.json`` (atomically) and return its path."""
    path = Path(folder) / RUN_FILE
    write_json(path, header.model_dump(mode="json", fallback=str))  # a config value JSON lacks: its str
    return path


def with_header(summary: Mapping[str, Any], header: RunHeader) -> dict[str, Any]:
    """``summary`` as written to ``summary.json``: ``format_version`` first, its keys, then ``run``."""
    return {
        "format_version": header.format_version,
        **{k: v for k, v in summary.items() if k not in ("format_version", "run")},
        "run": header.model_dump(mode="json", fallback=str),
    }
