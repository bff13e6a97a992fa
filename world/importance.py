"""Importance scoring (seed 000's heuristic), pluggable through the `Scorer` protocol.

    score = 1.0
          + min(n_words / 70, 0.8)                      # longer, more informative text
          + 0.4 * #(key terms present as words)          # keyword bonus
          + 0.9 * |query words & text words| / |query words|   (only when a query is given)
    score = min(score, 2.5)

Change from the seed: key terms are matched as whole words; the seed matched substrings, so "how"
fired on "show" and "key" on "monkey".
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from world.embedding import tokenize

__all__ = ["Scorer", "ImportanceScorer", "SEED_KEY_TERMS"]

SEED_KEY_TERMS = frozenset(
    {
        "how", "why", "explain", "important", "key", "remember", "definition", "difference",
        "advantage", "memory", "context", "rag", "embedding", "hybrid", "decay", "tfidf", "compression",
    }
)


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
        if length_scale <= 0 or cap < 1.0:
            raise ValueError(f"need length_scale > 0 and cap >= 1.0, got {length_scale!r}, {cap!r}")
        self.key_terms = frozenset(t.lower() for t in key_terms)
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
