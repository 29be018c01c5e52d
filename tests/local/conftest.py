"""Fixtures for the local-model tests: one saved tiny model directory and a LoRA adapter for it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from verigym.policies import tiny


@pytest.fixture(scope="module", autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """Sub-million-parameter models only lose from intra-op threads (barrier waits on a busy machine);
    the previous setting is restored after each module, so other test areas are unaffected."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny.create("tiny", tmp_path_factory.mktemp("tiny") / "model", seed=0)


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
