"""The products of one SmolLM2-135M decode step, by kernel: MKL and oneDNN, plain and packed.

For each weight shape of SmolLM2-135M-Instruct (q/k/v fused 576 -> 960, o 576 -> 576, gate/up fused
576 -> 3072, down 1536 -> 576, the lm head 576 -> 49152) and each batch size, the median of 30 calls
(after 3 warm-up calls) of: ``x @ w`` on a transposed [in, out] copy (MKL; the lean decoder before issue
43), ``F.linear`` on the [out, in] weight (MKL), ``torch.ops.mkldnn._linear_pointwise`` on it (oneDNN),
the same on a copy packed by ``torch.ops.mkldnn._reorder_linear_weight(w, B)`` (what
``policies/local/_products.Product`` uses, packed for 32 rows), MKL's packed gemm
(``torch.ops.mkl._mkl_reorder_linear_weight`` / ``_mkl_linear``), and at one row ``torch.mv``.
Random float32 weights; each weight but the head fits the L2/L3 caches when called again and again, so
the per-layer figures at one row are cache-hot (a real step streams all 538 MB from memory). Prints
microseconds per call and the weight's bytes over that time.

    python benchmarks/decode_products.py THREADS BATCHES      # e.g. 1 1,8,32
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

SHAPES = {"qkv": (576, 960), "o": (576, 576), "gu": (576, 3072), "down": (1536, 576), "head": (576, 49152)}


def bench(f: Callable[[], object], n: int = 30) -> float:
    for _ in range(3):
        f()
    times = []
    for _ in range(n):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2] * 1e6


def kernels(batch: int, i: int, o: int) -> dict[str, float]:
    """Microseconds per call of each kernel for a [batch, i] @ [i, o] product."""
    w = torch.randn(o, i)  # [out, in]
    wt = w.t().contiguous()
    x = torch.randn(batch, i)
    dnnl = torch.ops.mkldnn._linear_pointwise
    packed = torch.ops.mkldnn._reorder_linear_weight(w, batch)
    mkl = torch.ops.mkl._mkl_reorder_linear_weight(w, batch)
    res = {
        "x@wt": bench(lambda: x @ wt),
        "linear": bench(lambda: F.linear(x, w)),
        "dnnl": bench(lambda: dnnl(x, w, None, "none", [], "")),
        "dnnl_pk": bench(lambda: dnnl(x, packed, None, "none", [], "")),
        "mkl_pk": bench(lambda: torch.ops.mkl._mkl_linear(x, mkl, w, None, batch)),
    }
    if batch == 1:
        res["mv"] = bench(lambda: torch.mv(w, x[0]))
    return res


def main() -> None:
    torch.set_num_threads(int(sys.argv[1]))
    for batch in (int(b) for b in sys.argv[2].split(",")):
        for name, (i, o) in SHAPES.items():
            res = kernels(batch, i, o)
            mb = i * o * 4 / 1e6
            cells = " ".join(f"{k}={v:.0f}us({mb / v * 1e3:.1f}GB/s)" for k, v in res.items())
            print(batch, name, cells, flush=True)


if __name__ == "__main__":
    main()
