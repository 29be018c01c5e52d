"""Every request field ``verigym serve`` accepts is honoured or refused: none is silently ignored.

The fields the request models declare (``_wire``) are honoured. Beyond them a body may carry only the
fields listed here, each with the values that change nothing about the reply (metadata, a cache hint, a
penalty of 0, ``store`` false, vLLM's ``return_token_ids`` — ids are always returned). Any other field,
or a listed one with a value that would change the reply, is a 400 naming it. A field sent as ``null``
is a field not sent, as OpenAI treats it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from verigym.serve._wire import ApiError, ChatRequest, CompletionRequest

__all__ = ["CHAT_EXTRAS", "COMPLETION_EXTRAS", "check_extras"]


def _any(_: Any) -> bool:
    return True


def _zero(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == 0


def _empty(value: Any) -> bool:
    return bool(value == {} or value == [])


def _is(expected: Any) -> Callable[[Any], bool]:
    return lambda value: value == expected and type(value) is type(expected)


# field -> (values that leave the reply as it is, what the error says is expected)
_Extras = Mapping[str, tuple[Callable[[Any], bool], str]]

_COMMON: dict[str, tuple[Callable[[Any], bool], str]] = {
    "user": (_any, ""),
    "frequency_penalty": (_zero, "0 (penalties are not implemented)"),
    "presence_penalty": (_zero, "0 (penalties are not implemented)"),
    "logit_bias": (_empty, "an empty object (logit_bias is not implemented)"),
    "return_token_ids": (_is(True), "true (token ids are always returned)"),
}

CHAT_EXTRAS: _Extras = {
    **_COMMON,
    "metadata": (_any, ""),
    "store": (_is(False), "false (nothing is stored)"),
    "service_tier": (lambda v: v in ("auto", "default"), "auto or default (there is one tier)"),
    "prompt_cache_key": (_any, ""),
    "safety_identifier": (_any, ""),
    "modalities": (_is(["text"]), '["text"] (text is the only modality)'),
}

COMPLETION_EXTRAS: _Extras = {**_COMMON, "best_of": (_is(1), "1 (best_of is not implemented)")}


def check_extras(req: ChatRequest | CompletionRequest) -> None:
    """Raise a 400 naming the first field of ``req`` that is neither declared nor a harmless extra."""
    table = CHAT_EXTRAS if isinstance(req, ChatRequest) else COMPLETION_EXTRAS
    for name, value in (req.model_extra or {}).items():
        if value is None:
            continue
        ok, expected = table.get(name, (None, ""))
        if ok is None:
            raise ApiError(
                400,
                f"{name} is not supported by verigym serve (supported fields: README, 'verigym serve')",
                param=name,
                code="unsupported_parameter",
            )
        if not ok(value):
            raise ApiError(
                400, f"{name} must be {expected}; got {value!r}", param=name, code="unsupported_value"
            )
