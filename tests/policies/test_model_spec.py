"""``ModelSpec`` and ``make_policy``: one spelling of a model, one factory, one way to read the key —
and every place that builds an endpoint (eval, select, judges, simulated users, summarizers,
penalty judges, the remote sampler) goes through it."""

from __future__ import annotations

from pathlib import Path

import pytest

from verigym.envs.registry import EnvArgError, load_env
from verigym.eval.config import EvalConfig
from verigym.graders.penalties import PenaltySpec, build_penalty
from verigym.policies import LocalPolicy, OpenAIPolicy
from verigym.policies.spec import MissingApiKey, ModelSpec, api_key_for, make_policy, open_model

URL = "http://127.0.0.1:9/v1"


def test_a_served_spec_is_an_openai_policy_with_its_client_settings() -> None:
    spec = ModelSpec(
        model="m", base_url=URL, concurrency=3, timeout=7.0, max_retries=1, transport="sdk-httpx"
    )
    policy = make_policy(spec)
    assert isinstance(policy, OpenAIPolicy)
    assert (policy.model, policy.base_urls, policy.concurrency) == ("m", [URL], 3)
    assert (policy.timeout, policy.max_retries, policy.transport, policy.api_key) == (
        7.0,
        1,
        "sdk-httpx",
        "EMPTY",
    )
    opened = open_model(ModelSpec(base_url=[URL, "http://127.0.0.1:10/v1"]))
    assert opened.remote and opened.description == f"(server default) at {URL}, http://127.0.0.1:10/v1"


def test_the_key_is_read_one_way(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("VG_SPEC_KEY", "k1")
    assert api_key_for(ModelSpec(base_url=URL)) is None
    assert api_key_for(ModelSpec(base_url=URL, api_key_env="VG_SPEC_KEY")) == "k1"
    assert api_key_for(ModelSpec(base_url=URL, api_key="lit", api_key_env="VG_SPEC_KEY")) == "lit"
    with pytest.raises(MissingApiKey) as unset:
        api_key_for(ModelSpec(base_url=URL, api_key_env="VG_SPEC_UNSET"))
    assert not unset.value.implicit and unset.value.variable == "VG_SPEC_UNSET"
    assert unset.value.worded("--api-key-env") == (
        "--api-key-env VG_SPEC_UNSET: the environment variable VG_SPEC_UNSET is not set"
    )
    openai = ModelSpec(model="gpt", base_url="https://api.openai.com/v1")
    with pytest.raises(MissingApiKey) as implicit:
        make_policy(openai)
    assert implicit.value.implicit and "OPENAI_API_KEY" in str(implicit.value)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert make_policy(openai).api_key == "sk-test"  # type: ignore[attr-defined]


def test_a_literal_key_never_reaches_a_dump_or_repr() -> None:
    spec = ModelSpec(base_url=URL, api_key="secret-key")
    assert "secret-key" not in repr(spec) and "secret-key" not in spec.model_dump_json()
    assert "api_key" not in spec.model_dump()


def test_an_in_process_spec_is_a_local_policy(tmp_path: Path) -> None:
    opened = open_model(ModelSpec(model="tiny"))
    assert isinstance(opened.policy, LocalPolicy) and not opened.remote
    assert "fresh untrained tiny" in opened.description
    with pytest.raises(ValueError, match="no such directory"):
        make_policy(ModelSpec(model=str(tmp_path / "none" / "here")))


def test_eval_options_spell_the_same_spec() -> None:
    config = EvalConfig(
        env="arithmetic", model="m", base_url=URL, api_key_env="K", concurrency=5, timeout=9.0
    )
    assert config.model_spec() == ModelSpec(
        model="m", base_url=[URL], api_key_env="K", concurrency=5, timeout=9.0, max_retries=5
    )


def test_judges_users_and_summarizers_read_the_key_through_the_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("VG_SPEC_KEY", "k2")
    env = load_env("rubric_writing", judge_base_url=URL, judge_model="j", judge_api_key_env="VG_SPEC_KEY")
    assert env.judge.api_key == "k2"  # type: ignore[attr-defined]
    with pytest.raises(EnvArgError, match="judge_api_key_env: the variable VG_SPEC_UNSET is not set"):
        load_env("rubric_writing", judge_base_url=URL, judge_api_key_env="VG_SPEC_UNSET")
    with pytest.raises(EnvArgError, match="set OPENAI_API_KEY or judge_api_key_env"):
        load_env("rubric_writing", judge_base_url="https://api.openai.com/v1")
    user = load_env(
        "tools_user", user="policy", user_model="u", user_base_url=URL, user_api_key_env="VG_SPEC_KEY"
    )
    assert user.user.policy.api_key == "k2"  # type: ignore[attr-defined]
    with pytest.raises(EnvArgError, match="user_api_key_env needs user='policy'"):
        load_env("tools_user", user_api_key_env="VG_SPEC_KEY")
    resum = load_env(
        "verigym.envs.summarize:resum",
        env="search",
        summarizer_base_url=URL,
        summarizer_api_key_env="VG_SPEC_KEY",
    )
    assert resum.summarizer.api_key == "k2"  # type: ignore[attr-defined]
    with pytest.raises(EnvArgError, match="summarizer_api_key_env VG_SPEC_UNSET"):
        load_env(
            "verigym.envs.summarize:resum",
            env="search",
            summarizer_base_url=URL,
            summarizer_api_key_env="VG_SPEC_UNSET",
        )


def test_penalty_judges_and_the_remote_sampler_go_through_the_spec(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("VG_SPEC_KEY", "k3")
    penalty = build_penalty(
        PenaltySpec(detector="cheat_judge", base_url=URL, model="j", api_key_env="VG_SPEC_KEY", timeout=4.0)
    )
    assert penalty.grader.name == "cheat_judge"
    with pytest.raises(
        ValueError, match=r"rubric\.penalties cheat_judge: the environment variable VG_SPEC_UNSET"
    ):
        build_penalty(PenaltySpec(detector="cheat_judge", base_url=URL, api_key_env="VG_SPEC_UNSET"))
    from verigym.scale.remote import RemoteSampler

    sampler = RemoteSampler([URL], push_dir=tmp_path, api_key="k4", concurrency=2, timeout=30.0)
    inner = sampler.policy.inner
    assert (inner.model, inner.api_key, inner.concurrency, inner.timeout) == (
        "verigym-policy-v0",
        "k4",
        2,
        30.0,
    )
