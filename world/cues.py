"""Cue extraction: the entity-like keywords that index a memory in the associative graph.

Rule (seed 001's extractor): tokens stripped of surrounding punctuation, stop words and tokens of
<= 2 characters dropped, lower-cased and de-duplicated. Capitalised or numeric tokens are
entity-like and always kept; other content words are kept only while fewer than max_cues // 2 cues
have been collected; at most `max_cues` cues. Change from the seed: a possessive "'s" / "’s" is
removed, so "Alice's" and "Alice" give the same cue "alice".
"""

from __future__ import annotations

__all__ = ["extract_cues", "STOP_WORDS", "is_entity_like"]

STOP_WORDS = frozenset(
    "the a an and or but of in on at to for with by is are was were be been being this that these "
    "those i you he she it we they our their my your his her its not no yes".split()
)

_STRIP = ".,;:!?()[]{}\"'`“”‘’"


def _clean(word: str) -> str:
    w = word.strip(_STRIP)
    for suffix in ("'s", "’s"):
        if w.lower().endswith(suffix):
            w = w[: -len(suffix)]
    return w.strip(_STRIP)


_POSSESSIVE = ("'s", "’s")


def is_entity_like(word: str) -> bool:
    """Capitalised or containing a digit: names, places, numbers, dates."""
    return bool(word) and (word[0].isupper() or any(c.isdigit() for c in word))


def extract_cues(text: str, max_cues: int = 8) -> list[str]:
    """Up to `max_cues` lower-cased cue words of `text`, entity-like first-come, in text order."""
    if max_cues < 1:
        raise ValueError(f"max_cues must be >= 1, got {max_cues!r}")
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
        seen.add(low)
        if len(cues) < half or w[0].isupper() or any(c.isdigit() for c in w):  # is_entity_like(w)
            cues.append(low)
            if len(cues) >= max_cues:
                break
    return cues
