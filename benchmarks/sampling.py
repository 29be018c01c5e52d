"""Batched sampling throughput: ``LocalPolicy`` vs ``transformers`` ``model.generate(..., output_scores=True)``.

Same model, same prompts, same batch, same length limit, temperature 1; both sides return what RL needs:
the sampled ids and each sampled token's logprob (``output_scores`` + ``compute_transition_scores``).
Two scenarios, each running the sides alternately round by round (who goes first alternates; every
round draws new samples on both sides) and printing each round's tokens/s, the ratio and the median
ratio with MET / NOT MET against issue 17's targets (fixed ≥ 1.5×, RL-style ≥ 2.5×):

* ``fixed``: ``--batch`` distinct prompts, EOS ignored on both sides, so every row decodes exactly
  ``--new-tokens`` tokens (pure per-step efficiency).
* ``grpo``: what RL does: ``--groups`` prompts of ~150 tokens × ``--n`` samples each
  (``num_return_sequences`` for transformers), stopping at EOS; tokens/s counts the tokens each row
  really produced (through its EOS). LocalPolicy prefills each prompt once and drops finished rows.

Prompts are tokenised again every round on both sides (``--cached-prompts``: once, on both sides).

    python benchmarks/sampling.py                       # small (~3M) model, CPU
    python benchmarks/sampling.py --size 100m --device cuda --batch 64 --new-tokens 256
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import torch

from verigym.policies import tiny
from verigym.policies.local import LocalPolicy
from verigym.types import Message, Sampling

# ~104M parameters with the character vocabulary (random init; for GPU sessions).
SIZE_100M = {
    "hidden_size": 768,
    "num_hidden_layers": 11,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
}


def build(size: str, device: str) -> tuple[Any, Any]:
    tok = tiny.build_tokenizer()
    model = (
        tiny.build_model("base", tok, seed=0, **SIZE_100M) if size == "100m" else tiny.build_model(size, tok)
    )
    return model.to(device).eval(), tok


def prompts(n: int, long: bool = False) -> list[list[Message]]:
    lead = "Solve the problem. Show no work, answer with the number only. " * 2 if long else ""
    return [[Message(role="user", content=f"{lead}What is {17 * i % 97} + {31 * i % 89}?")] for i in range(n)]


def run_local(
    policy: LocalPolicy,
    rows: list[list[Message]],
    new_tokens: int,
    n: int = 1,
    seed: int = 0,
    cached: bool = False,
) -> int:
    if not cached:  # tokenise the prompts again every round, as the transformers side does
        policy.clear_encode_cache()
    sampling = Sampling(temperature=1.0, max_tokens=new_tokens)
    count = len(rows) * n
    seeds = list(range(seed * count, (seed + 1) * count))  # a fresh draw every round
    out = policy.generate([r for r in rows for _ in range(n)], sampling, seeds=seeds)
    assert all(c.logprobs and len(c.logprobs) == len(c.completion_token_ids or ()) for c in out)
    return sum(len(c.completion_token_ids or ()) for c in out)


def run_hf(
    model: Any,
    tok: Any,
    rows: list[list[Message]],
    new_tokens: int,
    device: str,
    n: int = 1,
    fixed: bool = True,
    seed: int = 0,
    enc: Any = None,
) -> int:
    torch.manual_seed(seed)
    if enc is None:
        enc = encode_hf(tok, rows, device)
    with torch.inference_mode():
        out = model.generate(
            **enc,
            do_sample=True,
            temperature=1.0,
            top_p=1.0,
            top_k=0,
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens if fixed else 0,
            num_return_sequences=n,
            output_scores=True,
            return_dict_in_generate=True,
            pad_token_id=tok.pad_token_id,
        )
        logprobs = model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
    new = out.sequences[:, enc["input_ids"].shape[1] :]
    assert logprobs.shape == new.shape
    if fixed:
        return int(new.numel())
    ended = (new == tok.eos_token_id).int().cumsum(-1)
    return int(
        ((ended == 0) | ((ended == 1) & (new == tok.eos_token_id))).sum()
    )  # tokens through the first EOS


def encode_hf(tok: Any, rows: list[list[Message]], device: str) -> Any:
    texts = [
        tok.apply_chat_template([m.to_openai() for m in r], add_generation_prompt=True, tokenize=False)
        for r in rows
    ]
    return tok(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)


def interleaved(ours: Any, theirs: Any, rounds: int) -> list[tuple[float, float]]:
    """``rounds`` pairs of (verigym, transformers) tokens/s; the side that runs first alternates and
    every round draws new samples (seed = round) on both sides."""
    pairs = []
    for r in range(rounds):
        rates = {}
        for name, fn in [("ours", ours), ("theirs", theirs)][:: 1 if r % 2 == 0 else -1]:
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            start = time.perf_counter()
            tokens = fn(r + 1)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            rates[name] = tokens / (time.perf_counter() - start)
        pairs.append((rates["ours"], rates["theirs"]))
    return pairs


def report(title: str, pairs: list[tuple[float, float]], target: float) -> None:
    print(f"\n{title}")
    print("  round  transformers tok/s  verigym tok/s  ratio")
    for i, (ours, theirs) in enumerate(pairs):
        print(f"  {i:5d}  {theirs:18.0f}  {ours:13.0f}  {ours / theirs:5.2f}x")
    ratios = [o / t for o, t in pairs]
    med = statistics.median(ratios)
    print(f"  median ratio (verigym / transformers): {med:.2f}x, min {min(ratios):.2f}x; "
          f"target >= {target}x: {'MET' if med >= target else 'NOT MET'}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--size", default="small", choices=[*tiny.SIZES, "100m"], help="model size")
    parser.add_argument(
        "--scenario", default="both", choices=["fixed", "grpo", "both"], help="what to measure"
    )
    parser.add_argument("--batch", type=int, default=32, help="fixed: rows decoded together")
    parser.add_argument("--groups", type=int, default=8, help="grpo: distinct prompts")
    parser.add_argument("--n", type=int, default=8, help="grpo: samples per prompt")
    parser.add_argument(
        "--new-tokens", type=int, default=64, help="tokens generated per row (the limit in grpo)"
    )
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (sides alternate first)")
    parser.add_argument(
        "--device", default="cuda" if torch.cuda.is_available() else "cpu", help="cpu or cuda"
    )
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads for both sides")
    parser.add_argument(
        "--cached-prompts",
        action="store_true",
        help="both sides tokenise the prompts once and reuse them every round (default: both re-tokenise "
        "every round; LocalPolicy's prompt memo is cleared)",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    model, tok = build(args.size, args.device)
    params = tiny.count_parameters(model)
    print(
        f"model: {args.size} ({params / 1e6:.1f}M params), device {args.device}, torch threads {torch.get_num_threads()}"
    )
    fixed = LocalPolicy(model, tok, name=args.size, stop_token_ids=[], max_batch_rows=4096)
    natural = LocalPolicy(model, tok, name=args.size, max_batch_rows=4096)
    run_local(fixed, prompts(2), 4)  # warm-up both paths
    run_hf(model, tok, prompts(2), 4, args.device)
    cached = args.cached_prompts
    print(
        f"prompts: {'tokenised once, reused every round' if cached else 're-tokenised every round'} on both sides"
    )
    if args.scenario in ("fixed", "both"):
        rows = prompts(args.batch)
        enc = encode_hf(tok, rows, args.device) if cached else None
        run_local(fixed, rows, 1, cached=True)  # fills the memo when cached (outside the timed rounds)
        pairs = interleaved(
            lambda r: run_local(fixed, rows, args.new_tokens, seed=r, cached=cached),
            lambda r: run_hf(model, tok, rows, args.new_tokens, args.device, seed=r, enc=enc),
            args.rounds,
        )
        report(f"fixed: batch {args.batch} x exactly {args.new_tokens} new tokens", pairs, 1.5)
    if args.scenario in ("grpo", "both"):
        rows = prompts(args.groups, long=True)
        enc = encode_hf(tok, rows, args.device) if cached else None
        run_local(natural, rows, 1, cached=True)
        pairs = interleaved(
            lambda r: run_local(natural, rows, args.new_tokens, args.n, seed=r, cached=cached),
            lambda r: run_hf(
                model, tok, rows, args.new_tokens, args.device, args.n, fixed=False, seed=r, enc=enc
            ),
            args.rounds,
        )
        plen = len(natural.encode(rows[0]))
        report(
            f"grpo: {args.groups} prompts (~{plen} tokens) x {args.n} samples, stop at EOS, limit {args.new_tokens}",
            pairs,
            2.5,
        )


if __name__ == "__main__":
    main()
