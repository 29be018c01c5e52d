"""Tool-set variations: the same tools under other names, argument names, order and descriptions.

A model that only works with one exact tool set has overfit to it. ``make_variant(tools, seed)``
draws, from the seed alone, a ``ToolVariant`` that

- renames functions (``lookup_order`` -> ``fetch_order_record``) and arguments
  (``order_id`` -> ``order_identifier``), keeping the ``State`` parameter hidden as before;
- rewrites each description (a reworded lead-in, synonyms) while keeping its meaning;
- reorders the tools and adds harmless distractor tools (weather, e-mail, translation...)
  that change nothing and only tell the model they are not useful here.

``variant.tools`` are real ``Tool`` objects wrapping the originals, so a ``ToolEnv`` runs them
as any other tool. ``variant.policy(inner)`` wraps a policy written against the original names
(an oracle): the conversation it sees is mapped back to the original names and its tool calls
forward to the variant, so the oracle solves every variant.

Seed 0 is the identity only in name: every seed draws a variant; pass ``None`` for none.
``ToolEnv(tool_variant=SEED)`` applies it (see ``verigym.envs.tool``); ``with_tool_variant(env,
seed)`` in that module applies it to an already-built environment.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Unpack

import pydantic
from pydantic import ConfigDict

from verigym.tools._tool import Tool, _is_async, strip_titles, tool
from verigym.types import Completion, Message, ToolCall

if TYPE_CHECKING:
    from verigym.policies.base import Policy, PolicyArgs

__all__ = ["DISTRACTORS", "ToolVariant", "VariantPolicy", "make_variant"]

_PREFIXES = ("", "fetch_", "get_", "do_", "run_", "tool_", "call_")
_SUFFIXES = ("", "_v2", "_tool", "_fn", "_op")
_ARG_SUFFIXES = ("_value", "_input", "_param", "_arg", "")
_ARG_PREFIXES = ("", "the_", "input_", "target_")
_LEADS = (
    "{d}",
    "Use this tool to {dl}",
    "This function lets you {dl}",
    "Tool description: {d}",
    "{d} Call it with the arguments described below.",
)
_SYNONYMS = {
    "Return": "Give back",
    "Returns": "Gives back",
    "Look up": "Find",
    "look up": "find",
    "Search": "Query",
    "search": "query",
    "Open": "Display",
    "Get": "Retrieve",
    "List": "Enumerate",
    "list": "enumerate",
    "Update": "Modify",
    "the ": "the ",
}


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city.

    Args:
        city: the city name.
    """
    return f"Weather service: no data for {city!r} (this tool is not useful for this task)."


@tool
def send_email(to: str, subject: str, body: str) -> str:
    """Send an e-mail message.

    Args:
        to: the recipient's address.
        subject: the subject line.
        body: the message text.
    """
    return "E-mail service unavailable in this environment; nothing was sent."


@tool
def translate_text(text: str, language: str) -> str:
    """Translate a text into another language.

    Args:
        text: the text to translate.
        language: the target language.
    """
    return "Translation service unavailable in this environment."


@tool
def get_current_time(timezone: str = "UTC") -> str:
    """Get the current date and time in a timezone.

    Args:
        timezone: an IANA timezone name.
    """
    return "Clock service unavailable in this environment."


@tool
def set_reminder(text: str, minutes: int) -> str:
    """Set a reminder that fires after some minutes.

    Args:
        text: what to be reminded of.
        minutes: how many minutes from now.
    """
    return "Reminder service unavailable in this environment; no reminder was set."


DISTRACTORS: tuple[Tool, ...] = (get_weather, send_email, translate_text, get_current_time, set_reminder)
"""Harmless tools a variant may add: each changes nothing and says it is not useful here."""


def _reword(description: str, rng: random.Random) -> str:
    text = description.strip() or "A tool."
    for old, new in _SYNONYMS.items():
        if rng.random() < 0.7:
            text = text.replace(old, new)
    lead = rng.choice(_LEADS)
    lower = text[:1].lower() + text[1:]
    return lead.format(d=text, dl=lower)


def _unique(candidate: str, taken: set[str]) -> str:
    name, i = candidate, 2
    while name in taken:
        name, i = f"{candidate}_{i}", i + 1
    taken.add(name)
    return name


def _renamed_tool(original: Tool, name: str, description: str, arg_map: Mapping[str, str]) -> Tool:
    """``original`` seen under a new name, description and argument names (``arg_map``: old -> new)."""
    fields: dict[str, Any] = {}
    for old, info in original.args_model.model_fields.items():
        fields[arg_map[old]] = (info.annotation, copy.copy(info))
    model = pydantic.create_model(  # type: ignore[call-overload]
        f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields
    )
    back = {new: old for old, new in arg_map.items()}
    state_param = original.state_param
    inner = original.fn

    call_async = _is_async(inner)

    def _kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
        return {(k if k == state_param else back[k]): v for k, v in kwargs.items()}

    fn: Callable[..., Any]
    if call_async:

        async def fn_async(**kwargs: Any) -> Any:
            return await inner(**_kwargs(kwargs))

        fn = fn_async
    else:

        def fn_sync(**kwargs: Any) -> Any:
            return inner(**_kwargs(kwargs))

        fn = fn_sync
    schema = strip_titles(model.model_json_schema())
    schema.setdefault("properties", {})
    return Tool(
        fn=fn,
        name=name,
        description=description,
        parameters=schema,
        args_model=model,
        state_param=state_param,
    )


@dataclass(frozen=True)
class ToolVariant:
    """A drawn variation of a tool set (see the module docstring)."""

    seed: int
    tools: tuple[Tool, ...]
    names: dict[str, str]  # original tool name -> variant name
    args: dict[str, dict[str, str]]  # original tool name -> {original arg -> variant arg}
    distractors: tuple[str, ...] = ()
    _back: dict[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._back.update({v: k for k, v in self.names.items()})

    def to_variant(self, call: ToolCall) -> ToolCall:
        """A call written against the original tools, as the variant expects it."""
        if call.name not in self.names:
            return call
        amap = self.args[call.name]
        try:
            parsed = call.parsed_arguments()
        except ValueError:
            return call.model_copy(update={"name": self.names[call.name]})
        renamed = {amap.get(k, k): v for k, v in parsed.items()}
        return call.model_copy(update={"name": self.names[call.name], "arguments": json.dumps(renamed)})

    def to_original(self, call: ToolCall) -> ToolCall:
        """A call made against the variant, as the original tools expect it."""
        original = self._back.get(call.name)
        if original is None:
            return call
        back = {new: old for old, new in self.args[original].items()}
        try:
            parsed = call.parsed_arguments()
        except ValueError:
            return call.model_copy(update={"name": original})
        renamed = {back.get(k, k): v for k, v in parsed.items()}
        return call.model_copy(update={"name": original, "arguments": json.dumps(renamed)})

    def message_to_original(self, message: Message) -> Message:
        calls = tuple(self.to_original(c) for c in message.tool_calls)
        name = self._back.get(message.name, message.name) if message.name else message.name
        return message.model_copy(update={"tool_calls": calls, "name": name})

    def policy(self, inner: Policy) -> Policy:
        """``inner`` (written against the original tools) playing the variant."""
        if isinstance(inner, VariantPolicy) and inner.variant is self:
            return inner
        return VariantPolicy(inner, self)


class VariantPolicy:
    """A policy that speaks the original tool names, translated to and from a ``ToolVariant``."""

    def __init__(self, inner: Policy, variant: ToolVariant) -> None:
        self.inner = inner
        self.variant = variant

    @property
    def name(self) -> str:
        return self.inner.name

    async def aclose(self) -> None:
        """Close the wrapped policy (every policy has ``aclose``)."""
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()

    async def complete(self, messages: Sequence[Message], **kw: Unpack[PolicyArgs]) -> Completion:
        shown = [self.variant.message_to_original(m) for m in messages]
        completion = await self.inner.complete(shown, **kw)
        calls = tuple(self.variant.to_variant(c) for c in completion.tool_calls)
        return completion.model_copy(update={"tool_calls": calls})


def _digest(seed: int, name: str) -> str:
    return hashlib.sha256(f"{seed}/{name}".encode()).hexdigest()[:6]


def make_variant(
    tools: Sequence[Tool],
    seed: int,
    *,
    rename: bool = True,
    rename_args: bool = True,
    reword: bool = True,
    reorder: bool = True,
    distractors: int | None = None,
) -> ToolVariant:
    """Draw a variant of ``tools`` from ``seed`` (``distractors``: how many to add; None: 0-2 drawn)."""
    rng = random.Random(f"verigym/tool-variant/{seed}")
    taken: set[str] = set()
    names: dict[str, str] = {}
    args: dict[str, dict[str, str]] = {}
    out: list[Tool] = []
    for t in tools:
        new_name = t.name
        if rename:
            base = re.sub(r"^(get|fetch|do|run)_", "", t.name)
            new_name = rng.choice(_PREFIXES) + base + rng.choice(_SUFFIXES)
            if new_name == t.name:
                new_name = f"{t.name}_{_digest(seed, t.name)[:3]}"
        new_name = _unique(new_name, taken)
        amap: dict[str, str] = {}
        arg_taken: set[str] = set()
        for arg in t.args_model.model_fields:
            new_arg = arg
            if rename_args:
                new_arg = rng.choice(_ARG_PREFIXES) + arg + rng.choice(_ARG_SUFFIXES)
                if new_arg == arg:
                    new_arg = f"{arg}_{rng.choice(('x', 'in', 'val'))}"
            amap[arg] = _unique(new_arg, arg_taken)
        description = _reword(t.description, rng) if reword else t.description
        names[t.name] = new_name
        args[t.name] = amap
        out.append(_renamed_tool(t, new_name, description, amap))
    count = rng.randint(0, 2) if distractors is None else distractors
    pool = [d for d in DISTRACTORS if d.name not in taken]
    extra = rng.sample(pool, min(count, len(pool)))
    out.extend(extra)
    if reorder:
        rng.shuffle(out)
    return ToolVariant(
        seed=seed, tools=tuple(out), names=names, args=args, distractors=tuple(d.name for d in extra)
    )
