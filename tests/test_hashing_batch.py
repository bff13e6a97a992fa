"""HashingEmbedder.encode_batch takes its rows' norms from one stacked matmul: numpy computes each
(1, d) @ (d, 1) product with the dot function ``row.dot(row)`` calls, so each is that float64 exactly
(this guards it for the numpy installed), and the batch's rows are encode()'s bits with words new to the
word cache among them."""

import numpy as np

from world.embedding import HashingEmbedder


def test_stacked_matmul_of_rows_is_each_rows_own_dot():
    rng = np.random.default_rng(0)
    for n, d in ((1, 8), (7, 64), (60, 256), (33, 384), (5, 1000)):
        for acc in (rng.standard_normal((n, d)) * rng.random((n, 1)) * 100,
                    np.where(rng.random((n, d)) < 0.1, rng.choice([1.0, -1.0, 0.5, -0.5], (n, d)), 0.0)):
            stacked = np.matmul(acc[:, None, :], acc[:, :, None]).reshape(n)
            each = np.array([row.dot(row) for row in acc])
            assert np.array_equal(stacked.view(np.int64), each.view(np.int64))


def test_batch_with_words_new_to_the_cache_is_the_single_encodes():
    words = "alpha beta gamma delta the a x's Zed 42 tea tea".split()
    rng = np.random.default_rng(1)
    texts = [" ".join(rng.choice(words, size=int(rng.integers(0, 9)))) for _ in range(300)]
    for dim, bw in ((16, 0.5), (256, 0.3), (8, -1.0)):
        warm = HashingEmbedder(dim, bw)
        warm.encode_batch(texts[:100])  # part of the words cached, the rest new in the next batch
        got = warm.encode_batch(texts)
        want = np.stack([HashingEmbedder(dim, bw).encode(t) for t in texts])
        assert np.array_equal(got.view(np.int32), want.view(np.int32))


def test_prepared_texts_read_token_by_token_are_the_single_encodes():
    """prepare() reads a plain-ASCII text whitespace token by whitespace token (HashingEmbedder._token_group,
    kept per token): the same features in the same order as encode's, also across a token without words
    ("-") and in texts that are not plain ASCII or hold no word; the kept groups are bounded and not pickled."""
    import pickle

    import world.embedding as E

    words = "Alice's the a - -- x's it's-a 42, (tea) Zoë 张伟 ’s b’s ... I my".split()
    rng = np.random.default_rng(2)
    texts = ["", " ", "...", "- -", "a - b", "a a a a"] + [
        " ".join(rng.choice(words, size=int(rng.integers(1, 10)))) for _ in range(400)]
    for dim, bw in ((16, 0.5), (256, 0.5), (8, 0.0)):
        ahead = HashingEmbedder(dim, bw)
        for start in (0, 200):  # the second half finds part of its tokens kept
            ahead.prepare(texts[start:start + 200] + texts[start:start + 200])
            for t in texts[start:start + 200]:
                want = HashingEmbedder(dim, bw).encode(t)
                got = ahead._prepared.pop(t, None)
                assert got is None or np.array_equal(got.view(np.int32), want.view(np.int32)), t
    assert ahead._token_groups and not pickle.loads(pickle.dumps(ahead))._token_groups
    old = E.TOKEN_GROUP_ENTRIES
    try:
        E.TOKEN_GROUP_ENTRIES = 5
        h = HashingEmbedder(16)
        h.prepare(["one two three four five six seven"])
        assert len(h._token_groups) <= 5
        assert np.array_equal(h.encode("one two three four five six seven"),
                              HashingEmbedder(16).encode("one two three four five six seven"))
    finally:
        E.TOKEN_GROUP_ENTRIES = old


class _NoStopWords(HashingEmbedder):
    """A subclass that reads texts its own way (stop words left out) through the ``_features`` hook."""

    def _features(self, text):
        from world.embedding import tokenize

        kept = " ".join(t for t in tokenize(text) if t not in {"the", "a", "is"})
        return super()._features(kept or text)


def test_a_subclass_with_its_own_features_gets_its_own_vectors_from_every_route():
    """encode_batch and prepare (and so a world's perception) give the subclass's encode() vectors,
    not the base class's token route."""
    from world import World, WorldConfig
    from world.embedding import CachedEmbedder

    texts = ["The cat is a pet", "a", "Alice is the one", "tea tea the tea"]
    emb = _NoStopWords(64)
    want = np.stack([_NoStopWords(64).encode(t) for t in texts])
    assert np.array_equal(emb.encode_batch(texts).view(np.int32), want.view(np.int32))
    emb.prepare(texts)
    for t, row in zip(texts, want):
        assert np.array_equal(emb.encode(t).view(np.int32), row.view(np.int32))
    world = World(WorldConfig.preset("life", "easy").replace(embed_dim=64), seed=0,
                  embedder=CachedEmbedder(_NoStopWords(64)))
    for _ in range(30):
        got = world.event_vector()
        assert np.array_equal(got.view(np.int32), _NoStopWords(64).encode(world.event.text).view(np.int32))
        world.advance()


def test_encode_transient_is_encode_and_leaves_the_word_cache_as_it_was():
    emb = HashingEmbedder(64)
    emb.encode("alice lives in lisbon")
    before = dict(emb._feature_cache)
    for text in ("alice keeps qzx5521 in lisbon", "", "qzx5521", "alice lives in lisbon"):
        got = emb.encode_transient(text)
        assert np.array_equal(got.view(np.int32), HashingEmbedder(64).encode(text).view(np.int32))
        assert emb._feature_cache == before


def test_encode_transient_reads_nothing_from_the_word_cache():
    """encode_transient hashes every word and word pair: a cache entry, even a wrong one, is never read
    (a query whose word pairs the world's script had cached was hashed faster: an agent could time it)."""
    emb = HashingEmbedder(64)
    text = "where does alice live now"
    emb.encode(text)
    for key in list(emb._feature_cache):
        emb._feature_cache[key] = (0, 1.0)  # (poisoned: a read would show in the vector)
    want = HashingEmbedder(64).encode(text)
    assert np.array_equal(emb.encode_transient(text).view(np.int32), want.view(np.int32))
    assert not np.array_equal(emb.encode(text), want)  # (the cached route does read it)
