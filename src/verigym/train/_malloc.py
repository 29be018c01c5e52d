"""glibc's malloc set for a training process on a CPU: large freed blocks go back to the system.

torch's CPU tensors come from ``malloc``. glibc serves a request of at least its mmap threshold with
its own ``mmap`` (returned with ``munmap`` when freed) and smaller ones from its heap, and by default
the threshold is *dynamic*: each time an mmapped block is freed it rises to that block's size (up to
32 MiB). After the first RL update almost every activation of a 135M model (1–4 MB each) is
therefore carved out of the heap, and the heap keeps what the backward pass frees, in pieces that the
next, differently-sized pack cannot all reuse: on SmolLM2-135M-Instruct the update's peak RSS was
~500 MB above the memory actually live (``benchmarks/RESULTS.md``, issue 43 item 2).

``tune_for_training()`` (called once by ``train._cpu_kernels.training_kernels(model=...)``) fixes the
threshold at ``MMAP_THRESHOLD`` (which also stops its dynamic rise) and the heap's trim threshold at
``TRIM_THRESHOLD``, with ``mallopt``; both are process-wide and affect only where memory comes from,
never a value. It does nothing where the C library is not glibc (musl, macOS, Windows) or when the
user set glibc's own environment variables for these (``MALLOC_MMAP_THRESHOLD_``,
``MALLOC_TRIM_THRESHOLD_``), which then win.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "glibc", "release", "tune_for_training", "tuned"]

MMAP_THRESHOLD: int | None = 2 << 20
"""Requests of at least this many bytes are mmapped (and unmapped when freed); None: glibc's own."""
TRIM_THRESHOLD: int | None = 1 << 27
"""Free memory at the heap's top above this is handed back; None: glibc's own."""
TRIM_EACH = True
TRIM_AFTER_FORWARD = True
"""``release()`` hands every free page of the heap back (``malloc_trim(0)``)."""

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_DONE: list[bool] = []
_LIBC: list[ctypes.CDLL] = []


def glibc() -> ctypes.CDLL | None:
    """The running process's glibc, or None (another C library or platform)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        version = libc.gnu_get_libc_version
    except (OSError, AttributeError):
        return None
    version.restype = ctypes.c_char_p
    return libc if version() else None


def tune_for_training() -> bool:
    """Set the thresholds above once per process; True when they were set (now or earlier)."""
    if _DONE:
        return _DONE[0]
    libc = glibc()
    ok = False
    if libc is not None:
        _LIBC.append(libc)
        ok = True
        for env, param, value in (
            ("MALLOC_MMAP_THRESHOLD_", _M_MMAP_THRESHOLD, MMAP_THRESHOLD),
            ("MALLOC_TRIM_THRESHOLD_", _M_TRIM_THRESHOLD, TRIM_THRESHOLD),
        ):
            if env not in os.environ and value is not None:
                ok = bool(libc.mallopt(ctypes.c_int(param), ctypes.c_int(value))) and ok
    _DONE.append(ok)
    return ok


def tuned() -> bool:
    """Whether ``tune_for_training()`` set the thresholds in this process (a model at or above the
    kernels' size threshold has been trained here)."""
    return bool(_DONE and _DONE[0])


def release(at_exit: bool = False) -> None:
    """Hand the heap's free pages back to the system (glibc's ``malloc_trim(0)``); elsewhere nothing.
    ``at_exit``: the call after a forward (``TRIM_AFTER_FORWARD``)."""
    if TRIM_EACH and (TRIM_AFTER_FORWARD or not at_exit) and tune_for_training():
        libc = _LIBC[0] if _LIBC else glibc()
        if libc is not None:
            libc.malloc_trim(ctypes.c_size_t(0))
