"""Structured outputs in the local engine: OpenAI's ``response_format`` and ``tool_choice`` compiled into
grammars, and the per-row token masks that the batched decode loop applies (``_engine.run_rows``).

What is enforced (OpenAI's semantics, as vLLM and SGLang enforce them):

``response_format={"type": "json_object"}``
    the reply is one JSON object.
``response_format={"type": "json_schema", "json_schema": {"schema": ..., "strict": ...}}``
    the reply is JSON valid against the schema (with ``strict`` true or false: a schema given is a schema
    kept; a schema the engine cannot enforce is refused with ``bad_request``, never dropped).
``tool_choice="required"`` / ``{"type": "function", "function": {"name": N}}``
    the reply is a tool call in the model's own tool-call format (``_toolformats``), naming one of the
    tools (or N) with arguments valid against that tool's ``parameters``; ``parallel_tool_calls=false``
    allows exactly one call, otherwise up to ``MAX_PARALLEL``.

After the grammar is complete only the end-of-sequence tokens are allowed, so a constrained row ends as
soon as its output is whole. A row that nears its ``max_tokens`` is steered to close its structure in
the tokens it has left (``_closing``); one that cannot be closed in time is cut and says ``length``.

**The engine.** xgrammar (Dong et al., 2024, "XGrammar: Flexible and Efficient Structured Generation
Engine for Large Language Models"; vLLM's and SGLang's default). Chosen over llguidance after measuring
both here on SmolLM2-135M-Instruct's 49,152-token vocabulary: xgrammar filled a JSON-schema mask in
~5 µs against llguidance's ~60 µs, and llguidance could not read the tiny models' character-level
tokenizer at all (``can't determine decoder type``). xgrammar's wheel declares Triton as a dependency for
its GPU mask kernel only; on CPU it applies masks with its own kernel, so it is installed without its
dependency tree (the lock's ``requirements-grammar.lock``) rather than pulling 286 MB of GPU compiler.

**Logprobs.** The mask is applied to the logits before ``log_softmax``: the token ids and logprobs a
constrained row records are those of the constrained distribution it was sampled from, and its
``Completion.constrained`` names the constraint. A trainer that takes such samples treats the recorded
logprobs as the behaviour policy, so its ratio ``π_θ(a|s) / μ(a|s)`` is the importance weight of a sample
drawn under the mask (below 1 where the mask moved mass to the token); the PPO clip bounds it as for any
off-policy sample.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from verigym.policies.base import PolicyError
from verigym.policies.local._closing import Closer

__all__ = ["MAX_PARALLEL", "Constraint", "Grammars", "Masks", "constraint_kind"]

MAX_PARALLEL = 4  # the most calls a forced reply may hold when parallel tool calls are allowed
_SEPARATORS = (", ", ": ")  # JSON as ``json.dumps`` writes it: what models have read most
# A forced call's JSON may hold up to this much whitespace between tokens: SmolLM2 writes its calls as
# ``<tool_call>[\n{...},\n{...}\n]</tool_call>``; forced into compact JSON it lost the thread and
# rambled inside the argument string (4 of 24 calc prompts cut at 160 tokens, expressions garbled),
# with its own layout it wrote the asked expression. Bounded, so whitespace cannot loop.
_CALL_WS = 4
_CACHE = 64  # compiled grammars kept per tokenizer


@dataclass(frozen=True)
class Constraint:
    """A compiled grammar a row must follow; ``kind`` is recorded on the completion."""

    kind: str  # "json_object", "json_schema" or "tool_call"
    compiled: Any  # xgrammar.CompiledGrammar
    stop_ids: tuple[int, ...]
    closer: Closer | None = None  # budget-aware closing near max_tokens (None: rows are only masked)

    def matcher(self) -> Any:
        import xgrammar as xgr

        return xgr.GrammarMatcher(self.compiled, override_stop_tokens=list(self.stop_ids))


def _bad(message: str) -> PolicyError:
    return PolicyError("bad_request", message)


def constraint_kind(
    response_format: Mapping[str, Any] | None, tool_choice: Any, tools: Sequence[Mapping[str, Any]] | None
) -> str | None:
    """Which constraint a request asks for (None: none), checking the fields' shapes; raises
    ``PolicyError("bad_request")`` naming the field when they are malformed or contradict each other."""
    forced = _forced_tools(tool_choice, tools)
    kind = _format_kind(response_format)
    if forced is not None and kind is not None:
        raise _bad(
            "response_format: a JSON response_format and a tool_choice that forces a call cannot both "
            "hold (the reply is either the call or the JSON); drop one"
        )
    return "tool_call" if forced is not None else kind


def _format_kind(response_format: Mapping[str, Any] | None) -> str | None:
    if response_format is None:
        return None
    if not isinstance(response_format, Mapping):
        raise _bad("response_format: must be an object with a type")
    kind = response_format.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return "json_object"
    if kind == "json_schema":
        spec = response_format.get("json_schema")
        if not isinstance(spec, Mapping) or not isinstance(spec.get("schema", {}), Mapping):
            raise _bad("response_format.json_schema: must be an object with a 'schema' object")
        return "json_schema"
    raise _bad(f"response_format: type must be text, json_object or json_schema, got {kind!r}")


def _forced_tools(
    tool_choice: Any, tools: Sequence[Mapping[str, Any]] | None
) -> list[Mapping[str, Any]] | None:
    """The tools a forcing ``tool_choice`` allows (None: the choice does not force a call)."""
    if tool_choice is None or tool_choice in ("auto", "none"):
        return None
    if tool_choice == "required" or isinstance(tool_choice, Mapping):
        if not tools:
            raise _bad("tool_choice: a forced tool call needs tools")
        if tool_choice == "required":
            return list(tools)
        fn = tool_choice.get("function")
        name = fn.get("name") if tool_choice.get("type") == "function" and isinstance(fn, Mapping) else None
        if not isinstance(name, str):
            raise _bad(
                "tool_choice: must be 'auto', 'none', 'required' or "
                '{"type": "function", "function": {"name": ...}}'
            )
        chosen = [t for t in tools if _tool_name(t) == name]
        if not chosen:
            raise _bad(f"tool_choice: names the tool {name!r}, which is not among the request's tools")
        return chosen
    raise _bad(f"tool_choice: must be 'auto', 'none', 'required' or a named function, got {tool_choice!r}")


def _tool_name(tool: Mapping[str, Any]) -> str | None:
    fn = tool.get("function")
    name = (fn if isinstance(fn, Mapping) else tool).get("name")
    return name if isinstance(name, str) else None


def _call_schema(tools: Sequence[Mapping[str, Any]], key: str) -> dict[str, Any]:
    """The JSON schema of one call object ``{"name": N, key: ARGS}`` of any of ``tools``."""
    options = []
    for tool in tools:
        fn = tool.get("function")
        body = fn if isinstance(fn, Mapping) else tool
        params = body.get("parameters") or {"type": "object"}
        if not isinstance(params, Mapping):
            raise _bad(f"tools: the parameters of {_tool_name(tool)!r} must be a JSON schema object")
        options.append(
            {
                "type": "object",
                "properties": {"name": {"const": _tool_name(tool)}, key: dict(params)},
                "required": ["name", key],
                "additionalProperties": False,
            }
        )
    return options[0] if len(options) == 1 else {"anyOf": options}


def _check_schema(schema: Mapping[str, Any]) -> None:
    import jsonschema

    try:
        jsonschema.validators.validator_for(schema).check_schema(dict(schema))
    except jsonschema.SchemaError as exc:
        raise _bad(f"response_format.json_schema.schema: not a valid JSON schema: {exc.message}") from None


class Grammars:
    """Compiles and caches the grammars of one tokenizer (thread-safe; built lazily per policy)."""

    def __init__(self, tokenizer: Any, vocab_size: int, stop_ids: Sequence[int]) -> None:
        self.tokenizer, self.vocab_size, self.stop_ids = tokenizer, vocab_size, tuple(stop_ids)
        self._lock = threading.Lock()
        self._closer: Closer | None = None

    @functools.cached_property
    def _compiler(self) -> Any:
        try:
            import xgrammar as xgr
        except ImportError:
            raise PolicyError(
                "bad_request",
                "response_format: structured outputs need the grammar engine xgrammar; install it with "
                "'pip install --no-deps -r requirements-grammar.lock' (or 'pip install verigym[grammar]')",
            ) from None

        info = xgr.TokenizerInfo.from_huggingface(
            self.tokenizer, vocab_size=self.vocab_size, stop_token_ids=list(self.stop_ids)
        )
        return xgr.GrammarCompiler(info, cache_enabled=False)

    def constraint(
        self,
        *,
        response_format: Mapping[str, Any] | None,
        tool_choice: Any,
        tools: Sequence[Mapping[str, Any]] | None,
        parallel_tool_calls: bool,
        tool_format: str,
    ) -> Constraint | None:
        """The constraint a request's fields ask for, compiled (None when they ask for none)."""
        kind = constraint_kind(response_format, tool_choice, tools)
        if kind is None:
            return None
        if kind == "tool_call":
            forced = _forced_tools(tool_choice, tools) or []
            key = json.dumps(
                ["tool_call", forced, parallel_tool_calls, tool_format]
            )  # key order kept: it is the order written
        else:
            spec = (response_format or {}).get("json_schema") or {}
            schema = dict(spec.get("schema") or {"type": "object"}) if kind == "json_schema" else {}
            if kind == "json_schema":
                _check_schema(schema)
            key = json.dumps([kind, schema])
        compiled = self._compiled(key)
        return Constraint(kind, compiled, self.stop_ids, self._closer_of(compiled))

    def _closer_of(self, compiled: Any) -> Closer:
        with self._lock:
            if self._closer is None:  # one per tokenizer: its decoded vocabulary, read once
                info = compiled.tokenizer_info
                self._closer = Closer(info.decoded_vocab, info.special_token_ids, self.stop_ids)
            return self._closer

    def _compiled(self, key: str) -> Any:
        with self._lock:
            return self._compile(key)

    @functools.lru_cache(maxsize=_CACHE)  # noqa: B019 - one Grammars per policy, kept as long as it
    def _compile(self, key: str) -> Any:
        import xgrammar as xgr

        kind, *rest = json.loads(key)
        try:
            if kind == "tool_call":
                grammar = _tool_grammar(*rest)
            else:
                schema = rest[0] if kind == "json_schema" else {"type": "object"}
                grammar = xgr.Grammar.from_json_schema(
                    json.dumps(schema), any_whitespace=False, separators=_SEPARATORS
                )
            return self._compiler.compile_grammar(grammar)
        except (RuntimeError, ValueError) as exc:  # xgrammar's word on a schema it cannot enforce
            where = "tools" if kind == "tool_call" else "response_format.json_schema.schema"
            raise _bad(f"{where}: cannot be enforced: {str(exc).splitlines()[0]}") from None


def _tool_grammar(tools: list[dict[str, Any]], parallel: bool, tool_format: str) -> Any:
    """The grammar of a reply that is only tool calls, written as ``tool_format`` writes them."""
    import xgrammar as xgr

    def lit(text: str) -> Any:
        return xgr.Grammar.from_ebnf(f"root ::= {json.dumps(text)}")

    def schema_grammar(schema: dict[str, Any]) -> Any:  # the layout the model was trained on is allowed
        return xgr.Grammar.from_json_schema(
            json.dumps(schema), any_whitespace=True, max_whitespace_cnt=_CALL_WS
        )

    most = MAX_PARALLEL if parallel else 1
    if tool_format in ("smollm2", "mistral"):  # one JSON list of call objects
        items = {"type": "array", "items": _call_schema(tools, "arguments"), "minItems": 1, "maxItems": most}
        head, tail = ("<tool_call>", "</tool_call>") if tool_format == "smollm2" else ("[TOOL_CALLS] ", "")
        parts = [lit(head), schema_grammar(items)] + ([lit(tail)] if tail else [])
        return xgr.Grammar.concat(*parts)
    key = "parameters" if tool_format == "llama3" else "arguments"
    call = schema_grammar(_call_schema(tools, key))
    if tool_format == "llama3":  # the whole reply is the call object; several go one a line
        blocks = [call]
        sep = lit("\n")
    else:  # hermes: each call in its own <tool_call> block
        blocks = [lit("<tool_call>\n"), call, lit("\n</tool_call>")]
        sep = lit("\n")
    options = []
    for n in range(1, most + 1):
        seq: list[Any] = []
        for i in range(n):
            seq += ([sep] if i else []) + blocks
        options.append(xgr.Grammar.concat(*seq) if len(seq) > 1 else seq[0])
    return options[0] if len(options) == 1 else xgr.Grammar.union(*options)


class Masks:
    """The grammar matchers of a generation pass's constrained rows, keyed by row, and the step's mask."""

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = vocab_size
        self.matchers: dict[int, Any] = {}
        self.closing: dict[int, tuple[Closer, int]] = {}  # row -> its closer and closing margin
        self._bitmask: Any = None

    def add(self, specs: Sequence[Any], base: int = 0) -> None:
        for j, spec in enumerate(specs):
            if spec.constraint is not None:
                matcher = self.matchers[base + j] = spec.constraint.matcher()
                closer = spec.constraint.closer
                if closer is not None:
                    self.closing[base + j] = (closer, closer.margin(matcher))

    def apply(
        self, logits: Any, rows: Sequence[int], dead: set[int], left: Sequence[int] | None = None
    ) -> None:
        """Mask, in place, the logits of the live constrained rows (``rows``: batch position → row;
        ``left``: by position, the tokens each row may still sample, this one included: rows near it are
        narrowed to what can still close their structure, ``_closing``)."""
        import xgrammar as xgr

        n = len(rows)
        if self._bitmask is None or self._bitmask.shape[0] < n:
            self._bitmask = xgr.allocate_token_bitmask(max(n, 8), self.vocab_size)
        at = [p for p, row in enumerate(rows) if row in self.matchers and p not in dead]
        for p in at:
            self.matchers[rows[p]].fill_next_token_bitmask(self._bitmask, p)
        if at:
            xgr.apply_token_bitmask_inplace(logits, self._bitmask[:n], vocab_size=self.vocab_size, indices=at)
        if left is not None:
            for p in at:
                if rows[p] in self.closing:
                    closer, margin = self.closing[rows[p]]
                    closer.restrict(logits[p], self.matchers[rows[p]], int(left[p]), margin)

    def accept(self, row: int, token: int) -> None:
        matcher = self.matchers.get(row)
        if matcher is not None and not matcher.is_terminated():
            matcher.accept_token(token)

    def drop(self, row: int) -> None:
        self.matchers.pop(row, None)
        self.closing.pop(row, None)
