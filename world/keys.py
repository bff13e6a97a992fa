"""Version keys read from visible text: subject (who) + topic (what), seed 003's ``user:42/pref/format``.

Shared by the ``versioned`` baseline (which decides WRITE / UPDATE / FORGET on them) and the env's
candidate features (``same_subject`` / ``same_topic`` / ``same_key``), so that both read the same key
from the same text. Only the text is read, never a hidden payload.

- subject: the entity-like words (capitalised or numeric, :func:`world.dedup.signature`) minus stop
  words and sentence-initial function words; a first-person word adds the subject ``user``;
- topic: the remaining content words (stop words removed, negations kept).
"""

from __future__ import annotations

import functools

from world.cues import STOP_WORDS
from world.dedup import TextSignature, signature

__all__ = ["subject_and_topic", "subject_and_topic_of", "USER_WORDS", "FUNCTION_WORDS"]

USER_WORDS = frozenset({"i", "my", "me", "mine", "myself", "i'm", "i've"})
# Capitalised only because they start a sentence: not subjects.
FUNCTION_WORDS = frozenset({"please", "let", "let's", "did", "do", "does", "what", "when", "where", "which", "who",
                            "how", "why", "on", "week", "write", "nothing", "there", "here", "so", "well", "oh"})


@functools.lru_cache(maxsize=8192)
def subject_and_topic(text: str) -> tuple[frozenset, frozenset]:
    """(subject words, topic words) of ``text``; pure and cached (texts are immutable strings)."""
    return subject_and_topic_of(signature(text))


def subject_and_topic_of(sig: TextSignature) -> tuple[frozenset, frozenset]:
    """(subject words, topic words) from a text's signature (for callers that already have it)."""
    subject = {w for w in sig.entities if w not in STOP_WORDS and w not in FUNCTION_WORDS}
    if sig.word_set & USER_WORDS:
        subject.add("user")
    topic = sig.content - sig.entities - USER_WORDS - FUNCTION_WORDS
    return frozenset(subject), frozenset(topic)
