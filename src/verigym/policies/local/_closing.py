"""Budget-aware closing of constrained rows: a row under a grammar (``_grammar``) that nears its
``max_tokens`` is steered to finish its structure in the tokens it has left, so that a JSON reply or a
forced tool call is cut at ``max_tokens`` only when it genuinely cannot be closed.

Without this a grammar only says what may come next, never when to stop: SmolLM2-135M-Instruct wrote
argument strings that it never closed and ran to ``max_tokens`` (8-11 of 200 forced calls), and a
reply cut inside a string is not JSON. vLLM, SGLang and llama.cpp return such a reply as it is
(``finish_reason: "length"``); xgrammar offers no shortest-completion query. What is done here:

**The closing plan.** From a row's matcher state a short completion is built on a fork of the matcher
(the row's own state is never touched): take the string the grammar forces (``find_jump_forward_string``);
where it forces nothing, take the first character of ``_PRIORITY`` the grammar accepts (closers first,
then separators, then the shortest values' first characters, whitespace last); until the grammar is
complete (``is_completed``). The bytes are cut into vocabulary tokens (longest match over the
tokenizer's decoded vocabulary) and the tokens are checked on a second fork, so a plan is a token
sequence the grammar is known to accept; ``need`` = its length + 1 (the end-of-sequence token). A state
the search cannot complete within ``_MOST_BYTES`` (an adversarial ``pattern``, say) has no plan: that row
is not steered and is cut at ``max_tokens`` like any row.

**Steering.** At each step, with ``left`` tokens allowed (this one included) and the row's plan of
``need`` tokens, the row decodes under its grammar mask alone while ``left > need + margin``. Within the
margin it is *closing*: the allowed set is the head of the plan (or the end-of-sequence token once the
grammar is complete) plus those of the most likely grammar-allowed tokens (at most ``_CANDIDATES``, until
they hold ``_COVER`` of the masked distribution's mass) after which a plan still fits
(``need' <= left - 1``); the unlikely rest is dropped unchecked. The plan's head always fits (its tail is a plan one shorter),
so a row that enters the closing window with ``need <= left`` ends whole within ``max_tokens``: the model
keeps writing its own content as long as the budget allows, then closes. ``margin`` is the row's
initial ``need`` clamped to 8..32: one token outside the window may open a structure whose closing
costs more than the margin (a key whose value is a large required object); that row may then be cut.
A row the closing cannot save ends with ``finish_reason="length"`` and ``Completion.constrained`` set
(its text is the cut structure, never claimed valid).

**Logprobs.** The closing restriction is applied to the logits before sampling, like the grammar mask
(``-inf`` outside the allowed set), so the token ids and logprobs a row records are those of the
distribution it was actually sampled from (a point mass gives logprob 0): RL's importance ratios stay
those of ``_grammar``'s note. The allowed set depends only on the row's own state and logits, so a
batched row is the row decoded alone, and rows without a grammar are never touched.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["Closer"]

_PRIORITY = tuple(
    s.encode()
    for s in ['"', "}", "]", ",", ":", "{", "[", "0", "t", "n", "f"]
    + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    + [chr(c) for c in range(ord("A"), ord("Z") + 1)]
    + list("123456789_-.+*/=<>()!?#@$%&';| \n\t")
) + tuple(bytes([b]) for b in range(0x80, 0xC0))  # continuations, for a state inside a UTF-8 character
_MOST_BYTES = 512  # the longest closing the search builds
_CANDIDATES = 16  # the most likely tokens checked for room to close, per closing step ...
_COVER = 0.99  # ... until they hold this share of the grammar-masked distribution (at temperature 1)
_MARGIN = (8, 32)  # the closing window beyond ``need``: the row's initial need, clamped to this range


class Closer:
    """The closing plans of one tokenizer's grammars (built once per ``Grammars``)."""

    def __init__(
        self, decoded_vocab: Sequence[bytes], special: Sequence[int], stop_ids: Sequence[int]
    ) -> None:
        skip = set(special) | set(stop_ids)
        self._ids: dict[bytes, int] = {}
        for i, raw in enumerate(decoded_vocab):
            b = bytes(raw)
            if b and i not in skip:
                self._ids.setdefault(b, i)
        self._longest = max((len(b) for b in self._ids), default=1)
        self.stop_ids = tuple(stop_ids)

    def tokens(self, text: bytes) -> list[int] | None:
        """``text`` as vocabulary tokens, longest match first (None: a byte no token covers)."""
        out, at = [], 0
        while at < len(text):
            for n in range(min(self._longest, len(text) - at), 0, -1):
                tok = self._ids.get(text[at : at + n])
                if tok is not None:
                    out.append(tok)
                    at += n
                    break
            else:
                return None
        return out

    def plan(self, matcher: Any) -> list[int] | None:
        """Tokens that complete ``matcher``'s grammar from its state (without the end-of-sequence
        token; [] when it is complete), checked on a fork; None when none was found."""
        if matcher.is_terminated():
            return None
        fork = matcher.fork()
        text = b""
        while not fork.is_completed():
            if len(text) > _MOST_BYTES:
                return None
            forced = fork.find_jump_forward_string().encode()
            if forced and fork.accept_string(forced):
                text += forced
                continue
            step = next((c for c in _PRIORITY if fork.accept_string(c)), None)
            if step is None:
                return None
            text += step
        tokens = self.tokens(text)
        if tokens is None:
            return None
        check = matcher.fork()
        if all(check.accept_token(t) for t in tokens) and check.is_completed():
            return tokens
        return None

    def need(self, matcher: Any) -> int | None:
        """Tokens needed to end the row whole from ``matcher``'s state (end-of-sequence included)."""
        plan = self.plan(matcher)
        return None if plan is None else len(plan) + 1

    def margin(self, matcher: Any) -> int:
        """The closing window of a row beyond its need, from its initial state."""
        first = self.need(matcher) or 0
        return min(max(first, _MARGIN[0]), _MARGIN[1])

    def restrict(self, logits: Any, matcher: Any, left: int, margin: int) -> None:
        """Narrow one row's (already grammar-masked) ``logits``, in place, to the tokens after which it
        can still end whole in ``left`` tokens, once it is within ``margin`` of needing them all."""
        plan = self.plan(matcher)
        if plan is None or left > len(plan) + 1 + margin:
            return
        import torch

        head = plan[0] if plan else self.stop_ids[0]
        keep = {head}
        top = logits.topk(min(_CANDIDATES, logits.shape[-1]))
        shares = (top.values - logits.logsumexp(-1)).exp().tolist()
        covered = 0.0
        for share, tok in zip(shares, top.indices.tolist(), strict=True):
            if share <= 0.0 or covered >= _COVER:  # the rest of the grammar's mass: not checked, not kept
                break
            covered += share
            if tok in keep:
                continue
            if tok in self.stop_ids:  # allowed by the grammar only once it is complete: ends the row now
                keep.add(tok)
                continue
            fork = matcher.fork()
            if fork.accept_token(tok):
                after = self.plan(fork)
                if after is not None and len(after) + 1 <= left - 1:
                    keep.add(tok)
        allowed = torch.zeros_like(logits, dtype=torch.bool)
        allowed[list(keep)] = True
        logits.masked_fill_(~allowed, float("-inf"))
