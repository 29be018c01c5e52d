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
training record, ``policies.trained``; ``trained_format``) unless the spec names one.

``open_local(spec)`` is the same for a whole ``ModelSpec`` (dtype, device, tool format, batching
limit), and ``load_weights(spec)`` the weights alone, for training: ``policies.spec``'s ``open_model``
and ``load_weights`` are their public entry points, and every command opens a model through them.

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
from typing import Any, Protocol

from verigym._files import read_toml
from verigym._library_output import home as verigym_home
from verigym._model_files import check_model_dir, load_error
from verigym.policies.base import ModelSpecError, PolicyError
from verigym.policies.catalogue import models_dir, resolve
from verigym.policies.local import LocalPolicy
from verigym.policies.local.loading import Pretrained, load_pretrained, resolve_device, resolve_dtype
from verigym.policies.trained import TrainingRecord, read_record

__all__ = [
    "Checkpoint",
    "LocalSpec",
    "configured_paths",
    "default_policy",
    "find_checkpoints",
    "find_record",
    "load_weights",
    "missing_local_path",
    "newest_quickstart",
    "open_local",
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


def missing_local_path(model: str) -> str | None:
    """The one-line error for a model name that is a local path (absolute, ``./``, ``~``, or more than
    one ``/``) that does not exist, so the user reads "no such directory" rather than the Hugging Face
    Hub's repo-id rules; None when ``model`` exists or may be a hub id (``org/name``)."""
    if Path(model).expanduser().exists():
        return None
    pathlike = model.startswith(("/", ".", "~", "\\")) or model.count("/") > 1 or "\\" in model
    return f"{model}: no such directory" if pathlike else None


class LocalSpec(Protocol):
    """What opening an in-process model reads of a ``policies.spec.ModelSpec``."""

    @property
    def model(self) -> str | None: ...
    @property
    def dtype(self) -> str: ...
    @property
    def device(self) -> str | None: ...
    @property
    def tool_format(self) -> str | None: ...
    @property
    def max_batch_rows(self) -> int: ...


@dataclass(frozen=True)
class _Named:
    """A model named with every other setting at its default (``default_policy``)."""

    model: str | None
    dtype: str = "auto"
    device: str | None = None
    tool_format: str | None = None
    max_batch_rows: int = 256


FRESH_SIZES = ("tiny", "small", "base")
"""Names that build a fresh untrained model (when no such directory exists)."""


def default_policy(model_path: str | None = None) -> tuple[LocalPolicy, str]:
    """The policy for a run with no server, and one line saying what it is (see the module doc).

    Raises ``ValueError`` (one line) when an explicit ``model_path`` cannot be loaded.
    """
    return open_local(_Named(model_path))


def _where(model_path: str) -> tuple[Path | str | None, str | None]:
    """What an explicit model name stands for: a model directory, a Hub name (str), or a fresh size
    (``(None, size)``). Raises ``ModelSpecError`` (field ``model``)."""
    try:
        model_path = resolve(model_path)  # a catalogue name → its pulled directory (CatalogueError if not)
    except PolicyError as exc:
        raise ModelSpecError("model", None, str(exc)) from None
    path = Path(model_path).expanduser()
    if path.exists():
        if path.is_file():  # "is a file; a model is a folder", not "no model here"
            _checked(path, model_path)
        model_dir = resolve_model_dir(path) if path.is_dir() else None
        if model_dir is None:
            raise ModelSpecError(
                "model", model_path, "no model here (expected config.json or adapter_config.json)"
            )
        return model_dir, None
    if missing_local_path(model_path):
        raise ModelSpecError("model", model_path, "no such directory")
    if model_path in FRESH_SIZES:
        return None, model_path
    return model_path, None


def _checked(path: Path | str, label: str) -> None:
    try:
        check_model_dir(path, label)
    except ValueError as exc:  # ModelFileError: one line naming the folder
        raise ModelSpecError("model", None, str(exc)) from None


def _placed(model: Any, device: str, dtype: Any, spec: LocalSpec) -> Any:
    try:
        return model.to(device=device, dtype=dtype)
    except (RuntimeError, AssertionError, ValueError) as exc:  # no such device (torch's own words)
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise ModelSpecError(
            "device", spec.device or device, f"cannot place the model there ({first})"
        ) from None


def _fresh_weights(size: str, spec: LocalSpec, seed: int) -> Pretrained:
    from verigym.policies import tiny

    device = resolve_device(spec.device)
    dtype = resolve_dtype(spec.dtype, device)
    tok = tiny.build_tokenizer()
    model = _placed(tiny.build_model(size, tok, seed=seed), device, dtype, spec)
    model.eval()
    return Pretrained(model, tok, f"{size}-untrained", device, False)


def _pretrained(where: Path | str, spec: LocalSpec) -> Pretrained:
    """A model directory or Hub name loaded with the spec's dtype and device (one line on failure)."""
    if Path(where).is_dir():
        _checked(where, str(where))
    device = resolve_device(spec.device)
    try:
        loaded = load_pretrained(where, resolve_dtype(spec.dtype, device), device)
    except PolicyError as exc:
        raise ModelSpecError("model", None, str(exc)) from None
    except Exception as exc:  # what transformers raises past its OSError/ValueError
        raise ModelSpecError("model", None, load_error(str(where), exc)) from None
    model = _placed(loaded.model, device, None, spec)
    return Pretrained(model, loaded.tokenizer, loaded.path, device, loaded.adapter)


def load_weights(spec: LocalSpec, *, seed: int = 0, tiny: str | None = "tiny") -> Pretrained:
    """The weights of the in-process model ``spec`` names, on its device in the rule's dtype (module
    doc); no ``spec.model`` is a fresh model of size ``tiny`` built with ``seed`` (training's fresh
    start). Raises ``ModelSpecError`` (one line naming the field)."""
    if spec.model is None:
        return _fresh_weights(tiny or "tiny", spec, seed)
    where, size = _where(spec.model)
    if size is not None:
        return _fresh_weights(size, spec, seed)
    assert where is not None
    return _pretrained(where, spec)


def open_local(spec: LocalSpec) -> tuple[LocalPolicy, str]:
    """The in-process ``LocalPolicy`` of ``spec`` and one line saying what it is (module doc): its
    dtype and device by the one rule, its tool format (the spec's, else the checkpoint's training
    record's, else the tokenizer's default) and batching limit. Raises ``ModelSpecError``."""
    if spec.model:
        where, size = _where(spec.model)
        if size is not None:
            message = f"fresh untrained {size} model (random weights: expect a score near 0)"
            return _policy(_fresh_weights(size, spec, 0), spec, None, f"{size}-untrained"), message
        assert where is not None
        return _policy(_pretrained(where, spec), spec, where), f"local model {where}"
    newest = newest_quickstart()
    if newest is not None:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(newest.created))
        message = f"quickstart checkpoint {newest.path} (written {when})"
        return _policy(_pretrained(newest.path, spec), spec, newest.path), message
    return _policy(_fresh_weights("tiny", spec, 0), spec, None, "tiny-untrained"), UNTRAINED_HINT


def _policy(
    weights: Pretrained, spec: LocalSpec, where: Path | str | None, name: str | None = None
) -> LocalPolicy:
    fmt = spec.tool_format or (trained_format(where) if where is not None else None)
    kwargs: dict[str, Any] = {"tool_format": fmt, "max_batch_rows": spec.max_batch_rows}
    if name is not None:
        kwargs["name"] = name
    try:
        return LocalPolicy.from_loaded(weights, **kwargs)
    except PolicyError as exc:  # a LoRA adapter that does not load
        raise ModelSpecError("model", None, str(exc)) from None
    except Exception as exc:  # what peft raises for an adapter that does not fit its base
        raise ModelSpecError("model", None, load_error(str(where), exc)) from None
