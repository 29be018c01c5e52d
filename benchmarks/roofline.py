"""How far each phase of the real-model recipe is from this machine's limits (issue 43 item 1).

One run, one process. **Peaks**, measured here and now at each ``--peak-threads`` count: float32
matrix products at a large square shape and at the model's own shapes (576 × 1536, 1536 × 576,
576 × 49,152 at 512 rows; 576 × 1536 at 1, 8 and 32 rows), through MKL (torch's ``@``) and through
oneDNN (``torch.ops.mkldnn._linear_pointwise``, what the RL update uses since issue 43 item 2); memory
bandwidth from a large copy (bytes read + written per second). Each is the fastest of 3 × ``--reps``
calls (a peak; on a shared machine the least-interrupted call); the compute peak is the best product
rate measured at that thread count, the bandwidth peak the copy's.

**Phases**, at ``--threads`` (default 1, as the recipe's benchmarks run), each timed as the median of
``--reps`` after a warm-up: prefill of 8 recipe prompts (52 tokens) and decode steps at batch 1, 8 and
32 (``policies.local._fast_llama.FastLlama``, the path ``LocalPolicy`` generates with), the RL update
(``policy_update`` at the recipe's settings on ``gpu_rl_update.make_rows``' 8 × 8 batch: forward,
backward and optimizer timed apart by wrappers), an SFT step (``sft._sft_step`` on 8 rows of prompt + 16 tokens:
on a real model the update's kernels and fused AdamW, as ``sft_train`` runs it) and grading (the math grader on
``tests/suites/math.jsonl``; no FLOP or byte count: Python and sympy).

**Work** from the shapes: FLOPs = 2 × parameters × tokens through each matmul (the body's
non-embedding parameters × every token run; the tied head × the positions projected) plus attention's
4 × layers × hidden × (query, key) pairs; backward twice the forward; bytes = weights read once per
pass (float32) plus the KV cache read per decode step; AdamW: parameters, gradients and both moments
read, parameters and moments written (28 bytes a parameter). The bound of a phase is
min(compute peak, bandwidth × FLOPs/bytes) (the roofline); ``% of bound`` = achieved / bound.

    python benchmarks/roofline.py --model smollm2-135m-instruct [--threads 1] [--peak-threads 1,2]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[1]


def clock(fn: Callable[[], Any], reps: int, warmup: int = 1, best: bool = False) -> float:
    """Median (``best``: least) seconds of ``reps`` calls after ``warmup``."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return min(out) if best else statistics.median(out)


def peaks(threads: int, reps: int, hidden: int, inter: int, vocab: int) -> dict[str, Any]:
    """Matmul GFLOP/s (MKL and oneDNN) at a square and the model's shapes, and copy GB/s."""
    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(0)
    lp = torch.ops.mkldnn._linear_pointwise
    shapes = [(2048, 2048, 2048), (512, hidden, inter), (512, inter, hidden), (512, hidden, vocab)]
    shapes += [(m, hidden, inter) for m in (1, 8, 32)]
    rates: dict[str, float] = {}
    for m, k, n in shapes:
        a = torch.randn(m, k, generator=gen)
        w = torch.randn(n, k, generator=gen)
        flops = 2 * m * k * n
        mkl, onednn = (lambda: a @ w.t()), (lambda: lp(a, w, None, "none", [], ""))  # noqa: B023
        rates[f"{m}x{k}@{k}x{n} mkl"] = flops / clock(mkl, 3 * reps, best=True) / 1e9
        rates[f"{m}x{k}@{k}x{n} onednn"] = flops / clock(onednn, 3 * reps, best=True) / 1e9
    src = torch.empty(512 * 2**20, dtype=torch.uint8).random_(generator=gen)
    dst = torch.empty_like(src)
    bw = 2 * src.numel() / clock(lambda: dst.copy_(src), 3 * reps, best=True) / 1e9
    return {"threads": threads, "matmul_GFLOPs": rates, "peak_GFLOPs": max(rates.values()), "copy_GBps": bw}


class Shapes:
    """The model's parameter counts and attention sizes."""

    def __init__(self, model: Any) -> None:
        cfg = model.config
        self.layers, self.hidden = cfg.num_hidden_layers, cfg.hidden_size
        self.heads = cfg.num_attention_heads
        self.kv_heads = getattr(cfg, "num_key_value_heads", None) or self.heads
        self.head_dim = getattr(cfg, "head_dim", None) or self.hidden // self.heads
        self.head = cfg.vocab_size * self.hidden
        self.total = sum(p.numel() for p in model.parameters())
        norms = sum(p.numel() for n, p in model.named_parameters() if "norm" in n)
        self.body = self.total - self.head - norms  # matmul parameters of the layers (tied head apart)

    def attn(self, pairs: float) -> float:
        """Score and value FLOPs of ``pairs`` (query, key) pairs over every layer."""
        return float(4 * self.layers * self.heads * self.head_dim * pairs)

    def kv_bytes(self, positions: float) -> float:
        return float(2 * self.layers * self.kv_heads * self.head_dim * 4 * positions)


def _row(
    name: str, seconds: float, flops: float, nbytes: float, pk: dict[str, Any], note: str = ""
) -> dict[str, Any]:
    f_peak, bw = pk["peak_GFLOPs"] * 1e9, pk["copy_GBps"] * 1e9
    bound = min(f_peak, bw * flops / nbytes) if nbytes else f_peak
    kind = "compute" if not nbytes or f_peak <= bw * flops / nbytes else "memory"
    return {
        "phase": name,
        "ms": seconds * 1e3,
        "GFLOP": flops / 1e9,
        "MB": nbytes / 1e6,
        "GFLOPs": flops / seconds / 1e9,
        "GBps": nbytes / seconds / 1e9,
        "bound": kind,
        "pct_of_bound": 100 * flops / seconds / bound,
        "note": note,
    }


def generation(model: Any, tok: Any, s: Shapes, pk: dict[str, Any], reps: int) -> list[dict[str, Any]]:
    from verigym.policies.local._fast_llama import FastLlama

    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "Compute 17 - 11. Give the final answer as an integer in \\boxed{}."}],
        add_generation_prompt=True, tokenize=True, return_dict=False,
    )  # fmt: skip
    p = len(prompt)
    rows = []
    weights = 4 * (s.body + s.head)
    with torch.no_grad():
        ids = torch.tensor([prompt] * 8)
        pos = torch.arange(p)[None].expand(8, p)

        def prefill() -> None:
            FastLlama(model, 8, p + 1)(ids, pos, torch.ones(8, p, dtype=torch.long))

        t = clock(prefill, reps)
        flops = 2 * s.body * 8 * p + 2 * s.head * 8 + s.attn(8 * p * (p + 1) / 2)
        rows.append(_row(f"prefill 8 × {p} tokens", t, flops, weights, pk))
        steps = 16
        for b in (1, 8, 32):
            fl = FastLlama(model, b, p + steps + 1)
            fl(
                torch.tensor([prompt] * b),
                torch.arange(p)[None].expand(b, p),
                torch.ones(b, p, dtype=torch.long),
            )
            one = torch.ones(b, 1, dtype=torch.long)

            def decode(fl: Any = fl, b: int = b, one: torch.Tensor = one) -> None:
                fl.length = p
                for i in range(steps):
                    fl(one, torch.full((b, 1), p + i), torch.ones(b, p + i + 1, dtype=torch.long))

            t = clock(decode, reps) / steps
            ctx = p + steps / 2
            flops = 2 * (s.body + s.head) * b + s.attn(b * ctx)
            rows.append(_row(f"decode step, batch {b}", t, flops, weights + s.kv_bytes(b * ctx), pk))
    return rows


def rl_update(model: Any, tok: Any, s: Shapes, pk: dict[str, Any], reps: int) -> list[dict[str, Any]]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gpu_rl_update import SHAPES, Phases, fill_old_logprobs, make_rows, patched
    from verigym.recipes.quickstart_real import real_quickstart_config
    from verigym.train import _update, packing
    from verigym.train._update import UpdateState, policy_update
    from verigym.train.optim import make_optimizer

    shape = SHAPES["recipe"]
    rows = make_rows(tok, shape, 0, model.config.vocab_size)
    pad = int(tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)
    fill_old_logprobs(model, rows, pad)
    rl = real_quickstart_config(tempfile.mkdtemp(), model="x", seed=0).rl
    opt, sched = make_optimizer(model.parameters(), rl, 10_000, foreach=True)
    state = UpdateState(optimizer=opt, scheduler=sched, generator=torch.Generator())
    ph = Phases(torch.device("cpu"))

    def step() -> None:
        state.generator.manual_seed(0)
        policy_update(model, copy.deepcopy(rows), rl, state, pad_id=pad, temperature=1.0, max_len=16,
                      micro_rows=rl.micro_batch_rows, share_prefix=rl.share_prefix)  # fmt: skip

    wraps = [(packing, "forward_packed", ph.wrap(packing.forward_packed, "forward")),
             (_update, "forward_rows", ph.wrap(_update.forward_rows, "forward")),
             (torch.autograd, "backward", ph.wrap(torch.autograd.backward, "backward")),
             (opt, "step", ph.wrap(opt.step, "optimizer"))]  # fmt: skip
    step()  # warm-up: AdamW's moments
    with patched(wraps):
        for _ in range(reps):
            step()
    t = {k: v / reps for k, v in ph.t.items()}
    micros = packing.plan_micro_batches(
        rows, packing.row_starts(rows), share_prefix=True, budget=rl.pack_tokens
    )
    body = head = pairs = 0.0
    for m in micros:
        part = [rows[i] for i in m]
        pack = packing.pack_rows(part, packing.row_starts(part), share_prefix=True, build_mask=True)
        body, head = body + pack.ids.shape[1], head + pack.keep.numel()
        assert pack.attend is not None
        pairs += float(sum(int(pack.attend[0, 0, a:b, a:b].sum()) for a, b in pack.blocks))
    fwd = 2 * s.body * body + 2 * s.head * head + s.attn(pairs)
    w = 4 * (s.body + s.head)
    note = f"{len(micros)} packs, {body:.0f} tokens, {head:.0f} projected"
    return [
        _row("RL update: forward", t["forward"], fwd, w * len(micros), pk, note),
        _row("RL update: backward", t["backward"], 2 * fwd, 2 * w * len(micros), pk),
        _row("RL update: AdamW step", t["optimizer"], 4 * s.total, 28 * s.total, pk, "fused"),
    ]


def sft_step(model: Any, tok: Any, s: Shapes, pk: dict[str, Any], reps: int) -> list[dict[str, Any]]:
    """An SFT step as ``sft.sft_train`` runs it: ``sft._sft_step`` on 8 rows of a 52-token prompt and a
    16-token answer (the loss on the answer only). On a real model on a CPU that is the RL update's
    forward (one packed sequence, oneDNN products, lean layers, the head by chunks over the answers'
    positions) and fused AdamW (``make_optimizer(foreach=True)``, as ``sft_train`` builds it)."""
    try:
        from verigym.recipes.quickstart_real import real_quickstart_config
    except ImportError:  # before verigym.recipes
        from verigym.train.quickstart_real import real_quickstart_config  # type: ignore[no-redef]
    from verigym.train._cpu_kernels import lean_training
    from verigym.train.optim import make_optimizer
    from verigym.train.packing import row_starts
    from verigym.train.samples import Row
    from verigym.train.sft import _sft_step

    sft = real_quickstart_config(tempfile.mkdtemp(), model="x", seed=0).sft
    opt, _ = make_optimizer(model.parameters(), sft, 10_000, foreach=True if lean_training(model) else None)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(100, model.config.vocab_size, (8, 68), generator=g).tolist()
    rows = [Row(ids=r, mask=[0] * 52 + [1] * 16, logprobs=None) for r in ids]
    pad = int(tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)

    def step() -> None:
        _sft_step(model, rows, sft, pad, "cpu", opt)

    t = clock(step, reps)
    model.eval()
    projected = sum(len(r.ids) - start for r, start in zip(rows, row_starts(rows), strict=True))
    flops = 6 * s.body * 8 * 68 + 6 * s.head * projected + 3 * s.attn(8 * 68 * 69 / 2) + 4 * s.total
    note = f"fwd+bwd+AdamW (the update's kernels, fused AdamW; {projected} positions projected)"
    return [_row("SFT step (8 × 68 tokens)", t, flops, 3 * 4 * (s.body + s.head) + 28 * s.total, pk, note)]


def grading(reps: int) -> dict[str, Any]:
    """The math grader over the first 60 lines of ``tests/suites/math.jsonl``, once (its verdicts are
    cached, so a second pass would time the cache)."""
    from verigym.graders.math import check_equivalent

    lines = [json.loads(x) for x in (REPO / "tests/suites/math.jsonl").read_text().splitlines() if x.strip()][
        :60
    ]
    t0 = time.perf_counter()
    for ex in lines:
        check_equivalent(ex["gold"], ex["pred"])
    t = time.perf_counter() - t0
    return {
        "phase": f"grading: math, {len(lines)} checks",
        "ms": t * 1e3,
        "ms_per_check": t * 1e3 / len(lines),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--threads", type=int, default=1, help="torch threads for the phases")
    ap.add_argument("--peak-threads", default="1,2")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", help="write every figure to this file")
    args = ap.parse_args()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from verigym.policies.catalogue import resolve

    path = resolve(args.model)
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    s = Shapes(model)
    cfg = model.config
    out: dict[str, Any] = {"peaks": [], "phases": []}
    for th in (int(x) for x in args.peak_threads.split(",")):
        pk = peaks(th, args.reps, s.hidden, cfg.intermediate_size, cfg.vocab_size)
        out["peaks"].append(pk)
        print(f"peaks at {th} thread(s): copy {pk['copy_GBps']:.1f} GB/s; matmul GFLOP/s:", flush=True)
        for k, v in pk["matmul_GFLOPs"].items():
            print(f"  {k:34s} {v:7.1f}")
    torch.set_num_threads(args.threads)
    found = [p for p in out["peaks"] if p["threads"] == args.threads]
    pk = (
        found[0] if found else peaks(args.threads, args.reps, s.hidden, cfg.intermediate_size, cfg.vocab_size)
    )
    print(f"\nphases at {args.threads} thread(s); bound = min({pk['peak_GFLOPs']:.0f} GFLOP/s, "
          f"{pk['copy_GBps']:.1f} GB/s × FLOP/byte)")  # fmt: skip
    print(
        f"{'phase':34s} {'ms':>9s} {'GFLOP':>8s} {'MB':>8s} {'GFLOP/s':>8s} {'GB/s':>6s} {'bound':>8s} {'% bound':>7s}"
    )
    for fn in (generation, rl_update, sft_step):
        for r in fn(model, tok, s, pk, args.reps):
            out["phases"].append(r)
            print(f"{r['phase']:34s} {r['ms']:9.1f} {r['GFLOP']:8.2f} {r['MB']:8.0f} {r['GFLOPs']:8.1f} "
                  f"{r['GBps']:6.2f} {r['bound']:>8s} {r['pct_of_bound']:6.1f}%  {r['note']}", flush=True)  # fmt: skip
    try:
        g = grading(args.reps)
        out["phases"].append(g)
        print(f"{g['phase']:34s} {g['ms']:9.1f}   ({g['ms_per_check']:.1f} ms a check; no FLOP/byte bound)")
    except Exception as exc:  # the grader is reported, not fatal
        print(f"grading: not measured ({type(exc).__name__}: {exc})")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
