"""DeepConf-online inside LocalPolicy's generation loop, on a random-init tiny model."""

from __future__ import annotations

import pytest

from verigym.policies.local import LocalPolicy
from verigym.policies.tiny import build_model, build_tokenizer
from verigym.select._online import OnlineDeepConf
from verigym.select.online_run import run_online
from verigym.types import Message, Sampling


@pytest.fixture(scope="module")
def policy() -> LocalPolicy:
    tok = build_tokenizer()
    return LocalPolicy(build_model("tiny", tok, seed=3), tok, name="tiny-random")


async def test_live_cut_matches_replay_on_full_traces(policy: LocalPolicy) -> None:
    prompt = [Message(role="user", content="12+34=")]
    sampling = Sampling(temperature=1.0, max_tokens=48, seed=0)
    run = await run_online(
        policy,
        prompt,
        n=10,
        sampling=sampling,
        answer=lambda t: t[-1:] or None,
        warmup=4,
        eta=0.5,
        window=8,
        fraction=0,
        k=5,
    )
    assert run.mode == "live" and run.hook.threshold is not None
    # the same seeds sampled in full, then replayed: identical cut points and prefixes
    full = policy.generate(
        [prompt] * 10,
        sampling.model_copy(update={"logprobs": True, "top_logprobs": 5}),
        seeds=list(range(10)),
    )
    replay = OnlineDeepConf(run.hook.threshold, window=8, k=5, fraction=0)
    cuts = [replay.replay(c.top_logprobs or (), ended=c.finish_reason == "stop") for c in full[4:]]
    live = run.completions[4:]
    assert [c.finish_reason == "early_stop" for c in live] == [cut is not None for cut in cuts]
    assert any(cut is not None for cut in cuts)  # something was actually stopped
    for c, f, cut in zip(live, full[4:], cuts, strict=True):
        ids = c.completion_token_ids or ()
        assert ids == (f.completion_token_ids or ())[: len(ids)]
        assert len(ids) == (cut if cut is not None else len(f.completion_token_ids or ()))
    assert run.tokens_used == sum(len(c.completion_token_ids or ()) for c in run.completions)
    assert run.tokens_used < sum(len(c.completion_token_ids or ()) for c in full)
    assert run.stopped == sum(cut is not None for cut in cuts)
