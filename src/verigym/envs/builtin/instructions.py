"""The built-in ``instructions`` environment: writing prompts with 1-4 IFEval-style constraints.

**Task.** "Write a short blog post about community gardens." plus ``level`` verifiable
constraints (Zhou et al. 2023, "Instruction-Following Evaluation for Large Language Models"),
phrased as IFEval phrases them. The constraint list, in the instruction grader's format
(``[{"id", "kwargs"}]``), is ``Task.info["instructions"]`` — shown in the prompt on purpose, so
it is a public info key.

**Instruction types used** (those whose satisfying text the oracle can construct, and that can
be combined without contradiction): ``keywords:existence``, ``keywords:frequency``,
``keywords:forbidden_words``, ``length_constraints:number_words``,
``length_constraints:number_sentences``, ``length_constraints:number_paragraphs``,
``detectable_format:multiple_sections``, ``detectable_content:number_placeholders``,
``detectable_content:postscript``, ``detectable_format:number_bullet_lists``,
``detectable_format:number_highlighted_sections``, ``detectable_format:title``,
``startend:end_checker``, ``startend:quotation``, ``change_case:english_lowercase``,
``change_case:english_capital``, ``punctuation:no_comma``. Mutually exclusive groups (at most
one per prompt): paragraphs/sections; words/sentences; end phrase/quotation; the case rules
(and a case rule excludes sections, whose marker is case-sensitive). Not used: language,
letter frequency, capital-word counts, nth-paragraph, JSON, constrained answers, two
responses and repeat-the-prompt (they contradict the others or cannot be combined freely).

**Harness.** Single-turn.

**Graders** (``graders.instructions``): ``followed`` — the fraction of instructions followed
(instruction-level accuracy, weight 0.3) — and ``all_followed`` — 1 only when every instruction
is followed (prompt-level accuracy, weight 0.7). ``mode`` picks IFEval's strict or loose checking.

**Difficulty.** ``level`` = the number of constraints per prompt (1-4); ``mode`` strict/loose.
The oracle composes a text that satisfies every constraint (``compose``); the null policy
answers nothing.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Sequence
from typing import Any

from verigym.envs._args import choice_arg, int_arg
from verigym.envs.base import SingleTurnEnv
from verigym.envs.procedural import ProceduralEnv
from verigym.graders.instructions import check_instruction, instructions_rubric
from verigym.policies.base import Policy
from verigym.policies.scripted import ScriptedPolicy
from verigym.types import Message, Task

__all__ = ["INSTRUCTION_TYPES", "InstructionsEnv", "compose", "render"]

_P = "length_constraints:"
INSTRUCTION_TYPES = (
    "keywords:existence",
    "keywords:frequency",
    "keywords:forbidden_words",
    _P + "number_words",
    _P + "number_sentences",
    _P + "number_paragraphs",
    "detectable_format:multiple_sections",
    "detectable_content:number_placeholders",
    "detectable_content:postscript",
    "detectable_format:number_bullet_lists",
    "detectable_format:number_highlighted_sections",
    "detectable_format:title",
    "startend:end_checker",
    "startend:quotation",
    "change_case:english_lowercase",
    "change_case:english_capital",
    "punctuation:no_comma",
)
_GROUPS = [
    {_P + "number_paragraphs", "detectable_format:multiple_sections"},
    {_P + "number_words", _P + "number_sentences"},
    {"startend:end_checker", "startend:quotation"},
    {"change_case:english_lowercase", "change_case:english_capital", "detectable_format:multiple_sections"},
]
_TOPICS = [
    "community gardens",
    "learning to swim as an adult",
    "the history of lighthouses",
    "a rainy day in the city",
    "why people keep journals",
    "the first day at a new job",
    "building a birdhouse",
    "the joy of train travel",
    "caring for houseplants",
    "a small town bakery",
    "winter hiking safety",
    "how bees make honey",
    "starting a book club",
    "the sound of the sea at night",
    "repairing an old bicycle",
]
_FORMS = [
    "a short blog post",
    "a letter to a friend",
    "a short essay",
    "a product description",
    "a diary entry",
]
_KEYWORDS = ["harmony", "lantern", "compass", "velvet", "orchard", "horizon", "ribbon", "meadow", "anchor",
             "puzzle", "glacier", "thunder", "saffron", "marble"]  # fmt: skip
_FORBIDDEN = ["very", "really", "basically", "literally", "actually", "stuff", "amazing", "awesome", "nice"]
_ENDS = [
    "Is there anything else I can help with?",
    "Let me know if you have additional questions.",
    "Peace out.",
]
_SUBJ = ["the garden", "a neighbour", "the morning light", "our team", "the old library", "a small river",
         "the city council", "a curious child", "the weekend market", "every visitor"]  # fmt: skip
_VERB = ["brings", "shapes", "changes", "supports", "reveals", "invites", "needs", "creates"]
_OBJ = ["new ideas", "quiet moments", "simple habits", "shared stories", "better plans", "fresh energy",
        "honest questions", "gentle progress"]  # fmt: skip
_TAIL = ["over time", "in the spring", "for the whole street", "without much effort", "day after day",
         "at the right moment", "in surprising ways"]  # fmt: skip
_KW_SENT = ["The word {k} comes to mind first.", "A {k} can change the mood.", "I keep thinking of the {k}.",
            "Nothing beats a {k} at dusk.", "Somebody once painted a {k} for me.", "The {k} stays with us."]  # fmt: skip


def _spec(rng: random.Random, iid: str, words: list[str]) -> dict[str, Any]:
    """Random kwargs for ``iid``; ``words`` is the pool of unused keywords (consumed)."""
    if iid == "keywords:existence":
        return {"keywords": [words.pop(), words.pop()]}
    if iid == "keywords:frequency":
        rel = rng.choice(["at least", "less than"])
        return {"keyword": words.pop(), "frequency": rng.randint(2, 4), "relation": rel}
    if iid == "keywords:forbidden_words":
        return {"forbidden_words": rng.sample(_FORBIDDEN, 2)}
    if iid == _P + "number_words":
        rel = rng.choice(["at least", "less than"])
        return {
            "num_words": rng.randint(60, 160) if rel == "at least" else rng.randint(200, 300),
            "relation": rel,
        }
    if iid == _P + "number_sentences":
        rel = rng.choice(["at least", "less than"])
        return {
            "num_sentences": rng.randint(3, 12) if rel == "at least" else rng.randint(24, 32),
            "relation": rel,
        }
    if iid == _P + "number_paragraphs":
        return {"num_paragraphs": rng.randint(2, 4)}
    if iid == "detectable_format:multiple_sections":
        return {
            "section_spliter": rng.choice(["Section", "SECTION", "Part"]),
            "num_sections": rng.randint(2, 4),
        }
    if iid == "detectable_content:number_placeholders":
        return {"num_placeholders": rng.randint(1, 3)}
    if iid == "detectable_content:postscript":
        return {"postscript_marker": rng.choice(["P.S.", "P.P.S"])}
    if iid == "detectable_format:number_bullet_lists":
        return {"num_bullets": rng.randint(2, 5)}
    if iid == "detectable_format:number_highlighted_sections":
        return {"num_highlights": rng.randint(1, 3)}
    if iid == "startend:end_checker":
        return {"end_phrase": rng.choice(_ENDS)}
    return {}


def _phrase(iid: str, kw: dict[str, Any]) -> str:
    """The IFEval-style sentence asking for instruction ``iid``."""
    match iid.split(":")[1]:
        case "existence":
            return f"Include the keywords {kw['keywords'][0]} and {kw['keywords'][1]} in the response."
        case "frequency":
            return f"In your response the word {kw['keyword']} should appear {kw['relation']} {kw['frequency']} times."
        case "forbidden_words":
            return f"Do not include the words {kw['forbidden_words'][0]} or {kw['forbidden_words'][1]} in the response."
        case "number_words":
            return f"Answer with {kw['relation']} {kw['num_words']} words."
        case "number_sentences":
            return f"Your response should contain {kw['relation']} {kw['num_sentences']} sentences."
        case "number_paragraphs":
            return (
                f"There should be {kw['num_paragraphs']} paragraphs. "
                "Paragraphs are separated with the markdown divider: ***"
            )
        case "multiple_sections":
            s = kw["section_spliter"]
            return f"Your response must have {kw['num_sections']} sections. Mark the beginning of each section with {s} X, such as: {s} 1"
        case "number_placeholders":
            return (
                f"The response must contain at least {kw['num_placeholders']} placeholders "
                "represented by square brackets, such as [address]."
            )
        case "postscript":
            return f"At the end of your response, please explicitly add a postscript starting with {kw['postscript_marker']}"
        case "number_bullet_lists":
            return f"Your answer must contain exactly {kw['num_bullets']} bullet points. Use the markdown bullet points such as:\n* This is point 1."
        case "number_highlighted_sections":
            return f"Highlight at least {kw['num_highlights']} sections in your answer with markdown, i.e. *highlighted section*."
        case "title":
            return "Your answer must contain a title, wrapped in double angular brackets, such as <<poem of joy>>."
        case "end_checker":
            return f"Finish your response with this exact phrase: {kw['end_phrase']} No other words should follow this phrase."
        case "quotation":
            return "Wrap your entire response with double quotation marks."
        case "english_lowercase":
            return "Your entire response should be in English, and in all lowercase letters. No capital letters are allowed."
        case "english_capital":
            return "Your entire response should be in English, and in all capital letters."
        case "no_comma":
            return "In your entire response, refrain from the use of any commas."
    raise ValueError(f"instructions env: no phrasing for {iid!r}")


def render(task_text: str, instructions: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """The user prompt: the writing task, then one line per instruction."""
    return task_text + "\n\n" + "\n".join(_phrase(iid, kw) for iid, kw in instructions)


def _filler(rng: random.Random, used: set[str]) -> str:
    while True:
        s = f"{rng.choice(_SUBJ)} {rng.choice(_VERB)} {rng.choice(_OBJ)} {rng.choice(_TAIL)}."
        if s not in used:
            used.add(s)
            return s[0].upper() + s[1:]


def _build(topic: str, ins: dict[str, dict[str, Any]], pad: int, seed: int) -> str:
    rng = random.Random(seed)
    used: set[str] = set()
    n_parts = int(
        ins.get(_P + "number_paragraphs", {}).get("num_paragraphs")
        or ins.get("detectable_format:multiple_sections", {}).get("num_sections")
        or 1
    )
    sentences = [f"Here are my thoughts on {topic}."]
    for kw in ins.get("keywords:existence", {}).get("keywords", []):
        sentences.append(_KW_SENT[len(sentences) % len(_KW_SENT)].format(k=kw))
    if "keywords:frequency" in ins:
        f = ins["keywords:frequency"]
        times = f["frequency"] if f["relation"] == "at least" else 1
        sentences += [_KW_SENT[i].format(k=f["keyword"]) for i in range(times)]
    if "detectable_content:number_placeholders" in ins:
        k = ins["detectable_content:number_placeholders"]["num_placeholders"]
        sentences.append("Please write to me at " + " and ".join(["[address]", "[date]", "[name]"][:k]) + ".")
    if "detectable_format:number_highlighted_sections" in ins:
        k = ins["detectable_format:number_highlighted_sections"]["num_highlights"]
        sentences += [f"This is *highlight number {i + 1}* of the text." for i in range(k)]
    sentences += [_filler(rng, used) for _ in range(max(pad, n_parts))]
    parts = [sentences[i::n_parts] for i in range(n_parts)]
    blocks = [" ".join(p) for p in parts]
    if "detectable_format:number_bullet_lists" in ins:
        k = ins["detectable_format:number_bullet_lists"]["num_bullets"]
        blocks[-1] += "\n" + "\n".join(f"- {_filler(rng, used)}" for _ in range(k))
    if "detectable_format:multiple_sections" in ins:
        s = ins["detectable_format:multiple_sections"]["section_spliter"]
        text = "\n\n".join(f"{s} {i + 1}\n{b}" for i, b in enumerate(blocks))
    else:
        text = "\n***\n".join(blocks)
    if "detectable_format:title" in ins:
        text = f"<<Thoughts on {topic}>>\n{text}"
    if "detectable_content:postscript" in ins:
        text += f"\n\n{ins['detectable_content:postscript']['postscript_marker']} Thank you for reading this note."
    if "startend:end_checker" in ins:
        text += "\n" + ins["startend:end_checker"]["end_phrase"]
    if "change_case:english_lowercase" in ins:
        text = text.lower()
    if "change_case:english_capital" in ins:
        text = text.upper()
    if "startend:quotation" in ins:
        text = f'"{text}"'
    return text


def compose(task: Task) -> str:
    """A response satisfying every instruction of ``task`` (the oracle's constructive writer).

    Lower bounds on words or sentences are met by adding distinct filler sentences until the
    checker agrees; everything else is built to satisfy its checker by construction.
    """
    todo = [(str(i["id"]), dict(i.get("kwargs") or {})) for i in task.info["instructions"]]
    ins = dict(todo)
    topic = str(task.info.get("topic", "this subject"))
    pad = 2
    text = _build(topic, ins, pad, zlib.crc32(task.id.encode()))
    while pad < 200 and not all(check_instruction(i, text, k) for i, k in todo):
        pad += 2
        text = _build(topic, ins, pad, zlib.crc32(task.id.encode()))
    return text


class InstructionsEnv(ProceduralEnv, SingleTurnEnv):
    """Writing prompts with 1-4 IFEval-style constraints, checked in strict or loose mode."""

    name = "instructions"
    description = "Writing prompts with 1-4 IFEval-style constraints; strict or loose instruction checkers."
    public_info_keys = ("instructions", "topic")

    def __init__(
        self, level: int = 2, mode: str = "strict", size: int = 1000, system_prompt: str | None = None
    ) -> None:
        self.level = int_arg("instructions", "level", level, 1, 4)
        self.mode = choice_arg("instructions", "mode", mode, ("strict", "loose"))
        self.size = int_arg("instructions", "size", size, 1, 10**9)
        super().__init__(
            rubric=instructions_rubric(self.mode),  # type: ignore[arg-type]
            system_prompt=system_prompt,
        )

    def generate(self, rng: random.Random) -> Task:
        chosen: list[str] = []
        for iid in rng.sample(INSTRUCTION_TYPES, len(INSTRUCTION_TYPES)):
            if len(chosen) == self.level:
                break
            if any(iid in g and any(c in g for c in chosen) for g in _GROUPS):
                continue
            chosen.append(iid)
        words = rng.sample(_KEYWORDS, len(_KEYWORDS))
        todo = [(iid, _spec(rng, iid, words)) for iid in sorted(chosen)]
        topic = rng.choice(_TOPICS)
        text = render(f"Write {rng.choice(_FORMS)} about {topic}.", todo)
        info = {"instructions": [{"id": i, "kwargs": k} for i, k in todo], "topic": topic}
        return Task(id="", prompt=(Message(role="user", content=text),), info=info)

    @property
    def task_name(self) -> str:
        return f"instructions-l{self.level}"

    def oracle_policy(self) -> Policy:
        """Writes a response built to satisfy every constraint (see ``compose``)."""
        return self.task_oracle(lambda task, _: compose(task), name="instructions-oracle")

    def null_policy(self) -> Policy:
        """Answers nothing."""
        return ScriptedPolicy(lambda messages: "", name="instructions-null")
