"""Warm sandboxes reused across candidates (zygote workers, root hosts): fresh state for each.

A candidate that leaves files in /tmp and /dev/shm, a detached process still writing, and forged
protocol frames must leave nothing the next candidate can see, and must not be able to keep the
sandbox for the next candidate when it forged the hand-back.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from verigym.graders.code import run_function_tests
from verigym.graders.code.sandbox import Sandbox

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="zygote reuse needs root (a fresh uid per candidate)"
)

BOOT = "def boot():\n    return open('/proc/1/stat').read().split()[21]\n"
LEAVE = BOOT + (
    "import os, time\n"
    "def f():\n"
    "    open('/tmp/left', 'w').write('x')\n"
    "    os.makedirs('/tmp/d/e', exist_ok=True)\n"
    "    open('/tmp/d/e/f', 'w').write('x')\n"
    "    os.chmod('/tmp/d', 0)\n"
    "    open('/dev/shm/left', 'w').write('x')\n"
    "    import ctypes\n"
    "    ctypes.CDLL(None).shmget(4242, 4096, 0o1666)\n"
    "    if os.fork() == 0:\n"
    "        os.setsid()\n"
    "        if os.fork() == 0:\n"
    "            for _ in range(200):\n"
    "                time.sleep(0.05)\n"
    "                open('/tmp/late', 'w').write('x')\n"
    "        os._exit(0)\n"
    "    return boot()\n"
)
LOOK = BOOT + (
    "import os\n"
    "def f():\n"
    "    seen = [p for p in ('/tmp/left', '/tmp/d', '/dev/shm/left', '/tmp/late') if os.path.exists(p)]\n"
    "    procs = [p for p in os.listdir('/proc') if p.isdigit() and os.stat('/proc/' + p).st_uid == os.getuid()]\n"
    "    import ctypes\n"
    "    if ctypes.CDLL(None).shmget(4242, 0, 0) >= 0:\n"
    "        seen.append('shm 4242')\n"
    "    return boot(), seen, len(procs)\n"
)
FORGE = BOOT + (
    "import os, json, struct\n"
    "def f():\n"
    "    for fd in range(3, 64):\n"
    "        for frame in ({'reset': True}, {'verified': 'x'}):\n"
    "            body = json.dumps(frame).encode()\n"
    "            try:\n"
    "                os.write(fd, struct.pack('>I', len(body)) + body)\n"
    "            except OSError:\n"
    "                pass\n"
    "    return boot()\n"
)


def _run(code: str, box: Sandbox, log: Path) -> list[object]:
    """Grade ``code`` in ``box``; the tests (on the grader's side) log what ``f()`` returned."""
    tests = f"import json\nv = f()\nopen({str(log)!r}, 'a').write(json.dumps(v) + '\\n')\nassert True\n"
    res = run_function_tests(code, tests, "f", sandbox=box)
    assert res.all_passed, res.detail()
    return [json.loads(line) for line in log.read_text().splitlines()]


def _looks(code: str, box: Sandbox, log: Path, boot: str) -> list[list[object]]:
    """Run ``code`` until it lands in the sandbox whose boot time is ``boot`` (the pool keeps a
    spare sandbox, so consecutive candidates may alternate between two); every run's report."""
    seen: list[list[object]] = []
    for _ in range(6):
        got = _run(code, box, log)[-1]
        assert isinstance(got, list)
        seen.append(got)
        if got[0] == boot:
            return seen
    raise AssertionError(f"no later candidate got the warm sandbox {boot} back: {seen}")


def test_next_candidate_sees_nothing_left_behind(tmp_path: Path) -> None:
    box, log = Sandbox(), tmp_path / "log.jsonl"
    (leave_boot,) = _run(LEAVE, box, log)
    for _, seen, procs in _looks(LOOK, box, log, str(leave_boot)):
        assert seen == [] and procs == 2, (seen, procs)  # its own session and case processes


def test_forged_hand_back_frames_do_not_keep_the_sandbox(tmp_path: Path) -> None:
    box, log = Sandbox(), tmp_path / "log.jsonl"
    run_function_tests(FORGE, "assert f() == 'never'\n", "f", sandbox=box)
    run_function_tests(
        BOOT.replace("boot", "f"),
        f"import json\nopen({str(log)!r}, 'w').write(json.dumps(f()))\nassert True\n",
        "f",
        sandbox=box,
    )
    first = json.loads(log.read_text())
    (look_boot, seen, procs) = _run(LOOK, box, tmp_path / "look.jsonl")[0]
    assert seen == [] and procs == 2
    assert isinstance(first, str) and isinstance(look_boot, str)


def test_a_sandbox_started_from_a_short_lived_thread_outlives_it(tmp_path: Path) -> None:
    """bwrap's --die-with-parent follows the thread that started it: a reusable worker must be
    started by a thread that lives as long as the process (graders run in asyncio.to_thread)."""
    box, log = Sandbox(), tmp_path / "log.jsonl"
    worker = threading.Thread(target=_run, args=(BOOT.replace("def boot", "def f"), box, log))
    worker.start()
    worker.join()
    time.sleep(0.5)  # the starting thread is gone
    first = json.loads(log.read_text().splitlines()[0])
    for _ in range(6):
        if _run(BOOT.replace("def boot", "def f"), box, log)[-1] == first:
            return
    raise AssertionError("the sandbox died with the thread that started it")


SET_STATE = BOOT + (
    "import builtins, os, sys, json\n"
    "def f():\n"
    "    os.environ['VG_LEFT'] = '1'\n"
    "    os.putenv('VG_PUT', '1')\n"
    "    builtins.sorted = lambda *a, **k: ['patched']\n"
    "    builtins.vg_left = 1\n"
    "    sys.modules['json'] = None\n"
    "    sys.path.insert(0, '/tmp/evil')\n"
    "    json.dumps = lambda *a, **k: 'patched'\n"
    "    os.chdir('/tmp')\n"
    "    open('vg_cwd_file', 'w').write('x')\n"
    "    return boot()\n"
)
READ_STATE = BOOT + (
    "import builtins, os, sys\n"
    "def f():\n"
    "    import json\n"
    "    left = [k for k in ('VG_LEFT', 'VG_PUT') if k in os.environ]\n"
    "    left += ['sorted'] if sorted([2, 1]) != [1, 2] else []\n"
    "    left += ['builtin'] if hasattr(builtins, 'vg_left') else []\n"
    "    left += ['json'] if json.dumps(1) != '1' else []\n"
    "    left += ['sys.path'] if '/tmp/evil' in sys.path else []\n"
    "    left += ['cwd file'] if os.path.exists('/tmp/vg_cwd_file') else []\n"
    "    return boot(), left\n"
)


def test_env_vars_builtins_modules_and_cwd_files_do_not_reach_the_next_candidate(tmp_path: Path) -> None:
    """Issue 17 item 2: the warm sandbox is reused, the candidate's state is not."""
    box, log = Sandbox(), tmp_path / "log.jsonl"
    (set_boot,) = _run(SET_STATE, box, log)
    for _, left in _looks(READ_STATE, box, log, str(set_boot)):
        assert left == [], left
