"""The selection-method registry: one list that ``verigym select`` and ``select.run`` both read; each
built-in dispatches to its own selector; a new method is one ``register_method`` call."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
from typer.testing import CliRunner

from verigym.cli import app
from verigym.select import (
    METHODS,
    Candidate,
    SelectContext,
    Selection,
    get_method,
    method_names,
    register_method,
)
from verigym.select import run as select_run
from verigym.select.methods import SelectConfig, needs_judge, needs_logprobs
from verigym.select.run import TaskPool, measure
from verigym.types import Message, Task

BUILT_IN = ("best-of-n", "deepconf", "deepconf-online", "genselect", "majority")  # by name


def _pool(answers: Sequence[str | None], right: str = "7") -> TaskPool:
    task = Task(id="t", prompt=(Message(role="user", content="q"),), answer=right)
    tops = ((-0.1, -2.0),) * 4
    cands = [
        Candidate(index=i, text=f"{a}", answer=a, tokens=4, top_logprobs=tops, correct=a == right)
        for i, a in enumerate(answers)
    ]
    return TaskPool(task=task, candidates=cands)


@pytest.fixture
def first_method() -> Iterator[str]:
    async def select_first(task: Task, candidates: Sequence[Candidate], ctx: SelectContext) -> Selection:
        chosen = next((c for c in candidates if c.answer is not None), None)
        if chosen is None:
            return Selection(index=None, method="first")
        return Selection(index=chosen.index, answer=chosen.answer, method="first", detail={"seed": ctx.seed})

    register_method("first", select_first)
    yield "first"
    METHODS.pop("first")


def test_one_registry_in_order_read_by_run_and_the_cli() -> None:
    assert method_names()[:5] == BUILT_IN
    assert method_names() == select_run.METHODS  # the earlier tuples, read live
    assert select_run.NEEDS_LOGPROBS == ("deepconf", "deepconf-online")
    assert select_run.NEEDS_JUDGE == ("best-of-n", "genselect")
    assert needs_logprobs(["majority", "deepconf"]) and not needs_logprobs(["majority", "nope"])
    assert needs_judge(["genselect"]) and not needs_judge(["majority"])
    with pytest.raises(ValueError, match="unknown method 'vote'; expected one of best-of-n, deepconf"):
        get_method("vote")
    bad = CliRunner().invoke(app, ["select", "arithmetic", "--method", "vote"])
    assert bad.exit_code == 2 and f"expected one of {', '.join(method_names())}" in bad.output


async def test_each_built_in_dispatches_to_its_own_selector() -> None:
    pool = _pool(["7", "8", "8", "7"])
    cfg = SelectConfig(ns=[4], draws=1)
    for name in ("majority", "deepconf", "deepconf-online"):
        sel = await get_method(name).select(pool.task, pool.candidates, SelectContext(config=cfg))
        assert sel.method == name
    online = get_method("deepconf-online")
    sel = await online.select(pool.task, pool.candidates, SelectContext(config=cfg))
    assert online.tokens(pool.candidates, sel) == float(sel.detail["tokens_used"])
    assert get_method("majority").tokens(pool.candidates, sel) == 16.0
    for name in ("genselect", "best-of-n"):
        with pytest.raises(ValueError, match=f"method '{name}' needs a selector policy"):
            await get_method(name).select(pool.task, pool.candidates, SelectContext(config=cfg))


async def test_a_registered_method_is_measured_and_accepted_by_the_cli(first_method: str) -> None:
    pools = [_pool([None, "7", "8"]), _pool(["8", "7", "7"])]
    points = await measure(pools, SelectConfig(methods=[first_method, "majority"], ns=[3], draws=1))
    assert [p.accuracy for p in points[first_method]] == [0.5]  # task 1 picks "7", task 2 picks "8"
    assert [p.accuracy for p in points["majority"]] == [1.0]
    assert points[first_method][0].tokens == 12.0
    bad = CliRunner().invoke(app, ["select", "arithmetic", "--method", "nope"])
    assert f"expected one of {', '.join([*BUILT_IN, 'first'])}" in bad.output
