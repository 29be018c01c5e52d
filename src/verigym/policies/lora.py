"""Deprecated path, kept until verigym 0.3: LoRA adapter helpers moved with the in-process engine to
``verigym.policies.local.lora``. Import them from there."""

import warnings

from verigym.policies.local.lora import *  # noqa: F403
from verigym.policies.local.lora import __all__ as __all__

warnings.warn(
    "verigym.policies.lora is deprecated and goes in verigym 0.3: import from verigym.policies.local.lora",
    DeprecationWarning,
    stacklevel=2,
)
