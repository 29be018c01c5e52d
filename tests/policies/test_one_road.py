"""One road from a model name to a policy (issue 40 item 1): ``ModelSpec`` carries dtype, device, tool
format and the batching limit from flags and config alike; one dtype rule; errors that name the flag;
``LocalPolicy.swap_weights``; ``aclose`` on every policy."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from verigym.cli import app
from verigym.eval.config import EvalConfig
from verigym.policies import LocalPolicy, OpenAIPolicy, ScriptedPolicy
from verigym.policies.base import ModelSpecError
from verigym.policies.local.loading import resolve_dtype
from verigym.policies.spec import ModelSpec, load_weights, open_model
from verigym.scale.remote import VersionedPolicy

runner = CliRunner()


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_one_dtype_rule_for_sampling_and_training() -> None:
    assert resolve_dtype("auto", "cpu") is torch.float32
    assert resolve_dtype(None, "cpu") is torch.float32
    assert resolve_dtype("auto", "cuda") is torch.bfloat16
    assert resolve_dtype("auto", "cuda:1") is torch.bfloat16
    assert resolve_dtype("float16", "cpu") is torch.float16
    assert resolve_dtype(torch.bfloat16, "cpu") is torch.bfloat16
    with pytest.raises(ValueError, match="'int8' is not a dtype"):
        resolve_dtype("int8", "cpu")


def test_the_spec_opens_a_local_model_in_its_dtype_format_and_batch_limit(tiny_dir: Path) -> None:
    default = open_model(ModelSpec(model=str(tiny_dir), device="cpu")).policy
    assert isinstance(default, LocalPolicy)
    assert next(default.model.parameters()).dtype is torch.float32  # auto on CPU
    spec = ModelSpec(
        model=str(tiny_dir), dtype="bfloat16", device="cpu", tool_format="hermes", max_batch_rows=3
    )
    policy = open_model(spec).policy
    assert isinstance(policy, LocalPolicy)
    assert next(policy.model.parameters()).dtype is torch.bfloat16
    assert (policy.tool_format, policy.max_batch_rows) == ("hermes", 3)
    fresh = open_model(ModelSpec(model="tiny", dtype="bfloat16", tool_format="llama3")).policy
    assert next(fresh.model.parameters()).dtype is torch.bfloat16  # type: ignore[attr-defined]
    assert fresh.tool_format == "llama3"  # type: ignore[attr-defined]
    weights = load_weights(ModelSpec(dtype="float16"), seed=3, tiny="tiny")
    assert next(weights.model.parameters()).dtype is torch.float16 and not weights.model.training


def test_the_spec_refuses_what_does_not_apply_naming_the_field() -> None:
    with pytest.raises(ValueError, match="unknown tool format 'nope'; expected one of hermes"):
        ModelSpec(tool_format="nope")
    with pytest.raises(ModelSpecError) as served:
        open_model(ModelSpec(base_url="http://127.0.0.1:9/v1", dtype="bfloat16"))
    assert served.value.field == "dtype"
    assert served.value.worded("--") == "--dtype bfloat16: only for an in-process model, not a served one"
    with pytest.raises(ModelSpecError) as missing:
        open_model(ModelSpec(model="/no/such/model"))
    assert missing.value.worded({"model": "MODEL_PATH"}) == "MODEL_PATH /no/such/model: no such directory"
    assert missing.value.worded("--judge-") == "--judge-model /no/such/model: no such directory"
    assert str(missing.value) == "/no/such/model: no such directory"  # as default_policy said it


def test_eval_config_carries_the_model_settings(tmp_path: Path) -> None:
    config = EvalConfig(env="arithmetic", model="m", dtype="bfloat16", tool_format="mistral", device="cpu")
    spec = config.model_spec()
    assert (spec.dtype, spec.tool_format, spec.device) == ("bfloat16", "mistral", "cpu")
    assert EvalConfig(env="arithmetic").model_spec().dtype == "auto"
    from verigym.eval.config import build, load_toml

    toml = tmp_path / "eval.toml"
    toml.write_text('env = "arithmetic"\ndtype = "float16"\ntool_format = "llama3"\nmax_batch_rows = 8\n')
    spec = build(load_toml(toml), "--config").model_spec()  # the config file spells them as the flags
    assert (spec.dtype, spec.tool_format, spec.max_batch_rows) == ("float16", "llama3", 8)


def _eval(tmp_path: Path, *args: str) -> tuple[int, str]:
    out = tmp_path / "run"
    result = runner.invoke(
        app,
        ["eval", "arithmetic", "-n", "2", "--max-tokens", "4", "--threads", "1", "--out", str(out), *args],
        env={"COLUMNS": "200"},
    )
    return result.exit_code, result.output


def test_verigym_eval_takes_dtype_and_tool_format(tmp_path: Path, tiny_dir: Path) -> None:
    code, out = _eval(tmp_path, "--model", str(tiny_dir), "--dtype", "bfloat16", "--tool-format", "hermes")
    assert code == 0, out
    config = json.loads((tmp_path / "run" / "config.json").read_text())["config"]
    assert (config["dtype"], config["tool_format"]) == ("bfloat16", "hermes")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["n_samples"] == 2 and summary["n_errors"] == 0


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--model", "tiny", "--dtype", "int8"], "--dtype"),
        (["--model", "tiny", "--tool-format", "nope"], "--tool-format: unknown tool format 'nope'"),
        (
            ["--base-url", "http://127.0.0.1:9/v1", "--tool-format", "hermes"],
            "--tool-format hermes: only for an in-process model",
        ),
    ],
)
def test_a_bad_model_setting_is_one_line_naming_the_flag(tmp_path: Path, args: list[str], said: str) -> None:
    code, out = _eval(tmp_path, *args)
    assert code == 2 and said in " ".join(out.split()) and "Traceback" not in out


def test_swap_weights_runs_under_the_policy_lock() -> None:
    policy = open_model(ModelSpec(model="tiny")).policy
    assert isinstance(policy, LocalPolicy)
    held: list[bool] = []

    def change(model: object) -> str:
        other = threading.Thread(target=lambda: held.append(policy._lock.acquire(blocking=False)))
        other.start()
        other.join()
        return type(model).__name__

    assert policy.swap_weights(change) == type(policy.model).__name__
    assert held == [False]  # another thread (a generation pass) could not take the lock meanwhile


async def test_every_policy_closes_the_same_way() -> None:
    policies = [
        open_model(ModelSpec(model="tiny")).policy,
        OpenAIPolicy("m", ["http://127.0.0.1:9/v1"]),
        ScriptedPolicy(lambda _: "x"),
        VersionedPolicy(OpenAIPolicy("m", ["http://127.0.0.1:9/v1"]), "m"),
    ]
    for policy in policies:
        await policy.aclose()  # type: ignore[attr-defined]


def _train_config(tmp_path: Path) -> Path:
    path = tmp_path / "train.toml"
    path.write_text('[model]\ntiny = "tiny"\n\n[[envs]]\nname = "arithmetic"\n')
    return path


def test_train_and_sft_open_their_model_with_the_flags(tmp_path: Path) -> None:
    from verigym._cli.train_cmd import load_train_config
    from verigym.train import load_model

    config = _train_config(tmp_path)
    cfg = load_train_config(config, None, None, None, None, dtype="bfloat16", tool_format="hermes")
    assert (cfg.model.dtype, cfg.model.tool_format) == ("bfloat16", "hermes")
    model, _ = load_model(cfg.model)  # the public opener of the benchmark scripts
    assert next(model.parameters()).dtype is torch.bfloat16
    for command, args, said in [
        ("train", ["--dtype", "int8"], "--dtype int8: expected one of auto, float32, bfloat16, float16"),
        ("sft", ["--tool-format", "nope"], "--tool-format: unknown tool format 'nope'"),
        ("train", ["--resume", str(tmp_path), "--dtype", "bfloat16"], "keeps the model settings"),
    ]:
        result = runner.invoke(app, [command, str(config), *args], env={"COLUMNS": "200"})
        assert result.exit_code == 2 and said in " ".join(result.output.split()), result.output


def test_sft_renders_in_the_configured_tool_format(monkeypatch: pytest.MonkeyPatch) -> None:
    import verigym.policies.local.chat as chat
    from verigym.policies.tiny import build_tokenizer
    from verigym.train.sft import messages_row
    from verigym.types import Message

    seen: list[object] = []
    encode = chat.encode_chat

    def recorded(*args: Any, **kwargs: Any) -> list[int]:
        seen.append(kwargs.get("tool_format"))
        return encode(*args, **kwargs)

    monkeypatch.setattr(chat, "encode_chat", recorded)
    tok = build_tokenizer()
    conversation = [Message(role="user", content="1+1"), Message(role="assistant", content="2")]
    messages_row(tok, conversation, tool_format="llama3")
    messages_row(tok, conversation)
    assert seen == ["llama3", "llama3", None, None]  # each turn's prefix and whole, as LocalPolicy renders


def test_benchmark_scripts_open_training_models_through_the_public_opener() -> None:
    import re

    scripts = Path(__file__).resolve().parents[2] / "benchmarks"
    private = re.compile(r"from verigym\.train\._model import [^\n]*\bload_model\b")
    offenders = sorted(p.name for p in scripts.glob("*.py") if private.search(p.read_text(encoding="utf-8")))
    assert offenders == [], "import load_model from verigym.train"


async def test_the_async_sampler_samples_in_the_trainers_tool_format() -> None:
    from verigym.scale.sampler import InProcessSampler

    weights = load_weights(ModelSpec(), seed=0)
    sampler = InProcessSampler(tool_format="llama3")
    await sampler.start(weights.model, weights.tokenizer, version=3)
    assert sampler.policy.tool_format == "llama3" and sampler.version == 3  # type: ignore[attr-defined]
    await sampler.aclose()
