"""The lean decoder's products (``_products``): oneDNN on packed weights for large layers, the old MKL
path for small ones, the same bits on one and two threads, copies rebuilt when weights change, and the
thread count chosen by timing."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from verigym._onednn import available
from verigym.policies import tiny
from verigym.policies.local._fast_llama import FastLlama, _weights
from verigym.policies.local._products import MIN_WEIGHT, Product, ThreadChoice, threads

needs_onednn = pytest.mark.skipif(not available(), reason="this torch build has no oneDNN linear")


@pytest.fixture
def two_threads() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_small_weights_keep_the_transposed_copy_bit_for_bit() -> None:
    gen = torch.Generator().manual_seed(0)
    weight = torch.randn(256, 64, generator=gen)  # the tiny model's MLP: 16,384 entries
    assert weight.numel() < MIN_WEIGHT
    product = Product(weight)
    assert product.packed is None and product.t is not None
    for rows in (1, 3, 8):
        x = torch.randn(rows, 64, generator=gen)
        assert torch.equal(product(x), x @ weight.t().contiguous())


@needs_onednn
@pytest.mark.parametrize("shape", [(3, 576), (2, 5, 576), (1, 576), (32, 576)])
def test_packed_products_equal_float64_within_round_off(shape: tuple[int, ...]) -> None:
    gen = torch.Generator().manual_seed(1)
    weight = torch.randn(1536, 576, generator=gen)
    product = Product(weight)
    assert product.packed is not None and product.t is None
    x = torch.randn(*shape, generator=gen)
    got = product(x)
    want = (x.double() @ weight.double().t()).float()
    assert got.shape == (*shape[:-1], 1536)
    assert (got - want).abs().max().item() <= 1e-5 * want.abs().max().item()
    # a non-contiguous input (a view) gives the same numbers as its contiguous copy
    wide = torch.randn(*shape[:-1], 2 * 576, generator=gen)
    assert torch.equal(product(wide[..., ::2]), product(wide[..., ::2].contiguous()))


@needs_onednn
def test_packed_products_give_the_same_bits_on_one_and_two_threads(two_threads: None) -> None:
    gen = torch.Generator().manual_seed(2)
    weight = torch.randn(3072, 576, generator=gen)
    product = Product(weight)
    for rows in (1, 2, 4, 8, 20, 32, 64):
        x = torch.randn(rows, 576, generator=gen)
        both = product(x)
        with threads(1):
            assert torch.get_num_threads() == 1
            one = product(x)
        assert torch.get_num_threads() == 2
        assert torch.equal(one, both), rows


def _mid_model(seed: int = 0) -> Any:
    """A random Llama whose q/k/v, gate/up and down weights are over ``MIN_WEIGHT`` (hence packed) and
    whose o_proj and head are under it; grouped-query attention."""
    model = tiny.build_model("small", seed=seed, num_key_value_heads=3).eval()
    return model


def _lean_logits(model: Any, ids: torch.Tensor, steps: int) -> list[torch.Tensor]:
    """Prefill ``ids`` then ``steps`` greedy decode steps: the logits of each."""
    batch, width = ids.shape
    step = FastLlama(model, batch, width + steps)
    mask = torch.ones(batch, width + steps, dtype=torch.long)
    out = [step(ids, torch.arange(width)[None].expand(batch, width), mask[:, :width])]
    for _ in range(steps):
        n = step.length
        out.append(step(out[-1].argmax(-1, keepdim=True), torch.full((batch, 1), n), mask[:, : n + 1]))
    return out


def _reference_logits(
    model: torch.nn.Module, ids: torch.Tensor, lean: list[torch.Tensor]
) -> list[torch.Tensor]:
    """The ``transformers`` forward over the same tokens (the lean side's greedy choices fed back)."""
    seq = ids
    out = []
    for logits in lean:
        out.append(model(seq).logits[:, -1])
        seq = torch.cat([seq, logits.argmax(-1, keepdim=True)], dim=1)
    return out


@needs_onednn
@pytest.mark.parametrize("batch", [1, 5])
def test_the_packed_decoder_equals_the_transformers_forward(batch: int) -> None:
    model = _mid_model()
    weights = _weights(model)
    assert weights.packed
    assert weights.layers[0][0].packed is not None and weights.layers[0][1].packed is None  # qkv, o
    ids = torch.randint(0, model.config.vocab_size, (batch, 12), generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        lean = _lean_logits(model, ids, 6)
        ref = _reference_logits(model, ids, lean)
    for got, want in zip(lean, ref, strict=True):
        assert (got - want).abs().max().item() < 1e-4


@needs_onednn
def test_packed_copies_are_rebuilt_when_a_weight_changes() -> None:
    model = _mid_model(seed=4)
    ids = torch.randint(0, model.config.vocab_size, (2, 10), generator=torch.Generator().manual_seed(5))
    with torch.inference_mode():
        before = _lean_logits(model, ids, 2)
    first = _weights(model)
    assert _weights(model) is first  # unchanged weights: the cached copies
    with torch.no_grad():  # an optimizer step in place, as RL's update does (the version moves)
        for layer in model.model.layers:
            layer.mlp.down_proj.weight.mul_(3.0)
            layer.self_attn.q_proj.weight.add_(0.05)
    assert _weights(model) is not first
    with torch.inference_mode():
        after = _lean_logits(model, ids, 2)
        ref = _reference_logits(model, ids, after)
    assert (after[0] - before[0]).abs().max().item() > 1e-2  # the change shows
    for got, want in zip(after, ref, strict=True):
        assert (got - want).abs().max().item() < 1e-4
    # a weight swapped in (load_state_dict copies into the same storage): rebuilt too
    other = _mid_model(seed=6)
    model.load_state_dict(other.state_dict())
    with torch.inference_mode():
        swapped = _lean_logits(model, ids, 1)
        expected = _reference_logits(other, ids, swapped)
    assert (swapped[0] - expected[0]).abs().max().item() < 1e-4


def test_the_thread_choice_keeps_the_faster_count_and_restores_torchs(two_threads: None) -> None:
    def run(choice: ThreadChoice, steps: int, slow_threads: int) -> list[int]:
        seen = []
        for _ in range(steps):
            with choice.step(1):  # batch 1 too: idle, two cores read the weights faster
                seen.append(torch.get_num_threads())
                time.sleep(0.02 if torch.get_num_threads() == slow_threads else 0.001)
            assert torch.get_num_threads() == 2
        return seen

    busy = ThreadChoice()  # two threads slower (cores taken by others): one kept, the probes spread out
    assert busy.threads() == 1  # one thread before any probe
    assert run(busy, 40, slow_threads=2) == [1, 2] + [1] * 16 + [1, 2] + [1] * 20
    assert busy.threads() == 1  # a prefill follows the choice
    idle = ThreadChoice()  # two threads faster: taken at the first probe pair, then the probes spread out
    assert run(idle, 40, slow_threads=1) == [1, 2] + [2] * 8 + [1, 2] + [2] * 16 + [1, 2] + [2] * 10
    assert idle.threads() == 2
    with threads(1), ThreadChoice().step(8):  # one torch thread: nothing to choose
        assert torch.get_num_threads() == 1


@pytest.mark.parametrize("preset", [None, "8"])
def test_the_onednn_primitive_caches_are_bounded_unless_the_user_set_them(preset: str | None) -> None:
    """oneDNN's and ideep's caches would keep a primitive per shape seen (1,024 each by default: a
    training process's live memory grew ~45 MB a step); verigym bounds them in a fresh process, and
    a user's setting wins."""
    names = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")
    env = {k: v for k, v in os.environ.items() if k not in names}
    if preset is not None:
        env.update(dict.fromkeys(names, preset))
    code = "import os; from verigym._onednn import available; available(); print(os.environ['{}'], os.environ['{}'])"
    out = subprocess.run(
        [sys.executable, "-c", code.format(*names)], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == [preset or "64"] * 2
