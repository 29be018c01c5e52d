"""A kill at every file operation of a checkpoint and of a resume, and a full disk (issue 42 items 2, 4).

Faults come through the file layer (``verigym._files.file_hook``), not timing: a hook fails the N-th
announced operation and every one after it (the process is dead from there on), for each N of the
first checkpoint cycle (which writes the KL reference) and of a resume in turn. After each kill,
``--resume`` must finish with the metrics and the final weights of a run that was never interrupted:
the KL reference is published before the checkpoint that needs it, and a resume takes it from there,
never from the resumed weights (it stops with one line when it is missing). A full disk (``ENOSPC``
injected at a checkpoint's writes) is one line naming the file, what a checkpoint needs, the last
complete checkpoint and how to resume; the partial folder is removed, and the run resumes exactly.
"""

from __future__ import annotations

import errno
import hashlib
import itertools
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from verigym._files import file_hook
from verigym.cli import app
from verigym.train.checkpoint import DiskFull, TrainingHalted
from verigym.train.config import build_config
from verigym.train.pipeline import run_train

TIMING = ("_s", "tokens_per_s")  # wall-clock figures differ between any two runs


class Killed(BaseException):
    """The injected kill: a BaseException, so no ``except Exception`` of the code under test stops it."""


BURST = {"name": f"{Path(__file__).parent / 'nonfinite_envs.py'}:BurstEnv", "args": {"level": 1}}


def cfg(out: Path, env: dict[str, Any] | None = None, steps: int = 2) -> Any:
    return build_config(
        {
            "seed": 1,
            "out_dir": str(out),
            "envs": [env or {"name": "arithmetic", "args": {"level": 1}}],
            "sampling": {"max_tokens": 4},
            "sft": {"demos": 16, "max_steps": 2, "batch_size": 8},
            "rl": {"steps": steps, "groups_per_step": 2, "group_size": 4, "kl_beta": 0.5},
            "eval": {"tasks": 2},
            "logging": {"report": False, "checkpoint_every": 1},
        }
    )


def kill_at(n: int) -> Callable[[str, Path], None]:
    counter = itertools.count()

    def hook(op: str, path: Path) -> None:
        if next(counter) >= n:
            raise Killed(f"{op} {path}")

    return hook


def outcome(run: Path) -> tuple[list[dict[str, Any]], str]:
    """The run's metrics without wall-clock figures, and a digest of its final weights."""
    rows = []
    for line in (run / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        rows.append({k: v for k, v in row.items() if not k.endswith(TIMING)})
    tensors = load_file(str(run / "checkpoint" / "model.safetensors"))
    digest = hashlib.sha256()
    for name in sorted(tensors):
        digest.update(name.encode() + tensors[name].contiguous().view(torch.uint8).numpy().tobytes())
    return rows, digest.hexdigest()


@pytest.fixture(scope="module")
def baseline(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[tuple[list[dict[str, Any]], str], list[tuple[str, str]]]:
    """The uninterrupted run's outcome and the file operations it announced."""
    torch.set_num_threads(1)
    run = tmp_path_factory.mktemp("base") / "run"
    ops: list[tuple[str, str]] = []
    with file_hook(lambda op, path: ops.append((op, str(path.relative_to(run))))):
        run_train(cfg(run))
    return outcome(run), ops


def _start2(ops: list[tuple[str, str]]) -> int:
    """Where step 2's checkpoint begins."""
    return next(i for i, (op, p) in enumerate(ops) if op == "mkdir" and p.endswith("step_000002"))


def _cycle(ops: list[tuple[str, str]]) -> range:
    """The first checkpoint cycle: its first operation under checkpoints/ up to step 2's checkpoint,
    whose first operation is a kill right after the cycle."""
    first = next(i for i, (_, p) in enumerate(ops) if p.startswith("checkpoints"))
    return range(first, _start2(ops) + 1)


def test_a_kill_at_every_file_operation_of_a_checkpoint_cycle_resumes_exactly(
    tmp_path: Path, baseline: Any
) -> None:
    torch.set_num_threads(1)
    expected, ops = baseline
    cycle = _cycle(ops)
    assert ("replace", "checkpoints/ref") in ops[cycle.start : cycle.stop]  # the reference is in it
    assert len(cycle) >= 10, ops
    for n in cycle:
        run = tmp_path / f"kill{n}" / "run"
        with pytest.raises(Killed), file_hook(kill_at(n)):
            run_train(cfg(run))
        run_train(cfg(tmp_path / "ignored"), resume=run)
        assert outcome(run) == expected, f"killed at {ops[n]}"


def test_a_kill_at_every_file_operation_of_a_resume_resumes_exactly(tmp_path: Path, baseline: Any) -> None:
    torch.set_num_threads(1)
    expected, ops = baseline
    crashed = tmp_path / "crashed" / "run"  # killed as step 2's checkpoint begins: step 1 is complete
    with pytest.raises(Killed), file_hook(kill_at(_start2(ops))):
        run_train(cfg(crashed))
    probe = tmp_path / "probe" / "run"
    shutil.copytree(crashed, probe)
    resume_ops: list[str] = []

    def until_checkpoint(op: str, path: Path) -> None:
        if op == "mkdir" and ".tmp_step_" in path.name:
            raise Killed  # the resume's own operations end where training's checkpoints begin
        resume_ops.append(f"{op} {path.relative_to(probe)}")

    with pytest.raises(Killed), file_hook(until_checkpoint):
        run_train(cfg(tmp_path / "ignored"), resume=probe)
    assert any(o.startswith("read checkpoints/ref") for o in resume_ops), resume_ops
    for n in range(len(resume_ops) + 1):
        run = tmp_path / f"resume{n}" / "run"
        shutil.copytree(crashed, run)
        with pytest.raises(Killed), file_hook(kill_at(n)):
            run_train(cfg(tmp_path / "ignored"), resume=run)
        run_train(cfg(tmp_path / "ignored"), resume=run)
        assert outcome(run) == expected, f"killed at {resume_ops[n] if n < len(resume_ops) else 'the end'}"


def test_a_resume_without_its_kl_reference_stops_with_one_line(tmp_path: Path, baseline: Any) -> None:
    torch.set_num_threads(1)
    _, ops = baseline
    run = tmp_path / "run"
    with pytest.raises(Killed), file_hook(kill_at(_start2(ops))):
        run_train(cfg(run))
    shutil.rmtree(run / "checkpoints" / "ref")
    with pytest.raises(TrainingHalted, match=r"KL reference model .* is missing"):
        run_train(cfg(tmp_path / "ignored"), resume=run)
    result = CliRunner().invoke(app, ["train", "--resume", str(run)])
    assert result.exit_code == 2, result.output
    assert "KL reference model" in result.output and "Traceback" not in result.output


def test_a_resume_through_a_non_finite_reward_burst_is_exact(tmp_path: Path) -> None:
    """Found by the training soak: weights read from a checkpoint sat 24 bytes past a 64-byte boundary
    (safetensors' offsets), and MKL rounded the burst step's smaller products differently there; the
    trainer now gives every tensor aligned storage. Killed at step 2's checkpoint, resumed from step 1,
    through the burst (versions 3-5) to step 7: the uninterrupted run's metrics and weights."""
    torch.set_num_threads(1)
    run_train(cfg(tmp_path / "base", BURST, steps=7))
    expected = outcome(tmp_path / "base")
    assert any(r.get("samples_errored") for r in expected[0]), "the burst did not happen"
    run = tmp_path / "run"

    def kill_at_step_2(op: str, path: Path) -> None:
        if op == "mkdir" and path.name == ".tmp_step_000002":
            raise Killed

    with pytest.raises(Killed), file_hook(kill_at_step_2):
        run_train(cfg(run, BURST, steps=7))
    run_train(cfg(tmp_path / "ignored"), resume=run)
    assert outcome(run) == expected


def enospc_at(target: str, run: Path) -> Callable[[str, Path], None]:
    """A full disk from the first write whose path ends with ``target`` in step 2's checkpoint on."""
    full = False

    def hook(op: str, path: Path) -> None:
        nonlocal full
        full = full or (op == "write" and "step_000002" in str(path) and str(path).endswith(target))
        if full and op in ("write", "replace", "mkdir"):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))

    return hook


@pytest.mark.parametrize("target", ["model", "trainer.pt", "state.json"])
def test_a_full_disk_is_one_line_and_the_run_resumes_exactly(
    tmp_path: Path, baseline: Any, target: str
) -> None:
    torch.set_num_threads(1)
    expected, _ = baseline
    run = tmp_path / "run"
    with pytest.raises(DiskFull) as info, file_hook(enospc_at(target, run)):
        run_train(cfg(run))
    line = str(info.value)
    assert "\n" not in line and line.startswith("disk full: writing "), line
    assert target in line and "a checkpoint needs about" in line and " MB" in line, line
    assert "the last complete checkpoint is step_000001" in line, line
    assert f"verigym train --resume {run}" in line, line
    assert not list((run / "checkpoints").glob(".tmp*")), "the partial checkpoint folder stayed"
    run_train(cfg(tmp_path / "ignored"), resume=run)
    assert outcome(run) == expected


def test_a_full_disk_in_the_cli_exits_2_with_one_line(tmp_path: Path) -> None:
    torch.set_num_threads(1)
    run = tmp_path / "run"
    config = tmp_path / "train.toml"
    config.write_text(
        f'seed = 1\nout_dir = "{run}"\n[[envs]]\nname = "arithmetic"\n[sampling]\nmax_tokens = 4\n'
        "[rl]\nsteps = 2\ngroups_per_step = 2\ngroup_size = 4\n[eval]\ntasks = 2\n"
        "[logging]\nreport = false\ncheckpoint_every = 1\n"
    )
    with file_hook(enospc_at("trainer.pt", run)):
        result = CliRunner().invoke(app, ["train", str(config)])
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if "disk full" in ln]
    assert lines and "Traceback" not in result.output, result.output
    assert not list((run / "checkpoints").glob(".tmp*"))
