"""benchmarks/fingerprint.py: a seeded run's fingerprint repeats at the same revision and the seed moves it."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "fingerprint.py"
_spec = importlib.util.spec_from_file_location("fingerprint", _PATH)
assert _spec is not None and _spec.loader is not None
fp = importlib.util.module_from_spec(_spec)
sys.modules["fingerprint"] = fp
_spec.loader.exec_module(fp)

_BUDGET = {"presets": ("dapo", "gspo"), "sft_steps": 8, "rl_steps": 1}


def test_same_seed_same_fingerprint_other_seed_different(tmp_path: Path) -> None:
    import torch

    threads = torch.get_num_threads()
    first = fp.fingerprint(tmp_path / "a", seed=0, **_BUDGET)
    again = fp.fingerprint(tmp_path / "b", seed=0, **_BUDGET)
    other = fp.fingerprint(tmp_path / "c", seed=1, **_BUDGET)
    assert torch.get_num_threads() == threads  # restored after the one-thread runs
    assert list(first) == [
        "sft/weights",
        "dapo/weights",
        "dapo/metrics",
        "dapo/summary",
        "gspo/weights",
        "gspo/metrics",
        "gspo/summary",
    ]
    assert first == again
    for item in ("sft/weights", "dapo/weights", "dapo/metrics", "gspo/weights", "gspo/metrics"):
        assert other[item] != first[item], item


def test_metrics_digest_ignores_timing_only(tmp_path: Path) -> None:
    def digest(rows: list[dict[str, object]]) -> str:
        path = tmp_path / "metrics.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return str(fp.metrics_digest(path))

    row = {"step": 0, "loss": 0.5, "gen_time_s": 1.0, "timestamp": 17.0, "nested": {"update_time_s": 2.0}}
    base = digest([row])
    assert digest([{**row, "gen_time_s": 9.0, "timestamp": 99.0, "nested": {"update_time_s": 3.0}}]) == base
    assert digest([{**row, "loss": 0.25}]) != base
