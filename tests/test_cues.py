"""Cue extraction for scripts written without spaces (world.cues): character bigrams, and the
retrieval they make possible. Texts without such letters keep the seed's rule
(tests/test_speed_invariance.py compares that rule written plainly)."""

from __future__ import annotations

import numpy as np
import pytest

from world.cues import extract_cues, is_no_space_letter
from world.embedding import HashingEmbedder
from world.memory import MemoryStore


@pytest.mark.parametrize(("text", "max_cues", "expected"), [
    ("张伟住在东京。", 8, ["张伟", "伟住", "住在", "在东", "东京"]),
    ("张伟住在东京。", 3, ["张伟", "伟住", "住在"]),
    ("タ", 8, ["タ"]),  # a lone letter stays alone
    ("Tokyo東京 tower", 8, ["tokyo", "東京", "tower"]),  # other scripts in the token: the usual rule
    ("我在東京工作 Alice met Bob", 8, ["我在", "在東", "東京", "京工", "工作", "alice", "bob"]),
    ("東京 東京", 8, ["東京"]),  # de-duplicated
    ("Alice's cat is at home", 8, ["alice", "cat", "home"]),  # no such letters: the seed's rule
])
def test_no_space_scripts_give_character_bigrams(text, max_cues, expected):
    assert extract_cues(text, max_cues) == expected


def test_no_space_letters():
    assert all(is_no_space_letter(c) for c in "东京タカナไทย")
    assert not any(is_no_space_letter(c) for c in "Aé1 。、！")


def test_a_chinese_fact_is_found_through_its_shared_word():
    """Before: the whole sentence was one cue, so a question sharing only the word 东京 reached the
    memory through no cue and a similar-looking sentence about 北京 ranked first."""
    store = MemoryStore(HashingEmbedder(64))
    tokyo = store.write_episode(1, "张伟住在东京。")
    store.write_episode(2, "李娜喜欢喝咖啡。")
    store.write_episode(3, "王芳在北京工作。")
    assert "东京" in tokyo.cues
    top = store.query("东京的天气怎么样？", top_k=3, bump=False)
    assert top[0].memory_id == tokyo.memory_id


@pytest.mark.parametrize("text", ["我认识Alice。", "我喜欢Alice，她住在东京", "「Alice」は東京に住んでいる", "ฉันรู้จัก Alice…"])
def test_full_width_punctuation_does_not_stick_to_a_name(text):
    """In a no-space script a name is followed or wrapped by full-width marks; its cue must be the
    plain one, which a question "Where is Alice?" seeds (it was "alice。")."""
    cues = extract_cues(text)
    assert "alice" in cues and not any("alice" in c and c != "alice" for c in cues)


@pytest.mark.parametrize("bad", [None, True, 2.5, 0, "8"])
def test_max_cues_must_be_a_positive_integer(bad):
    with pytest.raises((ValueError, TypeError), match="max_cues"):
        extract_cues("Alice met Bob in Paris", bad)


@pytest.mark.parametrize("mixed, plain", [("房间 #101 是空的", "Room #101 is free"), ("温度是 -40 度", "It was -40 outside"),
                                          ("联系 @Alice 吧", "ask @Alice today")])
def test_ascii_marks_give_the_same_cue_with_or_without_no_space_letters(mixed, plain):
    shared = set(extract_cues(mixed)) & set(extract_cues(plain))
    assert any(c.startswith(("#", "-", "@")) for c in shared), (extract_cues(mixed), extract_cues(plain))


@pytest.mark.parametrize("text, max_cues, expected", [
    ("the weather in berlin was cold, then Berlin got snow", 2, ["weather", "berlin"]),
    ("apple pie and orange juice for breakfast with Apple shares", 4, ["apple", "pie"]),
    ("小雨 weather in berlin was cold, then Berlin got snow", 3, ["小雨", "berlin"]),
])
def test_an_entity_like_word_is_kept_after_its_lower_case_form_was_skipped(text, max_cues, expected):
    # the docstring's "entity-like tokens are always kept": a word skipped in lower case (the half of
    # plain words was full) was marked seen and its capitalised form dropped later
    assert extract_cues(text, max_cues) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("Tea at alice::tea today", ["tea", "alice:tea", "today"]),
    ("use std::vector::size here", ["use", "std:vector:size", "here"]),
    ("at 10:30 with a:::b and ::Zed::", ["10:30", "a:b", "zed"]),  # one colon stays as it was
    ("東京::Alice", ["東京", "alice"]),
])
def test_a_run_of_colons_inside_a_word_reads_as_one(text, expected):
    """No extracted cue holds "::" (nor begins with ":"): the store's graph view names namespace N's
    cue node "cue::N::<cue>", and "alice::tea" of the default namespace was namespace alice's "tea"."""
    assert extract_cues(text) == expected


def test_no_extracted_cue_holds_a_double_colon_or_begins_with_one():
    rng = np.random.default_rng(3)
    pieces = ["a", "B", "1", ":", "::", ":::", "東", " ", "'s", "."]
    for _ in range(500):
        text = "".join(rng.choice(pieces, size=int(rng.integers(1, 30))))
        for cue in extract_cues(text):
            assert "::" not in cue and not cue.startswith(":"), (text, cue)
