"""From the gateway's recorded calls to a trajectory: the main conversation, its branches, and the counts.

A call **continues** an earlier call when its prompt ids start with that call's prompt and sampled
completion ids (the program sent the conversation back with new messages after the reply): the
newest such call is its parent, and training merges the two into one sample with the sampled ids kept
(``train.samples``), never re-tokenised. A call whose messages extend an earlier call's conversation
(its messages, an assistant reply, more) while its ids do not is a ``prefix_break`` (the program or its
framework rewrote an earlier message, or a template re-rendered history): the conversation goes on, in
a training row of its own. For a policy without exact ids (a scripted oracle) the messages decide
``continue``. Any other call (after the first) is a **branch**, labelled with its parent (the call just
before it) and a kind read from its messages:

- ``compaction``: it keeps the conversation's opening message but has fewer messages than its parent
  (a summary replaced the history);
- ``rewrite``: it keeps the opening message otherwise (a rewritten history);
- ``sub_agent``: another opening message with tools (a sub-agent); ``auxiliary``: without tools.

The main conversation is the lineage of continues and prefix breaks ending at the last call of the first
call's line;
its turns are what graders read (model turns, and the tool results and user messages the program sent
back as ``env`` turns). Branch calls become ``branch`` turns: trained on, not graded as the
conversation. Each sample gets the rollout's advantage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from verigym.types import Message, Turn

if TYPE_CHECKING:
    from verigym.gateway import RecordedCall as Recorded

__all__ = ["CallLabel", "label_calls", "main_prompt", "trace_counts", "trace_turns"]


@dataclass(frozen=True)
class CallLabel:
    index: int
    kind: str  # "root", "continue", "prefix_break", "compaction", "rewrite", "sub_agent", "auxiliary"
    parent: int | None

    def as_dict(self) -> dict[str, Any]:
        return {"call": self.index, "kind": self.kind, "parent": self.parent}


def _ids(call: Recorded) -> tuple[list[int], list[int]]:
    c = call.completion
    return list(c.prompt_token_ids or ()), list(c.completion_token_ids or ())


def label_calls(calls: Sequence[Recorded]) -> list[CallLabel]:
    labels: list[CallLabel] = []
    for k, call in enumerate(calls):
        if k == 0:
            labels.append(CallLabel(k, "root", None))
            continue
        prompt, _ = _ids(call)
        exact = call.completion.token_ids_exact
        parent = None
        for j in range(k - 1, -1, -1):
            p_prompt, p_comp = _ids(calls[j])
            seen = p_prompt + p_comp
            if exact and seen and prompt[: len(seen)] == seen:
                parent = j
                break
        if parent is not None:
            labels.append(CallLabel(k, "continue", parent))
            continue
        said = next((j for j in range(k - 1, -1, -1) if _extends(call, calls[j])), None)
        if said is not None:  # the conversation goes on, but not its ids (or the policy gives none)
            labels.append(CallLabel(k, "prefix_break" if exact else "continue", said))
        else:
            labels.append(CallLabel(k, _branch_kind(calls[k - 1], call), k - 1))
    return labels


def _extends(call: Recorded, parent: Recorded) -> bool:
    """Whether ``call``'s messages are ``parent``'s, then an assistant reply, then more."""
    mine, theirs = call.messages, parent.messages
    return (
        len(mine) > len(theirs) + 1
        and _same(mine[: len(theirs)], theirs)
        and mine[len(theirs)].get("role") == "assistant"
    )


def _branch_kind(parent: Recorded, call: Recorded) -> str:
    mine, theirs = call.messages, parent.messages
    if mine and theirs and _same(mine[:1], theirs[:1]):
        return "compaction" if len(mine) < len(theirs) else "rewrite"
    return "sub_agent" if call.tools else "auxiliary"


def _same(a: Sequence[dict[str, Any]], b: Sequence[dict[str, Any]]) -> bool:
    return len(a) == len(b) and all(
        x.get("role") == y.get("role") and x.get("content") == y.get("content")
        for x, y in zip(a, b, strict=True)
    )


_ON_LINE = ("continue", "prefix_break")  # the conversation goes on (its ids may not: a prefix break)


def _main_line(labels: Sequence[CallLabel]) -> list[int]:
    """The calls of the main conversation: back from the last call in the root's lineage."""
    root_line: set[int] = set()
    for label in labels:
        if label.kind == "root" or (label.kind in _ON_LINE and label.parent in root_line):
            root_line.add(label.index)
    last = max(root_line)
    line = [last]
    while labels[line[-1]].parent is not None and labels[line[-1]].kind in _ON_LINE:
        line.append(labels[line[-1]].parent)  # type: ignore[arg-type]
    return line[::-1]


def main_prompt(calls: Sequence[Recorded], labels: Sequence[CallLabel]) -> list[Message] | None:
    """The prompt of the main conversation as the program sent it (its first call's messages), or None
    when a message does not read as a ``Message``."""
    first = calls[_main_line(labels)[0]].messages
    out = [Message.from_openai(m) for m in first]
    return None if any(m is None for m in out) else [m for m in out if m is not None]


def trace_turns(calls: Sequence[Recorded], labels: Sequence[CallLabel], answer: str) -> list[Turn]:
    """Branch turns first, then the main conversation's turns, then the answer when it differs from the
    model's last text (so ``Trajectory.final_text`` is the program's answer)."""
    line = _main_line(labels)
    on_line = set(line)
    turns = [
        Turn(source="branch", messages=[c.completion.as_message()], completion=c.completion)
        for c in calls
        if c.index not in on_line
    ]
    for n, k in enumerate(line):
        call = calls[k]
        if n > 0:
            sent = _after_last_assistant(call.messages)
            if sent:
                turns.append(Turn(source="env", messages=sent))
        turns.append(
            Turn(source="model", messages=[call.completion.as_message()], completion=call.completion)
        )
    last_text = calls[line[-1]].completion.text
    if answer.strip() and answer.strip() != last_text.strip():
        turns.append(Turn(source="answer", messages=[Message(role="assistant", content=answer)]))
    return turns


def _after_last_assistant(messages: Sequence[dict[str, Any]]) -> list[Message]:
    at = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    out = [Message.from_openai(m) for m in messages[at + 1 :] if m.get("role") in ("tool", "user")]
    return [m for m in out if m is not None]


def trace_counts(labels: Sequence[CallLabel], replayed: int) -> dict[str, int]:
    """Per rollout: calls, calls merged into an earlier sample, branches, prefix breaks, retries replayed."""
    kinds = [label.kind for label in labels]
    return {
        "calls": len(kinds),
        "merged": kinds.count("continue"),
        "branches": sum(k not in ("root", "continue") for k in kinds),
        "prefix_breaks": kinds.count("prefix_break"),
        "replayed": replayed,
    }
