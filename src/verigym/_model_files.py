"""A model folder checked before transformers reads it, and any failure to load one as one line.

``check_model_dir`` catches, without loading anything: a file given for a folder, a missing or empty
folder, a folder with no ``config.json`` (or ``adapter_config.json``) or one that is not a JSON
object, no weights file, and safetensors weights that are truncated (the header names more bytes
than the file holds) or whose header is not JSON. ``load_error`` words whatever else loading raises
(weights whose shapes do not match the config, an architecture transformers does not know) as one
line. ``train``, ``sft``, ``eval``, ``select`` and ``serve`` go through both.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

__all__ = ["ModelFileError", "check_model_dir", "check_safetensors", "load_error"]

_WEIGHTS = ("*.safetensors", "*.bin", "*.pt", "*.pth")


class ModelFileError(ValueError):
    """A model folder that cannot be loaded, as one line naming it."""


def check_safetensors(path: Path) -> None:
    """Raise ``ModelFileError`` when ``path`` is not a whole safetensors file (a cut download, a
    copy killed midway): its 8-byte header length, JSON header and the data the header describes
    must all be there."""
    size = path.stat().st_size
    with path.open("rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise ModelFileError(f"{path}: truncated weights ({size} bytes, not a safetensors file)")
        (n,) = struct.unpack("<Q", head)
        if n > size - 8:
            raise ModelFileError(
                f"{path}: truncated weights (the header says {n} bytes of metadata, the file has {size})"
            )
        try:
            header = json.loads(fh.read(n))
        except (ValueError, UnicodeDecodeError):
            raise ModelFileError(f"{path}: damaged weights (the safetensors header is not JSON)") from None
    if not isinstance(header, dict):
        raise ModelFileError(f"{path}: damaged weights (the safetensors header is not an object)")
    ends = [
        int(v["data_offsets"][1])
        for k, v in header.items()
        if k != "__metadata__" and isinstance(v, dict) and isinstance(v.get("data_offsets"), list)
    ]
    need = 8 + n + max(ends, default=0)
    if size < need:
        raise ModelFileError(f"{path}: truncated weights ({size} of {need} bytes)")


def check_model_dir(path: str | Path, where: str) -> Path:
    """``path`` as a model folder, or ``ModelFileError`` (``where: ...``) saying what is wrong."""
    p = Path(path)
    if p.is_file():
        raise ModelFileError(
            f"{where}: {p} is a file; a model is a folder (config.json, tokenizer and weights)"
        )
    if not p.is_dir():
        raise ModelFileError(f"{where}: no model folder at {p}")
    if not any(p.iterdir()):
        raise ModelFileError(f"{where}: {p} is an empty folder, not a model")
    config = p / "config.json" if (p / "config.json").is_file() else p / "adapter_config.json"
    if not config.is_file():
        raise ModelFileError(f"{where}: {p}: no model here (expected config.json or adapter_config.json)")
    try:
        data = json.loads(config.read_bytes())
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise ModelFileError(f"{where}: {config}: not a JSON model config ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise ModelFileError(f"{where}: {config}: not a JSON model config (not an object)")
    weights = sorted(f for pattern in _WEIGHTS for f in p.glob(pattern) if f.is_file())
    if not weights:
        raise ModelFileError(f"{where}: {p}: no weights file (model.safetensors)")
    for f in weights:
        if f.suffix == ".safetensors":
            try:
                check_safetensors(f)
            except ModelFileError as exc:
                raise ModelFileError(f"{where}: {exc}") from None
    return p


def load_error(where: str, exc: BaseException) -> str:
    """One line for a model that transformers (or peft) could not load from ``where``."""
    text = " ".join(str(exc).split())
    if "size mismatch" in text or "ignore_mismatched_sizes" in text or "mismatched" in text.lower():
        return f"{where}: the weights do not match the model's config.json (tensor shapes differ)"
    first = text[:300] if text else type(exc).__name__
    return f"{where}: cannot load the model ({type(exc).__name__}: {first})"
