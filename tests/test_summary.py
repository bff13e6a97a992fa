"""Rolling summaries (world/summary.py): extractive summarizer, window + fold, summary memory,
rebuild on erasure, state round trip."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from world.embedding import HashingEmbedder
from world.memory import EraseHookError, MemoryStore
from world.summary import (
    SUMMARY_HEADER,
    SUMMARY_KEY_PREFIX,
    ExtractiveSummarizer,
    LLMSummarizer,
    RollingSummary,
    Summarizer,
    all_summaries,
    export_summaries,
    restore_summaries,
    split_sentences,
    summaries,
)


def make_store(**kw) -> MemoryStore:
    return MemoryStore(embedder=HashingEmbedder(dim=64), **kw)


TURNS = [
    "Alice moved to Lisbon in May.",
    "Nice weather today.",
    "Bob's favourite drink is green tea, remember that.",
    "Ok.",
    "Carol works as a nurse at the city hospital.",
    "Haha, sure.",
    "Dave has a meeting with Erin on Friday about the budget.",
    "Thanks!",
    "Frank's sister Gina lives in Oslo.",
    "See you.",
]


# ------------------------------------------------------------------------------------------ #
# ExtractiveSummarizer                                                                        #
# ------------------------------------------------------------------------------------------ #


def test_extractive_is_a_summarizer_and_deterministic():
    s = ExtractiveSummarizer(max_chars=120)
    assert isinstance(s, Summarizer)
    a = s.summarize("", TURNS)
    b = ExtractiveSummarizer(max_chars=120).summarize("", TURNS)
    assert a == b
    assert 0 < len(a) <= 120


def test_extractive_keeps_important_sentences_in_original_order():
    s = ExtractiveSummarizer(max_chars=140)
    out = split_sentences(s.summarize("", TURNS))
    # every kept sentence is one of the inputs, and they come in input order
    all_sentences = [x for t in TURNS for x in split_sentences(t)]
    positions = [all_sentences.index(x) for x in out]
    assert positions == sorted(positions)
    # the top-scored sentence (ties: the later one) is always kept, chit-chat is not
    scores = {x: s.scorer.score(x) for x in all_sentences}
    best = max(reversed(all_sentences), key=lambda x: scores[x])
    assert best in out
    assert "Ok." not in out and "Thanks!" not in out


def test_extractive_dedups_and_clips():
    s = ExtractiveSummarizer(max_chars=30)
    out = s.summarize("Alice likes tea.", ["alice LIKES  tea.", "x" * 10 + " " + "y" * 40])
    assert out.casefold().count("alice likes tea") == 1
    assert len(out) <= 30
    long = ExtractiveSummarizer(max_chars=25).summarize("", ["word " * 40])
    assert 0 < len(long) <= 25 and long == long.strip() and not long.endswith(" w")


@settings(max_examples=60, deadline=None)
@given(prev=st.text(max_size=300), turns=st.lists(st.text(max_size=200), max_size=8),
       budget=st.integers(min_value=1, max_value=400))
def test_extractive_never_exceeds_budget(prev, turns, budget):
    out = ExtractiveSummarizer(max_chars=budget).summarize(prev, turns)
    assert len(out) <= budget
    assert out == ExtractiveSummarizer(max_chars=budget).summarize(prev, turns)


def test_extractive_rejects_bad_budget():
    with pytest.raises(ValueError, match="max_chars"):
        ExtractiveSummarizer(max_chars=0)
    with pytest.raises(ValueError, match="max_chars"):
        ExtractiveSummarizer(max_chars=2.5)


def test_llm_summarizer_prompt_and_clip():
    seen = []

    def fake_llm(prompt: str) -> str:
        seen.append(prompt)
        return "  Alice lives in Lisbon. " + "z" * 100

    s = LLMSummarizer(fake_llm, max_chars=40)
    out = s.summarize("Earlier: Bob.", ["Alice moved to Lisbon."])
    assert out.startswith("Alice lives in Lisbon.") and len(out) <= 40
    assert "Earlier: Bob." in seen[0] and "Alice moved to Lisbon." in seen[0]
    with pytest.raises(TypeError, match="returned int"):
        LLMSummarizer(lambda p: 3).summarize("", ["x"])
    with pytest.raises(TypeError, match="callable"):
        LLMSummarizer("not a function")


# ------------------------------------------------------------------------------------------ #
# RollingSummary                                                                              #
# ------------------------------------------------------------------------------------------ #


def test_window_and_fold_follow_seed_semantics():
    store = make_store()
    rs = RollingSummary(store, "alice", max_turns=4, keep_recent=2)
    for i, t in enumerate(TURNS[:4]):
        rs.add_turn(t, step=i)
    assert [t.text for t in rs.window] == TURNS[:4] and rs.text == "" and rs.memory is None
    rs.add_turn(TURNS[4], step=4)  # 5 > max_turns: fold all but the 2 newest
    assert [t.text for t in rs.window] == TURNS[3:5]
    assert [t.text for t in rs.folded] == TURNS[:3]
    assert rs.text == rs.summarizer.summarize("", TURNS[:3])
    mem = rs.memory
    assert mem is not None and mem.content == SUMMARY_HEADER + "\n" + rs.text
    assert mem.tier == "inference" and mem.confidence < 0.8
    assert mem.key == SUMMARY_KEY_PREFIX + "alice" and mem.namespace == "alice"
    assert list(mem.evidence) == [t.memory_id for t in rs.folded]
    # every turn is an episodic memory of the namespace
    for t in rs.folded + rs.window:
        assert store.get(t.memory_id).namespace == "alice"


def test_summary_versions_chain_and_retrieval():
    store = make_store()
    rs = RollingSummary(store, "alice", max_turns=2, keep_recent=1, summarizer=ExtractiveSummarizer(max_chars=120))
    for i, t in enumerate(TURNS):
        store.tick(i)
        rs.add_turn(t, step=i)
    chain = store.versions(rs.key, namespace="alice")
    assert len(chain) >= 3
    assert [m.active for m in chain] == [False] * (len(chain) - 1) + [True]
    assert chain[-1].memory_id == rs.memory_id and chain[-1].content == SUMMARY_HEADER + "\n" + rs.text
    assert len(rs.text) <= 120 and len(split_sentences(rs.text)) < len(rs.folded)
    # the running summary is retrieved like any memory; superseded versions never rank
    for sentence in split_sentences(rs.text):
        hits = [m.memory_id for m in store.query(sentence, top_k=10, namespace="alice", bump=False)]
        assert rs.memory_id in hits, sentence
    for old in chain[:-1]:
        hits = [m.memory_id for m in store.query(old.content, top_k=20, namespace="alice", bump=False)]
        assert old.memory_id not in hits


def test_failing_summarizer_leaves_state_unchanged():
    class Broken:
        def summarize(self, previous_summary, turns):
            return 42

    store = make_store()
    rs = RollingSummary(store, "s", max_turns=2, keep_recent=1, summarizer=Broken())
    rs.add_turn("one fact here.", step=0)
    rs.add_turn("two facts here.", step=1)
    before = rs.export_state()
    with pytest.raises(TypeError, match="returned int"):
        rs.add_turn("three facts here.", step=2)
    after = rs.export_state()
    assert after == before


def test_bad_arguments_are_named():
    store = make_store()
    with pytest.raises(ValueError, match="max_turns"):
        RollingSummary(store, "a", max_turns=0)
    with pytest.raises(ValueError, match="keep_recent"):
        RollingSummary(store, "a", max_turns=2, keep_recent=3)
    with pytest.raises(ValueError, match="confidence"):
        RollingSummary(store, "a", confidence=0.9)
    with pytest.raises(TypeError, match="summarizer"):
        RollingSummary(store, "a", summarizer=object())
    with pytest.raises(TypeError, match="text"):
        RollingSummary(store, "b").add_turn(123)


def test_registry_get_or_create_one_per_namespace():
    store = make_store()
    a = summaries(store, "alice", max_turns=3, keep_recent=1)
    assert summaries(store, "alice") is a
    assert summaries(store, "bob") is not a
    with pytest.raises(ValueError, match="max_turns"):
        summaries(store, "alice", max_turns=5)
    with pytest.raises(ValueError, match="already has"):
        RollingSummary(store, "alice")


def test_erasing_a_folded_turn_rebuilds_summary_as_if_it_never_existed():
    store = make_store()
    rs = RollingSummary(store, "alice", max_turns=3, keep_recent=1)
    ids = [rs.add_turn(t, step=i).memory_id for i, t in enumerate(TURNS)]
    victim = ids[2]  # "Bob's favourite drink is green tea, remember that."
    assert "green tea" in rs.text
    report = store.erase(memory_id=victim)
    assert "green tea" not in rs.text
    assert victim not in [t.memory_id for t in rs.folded + rs.window]
    # the rebuilt summary is what the same folds would give without the erased turn
    expected = ""
    for fold in rs._folds:
        expected = rs.summarizer.summarize(expected, [t.text for t in fold])
    assert rs.text == expected
    mem = rs.memory
    assert mem is not None and mem.content == SUMMARY_HEADER + "\n" + rs.text and victim not in mem.evidence
    for m in store.versions(rs.key, namespace="alice"):
        assert "green tea" not in m.content and victim not in (m.evidence or [])
    assert report is not None


def test_erasing_a_window_turn_drops_it():
    store = make_store()
    rs = RollingSummary(store, "alice", max_turns=5, keep_recent=2)
    ids = [rs.add_turn(t, step=i).memory_id for i, t in enumerate(TURNS[:3])]
    store.erase(memory_id=ids[1])
    assert [t.memory_id for t in rs.window] == [ids[0], ids[2]]


def test_erasing_the_summary_forgets_its_history():
    store = make_store()
    rs = RollingSummary(store, "alice", max_turns=2, keep_recent=1)
    for i, t in enumerate(TURNS[:5]):
        rs.add_turn(t, step=i)
    sid = rs.memory_id
    assert sid is not None
    store.erase(memory_id=sid)
    assert rs.text == "" and rs.folded == [] and rs.memory is None
    assert store.get(sid) is None
    # folding continues afterwards from an empty summary
    rs.add_turn(TURNS[6], step=7)
    rs.add_turn(TURNS[8], step=8)
    assert rs.text and "Alice moved" not in rs.text


def test_state_round_trip_and_restore():
    store = make_store()
    rs = summaries(store, "alice", max_turns=3, keep_recent=1,
                   summarizer=ExtractiveSummarizer(max_chars=90))
    for i, t in enumerate(TURNS):
        rs.add_turn(t, step=i)
    state = export_summaries(store)
    assert list(state) == ["alice"] and state["alice"]["summarizer"] == {"name": "extractive", "max_chars": 90}

    # a fresh object over the same store, restored from state, continues identically
    twin_store = make_store()
    twin = RollingSummary.from_state(twin_store, state["alice"], register=False)
    assert twin.export_state() == rs.export_state()
    assert twin.summarizer.max_chars == 90
    with pytest.raises(ValueError, match="version"):
        RollingSummary.from_state(store, {**state["alice"], "version": 99}, register=False)

    other = make_store()
    restore_summaries(other, state)
    assert summaries(other, "alice").export_state() == rs.export_state()


def test_namespaces_have_separate_summaries():
    store = make_store()
    a = summaries(store, "alice", max_turns=2, keep_recent=0)
    b = summaries(store, "bob", max_turns=2, keep_recent=0)
    for i, t in enumerate(TURNS[:3]):
        a.add_turn(t, step=i)
    b.add_turn("Zed plays the oboe.", step=0)
    assert a.text and b.text == ""
    hits = store.query("Alice moved to Lisbon", top_k=10, namespace="bob", bump=False)
    assert all(m.namespace == "bob" for m in hits)
    assert a.memory_id not in [m.memory_id for m in hits]


def _filled(max_chars: int = 800):
    store = make_store()
    rs = summaries(store, "alice", max_turns=3, keep_recent=1, summarizer=ExtractiveSummarizer(max_chars=max_chars))
    ids = [rs.add_turn(t, step=i).memory_id for i, t in enumerate(TURNS)]
    return store, rs, ids


@pytest.mark.parametrize("how", ["deepcopy", "pickle", "from_state"])
def test_snapshots_carry_summaries_and_their_erase_hooks(how):
    """World/env snapshots (deepcopy, pickle) and _from_state rebuilds keep working summaries: an
    erasure in the copy rebuilds the copy's summary and leaves the original alone."""
    import copy
    import pickle

    store, rs, ids = _filled()
    if how == "deepcopy":
        twin = copy.deepcopy(store)
    elif how == "pickle":
        twin = pickle.loads(pickle.dumps(store))
    else:
        twin = MemoryStore._from_state(store._export_state(), HashingEmbedder(dim=64))
    twin_rs = summaries(twin, "alice")
    assert twin_rs is not rs and twin_rs.store is twin
    assert twin_rs.export_state() == rs.export_state()
    twin.erase(memory_id=ids[2])
    assert "green tea" in rs.text and "green tea" not in twin_rs.text
    assert store.get(ids[2]) is not None and rs.memory is not None


def test_load_store_with_an_llm_summarizer(tmp_path):
    from world.persistence import load_store, save_store

    calls = []

    def fake_llm(prompt: str) -> str:
        calls.append(prompt)
        return "LLM summary: " + prompt.rsplit("- ", 1)[-1]

    store = make_store()
    rs = summaries(store, "alice", max_turns=2, keep_recent=1, summarizer=LLMSummarizer(fake_llm, max_chars=200))
    for i, t in enumerate(TURNS[:4]):
        rs.add_turn(t, step=i)
    n_calls = len(calls)
    assert rs.export_state()["summarizer"] == {"name": "llm", "max_chars": 200}
    save_store(store, tmp_path / "m.sqlite")
    # without the summarizer the saved text is there, folding continues with the extractive default
    plain = load_store(tmp_path / "m.sqlite", embedder=HashingEmbedder(dim=64))
    assert summaries(plain, "alice").text == rs.text
    assert isinstance(summaries(plain, "alice").summarizer, ExtractiveSummarizer)
    # ... a save before any fold keeps the LLM's config (nothing lost) ...
    assert summaries(plain, "alice").export_state()["summarizer"] == {"name": "llm", "max_chars": 200}
    # ... and the first fold says so, once
    with pytest.warns(UserWarning, match=r"namespace 'alice': its summarizer 'llm' could not be saved.*"
                                         r"summarizers=\{'alice': <summarizer>\}"):
        for i, t in enumerate(TURNS[4:7]):
            summaries(plain, "alice").add_turn(t, step=10 + i)
    assert summaries(plain, "alice").export_state()["summarizer"]["name"] == ExtractiveSummarizer.name
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i, t in enumerate(TURNS[:3]):
            summaries(plain, "alice").add_turn(t, step=20 + i)
    # with it, the LLM keeps summarizing
    loaded = load_store(tmp_path / "m.sqlite", embedder=HashingEmbedder(dim=64),
                        summarizers={"alice": LLMSummarizer(fake_llm, max_chars=200)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no stand-in: no warning)
        summaries(loaded, "alice").add_turn(TURNS[4], step=5)
        summaries(loaded, "alice").add_turn(TURNS[5], step=6)
    assert len(calls) > n_calls and summaries(loaded, "alice").text.startswith("LLM summary:")
    with pytest.raises(KeyError, match="bob"):
        load_store(tmp_path / "m.sqlite", embedder=HashingEmbedder(dim=64), summarizers={"bob": ExtractiveSummarizer()})


@pytest.mark.parametrize("bad", ["d", ["d"], 5])
def test_summarizers_that_are_no_mapping_are_a_value_error_naming_them(bad):
    """restore_summaries (load_store's summarizers=) took any value and failed with a bare AttributeError."""
    from world.summary import restore_summaries

    store = make_store()
    with pytest.raises(ValueError, match=r"summarizers must be a dict of namespace -> summarizer"):
        restore_summaries(store, {}, summarizers=bad)


def test_store_without_summaries_exports_no_summary_state():
    store = make_store()
    store.write_episode(0, "Alice moved to Lisbon.")
    assert export_summaries(store) == {} and all_summaries(store) == {}
    assert "summaries" not in store._export_state()["extra"]
    restore_summaries(store)
    assert "summaries" not in store._export_state()["extra"]


def test_add_memory_and_fold_now():
    store = make_store()
    rs = RollingSummary(store, "alice", max_turns=5, keep_recent=1)
    a = store.write_episode(0, TURNS[0], namespace="alice")
    b = store.write_episode(1, TURNS[2], namespace="alice")
    other = store.write_episode(1, TURNS[4], namespace="bob")
    rs.add_memory(a.memory_id, step=0)
    rs.add_memory(b.memory_id, step=1)
    with pytest.raises(ValueError, match="namespace 'bob'"):
        rs.add_memory(other.memory_id)
    with pytest.raises(KeyError, match="no live memory"):
        rs.add_memory("ep_999999")
    assert rs.fold_now(step=2) is True
    assert [t.memory_id for t in rs.folded] == [a.memory_id] and [t.memory_id for t in rs.window] == [b.memory_id]
    assert rs.memory is not None and list(rs.memory.evidence) == [a.memory_id]
    assert rs.fold_now() is False


def test_erasing_a_key_or_subject_reaches_turns_already_gone_from_the_store():
    """A folded turn whose memory was forgotten or swept still lives in the summary's text; erasing
    its key or its subject must take it out of the summary too."""
    store = make_store()
    rs = RollingSummary(store, "default", max_turns=2, keep_recent=1)
    rs.add_turn("Alice's locker code is 4711.", step=0, key="alice/locker")
    rs.add_turn("Gina rows on the river every morning.", step=1)
    rs.add_turn("Frank teaches pottery at the library.", step=2)
    rs.add_turn("Erin's favourite drink is green tea.", step=3)
    rs.add_turn("Hugo plays the oboe.", step=4)
    assert "4711" in rs.text and "Gina" in rs.text and "Frank" in rs.text
    for t in rs.folded[:2]:
        store.forget(t.memory_id)  # they leave the store; the summary keeps what they said
    assert rs.memory is not None and "4711" in rs.memory.content  # the summary memory stays
    report = store.erase(key="alice/locker")
    assert report.episodic == []  # no memory of that key is left in the store ...
    assert "4711" not in rs.text and "Gina" in rs.text  # ... but the summary forgot it
    assert report.extra["summaries"]["default"]["turns_dropped"] == 1
    store.erase(subject="Gina")
    assert "Gina" not in rs.text and "Frank" in rs.text
    assert all("Gina" not in t.text and "4711" not in t.text for t in rs.folded + rs.window)
    # by id: the turn's memory was already forgotten, the store removes nothing, the summary still drops it
    frank = next(t for t in rs.folded if "Frank" in t.text)
    store.forget(frank.memory_id)
    report = store.erase(memory_id=frank.memory_id)
    assert report.episodic == [] and "Frank" not in rs.text
    assert all("Frank" not in t.text for t in rs.folded + rs.window)
    for m in list(store.episodic.values()) + list(store.semantic.values()):
        assert "4711" not in m.content and "Gina" not in m.content


def test_erasure_in_another_namespace_does_not_touch_this_summary():
    store = make_store()
    a = summaries(store, "alice", max_turns=2, keep_recent=1)
    b = summaries(store, "bob", max_turns=2, keep_recent=1)
    for i, t in enumerate(TURNS[:4]):
        a.add_turn(t, step=i)
        b.add_turn(t, step=i)
    before = a.export_state()
    report = store.erase(subject="Alice", namespace="bob")
    assert report.namespaces == ["bob"]
    assert a.export_state() == before and "Alice" in a.text
    assert "Alice" not in b.text


def test_summaries_through_a_namespace_view():
    store = make_store()
    view = store.namespace("alice")
    rs = summaries(view, max_turns=2, keep_recent=1)
    assert rs is summaries(store, "alice") and rs.namespace == "alice" and rs.store is store
    for i, t in enumerate(TURNS[:3]):
        rs.add_turn(t, step=i)
    assert rs.memory is not None and rs.memory.namespace == "alice"
    assert rs.memory_id in view and rs.memory_id in [m.memory_id for m in view.query("Alice Lisbon", top_k=10)]
    with pytest.raises(ValueError, match="view of namespace 'alice'"):
        RollingSummary(view, "bob")


def test_store_summaries_method():
    store = make_store()
    rs = store.summaries("alice", max_turns=2, keep_recent=1)
    assert rs is summaries(store, "alice") and store.summaries("alice") is rs
    assert store.summaries() is summaries(store) and store.summaries().namespace == store.default_namespace


def test_turns_at_earlier_steps_than_the_last_fold_still_fold():
    """Turn steps are the caller's: turns at step 5 after a fold at step 13 fold into a summary version
    written at 13 (the store refuses a version that starts before the one it supersedes)."""
    store = make_store()
    rs = RollingSummary(store, max_turns=3, keep_recent=1)
    for i in range(4):
        rs.add_turn(f"Turn {i}: Alice moved to city number {i}.", step=10 + i)
    first = rs.memory
    for i in range(3):
        rs.add_turn(f"Late turn {i}: Bob plays the oboe number {i}.", step=5)
    assert rs.memory is not first and "Bob" in rs.memory.content and rs.memory.written_at == first.written_at
    assert rs.text == rs.memory.content.split("\n", 1)[1]


def test_an_empty_fold_is_refused_and_the_summary_stays_as_it_was():
    """A summarizer returning "" for non-empty turns left the previous version active in the store
    while the summary object reported none; the fold is refused, as for a non-str result."""
    s = make_store()
    answers = iter(["Alice lives in Lisbon.", ""])
    rs = RollingSummary(s, max_turns=2, keep_recent=1, summarizer=LLMSummarizer(lambda prompt: next(answers)))
    for i, text in enumerate(TURNS[:4]):  # (the third turn folds: the first answer)
        rs.add_turn(text, step=i)
    before = (rs.text, rs.memory_id, [(v.memory_id, v.active) for v in s.versions(rs.key)], len(rs.window))
    assert before[0] == "Alice lives in Lisbon." and before[1] is not None
    with pytest.raises(ValueError, match="empty summary"):
        rs.add_turn(TURNS[4], step=4)  # the second fold
    assert (rs.text, rs.memory_id, [(v.memory_id, v.active) for v in s.versions(rs.key)], len(rs.window)) == before


@pytest.mark.parametrize("namespace", ["*", "", 5])
def test_a_bad_namespace_is_refused_before_anything_is_registered(namespace):
    s = make_store()
    with pytest.raises(ValueError, match="namespace must be a non-empty string"):
        RollingSummary(s, namespace)
    with pytest.raises(ValueError, match="namespace must be a non-empty string"):
        summaries(s, namespace)
    assert all_summaries(s) == {}


def test_summaries_refuses_an_unknown_argument_for_an_existing_summary():
    s = make_store()
    summaries(s, "a", max_turns=6)
    with pytest.raises(TypeError, match="unknown argument 'max_turn'.*max_turns"):
        summaries(s, "a", max_turn=10)
    assert summaries(s, "a", max_turns=6).max_turns == 6


def test_an_empty_first_fold_is_accepted_and_folding_goes_on():
    """A summarizer may keep nothing of a chit-chat-only fold when there is no summary yet: that is
    not refused (refusing it stopped the summary for good: the window never moved past those turns)."""
    s = make_store()

    def llm(prompt):
        names = [n for n in ("Alice", "Bob") if n + " " in prompt.split("turns", 1)[-1] or n + "'" in prompt]
        return " ".join(f"{n} was mentioned." for n in names)

    rs = RollingSummary(s, max_turns=2, keep_recent=1, summarizer=LLMSummarizer(llm))
    for i, text in enumerate(["Nice weather today.", "Haha, sure.", "Thanks!", "Alice moved to Lisbon.",
                              "Bob drinks green tea.", "Ok then."]):
        rs.add_turn(text, step=i)
    assert "Alice" in rs.text and rs.memory_id is not None and len(rs.window) <= 2


def test_erasing_a_chain_whose_versions_all_left_drops_its_turns_whatever_the_target():
    """Both versions of a key were forgotten, then the chain was erased from one version's id: the
    store removed the chain (no live record went, so the report lists no namespace), and the
    summary must drop its turns as it does for erase(key=...)."""
    store = make_store()
    rs = summaries(store, max_turns=6, keep_recent=4)
    v1 = rs.add_turn("Alice's locker code is 1111.", step=1, key="alice/locker")
    v2 = rs.add_turn("Alice's locker code is now 2222.", step=2, key="alice/locker")
    rs.add_turn("Bob plays chess.", step=3)
    store.forget(v1.memory_id)
    store.forget(v2.memory_id)
    report = store.erase(memory_id=v1.memory_id)
    assert [t.text for t in rs.window] == ["Bob plays chess."]
    assert all("2222" not in str(v) for v in rs.export_state().values())
    assert report.namespaces == [] and report.chains == [("default", "alice/locker")]


def test_a_key_erased_in_another_namespace_leaves_this_summary_alone():
    """A key names a chain within its namespace: erasing the `work` chain of bob/drink (by subject,
    across namespaces) must not drop the default namespace's turn of its own bob/drink chain."""
    store = make_store()
    rs = summaries(store, max_turns=2, keep_recent=1)
    bob = rs.add_turn("Bob likes green tea.", step=1, key="bob/drink")
    rs.add_turn("Carol is a nurse.", step=2)
    rs.add_turn("Dave moved to Oslo.", step=3)  # folds the first two
    store.write_episode(4, "Alice lost her keys.")
    store.write_episode(4, "Alice bought Bob a coffee.", key="bob/drink", namespace="work")
    before = rs.export_state()
    report = store.erase(subject="Alice", namespace="*")
    assert rs.export_state() == before and "Bob likes green tea." in rs.text
    assert "summaries" not in report.extra and store.get(bob.memory_id) is not None
    assert report.chains == [("work", "bob/drink")]


class _SummaryWritesFail:
    """A hashing embedder that raises, when told to, on the summary memory's text (the turns still
    embed): the summary's write fails after the summarizer succeeded."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder(dim=64)
        self.dim, self.name = 64, "hashing-64"
        self.fail = False

    def encode(self, text):
        if self.fail and text.startswith(SUMMARY_HEADER):
            raise OSError("embedding service down")
        return self.inner.encode(text)


def test_a_rebuild_after_an_erasure_writes_after_the_remaining_history():
    """The erasure removed the active summary version (its evidence held the erased turn); the
    version left ends at step 5 while the store's clock is 0: the rebuilt version is written at 5
    (the store refuses an earlier one), not refused with the summary cleared."""
    store = make_store()
    rs = summaries(store, "alice", max_turns=2, keep_recent=1)
    ids = [rs.add_turn(t, step=s).memory_id for s, t in enumerate(
        ["Alice moved to Lisbon.", "Bob plays chess.", "Carol is a nurse.", "Dave rows daily.", "Erin sails."],
        start=1)]
    assert store.current_step == 0 and [v.written_at for v in store.versions(rs.key, namespace="alice")] == [3, 5]
    report = store.erase(memory_id=ids[3])  # "Dave rows daily.": only in the second fold
    assert report.extra["summaries"]["alice"]["rebuilt"] == rs.memory_id and not rs.rebuild_pending
    assert rs.text == "Alice moved to Lisbon.\nBob plays chess.\nCarol is a nurse."
    assert rs.memory.written_at == 5 and rs.memory.active


def test_a_fold_after_the_active_version_was_forgotten_writes_after_the_history_left():
    """The active summary version was forgotten (or swept); the superseded one left ends at step 21:
    a fold of turns at steps 15-16 writes its version at 21 instead of failing half-applied."""
    store = make_store()
    rs = summaries(store, max_turns=2, keep_recent=1)
    for step, t in [(10, "Bob plays chess."), (11, "Carol is a nurse."), (12, "Dave moved to Oslo."),
                    (20, "Erin rows daily."), (21, "Frank teaches pottery.")]:
        rs.add_turn(t, step=step)
    store.forget(rs.memory_id)
    rs.add_turn("Gina sails on Sundays.", step=15)
    rs.add_turn("Hank fixes bikes.", step=16)  # folds Frank and Gina
    assert [t.text for t in rs.window] == ["Hank fixes bikes."] and len(rs._folds) == 3
    assert rs.memory is not None and rs.memory.written_at == 21 and "Gina" in rs.memory.content


def test_a_failing_summary_write_leaves_the_fold_undone_and_a_retry_adds_the_turn_once():
    emb = _SummaryWritesFail()
    store = MemoryStore(embedder=emb)
    rs = summaries(store, max_turns=2, keep_recent=1)
    rs.add_turn("Alice moved to Lisbon.", step=1)
    rs.add_turn("Bob plays chess.", step=2)
    before = rs.export_state()
    emb.fail = True
    with pytest.raises(OSError, match="embedding service down"):
        rs.add_turn("Carol is a nurse.", step=3)
    assert rs.export_state() == before and rs.memory_id is None
    with pytest.raises(OSError):
        rs.fold_now()
    assert rs.export_state() == before
    emb.fail = False
    rs.add_turn("Carol is a nurse.", step=3)  # the retry: the store already holds the turn (a duplicate)
    assert [t.text for t in rs.window] == ["Carol is a nurse."]
    assert [t.text for t in rs.folded] == ["Alice moved to Lisbon.", "Bob plays chess."]
    assert rs.memory is not None and rs.text == "Alice moved to Lisbon.\nBob plays chess."


def test_rebuild_whose_write_fails_changes_nothing():
    """rebuild() after a failed rebuild: if the summary's write fails again, the summary stays empty
    and pending (as its docstring says), and a later rebuild() writes it."""
    emb = _SummaryWritesFail()
    store = MemoryStore(embedder=emb)
    rs = summaries(store, max_turns=2, keep_recent=1)
    ids = [rs.add_turn(t, step=i).memory_id for i, t in enumerate(
        ["Alice moved to Lisbon.", "Bob plays chess.", "Carol is a nurse."])]
    emb.fail = True
    with pytest.raises(EraseHookError):
        store.erase(memory_id=ids[0])
    assert rs.text == "" and rs.rebuild_pending and rs.memory_id is None
    with pytest.raises(OSError):
        rs.rebuild()
    assert rs.text == "" and rs.rebuild_pending and rs.memory_id is None
    emb.fail = False
    assert rs.rebuild() is True
    assert rs.text == "Bob plays chess." and not rs.rebuild_pending and rs.memory is not None


def test_a_fold_that_leaves_the_text_unchanged_still_records_its_turns_as_evidence():
    """The summary's budget keeps only the first sentence, so later folds leave the text as it was and
    the store keeps the version (a duplicate under the key): its evidence must still name every turn
    folded so far, so that erasing one of them cascades to the version."""
    store = make_store()
    rs = summaries(store, max_turns=2, keep_recent=1, summarizer=ExtractiveSummarizer(max_chars=33))
    ids = [rs.add_turn(t, step=i).memory_id for i, t in enumerate(
        ["Alice's PIN is 4242, remember it!", "ok.", "hm.", "yes.", "fine."])]
    version = rs.memory
    assert [t.memory_id for t in rs.folded] == ids[:4] and len(store.versions(rs.key)) == 1
    assert version.evidence == ids[:4] and version.derived_from == ids[:4]
    assert store.graph.has_edge(version.memory_id, ids[3]) and store.graph.has_edge(ids[3], version.memory_id)
    report = store.erase(memory_id=ids[3])
    assert version.memory_id in report.cascaded and store.get(version.memory_id) is None
    assert rs.text == "Alice's PIN is 4242, remember it!" and rs.memory.evidence == ids[:3]


# ----------------------------------------------------------------------------- audit session 9
@pytest.mark.parametrize("kwargs, field", [
    ({"namespace": "bad\ud83d"}, "namespace"),
    ({"namespace": "ok", "source": "user\ud83d"}, "source"),
    ({"namespace": "ok", "source": b"user"}, "source"),
])
def test_a_namespace_or_source_the_store_could_not_save_is_refused_before_registering(tmp_path, kwargs, field):
    """A lone surrogate was registered: every later save failed and there was no way to unregister."""
    s = make_store()
    s.write_episode(0, "Alice likes tea.")
    with pytest.raises(ValueError, match=f"{field}"):
        summaries(s, **kwargs)
    with pytest.raises(ValueError, match=f"{field}"):
        RollingSummary(s, **kwargs)
    assert all_summaries(s) == {} and len(s._erase_hooks) == 0
    s.save(tmp_path / "store.sqlite")  # the store is still saveable


class _OtherSummarizer:
    def summarize(self, previous_summary, turns):
        return "other"


def test_summaries_refuses_a_different_summarizer_for_an_existing_summary():
    """Other differing arguments raised; a different summarizer was silently ignored."""
    s = make_store()
    mine = ExtractiveSummarizer(max_chars=100)
    rs = summaries(s, "a", summarizer=mine)
    assert summaries(s, "a", summarizer=mine) is rs and summaries(s, "a", summarizer=None) is rs
    with pytest.raises(ValueError, match="already has a rolling summary with summarizer=ExtractiveSummarizer.*"
                                         "asked for _OtherSummarizer"):
        summaries(s, "a", summarizer=_OtherSummarizer())
    with pytest.raises(ValueError, match="summarizer"):
        summaries(s, "a", summarizer=ExtractiveSummarizer(max_chars=100))  # an equal one is another object
    assert rs.summarizer is mine


@pytest.mark.parametrize("step", [4.9, "5", 5.0, True, [5]])
def test_add_turn_and_add_memory_refuse_a_step_the_store_refuses_and_change_nothing(step):
    """int() turned 4.9 into 4 and accepted "5"; the store refuses both."""
    s = make_store()
    rs = summaries(s, "a", max_turns=2, keep_recent=1)
    rs.add_turn(TURNS[0], step=1)
    rs.add_turn(TURNS[1], step=2)  # the next turn folds
    other = s.namespace("a").write_episode(3, TURNS[3])
    before = (len(s), rs.text, rs.window, rs.folded, rs.memory_id)
    with pytest.raises(ValueError, match="step must be an int"):
        rs.add_turn(TURNS[2], step=step)
    with pytest.raises(ValueError, match="step must be an int"):
        rs.add_memory(other.memory_id, step=step)
    with pytest.raises(ValueError, match="step must be an int"):
        rs.fold_now(step=step)
    with pytest.raises(ValueError, match="step must be an int"):
        rs.rebuild(step=step)
    assert (len(s), rs.text, rs.window, rs.folded, rs.memory_id) == before
    rs.add_turn(TURNS[2], step=np.int64(4))  # a numpy int is a step, as for the store
    assert rs.window[-1].step == 4 and type(rs.window[-1].step) is int


def test_add_turn_refuses_another_namespace_and_writes_nothing():
    """add_turn(namespace="bob") on alice's summary wrote the episode in bob, put it in alice's window,
    and every later fold failed (the summary cited a memory of another namespace): stuck for good."""
    s = make_store()
    rs = summaries(s, "alice", max_turns=2, keep_recent=1)
    rs.add_turn(TURNS[0], step=1)
    before = (len(s), rs.text, rs.window, rs.folded)
    with pytest.raises(ValueError, match=r"namespace='bob'.*serves 'alice'"):
        rs.add_turn(TURNS[2], step=2, namespace="bob")
    assert (len(s), rs.text, rs.window, rs.folded) == before
    assert len(s.namespace("bob")) == 0
    rs.add_turn(TURNS[1], step=2, namespace="alice")  # its own namespace is fine
    rs.add_turn(TURNS[2], step=3)  # and the next fold works
    assert rs.text and [t.text for t in rs.folded] == [TURNS[0], TURNS[1]]


def _cue_only_summary(store):
    """A summary whose first folded turn names "Zed" only through a cue the caller gave."""
    rs = summaries(store, "alice", max_turns=2, keep_recent=0)
    turn = rs.add_turn("She moved to Lisbon in May.", step=1, cues=["Zed"])
    rs.add_turn("The weather was fine.", step=2)
    rs.add_turn("Lunch was pasta.", step=3)
    assert "Lisbon" in rs.text and rs.folded[0].cues == ("Zed",)
    return rs, turn


@pytest.mark.parametrize("how", ["live", "forgotten", "saved", "saved_forgotten"])
def test_erasing_a_subject_reaches_a_turn_matched_only_by_a_callers_cue(tmp_path, how):
    """The turn kept its memory's key but not its cues, and the subject was tested against the text's
    extracted cues: once the memory was forgotten (or swept), erase(subject="Zed") left the sentence in
    the summary although the store's subject rule (a cue, case-folded) matched it."""
    from world.persistence import load_store, save_store

    store = make_store()
    rs, turn = _cue_only_summary(store)
    if how.startswith("saved"):
        save_store(store, tmp_path / "m.sqlite")
        store = load_store(tmp_path / "m.sqlite", embedder=HashingEmbedder(dim=64))
        rs = summaries(store, "alice")
        assert rs.folded[0].cues == ("Zed",)  # saved and restored with the turn
    if how.endswith("forgotten"):
        store.forget(turn.memory_id)
    store.erase(subject="zED", namespace="alice")  # folded as the store folds a cue
    assert "Lisbon" not in rs.text and "weather" in rs.text
    assert all("Lisbon" not in t.text for t in rs.folded + rs.window)


def test_a_turn_saved_without_cues_loads_and_uses_its_texts_cues():
    """A state written before turns kept their cues ([id, text, step, key]) still loads; its turns
    fall back on the cues extracted from their text."""
    store = make_store()
    rs, _ = _cue_only_summary(store)
    state = rs.export_state()
    assert state["folds"][0][0][4] == ["Zed"]
    for fold in state["folds"]:
        for row in fold:
            del row[4:]
    twin_store = make_store()
    twin = RollingSummary.from_state(twin_store, state, register=False)
    assert [t.cues for t in twin.folded] == [None, None, None]
    assert twin.export_state()["folds"] == state["folds"]  # written back as it was read
    twin_store.add_erase_hook(twin._on_erase)
    twin_store.erase(subject="lisbon", namespace="alice")  # an extracted cue of the text
    assert "Lisbon" not in twin.text


def test_summaries_asked_again_with_source_none_gets_the_existing_one():
    """source=None means "the default" (as summarizer=None does), but was compared with the existing
    "summarizer:extractive": the second summaries(..., source=None) raised."""
    s = make_store()
    rs = summaries(s, "a", max_turns=4, keep_recent=2, source=None)
    assert summaries(s, "a", max_turns=4, keep_recent=2, source=None) is rs
    assert rs.source == "summarizer:extractive"
    mine = summaries(s, "b", source="bot")
    assert summaries(s, "b", source=None) is mine and mine.source == "bot"
    with pytest.raises(ValueError, match="source='bot', asked for 'other'"):
        summaries(s, "b", source="other")


def _records_and_state(store, rs) -> str:
    """Every record's content and the summary's saved state, as one string to search."""
    records = [m.content for m in [*store.episodic.values(), *store.semantic.values()]]
    return json.dumps([records, rs.export_state()])


@pytest.mark.parametrize("leaves", ["forget", "sweep"])
@pytest.mark.parametrize("how", ["key", "memory_id"])
def test_erasing_a_chain_drops_a_window_turn_whose_memory_got_its_key_later_and_already_left(tmp_path, how, leaves):
    """The turn was written without a key (Turn.key None), supersede gave its memory the key
    chain:<id>, and that old version left the store (forget, or the ACT-R sweep that usually takes a
    superseded version) before the chain was erased: the turn stayed in the window verbatim, the next
    fold wrote it into the summary, and every save wrote it to disk."""
    store = make_store(forget_threshold=-1.0)
    rs = summaries(store, max_turns=6, keep_recent=4)
    pin = rs.add_turn("Alice's PIN is 4711.", step=1, importance=0.0)
    rs.add_turn("Bob adopted a cat named Miso.", step=2, importance=5.0)
    new = store.supersede(pin.memory_id, "Alice's PIN is 9999.", 3, importance=5.0)
    assert rs.window[0].key is None and new.key == "chain:" + pin.memory_id
    store.tick(1000)
    if leaves == "forget":
        store.forget(pin.memory_id)
    else:
        assert store.sweep_decayed() == [pin.memory_id]
    report = store.erase(key=new.key) if how == "key" else store.erase(memory_id=new.memory_id)
    assert report.episodic == [new.memory_id] and report.chains == [("default", new.key)]
    assert report.gone == [pin.memory_id]  # the version that had already left, by id (no content)
    assert [t.text for t in rs.window] == ["Bob adopted a cat named Miso."]
    for i in range(6):
        rs.add_turn(f"Filler turn number {i} about the weather.", step=1001 + i, importance=5.0)
    assert rs.text and "4711" not in _records_and_state(store, rs)
    store.save(tmp_path / "m.sqlite")
    assert b"4711" not in (tmp_path / "m.sqlite").read_bytes()


@pytest.mark.parametrize("how", ["key", "memory_id"])
def test_erasing_a_chain_rebuilds_a_summary_that_folded_a_turn_whose_memory_got_its_key_later(how):
    """The same turn already folded: the store's cascade removed the summary version citing the gone
    id, and the hook, which did not see the turn, took the summary itself for the target and forgot
    the whole folded history (Bob's turn, never erased, included). It must drop that turn and rebuild
    the summary from the others."""
    store = make_store()
    rs = summaries(store, max_turns=2, keep_recent=1)
    pin = rs.add_turn("Alice's PIN is 4711.", step=1)
    rs.add_turn("Bob adopted a cat named Miso.", step=2)
    rs.add_turn("Carol moved to Oslo in June.", step=3)  # folds the PIN turn and Bob's
    assert "4711" in rs.text and "Miso" in rs.text
    new = store.supersede(pin.memory_id, "Alice's PIN is 9999.", 4)
    store.forget(pin.memory_id)
    report = store.erase(key=new.key) if how == "key" else store.erase(memory_id=new.memory_id)
    assert report.gone == [pin.memory_id]
    assert report.extra["summaries"]["default"] == {"rebuilt": rs.memory_id, "turns_dropped": 1, "folds": 1}
    assert [t.text for t in rs.folded] == ["Bob adopted a cat named Miso."]
    assert [t.text for t in rs.window] == ["Carol moved to Oslo in June."]
    assert rs.text == ExtractiveSummarizer().summarize("", ["Bob adopted a cat named Miso."])
    assert rs.memory.content == SUMMARY_HEADER + "\n" + rs.text
    assert "4711" not in _records_and_state(store, rs)


class _ShortestFirst:
    """A scorer of the caller's (code: a store cannot save it)."""

    def score(self, text, query=None):
        return 1.0 / len(text)


def test_an_extractive_summarizer_with_its_own_scorer_is_not_restored_silently_with_the_default(tmp_path):
    """Only max_chars was saved: the loaded store folded with the default ImportanceScorer, picking
    other sentences than the original, and nothing said so (an LLM summarizer warns)."""
    from world.importance import ImportanceScorer
    from world.persistence import load_store

    turns = ["Alice moved to Lisbon in May 2024 with her two children.", "Bob is 30.",
             "Carol, the project manager at Initech, quit her job on Friday.", "Dan likes tea."]
    later = ["Erin bought a red bicycle at the market yesterday afternoon.", "Fay is 41."]

    def mine():
        return ExtractiveSummarizer(max_chars=60, scorer=_ShortestFirst())

    store = make_store()
    rs = summaries(store, max_turns=2, keep_recent=1, summarizer=mine())
    for i, t in enumerate(turns):
        rs.add_turn(t, step=i + 1)
    config = {"name": "extractive", "max_chars": 60, "scorer": "_ShortestFirst"}
    assert rs.export_state()["summarizer"] == config
    store.save(tmp_path / "m.sqlite")
    plain = summaries(load_store(tmp_path / "m.sqlite", embedder=HashingEmbedder(dim=64)))
    assert plain.text == rs.text and plain.export_state()["summarizer"] == config  # a re-save loses nothing
    with pytest.warns(UserWarning, match=r"namespace 'default': its summarizer 'extractive' with scorer "
                                         r"'_ShortestFirst' could not be saved.*summarizers=\{'default': <summarizer>\}"):
        plain.add_turn(later[0], step=5)
    assert plain.summarizer.max_chars == 60  # the stand-in keeps the saved budget
    # given again, the loaded store folds exactly as the original, without a word
    given = summaries(load_store(tmp_path / "m.sqlite", embedder=HashingEmbedder(dim=64),
                                 summarizers={"default": mine()}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for roll in (rs, given):
            for i, t in enumerate(later):
                roll.add_turn(t, step=5 + i)
    assert given.text == rs.text == "Bob is 30.\nDan likes tea."
    # the default scorer (given or not) saves as before and is restored silently
    assert ExtractiveSummarizer().config() == {"name": "extractive", "max_chars": 800}
    assert ExtractiveSummarizer(scorer=ImportanceScorer()).config() == {"name": "extractive", "max_chars": 800}
    assert ExtractiveSummarizer(scorer=ImportanceScorer(cap=2.0)).config()["scorer"] == "ImportanceScorer"


class _ConfigNotJson:
    def summarize(self, previous_summary, turns):
        return "x"

    def config(self):
        return {"name": "odd", "client": object()}


class _ConfigRaises:
    def summarize(self, previous_summary, turns):
        return "x"

    def config(self):
        raise RuntimeError("no config here")


@pytest.mark.parametrize("bad, match", [
    (ExtractiveSummarizer, r"summarizer must be an instance, not the class ExtractiveSummarizer: pass "
                           r"ExtractiveSummarizer\(\)"),
    (_ConfigNotJson(), r"summarizer: its config\(\) must return a dict JSON can hold.*object is not JSON"),
    (_ConfigRaises(), r"summarizer: its config\(\) must return a dict JSON can hold.*RuntimeError: no config here"),
])
def test_a_summarizer_class_or_one_whose_config_cannot_be_saved_is_refused_before_registering(tmp_path, bad, match):
    """A class passed the summarize() check (its summarize is a function): without source= the error
    was config()'s bare TypeError naming nothing; with source= the summary was registered, its first
    fold failed, and so did every later save of the whole store (as for a config() JSON cannot hold)."""
    store = make_store()
    for kwargs in ({}, {"source": "me"}):
        with pytest.raises(TypeError, match=match):
            summaries(store, "b", summarizer=bad, max_turns=1, keep_recent=0, **kwargs)
    assert all_summaries(store) == {}
    rs = summaries(store, "b", max_turns=1, keep_recent=0)
    if bad is ExtractiveSummarizer:  # asked of the existing summary: a class, not "another object"
        with pytest.raises(TypeError, match=match):
            summaries(store, "b", summarizer=bad)
    with pytest.raises(TypeError, match=match.replace("summarizer", "summarizer for 'b'", 1)):
        restore_summaries(store, summarizers={"b": bad})
    assert type(rs.summarizer) is ExtractiveSummarizer
    rs.add_turn("Alice likes tea.", step=1)
    rs.add_turn("Bob likes coffee.", step=2)
    assert rs.text == "Alice likes tea.\nBob likes coffee."
    store.save(tmp_path / "m.sqlite")


def test_numpy_numbers_in_range_are_accepted_as_the_store_accepts_them(tmp_path):
    """The store takes numpy numbers for such fields (write_semantic(confidence=np.float32(0.6))); the
    summary refused them, saying that the in-range 0.6 "must be in [0, 0.8)"."""
    store = make_store()
    rs = summaries(store, max_turns=np.int64(2), keep_recent=np.int32(1), confidence=np.float32(0.6),
                   summarizer=ExtractiveSummarizer(max_chars=np.int64(500)))
    # kept as Python numbers: the saved state and the comparison in summaries() see plain values
    assert (rs.max_turns, rs.keep_recent, rs.confidence, rs.summarizer.max_chars) == (2, 1, float(np.float32(0.6)), 500)
    assert [type(v) for v in (rs.max_turns, rs.keep_recent, rs.confidence, rs.summarizer.max_chars)] == [int, int, float, int]
    assert summaries(store, max_turns=2, keep_recent=np.int64(1)) is rs
    assert LLMSummarizer(lambda p: p, max_chars=np.int16(90)).max_chars == 90
    for i, t in enumerate(TURNS[:3]):
        rs.add_turn(t, step=i)
    assert rs.memory.confidence == float(np.float32(0.6))
    store.save(tmp_path / "m.sqlite")
    # out of range, not a number, or a bool: still refused, by name
    for kwargs, field in (({"max_turns": np.int64(0)}, "max_turns"), ({"keep_recent": np.float64(1.0)}, "keep_recent"),
                          ({"confidence": np.float64(0.8)}, "confidence"), ({"confidence": np.float64("nan")}, "confidence"),
                          ({"confidence": False}, "confidence"), ({"max_turns": np.bool_(True)}, "max_turns")):
        with pytest.raises(ValueError, match=f"RollingSummary: {field} must be"):
            RollingSummary(store, "other", **kwargs)
    for cls in (ExtractiveSummarizer, lambda max_chars: LLMSummarizer(lambda p: p, max_chars=max_chars)):
        for bad in (np.int64(0), np.float64(5.0), True):
            with pytest.raises(ValueError, match="max_chars must be an int >= 1"):
                cls(max_chars=bad)
    assert all_summaries(store) == {"default": rs}
