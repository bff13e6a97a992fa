"""Duplicate detection: seed 000's rules, a content fingerprint and an embedding near-duplicate test.

A new text is a duplicate of a stored one when (first rule that fires wins):

1. fingerprint: sha256 of the normalised text (NFC, lower case, whitespace collapsed) is equal;
2. containment: one text's word sequence occurs inside the other's (seed: raw substring);
3. strong prefix: the first half of the new text equals the first half of the old (len > 10);
4. Jaccard: word-set Jaccard >= 0.72;
5. embedding: cosine similarity >= `embed_threshold` (checked by the store with one mat-vec).

Rules 2-4 look at a recent window (12 memories, seed 000: ``DedupConfig.window``, whatever
``embed_window`` is); the fingerprint covers the whole namespace; rule 5 (in the store) the last
``embed_window`` memories (512; the whole namespace when ``embed_window=None``).

Value-aware guard (a bug fix): a world states facts and then *changes* them ("Alice's favourite
drink is tea" -> "... is coffee", "Bob is 30" -> "Bob is 31"). The seed's prefix rule and any loose
similarity threshold call such updates duplicates and drop them. Rules 2-5 therefore never fire when
the two texts show a *value change* (:func:`value_change`): the content words (stop words removed,
negations kept) differ on both sides (a substitution), a differing content word is entity-like
(capitalised or numeric), a negation ("not", "never", "...n't") appears on one side only, a word is
replaced by its opposite, stop words included ("on" -> "off", "he" -> "she"), or a number differs as
written ("-40" -> "40", "3.5" -> "5.3"). The
seed's own Jaccard rule is guarded too: in a long sentence one substituted value still passes 0.72.
Containment uses word boundaries ("Bob is 3" is not inside "Bob is 30").

Words, in any script (:func:`words`, :func:`signature`): a text that is not plain ASCII is first
put in Unicode normal form NFC; a word is a run of letters and digits of any script (with the
combining marks that follow them, so "हिन्दी" or a decomposed "Zoë" stays one word), inner
apostrophes kept, a possessive "'s" removed. Scripts written without spaces between words (Han,
Hiragana, Katakana, Thai, Lao, Khmer, Myanmar) give one word per character, so that two different
sentences never collapse into one unknown token and a name such as 张伟 is found inside a sentence
as a sequence of words. Entity-like means a first letter that is upper case (``str.isupper``: "Émile",
"Zoë") or a digit of any script anywhere in the word. Plain-ASCII texts give exactly the words of
the ASCII pattern ``[A-Za-z0-9]+(?:['’][A-Za-z0-9]+)*`` (their fast path).
"""

from __future__ import annotations

import functools
import hashlib
import numbers
import re
import unicodedata
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter

from world.cues import NO_SPACE_RANGES, STOP_WORDS

__all__ = [
    "TextSignature", "signature", "fingerprint", "normalize", "value_change", "duplicate_rule",
    "embedding_duplicate", "DedupConfig", "words", "raw_words", "is_entity_word", "unicode_word_pattern",
    "words_of_token", "signature_of_tokens",
]

# plain-ASCII texts (everything the environments produce): the fast path
_ASCII_WORD_RE = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z0-9]+)*")
_DEDUP_STOP = STOP_WORDS - {"not", "no"}

# Scripts written without spaces between words: one word per character (with its combining marks).
_NO_SPACE_RANGES = NO_SPACE_RANGES
_IS_WORD_CHAR = re.compile(r"[^\W_]").match


def _char_class(codes: list[int]) -> str:
    """A regex character-class body for the code points ``codes`` (sorted), as ranges."""
    out, start, prev = [], None, None
    for c in codes + [-2]:
        if prev is not None and c == prev + 1:
            prev = c
            continue
        if start is not None:
            out.append(re.escape(chr(start)) + ("-" + re.escape(chr(prev)) if prev > start else ""))
        start = prev = c
    return "".join(out)


@functools.lru_cache(maxsize=1)
def unicode_word_pattern() -> re.Pattern:
    """The word pattern for texts that are not plain ASCII (built once, on first use: it scans the
    Unicode table for combining marks, about 0.1 s). Matches a no-space-script character with its
    marks, or a run of other letters / digits (and their marks) with inner apostrophes."""
    marks = _char_class([c for c in range(0x110000) if unicodedata.category(chr(c))[0] == "M"])
    no_space = [c for lo, hi in _NO_SPACE_RANGES for c in range(lo, hi + 1) if _IS_WORD_CHAR(chr(c))]
    excluded = "".join(re.escape(chr(lo)) + "-" + re.escape(chr(hi)) for lo, hi in _NO_SPACE_RANGES)
    letter = rf"[^\W_{excluded}]"
    run = rf"{letter}(?:{letter}|[{marks}])*"
    return re.compile(rf"{run}(?:['’]{run})*|[{_char_class(no_space)}][{marks}]*")


def raw_words(text: str) -> list[str]:
    """The words of ``text`` as written (case kept, possessive not yet removed)."""
    if text.isascii():
        return _ASCII_WORD_RE.findall(text)
    return unicode_word_pattern().findall(unicodedata.normalize("NFC", text))


def normalize(text: str) -> str:
    """``text`` lower-cased with white space collapsed, in Unicode NFC when it is not plain ASCII: the
    same text typed in NFD (macOS, some input methods: "e" + a combining diaeresis) has the same
    fingerprint, as it has the same words (a keyed fact repeated in NFD was stored as a new version).
    Plain-ASCII text is its own NFC form: it pays for one ``isascii`` test."""
    if not text.isascii():
        text = unicodedata.normalize("NFC", text)
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
    return [_word(w).lower() for w in raw_words(text)]


def is_entity_word(w: str) -> bool:
    """Entity-like: an upper-case first letter or a digit (any script) anywhere in the word."""
    return w[0].isupper() or any(c.isdigit() for c in w)


_DIGITS = frozenset("0123456789")
_HAS_DIGIT = re.compile(r"[0-9]").search
_POSSESSIVE = ("'s", "'S")


def signature(text: str) -> TextSignature:
    """The text's :class:`TextSignature`.

    Written for speed on plain-ASCII texts (it runs for every event and every write): a plain-ASCII
    text holds no ``’``, so the ASCII pattern finds exactly the words of the plain rule;
    ``w.lower().endswith("'s")`` is ``w.endswith(("'s", "'S"))`` (only a text with an apostrophe has
    such a word); the words hold no white space, so joining them, lower-casing the line and splitting
    it again lower-cases each; "capital or digit first" is ``w[0] <= "Z"`` and "has a digit" is a set
    test (needed only when the text has a digit). Other texts take the plain per-word rule. A test
    compares it with the plain rule on random texts.
    """
    if not text.isascii():
        return _signature_unicode(text)
    raw = _ASCII_WORD_RE.findall(text)
    if "'" in text:
        raw = [w[:-2] if w.endswith(_POSSESSIVE) else w for w in raw]
    words = tuple(" ".join(raw).lower().split())
    word_set = frozenset(words)
    norm = " ".join(text.lower().split())  # normalize(text)
    if _HAS_DIGIT(text) is None:  # a first character <= "Z" is a capital (no digit anywhere)
        entities = frozenset([lw for w, lw in zip(raw, words) if w[0] <= "Z"])
    else:  # ... or a digit; an all-letter word has no digit
        entities = frozenset([lw for w, lw in zip(raw, words)
                              if w[0] <= "Z" or (not w.isalpha() and not _DIGITS.isdisjoint(w))])
    return _signature_of(norm, words, word_set, entities)


def _signature_of(norm: str, words: tuple[str, ...], word_set: frozenset[str],
                  entities: frozenset[str]) -> TextSignature:
    """The TextSignature of these fields, its fingerprint and content words added."""
    # the frozen dataclass's fields set directly (its __init__ costs one object.__setattr__ each)
    sig = _new_signature(TextSignature)
    sig.__dict__.update(
        norm=norm,
        fp=hashlib.sha256(norm.encode("utf-8")).hexdigest()[:16],
        words=words,
        word_set=word_set,
        content=word_set.difference(_DEDUP_STOP),
        entities=entities,
    )
    return sig


_new_signature = object.__new__


def words_of_token(raw: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(words, entity_words)`` of ``raw``, one whitespace token (``str.split``) of a plain-ASCII text,
    as :func:`signature` reads them: its lower-cased words in order (possessive removed) and those of
    them that are entity-like. No word spans white space, so a text's words are its tokens' words in
    order. A pure function of the token, so a caller may keep it per token (the worlds do for their
    script texts: :func:`signature_of_tokens` then builds the text's signature)."""
    raw_w = [w[:-2] if w.endswith(_POSSESSIVE) else w for w in _ASCII_WORD_RE.findall(raw)]
    words = tuple(w.lower() for w in raw_w)
    # (signature's entity rule word by word: a word holding a digit can only occur in a text holding one)
    return words, tuple(lw for w, lw in zip(raw_w, words)
                        if w[0] <= "Z" or (not w.isalpha() and not _DIGITS.isdisjoint(w)))


_WORDS_OF, _ENTITIES_OF = itemgetter(0), itemgetter(1)


def signature_of_tokens(tokens: list[str], words: list[tuple]) -> TextSignature:
    """``signature(text)`` of a plain-ASCII text from its whitespace tokens (``text.split()``) and their
    :func:`words_of_token` (``words``, in the same order): the same fields, built in the same order."""
    all_words = tuple(chain.from_iterable(map(_WORDS_OF, words)))
    # (the lower-cased text's tokens joined: lower-casing plain ASCII moves no white space)
    return _signature_of(" ".join(tokens).lower(), all_words, frozenset(all_words),
                         frozenset(chain.from_iterable(map(_ENTITIES_OF, words))))


def _signature_unicode(text: str) -> TextSignature:
    """signature() of a text that is not plain ASCII: the plain rule, word by word."""
    raw = [_word(w) for w in raw_words(text)]
    words = tuple(w.lower() for w in raw)
    norm = normalize(text)
    return TextSignature(
        norm=norm, fp=hashlib.sha256(norm.encode("utf-8")).hexdigest()[:16], words=words,
        word_set=frozenset(words), content=frozenset(w for w in words if w not in _DEDUP_STOP),
        entities=frozenset(w.lower() for w in raw if is_entity_word(w)),
    )


_NEGATIONS = frozenset({"not", "no", "never", "none", "nobody", "nothing", "neither", "nor", "cannot"})


def _negation(words: frozenset[str]) -> bool:
    return bool(words & _NEGATIONS) or any(w.endswith("n't") for w in words)


# Stop words that name a value opposite to another one: a substitution of one for its opposite is a
# value change ("the light is on" -> "off"), while other stop-word changes are paraphrases ("Celia has
# archery as a hobby" -> "Celia's hobby is archery", which the world repeats as the same fact).
_OPPOSITES: dict[str, frozenset[str]] = {}
for _x, _y in (("on", "off"), ("in", "out"), ("up", "down"), ("he", "she"), ("him", "her"), ("his", "her"),
               ("his", "hers"), ("before", "after"), ("above", "below"), ("over", "under"), ("yes", "no"),
               ("more", "less"), ("most", "least"), ("always", "never"), ("all", "none"), ("open", "closed"),
               ("true", "false"), ("inside", "outside"), ("first", "last"), ("we", "they")):
    _OPPOSITES[_x] = _OPPOSITES.get(_x, frozenset()) | {_y}
    _OPPOSITES[_y] = _OPPOSITES.get(_y, frozenset()) | {_x}
del _x, _y
# a number as written, with its sign and decimal part (the word pattern splits "3.5" into two words
# and drops the minus of "-40")
_NUMBER_RE = re.compile(r"(?<![^\W_])-?\d+(?:[.,]\d+)*")


def value_change(a: TextSignature, b: TextSignature) -> bool:
    """True when a and b state different values:

    - substituted content words ("tea" -> "coffee"), a differing entity-like word, or a negation on
      one side only;
    - a word replaced by its opposite, stop words included ("the light is on" -> "off", "he" -> "she");
    - other numbers as written ("-40" -> "40", "3.5" -> "5.3").

    Not detected: the same words in other roles ("Alice owes Bob" / "Bob owes Alice"), which word
    order cannot tell from a paraphrase ("Ulrich is Magnus's sibling" / "Magnus's sibling is Ulrich").
    """
    only_a = a.content - b.content
    only_b = b.content - a.content
    if only_a and only_b:
        return True
    if (only_a & a.entities) or (only_b & b.entities) or _negation(only_a | only_b):
        return True
    diff_a = a.word_set - b.word_set
    if diff_a:
        diff_b = b.word_set - a.word_set
        if diff_b and any(not diff_b.isdisjoint(_OPPOSITES.get(w, ())) for w in diff_a):
            return True
    return _numbers(a.norm) != _numbers(b.norm)


def _numbers(norm: str) -> frozenset[str]:
    return frozenset(_NUMBER_RE.findall(norm)) if any(c.isdigit() for c in norm) else frozenset()


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
        if isinstance(self.window, bool) or not isinstance(self.window, numbers.Integral) or self.window < 0:
            raise ValueError(f"dedup window must be an int >= 0, got {self.window!r}")
        object.__setattr__(self, "window", int(self.window))  # (a numpy integer is fine, stored as int)
        if not _is_real(self.jaccard) or not 0.0 <= self.jaccard <= 1.0:  # (NaN fails the range test)
            raise ValueError(f"dedup jaccard must be a number in [0, 1], got {self.jaccard!r}")
        if not _is_real(self.embed_threshold) or not -1.0 <= self.embed_threshold <= 1.0 + 1e-9:
            raise ValueError(f"dedup embed_threshold must be a number in [-1, 1], got {self.embed_threshold!r}")
        # a truthy "no" turned the guard on and None turned it off, silently: a bool only
        if not isinstance(self.value_aware, bool):
            raise ValueError(f"dedup value_aware must be True or False, got {self.value_aware!r}")


def _is_real(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


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
