"""Training soak (issue 42 item 8): ``verigym train`` killed with SIGKILL at random moments, through a
full disk and a non-finite reward burst, resumed each time, against a run that was never interrupted.

    .venv/bin/python benchmarks/soak_train.py --minutes 10 --seed 0 --out runs/soak_train

The run: the tiny model (``model.tiny``; SmolLM2 would take minutes a step on a shared CPU), a short SFT
warm-up, then RL with a KL reference (``rl.kl_beta``), a checkpoint every step, on
``_soak_envs.py:BurstEnv``: arithmetic whose weighted reward overflows to inf on half the tasks while
the policy is at versions 3..5 (the non-finite reward burst, met by every run at the same steps).

1. The reference: the config run once, uninterrupted.
2. The full-disk episode (first round): the run directory on a small tmpfs (``mount -t tmpfs``, as
   root; else ``ENOSPC`` injected through ``verigym._files.file_hook`` in the train process, and the
   report says which). Once the first checkpoint is out, a ballast file leaves ~1 MB free: the next
   checkpoint hits a real full disk. The run must exit 2 with one line saying so, leave no partial
   checkpoint folder, and, with the ballast gone, resume to the end.
3. Kill rounds until ``--minutes`` pass: the run is started, SIGKILLed after a random delay (1 to
   ``--max-kills`` times), then resumed with ``verigym train --resume`` until it finishes.

Each finished round is compared with the reference: ``corrupted`` = a run whose metrics (wall-clock
figures aside) or final weights differ, or that did not finish; ``steps lost`` = reference RL steps
missing from ``metrics.jsonl``; ``duplicated`` = RL steps logged twice (``metrics.jsonl``, and steps
sampled twice in ``rollouts_sample.jsonl``); ``non-finite`` = tensors with NaN or inf in any model or
``trainer.pt`` on disk, checked after every kill and at the end. Prints one JSON report (also
OUT/report.json) and MET/NOT MET for 0 of each.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
ENV = ROOT / "benchmarks" / "_soak_envs.py"
TIMING = ("_s", "tokens_per_s")

# the full-disk fallback when tmpfs cannot be mounted: ENOSPC from the first write of step 2's checkpoint
_INJECT = """
import errno, runpy, sys
from verigym._files import file_hook
full = False
def hook(op, path):
    global full
    full = full or (op == "write" and "step_000002" in str(path))
    if full and op in ("write", "replace", "mkdir"):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))
sys.argv = ["verigym", *sys.argv[1:]]
with file_hook(hook):
    runpy.run_module("verigym", run_name="__main__")
"""


def write_config(path: Path, steps: int, seed: int, model: str | None = None) -> Path:
    path.write_text(
        f"seed = {seed}\n"
        'out_dir = "unused"\n'
        + (f'[model]\npath = "{model}"\n' if model else "")
        + f'[[envs]]\nname = "{ENV}:BurstEnv"\nargs = {{ level = 1, burst_from = 3, burst_to = 6 }}\n'
        f"[sampling]\nmax_tokens = {16 if model else 4}\n"
        "[sft]\ndemos = 16\nmax_steps = 3\nbatch_size = 8\n"
        + ("lr = 1e-5\n" if model else "")  # a real model: its own learning rates, not the tiny model's
        + f"[rl]\nsteps = {steps}\ngroups_per_step = 2\ngroup_size = 4\nkl_beta = 0.1\n"
        + ("lr = 1e-6\n" if model else "")
        + "[eval]\ntasks = 4\n"
        "[logging]\nreport = false\ncheckpoint_every = 1\n"
    )
    return path


def train_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "verigym", "train", *args, "--threads", "1"]


def run(cmd: list[str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "400"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


def outcome(run_dir: Path) -> tuple[list[dict[str, Any]], str]:
    """Metrics without wall-clock figures, and a digest of the final weights."""
    from safetensors.torch import load_file

    rows = [
        {k: v for k, v in json.loads(line).items() if not k.endswith(TIMING)}
        for line in (run_dir / "metrics.jsonl").read_text().splitlines()
        if line.strip()
    ]
    tensors = load_file(str(run_dir / "checkpoint" / "model.safetensors"))
    digest = hashlib.sha256()
    for name in sorted(tensors):
        digest.update(name.encode() + tensors[name].contiguous().view(torch.uint8).numpy().tobytes())
    return rows, digest.hexdigest()


def _tensors(value: Any) -> list[torch.Tensor]:
    if torch.is_tensor(value):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def nonfinite(run_dir: Path) -> int:
    """Tensors holding NaN or inf in every model and ``trainer.pt`` under ``run_dir``."""
    from safetensors.torch import load_file

    bad = 0
    for f in sorted(run_dir.rglob("*.safetensors")) + sorted(run_dir.rglob("trainer.pt")):
        if ".tmp" in str(f):
            continue  # a partial folder: never read by anything
        try:
            found = (
                list(load_file(str(f)).values())
                if f.suffix == ".safetensors"
                else _tensors(torch.load(f, map_location="cpu", weights_only=False))
            )
        except Exception:  # a file still being written when the process was killed: not published
            continue
        bad += sum(1 for t in found if t.is_floating_point() and not bool(torch.isfinite(t).all()))
    return bad


def audit(run_dir: Path, reference: tuple[list[dict[str, Any]], str], finished: bool) -> dict[str, int]:
    ref_steps = {r["step"] for r in reference[0] if r.get("phase") == "rl"}
    rows = outcome(run_dir)[0] if finished else []
    steps = [r["step"] for r in rows if r.get("phase") == "rl"]
    sampled = []
    rollouts = run_dir / "rollouts_sample.jsonl"
    for line in rollouts.read_text().splitlines() if rollouts.exists() else []:
        if line.strip():
            sampled.append(json.loads(line).get("step"))
    same = finished and outcome(run_dir) == reference
    return {
        "corrupted": int(not same),
        "steps_lost": len(ref_steps - set(steps)),
        "duplicated": (len(steps) - len(set(steps))) + (len(sampled) - len(set(sampled))),
        "nonfinite": nonfinite(run_dir),
    }


def kill_round(
    config: Path, out: Path, args: argparse.Namespace, rng: random.Random, ref: Any
) -> dict[str, Any]:
    """Start, SIGKILL 1..max_kills times at random moments, then resume to the end."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = train_cmd(str(config), "--out", str(out))
    kills = resumable = nonfinite_mid = bad_exits = 0
    for _ in range(rng.randint(1, args.max_kills)):
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        try:
            proc.wait(timeout=rng.uniform(args.kill_from_s, args.kill_after_s))
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kills += 1
            resumable += (out / "checkpoints" / "latest").exists()  # killed with a checkpoint on disk
            nonfinite_mid += nonfinite(out)
            cmd = train_cmd("--resume", str(out))  # from now on, as a script would
            if not (out / "train_config.json").exists():
                cmd = train_cmd(str(config), "--out", str(out))  # killed before the run was written
            continue
        if proc.returncode != 0:
            bad_exits += 1
            err = proc.stderr.read().decode(errors="replace") if proc.stderr is not None else ""
            print(f"train exited {proc.returncode}: {err.strip()[-400:]}", file=sys.stderr)
        break
    done = run(cmd)
    finished = done.returncode == 0
    if not finished:
        bad_exits += 1
        print(f"train exited {done.returncode}: {done.stdout.strip()[-400:]}", file=sys.stderr)
    result = audit(out, ref, finished)
    result["nonfinite"] += nonfinite_mid
    return {"kills": kills, "kills_after_a_checkpoint": resumable, "bad_exits": bad_exits, **result}


@contextlib.contextmanager
def small_disk(where: Path, mb: int) -> Any:
    """A ``mb`` MB tmpfs at ``where`` (None when it cannot be mounted: not root, no permission)."""
    where.mkdir(parents=True, exist_ok=True)
    mounted = (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={mb}m", "tmpfs", str(where)], capture_output=True
        ).returncode
        == 0
    )
    try:
        yield where if mounted else None
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _fill(path: Path, leave: int) -> None:
    """A ballast file that leaves ``leave`` bytes free on its file system (less when the run writes)."""
    with path.open("wb") as fh:
        while (free := shutil.disk_usage(path.parent).free) > leave:
            try:
                fh.write(b"\0" * min(free - leave, 1 << 20))
                fh.flush()
            except OSError:
                return


def disk_full_round(config: Path, work: Path, ref: Any) -> dict[str, Any]:
    """The run on a small tmpfs filled after its first checkpoint (or ENOSPC injected); then resumed."""
    with small_disk(work / "disk", 64) as disk:
        out = (disk or work) / "run"
        if disk is None:  # no tmpfs: inject ENOSPC through the file layer
            mode = "ENOSPC injected through verigym._files.file_hook (tmpfs could not be mounted)"
            full = run(
                [sys.executable, "-c", _INJECT, "train", str(config), "--out", str(out), "--threads", "1"]
            )
        else:
            mode = "real: a 64 MB tmpfs filled by a ballast file after the first checkpoint"
            env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "400"}
            proc = subprocess.Popen(
                train_cmd(str(config), "--out", str(out)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True, env=env,
            )  # fmt: skip
            while proc.poll() is None and not (out / "checkpoints" / "latest").exists():
                time.sleep(0.05)
            _fill(disk / "ballast", leave=1 << 20)  # ~1 MB: less than one checkpoint
            stdout, _ = proc.communicate(timeout=900)
            full = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, "")
        text = (full.stdout or "") + (full.stderr or "")
        lines = [ln for ln in text.splitlines() if "disk full" in ln]
        partial = sorted(p.name for p in (out / "checkpoints").glob(".tmp*"))
        (disk / "ballast").unlink(missing_ok=True) if disk is not None else None
        resumed = run(train_cmd("--resume", str(out)))
        result = audit(out, ref, resumed.returncode == 0)
        if disk is not None:
            shutil.copytree(out, work / "disk_run", symlinks=True)  # kept for a look after the unmount
        return {
            "mode": mode,
            "exit_code": full.returncode,
            "one_line": len(lines) == 1 and "Traceback" not in text,
            "line": lines[0].strip() if lines else text.strip()[-400:],
            "partial_folders_left": partial,
            "resume_exit_code": resumed.returncode,
            **result,
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0, help="How long to soak (default 10).")
    ap.add_argument("--seed", type=int, default=0, help="Seed of the run and the kill times (default 0).")
    ap.add_argument("--out", type=Path, default=Path("runs/soak_train"), help="Work folder.")
    ap.add_argument("--steps", type=int, default=12, help="RL steps per run (default 12).")
    ap.add_argument("--max-kills", type=int, default=3, help="Most SIGKILLs per round (default 3).")
    ap.add_argument(
        "--kill-after-s", type=float, default=20.0, help="Longest delay before a kill (default 20)."
    )
    ap.add_argument(
        "--kill-from-s", type=float, default=1.0, help="Shortest delay before a kill (default 1)."
    )
    ap.add_argument("--model", help="A model folder for [model] path (default: the tiny model).")
    ap.add_argument("--no-disk", action="store_true", help="Skip the full-disk episode (large checkpoints).")
    args = ap.parse_args()
    work = args.out.resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    rng = random.Random(args.seed)
    t0 = time.monotonic()
    config = write_config(work / "soak_train.toml", args.steps, args.seed, args.model)
    first = run(train_cmd(str(config), "--out", str(work / "reference")))
    if first.returncode != 0:
        sys.exit(f"the reference run failed: {first.stdout[-2000:]}{first.stderr[-2000:]}")
    ref = outcome(work / "reference")
    burst = [
        r
        for r in ref[0]
        if r.get("phase") == "rl" and (r.get("samples_errored") or r.get("rows_nonfinite_advantage"))
    ]
    disk: dict[str, Any] = {"mode": "skipped (--no-disk)", "exit_code": 2, "one_line": True}
    disk.update(
        {"partial_folders_left": [], "corrupted": 0, "steps_lost": 0, "duplicated": 0, "nonfinite": 0}
    )
    if not args.no_disk:
        disk = disk_full_round(config, work, ref)
    print(f"full disk: {disk}", flush=True)
    rounds: list[dict[str, Any]] = []
    deadline = t0 + args.minutes * 60
    while time.monotonic() < deadline:
        rounds.append(kill_round(config, work / f"round{len(rounds):03d}", args, rng, ref))
        print(f"round {len(rounds)}: {rounds[-1]}", flush=True)
    keys = (
        "kills",
        "kills_after_a_checkpoint",
        "bad_exits",
        "corrupted",
        "steps_lost",
        "duplicated",
        "nonfinite",
    )
    total = {k: sum(r[k] for r in rounds) for k in keys}
    for k in ("corrupted", "steps_lost", "duplicated", "nonfinite"):
        total[k] += disk[k]
    report = {
        "minutes": round((time.monotonic() - t0) / 60, 2),
        "seed": args.seed,
        "model": args.model or "tiny",
        "rl_steps_per_run": args.steps,
        "reference_burst_steps": [r["step"] for r in burst],
        "reference_errored_samples_in_burst": sum(int(r.get("samples_errored") or 0) for r in burst),
        "kill_rounds": len(rounds),
        **total,
        "full_disk": disk,
    }
    (work / "report.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    checks = {
        "0 runs corrupted": total["corrupted"] == 0,
        "0 steps lost": total["steps_lost"] == 0,
        "0 duplicated": total["duplicated"] == 0,
        "0 non-finite tensors saved": total["nonfinite"] == 0,
        "the burst met (non-finite rewards errored, run went on)": bool(burst),
        "full disk: exit 2, one line, no partial folder": disk["exit_code"] == 2
        and disk["one_line"]
        and not disk["partial_folders_left"],
    }
    for name, ok in checks.items():
        print(f"{'MET' if ok else 'NOT MET'}: {name}")
    sys.exit(0 if all(checks.values()) else 1)


if __name__ == "__main__":
    main()
