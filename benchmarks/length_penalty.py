"""verigym's DAPO soft overlong penalty next to TRL's ``get_soft_overlong_punishment``.

Both run in one process on the same lengths: every length from 0 to 1.5·L_max for three
(L_max, L_cache) settings. Prints the largest disagreement (must be 0) and each one's rate in
lengths/s (verigym's batch form ``soft_overlong_penalties``), with the ratio. TRL's reward module has no imports, so it is loaded straight from the
peer virtual environment (``.bench/venv``) without importing the rest of TRL.

    python benchmarks/length_penalty.py [--peer-file PATH] [--repeat N]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path
from typing import Any

from verigym.graders.length import soft_overlong_penalties, soft_overlong_penalty

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PEER = ROOT / ".bench/venv/lib/python3.11/site-packages/trl/rewards/other_rewards.py"
SETTINGS = [(20480, 4096), (1000, 200), (64, 0)]


def _load_peer(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location("trl_other_rewards", path)
    if spec is None or spec.loader is None or not path.exists():
        sys.exit(f"peer file not found: {path} (install trl into .bench/venv)")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer-file", type=Path, default=DEFAULT_PEER, help="TRL's rewards/other_rewards.py")
    parser.add_argument("--repeat", type=int, default=3, help="timing repeats (best is kept)")
    args = parser.parse_args()
    peer = _load_peer(args.peer_file)

    work = []
    worst = 0.0
    for max_len, cache in SETTINGS:
        lengths = list(range(0, int(1.5 * max_len) + 1))
        fn = peer.get_soft_overlong_punishment(max_len, cache)
        ids = [range(k) for k in lengths]  # TRL takes token id lists and uses len()
        ours = [soft_overlong_penalty(k, max_len, cache) for k in lengths]
        assert ours == soft_overlong_penalties(lengths, max_len, cache)
        worst = max(worst, max(abs(a - b) for a, b in zip(ours, fn(ids), strict=True)))
        work.append((max_len, cache, lengths, fn, ids))
    n = sum(len(w[2]) for w in work)
    t_ours = t_peer = float("inf")
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        for max_len, cache, lengths, _fn, _ids in work:
            soft_overlong_penalties(lengths, max_len, cache)
        t1 = time.perf_counter()
        for _m, _c, _lengths, fn, ids in work:
            fn(ids)
        t2 = time.perf_counter()
        t_ours, t_peer = min(t_ours, t1 - t0), min(t_peer, t2 - t1)
    print(f"lengths compared: {n}, settings (L_max, L_cache) {SETTINGS}")
    print(f"max |verigym - trl| = {worst:.3g}")
    print(f"verigym: {n / t_ours:,.0f} lengths/s   trl: {n / t_peer:,.0f} lengths/s")
    print(f"ratio verigym/trl throughput: {t_peer / t_ours:.2f}")
    if worst > 1e-12:
        sys.exit(1)


if __name__ == "__main__":
    main()
