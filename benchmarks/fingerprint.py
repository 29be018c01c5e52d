"""Training fingerprints: did a change alter what training computes? (issue 25, "Behaviour is unchanged")

A short, fully seeded training on the built-in ``tiny`` model with one torch thread, once per RL
preset: the same light SFT (oracle demonstrations of 1-digit ``arithmetic``, graded by ``digits`` so
that a short SFT already leaves reward variance for RL), then a few RL steps with that preset. The
fingerprint is a sha256 per item:

* ``sft/weights``: the SFT weights (the first preset's run; every run does the same SFT);
* ``PRESET/weights``: the final weights (every tensor of every ``*.safetensors`` file of the final
  model directory, by sorted key: name, dtype, shape, bytes);
* ``PRESET/metrics``: ``metrics.jsonl`` with the timing fields removed (keys ending in ``_s`` at any
  depth, timestamps), each line re-serialized in its own key order;
* ``PRESET/summary``: the summary's held-out numbers and step counts (no paths, sizes or times).

Floats differ between CPUs (Intel vs AMD, instruction sets), so no fingerprint is committed: compare
two revisions *on the same machine*. ``--base REV`` builds the same fingerprint at ``REV`` from a
temporary ``git worktree`` (removed afterwards), running that revision's ``src/`` with this Python,
and prints IDENTICAL or DIFFERENT per item and MET when every item is identical. Each revision runs
in a fresh process (``PYTHONPATH=<tree>/src``, ``PYTHONHASHSEED=0``, one thread). The config is
built with ``verigym.train.config.build_config`` and run with ``verigym.train.pipeline.run_train``,
public since before issue 25; its keys are the quickstart's.

    python benchmarks/fingerprint.py [--base REV] [--rev REV] [--seed 0] [--presets dapo,grpo,...]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

PRESETS = ("dapo", "grpo", "dr_grpo", "opo", "skywork", "lead", "clip_cov", "kl_cov", "gspo")
"""Every preset that needs nothing more than its name (``opd`` needs a teacher), in the order run."""

_TIMESTAMP_KEYS = frozenset({"time", "timestamp", "date", "datetime", "started", "finished"})


def recipe(out_dir: Path, *, seed: int, preset: str, sft_steps: int, rl_steps: int) -> dict[str, Any]:
    """The raw config of one run (the quickstart's keys, at a small budget)."""
    return {
        "seed": seed,
        "out_dir": str(out_dir),
        "model": {"tiny": "tiny", "seed": seed},
        "envs": [{"name": "arithmetic", "args": {"level": 1, "digits": 1, "graders": "digits"}}],
        "sampling": {"temperature": 1.0, "max_tokens": 6},
        "sft": {
            "demos": 256,
            "max_steps": sft_steps,
            "batch_size": 16,
            "lr": 3e-3,
            "lr_schedule": "constant",
            "eval_every": max(1, sft_steps // 2),
        },
        "rl": {
            "preset": preset,
            "steps": rl_steps,
            "groups_per_step": 4,
            "group_size": 4,
            "lr": 3e-4,
            "max_rounds": 2,
            "eval_every": 2,
        },
        "eval": {"tasks": 20, "samples": 1, "temperature": 0.0},
        "logging": {"checkpoint_every": 0, "report": False},
    }


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def weights_digest(model_dir: Path) -> str:
    """sha256 over every tensor of the directory's ``*.safetensors`` files, in sorted key order."""
    import torch
    from safetensors.torch import load_file

    files = sorted(Path(model_dir).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors in {model_dir}")
    h = hashlib.sha256()
    for f in files:
        tensors = load_file(str(f))
        for key in sorted(tensors):
            t = tensors[key].contiguous()
            h.update(f"{f.name}:{key}:{t.dtype}:{tuple(t.shape)}\n".encode())
            h.update(t.view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _untimed(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _untimed(v) for k, v in value.items() if not (k.endswith("_s") or k.lower() in _TIMESTAMP_KEYS)
        }
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def metrics_digest(path: Path) -> str:
    """sha256 of ``metrics.jsonl`` with the timing fields removed."""
    lines = [json.dumps(_untimed(json.loads(line))) for line in path.read_text().splitlines() if line]
    return _sha("\n".join(lines).encode())


def summary_digest(summary: dict[str, Any]) -> str:
    """sha256 of the summary's held-out numbers and step counts."""
    kept = {
        k: v
        for k, v in summary.items()
        if k.startswith(("pass_at_1", "eval/")) or k in ("steps", "sft_steps")
    }
    return _sha(json.dumps(kept, sort_keys=True).encode())


def fingerprint(
    work: Path,
    *,
    seed: int = 0,
    presets: Sequence[str] = PRESETS,
    sft_steps: int = 40,
    rl_steps: int = 3,
    threads: int = 1,
) -> dict[str, str]:
    """Train once per preset under ``work`` in this process (with ``verigym`` as imported); the digests.

    Torch's thread count is set to ``threads`` for the runs and restored afterwards.
    """
    import torch

    from verigym.train.config import build_config
    from verigym.train.pipeline import run_train

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    out: dict[str, str] = {}
    try:
        for preset in presets:
            run = Path(work) / preset
            if run.exists():
                shutil.rmtree(run)
            raw = recipe(run, seed=seed, preset=preset, sft_steps=sft_steps, rl_steps=rl_steps)
            summary = run_train(build_config(raw))
            if "sft/weights" not in out:
                out["sft/weights"] = weights_digest(Path(summary["sft_model_dir"]))
            out[f"{preset}/weights"] = weights_digest(Path(summary["model_dir"]))
            out[f"{preset}/metrics"] = metrics_digest(run / "metrics.jsonl")
            out[f"{preset}/summary"] = summary_digest(summary)
    finally:
        torch.set_num_threads(before)
    return out


def _worker(args: argparse.Namespace) -> None:
    import verigym

    src = Path(args.worker).resolve()
    where = Path(verigym.__file__).resolve()
    if src not in where.parents:
        sys.exit(f"fingerprint worker: verigym imported from {where}, not from {src}")
    digests = fingerprint(
        Path(args.work),
        seed=args.seed,
        presets=args.presets.split(","),
        sft_steps=args.sft_steps,
        rl_steps=args.rl_steps,
    )
    print("FINGERPRINT " + json.dumps(digests))


def _in_process_of(src: Path, work: Path, args: argparse.Namespace) -> dict[str, str]:
    """The fingerprint of the ``verigym`` under ``src``, computed in a fresh process."""
    env = dict(os.environ)
    env.update(
        PYTHONPATH=str(src),
        PYTHONHASHSEED="0",
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        TOKENIZERS_PARALLELISM="false",
    )
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", str(src), "--work", str(work)]
    cmd += ["--seed", str(args.seed), "--presets", args.presets]
    cmd += ["--sft-steps", str(args.sft_steps), "--rl-steps", str(args.rl_steps)]
    proc = subprocess.run(cmd, env=env, cwd=work, capture_output=True, text=True, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("FINGERPRINT "):
            result: dict[str, str] = json.loads(line.removeprefix("FINGERPRINT "))
            return result
    sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
    raise SystemExit(f"the fingerprint run on {src} failed (exit {proc.returncode})")


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True).stdout


def _at_revision(rev: str, tmp: Path, args: argparse.Namespace) -> tuple[str, dict[str, str]]:
    """(full commit id, fingerprint) of ``rev``, from a temporary worktree removed afterwards."""
    commit = _git("rev-parse", "--verify", f"{rev}^{{commit}}").strip()
    tree = tmp / f"tree-{commit[:12]}"
    _git("worktree", "add", "--detach", str(tree), commit)
    try:
        work = tmp / f"runs-{commit[:12]}"
        work.mkdir(exist_ok=True)
        return commit, _in_process_of(tree / "src", work, args)
    finally:
        _git("worktree", "remove", "--force", str(tree))


def _describe(rev: str | None) -> str:
    if rev is not None:
        return rev
    head = _git("rev-parse", "--short", "HEAD").strip()
    dirty = _git("status", "--porcelain", "--untracked-files=no", "--", "src").strip()
    return f"working tree (HEAD {head}{', src/ modified' if dirty else ''})"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="Without --base: print this tree's fingerprint. Compare revisions on one machine only: "
        "floats differ between CPUs, so no fingerprint is committed.",
    )
    ap.add_argument(
        "--base",
        metavar="REV",
        help="Also fingerprint git revision REV (a temporary worktree) and compare item by item: "
        "IDENTICAL/DIFFERENT per item, MET when all are identical (exit 1 otherwise).",
    )
    ap.add_argument(
        "--rev",
        metavar="REV",
        help="Fingerprint revision REV (a temporary worktree) instead of this working tree's src/.",
    )
    ap.add_argument("--seed", type=int, default=0, help="Seed of the runs and the tiny model (default 0).")
    ap.add_argument(
        "--presets",
        default=",".join(PRESETS),
        help=f"Comma-separated RL presets, one run each (default: {','.join(PRESETS)}).",
    )
    ap.add_argument("--sft-steps", type=int, default=40, help="SFT steps of every run (default 40).")
    ap.add_argument("--rl-steps", type=int, default=3, help="RL steps of every run (default 3).")
    ap.add_argument(
        "--keep",
        metavar="DIR",
        help="Run in DIR and keep the run directories (default: a temporary directory).",
    )
    ap.add_argument("--worker", metavar="SRC", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        _worker(args)
        return 0

    tmp = Path(args.keep).resolve() if args.keep else Path(tempfile.mkdtemp(prefix="verigym-fp-"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        sides: list[tuple[str, dict[str, str]]] = []
        for rev in ([args.base] if args.base else []) + [args.rev]:
            if rev is None:
                work = tmp / "runs-worktree"
                work.mkdir(exist_ok=True)
                sides.append((_describe(None), _in_process_of(REPO / "src", work, args)))
            else:
                commit, digests = _at_revision(rev, tmp, args)
                sides.append((f"{rev} ({commit[:12]})", digests))
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)

    print(
        f"seed {args.seed}, presets {args.presets}, SFT {args.sft_steps} + RL {args.rl_steps} steps, 1 thread"
    )
    for name, digests in sides:
        print(f"\n{name}")
        for item, digest in digests.items():
            print(f"  {item:<20} {digest}")
    if len(sides) == 1:
        return 0
    (base_name, base), (head_name, head) = sides
    print(f"\n{head_name} vs {base_name}")
    different = 0
    for item in dict.fromkeys([*base, *head]):
        same = item in base and item in head and base[item] == head[item]
        different += not same
        print(f"  {item:<20} {'IDENTICAL' if same else 'DIFFERENT'}")
    print(
        f"\ntraining fingerprints identical: {'MET' if not different else f'NOT MET ({different} different)'}"
    )
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
