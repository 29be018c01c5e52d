"""``verigym serve`` under load: 64 concurrent ``openai`` clients vs the same requests one at a time.

The server runs in this process on a free port (a real uvicorn HTTP server); clients are the official
``AsyncOpenAI``. Every request is a chat completion of exactly ``--max-tokens`` tokens (EOS ignored) with
logprobs, so all runs do the same work. The concurrent load runs twice: micro-batched (requests that
arrive during a pass wait for the next one) and continuous (they join the running pass at the next
step). Prints requests/s and tokens/s of each, generation passes, and the gain over serial.

    python benchmarks/serve_load.py --clients 64 --requests-per-client 4
"""

from __future__ import annotations

import argparse
import asyncio
import time

import openai
import torch

from verigym.policies import tiny
from verigym.policies.local import LocalPolicy
from verigym.serve import RunningServer


async def one_client(client: openai.AsyncOpenAI, index: int, count: int, max_tokens: int) -> int:
    tokens = 0
    for j in range(count):
        r = await client.chat.completions.create(
            model="bench",
            messages=[{"role": "user", "content": f"What is {index} + {j}?"}],
            max_tokens=max_tokens,
            seed=index * 1000 + j,
            logprobs=True,
        )
        assert r.usage is not None and r.usage.completion_tokens == max_tokens
        tokens += r.usage.completion_tokens
    return tokens


async def load(url: str, clients: int, per_client: int, max_tokens: int) -> tuple[float, int, int]:
    """(seconds, requests, tokens) for ``clients`` concurrent clients each sending ``per_client`` requests."""
    client = openai.AsyncOpenAI(base_url=url, api_key="none", max_retries=0, timeout=600)
    start = time.perf_counter()
    counts = await asyncio.gather(*(one_client(client, i, per_client, max_tokens) for i in range(clients)))
    wall = time.perf_counter() - start
    await client.close()
    return wall, clients * per_client, sum(counts)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--size", default="tiny", choices=list(tiny.SIZES), help="model size")
    parser.add_argument("--clients", type=int, default=64, help="concurrent clients")
    parser.add_argument(
        "--requests-per-client", type=int, default=4, help="requests each client sends in turn"
    )
    parser.add_argument("--serial-requests", type=int, default=32, help="requests sent one at a time")
    parser.add_argument("--max-tokens", type=int, default=32, help="tokens per completion")
    args = parser.parse_args()

    tok = tiny.build_tokenizer()
    model = tiny.build_model(args.size, tok, seed=0)
    policy = LocalPolicy(model, tok, name="bench", stop_token_ids=[])
    print(
        f"model: {args.size} ({tiny.count_parameters(model) / 1e6:.2f}M params), torch threads {torch.get_num_threads()}"
    )
    with RunningServer(policy, name="bench") as server:
        asyncio.run(load(server.url, 2, 1, 4))  # warm-up
        wall, n, tokens = asyncio.run(load(server.url, 1, args.serial_requests, args.max_tokens))
        serial = n / wall
        print(f"serial (1 client):        {serial:8.2f} req/s  {tokens / wall:9.0f} tokens/s  ({n} requests)")
        rates = {}
        for continuous in (False, True):
            policy.continuous = continuous
            mode = "continuous" if continuous else "micro-batched"
            before = policy.passes
            wall, n, tokens = asyncio.run(
                load(server.url, args.clients, args.requests_per_client, args.max_tokens)
            )
            passes = policy.passes - before
            rates[mode] = n / wall
            print(
                f"{args.clients} clients, {mode:13s}: {n / wall:8.2f} req/s  {tokens / wall:9.0f} tokens/s  "
                f"({n} requests, {passes} passes)"
            )
        print(
            f"batching gain over serial: micro-batched {rates['micro-batched'] / serial:.2f}x, "
            f"continuous {rates['continuous'] / serial:.2f}x"
        )


if __name__ == "__main__":
    main()
