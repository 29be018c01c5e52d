"""Ctrl-C and SIGTERM stop a running local generation pass within a decode step, keep what is written and
say how to resume. Each decode step is slowed to at least 50 ms, so the pass provably needs >= 100 s and
the signal provably lands mid-pass (after the marker file): exiting within 60 s can only be the interrupt."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

_SCRIPT = """
import sys, time
from pathlib import Path
import verigym.policies.local._engine as engine
from verigym.policies.local import LocalPolicy

LocalPolicy.eos_ids = property(lambda self: [])  # no row ends early: every row runs to --max-tokens
original, steps = engine._sample, [0]

def slow_step(*args, **kwargs):
    steps[0] += 1
    if steps[0] == 3:
        Path(sys.argv[1]).write_text("decoding")
    time.sleep(0.05)
    return original(*args, **kwargs)

engine._sample = slow_step
from verigym.cli import main
main(["eval", "arithmetic", "--model", "tiny", "-n", "4", "--max-tokens", "2000", "--out", sys.argv[2]])
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_local_generation_within_a_step(tmp_path: Path, sig: signal.Signals) -> None:
    marker, run = tmp_path / "started", tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-c", _SCRIPT, str(marker), str(run)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        preexec_fn=lambda: signal.signal(
            signal.SIGINT, signal.SIG_DFL
        ),  # as a terminal gives it, in background runs too
    )
    try:
        end = time.monotonic() + 120
        while not marker.exists():
            assert proc.poll() is None and time.monotonic() < end, proc.stdout.read() if proc.stdout else ""
            time.sleep(0.01)
        proc.send_signal(sig)
        output, _ = proc.communicate(timeout=60)  # the pass alone needs >= 2000 steps x 50 ms = 100 s
    finally:
        proc.kill()
    assert proc.returncode == 130, output
    assert "interrupted" in output and "--resume" in output and "Traceback" not in output, output
    assert (run / "config.json").is_file()
