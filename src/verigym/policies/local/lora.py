"""LoRA adapters on an in-process model, public: ``base_model`` (the model under its PEFT wrapper) for
``verigym serve``'s weight endpoints. The code lives in ``_lora`` (``AdapterMixin``, ``LocalPolicy``'s
adapter loading); this module gives all of its names, and other packages import from here
(``tests/core/test_layering.py``). ``verigym.policies.lora`` is its old path (until 0.3)."""

from verigym.policies.local._lora import *  # noqa: F403
from verigym.policies.local._lora import __all__ as __all__
