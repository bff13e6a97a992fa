"""Versioned facts (seed 003): supersession vs duplicate, history kept, value_at, explain, tiers,
soft (supersede / forget) vs hard (erase) removal."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from world import CachedEmbedder, HashingEmbedder, MemoryStore


@pytest.fixture
def store():
    return MemoryStore(CachedEmbedder(HashingEmbedder(64)))


def test_seed003_semantics_duplicate_vs_supersede(store):
    # seed 003: same content on an active version -> "duplicate"; other content -> old one soft-deleted
    a = store.write_episode(0, "Prefers answers in Markdown", key="user:42/pref/format", tier="preference",
                            confidence=0.9, source="user:42")
    assert store.last_write.status == "written"
    store.write_episode(1, "Prefers answers in Markdown", key="user:42/pref/format")
    assert store.last_write.status == "duplicate"
    b = store.write_episode(2, "Prefers answers as plain text", key="user:42/pref/format", tier="preference",
                            confidence=0.9, source="user:42")
    assert store.last_write.status == "superseded"
    assert [v.memory_id for v in store.versions("user:42/pref/format")] == [a.memory_id, b.memory_id]
    assert a.superseded_at == 2 and a in store.versions("user:42/pref/format")  # history kept
    assert sum(v.active for v in store.versions("user:42/pref/format")) == 1


def test_temporal_question_from_chain(store):
    key = "erin/home"
    store.write_episode(1, "Erin lives in Oslo", key=key)
    store.write_episode(10, "Erin lives in Bergen", key=key)
    store.write_episode(20, "Erin lives in Tromso", key=key)
    assert store.value_at(key, 0) is None
    assert store.value_at(key, 5).content == "Erin lives in Oslo"
    assert store.value_at(key, 10).content == "Erin lives in Bergen"
    assert store.value_at(key, 19).content == "Erin lives in Bergen"
    assert store.value_at(key, 10**6).content == "Erin lives in Tromso"
    # "where did Erin live before Tromso?" = the version valid just before the current one was written
    current = store.value_at(key, 10**6)
    assert store.value_at(key, current.written_at - 1).content == "Erin lives in Bergen"
    lines = store.explain(key).splitlines()
    assert len(lines) == 4 and "Oslo" in lines[1] and "steps 1 .. step 10" in lines[1] and "active" in lines[3]


def test_returning_to_an_old_value_is_a_new_version(store):
    key = "finn/drink"
    a = store.write_episode(1, "Finn drinks tea", key=key)
    store.write_episode(2, "Finn drinks coffee", key=key)
    c = store.write_episode(3, "Finn drinks tea", key=key)
    assert c is not a and store.last_write.status == "superseded"
    assert [v.content for v in store.versions(key)] == ["Finn drinks tea", "Finn drinks coffee", "Finn drinks tea"]


def test_keys_are_per_namespace(store):
    x, y = store.namespace("x"), store.namespace("y")
    x.write_episode(0, "Gus likes rock", key="gus/music")
    y.write_episode(0, "Gus likes folk", key="gus/music")
    assert len(x.versions("gus/music")) == 1 and len(y.versions("gus/music")) == 1
    assert x.value_at("gus/music", 5).content == "Gus likes rock"


def test_soft_vs_hard_forget(store):
    key = "hana/job"
    a = store.write_episode(0, "Hana is a nurse", key=key)
    b = store.write_episode(5, "Hana is a doctor", key=key)
    # soft: superseded versions stay (explainable) but never rank
    assert a.memory_id in store and store.query("Hana nurse", top_k=5) == [b]
    # forget one version: the rest of the chain stays
    assert store.forget(a.memory_id)
    assert store.versions(key) == [b]
    # hard: erase removes the whole chain
    c = store.write_episode(6, "Hana is a surgeon", key=key)
    rep = store.erase(key=key)
    assert sorted(rep.episodic) == sorted([b.memory_id, c.memory_id]) and store.versions(key) == []
    assert store.explain(key) == f"{key}: no record"


def test_inference_confidence_rule_and_tier_inheritance(store):
    with pytest.raises(ValueError, match=r"confidence: an 'inference' must have confidence < 0.8"):
        store.write_semantic(0, "Ivy probably likes cats", [], confidence=0.8)
    r = store.write_semantic(0, "Ivy probably likes cats", [], confidence=0.6, source="reflect")
    r2 = store.supersede(r.memory_id, "Ivy probably likes dogs", 3)
    assert (r2.tier, r2.confidence, r2.source, r2.key) == ("inference", 0.6, "reflect", f"chain:{r.memory_id}")
    with pytest.raises(ValueError, match="inference"):
        store.supersede(r2.memory_id, "Ivy likes birds", 4, confidence=0.95)
    plain = store.write_semantic(5, "Ivy owns a bike", [], confidence=0.5)
    with pytest.raises(ValueError, match="inference"):
        store.supersede(plain.memory_id, "Ivy owns two bikes", 6, confidence=0.9)
    assert plain.key is None and plain.active  # a rejected supersede changes nothing
    assert r2.active and store.conflicts() == []


def test_negative_scores_are_still_pushed_down():
    s = MemoryStore(CachedEmbedder(HashingEmbedder(64)), dedup=False)
    f = s.write_episode(0, "unrelated words here", importance=0.0, tier="fact")
    i = s.write_episode(0, "unrelated words here", importance=0.0, tier="inference", confidence=0.25)
    s.tick(10**6)
    scores = {r.memory_id: sc for r, sc in s.query_scored("zebra", top_k=2, alpha_ppr=0.0, alpha_sim=0.0, bump=False)}
    assert scores[f.memory_id] < 0
    assert scores[i.memory_id] == pytest.approx(scores[f.memory_id] * (2 - 0.25))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["k1", "k2", None]), st.sampled_from(["red", "blue", "green", "red"]),
                          st.booleans()), max_size=30))
def test_exactly_one_active_version_per_key(writes):
    s = MemoryStore(CachedEmbedder(HashingEmbedder(32)))
    for step, (key, colour, via_id) in enumerate(writes):
        text = f"The door is {colour}"
        if via_id and key is not None and s.versions(key):
            active = [v for v in s.versions(key) if v.active]
            s.supersede(active[0].memory_id, text, step)
        else:
            s.write_episode(step, text, key=key)
        for k in ("k1", "k2"):
            chain = s.versions(k)
            if chain:
                assert sum(v.active for v in chain) == 1
                assert chain[-1].active
                assert [v.written_at for v in chain] == sorted(v.written_at for v in chain)
    assert s.conflicts() == []


def _fresh_store():
    from world import CachedEmbedder, HashingEmbedder, MemoryStore

    return MemoryStore(CachedEmbedder(HashingEmbedder(64)))


def test_supersede_never_joins_a_chain_key_a_caller_took():
    """supersede() of an unkeyed memory used the key "chain:<id>" even when a keyed write had taken it:
    the other fact joined the history and stayed active next to the new version (two active versions)."""
    s = _fresh_store()
    a = s.write_episode(0, "Alice likes tea")
    b = s.write_episode(1, "Bob owns a red bicycle", key=f"chain:{a.memory_id}")
    c = s.supersede(a.memory_id, "Alice likes coffee", 2)
    assert c.key == f"chain:{a.memory_id}#2"
    assert [(v.memory_id, v.active) for v in s.versions(c.key)] == [(a.memory_id, False), (c.memory_id, True)]
    assert [v.memory_id for v in s.versions(b.key)] == [b.memory_id] and s.conflicts() == []


def test_a_keyed_write_cannot_start_before_the_history_left_by_a_forgotten_version():
    s = _fresh_store()
    s.write_episode(5, "Gus likes rock", key="g")
    v2 = s.write_episode(10, "Gus likes folk", key="g")
    s.forget(v2.memory_id)
    with pytest.raises(ValueError, match="step must be >= 10, where the history of key 'g' ends"):
        s.write_episode(2, "Gus likes jazz", key="g")
    v3 = s.write_episode(12, "Gus likes jazz", key="g")
    assert [v.written_at for v in s.versions("g")] == [5, 12] and s.value_at("g", 7).content == "Gus likes rock"
    assert s.value_at("g", 12).memory_id == v3.memory_id


@pytest.mark.parametrize("kwargs", [{"key": 42}, {"memory_id": 1}, {"key": ""}, {"subject": "  "}, {"subject": 42},
                                    {"key": ["42/pref"]}])
def test_erase_of_a_wrong_type_is_an_error_not_a_silent_success(kwargs):
    s = _fresh_store()
    s.write_episode(0, "User 42 prefers Markdown", key="42/pref", cues=["42"])
    name = next(iter(kwargs))
    with pytest.raises(ValueError, match=f"erase: {name} must be a non-empty string"):
        s.erase(**kwargs)
    assert len(s) == 1


def test_supersede_refuses_derived_from_on_an_episode():
    s = _fresh_store()
    a = s.write_episode(0, "Erin lives in Oslo", key="erin/home")
    with pytest.raises(TypeError, match="derived_from applies to semantic memories only"):
        s.supersede(a.memory_id, "Erin lives in Rome", 1, derived_from=["zzz"])
    assert [v.memory_id for v in s.versions("erin/home")] == [a.memory_id]
