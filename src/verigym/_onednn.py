"""Whether oneDNN's float32 linear kernel is usable, and from what weight size verigym uses it.

Shared by the trainer's update kernels (``train._cpu_kernels``) and the local decoder's packed
products (``policies.local._products``): one threshold, so the tiny models (64 × 256 layers) keep
their ``F.linear``/MKL numerics bit for bit on both paths. Imports nothing of verigym.

oneDNN keeps every primitive it compiles (one per distinct shape and kind: a product's forward,
its two backward products) in a process-wide cache, and torch's ideep layer keeps its own cache of
them beside it, 1,024 entries each by default. verigym's shapes change all the time (each packed
micro-batch's token count, each prefill's width, each decode batch size), so both fill for hours: a
SmolLM2 training process's live memory grew ~45 MB a step, and is flat with 64 entries each, at the
same speed (``benchmarks/RESULTS.md``, issue 43 item 2). ``available()`` — called before verigym's
first oneDNN product — sets ``ONEDNN_PRIMITIVE_CACHE_CAPACITY`` and torch's ``LRU_CACHE_CAPACITY``
to ``PRIMITIVE_CACHE`` unless the user set them; both are read when the first primitive is built, so
a process that used oneDNN before keeps its own capacities.
"""

from __future__ import annotations

import os

import torch

__all__ = ["MIN_WEIGHT", "PRIMITIVE_CACHE", "available", "mm"]

MIN_WEIGHT = 1 << 16
"""Weights with fewer entries keep ``F.linear`` (the tiny models' layers: 64 × 256 = 16,384)."""

PRIMITIVE_CACHE = 64
"""Entries of each primitive cache (their defaults: 1,024); a pack's or a decode step's working set is ~15."""

_AVAILABLE: list[bool] = []


def available() -> bool:
    """Whether this torch build has oneDNN's linear kernel (``torch.ops.mkldnn._linear_pointwise``)."""
    if not _AVAILABLE:
        for name in ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY"):
            os.environ.setdefault(name, str(PRIMITIVE_CACHE))
        ok = bool(torch.backends.mkldnn.is_available())
        if ok:
            try:
                probe = torch.arange(6, dtype=torch.float32).reshape(2, 3)
                got = torch.ops.mkldnn._linear_pointwise(probe, torch.ones(4, 3), None, "none", [], "")
                ok = bool(torch.equal(got, probe @ torch.ones(3, 4)))
            except (AttributeError, RuntimeError):
                ok = False
        _AVAILABLE.append(ok)
    return _AVAILABLE[0]


def mm(a: torch.Tensor, b_t: torch.Tensor) -> torch.Tensor:
    """``a @ b_t.T`` through oneDNN (``a`` 2D; ``b_t`` [out, in], any strides)."""
    out: torch.Tensor = torch.ops.mkldnn._linear_pointwise(a, b_t, None, "none", [], "")
    return out
