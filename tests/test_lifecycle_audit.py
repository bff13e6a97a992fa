"""Regression tests for the lifecycle audit: each test reproduces one defect the audit confirmed
(erasure with a failing summarizer, reflections citing versions that already left the store, a
namespaced view erasing a forgotten turn, cached query words after an erasure, summary hook order
after save/load, bad importance settings, the hashing embedder's saved config, duplicates across
kinds under a key, erasure scoped to a namespace)."""

from __future__ import annotations

import math

import pytest

from world.embedding import CachedEmbedder, HashingEmbedder
from world.importance import ImportanceScorer
from world.memory import MemoryStore
from world.persistence import load_store, save_store
from world.summary import summaries

SECRET = "zqxvault"
TURNS = [f"Sam code is {SECRET}.", "Tom likes tea.", "Ann runs daily."]


def _all_texts(store: MemoryStore) -> list[str]:
    return [m.content for m in (*store.episodic.values(), *store.semantic.values())]


# --------------------------------------------------------------------------- 5. hook order
def test_summaries_keep_their_creation_order_through_save_and_load(tmp_path):
    s = MemoryStore()
    for ns in ("zed", "amy"):  # created in non-sorted order
        r = summaries(s, ns, max_turns=2, keep_recent=0)
        for i, text in enumerate(["Sam owns a red kite.", "Tom likes tea.", "Ann runs daily."]):
            r.add_turn(text, step=i)
    loaded = load_store(save_store(s, tmp_path / "m.sqlite"))
    rebuilt = [{ns: e["rebuilt"] for ns, e in st.erase(subject="Sam", namespace="*").extra["summaries"].items()}
               for st in (s, loaded)]
    assert rebuilt[0] == rebuilt[1] == {"zed": "sem_000003", "amy": "sem_000004"}
    assert list(rebuilt[1]) == ["zed", "amy"]


# --------------------------------------------------------------------------- 6. importance
@pytest.mark.parametrize(("name", "value"), [
    ("cap", math.nan), ("cap", 0.5), ("cap", math.inf), ("length_scale", math.nan), ("length_scale", 0.0),
    ("length_cap", math.inf), ("length_cap", -0.1), ("keyword_bonus", -5.0), ("keyword_bonus", math.nan),
    ("query_bonus", -1.0), ("query_bonus", "0.9"), ("cap", True),
])
def test_importance_scorer_rejects_bad_settings_by_name(name, value):
    with pytest.raises(ValueError, match=f"ImportanceScorer: {name} must be"):
        ImportanceScorer(**{name: value})


def test_importance_scorer_rejects_key_terms_that_are_not_strings():
    with pytest.raises(ValueError, match="key_terms"):
        ImportanceScorer(key_terms="how why")
    with pytest.raises(ValueError, match="key_terms"):
        ImportanceScorer(key_terms=["how", 3])


@pytest.mark.parametrize("bad", [math.nan, -0.5, math.inf, None, "1.0"])
def test_store_rejects_a_bad_importance_from_its_scorer(bad):
    class Scorer:
        def score(self, text, query=None):
            return bad

    s = MemoryStore(importance_scorer=Scorer())
    with pytest.raises(ValueError, match="importance_scorer: Scorer.score returned"):
        s.write_episode(1, "Alice likes tea", importance=None)
    assert len(s) == 0
    assert s.write_episode(1, "Alice likes tea", importance=0.5).importance == 0.5


# --------------------------------------------------------------------------- 7. embedder config
def test_hashing_embedder_settings_survive_save_and_load(tmp_path):
    s = MemoryStore(HashingEmbedder(64, bigram_weight=2.0))
    s.write_episode(1, "Alice likes green tea")
    s.write_episode(2, "Bob drinks black coffee")
    path = save_store(s, tmp_path / "bw.sqlite")
    loaded = load_store(path)
    assert loaded.embedder.inner.bigram_weight == 2.0 and loaded.embedder.inner.dim == 64
    assert [(m.memory_id, sc) for m, sc in s.query_scored("Alice tea green", bump=False)] == \
        [(m.memory_id, sc) for m, sc in loaded.query_scored("Alice tea green", bump=False)]
    twin = MemoryStore._from_state(s._export_state())
    assert twin.embedder.inner.bigram_weight == 2.0
    with pytest.raises(ValueError, match=r"embedder: .*bigram_weight=2\.0.*bigram_weight=0\.5"):
        load_store(path, embedder=HashingEmbedder(64))
    with pytest.raises(ValueError, match="embedder"):
        MemoryStore._from_state(s._export_state(), CachedEmbedder(HashingEmbedder(64)))
    assert load_store(path, embedder=HashingEmbedder(64, bigram_weight=2.0)).embedder.bigram_weight == 2.0


# --------------------------------------------------------------------------- 8. duplicates
@pytest.mark.parametrize("first", ["episode", "semantic"])
def test_same_content_under_a_key_is_a_duplicate_whatever_the_kind(first):
    s = MemoryStore()
    k = "bob/city"
    if first == "episode":
        active = s.write_episode(12, "Bob lives in Paris", key=k)
        got = s.write_semantic(14, "Bob lives in Paris", [], key=k, tier="fact", confidence=1.0)
    else:
        active = s.write_semantic(12, "Bob lives in Paris", [], key=k, tier="fact", confidence=1.0)
        got = s.write_episode(14, "Bob lives in Paris", key=k)
    assert s.last_write.status == "duplicate" and got is active
    assert [v.memory_id for v in s.versions(k)] == [active.memory_id] and active.active
