"""Where one served greedy reply's time goes: ``torch.profiler`` over the policy's own generation pass.

Loads SmolLM2-135M-Instruct as ``verigym serve`` does (``LocalPolicy``, float32, CPU), sets torch's
threads (2 by default, as ``serve --threads 2``), and runs ``run_rows`` — the pass under
``LocalPolicy`` and ``verigym serve`` — on one chat prompt, greedy, ``--tokens`` tokens with EOS
ignored: once to warm up, once timed (wall and process CPU seconds), once under the profiler. Prints
the timings and the profiler's table of ops by self CPU time.

    python benchmarks/serve_step_profile.py [--threads 2] [--tokens 64] [--rows 20]
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.profiler import ProfilerActivity, profile

from verigym.policies.local import LocalPolicy
from verigym.policies.local._engine import run_rows
from verigym.types import Message, Sampling


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--rows", type=int, default=16, help="rows of the profiler's table")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    pol = LocalPolicy.from_pretrained(args.model, device="cpu")
    ids = pol.encode([Message(role="user", content="Write a short poem about the sea.")])

    def once() -> None:
        spec = pol.spec(ids, Sampling(temperature=0.0, max_tokens=args.tokens), 0)
        run_rows(pol.model, pol.tokenizer, [spec], eos_ids=[], pad_id=0)

    with torch.inference_mode():
        once()
        cpu, wall = time.process_time(), time.perf_counter()
        once()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(
            f"unprofiled: wall {wall * 1e3:.0f} ms, cpu {cpu * 1e3:.0f} ms for {args.tokens} tokens "
            f"+ prefill of {len(ids)}"
        )
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            once()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))


if __name__ == "__main__":
    main()
