"""Chat rendering and tool-call parsing shared by ``LocalPolicy`` and ``verigym serve``.

Prompts are rendered with the tokenizer's own chat template, after three repairs that real templates
need (SmolLM2's is plain ChatML and knows nothing of tools):

* **tools**: whether the template uses ``tools`` is found by rendering once with and once without a
  probe tool (once per tokenizer). When it does not, the schemas are written into the system prompt in
  a tool-call format of ``_toolformats`` (``default_format`` unless one is named) and one
  ``UserWarning`` per tokenizer says so: tools never vanish silently.
* **assistant tool calls**: when the template would drop them (probed the same way), the format's
  rendering of the calls is appended to the turn's content; when it quotes string arguments as JSON
  strings, arguments are handed over as objects.
* **messages**: ``content: None`` becomes ``""`` and text-part lists become text; a ``tool`` message
  stays a ``tool`` turn when the template shows it, else it becomes the format's result text in a user
  turn (consecutive results share one).

Tool calls are parsed by the chosen format (``parse_tool_calls`` is the Hermes one); a block that is not
valid JSON with a ``name`` stays in the text, so a grader can see the malformed call. The registry of
formats (``TOOL_FORMATS``, ``get_format``, ``default_format``) is exported with the rendering, so that
``chat`` is this module's public path.
"""

from __future__ import annotations

import json
import threading
import warnings
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

from verigym.policies.base import PolicyError
from verigym.policies.local._toolformats import (
    TOOL_FORMATS,
    Parsed,
    ToolFormat,
    call_parts,
    default_format,
    get_format,
    tool_response,
)
from verigym.types import Message, ToolCall

__all__ = [
    "TOOL_FORMATS",
    "Parsed",
    "TemplateTraits",
    "ToolFormat",
    "call_parts",
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

_PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "verigym_probe_tool",
        "description": "probe",
        "parameters": {"type": "object", "properties": {}},
    },
}
_PROBE_CALL, _PROBE_RESULT, _PROBE_SYSTEM = "verigymprobecall", "verigym-probe-result", "verigym-probe-system"


@dataclass(frozen=True)
class TemplateTraits:
    """What a chat template does with tools, found by rendering probes (see ``template_traits``)."""

    uses_tools: bool  # rendering changes when ``tools`` are given
    renders_calls: bool  # an assistant turn's tool-call names appear
    dict_arguments: bool  # calls render only (or only unquoted) with arguments as objects
    renders_tool_role: bool  # a ``tool`` message's content appears
    system_ok: bool  # a system message is accepted and shown


class _Seen:
    def __init__(self, template: str, traits: TemplateTraits) -> None:
        self.template, self.traits, self.warned = template, traits, False


_SEEN: weakref.WeakKeyDictionary[Any, _Seen] = weakref.WeakKeyDictionary()
_SEEN_BY_ID: dict[int, _Seen] = {}  # tokenizers that cannot be weakly referenced
_LOCK = threading.Lock()


def _render(tokenizer: Any, convo: list[dict[str, Any]], tools: Any = None, gen: bool = False) -> str | None:
    try:
        text = tokenizer.apply_chat_template(convo, tools=tools, add_generation_prompt=gen, tokenize=False)
    except Exception:  # a template that rejects the probe: the trait is absent
        return None
    return text if isinstance(text, str) else None


def _probe(tokenizer: Any) -> TemplateTraits:
    user = [{"role": "user", "content": "hi"}]
    plain, with_tool = _render(tokenizer, user, gen=True), _render(tokenizer, user, [_PROBE_TOOL], True)
    uses_tools = with_tool is not None and with_tool != plain

    def turn(args: Any) -> list[dict[str, Any]]:
        call = {"id": "abcdefghi", "type": "function", "function": {"name": _PROBE_CALL, "arguments": args}}
        return [*user, {"role": "assistant", "content": "", "tool_calls": [call]}]

    as_text = _render(tokenizer, turn('{"k": 1}'))
    dict_arguments = as_text is None or '{\\"k\\"' in as_text  # failed, or the JSON text was quoted
    calls = _render(tokenizer, turn({"k": 1})) if dict_arguments else as_text
    result = {"role": "tool", "tool_call_id": "abcdefghi", "name": _PROBE_CALL, "content": _PROBE_RESULT}
    tool_turn = _render(tokenizer, [*turn({"k": 1} if dict_arguments else '{"k": 1}'), result], gen=True)
    system = _render(tokenizer, [{"role": "system", "content": _PROBE_SYSTEM}, *user], gen=True)
    return TemplateTraits(
        uses_tools=uses_tools,
        renders_calls=calls is not None and _PROBE_CALL in calls,
        dict_arguments=dict_arguments and calls is not None,
        renders_tool_role=tool_turn is not None and _PROBE_RESULT in tool_turn,
        system_ok=system is not None and _PROBE_SYSTEM in system,
    )


def _seen(tokenizer: Any) -> _Seen:
    template = str(getattr(tokenizer, "chat_template", None))
    try:
        seen = _SEEN.get(tokenizer)
    except TypeError:
        seen = _SEEN_BY_ID.get(id(tokenizer))
    if seen is not None and seen.template == template:
        return seen
    seen = _Seen(template, _probe(tokenizer))
    with _LOCK:
        try:
            _SEEN[tokenizer] = seen
        except TypeError:
            _SEEN_BY_ID[id(tokenizer)] = seen
    return seen


def template_traits(tokenizer: Any) -> TemplateTraits:
    """What the tokenizer's chat template does with tools (probed once per tokenizer and template)."""
    return _seen(tokenizer).traits


def _text(content: Any) -> Any:
    """``None`` as ``""``, a list of text parts as their text; anything else as it is."""
    if content is None:
        return ""
    if isinstance(content, list) and all(isinstance(p, Mapping) and p.get("type") == "text" for p in content):
        return "".join(str(p.get("text", "")) for p in content)
    return content


def _as_objects(calls: Sequence[Any]) -> list[Any]:
    """Tool calls with JSON-object argument strings turned into objects (for templates that ``tojson``)."""
    out = []
    for call in calls:
        fn = call.get("function") if isinstance(call, Mapping) else None
        args = fn.get("arguments") if isinstance(fn, Mapping) else None
        if isinstance(fn, Mapping) and isinstance(args, str):
            try:
                value = json.loads(args or "{}")
            except json.JSONDecodeError:
                value = None
            if isinstance(value, dict):
                call = {**call, "function": {**fn, "arguments": value}}
        out.append(call)
    return out


def _prepare(
    convo: list[dict[str, Any]], fmt: ToolFormat, traits: TemplateTraits, tools_text: str | None
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    merged_at = -1  # index in ``out`` of the user turn that collects consecutive tool results
    for message in convo:
        m = {**message, "content": _text(message.get("content"))}
        if m.get("role") == "tool":
            own = fmt.render_result(str(m["content"]), m.get("tool_call_id"))
            if (traits.uses_tools or own is None) and traits.renders_tool_role:
                out.append(m)  # the template renders tool turns itself
                continue
            text = own or tool_response(str(m["content"]))
            if merged_at == len(out) - 1 and merged_at >= 0:
                out[merged_at] = {**out[merged_at], "content": f"{out[merged_at]['content']}\n{text}"}
            else:
                out.append({"role": "user", "content": text})
                merged_at = len(out) - 1
            continue
        calls = m.get("tool_calls")
        if m.get("role") == "assistant" and calls:
            if not traits.renders_calls:
                written = fmt.render_call(calls)
                m["content"] = f"{m['content']}\n{written}" if m["content"] else written
                del m["tool_calls"]
            elif traits.dict_arguments:
                m["tool_calls"] = _as_objects(calls)
        out.append(m)
    if tools_text is None:
        return out
    if out and out[0].get("role") == "system" and isinstance(out[0]["content"], str):
        head = out[0]["content"]
        out[0] = {**out[0], "content": f"{head}\n\n{tools_text}" if head else tools_text}
    elif traits.system_ok or not out:
        out.insert(0, {"role": "system", "content": tools_text})
    else:  # a template without a system role: the schemas open the first turn
        out[0] = {**out[0], "content": f"{tools_text}\n\n{out[0]['content']}"}
    return out


def render_chat(
    tokenizer: Any,
    messages: Sequence[Message | Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    *,
    tool_format: str | ToolFormat | None = None,
    add_generation_prompt: bool = True,
) -> str:
    """The prompt text of ``messages`` (see the module doc for what is repaired on the way)."""
    if getattr(tokenizer, "chat_template", None) is None:
        raise PolicyError("bad_request", "this tokenizer has no chat template; use a raw-text completion")
    fmt = get_format(tool_format or default_format(tokenizer))
    seen = _seen(tokenizer)
    traits = seen.traits
    inject = bool(tools) and not traits.uses_tools
    if inject and not seen.warned:
        with _LOCK:
            warn, seen.warned = not seen.warned, True
        if warn:
            name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
            warnings.warn(
                f"the chat template of {name!r} ignores `tools`; the tool schemas are written into the "
                f"system prompt in the {fmt.name!r} tool-call format (choose another with tool_format=)",
                UserWarning,
                stacklevel=2,
            )
    convo = [m.to_openai() if isinstance(m, Message) else dict(m) for m in messages]
    convo = _prepare(convo, fmt, traits, fmt.render_tools(list(tools or ())) if inject else None)
    try:
        text = tokenizer.apply_chat_template(
            convo,
            tools=[dict(t) for t in tools] if tools and not inject else None,
            add_generation_prompt=add_generation_prompt,
            tokenize=False,
        )
    except Exception as exc:  # jinja errors, templates that reject a role...
        raise PolicyError("bad_request", f"chat template failed: {exc}") from None
    return str(text)


class _RenderOptions(TypedDict, total=False):
    """``render_chat``'s keyword options (its defaults apply), which ``encode_chat`` passes on."""

    tool_format: str | ToolFormat | None
    add_generation_prompt: bool


def encode_chat(
    tokenizer: Any,
    messages: Sequence[Message | Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    **options: Unpack[_RenderOptions],
) -> list[int]:
    """Token ids of ``render_chat``'s prompt, ending with the assistant cue (with the default
    ``add_generation_prompt``)."""
    text = render_chat(tokenizer, messages, tools, **options)
    ids: list[int] = tokenizer(text, add_special_tokens=False)["input_ids"]
    return ids


def parse_tool_calls(text: str, salt: str = "") -> tuple[str, tuple[ToolCall, ...]]:
    """Split Hermes-format output into (content without the parsed tool-call blocks, the tool calls).

    Call ids are derived from the text and position, so the same output always gets the same ids.
    Other formats: ``TOOL_FORMATS[name].parse``.
    """
    content, calls, _ = get_format("hermes").parse(text, salt)
    return content, calls


def special_texts(tokenizer: Any) -> tuple[str, ...]:
    """The text of every special or added token (role markers, EOS, ``<tool_call>``...), longest first.

    A character-level model can spell ``<|user|>`` out of ordinary characters, and added tokens such as
    ``<tool_call>`` survive ``skip_special_tokens``; neither may reach a completion's text.
    """
    found = set(getattr(tokenizer, "all_special_tokens", ()) or ())
    decoder = getattr(tokenizer, "added_tokens_decoder", None) or {}
    found.update(str(getattr(t, "content", t)) for t in decoder.values())
    found.update(("<tool_call>", "</tool_call>"))
    return tuple(sorted((t for t in found if t and t.strip()), key=len, reverse=True))


def strip_markers(text: str, markers: Sequence[str]) -> str:
    """``text`` without any of ``markers`` (applied until none is left, so removing one cannot join
    the pieces of another)."""
    if "<" not in text and "[" not in text:
        return text
    while True:
        before = text
        for marker in markers:
            text = text.replace(marker, "")
        if text == before:
            return text


def visible_prefix(text: str, markers: Sequence[str]) -> str:
    """What of a growing ``text`` can be shown now: markers removed, and a tail that could still grow
    into a marker (``<|us`` of ``<|user|>``) held back."""
    text = strip_markers(text, markers)
    start = text.rfind("<", max(0, len(text) - max((len(m) for m in markers), default=1)))
    if start >= 0 and any(m.startswith(text[start:]) for m in markers):
        return text[:start]
    return text
