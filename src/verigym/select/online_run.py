"""DeepConf-online for real: warm-up traces, then the rest generated with ``OnlineDeepConf`` as the
early-stop hook inside ``LocalPolicy.generate`` (Fu et al. 2025, "Deep Think with Confidence").

``run_online`` is what a caller (the benchmark, a trainer's rollout step) uses to spend fewer
tokens on one prompt. A policy without a ``generate(..., early_stop=...)`` entry point (an
OpenAI-compatible endpoint) cannot stop a trace mid-generation: the traces are sampled in full,
the same rule is applied afterwards, and the result says ``mode="offline-fallback"`` with no
tokens saved. See ``verigym.select._online`` for what a server needs to do it itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from verigym.policies.base import Policy, sample
from verigym.select._common import Candidate, Selection
from verigym.select._confidence import DEFAULT_FRACTION, DEFAULT_K, DEFAULT_WINDOW
from verigym.select._online import OnlineDeepConf, select_online, vote_online
from verigym.types import Completion, Message, Sampling

if TYPE_CHECKING:
    from verigym.policies.local import LocalPolicy

__all__ = ["OnlineRun", "run_online"]


@dataclass
class OnlineRun:
    """The traces (warm-up first), the hook as calibrated, the pick, and the token accounting.

    ``mode``: ``live`` (traces were stopped during generation) or ``offline-fallback``.
    ``tokens_used`` counts every completion token generated; ``stopped`` the traces cut.
    """

    completions: list[Completion]
    warmup: int
    hook: OnlineDeepConf
    selection: Selection
    tokens_used: int
    stopped: int
    mode: str


async def run_online(
    policy: Policy | LocalPolicy,
    prompt: Sequence[Message],
    *,
    n: int,
    sampling: Sampling,
    answer: Callable[[str], str | None],
    warmup: int = 16,
    eta: float = 0.1,
    window: int = DEFAULT_WINDOW,
    fraction: float = DEFAULT_FRACTION,
    k: int = DEFAULT_K,
    seeds: Sequence[int] | None = None,
) -> OnlineRun:
    """``n`` traces of ``prompt`` with DeepConf-online; ``answer(text)`` extracts what a trace votes for.

    Trace ``i`` uses ``seeds[i]`` (default ``sampling.seed + i``), so a live run and a full
    sampling of the same seeds produce the same prefixes.
    """
    if not 1 <= warmup <= n:
        raise ValueError(f"warmup must be between 1 and n ({n}), got {warmup}")
    sampling = sampling.model_copy(
        update={"logprobs": True, "top_logprobs": max(sampling.top_logprobs, k), "n": 1}
    )
    base = sampling.seed if sampling.seed is not None else 0
    seeds = list(seeds) if seeds is not None else [base + i for i in range(n)]
    hook = OnlineDeepConf(window=window, k=k, eta=eta, fraction=fraction)
    generate = getattr(policy, "generate", None)
    if generate is None:
        one = sampling.model_copy(update={"n": n, "seed": seeds[0]})
        done = await sample(policy, prompt, sampling=one)  # type: ignore[arg-type]
        cands = _candidates(done, answer)
        sel = select_online(cands, warmup=warmup, eta=eta, window=window, fraction=fraction, k=k)
        hook.calibrate([c.top_logprobs or () for c in done[:warmup]])
        used = sum(c.usage.completion_tokens for c in done)
        return OnlineRun(done, warmup, hook, sel, used, int(sel.detail["stopped"]), "offline-fallback")
    warm = await asyncio.to_thread(generate, [list(prompt)] * warmup, sampling, seeds=seeds[:warmup])
    hook.calibrate([c.top_logprobs or () for c in warm])
    rest: list[Completion] = []
    if n > warmup:
        rest = await asyncio.to_thread(
            generate, [list(prompt)] * (n - warmup), sampling, seeds=seeds[warmup:], early_stop=hook
        )
    done = list(warm) + list(rest)
    stopped = [c.finish_reason == "early_stop" for c in done]
    sel = vote_online(_candidates(done, answer), hook, stopped)
    used = sum(c.usage.completion_tokens for c in done)
    sel.detail = {
        "tokens_used": used,
        "stopped": sum(stopped),
        "threshold": hook.threshold,
        "window": hook.window,
        "mode": "live",
    }
    return OnlineRun(done, warmup, hook, sel, used, sum(stopped), "live")


def _candidates(done: Sequence[Completion], answer: Callable[[str], str | None]) -> list[Candidate]:
    out = []
    for i, c in enumerate(done):
        stopped = c.finish_reason == "early_stop"
        out.append(Candidate.from_completion(i, c, answer=None if stopped else answer(c.text)))
    return out
