"""The tiny tokenizer and models: character-level round trips, the chat template, save/load like a hub model."""

from __future__ import annotations

from pathlib import Path

from transformers import AutoModelForCausalLM, AutoTokenizer

from verigym.policies import tiny


def test_tokenizer_is_character_level_and_decodes_without_spaces() -> None:
    tok = tiny.build_tokenizer()
    text = "12+34=46\nx*(y-1) / 2; ok!"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(text)
    assert tok.decode(ids) == text
    assert tok.unk_token_id in tok("é", add_special_tokens=False)["input_ids"]


def test_chat_template_is_short_and_renders_roles_and_tool_calls() -> None:
    tok = tiny.build_tokenizer()
    text = tok.apply_chat_template(
        [{"role": "user", "content": "12+34="}], add_generation_prompt=True, tokenize=False
    )
    assert text == "<|user|>12+34=<|end|><|assistant|>"
    msgs = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
            ],
        },
        {"role": "tool", "content": "2", "tool_call_id": "c1"},
    ]
    tools = [{"type": "function", "function": {"name": "add", "parameters": {}}}]
    text = tok.apply_chat_template(msgs, tools=tools, tokenize=False)
    assert text.startswith('<|system|>tools:[{"type": "function"')
    assert (
        '<|assistant|><tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call><|end|><|tool|>2<|end|>'
        in text
    )
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.convert_tokens_to_ids(tiny.TOOL_CALL_OPEN) in ids
    assert tok.decode(ids, skip_special_tokens=True).count("<tool_call>") == 1


def test_sizes_have_the_documented_parameter_counts() -> None:
    tok = tiny.build_tokenizer()
    counts = {s: tiny.count_parameters(tiny.build_model(s, tok)) for s in ("tiny", "small", "base")}
    assert 300_000 <= counts["tiny"] <= 500_000
    assert 2_000_000 <= counts["small"] <= 4_000_000
    assert 15_000_000 <= counts["base"] <= 25_000_000


def test_same_seed_same_weights_and_rng_untouched() -> None:
    import torch

    torch.manual_seed(5)
    before = torch.rand(1)
    torch.manual_seed(5)
    a = tiny.build_model("tiny", seed=3)
    after = torch.rand(1)
    b = tiny.build_model("tiny", seed=3)
    c = tiny.build_model("tiny", seed=4)
    assert torch.equal(before, after)
    wa, wb, wc = (m.model.embed_tokens.weight for m in (a, b, c))
    assert torch.equal(wa, wb) and not torch.equal(wa, wc)


def test_create_saves_a_directory_that_loads_like_a_hub_model(tmp_path: Path) -> None:
    import torch

    out = tiny.create("tiny", tmp_path / "m", seed=1)
    model = AutoModelForCausalLM.from_pretrained(out)
    tok = AutoTokenizer.from_pretrained(out)
    assert tok.decode(tok("a b")["input_ids"]) == "a b"
    assert tok.eos_token == tiny.EOS and tok.pad_token == tiny.PAD
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "1+1="}], add_generation_prompt=True, tokenize=False
    )
    assert prompt == "<|user|>1+1=<|end|><|assistant|>"
    fresh = tiny.build_model("tiny", seed=1)
    ids = torch.tensor([tok(prompt, add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, fresh(ids).logits, atol=1e-6)
