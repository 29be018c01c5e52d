"""``torchrun --nproc-per-node 2 -m verigym train``: after one step the parameters equal a
single-process step on the same global batch (gloo, 2 CPU processes), with DDP and with FSDP2."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from verigym.train._model import load_model
from verigym.train.config import load_config
from verigym.train.rl import RLTrainer

CONFIG = """
seed = 0
[model]
tiny = "tiny"
[[envs]]
name = "arithmetic"
args = { level = 1 }
[sampling]
max_tokens = 6
[rl]
preset = "grpo"
kl_beta = 0.0
token_cost = 0.1
steps = 1
groups_per_step = 4
group_size = 4
lr = 1e-3
[eval]
tasks = 4
[logging]
report = false
"""


@pytest.mark.parametrize("parallel", ["ddp", "fsdp"])
def test_two_process_step_equals_one_process_step(tmp_path: Path, parallel: str) -> None:
    cfg_file = tmp_path / "c.toml"
    cfg_file.write_text(CONFIG + f'[scale]\nparallel = "{parallel}"\n')
    out = tmp_path / parallel
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or "torchrun"
    proc = subprocess.run(
        [torchrun, "--standalone", "--nproc-per-node", "2", "-m", "verigym", "train", str(cfg_file)]
        + ["--out", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"},
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert (out / "rank1").is_dir() and not (out / "rank1" / "checkpoints").exists()  # rank 0 writes

    torch.set_num_threads(1)
    cfg = load_config(cfg_file, {"out_dir": str(tmp_path / "single")})
    model, tok = load_model(cfg.model)
    single = RLTrainer(cfg, model=model, tokenizer=tok)
    (metrics,) = single.train()
    assert metrics["grad_norm"] > 0
    (logged,) = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert (
        abs(logged["grad_norm"] - metrics["grad_norm"]) < 1e-4 * metrics["grad_norm"]
    )  # summed, not averaged
    from transformers import AutoModelForCausalLM

    ddp = AutoModelForCausalLM.from_pretrained(str(out / "checkpoint"))
    moved = 0
    for (name, p), q in zip(single.model.named_parameters(), ddp.parameters(), strict=True):
        assert torch.allclose(p, q, atol=2e-5, rtol=0), (name, float((p - q).abs().max()))
        moved += not torch.equal(p, model_init(name))
    assert moved > 0  # the step changed the weights


_INIT: dict[str, torch.Tensor] = {}


def model_init(name: str) -> torch.Tensor:
    if not _INIT:
        from verigym.policies import tiny

        m = tiny.build_model("tiny", tiny.build_tokenizer(), 0)
        _INIT.update({n: p.detach().clone() for n, p in m.named_parameters()})
    return _INIT[name]
