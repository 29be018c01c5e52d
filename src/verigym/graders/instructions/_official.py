"""IFEval's official checker as lm-eval ships it (``lm_eval/tasks/ifeval``), bugs included.

``check_official(instruction_id, response, kwargs, loose=False)`` gives lm-eval's verdict: the
same rules re-implemented here, verdict for verdict (``benchmarks/agreement_ifeval_official.py``
checks them against lm-eval on all 541 prompts). Use it to reproduce published IFEval figures;
``_checks`` has the corrected checkers. What the official rules do that the corrected ones do not:

- keywords are regular expressions matched anywhere: ``authori`` is present in ``authorized``,
  ``war`` three times in "war, warm, award"; forbidden words are matched between ``\\b``s, still
  as regexes; a postscript marker or section splitter is a regex too;
- sentences are NLTK's English Punkt sentences (an abbreviation the model does not know, such as
  "approx.", ends a sentence), all-caps words are counted over ``nltk.word_tokenize`` (``DON'T``
  is two all-caps tokens), words are ``\\w+`` runs (``_official_nlp``);
- a repeated sentence counts toward a minimum, a "bullet" is any line starting with ``-`` (a
  ``---`` rule too) or ``*`` not followed by ``*``, a postscript marker may stand mid-sentence,
  the two responses of ``two_responses`` need only differ after stripping, ``repeat_prompt``
  needs no answer after the repeated request, ``constrained_response`` accepts a reply holding
  several of the options, ``[]`` is a placeholder, and a reply whose language langdetect cannot
  tell follows any language rule;
- kwargs: values that are falsy (not only None) are dropped, as lm-eval does; a ``letter`` that
  is not one ASCII letter (key 1122's ``#``, 1129's ``!``) is replaced by a random letter — lm-eval
  draws it from Python's global ``random`` state, here from ``random.Random(0)``, i.e. ``y``, so
  the verdict repeats. Any other kwarg that lm-eval would draw at random (missing, negative, an
  ``nth_paragraph`` past ``num_paragraphs``) is a ``ValueError``: no reproducible verdict exists;
- an empty (all-whitespace) response follows nothing; loose mode tries lm-eval's 8 variants.
"""

from __future__ import annotations

import json
import random
import re
import string
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from verigym.graders.instructions import _official_nlp as nlp
from verigym.graders.instructions._checks import CHECKERS

__all__ = ["OFFICIAL_CHECKERS", "check_official", "official_loose_variants"]

_RELATIONS = ("less than", "at least")
_OPTIONS = ("My answer is yes.", "My answer is no.", "My answer is maybe.")
RANDOM_LETTER = random.Random(0).choice(list(string.ascii_letters)).lower()


def _compare(n: int, relation: str, k: int) -> bool:
    return n < k if relation == "less than" else n >= k


def _count(kwargs: Mapping[str, Any], key: str, *, negative: bool = False) -> int:
    value = kwargs.get(key)
    if value is None or (int(value) < 0 and not negative):
        raise ValueError(f"kwarg {key!r} missing or negative: the official checker would draw it at random")
    return int(value)


def _relation(kwargs: Mapping[str, Any], key: str) -> str:
    value = kwargs.get(key)
    if value is None:
        raise ValueError(f"kwarg {key!r} missing: the official checker would draw it at random")
    if value not in _RELATIONS:
        raise ValueError(f"relation must be one of {_RELATIONS}, got {value!r}")
    return str(value)


def _text(kwargs: Mapping[str, Any], key: str) -> str:
    value = kwargs.get(key)
    if not isinstance(value, str):
        raise ValueError(f"kwarg {key!r} missing: the official checker would draw it at random")
    return value


def _words(kwargs: Mapping[str, Any], key: str) -> list[str]:
    value = kwargs.get(key)
    if not value:
        raise ValueError(f"kwarg {key!r} missing: the official checker would draw it at random")
    return [str(v) for v in value]


def _language(response: str, code: str) -> bool:
    detected = nlp.detect_language(response)
    return detected is None or detected == code  # undetectable: counted as followed


def keywords_existence(response: str, kw: Mapping[str, Any]) -> bool:
    return all(re.search(k, response, flags=re.IGNORECASE) for k in _words(kw, "keywords"))


def keywords_frequency(response: str, kw: Mapping[str, Any]) -> bool:
    found = len(re.findall(_text(kw, "keyword").strip(), response, flags=re.IGNORECASE))
    return _compare(found, _relation(kw, "relation"), _count(kw, "frequency"))


def keywords_forbidden(response: str, kw: Mapping[str, Any]) -> bool:
    words = _words(kw, "forbidden_words")
    return not any(re.search(r"\b" + w + r"\b", response, flags=re.IGNORECASE) for w in words)


def letter_frequency(response: str, kw: Mapping[str, Any]) -> bool:
    letter = kw.get("letter")
    if not isinstance(letter, str) or len(letter) != 1 or not "a" <= letter.lower() <= "z":
        letter = RANDOM_LETTER  # lm-eval: random.choice(string.ascii_letters)
    n = Counter(response.lower())[letter.strip().lower()]
    return _compare(n, _relation(kw, "let_relation"), _count(kw, "let_frequency"))


def response_language(response: str, kw: Mapping[str, Any]) -> bool:
    return _language(response, _text(kw, "language"))


def number_sentences(response: str, kw: Mapping[str, Any]) -> bool:
    n = nlp.count_sentences(response)
    return _compare(n, _relation(kw, "relation"), _count(kw, "num_sentences"))


def number_paragraphs(response: str, kw: Mapping[str, Any]) -> bool:
    parts = re.split(r"\s?\*\*\*\s?", response)
    n = len(parts)
    for i, part in enumerate(parts):
        if not part.strip():
            if 0 < i < len(parts) - 1:
                return False  # an empty paragraph between two dividers
            n -= 1
    return n == _count(kw, "num_paragraphs")


def number_words(response: str, kw: Mapping[str, Any]) -> bool:
    n = len(re.findall(r"\w+", response))
    return _compare(n, _relation(kw, "relation"), _count(kw, "num_words"))


def nth_paragraph_first_word(response: str, kw: Mapping[str, Any]) -> bool:
    want, nth = _count(kw, "num_paragraphs"), _count(kw, "nth_paragraph")
    if not 0 < nth <= want:
        raise ValueError("nth_paragraph outside 1..num_paragraphs: the official checker would draw it")
    first_word = _text(kw, "first_word").lower()
    parts = response.split("\n\n")
    n = sum(1 for p in parts if p.strip())
    if nth > n:
        return False
    paragraph = parts[nth - 1].strip()  # indexes the split, empty parts included
    if not paragraph:
        return False
    word = paragraph.split()[0].strip().lstrip("'").lstrip('"')
    head = re.match(r"[^.,?!'\"]*", word)
    found = "".join(ch.lower() for ch in (head.group(0) if head else ""))  # lowered letter by letter
    return n == want and found == first_word


def number_placeholders(response: str, kw: Mapping[str, Any]) -> bool:
    return len(re.findall(r"\[.*?\]", response)) >= _count(kw, "num_placeholders")


def postscript(response: str, kw: Mapping[str, Any]) -> bool:
    marker = _text(kw, "postscript_marker").strip()
    if marker == "P.P.S":
        pattern = r"\s*p\.\s?p\.\s?s.*$"
    elif marker == "P.S.":
        pattern = r"\s*p\.\s?s\..*$"
    else:
        pattern = r"\s*" + marker.lower() + r".*$"
    return bool(re.findall(pattern, response.lower(), flags=re.MULTILINE))


def number_bullet_lists(response: str, kw: Mapping[str, Any]) -> bool:
    stars = re.findall(r"^\s*\*[^\*].*$", response, flags=re.MULTILINE)
    dashes = re.findall(r"^\s*-.*$", response, flags=re.MULTILINE)
    return len(stars) + len(dashes) == _count(kw, "num_bullets")


def constrained_response(response: str, kw: Mapping[str, Any]) -> bool:
    return any(option in response.strip() for option in _OPTIONS)


def number_highlighted_sections(response: str, kw: Mapping[str, Any]) -> bool:
    single = [h for h in re.findall(r"\*[^\n\*]*\*", response) if h.strip("*").strip()]
    double = [h for h in re.findall(r"\*\*[^\n\*]*\*\*", response) if h[2:-2].strip()]
    return len(single) + len(double) >= _count(kw, "num_highlights")


def multiple_sections(response: str, kw: Mapping[str, Any]) -> bool:
    splitter = _text(kw, "section_spliter").strip()
    sections = re.split(r"\s?" + splitter + r"\s?\d+\s?", response)
    return len(sections) - 1 >= _count(kw, "num_sections")


def json_format(response: str, kw: Mapping[str, Any]) -> bool:
    text = response.strip()
    for fence in ("```json", "```Json", "```JSON", "```"):
        text = text.removeprefix(fence)
    try:
        json.loads(text.removesuffix("```").strip())
    except ValueError:
        return False
    return True


def title(response: str, kw: Mapping[str, Any]) -> bool:
    return any(t.lstrip("<").rstrip(">").strip() for t in re.findall(r"<<[^\n]+>>", response))


def two_responses(response: str, kw: Mapping[str, Any]) -> bool:
    parts = response.split("******")
    kept = []
    for i, part in enumerate(parts):
        if part.strip():
            kept.append(part)
        elif 0 < i < len(parts) - 1:
            return False
    return len(kept) == 2 and kept[0].strip() != kept[1].strip()


def repeat_prompt(response: str, kw: Mapping[str, Any]) -> bool:
    return response.strip().lower().startswith(_text(kw, "prompt_to_repeat").strip().lower())


def end_checker(response: str, kw: Mapping[str, Any]) -> bool:
    return response.strip().strip('"').lower().endswith(_text(kw, "end_phrase").strip().lower())


def quotation(response: str, kw: Mapping[str, Any]) -> bool:
    text = response.strip()
    return len(text) > 1 and text[0] == '"' and text[-1] == '"'


def capital_word_frequency(response: str, kw: Mapping[str, Any]) -> bool:
    n = sum(1 for w in nlp.word_tokenize(response) if w.isupper())
    return _compare(n, _relation(kw, "capital_relation"), _count(kw, "capital_frequency", negative=True))


def english_capital(response: str, kw: Mapping[str, Any]) -> bool:
    return response.isupper() and _language(response, "en")


def english_lowercase(response: str, kw: Mapping[str, Any]) -> bool:
    return response.islower() and _language(response, "en")


def no_comma(response: str, kw: Mapping[str, Any]) -> bool:
    return "," not in response


OfficialChecker = Callable[[str, Mapping[str, Any]], bool]
# the ids of _checks.CHECKERS, each with this module's function of the same name as its corrected one
OFFICIAL_CHECKERS: dict[str, OfficialChecker] = {
    iid: globals()[corrected.__name__] for iid, corrected in CHECKERS.items()
}


def official_loose_variants(response: str) -> list[str]:
    """lm-eval's 8 loose variants, in its order (empty ones kept: they follow nothing)."""
    lines = response.split("\n")
    first = "\n".join(lines[1:]).strip()
    last = "\n".join(lines[:-1]).strip()
    both = "\n".join(lines[1:-1]).strip()
    stripped = [v.replace("*", "") for v in (first, last, both)]
    return [response, response.replace("*", ""), first, last, both, *stripped]


def check_official(
    instruction_id: str, response: str, kwargs: Mapping[str, Any] | None = None, *, loose: bool = False
) -> bool:
    """lm-eval's verdict on one instruction (strict, or loose: any of its 8 variants)."""
    checker = OFFICIAL_CHECKERS.get(instruction_id)
    if checker is None:
        raise ValueError(f"unknown instruction id {instruction_id!r}")
    args = {k: v for k, v in (kwargs or {}).items() if v}  # lm-eval drops every falsy value
    candidates = official_loose_variants(response) if loose else [response]
    try:
        return any(text.strip() and checker(text, args) for text in candidates)
    except re.error as exc:
        raise ValueError(
            f"{instruction_id}: a kwarg is not a regex the official checker can use ({exc})"
        ) from None
