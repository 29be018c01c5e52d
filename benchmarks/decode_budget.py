"""Where a served batch-1 token's time goes on a real model: the decode step's budget (issue 43 item 3).

One process, SmolLM2-135M-Instruct in float32 as ``verigym serve`` loads it (``LocalPolicy``). For each
thread count in ``--threads``, each the median of ``--reps`` runs after a warm-up:

* **read bandwidth**: ``sum`` over a 540 MB float32 tensor (a batch-1 step reads every weight once);
* **products back to back**: the model's own decode products (``_fast_llama._weights``: q/k/v, o,
  gate/up and down of every layer, then the lm head), one row each, in the model's order and with
  nothing between them: the floor oneDNN gives this step;
* **greedy reply**: ``run_rows`` — the pass under ``LocalPolicy`` and ``verigym serve`` — on one chat
  prompt, ``--tokens`` tokens with EOS ignored, divided by the tokens; with ``--threads 2`` the
  decode steps run on the count ``ThreadChoice`` picks (two, idle);
* **the products' fixed cost**: a oneDNN call on a packed 256 × 256 weight (cache-resident, ~1 µs of
  arithmetic) times the step's number of products;
* **the same reply with every product stubbed** (a preallocated zero output): what the rest of the
  step costs — norms, rotary, the cache writes, attention, sampling, the engine's bookkeeping.

Prints ms per token for each; a reply's time minus the two parts is what they cost together beyond
their sum. Compare with ``benchmarks/serve_vs_llamacpp.py``'s llama.cpp tokens/s on the same machine.

    python benchmarks/decode_budget.py [--threads 1,2] [--tokens 64] [--reps 3]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from verigym.policies.local import LocalPolicy, _products
from verigym.policies.local._engine import run_rows
from verigym.policies.local._fast_llama import _weights
from verigym.types import Message, Sampling

sys.path.insert(0, str(Path(__file__).resolve().parent))
from roofline import clock  # the median of reps after a warm-up call (a sibling benchmark)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--threads", default="1,2", help="comma-separated torch thread counts")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    pol = LocalPolicy.from_pretrained(args.model, device="cpu")
    ids = pol.encode([Message(role="user", content="Write a short poem about the sea.")])
    weights = _weights(pol.model)
    products = [p for layer in weights.layers for p in layer] + [weights.head]
    inputs = [torch.randn(1, 1536 if i % 4 == 3 else 576) for i in range(len(products) - 1)]
    inputs.append(torch.randn(1, 576))
    big = torch.randn(135_000_000)
    small, row = _products.Product(torch.randn(256, 256)), torch.randn(1, 256)

    def products_once() -> None:
        for product, x in zip(products, inputs, strict=True):
            product(x)

    def reply() -> None:
        spec = pol.spec(ids, Sampling(temperature=0.0, max_tokens=args.tokens), 0)
        run_rows(pol.model, pol.tokenizer, [spec], eos_ids=[], pad_id=0)

    real_call = _products.Product.__call__
    zeros: dict[tuple[int, ...], torch.Tensor] = {}

    def stub(self: _products.Product, x: torch.Tensor) -> torch.Tensor:
        out = self.packed.shape[0] if self.packed is not None else self.t.shape[1]  # type: ignore[union-attr]
        shape = (*x.shape[:-1], out)
        return zeros.setdefault(shape, torch.zeros(shape))

    print(f"{args.model}, prompt {len(ids)} tokens, {args.tokens} greedy tokens, median of {args.reps}")
    print(
        f"| threads | read GB/s | products back to back, ms | their fixed cost ({len(products)} calls), ms | "
        "reply, ms/token | reply, products stubbed, ms/token | reply − both parts, ms/token |"
    )
    print("|---|---|---|---|---|---|---|")
    with torch.inference_mode():
        for count in (int(c) for c in args.threads.split(",")):
            torch.set_num_threads(count)
            read = big.numel() * 4 / clock(lambda: float(big.sum()), args.reps) / 1e9
            floor = clock(products_once, args.reps) * 1e3
            fixed = clock(lambda: [small(row) for _ in range(1000)], args.reps) * len(products)
            whole = clock(reply, args.reps) * 1e3 / args.tokens
            _products.Product.__call__ = stub  # type: ignore[method-assign]
            try:
                rest = clock(reply, args.reps) * 1e3 / args.tokens
            finally:
                _products.Product.__call__ = real_call  # type: ignore[method-assign]
            print(
                f"| {count} | {read:.1f} | {floor:.2f} | {fixed:.2f} | {whole:.2f} | {rest:.2f} | {whole - floor - rest:.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
