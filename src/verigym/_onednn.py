"""Whether oneDNN's float32 linear kernel is usable, and from what weight size verigym uses it.

Shared by the trainer's update kernels (``train._cpu_kernels``) and the local decoder's packed
products (``policies.local._products``): one threshold, so the tiny models (64 × 256 layers) keep
their ``F.linear``/MKL numerics bit for bit on both paths. Imports nothing of verigym.
"""

from __future__ import annotations

import torch

__all__ = ["MIN_WEIGHT", "available", "mm"]

MIN_WEIGHT = 1 << 16
"""Weights with fewer entries keep ``F.linear`` (the tiny models' layers: 64 × 256 = 16,384)."""

_AVAILABLE: list[bool] = []


def available() -> bool:
    """Whether this torch build has oneDNN's linear kernel (``torch.ops.mkldnn._linear_pointwise``)."""
    if not _AVAILABLE:
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
