"""Chat rendering and tool-call formats, public: the exact rendering ``LocalPolicy`` samples with, for
the code beside it that must render the same way (``verigym serve``, SFT's token ids).

The code lives in ``_chat`` (templates, their probed traits, tool-call parsing, special-token markers)
and ``_toolformats`` (the registry of tool-call formats: Hermes, Llama-3, Mistral, SmolLM2); this
module is their public path. Other packages import these names from here, never from the private
modules (``tests/core/test_layering.py``). ``verigym.policies.chat`` is its old path (until 0.3).
"""

from verigym.policies.local._chat import (
    TemplateTraits,
    encode_chat,
    parse_tool_calls,
    render_chat,
    special_texts,
    strip_markers,
    template_traits,
    visible_prefix,
)
from verigym.policies.local._toolformats import TOOL_FORMATS, ToolFormat, default_format, get_format

__all__ = [
    "TOOL_FORMATS",
    "TemplateTraits",
    "ToolFormat",
    "default_format",
    "encode_chat",
    "get_format",
    "parse_tool_calls",
    "render_chat",
    "special_texts",
    "strip_markers",
    "template_traits",
    "visible_prefix",
]
