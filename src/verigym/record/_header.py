"""The header every run folder carries (``run.json``, and ``summary.json``'s ``run``): what ran, with
what, when and for how long. One model for eval, train, select and the rest, so a reader (compare,
resume, quality, the viewer) knows a folder without guessing from its files.

``FORMAT_VERSION`` is the run-record format this verigym writes and the newest it reads; see
``docs/run-record.md`` for the fields and the version policy.
"""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "FORMAT_VERSION",
    "RUN_FILE",
    "RunHeader",
    "RunKind",
    "git_revision",
    "new_header",
    "package_versions",
    "utc_now",
]

FORMAT_VERSION = 1
"""The run-record format written by this verigym; a file with a larger ``format_version`` is refused."""

RUN_FILE = "run.json"
"""The header of a run folder, written when the run starts and again when it ends."""

RunKind = Literal["eval", "train", "select", "suite", "compare", "profile"]

_PACKAGES = ("verigym", "openai", "pydantic", "numpy", "torch", "transformers", "peft", "math-verify")


class RunHeader(BaseModel):
    """What a run was: its kind, resolved config, the versions and revision that ran it, its seeds,
    when it started and (once it ended) its wall time. Unknown fields of a newer minor writer are kept."""

    model_config = ConfigDict(extra="allow")

    format_version: int = FORMAT_VERSION
    kind: RunKind
    config: dict[str, Any] = Field(default_factory=dict)
    versions: dict[str, str] = Field(default_factory=dict)
    git_revision: str | None = None
    started_at: str | None = None  # ISO 8601, UTC, whole seconds
    finished_at: str | None = None  # set when the run ended (summary written)
    wall_s: float | None = None  # seconds from start to end of this invocation
    seeds: dict[str, int] = Field(default_factory=dict)
    resumed: bool = False  # this invocation continued an earlier one in the same folder

    def finished(self, wall_s: float | None) -> RunHeader:
        """The same header, marked ended now after ``wall_s`` seconds."""
        return self.model_copy(update={"finished_at": utc_now(), "wall_s": wall_s})


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def package_versions() -> dict[str, str]:
    """Versions of Python and the packages that decide results (read from metadata, no imports)."""
    out = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


_REVISION: tuple[float, str | None] | None = None  # (when asked, answer): git is asked once a minute


def git_revision() -> str | None:
    """The git revision of verigym's own source tree (with ``-dirty``), or None outside git. The answer
    is reused for 60 s, so a process that starts many runs (tests, a suite) asks git once a minute."""
    global _REVISION
    now = time.monotonic()
    if _REVISION is None or now - _REVISION[0] > 60.0:
        _REVISION = (now, _ask_git())
    return _REVISION[1]


def _ask_git() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{rev}-dirty" if dirty else rev


def new_header(
    kind: RunKind,
    config: dict[str, Any] | None = None,
    *,
    seeds: dict[str, int] | None = None,
    resumed: bool = False,
    revision: bool = True,
) -> RunHeader:
    """The header of a run starting now (``revision=False`` skips asking git)."""
    return RunHeader(
        kind=kind,
        config=dict(config or {}),
        versions=package_versions(),
        git_revision=git_revision() if revision else None,
        started_at=utc_now(),
        seeds=dict(seeds or {}),
        resumed=resumed,
    )
