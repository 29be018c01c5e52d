"""verigym's in-house inference engine: ``LocalPolicy``, a transformers causal LM in-process with exact
token ids and logprobs, and the parts under it that ``verigym serve`` shares.

- ``policy``: ``LocalPolicy`` (loading, prompt encoding, ``generate``/``complete``/``complete_n``,
  ``run``/``submit`` for rows, ``score`` for prompt logprobs); its module doc states the logprob, stop
  and training-in-place semantics.
- ``_engine``: the batched sampling loop (left-padded rows, KV cache, shared prefills, per-row
  counter-based randomness, continuous batching); ``_fast_llama``: the lean Llama decoder it uses
  where it applies (same numbers); ``release_decode_copies`` drops its weight copies (the trainer,
  before an update that makes them stale).
- ``_batcher``: the per-event-loop request queue and ``submit`` over it (micro-batching, joining a
  running pass); ``_loading``: loading a model and its tokenizer with the one device and dtype
  rule, public as ``loading`` (the opener, ``policies.default``, and training use it).
- ``_chat`` / ``_toolformats``: chat rendering with the tokenizer's template and the tool-call
  formats (Hermes, Llama-3, Mistral, SmolLM2); public as ``chat``, which ``serve`` and SFT import.
- ``_history``: token-exact multi-turn prompts; ``_score``: prompt scoring (``echo`` logprobs);
  ``_lora``: LoRA adapters, public as ``lora``.

``verigym.policies.local`` was one module before; everything it exported is exported here, and
``verigym.policies.chat`` / ``verigym.policies.lora`` are the old paths of ``chat`` / ``lora`` (until
verigym 0.3, ``verigym._deprecated``).
"""

from verigym.policies.local._engine import EarlyStop, RowResult, RowSpec
from verigym.policies.local._fast_llama import release as release_decode_copies
from verigym.policies.local._score import Scored
from verigym.policies.local.policy import LocalPolicy

__all__ = ["EarlyStop", "LocalPolicy", "RowResult", "RowSpec", "Scored", "release_decode_copies"]
