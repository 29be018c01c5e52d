"""The 25 IFEval instruction checkers (Zhou et al. 2023, "Instruction-Following Evaluation for
Large Language Models"), with the known bugs of the public checkers fixed.

Each checker is ``check(response, **kwargs) -> bool``; kwargs use IFEval's names. Fixes:

- keywords are whole words (IFEval's ``re.findall(keyword, ...)`` counts "cat" in "category" and
  treats the keyword as a regex);
- a repeated sentence never counts toward a minimum number of sentences or words, and the two
  responses of ``combination:two_responses`` must differ beyond case, spacing and punctuation;
- ``detectable_format:constrained_response`` with several of the options is a hedge and fails;
- ``combination:repeat_prompt`` needs an answer after the repeated request;
- bullets must be ``*``/``-``/``+`` followed by a space (a ``---`` rule is not a bullet);
- a postscript must start a line.

Kept from the official checkers: ``startend:end_checker`` ignores double quotes wrapped around
the whole reply. An instruction naming a language the offline detector does not cover raises
``ValueError`` (a grader error with the reason), never a silent fail.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence

from verigym.graders.instructions._lang import SUPPORTED_LANGUAGES, detect_language
from verigym.graders.instructions._text import (
    count_keyword,
    count_words,
    distinct_sentences,
    split_sentences,
    words,
)

__all__ = ["CHECKERS", "Checker", "compare"]

Checker = Callable[..., bool]

_RELATIONS: dict[str, Callable[[int, int], bool]] = {
    "less than": lambda n, k: n < k,
    "at most": lambda n, k: n <= k,
    "at least": lambda n, k: n >= k,
    "more than": lambda n, k: n > k,
    "exactly": lambda n, k: n == k,
}
_LOWER_BOUNDS = {"at least", "more than"}


def compare(n: int, relation: str, k: int) -> bool:
    """``n <relation> k`` for IFEval's relations ("less than", "at least") and a few more."""
    fn = _RELATIONS.get(relation.strip().lower())
    if fn is None:
        raise ValueError(f"unknown relation {relation!r}; expected one of {sorted(_RELATIONS)}")
    return fn(n, int(k))


def _lower_bound(relation: str) -> bool:
    return relation.strip().lower() in _LOWER_BOUNDS


def keywords_existence(response: str, *, keywords: Sequence[str]) -> bool:
    return all(count_keyword(response, k) > 0 for k in keywords)


def keywords_frequency(response: str, *, keyword: str, frequency: int, relation: str) -> bool:
    return compare(count_keyword(response, keyword), relation, frequency)


def keywords_forbidden(response: str, *, forbidden_words: Sequence[str]) -> bool:
    return all(count_keyword(response, w) == 0 for w in forbidden_words)


def letter_frequency(response: str, *, letter: str, let_frequency: int, let_relation: str) -> bool:
    if len(letter) != 1:
        raise ValueError(f"letter must be one character, got {letter!r}")
    return compare(response.casefold().count(letter.casefold()), let_relation, let_frequency)


def response_language(response: str, *, language: str) -> bool:
    code = language.strip().lower()
    if code not in SUPPORTED_LANGUAGES:
        raise ValueError(
            f"language {language!r} is not supported by the offline detector "
            f"(supported: {' '.join(SUPPORTED_LANGUAGES)})"
        )
    return detect_language(response) == code


def number_sentences(response: str, *, num_sentences: int, relation: str) -> bool:
    sentences = split_sentences(response)
    if _lower_bound(relation):
        return compare(len(distinct_sentences(sentences)), relation, num_sentences)
    if relation.strip().lower() == "exactly" and len(distinct_sentences(sentences)) != len(sentences):
        return False
    return compare(len(sentences), relation, num_sentences)


def number_words(response: str, *, num_words: int, relation: str) -> bool:
    if _lower_bound(relation):
        n = sum(count_words(s) for s in distinct_sentences(split_sentences(response)))
    else:
        n = count_words(response)
    return compare(n, relation, num_words)


def _star_paragraphs(response: str) -> list[str] | None:
    parts = re.split(r"\s?\*\*\*\s?", response)
    for i, p in enumerate(parts):
        if not p.strip() and 0 < i < len(parts) - 1:
            return None  # an empty paragraph between two dividers
    return [p for p in parts if p.strip()]


def number_paragraphs(response: str, *, num_paragraphs: int) -> bool:
    paragraphs = _star_paragraphs(response)
    return paragraphs is not None and len(paragraphs) == int(num_paragraphs)


def nth_paragraph_first_word(
    response: str, *, num_paragraphs: int, nth_paragraph: int, first_word: str
) -> bool:
    paragraphs = [p for p in re.split(r"\n\s*\n", response) if p.strip()]
    if len(paragraphs) != int(num_paragraphs) or not 1 <= int(nth_paragraph) <= len(paragraphs):
        return False
    first = words(paragraphs[int(nth_paragraph) - 1])
    return bool(first) and first[0].casefold() == first_word.strip().casefold()


def number_placeholders(response: str, *, num_placeholders: int) -> bool:
    return len(re.findall(r"\[[^\[\]\n]*\w[^\[\]\n]*\]", response)) >= int(num_placeholders)


def postscript(response: str, *, postscript_marker: str) -> bool:
    marker = postscript_marker.strip().lower()
    if marker == "p.s.":
        pattern = r"^\s*p\.\s?s\..*\S"
    elif marker == "p.p.s":
        pattern = r"^\s*p\.\s?p\.\s?s.*\S"
    else:
        pattern = r"^\s*" + re.escape(marker) + r".*\S"
    return re.search(pattern, response.lower(), flags=re.MULTILINE) is not None


def number_bullet_lists(response: str, *, num_bullets: int) -> bool:
    bullets = re.findall(r"^\s*[*\-+]\s+\S", response, flags=re.MULTILINE)
    return len(bullets) == int(num_bullets)


_OPTIONS = ("My answer is yes.", "My answer is no.", "My answer is maybe.")


def constrained_response(response: str) -> bool:
    present = [o for o in _OPTIONS if o in response.strip()]
    return len(present) == 1


def number_highlighted_sections(response: str, *, num_highlights: int) -> bool:
    bold = re.findall(r"\*\*([^\n*]+)\*\*", response)
    rest = re.sub(r"\*\*[^\n*]+\*\*", " ", response)
    italic = re.findall(r"\*([^\n*]+)\*", rest)
    return sum(1 for h in [*bold, *italic] if h.strip()) >= int(num_highlights)


def multiple_sections(response: str, *, section_spliter: str, num_sections: int) -> bool:
    pattern = r"\s?" + re.escape(section_spliter.strip()) + r"\s?\d+\s?"
    sections = re.split(pattern, response)
    return len(sections) - 1 >= int(num_sections)


def json_format(response: str) -> bool:
    text = response.strip()
    fence = re.fullmatch(r"```(?:json|JSON|Json)?\s*(.*?)\s*```", text, flags=re.S)
    if fence:
        text = fence.group(1)
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def title(response: str) -> bool:
    return any(t.strip() for t in re.findall(r"<<([^\n]+?)>>", response))


def _normalised(text: str) -> str:
    return " ".join(w.casefold() for w in words(text))


def two_responses(response: str) -> bool:
    parts = response.split("******")
    inner = [p for i, p in enumerate(parts) if p.strip() or 0 < i < len(parts) - 1]
    if len(inner) != 2 or not all(p.strip() for p in inner):
        return False
    return _normalised(inner[0]) != _normalised(inner[1])


def repeat_prompt(response: str, *, prompt_to_repeat: str) -> bool:
    text, prompt = response.strip(), prompt_to_repeat.strip()
    if not text.lower().startswith(prompt.lower()):
        return False
    return bool(words(text[len(prompt) :]))


def end_checker(response: str, *, end_phrase: str) -> bool:
    phrase = end_phrase.strip().lower()
    text = response.strip().lower()
    # as the official checker: a reply wrapped in double quotes still ends with the phrase
    return text.endswith(phrase) or text.strip('"“”').strip().endswith(phrase)


def capital_word_frequency(response: str, *, capital_frequency: int, capital_relation: str) -> bool:
    n = sum(1 for w in words(response) if w.isupper())
    return compare(n, capital_relation, capital_frequency)


def english_capital(response: str) -> bool:
    return response.isupper() and detect_language(response) == "en"


def english_lowercase(response: str) -> bool:
    return response.islower() and detect_language(response) == "en"


def no_comma(response: str) -> bool:
    return "," not in response and "，" not in response


def quotation(response: str) -> bool:
    text = response.strip()
    return len(text) > 1 and (text[0], text[-1]) in {('"', '"'), ("“", "”")}


CHECKERS: dict[str, Checker] = {
    "keywords:existence": keywords_existence,
    "keywords:frequency": keywords_frequency,
    "keywords:forbidden_words": keywords_forbidden,
    "keywords:letter_frequency": letter_frequency,
    "language:response_language": response_language,
    "length_constraints:number_sentences": number_sentences,
    "length_constraints:number_paragraphs": number_paragraphs,
    "length_constraints:number_words": number_words,
    "length_constraints:nth_paragraph_first_word": nth_paragraph_first_word,
    "detectable_content:number_placeholders": number_placeholders,
    "detectable_content:postscript": postscript,
    "detectable_format:number_bullet_lists": number_bullet_lists,
    "detectable_format:constrained_response": constrained_response,
    "detectable_format:number_highlighted_sections": number_highlighted_sections,
    "detectable_format:multiple_sections": multiple_sections,
    "detectable_format:json_format": json_format,
    "detectable_format:title": title,
    "combination:two_responses": two_responses,
    "combination:repeat_prompt": repeat_prompt,
    "startend:end_checker": end_checker,
    "startend:quotation": quotation,
    "change_case:capital_word_frequency": capital_word_frequency,
    "change_case:english_capital": english_capital,
    "change_case:english_lowercase": english_lowercase,
    "punctuation:no_comma": no_comma,
}
