"""``verigym.data.profile`` and ``verigym.data.synthesize`` called as a library, without the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from verigym import data
from verigym.eval.workflow import EvalEvent, EvalSetupError
from verigym.policies.base import PolicyError
from verigym.policies.scripted import ScriptedPolicy
from verigym.types import Message


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_profile_estimates_pass_rates_and_resumes_from_the_store(tmp_path: Path) -> None:
    events: list[EvalEvent] = []
    out = tmp_path / "prof"
    first = data.profile(
        "arithmetic", policy="oracle", num_tasks=3, samples_per_task=2, out=out, on_event=events.append
    )
    assert isinstance(first, data.ProfileResult) and first.profile is not None
    assert first.run.written == 6 and first.out == out
    assert {t: first.profile.pass_rate(t) for t in first.profile.tasks} == dict.fromkeys(
        first.profile.tasks, 1.0
    )
    assert len(first.profile.tasks) == 3 and first.in_band == []  # the open band (0, 1) holds no 1.0
    assert [r["samples"] for r in _lines(first.profile_file)] == [2, 2, 2]
    assert json.loads(first.band_file.read_text()) == {"band": [0.0, 1.0], "task_ids": []}
    assert sum(e.kind == "record" for e in events) == 6 and events[0].kind in ("policy", "ready")

    again = data.profile(
        "arithmetic", policy="oracle", num_tasks=3, samples_per_task=2, out=out, resume=True, band=(0.5, 1.0)
    )
    assert again.run.skipped == 6 and again.run.written == 0  # the records came from the store
    assert again.profile is not None and again.profile.tasks == first.profile.tasks
    assert again.in_band == [] and json.loads(again.band_file.read_text())["band"] == [0.5, 1.0]

    wrong = data.profile("arithmetic", policy="null", num_tasks=2, samples_per_task=1, out=tmp_path / "n")
    assert wrong.profile is not None and all(s.pass_rate == 0.0 for s in wrong.profile.tasks.values())


def test_synthesize_keeps_verified_samples_as_sft_lines(tmp_path: Path) -> None:
    syn = data.synthesize(
        "arithmetic", policy="oracle", num_tasks=3, samples_per_task=2, keep="shortest", out=tmp_path / "s"
    )
    assert isinstance(syn, data.SynthResult) and syn.stats is not None
    assert len(syn.kept) == 3 and len({r["task_id"] for r in syn.kept}) == 3  # shortest: one per task
    assert syn.stats.yield_rate == 1.0 and syn.stats.errors == 0
    lines = _lines(syn.sft_file)
    assert len(lines) == 3 and all(line["reward"] == 1.0 and line["loss_mask"] == [0, 1] for line in lines)
    assert json.loads(syn.stats_file.read_text())["kept"] == 3

    none = data.synthesize("arithmetic", policy="null", num_tasks=2, out=tmp_path / "z", per_task=1)
    assert none.kept == [] and none.stats is not None and none.stats.yield_rate == 0.0
    assert none.sft_file.read_text() == ""  # a verified set of nothing, not an error


def test_every_sample_errored_derives_nothing(tmp_path: Path) -> None:
    def broken(messages: list[Message]) -> str:
        raise PolicyError("the endpoint is down")

    policy = ScriptedPolicy(broken, name="broken")
    prof = data.profile("arithmetic", policy, num_tasks=2, out=tmp_path / "p")
    assert prof.profile is None and prof.run.summary["n_errors"] == 2  # never scored as zeros
    assert not prof.profile_file.exists() and not prof.band_file.exists()
    syn = data.synthesize("arithmetic", policy, num_tasks=2, out=tmp_path / "s")
    assert syn.stats is None and syn.kept == [] and not syn.sft_file.exists()


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="keep 'best': expected all, shortest or diverse"):
        data.synthesize("arithmetic", policy="oracle", keep="best", out=tmp_path / "a")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"band \(0.5,\): expected two pass rates"):
        data.profile("arithmetic", policy="oracle", band=(0.5,), out=tmp_path / "b")
    with pytest.raises(EvalSetupError, match="unknown environment 'no-such-env'"):
        data.profile("no-such-env", policy="oracle", out=tmp_path / "c")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
