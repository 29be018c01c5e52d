"""Tool-call formats (``policies.local._toolformats``) and the chat rendering that uses them: render → parse
round trips for every format, malformed blocks kept and counted, and templates with and without tool
support (SmolLM2's plain ChatML, a Qwen2.5-style Hermes template) rendering OpenAI agent-loop messages."""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest

from verigym.policies import tiny
from verigym.policies.local.chat import (
    TOOL_FORMATS,
    default_format,
    encode_chat,
    get_format,
    parse_tool_calls,
    render_chat,
    template_traits,
)
from verigym.types import Message, ToolCall

# SmolLM2-Instruct's chat template: ChatML with a default system turn and no tools section.
CHATML = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# A Qwen2.5-style template: tools in the system turn, Hermes calls, results as <tool_response> user turns.
HERMES = (
    "{%- if tools %}<|im_start|>system\n{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] }}"
    "\n\n{% endif %}# Tools\n<tools>\n{% for t in tools %}{{ t | tojson }}\n{% endfor %}</tools><|im_end|>\n"
    "{%- elif messages[0]['role'] == 'system' %}<|im_start|>system\n{{ messages[0]['content'] }}<|im_end|>\n"
    "{%- endif %}"
    "{%- for m in messages %}{% if m['role'] == 'system' %}"
    "{% elif m['role'] == 'assistant' %}<|im_start|>assistant\n{{ m['content'] }}"
    "{% for tc in m['tool_calls'] or [] %}<tool_call>\n"
    '{"name": "{{ tc.function.name }}", "arguments": {{ tc.function.arguments | tojson }}}\n</tool_call>'
    "{% endfor %}<|im_end|>\n"
    "{% elif m['role'] == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m['content'] }}\n</tool_response>"
    "<|im_end|>\n{% else %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endif %}{% endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_weather",
            "description": "the weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
CALLS = [
    ToolCall(id="c1", name="lookup_weather", arguments='{"city": "Paris"}'),
    ToolCall(id="c2", name="add", arguments='{"a": 1, "b": [2, 3]}'),
]
AGENT_LOOP: list[dict[str, Any]] = [
    {"role": "user", "content": "weather in Paris?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "lookup_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21C"},
]


def _tokenizer(template: str, name: str = "") -> Any:
    tok = tiny.build_tokenizer()
    tok.chat_template = template
    tok.name_or_path = name
    return tok


@pytest.mark.parametrize("name", sorted(TOOL_FORMATS))
def test_render_call_parses_back_to_the_same_calls(name: str) -> None:
    fmt = TOOL_FORMATS[name]
    for calls in (CALLS[:1], CALLS):
        content, parsed, bad = fmt.parse(fmt.render_call(calls), salt="s")
        assert bad == 0 and content == ""
        assert [(c.name, json.loads(c.arguments)) for c in parsed] == [
            (c.name, json.loads(c.arguments)) for c in calls
        ]
        assert all(c.id.startswith("call_") for c in parsed)
        assert fmt.parse(fmt.render_call(calls), salt="s").calls == parsed  # ids are deterministic
    dicts = [{"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]
    assert fmt.parse(fmt.render_call(dicts)).calls[0].arguments == '{"x": 1}'
    assert fmt.parse("just an answer") == ("just an answer", (), 0)
    assert "lookup_weather" in fmt.render_tools(TOOLS)


def test_each_format_writes_its_public_shape() -> None:
    call = CALLS[:1]
    assert TOOL_FORMATS["hermes"].render_call(call) == (
        '<tool_call>\n{"name": "lookup_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    )
    assert TOOL_FORMATS["smollm2"].render_call(call) == (
        '<tool_call>[{"name": "lookup_weather", "arguments": {"city": "Paris"}}]</tool_call>'
    )
    assert (
        TOOL_FORMATS["llama3"].render_call(call)
        == '{"name": "lookup_weather", "parameters": {"city": "Paris"}}'
    )
    assert TOOL_FORMATS["mistral"].render_call(call) == (
        '[TOOL_CALLS] [{"name": "lookup_weather", "arguments": {"city": "Paris"}}]'
    )
    assert "<tools>[" in TOOL_FORMATS["smollm2"].render_tools(TOOLS)  # a JSON list inside the tags
    assert TOOL_FORMATS["mistral"].render_tools(TOOLS).startswith("[AVAILABLE_TOOLS] [")
    assert TOOL_FORMATS["smollm2"].render_result("4") == "<tool_response>\n4\n</tool_response>"
    assert TOOL_FORMATS["mistral"].render_result("4", "abc") == (
        '[TOOL_RESULTS] {"content": "4", "call_id": "abc"}[/TOOL_RESULTS]'
    )
    assert TOOL_FORMATS["hermes"].render_result("4") is None  # the template's tool role, or the fallback


def test_markers_dropped_as_special_tokens_are_optional() -> None:
    body = '{"name": "f", "parameters": {"x": 1}}'
    assert TOOL_FORMATS["llama3"].parse("<|python_tag|>" + body).calls[0].name == "f"
    assert TOOL_FORMATS["llama3"].parse(body).calls[0].arguments == '{"x": 1}'
    assert TOOL_FORMATS["mistral"].parse('[{"name": "f", "arguments": {}}]').calls[0].name == "f"
    text, calls, bad = TOOL_FORMATS["mistral"].parse('Sure. [TOOL_CALLS] [{"name": "f", "arguments": {}}]')
    assert (text, [c.name for c in calls], bad) == ("Sure.", ["f"], 0)
    # SmolLM2 says "no call" with an empty list; a single object inside the tag is accepted too
    assert TOOL_FORMATS["smollm2"].parse("<tool_call>[]</tool_call>") == ("", (), 0)
    assert TOOL_FORMATS["smollm2"].parse('<tool_call>{"name": "f", "arguments": {}}</tool_call>').calls


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("hermes", 'a <tool_call>{"name": "f", "arguments": {</tool_call> b'),
        ("smollm2", '<tool_call>[{"name": "f", "arguments": {}}, {"oops": 1}]</tool_call>'),
        ("llama3", '<|python_tag|>{"name": "f", "parameters": {'),
        ("mistral", '[TOOL_CALLS] [{"name": "f", "arguments": '),
        ("hermes", "<tool_call>not json at all"),
    ],
)
def test_malformed_blocks_stay_in_the_content_and_are_counted(name: str, text: str) -> None:
    assert TOOL_FORMATS[name].parse(text) == (text, (), 1)


def test_good_and_malformed_blocks_in_one_reply() -> None:
    text = 'x <tool_call>{"name": "f", "arguments": {}}</tool_call> <tool_call>{bad}</tool_call>'
    content, calls, bad = TOOL_FORMATS["hermes"].parse(text)
    assert [c.name for c in calls] == ["f"] and bad == 1 and content == "x  <tool_call>{bad}</tool_call>"
    assert parse_tool_calls(text) == (content, calls)  # the Hermes parser of old, same signature


def test_default_format_follows_the_template_then_the_name() -> None:
    assert default_format(_tokenizer(HERMES)) == "hermes"
    assert default_format(_tokenizer("{{ '[TOOL_CALLS]' }}")) == "mistral"
    assert default_format(_tokenizer("{% if m.role == 'ipython' %}{% endif %}")) == "llama3"
    assert default_format(_tokenizer(CHATML, "HuggingFaceTB/SmolLM2-135M-Instruct")) == "smollm2"
    assert default_format(_tokenizer(CHATML, "/cache/models/smollm2-135m-instruct")) == "smollm2"
    generic_chatml = CHATML.replace(" named SmolLM, trained by Hugging Face", "")
    assert default_format(_tokenizer(generic_chatml, "some/chatml-model")) == "hermes"
    # a fine-tuned SmolLM2 saved under any name keeps its template's default system prompt
    assert default_format(_tokenizer(CHATML, "runs/rl/checkpoints/step_000012/model")) == "smollm2"
    assert default_format(tiny.build_tokenizer()) == "hermes"
    with pytest.raises(ValueError, match="unknown tool format"):
        get_format("nope")


def test_a_template_without_tools_gets_the_schemas_in_the_system_prompt_and_one_warning() -> None:
    tok = _tokenizer(CHATML, "HuggingFaceTB/SmolLM2-135M-Instruct")
    traits = template_traits(tok)
    assert not traits.uses_tools and not traits.renders_calls
    user = [{"role": "user", "content": "weather in Paris?"}]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        text = render_chat(tok, user, TOOLS)
        again = render_chat(tok, [Message(role="user", content="weather in Paris?")], TOOLS)
        encode_chat(tok, user, TOOLS)
    assert again == text
    ours = [w for w in caught if "ignores `tools`" in str(w.message)]
    assert (
        len(ours) == 1 and issubclass(ours[0].category, UserWarning) and "'smollm2'" in str(ours[0].message)
    )
    assert text.startswith("<|im_start|>system\n") and text.count("lookup_weather") == 1
    assert f"<tools>{json.dumps(TOOLS)}</tools>" in text and "named SmolLM" not in text
    with_system = render_chat(tok, [{"role": "system", "content": "Be brief."}, *user], TOOLS)
    assert with_system.startswith("<|im_start|>system\nBe brief.\n\n") and "<tools>" in with_system
    assert "<tools>" in render_chat(tok, user, TOOLS, tool_format="hermes")
    assert "[AVAILABLE_TOOLS]" in render_chat(tok, user, TOOLS, tool_format="mistral")
    assert "lookup_weather" not in render_chat(tok, user)  # no tools, nothing added


def test_a_template_with_tools_renders_them_itself() -> None:
    tok = _tokenizer(HERMES)
    traits = template_traits(tok)
    assert traits.uses_tools and traits.renders_calls and traits.dict_arguments and traits.renders_tool_role
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        text = render_chat(tok, [{"role": "user", "content": "weather in Paris?"}], TOOLS)
    assert text.count("lookup_weather") == 1 and "<tools>\n{" in text and "# Tools" in text


@pytest.mark.parametrize("template", ["chatml", "hermes", "tiny"])
def test_openai_agent_loop_messages_render_with_the_call_and_the_result(template: str) -> None:
    tok = {
        "chatml": _tokenizer(CHATML, "HuggingFaceTB/SmolLM2-135M-Instruct"),
        "hermes": _tokenizer(HERMES),
        "tiny": tiny.build_tokenizer(),
    }[template]
    for tools in (TOOLS, None):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            text = render_chat(tok, AGENT_LOOP, tools)
        assert "None" not in text and "sunny, 21C" in text
        assert text.count('"city": "Paris"') == 1 and "lookup_weather" in text
        assert '\\"city\\"' not in text  # arguments as an object, not a quoted JSON string
    if template == "chatml":  # SmolLM2's conventions: a JSON list in the tag, the result in a user turn
        assert '<|im_start|>assistant\n<tool_call>[{"name": "lookup_weather"' in text
        assert "<|im_start|>user\n<tool_response>\nsunny, 21C\n</tool_response><|im_end|>" in text
    ids = encode_chat(tok, AGENT_LOOP, None)
    assert ids and tok.decode(ids) == text


def test_consecutive_tool_results_share_one_user_turn_when_the_template_drops_the_tool_role() -> None:
    tok = _tokenizer(
        "{% for m in messages %}{% if m['role'] != 'tool' %}<{{ m['role'] }}>{{ m['content'] }}{% endif %}"
        "{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}"
    )
    assert not template_traits(tok).renders_tool_role
    loop = [*AGENT_LOOP, {"role": "tool", "tool_call_id": "call_2", "content": "windy"}]
    text = render_chat(tok, loop)
    assert text.endswith(
        "<user><tool_response>\nsunny, 21C\n</tool_response>\n<tool_response>\nwindy\n</tool_response><assistant>"
    )
