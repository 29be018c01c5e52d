"""A served teacher: ``verigym serve``'s ``/v1/completions`` with ``echo`` (prompt logprobs for given
token ids) on a real local server on 127.0.0.1, against the in-process teacher's values; and one RL
step with each divergence through the trainer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import torch

from verigym.policies import tiny
from verigym.policies.local import LocalPolicy
from verigym.policies.spec import ModelSpec
from verigym.serve import RunningServer
from verigym.train.config import ConfigError, build_config
from verigym.train.distill import InProcessTeacher, ServedTeacher
from verigym.train.rl import RLTrainer
from verigym.train.samples import Row

torch.set_num_threads(1)


def _rows() -> list[Row]:
    return [
        Row(ids=[5, 40, 41, 42, 2], mask=[0, 0, 1, 1, 1], logprobs=None),
        Row(ids=[5, 43, 44, 45, 46, 47, 48, 2], mask=[0, 0, 0, 0, 1, 1, 1, 1], logprobs=None),
    ]


def test_served_teacher_logprobs_equal_in_process_ones() -> None:
    tok = tiny.build_tokenizer()
    model = tiny.build_model("tiny", tok, seed=1)
    with RunningServer(LocalPolicy(model, tok, name="teacher")) as server:
        served = ServedTeacher(ModelSpec(base_url=server.url))  # the model name: asked of /v1/models
        served.check(tok)
        local = InProcessTeacher(model, tok, "teacher", pad_id=0)
        for temperature in (0.7, 1.0):
            got, want = served.logprobs(_rows(), temperature), local.logprobs(_rows(), temperature)
            for r, g, w in zip(
                _rows(), got, want, strict=True
            ):  # on the model tokens (in-process: 0.0 before)
                s = r.mask.index(1)
                assert g[s:] == pytest.approx(w[s:], abs=1e-5) and w[:s] == [0.0] * s
        # the wire: echo + logprobs + max_tokens 0 as vLLM answers it (first prompt token: null)
        body = {"model": "teacher", "prompt": [5, 40, 41], "echo": True, "max_tokens": 0, "logprobs": 1}
        choice = httpx.post(server.url + "/completions", json=body).json()["choices"][0]
        assert choice["token_ids"] == [] and choice["prompt_token_ids"] == [5, 40, 41]
        lp = choice["logprobs"]
        assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
        full = torch.log_softmax(local.logits(_rows()[:1]), dim=-1)[0]  # every position, prompt included
        want_lp = [float(full[j - 1, t]) for j, t in ((1, 40), (2, 41))]
        assert lp["token_logprobs"][1:] == pytest.approx(want_lp, abs=1e-5)
        assert lp["token_logprobs"][2] == pytest.approx(local.logprobs(_rows()[:1], 1.0)[0][2], abs=1e-5)
        assert len(lp["tokens"]) == 3 and len(lp["top_logprobs"][1]) == 1
        del body["echo"]
        assert httpx.post(server.url + "/completions", json=body).status_code == 400  # 0 tokens needs echo
        other = tiny.build_tokenizer()
        other.add_tokens(["12"])  # the probe's "12" is now one token
        with pytest.raises(ConfigError, match="different tokenizer"):
            served.check(other)


def _cfg(tmp_path: Path, distill: dict[str, Any]) -> Any:
    return build_config(
        {
            "out_dir": str(tmp_path / "run"),
            "envs": [{"name": "arithmetic", "args": {"level": 1}}],
            "sampling": {"temperature": 1.0, "max_tokens": 4},
            "rl": {"preset": "opd", "steps": 1, "groups_per_step": 2, "group_size": 2, "distill": distill},
            "eval": {"tasks": 2},
        }
    )


def test_one_rl_step_with_each_divergence(tmp_path: Path) -> None:
    tok = tiny.build_tokenizer()
    teacher = tiny.build_model("tiny", tok, seed=2)
    teacher.save_pretrained(tmp_path / "teacher")
    tok.save_pretrained(tmp_path / "teacher")
    for divergence in ("reverse_kl", "jsd"):
        cfg = _cfg(tmp_path, {"teacher": str(tmp_path / "teacher"), "divergence": divergence, "coef": 1.0})
        model = tiny.build_model("tiny", tok, seed=0)
        before = [p.detach().clone() for p in model.parameters()]
        (m,) = RLTrainer(cfg, model=model, tokenizer=tok).train()
        assert m["distill/reverse_kl"] != 0 and m["distill/teacher_s"] > 0 and m["distill/coef"] == 1.0
        assert ("distill/jsd" in m) == (divergence == "jsd")
        assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
