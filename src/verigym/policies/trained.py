"""What a model was trained with: the training record a verigym checkpoint carries beside its weights.

Every model directory a verigym training command writes (``sft/``, ``checkpoint/``, each
``checkpoints/step_*/model/``) holds ``verigym_training.json``, a ``TrainingRecord``: the environments
with their arguments as given and as resolved (the factory's defaults filled in, so the prompt
variant is known even if a default changes later), each environment's system prompt, the tool-call
format prompts were rendered and replies parsed with, the rollouts' sampling settings, the base
model, the stage and step, and verigym's version. It is versioned like a run record: ``format`` names
the kind and ``format_version`` its schema; a reader refuses a newer version in one line
(``RecordError``) rather than guessing.

``policies.default.find_record(model)`` reads the record of whatever ``--model`` names (a model
directory, a run directory, a catalogue name); ``eval``, ``select``, ``suite``, ``serve`` and ``verigym.evaluate`` use
it to give an environment the arguments the model was trained with unless the user sets them
(``verigym.eval.trained``), and the in-process policy the recorded tool-call format.
"""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from verigym._files import write_atomic

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "RECORD_FILE",
    "EnvRecord",
    "RecordError",
    "SamplingRecord",
    "TrainingRecord",
    "read_record",
    "verigym_version",
    "write_record",
]

RECORD_FILE = "verigym_training.json"
"""The training record's file name inside a model directory."""

FORMAT: Final = "verigym.training"
"""The record's kind, so a reader never mistakes another JSON file for one."""

FORMAT_VERSION = 1
"""The schema version this verigym writes and the newest it reads."""


class RecordError(ValueError):
    """A training record that cannot be read (malformed, or a newer ``format_version``): one line."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EnvRecord(_Strict):
    """One training environment: ``args`` as the config gave them, ``resolved`` with every keyword
    argument of its factory (defaults filled in; JSON values only), and its system prompt."""

    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    resolved: dict[str, Any] = Field(default_factory=dict)
    system_prompt: str | None = None
    weight: Any = 1.0


class SamplingRecord(_Strict):
    """The rollouts' sampling settings (``[sampling]`` of the train config)."""

    temperature: float
    top_p: float = 1.0
    max_tokens: int


class TrainingRecord(BaseModel):
    """What a checkpoint was trained with (module doc). Unknown keys of the same version are kept."""

    model_config = ConfigDict(extra="allow", frozen=True)

    format: Literal["verigym.training"] = "verigym.training"
    format_version: int = FORMAT_VERSION
    verigym_version: str
    stage: Literal["sft", "rl"]
    step: int = 0
    base_model: str
    envs: list[EnvRecord]
    tool_format: str | None = None
    sampling: SamplingRecord

    def env(self, name: str) -> EnvRecord | None:
        """The record of environment ``name``, or None when the model was not trained on it."""
        return next((e for e in self.envs if e.name == name), None)

    def describe(self) -> str:
        """One line: the environments with their non-empty arguments, stage and tool format."""
        envs = ", ".join(
            e.name + (f" ({' '.join(f'{k}={_show(v)}' for k, v in e.args.items())})" if e.args else "")
            for e in self.envs
        )
        fmt = f", tool format {self.tool_format}" if self.tool_format else ""
        return f"trained ({self.stage}, step {self.step}) from {self.base_model} on {envs}{fmt}"


def _show(value: Any) -> str:
    """A value as ``--env-arg`` takes it (``true``, ``brief``, ``3``)."""
    return json.dumps(value) if not isinstance(value, str) else value


def verigym_version() -> str:
    """The installed verigym's version ('unknown' when it is run from a tree that is not installed)."""
    try:
        return importlib.metadata.version("verigym")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def write_record(model_dir: str | Path, record: TrainingRecord) -> Path:
    """Write ``record`` into ``model_dir`` (a new file renamed into place: a hard-linked copy of an
    older record elsewhere is never written through)."""
    path = Path(model_dir) / RECORD_FILE
    write_atomic(path, record.model_dump_json(indent=2) + "\n")
    return path


def read_record(model_dir: str | Path) -> TrainingRecord | None:
    """The training record in ``model_dir``, or None when it has none (a model verigym did not train).

    Raises ``RecordError`` (one line naming the file) for a malformed record or a newer version.
    """
    path = Path(model_dir) / RECORD_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RecordError(f"{path}: not a readable training record ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise RecordError(f"{path}: not a verigym training record (format {FORMAT!r} expected)")
    version = data.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise RecordError(
            f"{path}: format_version {version!r} is newer than this verigym reads ({FORMAT_VERSION}); "
            "upgrade verigym"
        )
    try:
        return TrainingRecord.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise RecordError(f"{path}: {where}: {first['msg']}") from None
