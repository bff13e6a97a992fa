"""Regression tests for the lifecycle audit: each test reproduces one defect the audit confirmed
(erasure with a failing summarizer, reflections citing versions that already left the store, a
namespaced view erasing a forgotten turn, cached query words after an erasure, summary hook order
after save/load, bad importance settings, the hashing embedder's saved config, duplicates across
kinds under a key, erasure scoped to a namespace)."""

from __future__ import annotations

import math
import sqlite3
import warnings

import numpy as np
import pytest

from world.embedding import CachedEmbedder, HashingEmbedder
from world.importance import ImportanceScorer
from world.memory import EraseHookError, MemoryStore
from world.persistence import load_store, save_store
from world.summary import LLMSummarizer, SummaryRebuildError, summaries

SECRET = "zqxvault"
TURNS = [f"Sam code is {SECRET}.", "Tom likes tea.", "Ann runs daily."]


def _all_texts(store: MemoryStore) -> list[str]:
    return [m.content for m in (*store.episodic.values(), *store.semantic.values())]


# --------------------------------------------------------------------------- 1. failing summarizer
class _FlakyLLM:
    """A completion function that echoes the previous summary and the new turns, or fails."""

    def __init__(self) -> None:
        self.fail = False

    def __call__(self, prompt: str) -> str:
        if self.fail:
            raise ConnectionError("LLM down")
        prev = prompt.split("Previous summary:\n", 1)[1].split("\n\nNew turns:")[0] if "Previous summary:" in prompt else ""
        new = prompt.split("New turns:\n", 1)[1].replace("- ", "")
        return (prev + "\n" + new).strip()


def test_failing_summarizer_during_erasure_keeps_no_erased_content_and_runs_every_hook(tmp_path):
    store = MemoryStore(embedder=CachedEmbedder(HashingEmbedder(64)))
    llm = _FlakyLLM()
    ra = summaries(store, "a", max_turns=2, keep_recent=0, summarizer=LLMSummarizer(llm))  # its hook runs first
    rb = summaries(store, "b", max_turns=2, keep_recent=0)
    for r in (ra, rb):
        for i, text in enumerate(TURNS):
            r.add_turn(text, step=i)
    assert SECRET in ra.text and SECRET in rb.text
    llm.fail = True
    with pytest.raises(EraseHookError) as info:
        store.erase(subject="Sam", namespace="*")
    err = info.value
    assert err.namespaces == ["a"]
    assert isinstance(err.errors[0], SummaryRebuildError) and "'a'" in str(err)
    # the store's erasure is complete, and the hook after the failing one still ran
    assert len(err.report.episodic) == 2
    assert err.report.extra["summaries"]["a"]["rebuild_failed"] == "ConnectionError"
    assert err.report.extra["summaries"]["b"]["rebuilt"] is not None
    assert rb.text == "Tom likes tea.\nAnn runs daily."
    # the failed summary keeps nothing erased: cleared, marked for a rebuild (also in its saved state)
    assert ra.text == "" and ra.rebuild_pending and ra.memory is None
    assert not any(SECRET in t for t in _all_texts(store))
    path = save_store(store, tmp_path / "s.sqlite")
    assert SECRET.encode() not in path.read_bytes()
    loaded = load_store(path, summarizers={"a": LLMSummarizer(llm)})
    assert summaries(loaded, "a").rebuild_pending
    # the next fold rebuilds from the remaining turns first: the secret never comes back
    llm.fail = False
    for r in (ra, summaries(loaded, "a")):
        for i, text in enumerate(["Kim sings.", "Lou reads.", "Max swims."]):
            r.add_turn(text, step=10 + i)
        assert r.text == "Tom likes tea.\nAnn runs daily.\nKim sings.\nLou reads.\nMax swims."
        assert not r.rebuild_pending
    assert not any(SECRET in t for t in _all_texts(store))


def test_rebuild_retries_a_failed_rebuild_now():
    store = MemoryStore(embedder=CachedEmbedder(HashingEmbedder(64)))
    llm = _FlakyLLM()
    ra = summaries(store, "a", max_turns=2, keep_recent=0, summarizer=LLMSummarizer(llm))
    for i, text in enumerate(TURNS):
        ra.add_turn(text, step=i)
    llm.fail = True
    with pytest.raises(EraseHookError):
        store.erase(subject="Sam", namespace="a")
    with pytest.raises(ConnectionError):
        ra.rebuild()
    assert ra.text == "" and ra.rebuild_pending
    llm.fail = False
    assert ra.rebuild() is True
    assert ra.text == "Tom likes tea.\nAnn runs daily." and ra.memory is not None
    assert ra.rebuild() is False


# --------------------------------------------------------------------------- 2. gone versions
def _locker_store():
    s = MemoryStore(forget_threshold=-1.0, embedder=CachedEmbedder(HashingEmbedder(64)))
    a = s.write_episode(1, "Alice locker code is 9911", key="alice/locker", importance=0.0)
    r = s.write_semantic(30, "The locker code 9911 is reused", [a.memory_id], importance=2.0)
    keep = s.write_semantic(30, "Bob plays chess on Fridays", [], importance=2.0)
    s.write_episode(30, "Alice locker code is 7733", key="alice/locker", importance=2.0)
    return s, a, r, keep


@pytest.mark.parametrize("how", ["sweep", "forget", "sweep+reload"])
@pytest.mark.parametrize("target", ["key", "subject", "gone id"])
def test_erasure_reaches_records_citing_versions_that_already_left(tmp_path, how, target):
    s, a, r, keep = _locker_store()
    if how.startswith("sweep"):
        s.tick(40)
        assert s.sweep_decayed() == [a.memory_id]
    else:
        assert s.forget(a.memory_id)
    if how.endswith("reload"):
        s = load_store(save_store(s, tmp_path / "s.sqlite"))
    kwargs = {"key": {"key": "alice/locker"}, "subject": {"subject": "alice"},
              "gone id": {"memory_id": a.memory_id}}[target]
    rep = s.erase(**kwargs)
    assert r.memory_id in rep.semantic and r.memory_id in rep.cascaded
    assert not any("9911" in t or "7733" in t for t in _all_texts(s))
    assert keep.memory_id in s
    assert s.versions("alice/locker") == [] and "alice/locker" in rep.keys
    assert s._export_state()["meta"]["layout"]["default"].get("gone") is None  # the history went too


def test_erasing_a_forgotten_unkeyed_id_reaches_what_cites_it():
    s = MemoryStore(embedder=CachedEmbedder(HashingEmbedder(64)))
    x = s.write_episode(1, "Bob PIN is 5555")
    y = s.write_semantic(2, "Bob picks PINs like 5555", [x.memory_id])
    s.forget(x.memory_id)
    rep = s.erase(memory_id=x.memory_id)
    assert rep.semantic == [y.memory_id] and rep.cascaded == [y.memory_id]
    assert len(s) == 0


def test_erasing_a_live_id_follows_versions_that_already_left():
    """The environments' FORGET erases by live id: a reflection resting on a swept earlier version of
    the chain goes with it (it quotes the erased chain's old value)."""
    s, a, r, _ = _locker_store()
    s.tick(40)
    s.sweep_decayed()
    live = s.versions("alice/locker")[0]
    assert r.memory_id in s
    s.erase(memory_id=live.memory_id)
    assert r.memory_id not in s


# --------------------------------------------------------------------------- 3. / 9. namespaces
def test_view_erase_of_a_forgotten_turn_rebuilds_the_summary():
    s = MemoryStore(embedder=CachedEmbedder(HashingEmbedder(64)))
    v = s.namespace("alice")
    r = summaries(v, max_turns=2, keep_recent=0)
    t = r.add_turn(TURNS[0], step=1)
    r.add_turn(TURNS[1], step=2)
    r.add_turn(TURNS[2], step=3)
    s.forget(t.memory_id)
    rep = v.erase(memory_id=t.memory_id)
    assert SECRET not in r.text and r.text == "Tom likes tea.\nAnn runs daily."
    assert rep.extra["summaries"]["alice"]["turns_dropped"] == 1


def test_erase_with_a_namespace_leaves_other_namespaces_alone():
    s = MemoryStore(embedder=CachedEmbedder(HashingEmbedder(64)))
    a = s.write_episode(1, "Alice has a cat named Tom", namespace="alice")
    rb = summaries(s, "bob", max_turns=2, keep_recent=0)
    b = rb.add_turn("Bob has a dog named Rex.", step=1)
    rb.add_turn("Bob likes jazz.", step=2)
    rb.add_turn("Bob cooks pasta.", step=3)
    text = rb.text
    rep = s.erase(memory_id=b.memory_id, namespace="alice")
    assert rep.total == 0 and rep.extra["not_in_namespace"] == b.memory_id
    assert b.memory_id in s and rb.text == text  # neither the memory nor bob's summary changed
    rep = s.namespace("alice").erase(memory_id=b.memory_id)  # through a view: invisible, no note
    assert rep.total == 0 and "not_in_namespace" not in rep.extra and b.memory_id in s
    # bob's id forgotten, then erased in alice's namespace: bob's summary keeps its turn
    s.forget(b.memory_id)
    s.erase(memory_id=b.memory_id, namespace="alice")
    assert rb.text == text
    # the right namespace, or none (the id wherever it lives), erases
    assert s.erase(memory_id=a.memory_id).episodic == [a.memory_id]
    s.erase(memory_id=b.memory_id, namespace="bob")
    assert "Rex" not in rb.text


# --------------------------------------------------------------------------- 4. embedding caches
@pytest.mark.parametrize("make", [lambda: HashingEmbedder(256),
                                  lambda: CachedEmbedder(HashingEmbedder(256), max_entries=2)])
def test_cached_query_words_go_with_the_erased_memory(make):
    emb = make()
    hashing = getattr(emb, "inner", emb)
    s = MemoryStore(emb)
    s.write_episode(1, f"Alice vault word is {SECRET}", key="alice/vault")
    s.write_episode(1, "Carol plays tennis")
    s.query(f"{SECRET} please tell")
    s.query("please tell Carol")
    for i in range(3):  # (evicts the query's entry from the bounded cache)
        s.write_episode(2 + i, f"filler text number {i} about weather")
    assert any(SECRET in k for k in hashing._feature_cache)
    s.erase(key="alice/vault")
    assert not any(SECRET in k for k in hashing._feature_cache)
    assert "please tell" in hashing._feature_cache and "carol" in hashing._feature_cache  # nothing else


def test_disk_cache_entries_of_an_earlier_process_are_found_and_overwritten(tmp_path):
    path = tmp_path / "cache.sqlite"
    first = CachedEmbedder(HashingEmbedder(256), path=path)
    s = MemoryStore(first)
    s.write_episode(1, f"Alice vault word is {SECRET}", key="alice/vault")
    s.write_episode(1, "Carol plays tennis")
    s.query(f"what is the vault word {SECRET}")
    s.query(f"did Alice change {SECRET} lately")  # never looked up again below
    saved = save_store(s, tmp_path / "s.sqlite")
    first.close()
    second = CachedEmbedder(HashingEmbedder(256), path=path)  # as a new process would open it
    assert second._db.execute("PRAGMA secure_delete").fetchone()[0] == 1
    s2 = load_store(saved, embedder=second)
    s2.query(f"what is the vault word {SECRET}")  # served from the disk
    rep = s2.erase(key="alice/vault")
    assert rep.cache_entries >= 2
    texts = [t for (t,) in second._db.execute("SELECT text FROM emb")]
    assert texts and not any(SECRET in t for t in texts)
    second.close()
    assert SECRET.encode() not in path.read_bytes()


def test_old_cache_file_is_migrated_and_other_files_are_refused(tmp_path):
    old = tmp_path / "old.sqlite"
    conn = sqlite3.connect(old)
    conn.execute("CREATE TABLE emb (key TEXT PRIMARY KEY, vec BLOB)")
    conn.execute("INSERT INTO emb VALUES (?, ?)", ("k", np.zeros(8, dtype=np.float32).tobytes()))
    conn.commit()
    conn.close()
    with pytest.warns(UserWarning, match="schema version 0.*1 entries were dropped"):
        emb = CachedEmbedder(HashingEmbedder(8), path=old)
    assert emb._db.execute("SELECT COUNT(*) FROM emb").fetchone()[0] == 0
    emb.encode("hello there")
    assert emb._db.execute("SELECT text FROM emb").fetchall() == [("hello there",)]
    emb.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = CachedEmbedder(HashingEmbedder(8), path=old)  # migrated: opens silently
    assert "hello there" in again
    again.close()
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database at all" * 50)
    with pytest.raises(ValueError, match="junk.sqlite"):
        CachedEmbedder(HashingEmbedder(8), path=junk)
    store_file = save_store(MemoryStore(), tmp_path / "store.sqlite")
    before = store_file.read_bytes()
    with pytest.raises(ValueError, match="not an embedding cache"):
        CachedEmbedder(HashingEmbedder(8), path=store_file)
    assert store_file.read_bytes() == before


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
