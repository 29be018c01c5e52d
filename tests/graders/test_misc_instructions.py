"""IFEval instruction checkers: registry, the fixed public bugs, strict vs loose, the grader."""

from __future__ import annotations

import asyncio
import json

import pytest

from verigym.graders.instructions import (
    INSTRUCTIONS,
    check_instruction,
    detect_language,
    instructions_grader,
    instructions_rubric,
    loose_variants,
)
from verigym.rubric import Rubric
from verigym.types import Completion, Message, Task, Trajectory, Turn


def _traj(text: str) -> Trajectory:
    c = Completion(text=text)
    return Trajectory(
        task_id="t",
        prompt=[Message(role="user", content="q")],
        turns=[Turn(source="model", messages=[c.as_message()], completion=c)],
    )


def test_registry_has_the_25_ifeval_families() -> None:
    assert len(INSTRUCTIONS) == 25
    groups = {k.split(":")[0] for k in INSTRUCTIONS}
    assert groups == {
        "keywords", "language", "length_constraints", "detectable_content", "detectable_format",
        "combination", "startend", "change_case", "punctuation",
    }  # fmt: skip


def test_keyword_counting_is_whole_word_not_substring() -> None:
    kw = {"keyword": "art", "frequency": 2, "relation": "at least"}
    assert not check_instruction("keywords:frequency", "Start the party; art is smart.", kw)
    assert check_instruction("keywords:frequency", "Art! Modern art.", kw)
    assert check_instruction("keywords:existence", "I use a.b daily", {"keywords": ["a.b"]})
    assert not check_instruction("keywords:existence", "I use axb daily", {"keywords": ["a.b"]})


def test_repeated_sentences_do_not_meet_minimums() -> None:
    args = {"num_sentences": 4, "relation": "at least"}
    assert not check_instruction("length_constraints:number_sentences", "Yes. Yes. yes! YES.", args)
    assert check_instruction("length_constraints:number_sentences", "Yes. No. Maybe. Later.", args)
    exactly = {"num_sentences": 2, "relation": "exactly"}
    assert not check_instruction("length_constraints:number_sentences", "Same. Same.", exactly)


def test_sentence_splitter_keeps_decimals_and_abbreviations() -> None:
    args = {"num_sentences": 2, "relation": "less than"}
    assert check_instruction(
        "length_constraints:number_sentences", "Pi is 3.14, e.g. roughly, said Dr. Who.", args
    )


def test_strict_vs_loose() -> None:
    response = "Sure! Here it is:\n*hello world*"
    args = {"end_phrase": "hello world"}
    assert not check_instruction("startend:end_checker", response, args, mode="strict")
    assert check_instruction("startend:end_checker", response, args, mode="loose")
    variants = loose_variants("a\nb\nc")
    assert len(variants) == 8 and "b" in variants and "a\nb" in variants
    with pytest.raises(ValueError):
        check_instruction("punctuation:no_comma", "x", mode="lenient")  # type: ignore[arg-type]


def test_bad_kwargs_and_unknown_ids_raise() -> None:
    with pytest.raises(ValueError, match="unknown instruction"):
        check_instruction("keywords:nope", "x")
    with pytest.raises(ValueError, match="bad kwargs"):
        check_instruction("punctuation:no_comma", "x", {"num_words": 3})
    with pytest.raises(ValueError, match="relation"):
        check_instruction("length_constraints:number_words", "x", {"num_words": 3, "relation": "around"})


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("This is a short answer and it is in English for you.", "en"),
        ("Esta es una respuesta corta y no es para los niños.", "es"),
        ("Ceci est une réponse courte et elle est pour les enfants.", "fr"),
        ("Das ist eine kurze Antwort und sie ist nicht für die Kinder.", "de"),
        ("Questa è una risposta breve e non è per i bambini.", "it"),
        ("Esta é uma resposta curta e não é para as crianças.", "pt"),
        ("Это короткий ответ, и он не для детей.", "ru"),
        ("这是一个简短的回答。", "zh"),
        ("これは短い答えです。", "ja"),
        ("이것은 짧은 대답입니다.", "ko"),
        ("هذا جواب قصير وهو ليس للأطفال", "ar"),
        ("यह एक छोटा उत्तर है और यह बच्चों के लिए नहीं है।", "hi"),
    ],
)
def test_language_detector(text: str, code: str) -> None:
    assert detect_language(text) == code
    assert check_instruction("language:response_language", text, {"language": code})


async def test_grader_reports_fraction_and_all_followed() -> None:
    info = {
        "instructions": [
            {"id": "punctuation:no_comma", "kwargs": {}},
            {"id": "change_case:english_lowercase", "kwargs": {}},
            {"id": "detectable_format:title", "kwargs": {}},
        ]
    }
    task = Task(id="t", prompt=(Message(role="user", content="q"),), info=info)
    grade = await instructions_grader().grade(task, _traj("the rain falls softly on the town today"))
    assert grade.score == pytest.approx(2 / 3)
    detail = json.loads(grade.detail)
    assert detail["all_followed"] is False and detail["failed"] == ["detectable_format:title"]
    full = await instructions_grader().grade(task, _traj("<<rain>>\nthe rain falls softly on the town today"))
    assert full.score == 1.0 and json.loads(full.detail)["all_followed"] is True


async def test_grader_reads_ifeval_format_and_errors_on_broken_tasks() -> None:
    ifeval = {
        "instruction_id_list": ["keywords:letter_frequency"],
        "kwargs": [{"letter": "z", "let_frequency": 2, "let_relation": "at least", "num_words": None}],
    }
    task = Task(id="t", prompt=(Message(role="user", content="q"),), info=ifeval)
    assert (await instructions_grader("loose").grade(task, _traj("zig zag"))).score == 1.0
    broken = Task(id="b", prompt=(Message(role="user", content="q"),), info={"instructions": [{"id": "x:y"}]})
    score = await Rubric([instructions_grader()]).score(broken, _traj("hi"))
    assert score.reward is None and "unknown instruction" in (score.error or "")
    empty = Task(id="e", prompt=(Message(role="user", content="q"),), info={})
    assert not (await instructions_grader().grade(empty, _traj("hi"))).ok


async def test_reasoning_is_not_checked() -> None:
    info = {"instructions": [{"id": "punctuation:no_comma", "kwargs": {}}]}
    task = Task(id="t", prompt=(Message(role="user", content="q"),), info=info)
    text = "<think>hmm, well, commas here</think>no commas in the answer"
    assert (await instructions_grader().grade(task, _traj(text))).score == 1.0
    assert (await instructions_grader(strip_reasoning=False).grade(task, _traj(text))).score == 0.0


def test_the_shared_rubric_matches_the_single_grader() -> None:
    """``instructions`` and ``ifeval`` build their rubric with ``instructions_rubric``."""
    task = Task(
        id="t",
        prompt=(Message(role="user", content="q"),),
        info={"instructions": [{"id": "change_case:english_lowercase", "kwargs": {}},
                               {"id": "punctuation:no_comma", "kwargs": {}}]},
    )  # fmt: skip
    rubric = instructions_rubric("strict", diagnostics=True)
    assert rubric.names == ["followed", "all_followed", "strict_followed", "loose_followed"]
    trajectory = _traj("all lowercase, with a comma")
    score = asyncio.run(rubric.score(task, trajectory))
    single = asyncio.run(instructions_grader("strict", name="followed").grade(task, trajectory))
    assert score.grades["followed"].detail == single.detail and score.grades["followed"].score == 0.5
    assert score.reward == pytest.approx(0.3 * 0.5) and score.grades["all_followed"].score == 0.0
