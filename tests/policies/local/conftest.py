"""Fixtures for the local-model tests: one saved tiny model directory and a LoRA adapter for it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch


@pytest.fixture(scope="module", autouse=True)
def _one_torch_thread(one_torch_thread: None) -> None:
    """One torch thread for each module here (``tests/conftest.py``)."""


@pytest.fixture(scope="session")
def adapter_dir(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A LoRA adapter with random (non-zero) weights, so it visibly changes the outputs."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_dir)
    config = LoraConfig(
        r=4, lora_alpha=16, target_modules=["q_proj", "v_proj", "o_proj"], init_lora_weights=False
    )
    peft_model = get_peft_model(model, config)
    out = tmp_path_factory.mktemp("lora") / "adapter"
    peft_model.save_pretrained(out)
    return out


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}},
        },
    }
]
TOOL_PROMPT = [{"role": "user", "content": "add 1"}]
TOOL_REPLY = 'ok<tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>'


@pytest.fixture(scope="session")
def tool_case() -> dict[str, Any]:
    """The prompt, tools and reply the ``tool_model_dir`` model was overfit to."""
    return {"messages": TOOL_PROMPT, "tools": TOOLS, "reply": TOOL_REPLY}


@pytest.fixture(scope="session")
def tool_model_dir(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model overfit (seconds) to answer TOOL_PROMPT with TOOL_REPLY under greedy decoding."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from verigym.policies.local.chat import encode_chat

    tok = AutoTokenizer.from_pretrained(tiny_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_dir)
    prompt = encode_chat(tok, TOOL_PROMPT, TOOLS)
    target = tok(TOOL_REPLY, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    ids = torch.tensor([prompt + target])
    labels = torch.tensor([[-100] * len(prompt) + target])
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for _ in range(600):
            out = model(ids, labels=labels)
            if out.loss.item() < 0.03:
                break
            out.loss.backward()
            opt.step()
            opt.zero_grad()
    finally:
        torch.set_num_threads(threads)
    model.eval()
    with torch.no_grad():
        assert model(ids).logits[0, len(prompt) - 1 : -1].argmax(-1).tolist() == target
    out_dir = tmp_path_factory.mktemp("toolmodel") / "model"
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    return out_dir
