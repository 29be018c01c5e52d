"""The arithmetic behind ``benchmarks/scaling_real.py`` and ``benchmarks/serve_vs_llamacpp.py`` (issue 43
items 3-4): the tokens the packed update lays down, the line fits, and the text agreement between sides."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from verigym.recipes.quickstart_real import real_quickstart_config
from verigym.train.samples import Row

_BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str) -> ModuleType:
    sys.path.insert(0, str(_BENCH))  # the scripts import their siblings
    try:
        spec = importlib.util.spec_from_file_location(name, _BENCH / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while the class is built
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(_BENCH))


scaling = _load("scaling_real")
serve_vs = _load("serve_vs_llamacpp")

PROMPT = 52  # the recipe's arithmetic prompt in SmolLM2's template


def _rows(groups: int, tokens: int) -> list[Row]:
    return [
        Row(ids=[1000 + g] * PROMPT + [7] * tokens, mask=[0] * PROMPT + [1] * tokens, logprobs=None)
        for g in range(groups)
        for _ in range(8)
    ]


@pytest.mark.parametrize(
    ("groups", "tokens", "laid"),
    [
        (4, 16, 4 * PROMPT + 32 * 16),  # a group (52 + 8 × 16 = 180) fits one 512-token pack: one prompt
        (8, 16, 8 * PROMPT + 64 * 16),
        (8, 64, 8 * 2 * PROMPT + 64 * 64),  # 52 + 8 × 64 = 564 > 512: each group split in two, two prompts
        (8, 256, 64 * (PROMPT + 256)),  # 308 a row: no two rows share a pack, every row carries its prompt
    ],
)
def test_laid_tokens_counts_a_groups_prompt_once_per_pack(groups: int, tokens: int, laid: int) -> None:
    rl = real_quickstart_config("/tmp/unused", model="smollm2-135m-instruct", sampling__max_tokens=tokens).rl
    assert (rl.packing, rl.share_prefix, rl.pack_tokens) == (True, True, 512)  # the recipe's settings
    assert scaling.laid_tokens(_rows(groups, tokens), rl) == laid


def test_laid_tokens_without_sharing_or_packing_is_every_rows_tokens() -> None:
    rows = _rows(4, 16)
    base = real_quickstart_config("/tmp/unused", model="smollm2-135m-instruct").rl
    forwarded = sum(len(r.ids) for r in rows)
    assert scaling.laid_tokens(rows, base.model_copy(update={"share_prefix": False})) == forwarded
    assert scaling.laid_tokens(rows, base.model_copy(update={"packing": False})) == forwarded


def test_line_fit_recovers_a_line_and_its_fit() -> None:
    a, b, r2 = scaling.line_fit([1.0, 2.0, 4.0], [3.5, 5.5, 9.5])  # 1.5 + 2x
    assert (a, b, r2) == pytest.approx((1.5, 2.0, 1.0))
    _, _, r2_bent = scaling.line_fit([1.0, 2.0, 4.0], [1.0, 4.0, 16.0])
    assert r2_bent < 0.99
    g = scaling.growth("t", "token", [100.0, 200.0, 400.0], [1.0, 2.0, 8.0])
    assert g["per_unit_ratio"] == pytest.approx(2.0)  # 8/400 ÷ 1/100
    assert g["marginal_s"] == pytest.approx([0.01, 0.03])


class _CharTokenizer:
    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [ord(c) for c in text]


def test_agreement_counts_identical_replies_and_the_common_prefix() -> None:
    reply = lambda text: serve_vs.Reply(1.0, 10, len(text), "length", text)  # noqa: E731
    a = serve_vs.Level(walls=[1.0], runs=[[reply("abcdef"), reply("xyz"), reply("same")]])
    b = serve_vs.Level(walls=[1.0], runs=[[reply("abcXef"), reply("q"), reply("same")]])
    got = serve_vs.agreement(_CharTokenizer(), a, b)
    assert got["identical"] == pytest.approx(1 / 3)
    assert got["pairs"] == 3
    assert (got["prefix_min"], got["prefix_median"]) == (0, 3)
    assert got["prefix_mean"] == pytest.approx((3 + 0 + 4) / 3)


def test_prompt_order_is_seeded_and_complete() -> None:
    assert serve_vs.prompt_order(0) == serve_vs.prompt_order(0)
    assert serve_vs.prompt_order(0) != serve_vs.prompt_order(1)
    assert sorted(serve_vs.prompt_order(3)) == sorted(serve_vs.PROMPTS)
