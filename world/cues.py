"""Cue extraction: the entity-like keywords that index a memory in the associative graph.

Rule (seed 001's extractor): tokens stripped of surrounding punctuation, stop words and tokens of
<= 2 characters dropped, lower-cased and de-duplicated. Capitalised or numeric tokens are
entity-like and always kept; other content words are kept only while fewer than max_cues // 2 cues
have been collected; at most `max_cues` cues. Change from the seed: a possessive "'s" / "’s" is
removed, so "Alice's" and "Alice" give the same cue "alice"; a run of colons inside a token is read
as one ("std::vector" -> "std:vector"), so no cue holds "::" (the store's graph view uses it to put
a namespace in a cue node's name, and refuses caller cues holding it: docs/store.md, Namespaces).
A text that is not plain ASCII is put in Unicode NFC first (as words and fingerprints are), so the
same words typed in NFD give the same cues.

Scripts written without spaces between words (Han, Hiragana, Katakana, Thai, Lao, Khmer, Myanmar:
:data:`NO_SPACE_RANGES`) have no whitespace to split on: a run of their letters inside a token gives
its overlapping character bigrams as words ("张伟住在东京" -> 张伟, 伟住, 住在, 在东, 东京; a single
letter stays as it is), the usual indexing of such text (bigram indexing, as CJK analysers of search
engines do). These scripts have no letter case, so nothing marks a name: every bigram counts as
entity-like (kept up to `max_cues`), and the length rule does not apply to them. Letters of other scripts around them in the same
token follow the rule above. A text without such letters gives exactly the cues of the rule above.
"""

from __future__ import annotations

import numbers
import re
import unicodedata

__all__ = ["extract_cues", "STOP_WORDS", "is_entity_like", "NO_SPACE_RANGES", "is_no_space_letter",
           "cue_name_ok", "colon_rule", "cue_of_token", "cues_of_tokens", "nfc_cues"]

STOP_WORDS = frozenset(
    "the a an and or but of in on at to for with by is are was were be been being this that these "
    "those i you he she it we they our their my your his her its not no yes".split()
)

_STRIP = ".,;:!?()[]{}\"'`“”‘’"

#: Code-point ranges of scripts written without spaces between words (world.dedup splits them too).
NO_SPACE_RANGES = (
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1780, 0x17FF),  # Khmer
    (0x2E80, 0x2FDF),  # CJK radicals, Kangxi radicals
    (0x3005, 0x3007),  # 々 〆 〇
    (0x3021, 0x3029),  # Hangzhou numerals
    (0x3031, 0x303C),  # kana repeat marks, 〻 〼
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x31F0, 0x31FF),  # Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF66, 0xFF9F),  # half-width Katakana
    (0x20000, 0x3FFFF),  # CJK extensions B and later
)


def is_no_space_letter(c: str) -> bool:
    """A letter or digit of a script written without spaces (:data:`NO_SPACE_RANGES`)."""
    code = ord(c)
    return code > 0xDFF and any(lo <= code <= hi for lo, hi in NO_SPACE_RANGES) and (c.isalnum() or
                                                                                    _is_mark(c))


def _is_mark(c: str) -> bool:
    return unicodedata.category(c)[0] == "M"


def _clean(word: str) -> str:
    w = word.strip(_STRIP)
    for suffix in ("'s", "’s"):
        if w.lower().endswith(suffix):
            w = w[: -len(suffix)]
    return w.strip(_STRIP)


def _clean_unicode(word: str) -> str:
    """:func:`_clean` that also strips non-ASCII punctuation (category P*) at both ends: text in a
    no-space script uses full-width marks ("Alice。", "「Alice」"), which must not stick to a name
    (its cue would never meet the plain one). ASCII marks are treated as on the ASCII path ("#101",
    "-40" and "@alice" stay as they are there)."""
    w = _clean(word)
    start, end = 0, len(w)
    while start < end and not w[start].isascii() and unicodedata.category(w[start]).startswith("P"):
        start += 1
    while end > start and not w[end - 1].isascii() and unicodedata.category(w[end - 1]).startswith("P"):
        end -= 1
    return _clean(w[start:end]) if (start, end) != (0, len(w)) else w


_POSSESSIVE = ("'s", "’s")
_COLONS = re.compile(r":{2,}")
_HAS_DIGIT = re.compile(r"[0-9]").search  # (str.isdigit's digits in plain ASCII; "²" or "٣" are digits too)


def cue_name_ok(cue: str) -> bool:
    """The colon rule of a cue: no "::" in it and no leading ":" (store.graph names a namespace's cue
    node "cue::<namespace>::<cue>": with this rule the last "::" splits a name one way only).
    :func:`extract_cues` never gives a cue that breaks it."""
    return "::" not in cue and not cue.startswith(":")


def colon_rule(cue: str) -> str:
    """``cue`` rewritten to follow :func:`cue_name_ok` as :func:`extract_cues` reads text: a run of
    colons is one, a leading ':' goes ("std::vector" -> "std:vector")."""
    return _COLONS.sub(":", cue).lstrip(":")


def is_entity_like(word: str) -> bool:
    """Capitalised or containing a digit: names, places, numbers, dates."""
    return bool(word) and (word[0].isupper() or any(c.isdigit() for c in word))


def _split_no_space(raw: str) -> list[tuple[str, bool]]:
    """(part, is_bigram) of a whitespace token holding no-space-script letters: their runs as
    overlapping bigrams (a lone letter alone; a combining mark stays with its letter), the text
    between them as ordinary parts."""
    out: list[tuple[str, bool]] = []
    run: list[str] = []  # letters of the current no-space run, each with its marks
    other: list[str] = []

    def flush_run() -> None:
        if len(run) == 1:
            out.append((run[0], True))
        out.extend((run[i] + run[i + 1], True) for i in range(len(run) - 1))
        run.clear()

    for c in raw:
        if is_no_space_letter(c):
            if _is_mark(c) and run:
                run[-1] += c
                continue
            if other:
                out.append(("".join(other), False))
                other.clear()
            run.append(c)
        else:
            if run:
                flush_run()
            other.append(c)
    if run:
        flush_run()
    if other:
        out.append(("".join(other), False))
    return out


def extract_cues(text: str, max_cues: int = 8) -> list[str]:
    """Up to `max_cues` lower-cased cue words of `text`, entity-like first-come, in text order."""
    if type(max_cues) is not int and (isinstance(max_cues, bool) or not isinstance(max_cues, numbers.Integral)) \
            or max_cues < 1:  # (a plain int first: the ABC check costs more than the rest of a short text)
        raise ValueError(f"max_cues must be an integer >= 1, got {max_cues!r}")
    if "::" in text:  # (colons at a token's ends are stripped anyway; inside it, one stands for a run)
        text = _COLONS.sub(":", text)
    if not text.isascii():
        # NFC, as words, fingerprints and the embedder read text: "Zoë" typed in NFD ("e" + a combining
        # diaeresis) gives the cue a query typed in NFC reaches (it reached no cue node: PPR was off)
        text = unicodedata.normalize("NFC", text)
        if any(is_no_space_letter(c) for c in text):
            return _extract_cues_mixed(text, max_cues)
    cues: list[str] = []
    seen: set[str] = set()
    half = max_cues // 2
    for raw in text.split():
        w = raw.strip(_STRIP)
        low = w.lower()
        if low.endswith(_POSSESSIVE):  # rare: the full rule (without a possessive it is the strip)
            w = _clean(raw)
            low = w.lower()
        if len(w) <= 2 or low in STOP_WORDS or low in seen:
            continue
        if len(cues) < half or w[0].isupper() or _HAS_DIGIT(w) or (
                not w.isascii() and any(c.isdigit() for c in w)):  # is_entity_like(w)
            # (marked seen only when kept: a word skipped in lower case may come back capitalised)
            seen.add(low)
            cues.append(low)
            if len(cues) >= max_cues:
                break
    return cues


def nfc_cues(cues: list[str]) -> list[str]:
    """``cues`` in Unicode NFC, as :func:`extract_cues` gives them (a caller's cues and those of a file of
    an earlier release, which kept NFD cues): the list itself when nothing changes (plain ASCII: one
    test), else the normalised cues with a repeat dropped (two forms of one cue are one cue)."""
    if "".join(cues).isascii():
        return cues
    out = [unicodedata.normalize("NFC", c) for c in cues]
    return cues if out == cues else list(dict.fromkeys(out))


def cue_of_token(raw: str) -> tuple[str | None, bool]:
    """What :func:`extract_cues` reads from ``raw``, one whitespace token (``str.split``) of a plain-ASCII
    text holding no "::": ``(cue, entity_like)``, the lower-cased cue word (None when the token gives
    none: 2 characters or fewer once stripped, or a stop word) and whether it is entity-like. A pure
    function of the token, so a caller may keep it per token (the worlds do for their script texts:
    :func:`cues_of_tokens` then picks the text's cues)."""
    w = raw.strip(_STRIP)
    low = w.lower()
    if low.endswith(_POSSESSIVE):  # (as extract_cues: the full rule only with a possessive)
        w = _clean(raw)
        low = w.lower()
    if len(w) <= 2 or low in STOP_WORDS:
        return None, False
    return low, bool(w[0].isupper() or _HAS_DIGIT(w))


def cues_of_tokens(tokens, max_cues: int) -> list[str]:
    """``extract_cues(text, max_cues)`` from the :func:`cue_of_token` of each whitespace token of
    ``text`` (a plain-ASCII text holding no "::"), in text order; ``max_cues`` an int >= 1."""
    cues: list[str] = []
    seen: set[str] = set()
    half = max_cues // 2
    for cue, entity_like in tokens:
        if cue is None or cue in seen:
            continue
        if entity_like or len(cues) < half:
            seen.add(cue)
            cues.append(cue)
            if len(cues) >= max_cues:
                break
    return cues


def _extract_cues_mixed(text: str, max_cues: int) -> list[str]:
    """:func:`extract_cues` of a text with no-space-script letters (see the module docstring)."""
    cues: list[str] = []
    seen: set[str] = set()
    half = max_cues // 2
    for token in text.split():
        parts = _split_no_space(token) if any(is_no_space_letter(c) for c in token) else [(token, False)]
        for part, bigram in parts:
            w = part if bigram else _clean_unicode(part)
            low = w.lower()
            if (not bigram and len(w) <= 2) or not w or low in STOP_WORDS or low in seen:
                continue
            if bigram or len(cues) < half or is_entity_like(w):
                seen.add(low)
                cues.append(low)
                if len(cues) >= max_cues:
                    return cues
    return cues
