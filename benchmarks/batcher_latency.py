"""Short-request latency behind a long running pass (issue 17): a 512-token request is in flight (EOS
ignored, so it runs its full length) when a 1-token request arrives; prints the short one's wait and
how far the long row had got. ``python benchmarks/batcher_latency.py [--rounds 3]``.

Target: the short request is answered while the long row is still generating (not after its 512th
token)."""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="repetitions")
    args = ap.parse_args()
    import torch

    from verigym.policies import tiny
    from verigym.policies.local import LocalPolicy
    from verigym.types import Message, Sampling

    torch.set_num_threads(1)
    path = tiny.create("tiny", Path(tempfile.mkdtemp()) / "m", seed=0)
    policy = LocalPolicy.from_pretrained(path, device="cpu", stop_token_ids=[])
    ids = policy.encode([Message(role="user", content="1+2=")])

    async def once() -> bool:
        made: list[int] = []
        long = policy.spec(ids, Sampling(max_tokens=512), 1)
        long.on_token = made.append
        t0 = time.perf_counter()
        running = asyncio.create_task(policy.submit([long]))
        while len(made) < 16:
            await asyncio.sleep(0.005)
        t1 = time.perf_counter()
        await policy.submit([policy.spec(ids, Sampling(max_tokens=1), 2)])
        t2, at = time.perf_counter(), len(made)
        await running
        t3 = time.perf_counter()
        print(
            f"short answered after {t2 - t1:.3f}s (long row at token {at}/512); long took {t3 - t0:.3f}s; "
            f"load {os.getloadavg()[0]:.2f}"
        )
        return at < 512

    ok = all([asyncio.run(once()) for _ in range(args.rounds)])
    print(f"short answered before the long row finished in every round: {'MET' if ok else 'NOT MET'}")


if __name__ == "__main__":
    main()
