"""Version keys read from visible text: subject (who) + topic (what), seed 003's ``user:42/pref/format``.

Shared by the ``versioned`` baseline (which decides WRITE / UPDATE / FORGET on them) and the env's
candidate features (``same_subject`` / ``same_topic`` / ``same_key``), so that both read the same key
from the same text. Only the text is read, never a hidden payload.

- subject: the entity-like words (capitalised or numeric, :func:`world.dedup.signature`) minus stop
  words, sentence-initial function words (the world's sentence starters "Remind", "Erase", "Can",
  "Traffic" among them), first-person words and the names of days and months (when, not who); a name with initials ("Theo X.", "Lena S. T.", as endless
  worlds name namesakes) is one subject, ``"theo x"``, so that "Theo W." and "Theo X." share none
  (the first name alone stays a subject only where it also stands without the initials); a
  first-person word adds the subject ``user``;
- topic: the remaining content words (stop words removed, negations kept).
"""

from __future__ import annotations

import functools
import re
from collections import Counter

from world.cues import STOP_WORDS
from world.dedup import TextSignature, signature

__all__ = ["subject_and_topic", "subject_and_topic_of", "USER_WORDS", "FUNCTION_WORDS"]

USER_WORDS = frozenset({"i", "my", "me", "mine", "myself", "i'm", "i've", "i'd", "i'll"})
_TIME_WORDS = frozenset(
    [d + s for d in ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday") for s in ("", "s")]
    + "january february march april may june july august september october november december".split()
)
# Capitalised only because they start a sentence (the world's own sentence starters among them), or
# names of days and months (when, not who): not subjects. ("may" is a month and a verb: neither is who.)
FUNCTION_WORDS = frozenset({"please", "let", "let's", "did", "do", "does", "what", "when", "where", "which", "who",
                            "how", "why", "on", "week", "write", "nothing", "there", "here", "so", "well", "oh",
                            "remind", "erase", "can", "traffic",
                            "s"}) | _TIME_WORDS  # ("s": a possessive after an initial, "Theo X.'s", splits off)


_NOT_SUBJECT = STOP_WORDS | FUNCTION_WORDS | USER_WORDS
_NOT_TOPIC = USER_WORDS | FUNCTION_WORDS
_USER = frozenset({"user"})

# in the normalised (lower-case) text: a word followed by one or more one-letter initials with a period
_INITIALS_RE = re.compile(r"(?<![\w'])(\w+)((?: [^\W\d_]\.)+)")


@functools.lru_cache(maxsize=8192)
def subject_and_topic(text: str) -> tuple[frozenset, frozenset]:
    """(subject words, topic words) of ``text``; pure and cached (texts are immutable strings)."""
    return subject_and_topic_of(signature(text))


def subject_and_topic_of(sig: TextSignature) -> tuple[frozenset, frozenset]:
    """(subject words, topic words) from a text's signature (for callers that already have it)."""
    entities, norm = sig.entities, sig.norm
    subject = frozenset(entities.difference(_NOT_SUBJECT))
    user = not sig.word_set.isdisjoint(USER_WORDS)
    # (only where a one-letter word stands before a period: "I think ..." has none)
    if "." in norm and 1 in map(len, entities) and any(f" {w}." in norm for w in entities if len(w) == 1):
        merged = set(subject)
        user = bool((sig.word_set & USER_WORDS) - _merge_initials(sig, merged))  # ("Umar I." is not the user)
        subject = frozenset(merged)
    if user:
        subject = subject | _USER
    return subject, frozenset(sig.content.difference(entities, _NOT_TOPIC))


def _merge_initials(sig: TextSignature, subject: set) -> set:
    """Replace, in ``subject``, the words of each "Firstname X." (capitalised name, capital initials)
    by one subject "firstname x"; a part that also occurs on its own elsewhere in the text stays.
    Returns the words that occur only as parts of such names."""
    used: Counter = Counter()
    for m in _INITIALS_RE.finditer(sig.norm):
        first, initials = m.group(1), m.group(2).replace(".", "").split()
        if first not in subject or any(i not in sig.entities for i in initials):
            continue
        subject.add(" ".join([first, *initials]))
        used.update([first, *initials])
    counts = Counter(sig.words)
    only = {w for w, n in used.items() if counts[w] <= n}
    subject -= only
    return only
