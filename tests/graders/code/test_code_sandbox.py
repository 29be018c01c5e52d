"""The bubblewrap sandbox: isolation, limits, refusal without bwrap, unsafe mode."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from verigym.graders.code.sandbox import Sandbox, SandboxUnavailable, python_executable, run_sandboxed

PY = [python_executable(), "-S", "-I"]


def test_files_stdin_and_exit_code() -> None:
    res = run_sandboxed(
        [*PY, "main.py"],
        files={
            "main.py": "import sys\nprint(open('pkg/data.txt').read() + sys.stdin.read())\nsys.exit(3)\n",
            "pkg/data.txt": "abc",
        },
        stdin="def",
        timeout_s=10,
    )
    assert res.exit_code == 3 and res.stdout.strip() == "abcdef" and not res.timed_out


def test_cannot_see_or_write_host_files(tmp_path: Path) -> None:
    secret = Path(__file__).resolve()
    code = (
        "import os\n"
        f"print(os.path.exists({str(secret)!r}), os.path.exists('/work'), os.path.exists({str(tmp_path)!r}))\n"
        "for p in ['/etc/pwned', '/usr/pwned', '/pwned']:\n"
        "    try:\n"
        "        open(p, 'w').write('x'); print('WROTE', p)\n"
        "    except OSError:\n"
        "        pass\n"
        "print(os.getuid())\n"
    )
    res = run_sandboxed([*PY, "-c", code], timeout_s=10)
    lines = res.stdout.split("\n")
    assert lines[0] == "False False False", res
    assert "WROTE" not in res.stdout
    if os.geteuid() == 0:
        assert lines[1] != "0"  # dropped to an unprivileged uid
    assert not Path("/etc/pwned").exists() and not Path("/pwned").exists()


def test_no_network_and_events_free_run() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    code = (
        "import socket\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=1); print('CONNECTED')\n"
        "except OSError as e:\n"
        "    print('refused')\n"
    )
    try:
        res = run_sandboxed([*PY, "-c", code], timeout_s=10)
    finally:
        server.close()
    assert res.stdout.strip() == "refused"


def test_timeout_kills_process_group_and_output_is_capped() -> None:
    res = run_sandboxed(["sh", "-c", "sleep 100 & sleep 100; echo done"], timeout_s=0.5)
    # 60 s: not the 100 s the orphaned ``sleep 100`` would hold the output open if it outlived the kill
    assert res.timed_out and res.killed_reason and "timeout" in res.killed_reason and res.wall_s < 60
    res = run_sandboxed([*PY, "-c", "print('x' * 10**6)"], timeout_s=10, max_output_bytes=1000)
    assert len(res.stdout) == 1000 and res.stdout_truncated


def test_process_limit_stops_fork_bomb() -> None:
    code = (
        "import os\nn = 0\n"
        "r, w = os.pipe()\n"
        "for _ in range(200):\n"
        "    try:\n"
        "        if os.fork() == 0:  # a child lives until the parent is gone (its pipe's end closed)\n"
        "            os.close(w); os.read(r, 1); os._exit(0)\n"
        "        n += 1\n"
        "    except OSError:\n"
        "        break\n"
        "print(n)\n"
    )
    res = run_sandboxed([*PY, "-c", code], timeout_s=10, max_procs=16)
    assert 0 < int(res.stdout.split()[0]) < 16


def test_missing_or_broken_bwrap_is_refused_with_the_remedy() -> None:
    box = Sandbox()
    box.bwrap = None
    with pytest.raises(SandboxUnavailable, match="unsafe-no-sandbox"):
        box.check()
    broken = Sandbox(bwrap="/bin/false")
    with pytest.raises(SandboxUnavailable, match="install"):
        broken.run(["true"])


def test_unsafe_mode_runs_without_bwrap() -> None:
    box = Sandbox(unsafe_no_sandbox=True)
    box.bwrap = None
    res = box.run([*PY, "-c", "import os; print(open('f.txt').read())"], files={"f.txt": "hi"})
    assert res.ok and res.stdout.strip() == "hi"


def test_paths_must_stay_inside_workdir() -> None:
    with pytest.raises(ValueError, match="relative"):
        run_sandboxed(["true"], files={"../escape": "x"})


@pytest.mark.parametrize("pidfd", [True, False])
def test_worker_wait_with_and_without_pidfd(monkeypatch: pytest.MonkeyPatch, pidfd: bool) -> None:
    import time

    from verigym.graders.code import _worker as _code_worker

    if not pidfd:
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    # the budgets are far from the children's lives either way (60 s only bounds a failure; the
    # 600 s sleeper is killed by _reap), so the machine's speed cannot decide
    for sleep_s, budget, expect in ((0.05, 60.0, False), (600.0, 0.2, True)):
        pid = os.fork()
        if pid == 0:
            time.sleep(sleep_s)
            os._exit(0)
        try:
            assert _code_worker._timed_out(pid, budget) is expect
        finally:
            _code_worker._reap(pid)


def test_memfd_fallback_without_memfd_create(monkeypatch: pytest.MonkeyPatch) -> None:
    from verigym.graders.code._sandbox_io import memfd

    monkeypatch.delattr(os, "memfd_create")
    fd = memfd(b"hello")
    try:
        assert os.read(fd, 10) == b"hello"
    finally:
        os.close(fd)


def test_python_commands_log_network_and_process_events() -> None:
    code = (
        "import socket, subprocess\n"
        "try:\n"
        "    socket.create_connection(('10.1.2.3', 443), timeout=0.2)\n"
        "except OSError:\n"
        "    print('blocked')\n"
        "subprocess.run(['true'])\n"
    )
    res = run_sandboxed([*PY, "main.py"], files={"main.py": code}, timeout_s=10)
    assert res.stdout.strip() == "blocked"
    assert any(e.startswith("socket.connect") and "10.1.2.3" in e for e in res.events), res.events
    assert any(e.startswith("subprocess.Popen") for e in res.events)
    assert run_sandboxed(["sh", "-c", "echo hi"], timeout_s=10).events == []
