"""Tool-call formats: how tool schemas, an assistant's calls and tool results are written as text, and
how a model's calls are parsed back out of its reply.

One registry, ``TOOL_FORMATS`` (a ``verigym.registry.Registry``: a plugin adds a format), serves ``encode_chat`` (rendering, for chat templates that ignore
``tools`` or drop tool calls), ``LocalPolicy`` and ``verigym serve`` (parsing). Each format follows a
public definition:

``hermes``
    Hermes 2 Pro function calling (NousResearch/Hermes-Function-Calling, README "Prompt Format for
    Function Calling"), as Qwen2.5's chat template writes it: the schemas one JSON object a line inside
    ``<tools></tools>`` in the system prompt; each call ``<tool_call>{"name": ..., "arguments":
    {...}}</tool_call>``; results ``<tool_response>...</tool_response>`` in a user turn.
``llama3``
    Llama 3.1 JSON-based tool calling (llama.com, "Llama 3.1 model card and prompt formats"): the
    schemas as JSON in the prompt and the whole reply ``{"name": ..., "parameters": {...}}``, possibly
    after ``<|python_tag|>``. Several calls (not defined there) are written one object a line.
``mistral``
    The Mistral v3 instruct format (mistral-common ``InstructTokenizerV3``; the Mistral-7B-Instruct-v0.3
    model card): ``[AVAILABLE_TOOLS] [...][/AVAILABLE_TOOLS]``, ``[TOOL_CALLS] [{"name": ...,
    "arguments": {...}}]`` and ``[TOOL_RESULTS] {"content": ...}[/TOOL_RESULTS]``.
``smollm2``
    What SmolLM2-Instruct was trained with, from its model repository's
    ``instructions_function_calling.md``
    (https://huggingface.co/HuggingFaceTB/SmolLM2-1.7B-Instruct/blob/main/instructions_function_calling.md):
    the system prompt lists the schemas as a JSON list inside ``<tools>...</tools>`` and the model
    answers ``<tool_call>[{"name": ..., "arguments": {...}}, ...]</tool_call>`` (a JSON *list*; ``[]``
    when no call is needed). Results come back as ``<tool_response>...</tool_response>`` in a user
    turn, as Ollama's ``smollm2`` template writes them (https://ollama.com/library/smollm2).

``parse`` never raises: a block that does not hold valid calls stays in the content and is counted as
malformed. Markers that a tokenizer drops as special tokens (``[TOOL_CALLS]``, ``<|python_tag|>``) are
optional when parsing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from verigym.registry import Registry, UnknownNameError
from verigym.types import ToolCall

__all__ = [
    "TOOL_FORMATS",
    "CallLike",
    "Parsed",
    "ToolFormat",
    "UnknownToolFormat",
    "call_parts",
    "default_format",
    "get_format",
    "tool_response",
]

CallLike = ToolCall | Mapping[str, Any]  # a ToolCall, an OpenAI tool call or a flat {"name", "arguments"}

_DECODER = json.JSONDecoder()


class Parsed(NamedTuple):
    """A reply split into its text (without the parsed call blocks), its calls, and how many call blocks
    were malformed (left in ``content``)."""

    content: str
    calls: tuple[ToolCall, ...]
    malformed: int


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def call_parts(call: CallLike) -> tuple[str, Any]:
    """(name, arguments) of a call; arguments as a JSON value when the text parses, else the raw text."""
    if isinstance(call, ToolCall):
        name, args = call.name, call.arguments
    else:
        fn = call.get("function")
        body: Mapping[str, Any] = fn if isinstance(fn, Mapping) else call
        name = str(body.get("name", ""))
        args = body.get("arguments", body.get("parameters", {}))
    if isinstance(args, str):
        args = _loads(args or "{}", default=args)
    return name, args


def _object(name: str, args: Any, key: str = "arguments") -> str:
    """``{"name": ..., "<key>": ...}``; arguments that are not valid JSON are written as they are."""
    rendered = args if isinstance(args, str) else _dump(args)
    return f'{{"name": {_dump(name)}, "{key}": {rendered}}}'


def tool_response(content: str) -> str:
    """The Hermes convention for a tool result in a user turn (also the fallback of every format)."""
    return f"<tool_response>\n{content}\n</tool_response>"


def _calls_of(value: Any) -> list[tuple[str, Any]] | None:
    """The (name, arguments) of a call object or a list of them; None when ``value`` is neither."""
    items = value if isinstance(value, list) else [value]
    out: list[tuple[str, Any]] = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            return None
        out.append((item["name"], item.get("arguments", item.get("parameters", {}))))
    return out


def _loads(body: str, default: Any = None) -> Any:
    try:
        return json.loads(body)
    except json.JSONDecodeError:
        return default


def _with_ids(found: Sequence[tuple[str, Any]], salt: str) -> tuple[ToolCall, ...]:
    """ToolCalls with ids derived from the text and position: the same output always gets the same ids."""
    calls = []
    for index, (name, args) in enumerate(found):
        digest = hashlib.sha1(f"{salt}\x00{index}".encode()).hexdigest()[:20]
        arguments = args if isinstance(args, str) else _dump(args)
        calls.append(ToolCall(id=f"call_{digest}", name=name, arguments=arguments))
    return tuple(calls)


def _json_values(text: str) -> list[tuple[str, Any]] | None:
    """The calls of one or more JSON call objects (or lists of them) separated by whitespace, ``;`` or
    ``,``; None when anything else is there."""
    found: list[tuple[str, Any]] = []
    pos = 0
    while True:
        while pos < len(text) and (text[pos].isspace() or text[pos] in ";,"):
            pos += 1
        if pos >= len(text):
            return found or None
        try:
            value, pos = _DECODER.raw_decode(text, pos)
        except json.JSONDecodeError:
            return None
        calls = _calls_of(value)
        if calls is None:
            return None
        found += calls


class ToolFormat:
    """One tool-call format (see the module doc). Subclasses define the rendering and the parser."""

    name = ""
    source = ""  # the public definition followed

    def render_tools(self, tools: Sequence[Mapping[str, Any]]) -> str:
        """The system-prompt text that shows the model ``tools`` (OpenAI-style schemas)."""
        raise NotImplementedError

    def render_call(self, calls: Sequence[CallLike]) -> str:
        """An assistant turn's tool calls written as the model writes them."""
        raise NotImplementedError

    def render_result(self, content: str, call_id: str | None = None) -> str | None:
        """A tool result as the text of a user turn, when the format defines its own; None: the chat
        template's ``tool`` role, or ``tool_response`` in a user turn when the template drops it."""
        return None

    def parse(self, text: str, salt: str = "") -> Parsed:
        """Split a reply into content, calls and the number of malformed call blocks; never raises."""
        raise NotImplementedError

    def holdback(self, text: str) -> str:
        """What of a growing reply may be streamed as content now (a call that may be opening is held)."""
        cut = text.find("<")
        return text if cut < 0 else text[:cut]


class _Tagged(ToolFormat):
    """Calls inside ``<tool_call>...</tool_call>``; a block holds one call object or a list of them.

    A block is read as one JSON value from just after ``<tool_call>`` (``raw_decode``), then its closing
    tag (or the end of the reply): a string argument that itself contains ``</tool_call>`` or
    ``<tool_call>`` does not split the block."""

    open_tag, close_tag = "<tool_call>", "</tool_call>"

    def parse(self, text: str, salt: str = "") -> Parsed:
        if self.open_tag not in text:
            return Parsed(text, (), 0)
        found: list[tuple[str, Any]] = []
        kept: list[str] = []
        last = bad = pos = 0
        while (start := text.find(self.open_tag, pos)) >= 0:
            pos = start + len(self.open_tag)
            block = self._block(text, pos)
            calls = None if block is None else _calls_of(block[0])
            if block is None or calls is None:
                bad += 1
                continue
            kept.append(text[last:start])
            last = pos = block[1]
            found += calls
        if last == 0:  # no block held calls: the text stays as the model wrote it
            return Parsed(text, (), bad)
        kept.append(text[last:])
        return Parsed("".join(kept).strip(), _with_ids(found, salt + text), bad)

    def _block(self, text: str, at: int) -> tuple[Any, int] | None:
        """(the JSON value of the block whose body starts at ``at``, the index after its closing tag)."""
        at = len(text) - len(text[at:].lstrip())
        try:
            value, end = _DECODER.raw_decode(text, at)
        except json.JSONDecodeError:
            return None
        end = len(text) - len(text[end:].lstrip())
        if text.startswith(self.close_tag, end):
            return value, end + len(self.close_tag)
        return (value, end) if end == len(text) else None  # a block left open at the end of the reply


class Hermes(_Tagged):
    name = "hermes"
    source = "https://github.com/NousResearch/Hermes-Function-Calling (Qwen2.5 chat template)"

    def render_tools(self, tools: Sequence[Mapping[str, Any]]) -> str:
        listed = "\n".join(_dump(dict(t)) for t in tools)
        return (
            "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
            f"The function signatures are inside <tools></tools> XML tags:\n<tools>\n{listed}\n</tools>\n\n"
            "To call a function, write a JSON object with the function name and arguments inside "
            '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, '
            '"arguments": <args-json-object>}\n</tool_call>'
        )

    def render_call(self, calls: Sequence[CallLike]) -> str:
        return "\n".join(f"<tool_call>\n{_object(*call_parts(c))}\n</tool_call>" for c in calls)


class SmolLM2(_Tagged):
    name = "smollm2"
    source = "https://huggingface.co/HuggingFaceTB/SmolLM2-1.7B-Instruct/blob/main/instructions_function_calling.md"

    def render_tools(self, tools: Sequence[Mapping[str, Any]]) -> str:
        return (
            "You are an expert in composing functions. You are given a question and a set of possible "
            "functions. Based on the question, you will need to make one or more function/tool calls to "
            "achieve the purpose.\n\n"
            f"You have access to the following tools:\n<tools>{_dump([dict(t) for t in tools])}</tools>\n\n"
            "Answer with the calls in this format; if no function call is needed, write an empty "
            'list \'[]\'.\n<tool_call>[\n{"name": "func_name1", "arguments": {"argument1": "value1"}},\n'
            "... (more tool calls as required)\n]</tool_call>"
        )

    def render_call(self, calls: Sequence[CallLike]) -> str:
        return "<tool_call>[" + ", ".join(_object(*call_parts(c)) for c in calls) + "]</tool_call>"

    def render_result(self, content: str, call_id: str | None = None) -> str | None:
        return tool_response(content)


class Llama3(ToolFormat):
    name = "llama3"
    source = "https://www.llama.com/docs/model-cards-and-prompt-formats/llama3_1/ (JSON based tool calling)"
    tag = "<|python_tag|>"

    def render_tools(self, tools: Sequence[Mapping[str, Any]]) -> str:
        listed = "\n\n".join(json.dumps(dict(t), ensure_ascii=False, indent=4) for t in tools)
        return (
            "You have access to the following functions. To call a function, respond with only a JSON "
            'object in the format {"name": function name, "parameters": dictionary of argument name '
            f"and its value}}. Do not use variables.\n\n{listed}"
        )

    def render_call(self, calls: Sequence[CallLike]) -> str:
        return "\n".join(_object(*call_parts(c), key="parameters") for c in calls)

    def parse(self, text: str, salt: str = "") -> Parsed:
        at = text.find(self.tag)
        head, body = (text[:at], text[at + len(self.tag) :]) if at >= 0 else ("", text)
        body = body.strip()
        if at < 0 and not (body[:1] in ("{", "[") and '"name"' in body):
            return Parsed(text, (), 0)  # an ordinary answer
        found = _json_values(body)
        if found is None:
            return Parsed(text, (), 1)
        return Parsed(head.strip(), _with_ids(found, salt + text), 0)

    def holdback(self, text: str) -> str:
        stripped = text.lstrip()
        if not stripped or stripped[0] in "{[":  # the whole reply may be a call
            return ""
        return super().holdback(text)


class Mistral(ToolFormat):
    name = "mistral"
    source = "https://huggingface.co/mistralai/Mistral-7B-Instruct-v0.3 (mistral-common v3 tokenizer)"
    tag = "[TOOL_CALLS]"

    def render_tools(self, tools: Sequence[Mapping[str, Any]]) -> str:
        return f"[AVAILABLE_TOOLS] {_dump([dict(t) for t in tools])}[/AVAILABLE_TOOLS]"

    def render_call(self, calls: Sequence[CallLike]) -> str:
        return f"{self.tag} [" + ", ".join(_object(*call_parts(c)) for c in calls) + "]"

    def render_result(self, content: str, call_id: str | None = None) -> str | None:
        payload: dict[str, Any] = {"content": content}
        if call_id:
            payload["call_id"] = call_id
        return f"[TOOL_RESULTS] {_dump(payload)}[/TOOL_RESULTS]"

    def parse(self, text: str, salt: str = "") -> Parsed:
        at = text.find(self.tag)
        if at >= 0:
            head, body = text[:at], text[at + len(self.tag) :]
        else:  # the marker is a special token, dropped when decoding: a bare call list opens the reply
            stripped = text.lstrip()
            if not (stripped[:1] in ("[", "{") and '"name"' in stripped):
                return Parsed(text, (), 0)
            head, body = "", stripped
        body = body.lstrip()
        try:
            value, end = _DECODER.raw_decode(body)
        except json.JSONDecodeError:
            return Parsed(text, (), 1)
        found = _calls_of(value)
        if found is None:
            return Parsed(text, (), 1)
        content = (head + body[end:]).strip()
        return Parsed(content, _with_ids(found, salt + text), 0)

    def holdback(self, text: str) -> str:
        if text.lstrip()[:1] == "{":
            return ""
        cut = text.find("[")
        return text if cut < 0 else text[:cut]


class UnknownToolFormat(UnknownNameError):
    """No tool-call format has this name (``--tool-format``, ``tool_format =``)."""


def _format(value: Any) -> ToolFormat:
    """A registered value as a format: a ``ToolFormat`` subclass is instantiated."""
    if isinstance(value, type) and issubclass(value, ToolFormat):
        value = value()
    if not isinstance(value, ToolFormat):
        raise TypeError(f"a tool format must be a verigym ToolFormat, not {type(value).__name__}")
    return value


TOOL_FORMATS: Registry[ToolFormat] = Registry(
    "tool format",
    builtins={f.name: f for f in (Hermes(), Llama3(), Mistral(), SmolLM2())},
    error=UnknownToolFormat,
    make=_format,
)
"""Every tool-call format by name (``verigym.registry.Registry``): the four built-ins, then those
registered (``TOOL_FORMATS.register(name, FormatOrClass or "module:attr")``) or added by a
``verigym.plugins`` package."""


def get_format(name: str | ToolFormat) -> ToolFormat:
    """The registered format of that name (a ``ToolFormat`` is returned as it is); an unknown name is
    ``UnknownToolFormat`` (a ``ValueError``) listing the known ones."""
    if isinstance(name, ToolFormat):
        return name
    return TOOL_FORMATS.get(name)


def _template_text(tokenizer: Any) -> str:
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):  # named templates
        return "\n".join(str(t) for t in template.values())
    return str(template or "")


def default_format(tokenizer: Any) -> str:
    """The format a tokenizer's model most likely writes: the one its chat template mentions, else
    ``smollm2`` for the SmolLM family, else ``hermes``.

    The family is told by ``name_or_path`` or by the template's default system prompt ("named SmolLM"):
    a fine-tuned copy saved to a directory of any name keeps its template, and rendering its tools in
    another format than it was trained on silently breaks its calls."""
    template = _template_text(tokenizer)
    if "<tool_call>" in template:
        return "hermes"
    if "[TOOL_CALLS]" in template:
        return "mistral"
    if "<|python_tag|>" in template or "ipython" in template:
        return "llama3"
    if "smollm" in str(getattr(tokenizer, "name_or_path", "") or "").lower() or "named SmolLM" in template:
        return "smollm2"
    return "hermes"
