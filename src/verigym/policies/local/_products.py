"""The matrix products of the lean decode path (``_fast_llama``) on a CPU: one ``Product`` per weight.

torch's float32 matmul on a CPU is MKL's sgemm, which takes its AVX2 code path on this project's AMD
EPYC (Zen 5, AVX-512); oneDNN, inside the same torch build, picks its kernels by the instructions the
core has (``verigym.train._cpu_kernels``). For decoding, oneDNN on a weight packed once into its own
blocked layout (``torch.ops.mkldnn._reorder_linear_weight``) is the fastest product measured here at
every batch size: at 8 and 32 rows 2-4x MKL's ``x @ w`` on the SmolLM2-135M shapes, at 1 row as
fast (the row reads the whole weight either way: bound by memory bandwidth). ``benchmarks/RESULTS.md``,
"verigym serve's decode against llama.cpp", has the figures.

Weights with fewer than ``MIN_WEIGHT`` entries (the built-in tiny models' 64-wide layers), other dtypes
and devices, and torch builds without oneDNN keep ``x @ w`` on a transposed [in, out] copy, as before:
their numbers are unchanged bit for bit. oneDNN sums in another order than MKL: equal within float32
round-off (relative ~1e-6), not bitwise.

``ThreadChoice`` runs each decode step on one thread or on all of torch's, whichever it last timed
faster: idle, two threads stream the weights faster at every batch size, but a two-thread team on a
busy two-core machine waits a scheduler tick (4-40 ms measured) at each parallel region whenever the
other core is taken.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

import torch

from verigym._onednn import MIN_WEIGHT, available, mm

__all__ = ["MIN_WEIGHT", "PACK_ROWS", "Product", "StepThreads", "ThreadChoice", "threads"]

PACK_ROWS = 32
"""The batch size oneDNN packs a weight for. A weight packed for 8 or more rows runs as fast at 1-64
rows as one packed for that size; packed for 1 row it is ~1.5x slower at 8 and more."""

PROBE_FIRST = 8
PROBE_MOST = 256
"""``ThreadChoice`` times one and all threads after ``PROBE_FIRST`` steps, then after twice as many
each time the choice stands, up to ``PROBE_MOST``; a changed choice starts again at ``PROBE_FIRST``."""


def _packable(weight: torch.Tensor) -> bool:
    return (
        type(weight) in (torch.Tensor, torch.nn.Parameter)
        and weight.dtype == torch.float32
        and weight.device.type == "cpu"
        and weight.dim() == 2
        and weight.numel() >= MIN_WEIGHT
        and available()
    )


class Product:
    """``x @ weight.T`` for one [out, in] ``weight``, from a copy made once (rebuild it when the weight
    changes): oneDNN on a packed copy where ``_packable``, else MKL on a transposed [in, out] copy."""

    __slots__ = ("packed", "t")

    def __init__(self, weight: torch.Tensor) -> None:
        w = weight.detach()
        self.packed: torch.Tensor | None = None
        self.t: torch.Tensor | None = None
        if _packable(w):
            self.packed = torch.ops.mkldnn._reorder_linear_weight(w.contiguous(), PACK_ROWS)
        else:
            self.t = w.t().contiguous()

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.t is not None:
            return x @ self.t
        assert self.packed is not None  # one of the two copies is always made
        if not x.is_contiguous():
            x = x.contiguous()
        return mm(x, self.packed)


class _Record:
    """``ThreadChoice``'s record: steps timed so far, the step of the next probe, the probes' interval,
    the thread count in use, and the last probe's seconds per row on one thread."""

    __slots__ = ("best", "every", "next_probe", "one", "steps")

    def __init__(self, best: int) -> None:
        self.steps, self.next_probe, self.every, self.best, self.one = 0, 0, PROBE_FIRST, best, 0.0


class ThreadChoice:
    """How many torch threads the decode steps of one model run on.

    A step runs on one thread or on all of ``torch.get_num_threads()``, whichever ran faster per row when
    last timed. Two threads do more work per second than one only while both have a core: on a machine
    whose cores other processes share, each parallel region can wait a scheduler tick for a descheduled
    peer, and a decode step runs ~150 of them (measured here at load 3-5: a batch-1 step on two threads
    5-100x slower than on one). Idle, two threads are faster at every batch size, batch 1 included: one
    core streams the weights at ~34 GB/s through oneDNN, two at ~55 GB/s, and a batch-1 step reads
    all of them (SmolLM2-135M: 14.0 against 19.8 ms a token, ``benchmarks/decode_budget.py``). So from
    time to time (``PROBE_FIRST`` steps, doubling up to ``PROBE_MOST`` while the choice stands) one
    step runs on one thread and the next on all, and the faster is kept. Until the first probe, and
    for prefills (``threads``), the choice stands: one thread at first, as a served batch-1 reply's
    38-token prefill on two threads took 1.7 s at load 3 here, against ~0.1 s on one
    (``benchmarks/serve_step_profile.py``). The products give the same bits on one thread and on two
    (oneDNN and MKL split these products by rows and columns, not along the sum;
    ``tests/policies/local/test_products.py`` checks it), so the choice changes the speed only, never
    the numbers."""

    def __init__(self) -> None:
        self._record = _Record(1)  # one thread until a probe finds all threads faster

    def threads(self) -> int:
        """The thread count a step runs on now, without timing it (prefill)."""
        return min(self._record.best, torch.get_num_threads())

    @contextlib.contextmanager
    def step(self, rows: int) -> Iterator[None]:
        """Run one timed step of ``rows`` rows on the chosen thread count (or a probe's)."""
        most = torch.get_num_threads()
        if most <= 1:
            yield
            return
        rec = self._record
        probe = rec.steps - rec.next_probe  # 0: the one-thread probe, 1: the all-threads probe
        count = 1 if probe == 0 else most if probe == 1 else rec.best
        if count != most:
            torch.set_num_threads(count)
        start = time.perf_counter()
        try:
            yield
        finally:
            per_row = (time.perf_counter() - start) / max(rows, 1)
            if count != most:
                torch.set_num_threads(most)
            rec.steps += 1
            if probe == 0:
                rec.one = per_row
            elif probe == 1:
                best = 1 if rec.one < per_row else most
                rec.every = min(2 * rec.every, PROBE_MOST) if best == rec.best else PROBE_FIRST
                rec.best = best
                rec.next_probe = rec.steps + rec.every


@contextlib.contextmanager
def threads(count: int) -> Iterator[None]:
    """``count`` torch threads inside (where fewer than now), the previous count after."""
    most = torch.get_num_threads()
    if count >= most:
        yield
        return
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(most)


class StepThreads:
    """Each step of a generation pass (sampling, bookkeeping and the forward) inside its own
    ``open_step(rows)`` scope (``FastLlama.timed_step``: the thread count chosen for the step covers the
    whole of it); ``None`` (the ``transformers`` forward): nothing."""

    def __init__(self, open_step: Callable[[int], contextlib.AbstractContextManager[None]] | None) -> None:
        self._open = open_step
        self._scope: contextlib.AbstractContextManager[None] | None = None

    def __enter__(self) -> StepThreads:
        return self

    def __exit__(self, *exc: object) -> None:
        self._close()

    def next(self, rows: int) -> None:
        """End the previous step's scope and open this one's, for ``rows`` live rows."""
        self._close()
        if self._open is not None:
            self._scope = self._open(rows)
            self._scope.__enter__()

    def _close(self) -> None:
        scope, self._scope = self._scope, None
        if scope is not None:
            scope.__exit__(None, None, None)
