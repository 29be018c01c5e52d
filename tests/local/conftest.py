"""Fixtures for the local-model tests: one saved tiny model directory and a LoRA adapter for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from verigym.policies import tiny


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
