"""``verigym._threads.in_thread``: sync graders' worker threads, results handed back in batches."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

import pytest

from verigym import _threads
from verigym._threads import in_thread

WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")


async def test_results_errors_and_context_come_back_from_many_concurrent_calls() -> None:
    WHO.set("caller")

    def work(i: int) -> tuple[int, str, bool]:
        if i == 7:
            raise ValueError("seven")
        return i * i, WHO.get(), threading.current_thread() is threading.main_thread()

    results = await asyncio.gather(*(in_thread(work, i) for i in range(300)), return_exceptions=True)
    assert isinstance(results[7], ValueError) and str(results[7]) == "seven"
    assert [r for i, r in enumerate(results) if i != 7] == [
        (i * i, "caller", False) for i in range(300) if i != 7
    ]


async def test_a_hung_call_times_out_and_the_others_go_on() -> None:
    release = threading.Event()
    hung = in_thread(release.wait, 5.0)
    start = time.perf_counter()
    assert await asyncio.gather(*(in_thread(lambda x: x + 1, i) for i in range(50))) == list(range(1, 51))
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(hung, 0.1)
    assert time.perf_counter() - start < 2.0
    release.set()
    await asyncio.sleep(0.05)  # the finished call of a cancelled future is dropped quietly


def test_a_call_still_running_when_its_loop_closes_is_dropped_quietly() -> None:
    release = threading.Event()

    async def leave_early() -> None:
        in_thread(release.wait, 5.0)
        await asyncio.sleep(0.01)

    asyncio.run(leave_early())
    release.set()  # the thread finishes after the loop closed: nothing raises, the thread goes idle
    time.sleep(0.05)

    async def again() -> int:
        return await in_thread(lambda: 3)

    assert asyncio.run(again()) == 3


async def test_idle_threads_exit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_threads, "IDLE_S", 0.05)
    pool = _threads._Pool()
    loop = asyncio.get_running_loop()
    assert (
        await asyncio.gather(*(pool.submit(loop, lambda: time.sleep(0.02)) for _ in range(4))) == [None] * 4
    )
    assert pool._threads >= 1
    for _ in range(100):
        await asyncio.sleep(0.02)
        if pool._threads == 0:
            break
    assert pool._threads == 0 and pool._idle == 0
