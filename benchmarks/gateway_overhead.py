"""The recording gateway's cost per call against calling the policy's server directly (issue 38 item 7).

One ``LocalPolicy`` in this process is served twice, each on its own uvicorn thread: (a) **direct**,
``verigym serve``'s ``RunningServer``; (b) **gateway**, ``verigym.gateway.Gateway`` (a session per
rollout, opened before and closed after it, its URL-path carrier ``.../sessions/{id}/v1`` as the
client's base URL, every call recorded). The client is the official ``openai.AsyncOpenAI`` (one per
side, its connection pool shared by the side's rollouts). A rollout is a small chat loop of ``--calls``
calls (a short user prompt, then follow-ups, each reply appended to the conversation), greedy
(``temperature=0``) with ``seed`` = rollout index + call index; at concurrency C, C rollouts run at once
out of ``max(C, --rollouts)`` per round. The two sides get the same prompts and seeds and alternate round
by round (A B, B A, ...), each warmed up before the first round. A call's wall time is the client's,
from ``create`` to its parsed reply.

Two backends:

- ``fast``: the tiny model (``verigym.policies.tiny.create("tiny", dir)``) with ``max_tokens=1``, so the
  model's time is ~0 and the difference is the gateway's own cost: reported in ms added per call. Run
  twice: over HTTP as above (``fast``), and ``fast-asgi``, where the client's httpx transport calls each
  side's ASGI app in the client's own event loop (``create_app(policy)`` against ``Gateway.app``; no
  sockets, no uvicorn, no server threads), which leaves the server-side work with less noise around it.
  Short rounds (``--fast-rounds`` of ``--fast-rollouts`` rollouts) paired by round: the median of the
  per-round differences and its interquartile range.
- ``smollm2``: SmolLM2-135M-Instruct (``LocalPolicy.from_pretrained("smollm2-135m-instruct")``,
  ``--threads`` torch threads, ``max_tokens`` 64): the overhead as a % of a SmolLM2 call's wall time,
  per round (median and spread over rounds); MET / NOT MET against the target, gateway overhead
  <= 5% of a SmolLM2 call's wall time at each concurrency.

    python benchmarks/gateway_overhead.py [--backends fast,smollm2] [--concurrency 1,64] [--rounds 6,3]

Also prints, per side, the mean completion tokens and (first round) how many replies were identical
on both sides; ``--json`` adds every figure as one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai
import torch

from verigym.gateway import Gateway
from verigym.policies import tiny
from verigym.policies.local import LocalPolicy
from verigym.serve import RunningServer, create_app

DIRECT = "direct"
GATEWAY = "gateway"
TARGET_PCT = 5.0
ASGI_PORT = 9  # the port in the ASGI rows' URLs (nothing listens: the transport calls the app)

PROMPTS: tuple[str, ...] = (
    "Write a short poem about the sea.",
    "Explain why the sky is blue.",
    "Give me three tips for learning to cook.",
    "Describe a busy train station in the morning.",
    "What are the benefits of regular exercise?",
    "Tell me a short story about a lost cat.",
    "Explain how a bicycle works.",
    "List some good habits for better sleep.",
    "Describe the taste of a fresh strawberry.",
    "Why do leaves change colour in autumn?",
    "Write a friendly note to a new neighbour.",
    "Explain what a computer program is to a child.",
    "What makes a good team leader?",
    "Describe a walk through a forest in winter.",
    "Give advice to someone starting their first job.",
    "Explain how rain forms.",
)
FOLLOW_UPS: tuple[str, ...] = ("Say that more briefly.", "Now give one example.", "Thanks. Anything else?")


@dataclass
class Call:
    wall_s: float
    tokens: int
    text: str


@dataclass
class SideRun:
    """One side at one concurrency in one round."""

    wall_s: float
    cpu_s: float  # this process's CPU time (every thread: client, servers, torch) over the round
    calls: dict[tuple[int, int], Call]  # (rollout, call) -> call

    def mean_ms(self) -> float:
        """The mean wall time of a call, as its client saw it (queueing included)."""
        return 1000 * statistics.fmean(c.wall_s for c in self.calls.values())

    def round_ms(self) -> float:
        """The round's wall time per call: the server's cost per call once it is busy (at C > 1)."""
        return 1000 * self.wall_s / len(self.calls)

    def cpu_ms(self) -> float:
        """The process's CPU time per call (the client's part is the same on both sides)."""
        return 1000 * self.cpu_s / len(self.calls)


@dataclass
class Level:
    """Both sides at one concurrency, over the rounds."""

    runs: dict[str, list[SideRun]] = field(default_factory=lambda: {DIRECT: [], GATEWAY: []})

    def added_ms(self) -> list[float]:
        return [g.mean_ms() - d.mean_ms() for d, g in zip(self.runs[DIRECT], self.runs[GATEWAY], strict=True)]

    def added_pct(self) -> list[float]:
        return [
            100 * (g.mean_ms() / d.mean_ms() - 1)
            for d, g in zip(self.runs[DIRECT], self.runs[GATEWAY], strict=True)
        ]

    def mean_tokens(self, side: str) -> float:
        return statistics.fmean(c.tokens for run in self.runs[side] for c in run.calls.values())

    def same_replies(self) -> tuple[int, int]:
        a, b = self.runs[DIRECT][0].calls, self.runs[GATEWAY][0].calls
        return sum(a[k].text == b[k].text for k in a), len(a)


class Side:
    """A base URL for each rollout, and what to do when it ends."""

    def __init__(self, name: str, client: openai.AsyncOpenAI, gateway: Gateway | None, url: str) -> None:
        self.name, self.client, self.gateway, self.url = name, client, gateway, url

    def begin(self) -> tuple[str, str | None]:
        if self.gateway is None:
            return self.url, None
        session = self.gateway.open()
        return session.base_url, session.id

    def end(self, sid: str | None, calls: int) -> None:
        if self.gateway is not None and sid is not None:
            recorded = self.gateway.close(sid)
            if len(recorded) != calls:
                raise RuntimeError(f"session {sid} recorded {len(recorded)} calls, expected {calls}")


async def rollout(side: Side, model: str, r: int, calls: int, max_tokens: int) -> dict[tuple[int, int], Call]:
    base_url, sid = side.begin()
    client = side.client.with_options(base_url=base_url)  # both sides: the same client work
    messages: list[dict[str, Any]] = [{"role": "user", "content": PROMPTS[r % len(PROMPTS)]}]
    out: dict[tuple[int, int], Call] = {}
    for k in range(calls):
        start = time.perf_counter()
        reply = await client.chat.completions.create(
            model=model,
            messages=messages,  # type: ignore[arg-type]
            max_tokens=max_tokens,
            temperature=0.0,
            seed=r + k,
        )
        wall = time.perf_counter() - start
        text = reply.choices[0].message.content or ""
        out[(r, k)] = Call(wall, reply.usage.completion_tokens if reply.usage else 0, text)
        messages += [
            {"role": "assistant", "content": text},
            {"role": "user", "content": FOLLOW_UPS[k % len(FOLLOW_UPS)]},
        ]
    side.end(sid, calls)
    return out


async def run_side(
    side: Side, model: str, concurrency: int, rollouts: int, calls: int, max_tokens: int
) -> SideRun:
    todo = list(range(rollouts))
    out: dict[tuple[int, int], Call] = {}

    async def worker() -> None:
        while todo:
            out.update(await rollout(side, model, todo.pop(0), calls, max_tokens))

    start, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return SideRun(time.perf_counter() - start, time.process_time() - cpu, out)


def spread(values: list[float], fmt: str) -> str:
    """``median [min, max]`` over up to 5 rounds, ``median [IQR p25, p75]`` over more."""
    if len(values) <= 5:
        lo, hi, tag = min(values), max(values), ""
    else:
        q = statistics.quantiles(values, n=4, method="inclusive")
        lo, hi, tag = q[0], q[2], "IQR "
    return f"{format(statistics.median(values), fmt)} [{tag}{format(lo, fmt)}, {format(hi, fmt)}]"


async def measure(
    policy: LocalPolicy,
    label: str,
    levels: list[int],
    rounds: list[int],
    rollouts: int,
    calls: int,
    max_tokens: int,
    asgi: bool = False,
    verbose: bool = True,
) -> dict[int, Level]:
    """Both sides over ``policy``: uvicorn servers on their threads, or (``asgi``) their ASGI apps called
    in this event loop by the client's transport (no sockets, no server threads)."""
    model = policy.name
    if asgi:  # the gateway is never started: a session's URL only carries its id to the app
        server, gateway = None, Gateway(policy, port=ASGI_PORT)
        direct_url, apps = f"http://127.0.0.1:{ASGI_PORT}/v1", (create_app(policy), gateway.app)
    else:
        server, gateway = RunningServer(policy).start(), Gateway(policy).start()
        direct_url, apps = server.url, (None, None)

    def client(url: str, app: Any) -> openai.AsyncOpenAI:  # the same client and pool on both sides
        if app is None:
            pool = openai.DefaultAsyncHttpxClient(limits=httpx.Limits(max_connections=256))
        else:
            pool = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), timeout=600)
        return openai.AsyncOpenAI(base_url=url, api_key="none", max_retries=0, http_client=pool)

    sides = {
        DIRECT: Side(DIRECT, client(direct_url, apps[0]), None, direct_url),
        GATEWAY: Side(GATEWAY, client(gateway.url + "/v1", apps[1]), gateway, gateway.url),
    }
    out: dict[int, Level] = {}
    try:
        for c in levels:
            n = max(c, rollouts)
            for side in sides.values():  # warm-up: connections, the batcher's loop, the encode cache
                await run_side(side, model, min(c, 4), min(n, 4), calls, max_tokens)
            level = out[c] = Level()
            for rnd in range(rounds[min(levels.index(c), len(rounds) - 1)]):
                order = [DIRECT, GATEWAY] if rnd % 2 == 0 else [GATEWAY, DIRECT]
                for name in order:
                    run = await run_side(sides[name], model, c, n, calls, max_tokens)
                    level.runs[name].append(run)
                    if verbose:
                        print(
                            f"{label} c={c:<3} round {rnd} {name:>7}: {run.mean_ms():9.2f} ms/call, "
                            f"{run.round_ms():7.2f} ms of the round's wall, {run.cpu_ms():6.2f} ms CPU per call "
                            f"({len(run.calls)} calls, {run.wall_s:.1f} s)",
                            flush=True,
                        )
    finally:
        for side in sides.values():
            await side.client.close()
        if server is not None:
            server.stop()
            gateway.stop()
    return out


def report(label: str, levels: dict[int, Level], pct: bool) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for c, level in levels.items():
        d = [r.mean_ms() for r in level.runs[DIRECT]]
        g = [r.mean_ms() for r in level.runs[GATEWAY]]
        same, total = level.same_replies()
        added, added_pct = level.added_ms(), level.added_pct()
        dw = [r.round_ms() for r in level.runs[DIRECT]]
        gw = [r.round_ms() for r in level.runs[GATEWAY]]
        added_wall = [b - a for a, b in zip(dw, gw, strict=True)]
        dc = [r.cpu_ms() for r in level.runs[DIRECT]]
        gc = [r.cpu_ms() for r in level.runs[GATEWAY]]
        added_cpu = [b - a for a, b in zip(dc, gc, strict=True)]
        print(
            f"{label} c={c}: direct {spread(d, '.2f')} ms/call, gateway {spread(g, '.2f')} ms/call; "
            f"added {spread(added, '+.2f')} ms/call ({spread(added_pct, '+.1f')}%); "
            f"completion tokens {level.mean_tokens(DIRECT):.1f} / {level.mean_tokens(GATEWAY):.1f}; "
            f"same replies (round 0) {same}/{total}"
        )
        print(
            f"  round wall per call: direct {spread(dw, '.2f')} ms, gateway {spread(gw, '.2f')} ms; "
            f"added {spread(added_wall, '+.2f')} ms"
        )
        print(
            f"  process CPU per call: direct {spread(dc, '.2f')} ms, gateway {spread(gc, '.2f')} ms; "
            f"added {spread(added_cpu, '+.2f')} ms"
        )
        figures[str(c)] = {
            "direct_ms": d,
            "gateway_ms": g,
            "added_ms": added,
            "added_pct": added_pct,
            "direct_round_ms_per_call": dw,
            "gateway_round_ms_per_call": gw,
            "added_round_ms_per_call": added_wall,
            "direct_cpu_ms_per_call": dc,
            "gateway_cpu_ms_per_call": gc,
            "added_cpu_ms_per_call": added_cpu,
            "median_added_ms": statistics.median(added),
            "median_added_pct": statistics.median(added_pct),
            "tokens": {DIRECT: level.mean_tokens(DIRECT), GATEWAY: level.mean_tokens(GATEWAY)},
            "same_replies": [same, total],
        }
        if pct:
            verdict = "MET" if statistics.median(added_pct) <= TARGET_PCT else "NOT MET"
            figures[str(c)]["verdict"] = verdict
            print(
                f"  target: gateway overhead <= {TARGET_PCT:.0f}% of a SmolLM2 call at c={c}: "
                f"{statistics.median(added_pct):+.1f}% (median of {len(added_pct)} rounds) {verdict}"
            )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--backends", default="fast,smollm2", help="comma-separated: fast, smollm2")
    parser.add_argument("--concurrency", default="1,64", help="comma-separated concurrent rollouts")
    parser.add_argument(
        "--rounds", default="6,3", help="rounds per side on smollm2, per concurrency level (sides alternate)"
    )
    parser.add_argument("--fast-rounds", type=int, default=30, help="rounds per side on the fast backend")
    parser.add_argument("--calls", type=int, default=3, help="calls per rollout")
    parser.add_argument("--rollouts", type=int, default=1, help="rollouts per round on smollm2 (at least C)")
    parser.add_argument(
        "--fast-rollouts", type=int, default=20, help="rollouts per round on fast (at least C)"
    )
    parser.add_argument("--max-tokens", type=int, default=64, help="max_tokens per smollm2 call")
    parser.add_argument("--model", default="smollm2-135m-instruct", help="model directory or catalogue name")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--verbose", action="store_true", help="print every round of the fast backend too")
    parser.add_argument("--json", action="store_true", help="also print the figures as one JSON object")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    levels = [int(c) for c in args.concurrency.split(",")]
    backends = args.backends.split(",")
    figures: dict[str, Any] = {}
    if "fast" in backends:
        path = tiny.create("tiny", Path(tempfile.mkdtemp()) / "tiny", seed=0)
        policy = LocalPolicy.from_pretrained(path, device="cpu")
        runs = asyncio.run(
            measure(
                policy,
                "fast",
                levels,
                [args.fast_rounds],
                args.fast_rollouts,
                args.calls,
                1,
                verbose=args.verbose,
            )
        )
        figures["fast"] = report("fast", runs, pct=False)
        runs = asyncio.run(
            measure(
                policy,
                "fast-asgi",
                levels,
                [args.fast_rounds],
                args.fast_rollouts,
                args.calls,
                1,
                asgi=True,
                verbose=args.verbose,
            )
        )
        figures["fast-asgi"] = report("fast-asgi", runs, pct=False)
    if "smollm2" in backends:
        policy = LocalPolicy.from_pretrained(args.model, device="cpu")
        runs = asyncio.run(
            measure(
                policy,
                "smollm2",
                levels,
                [int(r) for r in args.rounds.split(",")],
                args.rollouts,
                args.calls,
                args.max_tokens,
            )
        )
        figures["smollm2"] = report("smollm2", runs, pct=True)
        if "fast" in figures:
            for c in levels:  # the round's wall per call: a call's latency at C=1, the server's cost at C>1
                direct = statistics.median(figures["smollm2"][str(c)]["direct_round_ms_per_call"])
                added = statistics.median(figures["fast"][str(c)]["added_round_ms_per_call"])
                print(
                    f"fast backend's added ms per call at c={c} as a share of a SmolLM2 call "
                    f"({direct:.0f} ms of the round's wall per call): {100 * added / direct:+.3f}%"
                )
    if args.json:
        print(json.dumps(figures))


if __name__ == "__main__":
    main()
