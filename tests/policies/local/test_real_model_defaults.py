"""What a pretrained model meets: arithmetic asks SmolLM2 in words with a \\boxed{} answer (recorded in
config.json for --resume); a run's checkpoint is named after its run, not `checkpoint`; SFT trains the
assistant's tokens up to and including EOS, exactly what is sampled."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from verigym.cli import app
from verigym.policies.catalogue import pull
from verigym.policies.local.policy import _display_name

runner = CliRunner()


def _eval(tmp_path: Path, model: str, *extra: str) -> dict[str, object]:
    out = tmp_path / model
    args = ["eval", "arithmetic", "--model", model, "-n", "2", "--max-tokens", "4", "--threads", "1"]
    done = runner.invoke(app, [*args, "--out", str(out), *extra])
    assert done.exit_code == 0, done.output
    config: dict[str, object] = json.loads((out / "config.json").read_text())["config"]
    return config


def test_a_pretrained_model_gets_the_worded_prompt_and_the_toy_keeps_its_own(tmp_path: Path) -> None:
    pull("smollm2-135m-instruct")
    real = _eval(tmp_path, "smollm2-135m-instruct")
    assert real["env_args"] == {"verbose": True}
    record = json.loads((tmp_path / "smollm2-135m-instruct" / "results.jsonl").read_text().splitlines()[0])
    assert "\\boxed{}" in record["trajectory"]["prompt"][-1]["content"]
    assert _eval(tmp_path, "tiny")["env_args"] == {}
    chosen = _eval(tmp_path / "own", "smollm2-135m-instruct", "--env-arg", "verbose=false")
    assert chosen["env_args"] == {"verbose": False}  # what the user sets wins


def test_checkpoints_are_named_after_their_run() -> None:
    assert _display_name("runs/quickstart/checkpoint") == "quickstart"
    assert _display_name("runs/x/checkpoints/step_000005/model") == "x@step_000005"
    assert _display_name("/models/smollm2-135m-instruct") == "smollm2-135m-instruct"


def test_sft_masks_the_assistant_tokens_up_to_and_including_eos() -> None:
    from transformers import AutoTokenizer

    from verigym.train.sft import messages_row
    from verigym.types import Message

    tok = AutoTokenizer.from_pretrained(str(pull("smollm2-135m-instruct")))
    convo = [
        Message(role="user", content="1+2="),
        Message(role="assistant", content="3"),
        Message(role="user", content="again"),
        Message(role="assistant", content="4"),
    ]
    row = messages_row(tok, convo)
    trained = [tok.decode([i]) for i, m in zip(row.ids, row.mask, strict=True) if m]
    assert trained == [
        "3",
        "<|im_end|>",
        "4",
        "<|im_end|>",
    ]  # ChatML's newline after <|im_end|> is not trained
    ends = [k for k, (i, m) in enumerate(zip(row.ids, row.mask, strict=True)) if m and i == tok.eos_token_id]
    assert all(tok.decode([row.ids[k + 1]]) == "\n" and not row.mask[k + 1] for k in ends[:-1])
    assert tok.decode(row.ids[ends[-1] + 1 :]) in ("", "\n") and not any(row.mask[ends[-1] + 1 :])


def test_the_real_tool_recipe_trains_calls_in_smollm2s_own_format(tmp_path: Path) -> None:
    """`quickstart --env calc --model`: the oracle's demos are rendered in the model's template, the
    tool schemas in its system prompt, and only the assistant's turns (call, answer, each EOS) trained."""
    from transformers import AutoTokenizer

    from verigym.policies.catalogue import resolve
    from verigym.recipes.quickstart_real import real_calc_config
    from verigym.train.pipeline import build_sft_rows
    from verigym.train.rl import load_envs

    pull("smollm2-135m-instruct")
    cfg = real_calc_config(tmp_path, model="smollm2-135m-instruct", sft__demos=2)
    tok = AutoTokenizer.from_pretrained(resolve("smollm2-135m-instruct"))
    rows = build_sft_rows(cfg, tok, load_envs(cfg))
    text = tok.decode(rows[0].ids)
    assert '<tools>[{"type": "function", "function": {"name": "calc"' in text
    trained = tok.decode([i for i, m in zip(rows[0].ids, rows[0].mask, strict=True) if m])
    a, b = re.search(r"Compute (\d+)\*(\d+) with the calc tool", text).groups()  # type: ignore[union-attr]
    call = json.dumps([{"name": "calc", "arguments": {"expr": f"{a}*{b}"}}])
    assert trained == f"<tool_call>{call}</tool_call><|im_end|>{int(a) * int(b)}<|im_end|>"
