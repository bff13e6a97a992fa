"""world.keys: the subject + topic key read from visible text (shared by `versioned` and the env)."""

from world.dedup import signature
from world.keys import subject_and_topic, subject_and_topic_of


def test_subject_is_entities_or_user_topic_the_other_content_words():
    assert subject_and_topic("My favourite drink is tea.") == (frozenset({"user"}), frozenset({"favourite", "drink", "tea"}))
    assert subject_and_topic("Alice moved to Berlin in 2019.") == (
        frozenset({"alice", "berlin", "2019"}), frozenset({"moved"}))
    # sentence-initial function words are capitalised but are not subjects
    assert subject_and_topic("Please forget where Alice lives.") == (frozenset({"alice"}), frozenset({"forget", "lives"}))
    assert subject_and_topic("What does Bob like?") == (frozenset({"bob"}), frozenset({"like"}))


def test_cached_and_signature_forms_agree():
    for text in ("I moved to Paris.", "Bob is 31 now", "nothing to see here", ""):
        assert subject_and_topic(text) == subject_and_topic_of(signature(text))


def test_versioned_uses_the_shared_parser():
    from agents import baselines

    assert baselines._subject_and_topic is subject_and_topic
