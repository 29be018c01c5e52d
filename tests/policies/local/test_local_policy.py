"""LocalPolicy: token-level fidelity, batching invariance, stops, tool calls, micro-batching, LoRA."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import torch

from verigym.policies import tiny
from verigym.policies.base import PolicyError, sample
from verigym.policies.local import LocalPolicy, RowSpec
from verigym.policies.local.chat import strip_markers
from verigym.types import Completion, Message, Sampling


def _close(a: list[Completion], b: list[Completion], tol: float) -> bool:
    if [c.completion_token_ids for c in a] != [c.completion_token_ids for c in b]:
        return False
    pairs = [
        (x, y)
        for ca, cb in zip(a, b, strict=True)
        for x, y in zip(ca.logprobs or (), cb.logprobs or (), strict=True)
    ]
    return all(abs(x - y) < tol for x, y in pairs)


PROMPTS = [[Message(role="user", content=f"{i}+{3 * i + 1}=")] for i in range(6)]


@pytest.fixture(scope="module")
def policy(tiny_dir: Path) -> LocalPolicy:
    return LocalPolicy.from_pretrained(tiny_dir, device="cpu")


def teacher_forced(model: torch.nn.Module, c: Completion, temperature: float = 1.0) -> list[float]:
    assert c.prompt_token_ids is not None and c.completion_token_ids is not None
    ids = torch.tensor([[*c.prompt_token_ids, *c.completion_token_ids]])
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits[0].float() / temperature, dim=-1)
    start = len(c.prompt_token_ids) - 1
    return [logp[start + j, t].item() for j, t in enumerate(c.completion_token_ids)]


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_logprobs_equal_a_teacher_forced_pass_and_ids_decode_to_text(
    policy: LocalPolicy, temperature: float
) -> None:
    out = policy.generate(PROMPTS, Sampling(temperature=temperature, max_tokens=24), seeds=list(range(6)))
    assert len(out) == 6
    for c in out:
        assert c.token_ids_exact and c.completion_token_ids and c.logprobs
        assert len(c.logprobs) == len(c.completion_token_ids) == c.usage.completion_tokens
        ref = teacher_forced(policy.model, c, temperature)
        assert max(abs(a - b) for a, b in zip(ref, c.logprobs, strict=True)) < 1e-4
        decoded = policy.tokenizer.decode(c.completion_token_ids, skip_special_tokens=True)
        assert strip_markers(decoded, policy.markers) == c.text  # no <tool_call> text in content
        assert c.prompt_token_ids == tuple(policy.encode(PROMPTS[out.index(c)]))
        if c.finish_reason == "stop":
            assert c.completion_token_ids[-1] == policy.tokenizer.eos_token_id
        else:
            assert c.finish_reason == "length" and len(c.completion_token_ids) == 24


def test_batched_equals_one_at_a_time_with_the_same_seeds(policy: LocalPolicy) -> None:
    sampling = Sampling(temperature=1.0, top_p=0.9, top_k=40, max_tokens=20, top_logprobs=3)
    seeds = [11, 12, 13, 14, 15, 16]
    batched = policy.generate(PROMPTS, sampling, seeds=seeds)
    for i, row in enumerate(PROMPTS):
        alone = policy.generate([row], sampling, seeds=[seeds[i]])[0]
        assert alone.completion_token_ids == batched[i].completion_token_ids
        assert alone.text == batched[i].text
        assert alone.logprobs is not None and batched[i].logprobs is not None
        assert max(abs(a - b) for a, b in zip(alone.logprobs, batched[i].logprobs, strict=True)) < 1e-4
    assert batched[0].top_logprobs is not None and len(batched[0].top_logprobs[0]) == 3
    assert list(batched[0].top_logprobs[0]) == sorted(batched[0].top_logprobs[0], reverse=True)
    other = policy.generate(PROMPTS, sampling, seeds=[s + 100 for s in seeds])
    assert [c.completion_token_ids for c in other] != [c.completion_token_ids for c in batched]


def test_fast_path_and_transformers_forward_agree(tiny_dir: Path) -> None:
    slow = LocalPolicy.from_pretrained(tiny_dir, device="cpu", fast_path=False)
    fast = LocalPolicy.from_pretrained(tiny_dir, device="cpu")
    sampling = Sampling(temperature=1.0, max_tokens=16, stop=("q",))
    a = slow.generate(PROMPTS * 2, sampling, seeds=list(range(12)))
    b = fast.generate(PROMPTS * 2, sampling, seeds=list(range(12)))
    assert _close(a, b, 1e-5) and [c.finish_reason for c in a] == [c.finish_reason for c in b]


def test_greedy_is_deterministic_and_follows_the_argmax(policy: LocalPolicy) -> None:
    sampling = Sampling(temperature=0.0, max_tokens=12)
    a, b = policy.generate(PROMPTS[:2], sampling), policy.generate(PROMPTS[:2], sampling)
    assert [c.completion_token_ids for c in a] == [c.completion_token_ids for c in b]
    ids = torch.tensor([list(a[0].prompt_token_ids or ())])
    with torch.no_grad():
        first = int(policy.model(ids).logits[0, -1].argmax())
    assert a[0].completion_token_ids is not None and a[0].completion_token_ids[0] == first


def test_stop_strings_cut_the_text_but_keep_the_sampled_ids(policy: LocalPolicy) -> None:
    free = policy.generate(PROMPTS[:1], Sampling(max_tokens=40), seeds=[3])[0]
    assert len(free.text) >= 4
    stop = free.text[2:4]
    cut = policy.generate(PROMPTS[:1], Sampling(max_tokens=40, stop=(stop,)), seeds=[3])[0]
    assert cut.finish_reason == "stop"
    assert cut.text == free.text[: free.text.find(stop)]
    assert stop in policy.tokenizer.decode(cut.completion_token_ids or ())


def test_tool_calls_are_parsed_from_the_template_markup(policy: LocalPolicy) -> None:
    from verigym.policies.local.chat import parse_tool_calls

    text, calls = parse_tool_calls('ok <tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>')
    assert text == "ok" and calls[0].name == "add" and calls[0].parsed_arguments() == {"a": 1}
    text, calls = parse_tool_calls("<tool_call>{not json</tool_call>")
    assert calls == () and "not json" in text
    again = parse_tool_calls('ok <tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>')[1]
    assert (
        again[0].id.startswith("call_")
        and again[0].id
        == parse_tool_calls('ok <tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>')[1][0].id
    )


class _StopAfter:
    def __init__(self, n: int) -> None:
        self.n = n
        self.seen: list[int] = []

    def __call__(self, row: int, top_logprobs: Sequence[tuple[float, ...]]) -> bool:
        self.seen.append(row)
        assert all(len(t) == 20 for t in top_logprobs)
        return row == 1 and len(top_logprobs) >= self.n


def test_early_stop_ends_only_the_rows_it_names(policy: LocalPolicy) -> None:
    rule = _StopAfter(3)
    out = policy.generate(PROMPTS[:3], Sampling(max_tokens=30, temperature=0.0), early_stop=rule)
    assert out[1].finish_reason == "early_stop" and len(out[1].completion_token_ids or ()) == 3
    assert out[0].finish_reason != "early_stop"
    assert {0, 1, 2} <= set(rule.seen)


async def test_concurrent_complete_calls_share_one_pass(policy: LocalPolicy) -> None:
    before = policy.passes
    sampling = Sampling(max_tokens=8, seed=5)
    results = await asyncio.gather(*(policy.complete(p, sampling=sampling) for p in PROMPTS * 4))
    assert policy.passes - before == 1
    alone = policy.generate(PROMPTS[:1], sampling, seeds=[5])[0]
    assert results[0].completion_token_ids == alone.completion_token_ids
    group = await sample(policy, PROMPTS[0], sampling=Sampling(max_tokens=8, n=4, seed=7))
    assert len(group) == 4 and len({c.completion_token_ids for c in group}) > 1
    assert (
        group[1].completion_token_ids
        == policy.generate(PROMPTS[:1], sampling, seeds=[8])[0].completion_token_ids
    )


async def test_bad_requests_raise_policy_errors(policy: LocalPolicy) -> None:
    with pytest.raises(PolicyError, match="max_tokens"):
        await policy.complete(PROMPTS[0], sampling=Sampling(max_tokens=0))
    with pytest.raises(PolicyError, match="context"):
        policy.generate([[Message(role="user", content="9" * 2100)]], Sampling(max_tokens=4))
    with pytest.raises(PolicyError, match="cannot load"):
        LocalPolicy.from_pretrained("/nonexistent/model/dir")


def test_generation_restores_train_mode_and_reports_the_version(policy: LocalPolicy) -> None:
    policy.model.train()
    policy.version = 3
    try:
        c = policy.generate(PROMPTS[:1], Sampling(max_tokens=4))[0]
        assert policy.model.training and c.policy_version == 3
        loss = policy.model(torch.tensor([[1, 2, 3]]), labels=torch.tensor([[1, 2, 3]])).loss
        loss.backward()  # generation left no inference-mode tensors in the way of training
    finally:
        policy.model.zero_grad()
        policy.model.eval()
        policy.version = 0


def test_lora_adapters_change_outputs_and_unload_restores_them(tiny_dir: Path, adapter_dir: Path) -> None:
    policy = LocalPolicy.from_pretrained(tiny_dir, device="cpu")
    sampling = Sampling(temperature=1.0, max_tokens=16)
    base = policy.generate(PROMPTS[:3], sampling, seeds=[1, 2, 3])
    base_weight = policy.model.model.embed_tokens.weight
    policy.load_adapter(adapter_dir, "a1")
    assert policy.adapters == ["a1"]
    same = policy.generate(PROMPTS[:3], sampling, seeds=[1, 2, 3])  # loaded, not active
    assert _close(same, base, 1e-5)
    policy.set_adapter("a1")
    tuned = policy.generate(PROMPTS[:3], sampling, seeds=[1, 2, 3])
    assert not _close(tuned, base, 1e-3)
    policy.set_adapter(None)
    back = policy.generate(PROMPTS[:3], sampling, seeds=[1, 2, 3])
    assert _close(back, base, 1e-5)
    policy.unload_adapter("a1")
    assert policy.adapters == [] and policy.model.model.embed_tokens.weight is base_weight
    with pytest.raises(PolicyError):
        policy.set_adapter("a1")


def test_a_fresh_untrained_model_works_without_saving() -> None:
    tok = tiny.build_tokenizer()
    policy = LocalPolicy(tiny.build_model("tiny", tok, seed=2), tok, name="fresh")
    out = policy.generate(PROMPTS[:1], Sampling(max_tokens=5, temperature=0.0))[0]
    assert out.model == "fresh" and out.usage.prompt_tokens == len(out.prompt_token_ids or ())


def test_a_trainers_peft_model_samples_with_its_own_lora(tiny_dir: Path) -> None:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(1)
    base = AutoModelForCausalLM.from_pretrained(tiny_dir)
    model = get_peft_model(
        base, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    )
    policy = LocalPolicy(model, AutoTokenizer.from_pretrained(tiny_dir))
    c = policy.generate(PROMPTS[:1], Sampling(max_tokens=10), seeds=[4])[0]
    ref = teacher_forced(model, c)
    assert max(abs(a - b) for a, b in zip(ref, c.logprobs or (), strict=True)) < 1e-4
    with model.disable_adapter():
        off = teacher_forced(model, c)
    assert max(abs(a - b) for a, b in zip(off, c.logprobs or (), strict=True)) > 1e-3


async def test_complete_returns_parsed_tool_calls(tool_model_dir: Path, tool_case: dict[str, Any]) -> None:
    policy = LocalPolicy.from_pretrained(tool_model_dir, device="cpu")
    messages = [Message(role="user", content=m["content"]) for m in tool_case["messages"]]
    c = await policy.complete(
        messages, tools=tool_case["tools"], sampling=Sampling(temperature=0.0, max_tokens=80)
    )
    assert c.finish_reason == "tool_calls" and c.text == "ok"
    assert [(t.name, t.parsed_arguments()) for t in c.tool_calls] == [("add", {"a": 1})]
    # the completion's ids are exactly the reply + EOS, and the message renders back to the same markup
    reply = policy.tokenizer(tool_case["reply"], add_special_tokens=False)["input_ids"]
    assert list(c.completion_token_ids or ()) == [*reply, policy.tokenizer.eos_token_id]
    rendered = policy.tokenizer.apply_chat_template([c.as_message().to_openai()], tokenize=False)
    assert tool_case["reply"] in rendered
    without = await policy.complete(messages, sampling=Sampling(temperature=0.0, max_tokens=80))
    assert without.tool_calls == ()  # no tools offered: nothing is parsed


def test_fast_path_handles_grouped_query_attention() -> None:
    tok = tiny.build_tokenizer()
    model = tiny.build_model("tiny", tok, seed=3, num_key_value_heads=2)
    sampling = Sampling(max_tokens=12)
    a = LocalPolicy(model, tok, fast_path=False).generate(PROMPTS, sampling, seeds=list(range(6)))
    b = LocalPolicy(model, tok).generate(PROMPTS, sampling, seeds=list(range(6)))
    assert _close(a, b, 1e-5)


def test_rows_joining_a_running_pass_sample_as_if_alone(policy: LocalPolicy) -> None:
    from verigym.policies.local._engine import run_rows

    sampling = Sampling(max_tokens=12)
    long_prompt = policy.encode([Message(role="user", content="123456+7=")])
    first, joiner = policy.spec(long_prompt, sampling, 1), policy.spec(policy.encode(PROMPTS[0]), sampling, 2)
    asked: list[tuple[int, int, int]] = []
    delivered: dict[int, object] = {}

    def admit(length: int, live: int, room: int) -> list[RowSpec]:
        asked.append((length, live, room))
        return [joiner] if len(asked) == 3 else []

    with torch.inference_mode():
        out = run_rows(
            policy.model, policy.tokenizer, [first], eos_ids=[], pad_id=0, admit=admit,
            deliver=lambda spec, res: delivered.update({id(spec): res}),
        )  # fmt: skip
        alone = run_rows(
            policy.model,
            policy.tokenizer,
            [policy.spec(joiner.prompt_ids, sampling, 2)],
            eos_ids=[],
            pad_id=0,
        )
    assert asked[0][0] == len(long_prompt) + 1 and asked[0][1] == 1
    assert delivered[id(first)] is out[0] and len(delivered) == 2
    got = delivered[id(joiner)]
    assert got.token_ids == alone[0].token_ids  # type: ignore[attr-defined]
    assert max(abs(a - b) for a, b in zip(got.logprobs, alone[0].logprobs, strict=True)) < 1e-5  # type: ignore[attr-defined]


def test_a_late_joiner_samples_as_if_alone_after_the_cache_is_trimmed(
    policy: LocalPolicy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row that joins late sits behind positions only finished rows used; once they finish the pass
    drops those positions (``FastLlama.trim``), and the joiner's samples are unchanged by both."""
    from verigym.policies.local import _fast_llama
    from verigym.policies.local._engine import run_rows

    trims: list[int] = []
    real_trim = _fast_llama.FastLlama.trim
    monkeypatch.setattr(
        _fast_llama.FastLlama, "trim", lambda self, first: (trims.append(first), real_trim(self, first))[1]
    )
    first = policy.spec(
        policy.encode([Message(role="user", content="123456+7=")]), Sampling(max_tokens=60), 1
    )
    joiner = policy.spec(policy.encode(PROMPTS[1]), Sampling(max_tokens=70), 2)
    asked: list[int] = []
    delivered: dict[int, Any] = {}

    def admit(length: int, live: int, room: int) -> list[RowSpec]:
        asked.append(length)
        return [joiner] if len(asked) == 40 else []

    with torch.inference_mode():
        out = run_rows(
            policy.model, policy.tokenizer, [first], eos_ids=[], pad_id=0, admit=admit,
            deliver=lambda spec, res: delivered.update({id(spec): res}),
        )  # fmt: skip
        alone = run_rows(policy.model, policy.tokenizer, [joiner], eos_ids=[], pad_id=0)[0]
    # the joiner's first token sat at cache index 40 + len(first prompt) - len(its prompt); all of it goes
    assert trims == [asked[39] - len(joiner.prompt_ids)]
    assert len(out) == 1 and out[0] is delivered[id(first)]  # the returned list covers the pass's own rows
    got = delivered[id(joiner)]
    assert got.token_ids == alone.token_ids and len(got.token_ids) == 70
    assert max(abs(a - b) for a, b in zip(got.logprobs, alone.logprobs, strict=True)) < 1e-5


async def test_continuous_batching_returns_the_same_samples(tiny_dir: Path) -> None:
    policy = LocalPolicy.from_pretrained(tiny_dir, device="cpu", continuous=True)
    sampling = Sampling(max_tokens=10, seed=9)

    async def later(i: int) -> Completion:
        await asyncio.sleep(0.01 * i)
        return await policy.complete(PROMPTS[i % 6], sampling=sampling.model_copy(update={"seed": i}))

    results = await asyncio.gather(*(later(i) for i in range(12)))
    for i, c in enumerate(results):
        assert (
            c.completion_token_ids
            == policy.generate([PROMPTS[i % 6]], sampling, seeds=[i])[0].completion_token_ids
        )


async def test_a_short_call_does_not_wait_for_a_long_running_pass(tiny_dir: Path) -> None:
    """Issue 17: a 1-token call arriving during a long pass joins it (micro-batching mode, the default)
    and returns while the long row is still generating, not after its last token."""
    policy = LocalPolicy.from_pretrained(tiny_dir, device="cpu", stop_token_ids=[])
    ids = policy.encode(PROMPTS[0])
    made: list[int] = []
    # The long row waits (in the generating thread) at its 4th token until the short call is queued,
    # and again from the step after the short row's token until the test has looked: the short call
    # provably arrives and returns mid-pass at any speed (60 s only bounds a failure).
    queued, looked = threading.Event(), threading.Event()
    short_at: list[int] = []
    long = policy.spec(ids, Sampling(max_tokens=300), 1)
    short_spec = policy.spec(ids, Sampling(max_tokens=1), 2)

    def long_token(token: int) -> None:
        made.append(token)
        if len(made) == 4:
            queued.wait(60)
        if short_at and len(made) >= short_at[0] + 2:  # after the step that finished the short row
            looked.wait(60)

    long.on_token = long_token
    short_spec.on_token = lambda token: short_at.append(len(made))
    running = asyncio.create_task(policy.submit([long]))
    try:
        while len(made) < 4:
            await asyncio.sleep(0.001)
        short_call = asyncio.create_task(policy.submit([short_spec]))
        await asyncio.sleep(0)  # the call ran up to its wait: it is in the running pass's inbox
        queued.set()
        short = await short_call
        at = len(made)
        assert not running.done() and at < 300
        assert len(short[0].token_ids) == 1 and policy.passes == 1  # it joined the running pass
    finally:
        queued.set()
        looked.set()
    assert len((await running)[0].token_ids) == 300
    alone = policy.run([policy.spec(ids, Sampling(max_tokens=1), 2)])
    assert short[0].token_ids == alone[0].token_ids


async def test_calls_of_similar_length_still_form_the_next_micro_batch(tiny_dir: Path) -> None:
    policy = LocalPolicy.from_pretrained(tiny_dir, device="cpu", stop_token_ids=[], continuous=False)
    ids = policy.encode(PROMPTS[0])
    made: list[int] = []
    first = policy.spec(ids, Sampling(max_tokens=40), 1)
    first.on_token = made.append
    running = asyncio.create_task(policy.submit([first]))
    while len(made) < 2:
        await asyncio.sleep(0.001)
    second = await policy.submit([policy.spec(ids, Sampling(max_tokens=30), 2)])
    assert running.done() and len(second[0].token_ids) == 30 and policy.passes == 2
