"""Deprecated path, kept until verigym 0.3: LoRA adapter helpers moved with the in-process engine to
``verigym.policies.local.lora``. Import them from there."""

import warnings

from verigym.policies.local.lora import AS_IS, AdapterMixin, base_model

warnings.warn(
    "verigym.policies.lora is deprecated and goes in verigym 0.3: import from verigym.policies.local.lora",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["AS_IS", "AdapterMixin", "base_model"]
