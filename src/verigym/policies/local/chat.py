"""Chat rendering and tool-call formats, public: the exact rendering ``LocalPolicy`` samples with, for
the code beside it that must render the same way (``verigym serve``, SFT's token ids).

The code lives in ``_chat`` (templates, their probed traits, tool-call parsing, special-token markers)
and ``_toolformats`` (the registry of tool-call formats: Hermes, Llama-3, Mistral, SmolLM2, which
``_chat`` exports with the rendering); this module is their public path and gives every name of
``_chat``. Other packages import these names from here, never from the private modules
(``tests/core/test_layering.py``). ``verigym.policies.chat`` is its old path (until 0.3).
"""

from verigym.policies.local._chat import *  # noqa: F403
from verigym.policies.local._chat import __all__ as __all__
