"""Importance scoring (seed 000's heuristic), pluggable through the `Scorer` protocol.

    score = 1.0
          + min(n_words / 70, 0.8)                      # longer, more informative text
          + 0.4 * #(key terms present as words)          # keyword bonus
          + 0.9 * |query words & text words| / |query words|   (only when a query is given)
    score = min(score, 2.5)

Change from the seed: key terms are matched as whole words; the seed matched substrings, so "how"
fired on "show" and "key" on "monkey". A key term must therefore be one word as ``tokenize`` sees
it ("long term", "C++", "it's" could never match and are refused, naming ``key_terms``).
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Iterable
from typing import Protocol, runtime_checkable

import numpy as np

from world.embedding import tokenize

__all__ = ["Scorer", "ImportanceScorer", "SEED_KEY_TERMS"]

SEED_KEY_TERMS = frozenset(
    {
        "how", "why", "explain", "important", "key", "remember", "definition", "difference",
        "advantage", "memory", "context", "rag", "embedding", "hybrid", "decay", "tfidf", "compression",
    }
)


def _number(name: str, value: object, low: float, allowed: str, strict: bool = False) -> float:
    """``value`` as a float; ValueError naming the setting and the allowed values otherwise."""
    ok = (not isinstance(value, bool | np.bool_) and isinstance(value, int | float | np.integer | np.floating)
          and math.isfinite(value) and (value > low if strict else value >= low))
    if not ok:
        raise ValueError(f"ImportanceScorer: {name} must be {allowed}, got {value!r}")
    return float(value)


def _key_tokens(terms: list[str]) -> frozenset[str]:
    """The key terms as the tokens they are, or ValueError naming ``key_terms`` for a term that can
    never match: the score compares key terms with the text's tokens (``world.embedding.tokenize``),
    so a term must be one such token ("long term" is two, "C++" becomes "c", "it's" becomes "it", an
    empty term none). Letter case, Unicode normalisation and a typographic apostrophe do not count."""
    bad, out = [], set()
    for t in terms:
        low = t.lower()
        if not low.isascii():  # (tokens are NFC, with ' for ’: "cafe" + a combining accent is "café")
            low = unicodedata.normalize("NFC", low.replace("\u2019", "'"))
        got = tokenize(t)
        if got != [low]:
            bad.append(f"{t!r} (-> {got})")
        else:
            out.add(low)
    if bad:
        raise ValueError(f"ImportanceScorer: key_terms must be single words as the scorer tokenizes a text "
                         f"(letters and digits, inner apostrophes but no possessive 's); these can never "
                         f"match: {', '.join(bad)}")
    return frozenset(out)


@runtime_checkable
class Scorer(Protocol):
    """Anything that maps a text (and optionally the query it answers) to an importance >= 0."""

    def score(self, text: str, query: str | None = None) -> float: ...


class ImportanceScorer:
    """Seed 000's importance heuristic (range [1.0, cap], cap 2.5)."""

    def __init__(
        self,
        key_terms: Iterable[str] = SEED_KEY_TERMS,
        length_scale: float = 70.0,
        length_cap: float = 0.8,
        keyword_bonus: float = 0.4,
        query_bonus: float = 0.9,
        cap: float = 2.5,
    ) -> None:
        # every setting checked by name: NaN would make every score NaN (or, through min(), silently
        # the cap), a negative bonus a negative importance (an immediate sweep)
        length_scale = _number("length_scale", length_scale, 0.0, "a finite number > 0", strict=True)
        length_cap = _number("length_cap", length_cap, 0.0, "a finite number >= 0")
        keyword_bonus = _number("keyword_bonus", keyword_bonus, 0.0, "a finite number >= 0")
        query_bonus = _number("query_bonus", query_bonus, 0.0, "a finite number >= 0")
        cap = _number("cap", cap, 1.0, "a finite number >= 1.0")
        terms = None if isinstance(key_terms, str) else list(key_terms)
        if terms is None or not all(isinstance(t, str) for t in terms):
            raise ValueError(f"ImportanceScorer: key_terms must be an iterable of strings, got {key_terms!r}")
        # (the seed's terms are single words already: tested)
        self.key_terms = frozenset(t.lower() for t in terms) if key_terms is SEED_KEY_TERMS else _key_tokens(terms)
        self.length_scale = length_scale
        self.length_cap = length_cap
        self.keyword_bonus = keyword_bonus
        self.query_bonus = query_bonus
        self.cap = cap

    def score(self, text: str, query: str | None = None) -> float:
        words = text.lower().split()
        tokens = set(tokenize(text))
        s = 1.0 + min(len(words) / self.length_scale, self.length_cap)
        s += self.keyword_bonus * len(self.key_terms & tokens)
        if query:
            q = set(tokenize(query))
            if q:
                s += self.query_bonus * len(q & tokens) / len(q)
        return min(self.cap, s)

    __call__ = score
