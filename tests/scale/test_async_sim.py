"""The async-RL simulation agrees with the closed-form prediction when step times are fixed."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "async_sim.py"
_spec = importlib.util.spec_from_file_location("async_sim", _PATH)
assert _spec is not None and _spec.loader is not None
sim = importlib.util.module_from_spec(_spec)
sys.modules["async_sim"] = sim
_spec.loader.exec_module(sim)


@pytest.mark.parametrize(("gen", "train"), [(3.0, 2.0), (1.0, 2.0), (2.0, 2.0)])
def test_no_jitter_matches_prediction(gen: float, train: float) -> None:
    kw = dict(gen_s=gen, train_s=train, push_s=0.1, steps=300, jitter=0.0, seed=0)
    sync = sim.simulate(max_staleness=0, **kw)
    one = sim.simulate(max_staleness=1, **kw)
    assert sync.steps_per_hour == pytest.approx(3600 / (gen + train + 0.1), rel=1e-3)
    speedup = one.steps_per_hour / sync.steps_per_hour
    assert speedup == pytest.approx(sim.predicted_speedup(gen, train, 0.1), rel=0.02)
    assert sync.mean_staleness == 0.0
    assert max(one.staleness_hist) <= 1


def test_staleness_never_exceeds_bound_under_jitter() -> None:
    for d in (1, 2, 3):
        r = sim.simulate(gen_s=1.0, train_s=1.0, push_s=0.0, max_staleness=d, steps=400, jitter=0.5, seed=1)
        assert max(r.staleness_hist) <= d
