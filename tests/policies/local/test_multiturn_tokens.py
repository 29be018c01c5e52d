"""Token-exact multi-turn on a real BPE tokenizer (SmolLM2's): each turn's prompt is the previous prompt,
the ids the model sampled, then the environment's message as the template renders it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from verigym.policies.catalogue import pull
from verigym.policies.local import LocalPolicy
from verigym.policies.local._engine import RowResult
from verigym.types import Completion, Message, Sampling, Trajectory, Turn

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# a template that strips earlier reasoning from history (as Qwen3's and DeepSeek-R1's do): it breaks the prefix
STRIPS_THINKING = CHATML.replace(
    "{{ m['content'] }}",
    "{% if m['role'] == 'assistant' and not loop.last %}{{ m['content'].split('</think>')[-1] }}"
    "{% else %}{{ m['content'] }}{% endif %}",
)
# Llama-3's header layout
LLAMA3 = (
    "{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n{{ m['content'] }}"
    "<|im_end|>{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n"
    "{% endif %}"
)


@pytest.fixture(scope="module")
def shared() -> LocalPolicy:
    return LocalPolicy.from_pretrained(Path(pull("smollm2-135m-instruct")))


@pytest.fixture
def policy(shared: LocalPolicy) -> Iterator[LocalPolicy]:
    own = shared.tokenizer.chat_template
    yield shared
    shared.tokenizer.chat_template = own  # a test that swaps the template leaves SmolLM2's own behind


def _turn(policy: LocalPolicy, messages: list[Message], sampled: list[int]) -> Completion:
    """Record ``sampled`` as what the model produced after ``messages`` (as a generation pass would)."""
    prompt = policy.encode(messages)
    spec = policy.spec(prompt, Sampling(max_tokens=64))
    return policy.completion(spec, RowResult(token_ids=sampled, logprobs=[0.0] * len(sampled), finish="eos"))


def _non_canonical(policy: LocalPolicy, text: str) -> list[int]:
    """``text`` one character per token (a split the tokenizer never makes), then EOS."""
    tok = policy.tokenizer
    ids = [tok.convert_tokens_to_ids(tok.tokenize(ch)[0]) for ch in text]
    assert ids != tok(text, add_special_tokens=False)["input_ids"]
    return [*ids, tok.convert_tokens_to_ids("<|im_end|>")]


def _two_turns(policy: LocalPolicy, first_reply: str) -> tuple[list[int], list[int], Trajectory]:
    """A guess sampled with a non-canonical split, the environment's answer, a second guess: (the ids the
    model saw and produced in turn 1, the prompt of turn 2, the trajectory)."""
    first = [Message(role="user", content="Guess a 5-letter word.")]
    sampled = _non_canonical(policy, first_reply)
    done = _turn(policy, first, sampled)
    history = [
        *first,
        Message(role="assistant", content=done.text),
        Message(role="user", content="C _ _ _ E"),
    ]
    second = _turn(policy, history, _non_canonical(policy, "caste"))
    assert done.prompt_token_ids is not None and second.prompt_token_ids is not None
    turns = [Turn(source="model", messages=[], completion=c) for c in (done, second)]
    seen = [*done.prompt_token_ids, *sampled]
    return seen, list(second.prompt_token_ids), Trajectory(task_id="t", prompt=first, turns=turns)


@pytest.mark.parametrize("template", ["own", CHATML, LLAMA3])
def test_next_prompt_extends_the_sampled_ids(policy: LocalPolicy, template: str) -> None:
    if template != "own":
        policy.tokenizer.chat_template = template
    seen, nxt, trajectory = _two_turns(policy, "crane")
    assert nxt[: len(seen)] == seen  # exactly what the model saw and produced, not a re-tokenisation
    assert trajectory.prefix_breaks == (1, 0)


def test_a_template_that_rewrites_history_is_measured(policy: LocalPolicy) -> None:
    policy.tokenizer.chat_template = STRIPS_THINKING
    seen, nxt, trajectory = _two_turns(policy, "<think>hmm</think>crane")
    assert nxt[: len(seen)] != seen
    assert trajectory.prefix_breaks == (1, 1)


def test_real_samples_stay_token_exact_over_turns(policy: LocalPolicy) -> None:
    messages = [Message(role="user", content="Name a fruit.")]
    turns = []
    for k in range(3):
        c = asyncio.run(policy.complete(messages, sampling=Sampling(temperature=1.0, max_tokens=12, seed=k)))
        turns.append(Turn(source="model", messages=[], completion=c))
        messages = [
            *messages,
            Message(role="assistant", content=c.text),
            Message(role="user", content="Another."),
        ]
    assert Trajectory(task_id="t", prompt=messages[:1], turns=turns).prefix_breaks == (2, 0)


def test_rl_rows_train_each_reply_up_to_and_including_eos(policy: LocalPolicy) -> None:
    """The RL row of a two-turn trajectory: mask 1 exactly on the sampled ids, each ending at <|im_end|>;
    the newline ChatML writes after it (never sampled) and the environment's turn are masked out."""
    from verigym.train.samples import trajectory_sequences

    _seen, _nxt, trajectory = _two_turns(policy, "crane")
    (row,) = trajectory_sequences(trajectory)
    tok = policy.tokenizer
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    sampled = [c.completion_token_ids for c in trajectory.completions]
    assert [i for i, m in zip(row.ids, row.mask, strict=True) if m] == [t for s in sampled for t in s or ()]
    ends = [k for k, (i, m) in enumerate(zip(row.ids, row.mask, strict=True)) if m and i == eos]
    assert len(ends) == 2 and ends[-1] == len(row.ids) - 1
    assert tok.decode([row.ids[ends[0] + 1]]) == "\n" and row.mask[ends[0] + 1] == 0
