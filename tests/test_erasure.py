"""Hard erasure end to end: a unique secret goes through every path (episode, new version, links,
reflection evidence, rolling summary, queries that bump it) and after ``erase`` it is found nowhere:
no record, graph node or attribute, summary, embedder cache, pickled store, exported state, nor the
bytes of a store file saved afterwards."""

from __future__ import annotations

import dataclasses
import json
import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from world.embedding import CachedEmbedder, HashingEmbedder
from world.memory import MemoryStore, RelationType
from world.persistence import save_store
from world.summary import all_summaries, summaries

FILLER = [
    "Bob plays chess with Carol on Fridays.",
    "Carol is a nurse at the city hospital.",
    "Dave moved to Oslo in May.",
    "Erin's favourite drink is green tea.",
    "Frank teaches pottery at the library.",
    "Gina rows on the river every morning.",
]
LOCKER_KEY = "alice/locker"


def build(secret: str, ns: str | None):
    """A store in which `secret` went through every path. Returns (store, ids of the secret's memories)."""
    store = MemoryStore(embedder=CachedEmbedder(HashingEmbedder(dim=64)))
    view = store.namespace(ns) if ns is not None else store
    rolling = summaries(store, ns, max_turns=3, keep_recent=1)
    fillers = [view.write_episode(i, text) for i, text in enumerate(FILLER[:3])]
    # episode (as a conversation turn, so it also reaches the rolling summary) ...
    store.tick(5)
    v1 = rolling.add_turn(f"Alice's locker code is {secret}.", step=5, key=LOCKER_KEY, source="alice")
    # ... a new version of it ...
    store.tick(6)
    v2 = view.supersede(v1.memory_id, f"Alice changed her locker code to {secret} and told Bob.", 6)
    # ... typed links both ways ...
    assert view.link(v2.memory_id, fillers[0].memory_id, RelationType.SUPPORTS)
    assert view.link(fillers[1].memory_id, v1.memory_id, RelationType.REFERENCES)
    # ... reflections: one quoting the secret, one only resting on it as evidence ...
    r1 = view.write_semantic(7, f"Alice guards the code {secret} carefully.", [v2.memory_id, fillers[2].memory_id],
                             confidence=0.6)
    r2 = view.write_semantic(7, "Alice keeps her locker locked.", [fillers[2].memory_id],
                             evidence=[v1.memory_id, fillers[2].memory_id], confidence=0.5)
    # ... a reflection on the reflection (transitive evidence) ...
    r3 = view.write_semantic(8, "Alice is a careful person.", [r1.memory_id], confidence=0.4)
    # ... more turns, so the secret turn is folded into the running summary ...
    for i, text in enumerate(FILLER[3:]):
        rolling.add_turn(text, step=9 + i)
    assert secret in rolling.text and rolling.memory is not None
    # ... and retrievals that bump it (ACT-R history)
    store.tick(12)
    hits = view.query("Alice locker code", top_k=5)
    assert v2.memory_id in [m.memory_id for m in hits]
    return store, {"v1": v1.memory_id, "v2": v2.memory_id, "r1": r1.memory_id, "r2": r2.memory_id,
                   "r3": r3.memory_id, "summary": rolling.memory_id}


def everywhere(store: MemoryStore, secret: str, tmp_path) -> dict[str, bool]:
    """Where the secret can be found: one flag per place."""
    records = list(store.episodic.values()) + list(store.semantic.values())
    g = store.graph
    embedder = store.embedder
    places = {
        "records": any(secret in repr(dataclasses.asdict(r)) for r in records),
        "graph nodes": any(secret in repr(n) or secret in repr(d) for n, d in g.nodes(data=True)),
        "graph edges": any(secret in repr((u, v, d)) for u, v, d in g.edges(data=True)),
        "summaries": any(secret in json.dumps(r.export_state()) for r in all_summaries(store).values()),
        "embedding cache": any(secret in t for t in embedder.texts()),
        "token cache": any(secret in t for t in getattr(embedder.inner, "_feature_cache", {})),
        "exported state": secret in json.dumps(
            {k: v for k, v in store._export_state().items() if k != "embeddings"}, default=str),
        "pickled store": secret.encode() in pickle.dumps(store),
    }
    path = tmp_path / "after.sqlite"
    save_store(store, path)
    places["saved file"] = secret.encode() in path.read_bytes()
    path.unlink()
    return places


def check_no_remnants(store: MemoryStore) -> None:
    """No dangling edge, no cue node without a memory, embedding rows match live memories."""
    g = store.graph
    live = set(store.episodic) | set(store.semantic)
    for node, data in g.nodes(data=True):
        if data["kind"] == "cue":
            assert g.degree(node) > 0, node
        else:
            assert node in live, node
    for mid in live:
        assert mid in g
    assert store.stats()["embedding_rows"] == len(live)


ERASE_MODES = ("key", "memory_id_v1", "memory_id_v2", "subject")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(secret_tail=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=6, max_size=12),
       ns=st.sampled_from([None, "alice"]), mode=st.sampled_from(ERASE_MODES))
def test_secret_is_gone_after_erase(tmp_path, secret_tail, ns, mode):
    secret = "qzx" + secret_tail  # no filler text contains "qzx"
    store, ids = build(secret, ns)
    before = everywhere(store, secret, tmp_path)
    # the search can find it: before the erase the secret is in every place but the token cache
    assert all(v for k, v in before.items() if k != "token cache"), before
    if mode == "key":
        report = store.erase(key=LOCKER_KEY, namespace=ns)
    elif mode == "memory_id_v1":
        report = store.erase(memory_id=ids["v1"])
    elif mode == "memory_id_v2":
        report = store.erase(memory_id=ids["v2"])
    else:
        report = store.erase(subject=secret, namespace=ns)
    after = everywhere(store, secret, tmp_path)
    assert not any(after.values()), after
    # everything that rested on the secret went, the summary was rebuilt and is still there
    gone = set(report.removed_ids)
    assert {ids["v1"], ids["v2"], ids["r1"], ids["r2"], ids["r3"], ids["summary"]} <= gone
    rolling = summaries(store, ns)
    assert rolling.memory is not None and rolling.memory_id not in gone
    assert "Erin" in rolling.text or "Frank" in rolling.text or "Gina" in rolling.text
    assert store.versions(LOCKER_KEY, namespace=ns) == []
    check_no_remnants(store)
    # nothing the secret did not touch was removed
    for text in FILLER:
        assert any(r.content == text for r in store.episodic.values()), text


def test_erasure_report(tmp_path, capsys):
    """The fixed-secret run whose report goes into the issue (run with -s to see it)."""
    secret = "qzxlockercode4711"
    store, ids = build(secret, "alice")
    n_before = store.stats()
    report = store.erase(key=LOCKER_KEY, namespace="alice")
    after = everywhere(store, secret, tmp_path)
    d = report.as_dict()
    assert not any(after.values()), after
    assert secret not in json.dumps(d)  # the report itself holds ids and fingerprints, never content
    assert d["episodic"] == [ids["v1"], ids["v2"]]
    assert sorted(d["semantic"]) == sorted([ids["r1"], ids["r2"], ids["r3"], ids["summary"]])
    with capsys.disabled():
        print("\nErasure report (secret through episode, version, links, reflections, summary; erase(key=...)):")
        for k, v in d.items():
            print(f"  {k:15s} {v}")
        print(f"  stats before    {n_before}")
        print(f"  stats after     {store.stats()}")
        print("  secret found in: " + ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in after.items()))


def test_erase_hook_failure_is_visible():
    """A hook that raises is not silently swallowed (the caller learns the summary may be stale)."""
    store = MemoryStore(embedder=HashingEmbedder(dim=64))
    m = store.write_episode(0, "Alice's locker code is 1234.")

    def bad_hook(report):
        raise RuntimeError("hook failed")

    store.add_erase_hook(bad_hook)
    with pytest.raises(RuntimeError, match="hook failed"):
        store.erase(memory_id=m.memory_id)
    assert m.memory_id not in store  # the erasure itself happened before the hooks ran


def test_store_rebuilt_from_state_erases_from_its_summaries_too(tmp_path):
    """A store rebuilt by MemoryStore._from_state (not through load_store) must have its rolling
    summaries attached at once: an erasure as the very first operation still reaches them."""
    secret = "qzxrebuilt0042"
    store, ids = build(secret, "alice")
    twin = MemoryStore._from_state(store._export_state(), CachedEmbedder(HashingEmbedder(dim=64)))
    twin.erase(key=LOCKER_KEY, namespace="alice")
    after = everywhere(twin, secret, tmp_path)
    assert not any(after.values()), after
    assert "Erin" in summaries(twin, "alice").text


@pytest.mark.parametrize("how", ["forget", "sweep"])
def test_subject_erasure_drops_cached_mentions_when_no_live_memory_matches(how):
    """The memories naming the subject left the store before the erasure (forget, a decay sweep):
    nothing live matches, yet the cached texts mentioning it (a query, the memory's own text, an
    earlier summary version) and the hashing embedder's cached words and word pairs of it must go."""
    store = MemoryStore(embedder=CachedEmbedder(HashingEmbedder(dim=64)), forget_threshold=-1.0)
    rolling = summaries(store, max_turns=2, keep_recent=1)
    for i, text in enumerate(["Zorblax lives in Lisbon.", "Bob plays chess.", "Carol is a nurse."]):
        rolling.add_turn(text, step=i, importance=0.0)
    store.query("where does Zorblax live?")
    keep = store.write_episode(3, "Dave rows daily.", importance=5.0)
    if how == "forget":
        for m in [m for m in store.episodic if m != keep.memory_id] + list(store.semantic):
            store.forget(m)
    else:
        store.tick(100)
        store.sweep_decayed()
    assert list(store.episodic) == [keep.memory_id] and not store.semantic
    assert any("Zorblax" in t for t in store.embedder.texts())
    report = store.erase(subject="Zorblax")
    assert report.total == 0 and report.cache_entries >= 3
    assert not any("zorblax" in t.lower() for t in store.embedder.texts())
    assert not any("zorblax" in k for k in store.embedder.inner._feature_cache)
    assert "Dave rows daily." in store.embedder.texts()  # nothing else went
    assert "Zorblax" not in rolling.text and "Bob" in rolling.text


@pytest.mark.parametrize("on_disk", [False, True])
def test_text_merged_into_an_erased_memory_does_not_stay_cached(tmp_path, on_disk):
    """A write merged as a duplicate into another memory with other words ("Alice is pregnant." into
    "Alice is pregnant with twins.") was embedded, so cached, before dedup matched it; erasing the
    memory it merged into must leave no cached copy of it (it neither quotes the erased text nor has
    a word only the erased memory had, so the erasure rules would not find it)."""
    emb = CachedEmbedder(HashingEmbedder(dim=64), path=tmp_path / "cache.sqlite" if on_disk else None)
    store = MemoryStore(embedder=emb)
    store.write_episode(1, "Carol is pregnant.")
    nurse = store.write_episode(1, "Alice is a nurse.")
    twins = store.write_episode(2, "Alice is pregnant with twins.")
    assert store.write_episode(3, "Alice is pregnant.") is twins and store.last_write.rule == "containment"
    assert store.write_episode(4, "Alice is a nurse.") is nurse  # the same text: its entry backs the record
    assert "Alice is a nurse." in emb
    report = store.erase(memory_id=twins.memory_id)
    assert report.removed_ids == [twins.memory_id]
    assert "Alice is pregnant." not in emb and "Alice is pregnant with twins." not in emb
    assert sorted(emb.texts()) == ["Alice is a nurse.", "Carol is pregnant."]


def test_erasure_reaches_the_rows_another_embedder_wrote_to_the_shared_cache_file(tmp_path):
    """A 64-d store (an earlier run) and a 256-d store share one cache file: erasing the secret in the
    256-d store deleted only its own row; the 64-d row of the same text stayed on disk and the report
    counted 1. Now both rows go (and the bytes are overwritten: secure_delete)."""
    path = tmp_path / "cache.sqlite"
    earlier = MemoryStore(embedder=CachedEmbedder(HashingEmbedder(64), path=path))
    earlier.write_episode(1, "Alice's PIN is 4417")
    earlier.embedder.close()
    store = MemoryStore(embedder=CachedEmbedder(HashingEmbedder(256), path=path))
    store.write_episode(1, "Alice's PIN is 4417")
    store.write_episode(2, "Bob likes chess")
    report = store.erase(subject="Alice")
    assert report.removed_ids == ["ep_000001"] and report.cache_entries == 2
    rows = store.embedder._db.execute("SELECT text FROM emb").fetchall()
    assert rows == [("Bob likes chess",)]
    store.embedder.close()
    assert b"4417" not in path.read_bytes()


def test_erasure_completes_when_the_cache_file_fails(tmp_path):
    """The cache file corrupted after it was opened: erase stopped half-way with a bare
    sqlite3.DatabaseError (the memory gone, the counters not updated, no report, hooks not run). Now
    the erasure completes (every cache drop still tried, the cache's own entries in memory dropped) and
    EraseCacheError, carrying the report, names the file at the end."""
    from world.memory import EraseCacheError

    path = tmp_path / "cache.sqlite"
    emb = CachedEmbedder(HashingEmbedder(dim=64), path=path)
    store = MemoryStore(embedder=emb)
    secret = store.write_episode(1, "The vault code is qzx5521.")
    store.write_episode(2, "Bob plays chess with Carol.")
    store.query("what is the vault code qzx5521?")
    seen = []
    store.add_erase_hook(seen.append)
    data = bytearray(path.read_bytes())  # every page after the first overwritten; change counter bumped
    data[4096:] = bytes(range(256)) * ((len(data) - 4096) // 256)
    data[24:28] = (int.from_bytes(data[24:28], "big") + 1).to_bytes(4, "big")
    path.write_bytes(bytes(data))
    with pytest.raises(EraseCacheError, match=r"erasure is complete.*cache\.sqlite.*corrupted") as info:
        store.erase(memory_id=secret.memory_id)
    report = info.value.report
    assert report.removed_ids == [secret.memory_id] and report.embedding_rows == 1
    assert seen == [report]  # the hooks ran, with the report
    assert secret.memory_id not in store and len(store) == 1
    assert store.counters["erased"] == 1
    assert not any("qzx5521" in t for t in emb.texts())  # the cache's entries in memory went
    assert "Bob plays chess with Carol." in emb.texts()
    emb.close()


def test_merged_write_is_counted_and_needs_no_cache_write(tmp_path):
    """A duplicate merged into another text is counted and remembered with that memory; the merge
    itself touches no cache file (its text was cached when it was embedded), so a cache file that
    fails afterwards cannot leave the store's books wrong: the erasure reports the failure."""
    from world.embedding import CacheFileError
    from world.memory import EraseCacheError

    path = tmp_path / "cache.sqlite"
    emb = CachedEmbedder(HashingEmbedder(dim=64), path=path)
    store = MemoryStore(embedder=emb)
    twins = store.write_episode(1, "Alice is pregnant with twins.")
    store.query("Alice is pregnant.", bump=False)  # (its vector now cached in memory)
    data = bytearray(path.read_bytes())
    data[4096:] = bytes(range(256)) * ((len(data) - 4096) // 256)
    data[24:28] = (int.from_bytes(data[24:28], "big") + 1).to_bytes(4, "big")
    path.write_bytes(bytes(data))
    assert store.write_episode(2, "Alice is pregnant.") is twins
    assert store.counters["duplicates"] == 1 and store.last_write.duplicate_of == twins.memory_id
    assert store._merged == {twins.memory_id: ["Alice is pregnant."]}
    with pytest.raises(EraseCacheError) as info:
        store.erase(memory_id=twins.memory_id)
    assert isinstance(info.value.errors[0], CacheFileError) and len(store) == 0
    assert info.value.report.removed_ids == [twins.memory_id] and store._merged == {}
    emb.close()


def test_a_recurring_merged_duplicate_is_embedded_once_and_survives_save_and_load(tmp_path):
    """The merged text was dropped from the cache at once, so every recurrence of it was embedded
    again (ten model calls for ten repeats; ~45 ms each with MiniLM). Now it stays cached until the
    memory it merged into is erased, also across save / load."""
    calls = []

    class Counting(HashingEmbedder):
        def encode(self, text):
            calls.append(text)
            return super().encode(text)

    emb = CachedEmbedder(Counting(dim=64))
    store = MemoryStore(embedder=emb)
    twins = store.write_episode(1, "Alice is pregnant with twins.")
    for step in range(2, 12):
        assert store.write_episode(step, "Alice is pregnant.") is twins
    assert calls.count("Alice is pregnant.") == 1
    path = tmp_path / "store.sqlite"
    store.save(path)
    loaded = MemoryStore.load(path, embedder=CachedEmbedder(HashingEmbedder(dim=64)))
    loaded.embed("Alice is pregnant.")  # cached by the new embedder
    loaded.erase(memory_id=twins.memory_id)
    assert "Alice is pregnant." not in loaded.embedder
    # forgetting (not erasing) a memory lets go of its merged texts: a later erasure of something
    # else does not reach them, and the saved file no longer names them
    other = store.write_episode(20, "Bob owns a red kayak.")
    store.write_episode(21, "Bob owns a red kayak!")
    store.forget(other.memory_id)
    assert other.memory_id not in store._merged


def test_erase_names_a_subject_with_a_lone_surrogate():
    store = MemoryStore()
    store.write_episode(1, "Alice likes tea.")
    with pytest.raises(ValueError, match="erase: subject must be valid Unicode text"):
        store.erase(subject="Al\ud800")
    assert len(store) == 1


def test_namespace_view_has_add_evidence():
    store = MemoryStore()
    view = store.namespace("alice")
    ep = view.write_episode(1, "Alice swims on Monday.")
    rule = view.write_semantic(2, "Alice swims weekly.", derived_from=[ep.memory_id])
    ep2 = view.write_episode(3, "Alice swims on Friday.")
    view.add_evidence(rule.memory_id, [ep2.memory_id])
    assert ep2.memory_id in store.get(rule.memory_id).evidence
    other = store.write_episode(4, "Bob rows.")
    with pytest.raises(KeyError, match="namespace 'alice'"):
        view.add_evidence(other.memory_id, [])


def test_subject_erasure_removes_merged_texts_that_mention_it_from_surviving_memories(tmp_path):
    """A text merged into a memory that survives (only the merged text named the subject) stayed in
    the store's record of merged texts and in a saved file after erase(subject=...)."""
    store = MemoryStore()
    kept = store.write_episode(1, "I need to call about the garage code 4411.")
    assert store.write_episode(2, "I need to call tom about the garage code 4411.") is kept
    report = store.erase(subject="tom")
    assert report.removed_ids == [] and store._merged == {}
    assert "I need to call tom about the garage code 4411." not in store.embedder
    path = tmp_path / "s.sqlite"
    store.save(path)
    assert b"call tom" not in path.read_bytes()


def test_a_store_pickled_before_merged_texts_existed_still_forgets():
    import pickle

    store = MemoryStore()
    a = store.write_episode(1, "Bob owns a red kayak.")
    store.write_episode(2, "Carl owns a blue canoe.")
    del store.__dict__["_merged"]  # (as a store pickled by the previous version)
    old = pickle.loads(pickle.dumps(store))
    assert old.forget(a.memory_id) and len(old) == 1
    assert [m for m, _ in old.query_scored("kayak")] != [a.memory_id]


@pytest.mark.parametrize("by", ["key", "memory_id"])
def test_erasure_by_key_or_id_removes_merged_texts_holding_the_erased_words(tmp_path, by):
    """A Jaccard merge added a word only the erased memory had ("zorblax") to a surviving memory's
    merged texts: the erasure dropped it from the cache but kept it in the store and its saved file."""
    store = MemoryStore()
    secret = store.write_episode(1, "Zorblax's PIN is 4417", key="zorblax/pin")
    kept = store.write_episode(2, "I need to call about the garage code 4411.")
    assert store.write_episode(3, "I need to call zorblax about the garage code 4411.") is kept
    store.erase(**({"key": "zorblax/pin"} if by == "key" else {"memory_id": secret.memory_id}))
    assert store._merged == {} and len(store) == 1
    path = tmp_path / "s.sqlite"
    store.save(path)
    assert b"zorblax" not in path.read_bytes().lower()


def test_erasing_a_memory_drops_cached_texts_with_words_only_its_merged_texts_had():
    store = MemoryStore()
    a = store.write_episode(1, "the spare key for the shed hangs on the hook behind the kitchen door")
    assert store.write_episode(2, "the spare key for the shed hangs on the hook behind the kitchen door zorblax") is a
    store.query("where is zorblax", top_k=3)
    store.erase(memory_id=a.memory_id)
    assert list(store.embedder.texts()) == []
    assert not [k for k in store.embedder.inner._feature_cache if "zorblax" in k]


@pytest.mark.parametrize("cue, subject", [("Alice", "Alice"), ("Alice", "alice"), ("alice", "ALICE"),
                                          ("Zoë", "ZOË")])
def test_subject_erasure_matches_the_caller_cues_whatever_their_case(cue, subject):
    """Subject erasure takes records "whose cues hold it" (docs/store.md); a caller's cue "Alice" was
    compared with the lower-cased subject, so nothing went and the cue node stayed (audit session 9)."""
    store = MemoryStore()
    keep = store.write_episode(0, "Bob plays chess on Fridays.")
    m = store.write_episode(1, "She moved to Lisbon in May.", cues=[cue])
    for where in (store, store.namespace("alice")):  # the same in another namespace
        if where is not store:
            m = where.write_episode(1, "She moved to Lisbon in May.", cues=[cue])
        report = where.erase(subject=subject)
        assert report.removed_ids == [m.memory_id] and report.cue_nodes == 1
        assert m.memory_id not in store and keep.memory_id in store
        assert not any(cue in node or cue.lower() in node for node in store.graph.nodes())


@pytest.mark.parametrize("how", ["subject", "memory"])
def test_erasure_leaves_no_secret_in_the_prepared_memos(how):
    """HashingEmbedder.prepare keeps each whitespace token's features (and the vectors until asked):
    an erasure left an erased secret there ('qzx9931.' as a key) though the word-feature cache was
    cleaned."""
    secret = "qzx9931"
    emb = CachedEmbedder(HashingEmbedder(64))
    store = MemoryStore(emb)
    texts = [f"Alice's locker code is {secret}.", "Bob likes tea."]
    emb.prepare(texts)
    ids = [store.write_episode(i, t) for i, t in enumerate(texts)]
    if how == "subject":
        store.erase(subject=secret)
    else:
        store.erase(memory_id=ids[0].memory_id)
    assert secret not in repr(vars(emb.inner))
    assert store.embed("Bob likes tea.").tobytes() == HashingEmbedder(64).encode("Bob likes tea.").tobytes()
