"""world.keys: the subject + topic key read from visible text (shared by `versioned` and the env)."""

import pytest

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


def test_a_name_with_initials_is_one_subject():
    """Endless worlds tell namesakes apart by initials: "Theo W." and "Theo X." are two people, so
    their texts share no subject (they shared "theo", so `same_key` held across them); the same
    person's texts still do, and a bare "Theo" (another person again) is neither of them."""
    own = subject_and_topic("Walter Z.'s favourite food is bibimbap.")
    ask = subject_and_topic("Which food is Walter Z.'s favourite now?")
    other = subject_and_topic("Walter J.'s favourite food is falafel.")
    assert own[0] == frozenset({"walter z"}) and other[0] == frozenset({"walter j"})
    assert own[0] & ask[0] and not own[0] & other[0]
    assert subject_and_topic("The car Walter J. drives is a Saab.")[0] == frozenset({"walter j", "saab"})
    assert subject_and_topic("Lena S. T. lives in Varholm.")[0] == frozenset({"lena s t", "varholm"})
    assert subject_and_topic("Theo and Theo X. met.")[0] == frozenset({"theo", "theo x"})
    assert subject_and_topic("Theo met Wim.")[0] == frozenset({"theo", "wim"})  # no initials: as before
    assert subject_and_topic("I saw Anna. A dog barked.")[0] == frozenset({"user", "anna"})
    # an initial that is a stop word or "I" is still an initial, not the article or the user
    assert subject_and_topic("Which instrument does Umar A. play?")[0] == frozenset({"umar a"})
    assert subject_and_topic("Umar I. plays the drums.")[0] == frozenset({"umar i"})
    assert subject_and_topic("I told Umar I. about it.")[0] == frozenset({"umar i", "user"})


def test_features_tell_namesakes_apart():
    """The env's same_subject / same_key read the same key (envs.features uses subject_and_topic_of)."""
    a, b, c = (subject_and_topic_of(signature(t)) for t in (
        "Walter Z.'s favourite food is bibimbap.", "Walter J.'s favourite food is falafel.",
        "Walter Z.'s new favourite food is pho."))
    assert a[0].isdisjoint(b[0]) and not a[0].isdisjoint(c[0]) and not a[1].isdisjoint(c[1])


@pytest.mark.parametrize("a, b", [
    # habit episodes of two people on the same weekday shared the subject "friday"
    ("In week 20 Lukas ordered paella on Friday night.", "In week 15 Finn ordered gumbo on Friday night."),
    ("It's already December, can you believe it?", "Greta moved to Halbury in December."),
    # the world's sentence starters
    ("Remind me to buy eggs later.", "Remind Carl about the meeting."),
    ("Traffic was heavy this morning.", "Traffic was awful near Halbury."),
])
def test_days_months_and_sentence_starters_are_no_subjects(a, b):
    sa, _ = subject_and_topic(a)
    sb, _ = subject_and_topic(b)
    assert not (sa & sb - {"user"}), (sa, sb)


def test_first_person_words_are_the_user_not_a_subject_word():
    for text in ("I've moved to Lisbon.", "I'd like green tea.", "I'll be in Oslo."):
        subject, _ = subject_and_topic(text)
        assert "user" in subject and not subject & {"i've", "i'd", "i'll"}, (text, subject)


def test_a_possessive_after_an_initial_adds_no_topic_word():
    # "Theo X.'s" splits into "x" and "s": every such text shared the topic word "s"
    assert subject_and_topic("Theo X.'s hobby is chess.") == (frozenset({"theo x"}), frozenset({"hobby", "chess"}))
    _, car = subject_and_topic("Theo X.'s car is an Opel.")
    _, hobby = subject_and_topic("Theo X.'s hobby is chess.")
    assert not car & hobby
