"""Checkpoints that resume exactly: model (or LoRA adapter), tokenizer, optimizer, scheduler, RNG
states, the trainer's own state and the step.

Layout of ``RUN_DIR/checkpoints/step_000010/``: ``model/`` (``save_pretrained``: full weights, or
the adapter for LoRA), ``trainer.pt`` (optimizer, scheduler, RNG states, trainer state) and
``state.json`` (step, for humans); ``model/`` also holds the training record
(``verigym_training.json``, ``policies.trained``) when the trainer gives one. ``RUN_DIR/checkpoints/latest`` names the newest one. A
checkpoint is written to a temporary directory and renamed, so a crash never leaves half of one; a
model with a NaN or infinite tensor is never written (``check_finite``, before anything is); a full
disk is one line (``DiskFull``: which file, how much, the last complete checkpoint, how to resume)
and the partial folder is removed.

What resume needs is kept once. Only the newest checkpoint keeps its ``trainer.pt`` (AdamW's state is
twice the trainable weights: ~1.1 GB for a 135M model trained in full); the one before keeps its
weights only, and older ones are removed. A frozen KL reference model is written once per run, to
``checkpoints/ref/``, before the first checkpoint that needs it is published: ``--resume`` loads it
from there, never from the resumed weights. The run's final model (``RUN_DIR/checkpoint/``) is the last checkpoint's
``model/`` hard-linked, not a second copy (``link_model``); ``disk_usage`` states the cost.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import random
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from verigym._files import file_op, make_dir, remove_file, remove_tree, replace, write_atomic

if TYPE_CHECKING:
    from verigym.policies.trained import TrainingRecord

__all__ = [
    "REF_DIR",
    "DiskFull",
    "TrainingHalted",
    "check_finite",
    "disk_full_line",
    "disk_usage",
    "is_disk_full",
    "latest_checkpoint",
    "link_model",
    "load_checkpoint",
    "rng_state",
    "save_checkpoint",
    "set_rng_state",
]


class TrainingHalted(RuntimeError):
    """A run that cannot go on honestly, as one line: a model with non-finite weights (never
    published), too many skipped steps in a row, or a run that never updated the model."""

    exit_code = 2


def check_finite(model: Any, what: str) -> None:
    """Raise ``TrainingHalted`` when any floating-point tensor of ``model``'s state (weights and
    buffers) holds a NaN or an infinity: such a model is never written. One device sync."""
    floats = [t for t in model.state_dict().values() if torch.is_tensor(t) and t.is_floating_point()]
    if not floats:
        return
    with torch.no_grad():
        flags = torch.stack([torch.isfinite(t).all() for t in floats])
    if bool(flags.all()):
        return
    names = [n for n, t in model.state_dict().items() if torch.is_tensor(t) and t.is_floating_point()]
    first = names[int((~flags).nonzero()[0])]
    raise TrainingHalted(
        f"{what}: the model has non-finite weights ({first} holds NaN or inf), so it is not saved; "
        "lower rl.lr (or sft.lr) or check the rewards"
    )


class DiskFull(TrainingHalted):
    """The disk filled while a checkpoint was written; the message is the one line a user needs."""


_FULL = (errno.ENOSPC, errno.EDQUOT)
_FULL_WORDS = ("No space left on device", "Disk quota exceeded", "os error 28", "StorageFull")


def is_disk_full(exc: BaseException, where: Path | None = None) -> bool:
    """Whether ``exc`` (or what caused it) is a full disk: ``ENOSPC``/``EDQUOT``, an error whose text says
    so (safetensors' ``SafetensorError``), or an I/O or runtime failure while the file system under
    ``where`` has under 1 MB left (``torch.save`` says only "unexpected pos")."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in _FULL:
            return True
        if any(word in str(seen) for word in _FULL_WORDS):  # safetensors' SafetensorError says so
            return True
        seen = seen.__cause__ or seen.__context__
    if where is not None and isinstance(exc, (OSError, RuntimeError)):
        with contextlib.suppress(OSError):
            return shutil.disk_usage(where).free < 1 << 20
    return False


def _mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB" if n >= 1e5 else f"{n / 1e3:,.0f} kB"


def _expected_bytes(root: Path, model: Any, optimizer: Any) -> int:
    """About how much one checkpoint takes: the last complete one's size, else the weights and the
    optimizer's state in memory."""
    done = sorted(p for p in root.glob("step_*") if (p / "trainer.pt").is_file())
    if done:
        return sum(st.st_size for _, st in _files(done[-1]))
    tensors = list(model.state_dict().values())
    for state in optimizer.state_dict().get("state", {}).values():
        tensors += [t for t in state.values() if torch.is_tensor(t)]
    return sum(t.numel() * t.element_size() for t in tensors if torch.is_tensor(t))


class _Writing:
    """Which file of a checkpoint is being written, for ``DiskFull``'s line."""

    def __init__(self, root: Path, expected: int) -> None:
        self.root, self.expected, self.path = root, expected, root

    def at(self, path: Path) -> None:
        self.path = path
        file_op("write", path)

    @contextlib.contextmanager
    def cleanup_on_disk_full(self, *partial: Path) -> Iterator[None]:
        try:
            yield
        except Exception as exc:
            if not is_disk_full(exc, self.root):
                raise
            target = getattr(exc, "filename", None) or self.path
            written = sum(st.st_size for p in partial if p.exists() for _, st in _files(p))
            for p in partial:  # the partial folders go: they would keep the disk full
                shutil.rmtree(p, ignore_errors=True)
            raise DiskFull(disk_full_line(self.root.parent, target, written, self.expected)) from None


def disk_full_line(
    run_dir: str | Path, target: str | Path, written: int | None = None, expected: int | None = None
) -> str:
    """The one line for a full disk while writing ``target`` of the run in ``run_dir``: how much was
    written and needed (a checkpoint's partial folder, which is gone by then), what is free, the last
    complete checkpoint and how to resume."""
    run = Path(run_dir)
    free = ""
    with contextlib.suppress(OSError):
        free = f"; {_mb(shutil.disk_usage(run).free)} free"
    if expected is not None:
        so_far = f" after {_mb(written or 0)} of it were written" if written else ""
        what = f"{so_far}; a checkpoint needs about {_mb(expected)}{free}; the partial checkpoint was removed"
    else:
        what = free
    last = latest_checkpoint(run)
    kept = f"the last complete checkpoint is {last.name}" if last else "no checkpoint is complete yet"
    return (
        f"disk full: writing {target} failed{what}; {kept}; free space, then resume: "
        f"verigym train --resume {run}"
    )


REF_DIR = "ref"
"""``checkpoints/ref/``: the frozen KL reference of full fine-tuning, written once per run."""


def rng_state() -> dict[str, Any]:
    """The global RNG states (python, numpy, torch CPU and CUDA)."""
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(
    run_dir: str | Path,
    step: int,
    *,
    model: Any,
    tokenizer: Any,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    trainer_state: dict[str, Any],
    keep: int = 2,
    ref_model: Any = None,
    record: TrainingRecord | None = None,
) -> Path:
    """Write ``checkpoints/step_{step:06d}`` and point ``latest`` at it; keep the newest ``keep``, and
    the resume state (``trainer.pt``) of the newest only. ``ref_model`` is saved once, to ``ref/``,
    before the checkpoint is published (a checkpoint never exists without the reference it resumes
    with); ``record`` (what the weights were trained with) goes into ``model/``.

    Every file operation passes ``verigym._files`` (``file_op``: where tests inject a kill or a full
    disk). A full disk raises ``DiskFull`` (one line) after removing the partial folder."""
    check_finite(model, f"checkpoint step {step}")  # before anything is written: never published
    root = Path(run_dir) / "checkpoints"
    final = root / f"step_{step:06d}"
    tmp = root / f".tmp_step_{step:06d}"
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # no "Writing model shards" bars between our own progress lines
    writing = _Writing(root, _expected_bytes(root, model, optimizer))
    with writing.cleanup_on_disk_full(tmp, root / f".tmp_{REF_DIR}"):
        make_dir(root)
        if ref_model is not None and not (root / REF_DIR).is_dir():
            tmp_ref = root / f".tmp_{REF_DIR}"
            remove_tree(tmp_ref)
            writing.at(tmp_ref)
            ref_model.save_pretrained(tmp_ref)
            replace(tmp_ref, root / REF_DIR)
        remove_tree(tmp)
        make_dir(tmp)
        writing.at(tmp / "model")
        model.save_pretrained(tmp / "model")
        writing.at(tmp / "model" / "tokenizer.json")
        tokenizer.save_pretrained(tmp / "model")
        if record is not None:
            from verigym.policies.trained import write_record

            write_record(tmp / "model", record)
        payload = {
            "step": step,
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "rng": rng_state(),
            "trainer": trainer_state,
        }
        writing.at(tmp / "trainer.pt")
        torch.save(payload, tmp / "trainer.pt")
        write_atomic(tmp / "state.json", json.dumps({"step": step}) + "\n")
        remove_tree(final)
        replace(tmp, final)
        write_atomic(root / "latest", final.name + "\n")
    old = sorted(p for p in root.glob("step_*") if p.is_dir() and p != final)
    for p in old[: max(len(old) + 1 - keep, 0)]:
        remove_tree(p)
    for p in old:  # --resume reads the newest only: the others keep their weights, not the optimizer
        remove_file(p / "trainer.pt")
    return final


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest complete checkpoint of a run, or None."""
    root = Path(run_dir) / "checkpoints"
    pointer = root / "latest"
    if pointer.is_file():
        file_op("read", pointer)
        path = root / pointer.read_text().strip()
        if (path / "trainer.pt").is_file():
            return path
    done = sorted(p for p in root.glob("step_*") if (p / "trainer.pt").is_file())
    return done[-1] if done else None


def link_model(src: str | Path, dst: str | Path) -> Path:
    """Make ``dst`` a directory with ``src``'s files hard-linked (copied where links fail, e.g. across
    file systems): the final model without a second copy on disk. Whatever was at ``dst`` goes first,
    so nothing ever writes into a file that a checkpoint shares."""
    import os

    source, target = Path(src), Path(dst)
    if target.is_symlink() or target.is_file():
        target.unlink()
    else:
        shutil.rmtree(target, ignore_errors=True)
    for f in sorted(source.rglob("*")):
        out = target / f.relative_to(source)
        if f.is_dir():
            out.mkdir(parents=True, exist_ok=True)
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(f, out)
        except OSError:
            shutil.copy2(f, out)
    target.mkdir(parents=True, exist_ok=True)
    return target


def _files(path: Path) -> list[tuple[Path, os.stat_result]]:
    """The files under ``path`` with their stat, skipping any that vanish while it is walked: other
    writers share the folder (a torchrun rank's ``rank1/`` renames its temporary files meanwhile)."""
    found = [path] if path.is_file() else path.rglob("*")  # nothing when there is nothing
    out = []
    for p in found:
        try:
            st = p.stat()
        except FileNotFoundError:
            continue
        if stat.S_ISREG(st.st_mode):
            out.append((p, st))
    return out


def disk_usage(run_dir: str | Path, final_model: str | Path | None = None) -> dict[str, float]:
    """What a run directory costs on disk, in MB: ``run_dir_mb`` (each hard-linked file counted once),
    ``model_mb`` (the final model), ``resume_state_mb`` (the newest checkpoint's ``trainer.pt``: the
    optimizer state only ``--resume`` reads) and ``ref_model_mb`` (the frozen KL reference, if any)."""
    run = Path(run_dir)
    seen: set[tuple[int, int]] = set()
    total = 0
    for _, st in _files(run):
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            total += st.st_size
    latest = latest_checkpoint(run)

    def mb(path: Path | None) -> float:
        return round(sum(st.st_size for _, st in _files(path)) / 1e6, 1) if path is not None else 0.0

    out = {"run_dir_mb": round(total / 1e6, 1)}
    out["model_mb"] = mb(Path(final_model) if final_model is not None else None)
    out["resume_state_mb"] = mb(None if latest is None else latest / "trainer.pt")
    if (run / "checkpoints" / REF_DIR).is_dir():
        out["ref_model_mb"] = mb(run / "checkpoints" / REF_DIR)
    return out


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """The ``trainer.pt`` payload (weights are loaded separately from ``path/model``)."""
    file_op("read", Path(path) / "trainer.pt")
    payload: dict[str, Any] = torch.load(Path(path) / "trainer.pt", map_location="cpu", weights_only=False)
    return payload
