"""``LocalPolicy``: a transformers causal LM in-process, with exact token ids and logprobs.

Concurrent ``complete`` calls (many environments rolling out at once, a GRPO group of 8 samples × 16
tasks) are batched: calls that arrive while the event loop is busy are collected and decoded in one
batched pass with a KV cache (in a worker thread, so the loop keeps running); calls arriving during a
pass join it at its next step when its cache has room (``continuous``), else form the next one. ``generate`` is the synchronous low-level entry point.

**Logprobs.** ``Completion.logprobs[i]`` is the log-probability of the i-th sampled token under the
model's distribution at the request's temperature, ``log_softmax(logits / T)``, computed in float32,
*before* top-k/top-p truncation (T = 1 for greedy, ``temperature=0``). With ``top_p=1`` and no
``top_k`` this is exactly the distribution the token was drawn from. It is also what RL needs: the
behaviour policy's ``log π_old(a|s)`` that a trainer recomputes as ``log_softmax(logits / T)`` for the
importance ratio; a truncated nucleus is not something the trainer can reproduce. Pass
``logprobs_mode="processed"`` to get the renormalised truncated distribution instead. ``top_logprobs``
come from the same distribution. EOS is part of ``completion_token_ids`` (the trainer must learn to
stop); text never contains it.

**Stops.** On a stop string the text is cut before it (OpenAI semantics) while the token ids keep every
sampled token, as vLLM does; so ``decode(completion_token_ids)`` equals ``text`` except for stop-string
and tool-call completions (tool-call markup is parsed out of the text into ``tool_calls``).

**Training in place.** A trainer may update ``policy.model`` between calls and bump ``policy.version``
(copied into ``Completion.policy_version``). Each pass runs under ``torch.inference_mode()`` in eval
mode, restores the model's train/eval state, and builds a fresh KV cache, so nothing stale survives.
"""

from __future__ import annotations

import asyncio
import functools
import json
import random
import threading
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar, Unpack

from verigym.policies.base import BatchedPolicy, PolicyArgs, PolicyError
from verigym.policies.local._batcher import PassHooks, Queue, QueueMixin
from verigym.policies.local._chat import encode_chat, render_chat, special_texts, strip_markers
from verigym.policies.local._engine import EarlyStop, RowResult, RowSpec, run_rows
from verigym.policies.local._grammar import Constraint, Grammars
from verigym.policies.local._history import TurnHistory
from verigym.policies.local._loading import Pretrained, load_pretrained
from verigym.policies.local._loading import display_name as _display_name
from verigym.policies.local._lora import AS_IS as _AS_IS
from verigym.policies.local._lora import AdapterMixin
from verigym.policies.local._score import Scored, prompt_logprobs
from verigym.policies.local._toolformats import TOOL_FORMATS, default_format, get_format
from verigym.types import Completion, Message, Sampling, Usage, _trusted

__all__ = ["EarlyStop", "LocalPolicy", "RowResult", "RowSpec", "Scored"]

T = TypeVar("T")

_ENCODE_CACHE = 4096  # prompts whose token ids ``encode`` keeps

_FINISH = {
    "eos": "stop",
    "stop_string": "stop",
    "length": "length",
    "early_stop": "early_stop",
    "cancelled": "cancelled",
}


class LocalPolicy(BatchedPolicy, QueueMixin, AdapterMixin):
    """A ``Policy`` backed by an in-process ``transformers`` model and tokenizer (see the module doc).

    ``max_batch_rows``: most sequences decoded in one pass. ``logprobs_mode``: ``"temperature"`` (default)
    or ``"processed"`` (see the module doc). ``batch_wait_s``: how long the micro-batcher waits for more
    calls before a pass (0: one event-loop turn). ``stop_token_ids``: ids that end a completion (default:
    EOS; ``[]`` ignores EOS). ``fast_path``: use the lean Llama decoder where it applies (same numbers).
    ``version`` is copied into every ``Completion.policy_version``; a trainer bumps it after each update.
    ``continuous`` (default): calls arriving during a pass join it at the next step (prompt no longer than
    the tokens decoded so far, ``max_tokens`` within the cache's room; lean path only) instead of waiting
    for the next pass: a joiner's prompt alone is prefilled into spare cache rows, so a call need not
    wait for a long pass to end (throughput on CPU measured the same either way,
    ``benchmarks/batching_modes.py``). When off (micro-batching), only a call
    whose ``max_tokens`` is at most a quarter of the running pass's room joins it (a 1-token call does not
    wait for a 512-token pass). Either way each call returns as soon as its own rows finish. ``passes`` counts generation passes (fewer than calls when batching works).
    ``tool_format``: the tool-call format (``hermes``, ``llama3``, ``mistral``, ``smollm2``; see
    ``_toolformats``) that prompts are rendered with when the chat template ignores tools, and that replies
    are parsed with; default ``default_format(tokenizer)``. A malformed call block stays in the text and
    adds one ``"tool_call"`` to ``Completion.malformed``.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        name: str | None = None,
        device: str | None = None,
        max_batch_rows: int = 256,
        logprobs_mode: Literal["temperature", "processed"] = "temperature",
        batch_wait_s: float = 0.0,
        stop_token_ids: Sequence[int] | None = None,
        fast_path: bool = True,
        continuous: bool = True,
        tool_format: str | None = None,
    ) -> None:
        self.model = model if device is None else model.to(device)
        self.tokenizer = tokenizer
        self.version = 0
        self.max_batch_rows = max_batch_rows
        self.logprobs_mode = logprobs_mode
        self.batch_wait_s = batch_wait_s
        self.stop_token_ids = None if stop_token_ids is None else list(stop_token_ids)
        self.fast_path = fast_path
        self.continuous = continuous
        # the tool-call format prompts are rendered and replies parsed with (``_toolformats``)
        self.tool_format = get_format(tool_format or default_format(tokenizer)).name
        self.passes = 0  # generation passes run (micro-batching makes this < the number of calls)
        self._name = name or str(getattr(getattr(model, "config", None), "_name_or_path", "") or "local")
        self._lock = threading.RLock()
        self._adapter: str | None = _AS_IS  # as is: a trainer's PeftModel samples with its own active LoRA
        self._encoded: dict[tuple[Any, ...], tuple[int, ...]] = {}
        self._history = TurnHistory()  # sampled ids, so later turns' prompts are token-exact
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Queue] = (
            weakref.WeakKeyDictionary()
        )

    @classmethod
    def from_pretrained(
        cls, path: str | Path, dtype: Any = None, device: str | None = None, **kwargs: Any
    ) -> LocalPolicy:
        """Load a model + tokenizer directory (or hub name, or catalogue name) saved with ``save_pretrained``
        (``_loading``).

        ``dtype`` is a torch dtype or its name (``"bfloat16"``); omitted or ``"auto"``: bfloat16 on
        CUDA, float32 elsewhere (``resolve_dtype``, the rule training follows too). ``device`` defaults
        to CUDA when available, else CPU.
        """
        return cls.from_loaded(load_pretrained(path, dtype, device), **kwargs)

    @classmethod
    def from_loaded(cls, loaded: Pretrained, **kwargs: Any) -> LocalPolicy:
        """The policy of a model ``load_pretrained`` loaded (a LoRA adapter directory's adapter set)."""
        kwargs.setdefault("name", _display_name(loaded.path))
        policy = cls(loaded.model, loaded.tokenizer, device=loaded.device, **kwargs)
        if loaded.adapter:  # a LoRA adapter directory: its base model is loaded, now the adapter
            policy.load_adapter(loaded.path, "default")
            policy.set_adapter("default")
        return policy

    @property
    def name(self) -> str:
        return self._name

    def swap_weights(self, change: Callable[[Any], T]) -> T:
        """``change(model)``'s result, run under the policy's lock: never during a generation or
        scoring pass, so no pass sees half-written weights (a trainer's weight push, a reload from
        disk). Bump ``version`` in ``change`` when the samples should say which weights they came from."""
        with self._lock:
            return change(self.model)

    @property
    def eos_ids(self) -> list[int]:
        """Token ids that end a completion: ``stop_token_ids`` when given (``[]`` never stops early, like
        vLLM's ``ignore_eos``), else the tokenizer's EOS and the generation config's."""
        if self.stop_token_ids is not None:
            return list(self.stop_token_ids)
        ids: set[int] = set()
        if self.tokenizer.eos_token_id is not None:
            ids.add(int(self.tokenizer.eos_token_id))
        gen = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        ids.update([gen] if isinstance(gen, int) else list(gen or []))
        return sorted(ids)

    @functools.cached_property
    def markers(self) -> tuple[str, ...]:
        """The tokenizer's special and added tokens as text (``<|user|>``, ``<tool_call>``...): never
        part of a completion's text."""
        return special_texts(self.tokenizer)

    @property
    def is_toy(self) -> bool:
        """A character-level model verigym built itself (its vocabulary is ~110 characters), not a
        pretrained one: environments keep their tiny-model defaults (``Environment.real_model_args``)."""
        return len(self.tokenizer) < 1000

    @property
    def context_length(self) -> int:
        config = getattr(self.model, "config", None)
        return int(getattr(config, "max_position_embeddings", 0) or 1 << 20)

    def encode(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]] | None = None) -> list[int]:
        """Prompt token ids: the chat template applied, ending with the assistant cue.

        Memoised per (messages, tools, template): the G samples of a GRPO group, and a task seen
        again, render and tokenise their prompt once (rendering is ~1 ms, more than a tiny model's
        whole decode step of a row).
        """
        if not all(isinstance(m, Message) for m in messages):
            return encode_chat(self.tokenizer, messages, tools, tool_format=self.tool_format)
        key = (
            tuple(messages),
            json.dumps(tools, sort_keys=True, default=str) if tools else None,
            getattr(self.tokenizer, "chat_template", None),
            self.tool_format,
        )
        ids = self._encoded.get(key)
        if ids is None:
            ids = tuple(self._render_ids(messages, tools))
            if len(self._encoded) >= _ENCODE_CACHE:
                self._encoded.pop(next(iter(self._encoded)), None)  # oldest first
            self._encoded[key] = ids
        return list(ids)

    def _render_ids(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]] | None) -> list[int]:
        last = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
        if last > 0:  # a later turn: splice in the ids the model sampled (``_history``)
            text = render_chat(self.tokenizer, messages, tools, tool_format=self.tool_format)
            spliced = self._history.splice(self.tokenizer, lambda: self.encode(messages[:last], tools), text)
            if spliced is not None:
                return spliced
            ids: list[int] = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            return ids
        return encode_chat(self.tokenizer, messages, tools, tool_format=self.tool_format)

    def clear_encode_cache(self) -> None:
        """Forget the memoised prompt token ids (benchmarks that compare against re-tokenising peers)."""
        self._encoded.clear()

    # ---- sampling -------------------------------------------------------------------------------

    def spec(
        self,
        prompt_ids: list[int],
        sampling: Sampling,
        seed: int | None = None,
        early_stop: EarlyStop | None = None,
        row: int = 0,
        constraint: Constraint | None = None,
    ) -> RowSpec:
        """A row for ``run``/``submit``: validates lengths; a missing seed becomes a fresh random one.
        ``constraint``: the grammar the row must follow (``constraint``)."""
        if sampling.max_tokens < 1:
            raise PolicyError("bad_request", f"max_tokens must be at least 1, got {sampling.max_tokens}")
        room = self.context_length - len(prompt_ids)
        if room < 1:
            raise PolicyError(
                "context_length",
                f"prompt has {len(prompt_ids)} tokens; the model's context is {self.context_length}",
            )
        return RowSpec(
            prompt_ids=list(prompt_ids),
            max_tokens=min(sampling.max_tokens, room),
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            top_k=sampling.top_k or 0,
            stop=tuple(sampling.stop),
            seed=random.getrandbits(63) if seed is None else seed,
            top_logprobs=sampling.top_logprobs,
            early_stop=early_stop,
            early_stop_row=row,
            constraint=constraint,
        )

    @functools.cached_property
    def grammars(self) -> Grammars:
        """The compiled structured-output grammars of this tokenizer (``_grammar``)."""
        vocab = int(getattr(getattr(self.model, "config", None), "vocab_size", 0) or len(self.tokenizer))
        return Grammars(self.tokenizer, max(vocab, len(self.tokenizer)), self.eos_ids)

    def constraint(
        self, sampling: Sampling, tools: Sequence[dict[str, Any]] | None = None
    ) -> Constraint | None:
        """The grammar ``sampling``'s ``response_format`` / ``tool_choice`` ask for (None: none); raises
        ``PolicyError("bad_request")`` naming the field when it is malformed or cannot be enforced."""
        if sampling.response_format is None and sampling.tool_choice in (None, "auto", "none"):
            return None
        return self.grammars.constraint(
            response_format=sampling.response_format,
            tool_choice=sampling.tool_choice,
            tools=tools,
            parallel_tool_calls=sampling.parallel_tool_calls,
            tool_format=self.tool_format,
        )

    def run(
        self, specs: Sequence[RowSpec], adapter: str | None = _AS_IS, **hooks: Unpack[PassHooks]
    ) -> list[RowResult]:
        """Generate ``specs`` synchronously (chunks of ``max_batch_rows``) with ``adapter`` active
        (None: the base model with adapters disabled; by default the model as it is). ``hooks``
        (``admit``, ``deliver``, ``flush``, ``headroom``, ``stop``): continuous batching (see ``run_rows``)."""
        import torch

        flush = hooks.get("flush")
        out: list[RowResult] = []
        with self._lock, self._adapter_active(adapter), torch.inference_mode():
            was_training = bool(getattr(self.model, "training", False))
            if was_training:  # eval() walks every module: skipped when already in eval mode
                self.model.eval()
            try:
                for start in range(0, len(specs), self.max_batch_rows):
                    self.passes += 1
                    out += run_rows(
                        self.model,
                        self.tokenizer,
                        specs[start : start + self.max_batch_rows],
                        eos_ids=self.eos_ids,
                        pad_id=self._pad_id(),
                        processed_logprobs=self.logprobs_mode == "processed",
                        fast=self.fast_path,
                        **hooks,
                    )
                    if flush is not None and start + self.max_batch_rows < len(specs):
                        flush()  # this chunk's rows need not wait for the next chunk
            finally:
                if was_training:
                    self.model.train(True)
        return out

    def completion(
        self, spec: RowSpec, result: RowResult, *, parse_tools: bool = False, version: int | None = None
    ) -> Completion:
        """The ``Completion`` of one generated row (text decoded, stop strings cut, tool calls parsed)."""
        text = self.tokenizer.decode(result.token_ids, skip_special_tokens=True)
        if result.finish == "stop_string":
            cuts = [text.find(s) for s in spec.stop if s and s in text]
            text = text[: min(cuts)] if cuts else text
        finish = _FINISH[result.finish]
        calls: tuple[Any, ...] = ()
        bad = 0  # malformed tool-call blocks, kept in the text and flagged in ``malformed``
        if parse_tools:
            text, calls, bad = TOOL_FORMATS[self.tool_format].parse(text, salt=str(spec.seed))
            if calls and result.finish == "eos":
                finish = "tool_calls"
        text = strip_markers(text, self.markers)
        prompt_ids, completion_ids = tuple(spec.prompt_ids), tuple(result.token_ids)
        n_prompt, n_out = len(prompt_ids), len(completion_ids)
        self._history.remember(prompt_ids, completion_ids)
        values: dict[str, Any] = {
            "text": text,
            "tool_calls": calls,
            "finish_reason": finish,
            "prompt_token_ids": prompt_ids,
            "completion_token_ids": completion_ids,
            "logprobs": tuple(result.logprobs),
            "top_logprobs": tuple(result.top_logprobs) if spec.top_logprobs else None,
            "token_ids_exact": True,
            "usage": _trusted(Usage, {"prompt_tokens": n_prompt, "completion_tokens": n_out}),
            "model": self.active_adapter or self.name,
            "policy_version": self.version if version is None else version,
            "malformed": ("tool_call",) * bad,
            "constrained": None if spec.constraint is None else spec.constraint.kind,
        }
        if calls or spec.top_logprobs:
            return Completion(**values)
        # The RL hot path: every value is already its field's type (str, tuples of the sampler's
        # ints and floats), so validating would only copy them (~5 µs of a ~10 µs call).
        return _trusted(Completion, values)

    def generate(
        self,
        prompts: Sequence[Sequence[Message]],
        sampling: Sampling,
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        seeds: Sequence[int | None] | None = None,
        early_stop: EarlyStop | None = None,
    ) -> list[Completion]:
        """One completion per prompt row, all in one batched pass (``sampling.n`` is ignored here).

        Row ``i`` uses ``seeds[i]`` (random when None); the same row with the same seed gives the same
        sample whether it runs alone or in a batch. ``early_stop`` is called per step (see ``EarlyStop``).
        """
        if seeds is not None and len(seeds) != len(prompts):
            raise ValueError(f"seeds has {len(seeds)} entries for {len(prompts)} prompts")
        version = self.version
        grammar = self.constraint(sampling, tools)
        specs = [
            self.spec(
                self.encode(p, tools), sampling, None if seeds is None else seeds[i], early_stop, i, grammar
            )
            for i, p in enumerate(prompts)
        ]
        results = self.run(specs, self._adapter)
        parse = bool(tools) and sampling.tool_choice != "none"
        return [
            self.completion(s, r, parse_tools=parse, version=version)
            for s, r in zip(specs, results, strict=True)
        ]

    async def complete_n(self, messages: Sequence[Message], **kw: Unpack[PolicyArgs]) -> list[Completion]:
        """``sampling.n`` samples of one prompt (seeds ``seed, seed+1, ...``), prefilled once and
        micro-batched with concurrent calls (``complete`` is the one-sample case)."""
        tools, sampling = kw.get("tools"), kw["sampling"]
        version, adapter = self.version, self._adapter
        ids = self.encode(messages, tools)
        grammar = self.constraint(sampling, tools)
        seeds = [None if sampling.seed is None else sampling.seed + i for i in range(max(1, sampling.n))]
        specs = [self.spec(ids, sampling, s, constraint=grammar) for s in seeds]
        results = await self.submit(specs, adapter)
        parse = bool(tools) and sampling.tool_choice != "none"
        return [
            self.completion(s, r, parse_tools=parse, version=version)
            for s, r in zip(specs, results, strict=True)
        ]

    def score(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        temperature: float = 1.0,
        top: int = 0,
        adapter: str | None = _AS_IS,
    ) -> list[Scored]:
        """The logprob of every token after the first of each of ``prompts`` (``echo`` on
        ``/v1/completions``), from the distribution sampled tokens' logprobs come from (module doc)."""
        was_training = bool(getattr(self.model, "training", False))
        with self._lock, self._adapter_active(adapter):
            if was_training:
                self.model.eval()
            try:
                return prompt_logprobs(
                    self.model, prompts, temperature=temperature, top=top, pad_id=self._pad_id(),
                    max_rows=self.max_batch_rows,
                )  # fmt: skip
            finally:
                if was_training:
                    self.model.train(True)

    def _pad_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        if pad is None:
            pad = self.eos_ids[0] if self.eos_ids else 0
        return int(pad)
