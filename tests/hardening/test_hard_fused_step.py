"""An RL step on a real-sized model must reach the sampler (found by issue 42's training soak).

``make_optimizer`` takes torch's fused CPU AdamW from 16M trainable entries (SmolLM2-135M and up). The
fused kernel writes the weights without bumping their version counters, and the local decode path
keys its transposed weight copies on them (``policies.local._fast_llama``): every RL step after the
first sampled from stale weights (the sampler-vs-trainer logprob gap grew from 6e-6 to 0.08 over six
SmolLM2 steps, and a resumed run, whose copies were fresh, differed from the uninterrupted one). A step
now bumps the versions; the decode path's copies are rebuilt from the new weights.
"""

from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from verigym.policies.local import _fast_llama
from verigym.train.config import build_config
from verigym.train.optim import FUSED_MIN, make_optimizer


def test_a_fused_optimizer_step_renews_the_decode_paths_weight_copies() -> None:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=32768,
        hidden_size=512,
        intermediate_size=512,
        num_hidden_layers=1,
        num_attention_heads=8,
        num_key_value_heads=8,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(config)
    assert sum(p.numel() for p in model.parameters()) >= FUSED_MIN  # the fused path, as SmolLM2's
    rl = build_config({"out_dir": "unused", "envs": [{"name": "arithmetic"}], "rl": {"lr": 1e-3}}).rl
    optimizer, _ = make_optimizer(model.parameters(), rl, 10, foreach=True)
    assert optimizer.defaults.get("fused")
    before = _fast_llama._weights(model)
    model(torch.tensor([[1, 2, 3, 4]])).logits.square().mean().backward()
    optimizer.step()
    after = _fast_llama._weights(model)
    assert after is not before
    x = torch.randn(3, config.hidden_size)  # the copies are packed for oneDNN: compare what they compute
    with torch.no_grad():
        head = model.lm_head.weight
        assert torch.allclose(after.head(x), x @ head.t(), atol=1e-4)
        assert not torch.allclose(after.head(x), before.head(x), atol=1e-4)
        q, k, v = (getattr(model.model.layers[0].self_attn, n).weight for n in ("q_proj", "k_proj", "v_proj"))
        assert torch.allclose(after.layers[0][0](x), x @ torch.cat([q, k, v]).t(), atol=1e-4)
