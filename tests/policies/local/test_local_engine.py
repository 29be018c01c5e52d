"""The batched sampling loop's bookkeeping: finished rows leave the batch without changing the others."""

from __future__ import annotations

from pathlib import Path

import pytest

from verigym.policies.local import LocalPolicy, RowSpec
from verigym.policies.local._engine import _compacted
from verigym.types import Message


@pytest.mark.parametrize(
    ("size", "dead", "order"),
    [
        (6, {1, 4}, [0, 5, 2, 3]),  # the hole at 1 takes the last live row; 4 is past the end
        (5, {0, 1}, [3, 4, 2]),  # two holes, filled by the live rows past the end, in order
        (4, {3}, [0, 1, 2]),  # nothing moves
        (3, {0, 1, 2}, []),
    ],
)
def test_compaction_keeps_live_rows_in_place_and_fills_holes_from_the_end(
    size: int, dead: set[int], order: list[int]
) -> None:
    got = _compacted(size, dead)
    assert got == order
    assert sorted(got) == [p for p in range(size) if p not in dead]


def test_rows_that_finish_early_leave_the_others_samples_unchanged(tiny_dir: Path) -> None:
    policy = LocalPolicy.from_pretrained(tiny_dir, device="cpu", stop_token_ids=[])
    prompts = [policy.encode([Message(role="user", content=f"{i}+{2 * i + 3}=")]) for i in range(8)]
    short = [2, 3, 24, 5, 24, 1, 24, 24]  # half the rows stop early and leave the batch mid-pass

    def specs(limits: list[int]) -> list[RowSpec]:
        return [
            RowSpec(prompt_ids=p, max_tokens=n, seed=40 + i)
            for i, (p, n) in enumerate(zip(prompts, limits, strict=True))
        ]

    mixed = policy.run(specs(short))
    full = policy.run(specs([24] * 8))
    for m, f, n in zip(mixed, full, short, strict=True):
        assert m.token_ids == f.token_ids[:n]
        assert max(abs(a - b) for a, b in zip(m.logprobs, f.logprobs[:n], strict=True)) < 1e-5
        assert m.finish == "length" and len(m.token_ids) == n
