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
    hung = in_thread(release.wait, 60.0)  # hangs until the test releases it (60 s only bounds a failure)
    assert await asyncio.gather(*(in_thread(lambda x: x + 1, i) for i in range(50))) == list(range(1, 51))
    assert not hung.done()  # the others finished while the hung call still held its thread
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(hung, 0.1)
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


async def test_threads_are_reused_and_bounded() -> None:
    pool = _threads._Pool()
    loop = asyncio.get_running_loop()
    for _ in range(3):
        names = await asyncio.gather(
            *(
                pool.submit(loop, lambda: (time.sleep(0.01), threading.current_thread().name)[1])
                for _ in range(40)
            )
        )
        assert set(names) == {"verigym-grader"}
    assert 1 <= pool._threads <= _threads.MAX_WORKERS
    assert pool._idle == pool._threads  # every thread waits for work, none is owed a job


def test_a_forked_child_starts_threads_of_its_own() -> None:
    import os

    async def square(x: int) -> int:
        return await in_thread(lambda: x * x)

    assert asyncio.run(square(3)) == 9  # the parent has grader threads now
    pid = os.fork()
    if pid == 0:  # the child: no threads were copied, the pool must start its own
        try:
            os._exit(0 if asyncio.run(asyncio.wait_for(square(4), 5)) == 16 else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
