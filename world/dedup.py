"""Duplicate detection: seed 000's rules, a content fingerprint and an embedding near-duplicate test.

A new text is a duplicate of a stored one when (first rule that fires wins):

1. fingerprint: sha256 of the normalised text (lower case, whitespace collapsed) is equal;
2. containment: one text's word sequence occurs inside the other's (seed: raw substring);
3. strong prefix: the first half of the new text equals the first half of the old (len > 10);
4. Jaccard: word-set Jaccard >= 0.72;
5. embedding: cosine similarity >= `embed_threshold` (checked by the store with one mat-vec).

Rules 2-5 look at a recent window (12 memories, seed 000) except rule 5 and the fingerprint, which
cover the whole namespace.

Value-aware guard (a bug fix): a world states facts and then *changes* them ("Alice's favourite
drink is tea" -> "... is coffee", "Bob is 30" -> "Bob is 31"). The seed's prefix rule and any loose
similarity threshold call such updates duplicates and drop them. Rules 2-5 therefore never fire when
the two texts show a *value change*: the content words (stop words removed, negations kept) differ on
both sides (a substitution), a differing content word is entity-like (capitalised or numeric), or a
negation ("not", "never", "...n't") appears on one side only. The
seed's own Jaccard rule is guarded too: in a long sentence one substituted value still passes 0.72.
Containment uses word boundaries ("Bob is 3" is not inside "Bob is 30").
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from world.cues import STOP_WORDS

__all__ = [
    "TextSignature", "signature", "fingerprint", "normalize", "value_change", "duplicate_rule",
    "embedding_duplicate", "DedupConfig", "words",
]

_WORD_RE = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z0-9]+)*")
_DEDUP_STOP = STOP_WORDS - {"not", "no"}


def normalize(text: str) -> str:
    return " ".join(text.lower().split())


def fingerprint(text: str) -> str:
    """16-hex content fingerprint of the normalised text (seed 003's memory_fingerprint, normalised)."""
    return hashlib.sha256(normalize(text).encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class TextSignature:
    norm: str
    fp: str
    words: tuple[str, ...]  # lower-cased word sequence
    word_set: frozenset[str]
    content: frozenset[str]  # words minus stop words (negations kept)
    entities: frozenset[str]  # lower-cased forms of capitalised / numeric words


def _word(w: str) -> str:
    w = w.replace("’", "'")  # noqa: RUF001
    return w[:-2] if w.lower().endswith("'s") else w


def words(text: str) -> list[str]:
    """Lower-cased words of `text` as the dedup rules see them (possessive 's removed)."""
    return [_word(w).lower() for w in _WORD_RE.findall(text)]


_DIGITS = frozenset("0123456789")
_POSSESSIVE = ("'s", "'S")


def signature(text: str) -> TextSignature:
    """The text's :class:`TextSignature`.

    Written for speed (it runs for every event and every write): the word pattern matches ASCII
    letters, digits and apostrophes only, so ``’`` can be replaced in the whole text before matching
    (the pattern treats both apostrophes alike), ``w.lower().endswith("'s")`` is ``w.endswith(("'s",
    "'S"))``, "capital or digit first" is ``w[0] <= "Z"`` and "has a digit" is a set test. A test
    compares it with the plain per-word rule on random texts.
    """
    raw = [w[:-2] if w.endswith(_POSSESSIVE) else w for w in _WORD_RE.findall(text.replace("’", "'"))]  # noqa: RUF001
    words = tuple([w.lower() for w in raw])
    word_set = frozenset(words)
    norm = " ".join(text.lower().split())  # normalize(text)
    # the frozen dataclass's fields set directly (its __init__ costs one object.__setattr__ each)
    sig = _new_signature(TextSignature)
    sig.__dict__.update(
        norm=norm,
        fp=hashlib.sha256(norm.encode("utf-8")).hexdigest()[:16],
        words=words,
        word_set=word_set,
        content=word_set.difference(_DEDUP_STOP),
        # a first character <= "Z" is a capital or a digit; an all-letter word has no digit
        entities=frozenset([lw for w, lw in zip(raw, words)
                            if w[0] <= "Z" or (not w.isalpha() and not _DIGITS.isdisjoint(w))]),
    )
    return sig


_new_signature = object.__new__


_NEGATIONS = frozenset({"not", "no", "never", "none", "nobody", "nothing", "neither", "nor", "cannot"})


def _negation(words: frozenset[str]) -> bool:
    return bool(words & _NEGATIONS) or any(w.endswith("n't") for w in words)


def value_change(a: TextSignature, b: TextSignature) -> bool:
    """True when a and b state different values: substituted content words, a differing entity-like
    word, or a negation present on one side only."""
    only_a = a.content - b.content
    only_b = b.content - a.content
    if only_a and only_b:
        return True
    return bool((only_a & a.entities) or (only_b & b.entities) or _negation(only_a | only_b))


def _contains(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    if not a or not b:
        return False
    sa, sb = " " + " ".join(a) + " ", " " + " ".join(b) + " "
    return sa in sb or sb in sa


@dataclass(frozen=True)
class DedupConfig:
    window: int = 12
    jaccard: float = 0.72
    embed_threshold: float = 0.95
    value_aware: bool = True

    def __post_init__(self) -> None:
        if self.window < 0:
            raise ValueError(f"dedup window must be >= 0, got {self.window!r}")
        if not 0.0 <= self.jaccard <= 1.0:
            raise ValueError(f"dedup jaccard must be in [0, 1], got {self.jaccard!r}")
        if not -1.0 <= self.embed_threshold <= 1.0 + 1e-9:
            raise ValueError(f"dedup embed_threshold must be in [-1, 1], got {self.embed_threshold!r}")


def duplicate_rule(new: TextSignature, old: TextSignature, config: DedupConfig = DedupConfig()) -> str | None:
    """Name of the lexical rule (fingerprint / containment / prefix / jaccard) that fires, or None."""
    if new.fp == old.fp:
        return "fingerprint"
    if config.value_aware and value_change(new, old):
        return None
    if _contains(new.words, old.words):
        return "containment"
    half = len(new.norm) // 2
    if len(new.norm) > 10 and half > 0 and new.norm[:half] == old.norm[:half]:
        return "prefix"
    union = new.word_set | old.word_set
    if union and len(new.word_set & old.word_set) / len(union) >= config.jaccard:
        return "jaccard"
    return None


def embedding_duplicate(new: TextSignature, old: TextSignature, cosine: float, config: DedupConfig = DedupConfig()) -> bool:
    """Rule 5: near-identical embeddings, unless the texts show a value change."""
    if cosine < config.embed_threshold:
        return False
    return not (config.value_aware and value_change(new, old))
