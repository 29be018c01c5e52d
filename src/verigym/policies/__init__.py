"""verigym.policies: the ``Policy`` protocol, its implementations, and one way to name a model.

- ``ModelSpec`` / ``make_policy`` (``spec``): a model named the same way everywhere (a local path, a
  catalogue name, a Hub name, or served URLs with their key, concurrency, timeout and transport; an
  in-process model's dtype, device, tool-call format and batching limit), turned into a policy by one
  factory (``open_model``; ``load_weights`` for training's bare weights). ``ModelSpecError`` is a
  model that does not open, naming the field.
- ``OpenAIPolicy`` (``openai``): any OpenAI-compatible server; ``LocalPolicy`` (``local``, the
  in-house inference engine package that ``verigym serve`` shares): a transformers model in-process;
  ``ScriptedPolicy`` (``scripted``): replies from a function.

``Policy``, ``PolicyArgs`` (its keyword arguments, for wrappers) and ``BatchedPolicy`` (the base of a
policy with a native ``complete_n``) are in ``base``. ``OpenAIPolicy``, ``LocalPolicy`` and
``ScriptedPolicy`` are imported when first asked for (the HTTP client and torch load only then).
"""

from typing import TYPE_CHECKING

from verigym.policies.base import BatchedPolicy, ModelSpecError, Policy, PolicyArgs, PolicyError, sample
from verigym.policies.spec import (
    MissingApiKey,
    ModelSpec,
    OpenedModel,
    api_key_for,
    load_weights,
    make_policy,
    open_model,
    served_policy,
)

if TYPE_CHECKING:
    from verigym.policies.local import LocalPolicy
    from verigym.policies.openai import OpenAIPolicy
    from verigym.policies.scripted import ScriptedPolicy

_LAZY = {
    "LocalPolicy": "verigym.policies.local",
    "OpenAIPolicy": "verigym.policies.openai",
    "ScriptedPolicy": "verigym.policies.scripted",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'verigym.policies' has no attribute {name!r}")


__all__ = [
    "BatchedPolicy",
    "LocalPolicy",
    "MissingApiKey",
    "ModelSpec",
    "ModelSpecError",
    "OpenAIPolicy",
    "OpenedModel",
    "Policy",
    "PolicyArgs",
    "PolicyError",
    "ScriptedPolicy",
    "api_key_for",
    "load_weights",
    "make_policy",
    "open_model",
    "sample",
    "served_policy",
]
