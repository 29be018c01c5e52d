"""Rubric judge: an LLM (any ``Policy``) decides each rubric criterion; points make the score.

Every criterion is judged in its own call with a fixed prompt (``JUDGE_SYSTEM``/``JUDGE_TEMPLATE``,
HealthBench's format): the conversation, the response, the criterion and its points; the judge
answers ``{"explanation": str, "criteria_met": bool}``. Parsing is lenient about wrapping (code
fences, prose around the object, ``"true"`` as a string, ``met`` for ``criteria_met``) and strict
about meaning: no boolean verdict → one retry → an *error*. A timeout or failed request is retried
when it is retryable and is otherwise an error. Errors are never zeros: the Grade is failed
with the reason, so the sample carries no reward.

Scores: Σ met points / Σ positive points, clipped to [0, 1]; parents are weighted means of their
children (see ``_rubric``). The judge sees replies without ``<think>`` reasoning. Verdicts are cached by (prompt, completion, criterion) in a
``JudgeCache`` (in memory, optionally persisted as JSONL). ``evaluate_judge`` runs a judge on
human-labeled items and ``judge_agreement`` measures it (precision, recall, F1 with "met" as the
positive class; undecided items counted as errors).

Suite line format (``tests/suites/judge.jsonl``; judged by a deterministic scripted judge that
marks a criterion met when every double-quoted phrase in it occurs in the response)::

    {"id": str, "label": bool, "prompt": str, "response": str, "rubric": [...] | {...},
     "threshold"?: float}     # accept iff score >= threshold (default 0.5)
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verigym._threads import run_blocking
from verigym.graders.families import GraderFamily
from verigym.graders.format import strip_think
from verigym.graders.judge._eval import JudgeAgreement, judge_agreement
from verigym.graders.judge._rubric import Criterion, RubricNode, parse_rubric, score_node
from verigym.policies.base import Policy, PolicyError
from verigym.rubric import Grader
from verigym.types import Completion, Grade, Message, Sampling, Task, Trajectory, Turn

__all__ = [
    "BENCH",
    "JUDGE_SYSTEM",
    "JUDGE_TEMPLATE",
    "Criterion",
    "JudgeAgreement",
    "JudgeCache",
    "JudgeError",
    "RubricNode",
    "Verdict",
    "bench_verdict",
    "evaluate_judge",
    "judge_agreement",
    "judge_criteria",
    "judge_grader",
    "judge_messages",
    "parse_rubric",
    "parse_verdict",
    "quoted_phrase_verdict",
    "score_node",
]

JUDGE_SYSTEM = (
    "You are a careful, strict grader. You decide whether one rubric criterion is met by the "
    "last response in a conversation. Judge only that criterion. A criterion with negative points "
    "describes undesirable behaviour: it is met when the response DOES show that behaviour. "
    'Reply with only a JSON object: {"explanation": "<one or two sentences>", "criteria_met": true or false}.'
)
JUDGE_TEMPLATE = """<<conversation>>
{conversation}
<</conversation>>

<<response>>
{response}
<</response>>

<<criterion points="{points}">>
{criterion}
<</criterion>>

Is the criterion met by the response? Reply with only the JSON object."""


class JudgeError(RuntimeError):
    """The judge could not give a verdict (timeout, failed request, unparseable reply)."""


@dataclass(frozen=True)
class Verdict:
    met: bool
    explanation: str = ""


_TRUE = {"true", "yes", "met", "1"}
_FALSE = {"false", "no", "not met", "unmet", "0"}


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        v = value.strip().lower()
        return True if v in _TRUE else False if v in _FALSE else None
    return None


def parse_verdict(text: str) -> Verdict | None:
    """The verdict in a judge's reply, or None when it holds no boolean ``criteria_met``."""
    decoder = json.JSONDecoder()
    found: list[Verdict] = []
    for i, ch in enumerate(text):
        if ch != "{":
            continue
        try:
            obj, _ = decoder.raw_decode(text, i)
        except ValueError:
            continue
        if isinstance(obj, dict):
            raw = obj.get("criteria_met", obj.get("met"))
            met = _as_bool(raw)
            if met is not None:
                found.append(Verdict(met, str(obj.get("explanation", ""))))
    if found:
        if len({v.met for v in found}) > 1:
            return None  # contradictory verdicts
        return found[-1]
    m = re.findall(r'"?criteria_met"?\s*[:=]\s*"?(true|false)\b', text, flags=re.IGNORECASE)
    if m and len({x.lower() for x in m}) == 1:
        return Verdict(m[0].lower() == "true", "")
    return None


def _render(messages: Sequence[Message]) -> str:
    lines = []
    for m in messages:
        text = strip_think(m.content) if m.role == "assistant" else m.content
        for call in m.tool_calls:
            text += f"\n[tool call {call.name}({call.arguments})]"
        lines.append(f"{m.role}: {text}")
    return "\n\n".join(lines)


def judge_messages(conversation: str, response: str, criterion: Criterion) -> list[Message]:
    """The fixed judge prompt for one criterion."""
    points = f"{criterion.points:g}"
    user = JUDGE_TEMPLATE.format(
        conversation=conversation, response=response, criterion=criterion.text, points=points
    )
    return [Message(role="system", content=JUDGE_SYSTEM), Message(role="user", content=user)]


class JudgeCache:
    """Verdicts by (prompt, completion, criterion); ``path`` persists them as JSONL.

    The key does not name the judge: use one cache (file) per judge model and prompt version.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self._data: dict[str, Verdict] = {}
        self._path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self.hits = 0
        if self._path is not None and self._path.exists():
            for n, line in enumerate(self._path.read_text().splitlines(), start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    self._data[row["key"]] = Verdict(bool(row["met"]), str(row.get("explanation", "")))
                except (ValueError, KeyError) as exc:
                    raise ValueError(f"{self._path}:{n}: bad judge cache line ({exc})") from None

    @staticmethod
    def key(prompt: str, completion: str, criterion: Criterion) -> str:
        blob = json.dumps([prompt, completion, criterion.text, criterion.points])
        return hashlib.sha256(blob.encode()).hexdigest()

    def get(self, key: str) -> Verdict | None:
        with self._lock:
            v = self._data.get(key)
            self.hits += v is not None
            return v

    def put(self, key: str, verdict: Verdict) -> None:
        with self._lock:
            self._data[key] = verdict
            if self._path is not None:
                row = {"key": key, "met": verdict.met, "explanation": verdict.explanation}
                with self._path.open("a") as fh:
                    fh.write(json.dumps(row) + "\n")

    def __len__(self) -> int:
        return len(self._data)


async def _ask(
    policy: Policy, messages: list[Message], sampling: Sampling, retries: int, timeout: float | None
) -> Verdict:
    reason = "no attempt"
    for _ in range(retries + 1):
        try:
            coro = policy.complete(messages, sampling=sampling)
            completion = await (asyncio.wait_for(coro, timeout) if timeout else coro)
        except TimeoutError:
            reason = f"judge timed out after {timeout}s"
            continue
        except PolicyError as exc:
            reason = f"judge request failed ({exc.kind}): {exc}"
            if not exc.retryable:
                break
            continue
        verdict = parse_verdict(completion.text)
        if verdict is not None:
            return verdict
        reason = f"unparseable judge verdict: {completion.text[:200]!r}"
    raise JudgeError(reason)


async def judge_criteria(
    policy: Policy,
    conversation: str,
    response: str,
    criteria: Sequence[Criterion],
    *,
    cache: JudgeCache | None = None,
    sampling: Sampling | None = None,
    retries: int = 1,
    timeout: float | None = 120.0,
    concurrency: int = 8,
) -> list[Verdict]:
    """One verdict per criterion (``JudgeError`` when any cannot be had)."""
    samp = sampling or Sampling(temperature=0.0, max_tokens=512)
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(c: Criterion) -> Verdict:
        key = JudgeCache.key(conversation, response, c)
        if cache is not None and (hit := cache.get(key)) is not None:
            return hit
        async with gate:
            verdict = await _ask(policy, judge_messages(conversation, response, c), samp, retries, timeout)
        if cache is not None:
            cache.put(key, verdict)
        return verdict

    results = await asyncio.gather(*(one(c) for c in criteria), return_exceptions=True)
    errors = [
        f"criterion {c.id or c.text[:40]!r}: {r}"
        for c, r in zip(criteria, results, strict=True)
        if isinstance(r, BaseException)
    ]
    if errors:
        raise JudgeError("; ".join(errors))
    return [r for r in results if isinstance(r, Verdict)]


def judge_grader(
    policy: Policy,
    rubric: Any = None,
    *,
    cache: JudgeCache | None = None,
    sampling: Sampling | None = None,
    retries: int = 1,
    timeout: float | None = 120.0,
    concurrency: int = 8,
    weight: float = 1.0,
    name: str = "judge",
) -> Grader:
    """A Grader scoring the trajectory's response on a rubric (None: ``task.info["rubric"]``)."""
    fixed = parse_rubric(rubric) if rubric is not None else None
    store = cache if cache is not None else JudgeCache()

    async def grade(task: Task, trajectory: Trajectory) -> Grade:
        node = (
            fixed
            if fixed is not None
            else parse_rubric(task.info.get("rubric"), where=f"task {task.id} rubric")
        )
        after = trajectory.messages[len(trajectory.prompt) :]
        response = strip_think(after[-1].content) if len(after) == 1 else _render(after)  # no reasoning
        criteria = node.leaves()
        try:
            verdicts = await judge_criteria(
                policy, _render(trajectory.prompt), response, criteria,
                cache=store, sampling=sampling, retries=retries, timeout=timeout, concurrency=concurrency,
            )  # fmt: skip
        except JudgeError as exc:
            return Grade.failed(str(exc))
        score = score_node(node, [v.met for v in verdicts])
        detail = [
            {"criterion": c.text[:120], "points": c.points, "met": v.met, "why": v.explanation[:200]}
            for c, v in zip(criteria, verdicts, strict=True)
        ]
        return Grade(score=score, detail=json.dumps(detail))

    return Grader(grade, weight=weight, name=name, timeout=None)


async def evaluate_judge(
    policy: Policy,
    items: Sequence[tuple[str, str, Any, bool]],
    *,
    cache: JudgeCache | None = None,
    sampling: Sampling | None = None,
    retries: int = 1,
    timeout: float | None = 120.0,
    concurrency: int = 8,
) -> JudgeAgreement:
    """Run the judge on human-labeled ``(conversation, response, criterion, human_met)`` items and
    measure agreement; items the judge could not decide are counted in ``errors``, not scored."""
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(conversation: str, response: str, criterion: Any) -> bool | None:
        c = parse_rubric([criterion]).criteria[0]
        async with gate:
            try:
                verdicts = await judge_criteria(
                    policy, conversation, response, [c],
                    cache=cache, sampling=sampling, retries=retries, timeout=timeout,
                )  # fmt: skip
            except JudgeError:
                return None
        return verdicts[0].met

    got = await asyncio.gather(*(one(conv, resp, crit) for conv, resp, crit, _ in items))
    pairs = [(g, bool(item[3])) for g, item in zip(got, items, strict=True) if g is not None]
    agreement = judge_agreement([p for p, _ in pairs], [h for _, h in pairs])
    return dataclasses.replace(agreement, errors=len(items) - len(pairs))


def _section(text: str, tag: str) -> str:
    m = re.search(rf"<<{tag}[^>]*>>\n(.*?)\n<</{tag}>>", text, flags=re.S)
    return m.group(1) if m else ""


def quoted_phrase_verdict(messages: Sequence[Message]) -> str:
    """A deterministic judge for suites and tests: met iff every "quoted" phrase of the criterion
    occurs in the response as whole words (a criterion without quotes is never met)."""
    prompt = messages[-1].content
    response, criterion = _section(prompt, "response").casefold(), _section(prompt, "criterion")
    phrases = re.findall(r'"([^"]+)"', criterion)
    met = bool(phrases) and all(
        re.search(rf"(?<!\w){re.escape(p.casefold())}(?!\w)", response) for p in phrases
    )
    return json.dumps({"explanation": f"phrases {phrases}", "criteria_met": met})


def bench_verdict(line: dict[str, Any]) -> bool:
    """Accept when the scripted judge's rubric score reaches ``threshold``; a judge error raises."""
    from verigym.policies.scripted import ScriptedPolicy

    policy = ScriptedPolicy(quoted_phrase_verdict, name="quoted-phrase-judge")
    task = Task(id=str(line["id"]), prompt=(Message(role="user", content=str(line["prompt"])),))
    traj = Trajectory(task_id=task.id, prompt=list(task.prompt))
    text = str(line["response"])
    reply = Message(role="assistant", content=text)
    traj.turns.append(Turn(source="model", messages=[reply], completion=Completion(text=text)))
    grader = judge_grader(policy, line["rubric"])
    grade = run_blocking(grader.grade(task, traj))
    if grade.error is not None:
        raise JudgeError(grade.error)
    return grade.score >= float(line.get("threshold", 0.5))


BENCH = GraderFamily("judge", bench_verdict, suites=("judge.jsonl",))
