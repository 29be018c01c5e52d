"""The resolved configuration of an eval run, its TOML file, and the ``config.json`` written beside results.

Precedence, lowest first: defaults, the saved ``config.json`` of a resumed run, ``--config FILE.toml``,
command-line flags. Keys of the TOML file are the long flag names with underscores
(``num_tasks``, ``samples_per_task``, ``base_url``, ``env_args`` as a table, ...).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from verigym._files import FileProblem, read_toml, write_json
from verigym._numbers import first_bad_number
from verigym.graders.penalties import RubricSpec
from verigym.policies.spec import ModelSpec, check_tool_format
from verigym.record import git_revision, package_versions
from verigym.tools.mcp_config import ToolsSpec
from verigym.types import Sampling

__all__ = [
    "IDENTITY_FIELDS",
    "ConfigError",
    "EvalConfig",
    "git_revision",
    "load_saved",
    "load_toml",
    "package_versions",
    "write_config_json",
]

# Fields that must match when a run is resumed: changing them would mix different experiments.
IDENTITY_FIELDS = (
    "env", "env_args", "model", "policy", "temperature", "top_p", "max_tokens", "seed", "split", "dtype",
    "tool_format",
)  # fmt: skip


class ConfigError(ValueError):
    """A configuration problem, already phrased as one line for the user."""


class EvalConfig(BaseModel):
    """Everything that decides what an eval run does."""

    model_config = ConfigDict(extra="forbid")

    env: str
    env_args: dict[str, Any] = Field(default_factory=dict)
    # where each of env_args came from: "user", "checkpoint" (its training record), "real_model"
    # (the environment's real_model_args); unlisted: "user" (``eval.trained``)
    env_args_from: dict[str, str] = Field(default_factory=dict)
    model: str | None = None
    policy: str | None = None  # "oracle" / "null": the environment's own policy instead of a model
    base_url: list[str] = Field(default_factory=list)
    api_key_env: str | None = None
    # an in-process model's dtype, device, tool-call format and batching limit (``ModelSpec``): None
    # is the rule's (auto dtype, CUDA when available, the checkpoint's format, 256 rows a pass)
    dtype: Literal["auto", "float32", "bfloat16", "float16"] | None = None
    device: str | None = None
    tool_format: str | None = None
    max_batch_rows: int | None = Field(None, ge=1)
    num_tasks: int = Field(50, ge=1)
    samples_per_task: int = Field(1, ge=1)
    concurrency: int = Field(32, ge=1)
    temperature: float = Field(1.0, ge=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens: int = Field(512, ge=1)
    seed: int = 0
    split: str = "test"
    out: str | None = None
    timeout: float = Field(120.0, gt=0.0)
    max_retries: int = Field(5, ge=0)
    success_threshold: float = 1.0
    rubric: RubricSpec = Field(default_factory=RubricSpec)  # [[rubric.penalties]]
    tools: ToolsSpec = Field(default_factory=ToolsSpec)  # [[tools.mcp]]
    # the user's own agent program as the harness (``verigym.agents``): FILE.py:FUNC or a command
    agent: str | None = None
    agent_cmd: str | None = None
    agent_timeout_s: float = Field(300.0, gt=0.0)
    on_error: Literal["error", "truncate"] = "error"
    # when errored samples make ``verigym eval`` exit 1 (inspect_ai's ``fail_on_error``): True at
    # any, False never (unless every sample errored), a fraction (< 1) of the samples or a count (>= 1)
    fail_on_error: bool | float = True

    @field_validator("fail_on_error", mode="before")
    @classmethod
    def _threshold(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return value  # a bool as it is; anything else is pydantic's to refuse
        if not value >= 0:
            raise ValueError(f"{value!r} is no threshold (a fraction below 1 or a count of at least 1)")
        return True if value == 0 else float(value)  # 0: any error, as inspect_ai reads it

    @field_validator("policy")
    @classmethod
    def _env_policy(cls, value: str | None) -> str | None:
        if value is not None and value not in ("oracle", "null"):
            raise ValueError(f"{value!r} is not a policy (expected oracle or null)")
        return value

    @field_validator("base_url", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("base_url")
    @classmethod
    def _urls(cls, value: list[str]) -> list[str]:
        for url in value:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"{url!r} is not a URL (expected http(s)://host[:port]/v1)")
        return value

    @model_validator(mode="after")
    def _finite(self) -> EvalConfig:
        """Every number finite and within float32 range (``--temperature inf`` is no setting)."""
        bad = first_bad_number(self)
        if bad is not None:
            raise ValueError(bad)
        return self

    @field_validator("tool_format")
    @classmethod
    def _tool_format(cls, value: str | None) -> str | None:
        return check_tool_format(value)

    def model_spec(self) -> ModelSpec:
        """The model these options name (``model``, ``base_url``, ``api_key_env``, ``concurrency``,
        ``timeout``, ``max_retries``, ``dtype``, ``device``, ``tool_format``, ``max_batch_rows``), for
        ``verigym.policies.make_policy``."""
        return ModelSpec(
            model=self.model,
            base_url=self.base_url,
            api_key_env=self.api_key_env,
            concurrency=self.concurrency,
            timeout=self.timeout,
            max_retries=self.max_retries,
            dtype=self.dtype or "auto",
            device=self.device,
            tool_format=self.tool_format,
            max_batch_rows=self.max_batch_rows or ModelSpec.model_fields["max_batch_rows"].default,
        )

    def sampling(self) -> Sampling:
        return Sampling(
            temperature=self.temperature, top_p=self.top_p, max_tokens=self.max_tokens, seed=self.seed
        )


def _explain(exc: ValidationError, where: str) -> str:
    first = exc.errors()[0]
    field = ".".join(str(p) for p in first.get("loc", ()))
    if not field:  # a check of the whole config; its message names the key
        return f"{where}: {str(first['msg']).removeprefix('Value error, ')}"
    if first.get("type") == "extra_forbidden":
        known = ", ".join(sorted(EvalConfig.model_fields))
        return f"{where}: unknown key {field!r} (known keys: {known})"
    msg = str(first["msg"]).removeprefix("Value error, ")
    if where == "eval":  # the values came from flags: name the flag
        return f"{where}: --{field.replace('_', '-')}: {msg}"
    return f"{where}: {field}: {msg}"


def build(values: dict[str, Any], where: str) -> EvalConfig:
    """Validate ``values`` into an ``EvalConfig``; errors become one ``ConfigError`` line."""
    try:
        return EvalConfig.model_validate(values)
    except ValidationError as exc:
        raise ConfigError(_explain(exc, where)) from None


def load_toml(path: str | Path) -> dict[str, Any]:
    """The keys of a TOML config file (not yet validated: flags may complete it)."""
    path = Path(path)
    try:
        data = read_toml(path, f"--config {path}")
    except FileProblem as exc:
        raise ConfigError(str(exc)) from None
    data = {k.replace("-", "_"): v for k, v in data.items()}
    if "base_urls" in data and "base_url" not in data:
        data["base_url"] = data.pop("base_urls")
    unknown = sorted(set(data) - set(EvalConfig.model_fields))
    if unknown:
        known = ", ".join(sorted(EvalConfig.model_fields))
        raise ConfigError(f"--config {path}: unknown key {unknown[0]!r} (known keys: {known})")
    return data


def load_saved(out: Path) -> dict[str, Any]:
    """The resolved config of an earlier run in ``out`` (for ``--resume``)."""
    path = out / "config.json"
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        config = saved["config"]
        if not isinstance(config, dict):
            raise TypeError("config is not an object")
        return config
    except FileNotFoundError:
        raise ConfigError(f"--resume: {path} does not exist (nothing to resume in {out})") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"--resume: {path} is not a verigym config.json ({exc})") from None


def write_config_json(
    out: Path, config: EvalConfig, *, policy: str, extra: dict[str, Any] | None = None
) -> Path:
    """Write ``out/config.json``: the resolved config, the policy used, versions, git revision."""
    data = {
        "config": config.model_dump(mode="json"),
        "policy": policy,
        "versions": package_versions(),
        "git_revision": git_revision(),
        "command": sys.argv,
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **(extra or {}),
    }
    path = out / "config.json"
    write_json(path, data, default=str)
    return path
