"""The labeled code suite and the hostile-code suite through ``bench_verdict``.

Hostile suite: 0 false passes, 0 errors, every case within its time bound, nothing outside the
sandbox changed (a sentinel directory and the suite files themselves).
"""

from __future__ import annotations

import hashlib
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from verigym.graders.code import bench_verdict

SUITES = Path(__file__).resolve().parents[2] / "suites"
SENTINEL = Path("/tmp/verigym-hostile-sentinel")
PWN_TARGETS = [
    Path(p)
    for p in (
        "/etc/verigym_pwned",
        "/usr/verigym_pwned",
        "/verigym_pwned",
        "/var/tmp/verigym_pwned",
        "/dev/shm/verigym_pwned",
        "/root/verigym_pwned",
        SUITES / "pwned.py",
    )
]


def _lines(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (SUITES / name).read_text().splitlines() if line.strip()]


def _run(lines: list[dict[str, Any]], timeout_s: float) -> list[tuple[str, bool | None, str, float]]:
    def one(line: dict[str, Any]) -> tuple[str, bool | None, str, float]:
        start = time.monotonic()
        try:
            return line["id"], bench_verdict(line, timeout_s=timeout_s), "", time.monotonic() - start
        except Exception as exc:  # an error, counted separately from a verdict
            return line["id"], None, repr(exc), time.monotonic() - start

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(one, lines))


def _snapshot() -> dict[str, str]:
    out = {}
    for path in [SENTINEL, SUITES]:
        for f in sorted(path.rglob("*")):
            if f.is_file():
                out[str(f)] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def test_labeled_code_suite_has_no_misses() -> None:
    lines = _lines("code.jsonl")
    assert len(lines) >= 40 and {ln["expect"] for ln in lines} == {"pass", "fail"}
    results = _run(lines, timeout_s=5.0)
    errors = [(i, e) for i, v, e, _ in results if v is None]
    misses = [
        i
        for (i, v, _, _), ln in zip(results, lines, strict=True)
        if v is not None and v != (ln["expect"] == "pass")
    ]
    assert not errors and not misses, (errors, misses)


def test_hostile_suite_no_false_pass_no_error_no_escape() -> None:
    lines = _lines("code_hostile.jsonl")
    assert len(lines) >= 30 and all(ln["expect"] == "fail" for ln in lines)
    SENTINEL.mkdir(exist_ok=True)
    (SENTINEL / "keep.txt").write_text("keep")
    for p in PWN_TARGETS:
        assert not p.exists(), f"{p} exists before the run"
    before = _snapshot()
    timeout_s = 1.0
    results = _run(lines, timeout_s=timeout_s)
    time.sleep(2.0)  # let any process that tried to outlive its sandbox act
    false_passes = [i for i, v, _, _ in results if v is True]
    errors = [(i, e) for i, v, e, _ in results if v is None]
    # every case was stopped: loading and the first failing case each end at the wall backstop
    # (3 x timeout + 2 s), ~10 s in all on an idle machine; 120 s only bounds a hang (far below the
    # 600 s the sleeping candidates ask for), so a loaded machine cannot fail the suite
    slow = [(i, round(w, 1)) for i, _, _, w in results if w > 120]
    assert not false_passes, false_passes
    assert not errors, errors
    assert not slow, slow
    assert _snapshot() == before
    assert not [p for p in PWN_TARGETS if p.exists()]


def test_hostile_candidates_do_not_disturb_honest_ones_graded_alongside() -> None:
    nasty = {"fork_bomb", "memory_bomb", "kill_everything", "fill_disk"}
    hostile = [ln for ln in _lines("code_hostile.jsonl") if ln["id"].removeprefix("hostile-") in nasty]
    honest = [ln for ln in _lines("code.jsonl") if ln["expect"] == "pass"][:8]
    mixed = [x for pair in zip(hostile * 2, honest, strict=False) for x in pair]
    results = {i: v for i, v, _, _ in _run(mixed, timeout_s=3.0)}
    assert all(results[ln["id"]] is True for ln in honest), results
    assert all(results[ln["id"]] is False for ln in hostile), results
