"""``ModelSpec``: one way to name a model, and ``make_policy``, the one factory that turns it into a ``Policy``.

Flags, config files, judges, simulated users, summarizers, penalty judges and the remote sampler all
spell a model with the same fields:

- ``base_url`` (one URL or several): an OpenAI-compatible server; ``model`` is then the name the
  server knows (empty: ask the server), and ``api_key_env``, ``concurrency`` (requests in flight per
  endpoint), ``timeout`` (seconds per request), ``max_retries`` and ``transport`` set up the client
  (``OpenAIPolicy``);
- no ``base_url``: an in-process model (``LocalPolicy``, see ``verigym.policies.default``): ``model``
  is a local directory, a catalogue name (``verigym models pull NAME``), a Hub name, or
  ``tiny``/``small``/``base`` for a fresh untrained model; no ``model`` at all is the newest
  ``verigym quickstart`` checkpoint, else an untrained tiny model.

An in-process model is also opened the same way everywhere (eval, suites, data, select, serve, the
judges and simulated users through ``open_model``; training through ``load_weights``): ``dtype``
(``auto``: bfloat16 on CUDA, float32 elsewhere, for sampling and training alike; or ``float32``,
``bfloat16``, ``float16``), ``device`` (``cpu``, ``cuda``, ``cuda:N``; none: CUDA when available),
``tool_format`` (the tool-call format prompts are rendered and replies parsed with; none: the
checkpoint's training record, else the tokenizer's default) and ``max_batch_rows`` (most sequences
decoded in one pass). A problem opening it is a ``ModelSpecError`` naming the field, which each caller
words for its own flag (``worded``).

Every caller reads the key the same way (``api_key_for``): ``api_key`` when the caller holds one
(never written to a file: it is left out of dumps), else the environment variable ``api_key_env``,
which must be set; else, when every endpoint is api.openai.com, ``OPENAI_API_KEY``, which must be
set; else no key. A missing variable is a ``MissingApiKey`` naming it, which each caller words for
its own flag or config key.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from verigym.policies.base import ModelSpecError

if TYPE_CHECKING:
    from verigym.policies.base import Policy
    from verigym.policies.openai import OpenAIPolicy

__all__ = [
    "DTYPE_CHOICES",
    "MissingApiKey",
    "ModelSpec",
    "ModelSpecError",
    "OpenedModel",
    "api_key_for",
    "check_tool_format",
    "load_weights",
    "make_policy",
    "open_model",
    "served_policy",
]

DTYPE_CHOICES = ("auto", "float32", "bfloat16", "float16")
"""The dtypes a model may be opened in (``auto``: bfloat16 on CUDA, float32 elsewhere)."""

Dtype = Literal["auto", "float32", "bfloat16", "float16"]

LOCAL_FIELDS = ("dtype", "device", "tool_format")
"""Fields that only an in-process model takes (a served model's server decides them)."""

OPENAI_KEY_ENV = "OPENAI_API_KEY"


class MissingApiKey(ValueError):
    """The environment variable that should hold the API key is not set.

    ``variable`` names it; ``implicit`` is True when the spec named none and the endpoints are
    api.openai.com (so ``OPENAI_API_KEY`` was looked for).
    """

    def __init__(self, variable: str, *, implicit: bool) -> None:
        self.variable = variable
        self.implicit = implicit
        if implicit:
            message = f"api.openai.com needs a key: set {variable} or api_key_env"
        else:
            message = f"the environment variable {variable} is not set"
        super().__init__(message)

    def worded(self, setting: str) -> str:
        """The message naming ``setting``, the flag or key that names the variable (``--api-key-env``)."""
        if self.implicit:
            return f"api.openai.com needs a key: set {self.variable} or {setting}"
        return f"{setting} {self.variable}: the environment variable {self.variable} is not set"


def check_tool_format(value: str | None) -> str | None:
    """``value`` when it names a tool-call format (or is None); else ``ValueError`` listing them."""
    if value is not None:
        from verigym.policies.local.chat import get_format

        get_format(value)  # UnknownToolFormat, a ValueError listing the registry's names
    return value


class ModelSpec(BaseModel):
    """A model: served at ``base_url`` or loaded in-process from ``model`` (module doc)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None = None
    base_url: list[str] = Field(default_factory=list)
    api_key_env: str | None = None
    api_key: str | None = Field(default=None, exclude=True, repr=False)  # held, never dumped
    concurrency: int = Field(default=64, ge=1)
    timeout: float = Field(default=120.0, gt=0.0)
    max_retries: int = Field(default=5, ge=0)
    transport: Literal["aiohttp", "sdk", "sdk-httpx"] = "aiohttp"
    dtype: Dtype = "auto"
    device: str | None = None
    tool_format: str | None = None
    max_batch_rows: int = Field(default=256, ge=1)

    @field_validator("base_url", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        if value is None:
            return []
        return [value] if isinstance(value, str) else value

    @field_validator("tool_format")
    @classmethod
    def _known_format(cls, value: str | None) -> str | None:
        return check_tool_format(value)

    @property
    def served(self) -> bool:
        """Whether the model is behind OpenAI-compatible endpoints (else it runs in-process)."""
        return bool(self.base_url)

    def describe(self) -> str:
        """One line naming a served model and where it is (``NAME at URL, URL``)."""
        return f"{self.model or '(server default)'} at {', '.join(self.base_url)}"


def api_key_for(spec: ModelSpec) -> str | None:
    """The API key ``spec`` asks for (module doc); raises ``MissingApiKey`` when its variable is unset."""
    if spec.api_key is not None:
        return spec.api_key
    if spec.api_key_env:
        key = os.environ.get(spec.api_key_env)
        if not key:
            raise MissingApiKey(spec.api_key_env, implicit=False)
        return key
    if spec.base_url and all("api.openai.com" in u for u in spec.base_url):
        key = os.environ.get(OPENAI_KEY_ENV)
        if not key:
            raise MissingApiKey(OPENAI_KEY_ENV, implicit=True)
        return key
    return None


def served_policy(spec: ModelSpec) -> OpenAIPolicy:
    """The ``OpenAIPolicy`` of a served spec (``ValueError`` without ``base_url``)."""
    from verigym.policies.openai import OpenAIPolicy

    if not spec.base_url:
        raise ValueError("a served model needs base_url")
    return OpenAIPolicy(
        spec.model or "",
        spec.base_url,
        api_key=api_key_for(spec),
        concurrency=spec.concurrency,
        timeout=spec.timeout,
        max_retries=spec.max_retries,
        transport=spec.transport,
    )


@dataclass(frozen=True)
class OpenedModel:
    """A spec made into a policy: the policy, one line saying what it is, and whether it is served."""

    policy: Policy
    description: str
    remote: bool


def open_model(spec: ModelSpec) -> OpenedModel:
    """``make_policy`` with a line describing the policy (for a served one: ``ModelSpec.describe``).

    Raises ``MissingApiKey``; ``ModelSpecError`` (one line naming the field: no such directory, a
    catalogue model not pulled yet, a model transformers cannot load, a dtype or device that does not
    apply, ``dtype`` given for a served model) and ``ImportError`` when the local stack (torch,
    transformers) is not installed.
    """
    if spec.served:
        given = [f for f in LOCAL_FIELDS if getattr(spec, f) not in (None, "auto")]
        if given:
            raise ModelSpecError(
                given[0], getattr(spec, given[0]), "only for an in-process model, not a served one"
            )
        return OpenedModel(served_policy(spec), spec.describe(), True)
    from verigym.policies.default import open_local

    local, message = open_local(spec)
    return OpenedModel(local, message, False)


def load_weights(spec: ModelSpec, *, seed: int = 0, tiny: str | None = "tiny") -> Any:
    """The weights of the in-process model ``spec`` names, for training (``verigym.train.load_model``):
    a ``policies.local.loading.Pretrained`` with the model on its device in the rule's dtype.
    ``spec.model`` None is a fresh model of size ``tiny`` built with ``seed``. Raises
    ``ModelSpecError`` (one line naming the field)."""
    from verigym.policies.default import load_weights as load

    return load(spec, seed=seed, tiny=tiny)


def make_policy(spec: ModelSpec) -> Policy:
    """The ``Policy`` a spec names: an ``OpenAIPolicy`` at its URLs or an in-process ``LocalPolicy``."""
    return open_model(spec).policy
