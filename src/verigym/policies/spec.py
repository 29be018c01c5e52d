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

if TYPE_CHECKING:
    from verigym.policies.base import Policy
    from verigym.policies.openai import OpenAIPolicy

__all__ = [
    "MissingApiKey",
    "ModelSpec",
    "OpenedModel",
    "api_key_for",
    "make_policy",
    "open_model",
    "served_policy",
]

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

    @field_validator("base_url", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        if value is None:
            return []
        return [value] if isinstance(value, str) else value

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

    Raises ``MissingApiKey``; for an in-process model ``ValueError``/``OSError`` (one line: no such
    directory, a catalogue model not pulled yet, a model transformers cannot load) and
    ``ImportError`` when the local stack (torch, transformers) is not installed.
    """
    if spec.served:
        return OpenedModel(served_policy(spec), spec.describe(), True)
    from verigym.policies.default import default_policy

    local, message = default_policy(spec.model)
    return OpenedModel(local, message, False)


def make_policy(spec: ModelSpec) -> Policy:
    """The ``Policy`` a spec names: an ``OpenAIPolicy`` at its URLs or an in-process ``LocalPolicy``."""
    return open_model(spec).policy
