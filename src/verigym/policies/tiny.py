"""The tiny offline models: a character-level tokenizer with a short chat template, and small
Llama-style ``transformers`` models built from a config (no download).

``create(size, out_dir)`` writes a directory that loads exactly like a hub model::

    AutoModelForCausalLM.from_pretrained(out_dir)
    AutoTokenizer.from_pretrained(out_dir)

The chat template is deliberately short, so a tiny model learns ``12+34=`` → ``46`` in seconds::

    <|system|>...<|end|><|user|>12+34=<|end|><|assistant|>46<|end|>

``<|end|>`` is the end-of-sequence token. Tool schemas (when given) are rendered as a system block
``<|system|>tools:[...]<|end|>``; an assistant's tool calls are rendered (and must be generated) as
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``; a tool result is a ``<|tool|>`` turn.
"""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from transformers import LlamaForCausalLM, PreTrainedTokenizerFast

__all__ = [
    "BOS",
    "CHAT_TEMPLATE",
    "EOS",
    "PAD",
    "SIZES",
    "SPECIAL_TOKENS",
    "TOOL_CALL_CLOSE",
    "TOOL_CALL_OPEN",
    "UNK",
    "Size",
    "build_model",
    "build_tokenizer",
    "count_parameters",
    "create",
    "vocabulary",
]

Size = Literal["tiny", "small", "base"]

PAD, BOS, EOS, UNK = "<|pad|>", "<|bos|>", "<|end|>", "<|unk|>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>", "<|tool|>")
TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"
SPECIAL_TOKENS = (PAD, BOS, EOS, UNK, *ROLE_TOKENS)

# Shapes per size: (hidden, layers, heads, intermediate). Parameter counts with the ~110-token vocabulary:
# tiny ≈ 0.41M, small ≈ 3.0M, base ≈ 19M.
SIZES: dict[str, dict[str, int]] = {
    "tiny": {"hidden_size": 64, "num_hidden_layers": 6, "num_attention_heads": 4, "intermediate_size": 256},
    "small": {"hidden_size": 192, "num_hidden_layers": 5, "num_attention_heads": 6, "intermediate_size": 768},
    "base": {"hidden_size": 384, "num_hidden_layers": 8, "num_attention_heads": 6, "intermediate_size": 1536},
}

CHAT_TEMPLATE = (
    "{%- if tools %}<|system|>tools:{{ tools | tojson }}<|end|>{% endif %}"
    "{%- for m in messages %}"
    "<|{{ m['role'] }}|>"
    "{%- if m['content'] is string %}{{ m['content'] }}"
    "{%- elif m['content'] %}{% for part in m['content'] %}{% if part['type'] == 'text' %}{{ part['text'] }}"
    "{% endif %}{% endfor %}{% endif %}"
    "{%- if m['tool_calls'] is defined and m['tool_calls'] %}{% for tc in m['tool_calls'] %}"
    "{%- set f = tc['function'] if tc['function'] is defined else tc %}"
    '<tool_call>{"name": "{{ f["name"] }}", "arguments": '
    "{% if f['arguments'] is string %}{{ f['arguments'] }}{% else %}{{ f['arguments'] | tojson }}{% endif %}"
    "}</tool_call>{% endfor %}{% endif %}"
    "<|end|>"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}<|assistant|>{% endif %}"
)


def vocabulary() -> list[str]:
    """The ordinary (non-special) tokens: printable ASCII characters, newline and tab, in a fixed order."""
    chars = string.digits + string.ascii_letters + string.punctuation + " \n\t"
    return list(dict.fromkeys(chars))


def build_tokenizer() -> PreTrainedTokenizerFast:
    """A character-level ``PreTrainedTokenizerFast`` with the special tokens and the chat template.

    Every character is one token; characters outside the vocabulary become ``<|unk|>``. The
    ``<tool_call>``/``</tool_call>`` markers are single added (non-special) tokens, so they survive
    ``skip_special_tokens=True``. Decoding concatenates characters (no spaces inserted).
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = list(SPECIAL_TOKENS)
    vocab = {tok: i for i, tok in enumerate([*specials, TOOL_CALL_OPEN, TOOL_CALL_CLOSE, *vocabulary()])}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        unk_token=UNK,
        additional_special_tokens=list(ROLE_TOKENS),
        padding_side="left",
        clean_up_tokenization_spaces=False,
        model_max_length=2048,
    )
    tok.add_tokens([TOOL_CALL_OPEN, TOOL_CALL_CLOSE])
    tok.chat_template = CHAT_TEMPLATE
    return tok


def build_model(
    size: Size | str = "tiny",
    tokenizer: PreTrainedTokenizerFast | None = None,
    seed: int = 0,
    **overrides: Any,
) -> LlamaForCausalLM:
    """A randomly initialised ``LlamaForCausalLM`` of the named size (``overrides`` change config fields).

    Initialisation is seeded and does not disturb the global torch RNG state.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    if size not in SIZES:
        raise ValueError(f"unknown model size {size!r}; expected one of {', '.join(SIZES)}")
    tok = tokenizer if tokenizer is not None else build_tokenizer()
    shape: dict[str, Any] = {**SIZES[size], **overrides}
    shape.setdefault("num_key_value_heads", shape["num_attention_heads"])
    config = LlamaConfig(
        vocab_size=len(tok),
        max_position_embeddings=2048,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=False,
        **shape,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.bos_token_id = tok.bos_token_id
    model.eval()
    return model


def count_parameters(model: Any) -> int:
    """The number of parameters of a torch module."""
    return int(sum(p.numel() for p in model.parameters()))


def create(size: Size | str, out_dir: str | Path, seed: int = 0) -> Path:
    """Build tokenizer + model of ``size`` and ``save_pretrained`` both into ``out_dir``; returns the path.

    A small ``verigym.json`` beside them records the size, seed and parameter count.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer()
    model = build_model(size, tok, seed)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    meta = {"kind": "verigym-tiny", "size": size, "seed": seed, "parameters": count_parameters(model)}
    (out / "verigym.json").write_text(json.dumps(meta, indent=2) + "\n")
    return out
