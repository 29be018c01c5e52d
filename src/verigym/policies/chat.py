"""Deprecated path, kept until verigym 0.3: chat rendering and tool-call formats moved with the
in-process engine to ``verigym.policies.local.chat``. Import them from there."""

import warnings

from verigym.policies.local.chat import (
    TOOL_FORMATS,
    TemplateTraits,
    ToolFormat,
    default_format,
    encode_chat,
    get_format,
    parse_tool_calls,
    render_chat,
    special_texts,
    strip_markers,
    template_traits,
    visible_prefix,
)

warnings.warn(
    "verigym.policies.chat is deprecated and goes in verigym 0.3: import from verigym.policies.local.chat",
    DeprecationWarning,
    stacklevel=2,
)

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
