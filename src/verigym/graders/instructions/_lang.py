"""A light offline language detector for the ``language:response_language`` instruction.

No model, no download: the writing system decides most languages (Cyrillic, Arabic, Devanagari,
Hangul, kana, Han, Thai, Greek, Hebrew, the Indic scripts), then language-specific letters and
short stop-word lists separate the languages that share a script. Codes are ISO 639-1, as in
IFEval (which used ``langdetect``). Covers: en es pt fr de it nl pl fi sv tr id vi sw, ru uk bg,
ar fa ur, hi mr ne, bn ta te kn ml gu pa, th el he, zh ja ko.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

__all__ = ["SUPPORTED_LANGUAGES", "detect_language"]

_SCRIPTS: list[tuple[str, list[tuple[int, int]]]] = [
    ("hangul", [(0xAC00, 0xD7AF), (0x1100, 0x11FF), (0x3130, 0x318F)]),
    ("kana", [(0x3040, 0x30FF)]),
    ("han", [(0x4E00, 0x9FFF), (0x3400, 0x4DBF)]),
    ("cyrillic", [(0x0400, 0x04FF)]),
    ("arabic", [(0x0600, 0x06FF), (0x0750, 0x077F), (0xFB50, 0xFDFF), (0xFE70, 0xFEFF)]),
    ("devanagari", [(0x0900, 0x097F)]),
    ("bengali", [(0x0980, 0x09FF)]),
    ("gurmukhi", [(0x0A00, 0x0A7F)]),
    ("gujarati", [(0x0A80, 0x0AFF)]),
    ("tamil", [(0x0B80, 0x0BFF)]),
    ("telugu", [(0x0C00, 0x0C7F)]),
    ("kannada", [(0x0C80, 0x0CFF)]),
    ("malayalam", [(0x0D00, 0x0D7F)]),
    ("thai", [(0x0E00, 0x0E7F)]),
    ("greek", [(0x0370, 0x03FF)]),
    ("hebrew", [(0x0590, 0x05FF)]),
]
_SINGLE_SCRIPT = {
    "hangul": "ko",
    "bengali": "bn",
    "gurmukhi": "pa",
    "gujarati": "gu",
    "tamil": "ta",
    "telugu": "te",
    "kannada": "kn",
    "malayalam": "ml",
    "thai": "th",
    "greek": "el",
    "hebrew": "he",
}

_STOPWORD_TEXT: dict[str, str] = {
    "en": "and are as at be but by for from have in is it not of on that the they this to was with you",
    "es": "al como con de del el en es la las lo los muy más no para pero por que se su un una y",
    "pt": "a as com da das de do dos e em mais mas muito não o os para por que se também um uma é",
    "fr": "au avec ce dans de des du en est et il la le les mais pas pour que qui sont sur un une",
    "de": "auch auf das dem den der des die ein eine es für im ist mit nicht sich sind und von zu",
    "it": "anche che come con del della di e gli il la le lo ma nel non per più sono un una è",
    "nl": "als bij dat de dit een en er het is maar met niet ook op te van voor wat zijn",
    "pl": "ale co czy dla do i jak jest na nie od po przez się są tak to w z że",
    "fi": "ei että hän ja jo kuin kun mitä mutta myös niin ole oli on ovat se tai tämä",
    "sv": "att av den det en ett för har inte jag med men och om på som till var är",
    "tr": "ama bir bu da daha de değil gibi ile için kadar ne olarak sonra var ve çok",
    "id": "ada adalah akan dalam dan dari dengan di ini itu juga ke pada tidak untuk yang",
    "vi": "cho các có của không là một người những này trong và với đã được",
    "sw": "cha hii hiyo huo kama katika kwa la lakini na ni pia sana wa ya yake za",
    "ru": "в все же за и из к как на не но он от по с так у что это я",
    "uk": "але в від він до же з за на не по та так у це що я як і із",
    "bg": "в да е за и като на не но от по с са се това че ще",
    "hi": "एक और का की के को था नहीं पर भी में यह से है हैं",
    "mr": "आणि आहे आहेत की च्या ते नाही मध्ये या व हे होते",
    "ne": "को गर्न छ छन् थियो पनि भएको मा यो र लागि हो",
    "ar": "أن إلى التي الذي على عن في كان لا ما مع من هذا هو",
    "fa": "آن از است این با برای به در را می و که یک",
    "ur": "اور ایک تھا سے میں نہیں پر کو کی کے ہیں ہے یہ",
}
_STOPWORDS: dict[str, set[str]] = {lang: set(text.split()) for lang, text in _STOPWORD_TEXT.items()}
_LETTERS: dict[str, str] = {
    "es": "ñ¿¡",
    "pt": "ãõ",
    "fr": "œæ",
    "de": "ßäöü",
    "pl": "łąęśżźćń",
    "tr": "ğışİ",
    "vi": "ơưđạảấầẩẫậắằẳẵặẹẻẽếềểễệỉịọỏốồổỗộớờởỡợụủứừửữựỳỵỷỹ",
    "uk": "іїєґ",
    "ru": "ыэё",
    "bg": "ъ",
    "fa": "پچژگ",
    "ur": "ٹڈڑےں",
    "sv": "å",
    "fi": "",
}
_BY_SCRIPT = {
    "latin": ["en", "es", "pt", "fr", "de", "it", "nl", "pl", "fi", "sv", "tr", "id", "vi", "sw"],
    "cyrillic": ["ru", "uk", "bg"],
    "arabic": ["ar", "fa", "ur"],
    "devanagari": ["hi", "mr", "ne"],
}
SUPPORTED_LANGUAGES = sorted(
    {*_SINGLE_SCRIPT.values(), "zh", "ja", *(lang for langs in _BY_SCRIPT.values() for lang in langs)}
)
# letters plus the combining marks of the scripts above (vowel signs are marks, not \w: without
# them "आहे" splits into pieces that match other languages' stop words)
_MARKED = r"(?:[^\W\d_]|[\u0300-\u036f\u0483-\u0489\u0591-\u05c7\u0610-\u061a\u064b-\u065f\u0670\u06d6-\u06ed\u0900-\u0dff\u0e31-\u0e4e])"
_WORD = re.compile(_MARKED + "+(?:['’]" + _MARKED + "+)*")


def _script(ch: str) -> str | None:
    code = ord(ch)
    for name, ranges in _SCRIPTS:
        if any(lo <= code <= hi for lo, hi in ranges):
            return name
    if ch.isalpha() and "LATIN" in unicodedata.name(ch, ""):
        return "latin"
    return None


def detect_language(text: str) -> str | None:
    """The ISO 639-1 code of the main language of ``text`` (None when it has no letters)."""
    scripts = Counter(s for ch in text if (s := _script(ch)) is not None)
    if not scripts:
        return None
    if scripts["kana"] > 0 and scripts["kana"] + scripts["han"] >= 0.3 * sum(scripts.values()):
        return "ja"  # Japanese mixes kana with kanji; Chinese has no kana
    top = scripts.most_common(1)[0][0]
    if top == "han":
        return "zh"
    if top == "kana":
        return "ja"
    if top in _SINGLE_SCRIPT:
        return _SINGLE_SCRIPT[top]
    candidates = _BY_SCRIPT[top]
    lowered = text.casefold()
    words = _WORD.findall(lowered)
    scores: dict[str, float] = {}
    for lang in candidates:
        stop = _STOPWORDS.get(lang, set())
        hits = sum(1 for w in words if w in stop)
        letters = sum(lowered.count(ch) for ch in _LETTERS.get(lang, ""))
        scores[lang] = hits + 0.5 * min(letters, max(3, len(words) // 4))
    best = max(candidates, key=lambda lang: (scores[lang], -candidates.index(lang)))
    return best
