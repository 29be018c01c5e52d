"""Token-exact multi-turn prompts for ``LocalPolicy``: each turn's prompt is the previous prompt, the ids
the model sampled, then the rest as the chat template renders it.

Re-tokenising the history text is not enough with a BPE tokenizer: a model may sample a split that the
tokenizer would never produce (``"12" + "3"`` where it encodes ``"123"``), so the next prompt would show
the model ids it never emitted and training would score tokens nobody sampled. ``TurnHistory`` keeps the
completion ids sampled after each prompt; when a later prompt's rendered text starts with that prompt
and a completion's text (special tokens included), the prompt is spliced from those ids. Where the
template re-renders history differently (e.g. strips earlier reasoning) nothing matches and the prompt is
tokenised as rendered; ``Trajectory.prefix_breaks`` and ``summary.json`` count those turns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["TurnHistory"]

_PROMPTS = 4096  # prompts whose sampled completions are kept (oldest dropped first)
_PER_PROMPT = 64  # completions kept per prompt (a GRPO group's samples)


class TurnHistory:
    """Completion ids sampled after each prompt, to splice later turns' prompts from (module doc)."""

    def __init__(self) -> None:
        self._after: dict[tuple[int, ...], list[tuple[int, ...]]] = {}

    def remember(self, prompt_ids: tuple[int, ...], completion_ids: tuple[int, ...]) -> None:
        seen = self._after.get(prompt_ids)
        if seen is None:
            if len(self._after) >= _PROMPTS:
                self._after.pop(next(iter(self._after)), None)
            seen = self._after[prompt_ids] = []
        elif len(seen) >= _PER_PROMPT:
            seen.pop(0)
        seen.append(completion_ids)

    def splice(self, tokenizer: Any, before: Callable[[], list[int]], text: str) -> list[int] | None:
        """Ids for the prompt ``text`` that reuse what was sampled after ``before()`` (the ids of the prompt
        up to the last assistant turn), or None when no sampled completion continues into ``text``."""
        if not self._after:
            return None
        prefix = tuple(before())
        best: tuple[int, ...] | None = None
        cut = 0
        for completion in self._after.get(prefix, ()):
            ids = prefix + completion
            seen = tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
            if len(seen) > cut and text.startswith(seen):
                best, cut = ids, len(seen)
        if best is None:
            return None
        rest: list[int] = (
            tokenizer(text[cut:], add_special_tokens=False)["input_ids"] if cut < len(text) else []
        )
        return list(best) + rest
