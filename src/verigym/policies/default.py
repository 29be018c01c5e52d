"""The embedded default policy and where verigym looks for local checkpoints.

``default_policy(model_path)`` is what ``verigym eval ENV`` uses with no ``--base-url``:

1. an explicit ``model_path`` (a ``save_pretrained`` directory, a LoRA adapter directory, a run
   directory with ``checkpoints/``, a catalogue name that ``verigym models pull`` installed, or a hub
   name) → a ``LocalPolicy`` of it; the names ``tiny``,
   ``small`` and ``base`` (when no such directory exists) build a fresh untrained model of that size;
2. else the newest checkpoint written by ``verigym quickstart``, looked for in
   ``./runs/quickstart/checkpoint`` and ``$VERIGYM_HOME/runs/quickstart/checkpoint`` (``VERIGYM_HOME``
   defaults to ``~/.verigym``), also accepting a run directory laid out as ``checkpoints/latest``;
3. else a freshly built ``tiny`` model, with a message saying it is untrained and how to train one.

A model directory verigym trained is opened in the tool-call format it was trained with (its
training record, ``policies.trained``; ``trained_format``).

``verigym models`` lists the quickstart checkpoints plus the model directories named in
``$VERIGYM_MODELS`` (paths separated by ``os.pathsep``) and in ``$VERIGYM_HOME/config.toml``::

    [models]
    paths = ["~/models/qwen-0.5b", "runs/train"]   # a model directory, or a folder of them
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from verigym._files import read_toml
from verigym._library_output import home as verigym_home
from verigym._model_files import check_model_dir, load_error
from verigym.policies.base import PolicyError
from verigym.policies.catalogue import models_dir, resolve
from verigym.policies.local import LocalPolicy
from verigym.policies.trained import TrainingRecord, read_record

__all__ = [
    "Checkpoint",
    "configured_paths",
    "default_policy",
    "find_checkpoints",
    "find_record",
    "missing_local_path",
    "newest_quickstart",
    "quickstart_dirs",
    "resolve_model_dir",
    "trained_format",
    "verigym_home",
]

UNTRAINED_HINT = (
    "untrained tiny model (random weights, so expect a score near 0): run `verigym quickstart` to train "
    "one, or pass --model DIR (a saved model) or --base-url URL (a server)"
)


@dataclass(frozen=True)
class Checkpoint:
    """A model directory found on disk: where, which source named it, and when it was written."""

    path: Path
    source: str  # "quickstart" or "config"
    created: float


def quickstart_dirs() -> list[Path]:
    """Where ``verigym quickstart`` output is looked for, in order."""
    return [Path("runs/quickstart"), verigym_home() / "runs" / "quickstart"]


def _is_model_dir(path: Path) -> bool:
    return (path / "config.json").is_file() or (path / "adapter_config.json").is_file()


def resolve_model_dir(path: Path) -> Path | None:
    """The loadable directory ``path`` stands for: itself, its ``model/``, ``checkpoint/``, or its
    newest ``checkpoints/<step>/model``; None if it holds no model."""
    for candidate in (path, path / "model", path / "checkpoint", path / "checkpoint" / "model"):
        if _is_model_dir(candidate):
            return candidate
    root = path / "checkpoints"
    if not root.is_dir():
        return None
    pointer = root / "latest"
    steps = [root / pointer.read_text().strip()] if pointer.is_file() else []
    steps += sorted((p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")), reverse=True)
    for step in steps:
        found = resolve_model_dir(step) if step.is_dir() and step != path else None
        if found is not None:
            return found
    return None


def _created(path: Path) -> float:
    files = [p for p in path.iterdir() if p.is_file()]
    return max((p.stat().st_mtime for p in files), default=path.stat().st_mtime)


def configured_paths() -> list[Path]:
    """Model paths named in ``$VERIGYM_MODELS`` and ``$VERIGYM_HOME/config.toml`` (``[models] paths``)."""
    out = [Path(p).expanduser() for p in os.environ.get("VERIGYM_MODELS", "").split(os.pathsep) if p]
    config = verigym_home() / "config.toml"
    if config.is_file():
        data = read_toml(config)  # FileProblem is a ValueError naming the file
        paths = data.get("models", {}).get("paths", [])
        if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
            raise ValueError(f"{config}: [models] paths must be a list of strings")
        out += [Path(p).expanduser() for p in paths]
    return out


def find_checkpoints() -> list[Checkpoint]:
    """Every local model verigym knows of: quickstart output, then configured paths (deduplicated)."""
    found: dict[Path, Checkpoint] = {}

    def add(path: Path, source: str) -> None:
        model = resolve_model_dir(path) if path.is_dir() else None
        if model is not None and model.resolve() not in found:
            found[model.resolve()] = Checkpoint(model, source, _created(model))

    for root in quickstart_dirs():
        add(root, "quickstart")
    for path in configured_paths():
        if path.is_dir() and resolve_model_dir(path) is None:
            for child in sorted(p for p in path.iterdir() if p.is_dir()):
                add(child, "config")
        else:
            add(path, "config")
    return list(found.values())


def newest_quickstart() -> Checkpoint | None:
    """The most recently written quickstart checkpoint, if any."""
    ours = [c for c in find_checkpoints() if c.source == "quickstart"]
    return max(ours, key=lambda c: c.created) if ours else None


def find_record(model: str | None) -> TrainingRecord | None:
    """The training record (``policies.trained``) of the in-process model ``model`` names: a model
    directory, a run directory (its final model, as ``resolve_model_dir`` finds it) or a pulled
    model's name; ``None`` is the newest quickstart checkpoint, as ``default_policy`` picks it. None
    when there is no such directory or it has no record (a fresh ``tiny``, a Hub name, a model verigym
    did not train). Raises ``RecordError`` (one line) for a malformed or newer record."""
    if model is None:
        newest = newest_quickstart()
        return read_record(newest.path) if newest is not None else None
    path = Path(model).expanduser()
    if not path.exists() and "/" not in model:  # a pulled model's name (``catalogue.resolve``)
        path = models_dir() / model
    found = resolve_model_dir(path) if path.is_dir() else None
    return read_record(found) if found is not None else None


def trained_format(path: Path | str) -> str | None:
    """The tool-call format a verigym-trained model directory was trained with (its training record,
    ``policies.trained``), or None (no record: ``default_format`` of its tokenizer decides)."""
    record = read_record(path) if Path(path).is_dir() else None
    return record.tool_format if record is not None else None


def _load(path: Path | str) -> LocalPolicy:
    """A local model; every failure to load it (truncated or mismatched weights, an unknown
    architecture) is one ``ValueError`` line."""
    if Path(path).is_dir():
        check_model_dir(path, str(path))  # ModelFileError is a ValueError
    try:
        return LocalPolicy.from_pretrained(path, tool_format=trained_format(path))
    except PolicyError as exc:
        raise ValueError(str(exc)) from None
    except Exception as exc:  # what transformers raises past its OSError/ValueError
        raise ValueError(load_error(str(path), exc)) from None


def missing_local_path(model: str) -> str | None:
    """The one-line error for a model name that is a local path (absolute, ``./``, ``~``, or more than
    one ``/``) that does not exist, so the user reads "no such directory" rather than the Hugging Face
    Hub's repo-id rules; None when ``model`` exists or may be a hub id (``org/name``)."""
    if Path(model).expanduser().exists():
        return None
    pathlike = model.startswith(("/", ".", "~", "\\")) or model.count("/") > 1 or "\\" in model
    return f"{model}: no such directory" if pathlike else None


def default_policy(model_path: str | None = None) -> tuple[LocalPolicy, str]:
    """The policy for a run with no server, and one line saying what it is (see the module doc).

    Raises ``ValueError`` (one line) when an explicit ``model_path`` cannot be loaded.
    """
    if model_path:
        model_path = resolve(model_path)  # a catalogue name → its pulled directory (CatalogueError if not)
        path = Path(model_path).expanduser()
        if path.exists():
            if path.is_file():  # "is a file; a model is a folder", not "no model here"
                check_model_dir(path, model_path)
            model_dir = resolve_model_dir(path) if path.is_dir() else None
            if model_dir is None:
                raise ValueError(f"{model_path}: no model here (expected config.json or adapter_config.json)")
            return _load(model_dir), f"local model {model_dir}"
        if missing := missing_local_path(model_path):
            raise ValueError(missing)
        if model_path in ("tiny", "small", "base"):
            return _fresh(
                model_path
            ), f"fresh untrained {model_path} model (random weights: expect a score near 0)"
        return _load(model_path), f"local model {model_path}"
    newest = newest_quickstart()
    if newest is not None:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(newest.created))
        return _load(newest.path), f"quickstart checkpoint {newest.path} (written {when})"
    return _fresh("tiny"), UNTRAINED_HINT


def _fresh(size: str) -> LocalPolicy:
    from verigym.policies import tiny

    tok = tiny.build_tokenizer()
    return LocalPolicy(tiny.build_model(size, tok, seed=0), tok, name=f"{size}-untrained")
