"""Text measurements for the instruction checkers: words, sentences, paragraphs, keyword counts.

Counting rules (where they differ from IFEval's ``instructions_util``, the reason is given):

- words are runs of letters/digits joined by inner apostrophes (``don't`` is one word);
- sentences end at ``.``, ``!``, ``?`` (and CJK ``。！？``) followed by space or the end, or at a
  line break; decimals (``3.14``), common abbreviations (``Dr.``, ``e.g.``), single initials and
  ellipses inside a sentence do not end it;
- keywords are counted as whole words/phrases, case-insensitively, with regex metacharacters
  escaped (IFEval counts substrings: "cat" is found in "category").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = [
    "count_keyword",
    "count_words",
    "distinct_sentences",
    "split_sentences",
    "words",
]

_WORD = re.compile(r"\w+(?:['’]\w+)*")
_ABBREVIATION_TEXT = (
    "mr mrs ms dr prof sr jr st vs etc e.g i.e a.m p.m u.s u.k inc ltd corp fig approx dept "
    "jan feb mar apr jun jul aug sep sept oct nov dec mt ave"
)
_ABBREVIATIONS = [a for a in _ABBREVIATION_TEXT.split() if a]
_PROTECT = "\u0000"
_ABBR_RE = re.compile(
    r"(?i)\b(" + "|".join(re.escape(a) for a in sorted(_ABBREVIATIONS, key=len, reverse=True)) + r")\."
)
_SPLIT = re.compile(r"(?<=[.!?。！？])[\"'”’)\]]*(?:\s+|$)|\n+")


def words(text: str) -> list[str]:
    return _WORD.findall(text)


def count_words(text: str) -> int:
    return len(words(text))


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` (non-empty, stripped)."""
    guarded = re.sub(r"(\d)\.(\d)", rf"\1{_PROTECT}\2", text)
    guarded = _ABBR_RE.sub(lambda m: m.group(1).replace(".", _PROTECT) + _PROTECT, guarded)
    guarded = re.sub(r"\b([A-Z])\.(?=\s+[A-Z])", rf"\1{_PROTECT}", guarded)  # initials: "J. Smith"
    guarded = re.sub(r"\b([Nn]o)\.(?=\s*\d)", rf"\1{_PROTECT}", guarded)  # "No. 5", not "No."
    guarded = re.sub(r"\.\.\.(?=\s+[a-z])", _PROTECT * 3, guarded)  # an ellipsis mid-sentence
    parts = _SPLIT.split(guarded)
    out = [p.replace(_PROTECT, ".").strip() for p in parts]
    return [p for p in out if p and any(ch.isalnum() for ch in p)]


def _sentence_key(sentence: str) -> str:
    return " ".join(w.casefold() for w in words(sentence))


def distinct_sentences(sentences: Sequence[str]) -> list[str]:
    """Sentences with repeats (same words, any case or punctuation) removed, first kept."""
    seen: set[str] = set()
    out = []
    for s in sentences:
        key = _sentence_key(s)
        if key and key not in seen:
            seen.add(key)
            out.append(s)
    return out


def count_keyword(text: str, keyword: str) -> int:
    """Whole-word, case-insensitive occurrences of ``keyword`` (a word or a phrase) in ``text``."""
    kw = keyword.strip()
    if not kw:
        raise ValueError("empty keyword")
    parts = [re.escape(p) for p in kw.split()]
    pattern = r"(?<!\w)" + r"\s+".join(parts) + r"(?!\w)"
    return len(re.findall(pattern, text, flags=re.IGNORECASE))
