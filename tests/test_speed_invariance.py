"""The env's fast paths give exactly what the plain computations they replace give (bit for bit),
so that speed work never changes a seeded trajectory."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from world.ppr import TransitionMatrix, personalized_pagerank, transition_from_edges


def _reference_pt(n: int, src, dst, w) -> sp.csr_matrix:
    """P^T through scipy's constructors (how the transition matrix used to be built)."""
    adj = sp.csr_matrix((np.asarray(w, float), (np.asarray(src), np.asarray(dst))), shape=(n, n))
    adj.sort_indices()
    out_w = np.asarray(adj.sum(axis=1)).ravel()
    inv = np.zeros_like(out_w)
    nz = out_w != 0
    inv[nz] = 1.0 / out_w[nz]
    pt = sp.csr_matrix((sp.diags(inv) @ adj).T)
    pt.sort_indices()
    return pt, ~nz


def _random_graph(rng, n: int, m: int):
    pairs = {(int(a), int(b)) for a, b in rng.integers(0, n, size=(m, 2))}
    src, dst = (np.array(x, dtype=np.int64) for x in zip(*sorted(pairs), strict=True))
    perm = rng.permutation(len(src))  # edge slots come in any order
    w = rng.choice([1.0, 0.5, 0.3, 2.0 / 3.0, 0.1], size=len(src))
    return src[perm], dst[perm], w


def test_transition_from_edges_is_bit_identical_to_scipy_route():
    rng = np.random.default_rng(0)
    for trial in range(30):
        n = int(rng.integers(2, 120))
        src, dst, w = _random_graph(rng, n, int(rng.integers(1, 6 * n)))
        tm = transition_from_edges(n, src, dst, w)
        ref, dangling = _reference_pt(n, src, dst, w)
        assert np.array_equal(tm.indptr, ref.indptr), trial
        assert np.array_equal(tm.indices, ref.indices), trial
        assert np.array_equal(tm.data, ref.data), trial  # exact, not approx
        assert np.array_equal(tm.dangling, dangling)
        assert (tm.pt != ref).nnz == 0
        p = np.zeros(n)
        p[rng.integers(0, n, size=3)] = 1.0
        x, _ = personalized_pagerank(tm, p)
        ref_tm = TransitionMatrix(ref.indptr, ref.indices, ref.data, dangling, n)
        assert np.array_equal(x, personalized_pagerank(ref_tm, p)[0])


@pytest.mark.parametrize(("weights", "exact"), [
    ((1.0,), True), ((1.0, 0.5), True), ((0.0, 1.0, 0.5), True), ((-0.0, 0.25, 3.0), True), ((2.0 ** -10, 7.0), True),
    ((2.0 ** -11, 1.0), False), ((1.0, 0.3), False), ((2.0 ** 40, 2.0 ** 42, 1.0), False)])
def test_transition_rows_summed_by_either_route_are_the_scipy_routes(weights, exact):
    """Weights whose partial sums are all exact (the store's 1.0 and 0.5) take transition_from_edges'
    bincount route for the out-weights, others the column-ordered reduceat: both give the scipy
    route's matrix bit for bit (rows of zero weights included: dangling either way)."""
    from world.ppr import _sums_exact

    rng = np.random.default_rng(len(weights))
    for trial in range(25):
        n = int(rng.integers(1, 90))
        src, dst, _ = _random_graph(rng, n, int(rng.integers(1, 6 * n)))
        w = rng.choice(weights, size=len(src))
        tm = transition_from_edges(n, src, dst, w)
        ref, dangling = _reference_pt(n, src, dst, w)
        assert tm.indptr.tobytes() == ref.indptr.astype(np.int32).tobytes(), trial
        assert np.array_equal(tm.indices, ref.indices) and tm.data.tobytes() == ref.data.tobytes(), trial
        assert np.array_equal(tm.dangling, dangling), trial
    assert _sums_exact(np.array(weights)) == exact


def _extract_cues_reference(text: str, max_cues: int = 8) -> list[str]:
    """The cue rule written plainly (as world.cues had it before its fast loop)."""
    from world.cues import STOP_WORDS, _clean, is_entity_like

    cues: list[str] = []
    seen: set[str] = set()
    for raw in text.split():
        w = _clean(raw)
        low = w.lower()
        if len(w) <= 2 or low in STOP_WORDS or low in seen:
            continue
        if is_entity_like(w) or len(cues) < max_cues // 2:
            seen.add(low)  # (only a kept word is seen: a skipped one may come back entity-like)
            cues.append(low)
        if len(cues) >= max_cues:
            break
    return cues


def test_extract_cues_fast_loop_matches_the_plain_rule():
    from world.cues import extract_cues

    rng = np.random.default_rng(1)
    words = ["Alice's", "alice", "Bob’s's", "x's", "’s", "'s", "Paris.", "(Berlin)", "the", "it's", "42",
             "2024-05-01", "Zoë", "İstanbul's", "coffee", "tea,", "is", "an", "ok", "Über", "“quoted”", "a1",
             "cat's'", "dog’s", "ÉCOLE'S", "on", "sky"]
    texts = [" ".join(rng.choice(words, size=int(rng.integers(0, 25)))) for _ in range(400)]
    for text in texts:
        for k in (1, 2, 3, 8, 12):
            assert extract_cues(text, k) == _extract_cues_reference(text, k), (text, k)


def test_hashing_embedder_python_accumulation_matches_numpy():
    from world.embedding import HashingEmbedder, tokenize

    emb = HashingEmbedder(64)
    rng = np.random.default_rng(2)
    vocab = ["alice", "bob", "likes", "tea", "coffee", "paris", "moved", "to", "the", "a", "x", "y", "z"]
    for _ in range(200):
        text = " ".join(rng.choice(vocab, size=int(rng.integers(0, 40))))
        toks = tokenize(text) or ["\x00empty:" + text.strip()]
        vec = np.zeros(64)
        for t in toks:
            i, s = emb._feature(t)
            vec[i] += s
        for a, b in zip(toks, toks[1:]):
            i, s = emb._feature(a + " " + b)
            vec[i] += s * emb.bigram_weight
        norm = np.linalg.norm(vec)
        if norm == 0.0:
            i, s = emb._feature(toks[0])
            vec[i] = s
            norm = 1.0
        assert np.array_equal(emb.encode(text), (vec / norm).astype(np.float32)), text


class _BatchingHashing:
    """A hashing embedder that says it prefers batches (as sentence-transformers does) and counts calls."""

    prefers_batches = True

    def __init__(self, dim: int):
        from world.embedding import HashingEmbedder

        self._h = HashingEmbedder(dim)
        self.dim = dim
        self.name = f"hashing-{dim}"
        self.single = 0
        self.batches: list[int] = []

    def encode(self, text):
        self.single += 1
        return self._h.encode(text)

    def encode_batch(self, texts):
        texts = list(texts)
        self.batches.append(len(texts))
        return self._h.encode_batch(texts)


def _play(world, seed: int, steps: int) -> list:
    from world import Op

    rng = np.random.default_rng(seed)
    world.reset(seed)
    log = []
    for _ in range(steps):
        ids = world.candidates()
        op = Op(int(rng.integers(7)))
        target = ids[int(rng.integers(len(ids)))] if ids else None
        out = world.apply(op, target)
        log.append((int(out.op), out.target, out.valid, out.memory_id, out.retrieved, out.question,
                    out.reward_terms, out.swept, ids, world.event_vector().tobytes()))
        if world.advance() is None:
            break
    return log + [world.metrics()]


def test_world_prefetch_of_script_embeddings_changes_nothing():
    """A batching embedder makes the world embed its script (and the rules REFLECT could write) in one
    batch at reset and serve event vectors from it; the episode is exactly the one-text-at-a-time one."""
    from world import World, WorldConfig
    from world.embedding import CachedEmbedder, HashingEmbedder

    cfg = WorldConfig.preset("life", "easy").replace(horizon=120)
    fast_inner = _BatchingHashing(cfg.embed_dim)
    fast = World(cfg, seed=0, embedder=CachedEmbedder(fast_inner))
    plain = World(cfg, seed=0, embedder=CachedEmbedder(HashingEmbedder(cfg.embed_dim)))
    for seed in (5, 6):
        fast_inner.single = 0
        fast_inner.batches.clear()
        assert _play(fast, seed, 120) == _play(plain, seed, 120)
        assert fast_inner.batches and fast_inner.batches[0] >= 50  # the script, in one batch at reset
        assert fast._script_vecs is not None and len(fast._script_vecs) == len(fast._gen.events)
        # event texts never go one by one through the model (singles: texts re-embedded after an
        # erasure dropped them, rules of clusters not foreseen)
        assert fast_inner.single < 10


def _hybrid_reference(now, created, n, recent, d=0.5, min_lag=1.0):
    """The vectorised hybrid base level with the tail term computed on every row (the plain form)."""
    lags = np.maximum(now - recent, min_lag)
    if d == 0.5:
        total = (1.0 / np.sqrt(lags)).sum(axis=1)
    else:
        total = np.power(lags, -d).sum(axis=1)
    k = recent.shape[1]
    if len(n) and n.max() > k:
        extra = n - k
        life = np.maximum(now - created, min_lag)
        t_k = np.maximum(np.where(np.isfinite(lags), lags, -np.inf).max(axis=1), min_lag)
        gap = life - t_k
        safe_gap = np.where(gap > 1e-12 * np.maximum(life, 1.0), gap, 1.0)
        frac = np.where(gap > 1e-12 * np.maximum(life, 1.0),
                        (life ** (1.0 - d) - t_k ** (1.0 - d)) / ((1.0 - d) * safe_gap), life ** (-d))
        total = total + np.where(extra > 0, extra * frac, 0.0)
    return np.log(total)


def test_hybrid_base_level_tail_on_the_rows_that_need_it_is_bit_identical():
    from world.actr import MIN_LAG, hybrid_base_level_batch

    rng = np.random.default_rng(3)
    k = 8
    for trial in range(60):
        m = int(rng.integers(1, 400))
        now = float(rng.integers(50, 5000))
        created = rng.integers(0, int(now) - 20, size=m).astype(float)
        n = rng.choice([1, 2, 5, 8, 9, 12, 40], size=m, p=[0.5, 0.1, 0.1, 0.05, 0.1, 0.1, 0.05]).astype(np.int64)
        recent = np.full((m, k), -np.inf)
        for i in range(m):
            times = np.sort(rng.uniform(created[i], now, size=min(n[i], k)))
            times[0] = created[i] if n[i] <= k else times[0]
            recent[i, : len(times)] = times
        d = 0.5 if trial % 3 else 0.4
        got = hybrid_base_level_batch(now, created, n, recent.copy(), d=d, assume_no_nan=True)
        assert np.array_equal(got, _hybrid_reference(now, created, n, recent, d=d, min_lag=MIN_LAG)), trial


def test_base_level_batch_kept_across_steps_is_bit_identical():
    """A BaseLevelBatch (the store keeps one while only the clock moves) gives at every step the bits of
    the plain form: rows with a tail term (some with the creation still kept: numpy's branch),
    single presentations, more than 256 rows (the single-presentation path)."""
    from world.actr import BaseLevelBatch

    rng = np.random.default_rng(17)
    k = 8
    for trial in range(40):
        m = int(rng.choice([1, 3, 30, 300]))
        created = rng.integers(0, 200, size=m).astype(float)
        n = rng.choice([1, 1, 1, 3, 8, 9, 20], size=m).astype(np.int64)
        recent = np.full((m, k), -np.inf)
        for i in range(m):
            kept = min(int(n[i]), k)
            times = np.sort(rng.integers(int(created[i]), 260, size=kept)).astype(float)
            if n[i] <= k or trial % 5 == 0:
                times[0] = created[i]
            recent[i, :kept] = times
        d = 0.5 if trial % 4 else 0.4
        batch = BaseLevelBatch(created, n, recent.copy(), d=d, assume_no_nan=True)
        for now in (260.0, 261.0, 275.0, 1000.0, 1e6):
            got = batch.at(now)
            assert got.tobytes() == _hybrid_reference(now, created, n, recent, d=d, min_lag=1.0).tobytes(), (trial, now)


def _ppr_reference(tm, p, alpha=0.85, max_iter=100, tol=1.0e-6):
    """The power iteration as first written (fill, seeds, kernel, ndarray.sum)."""
    from scipy.sparse._sparsetools import csr_matvec

    n = tm.n
    p = p / p.sum()
    dangling = np.flatnonzero(tm.dangling)
    data_a = alpha * tm.data
    seeds = np.flatnonzero(p)
    x = np.full(n, 1.0 / n)
    y = np.empty(n)
    for _ in range(max_iter):
        c = alpha * x.take(dangling).sum() + (1.0 - alpha) if len(dangling) else 1.0 - alpha
        y.fill(0.0)
        y[seeds] = c * p[seeds]
        csr_matvec(n, n, tm.indptr, tm.indices, data_a, x, y)
        diff = np.abs(y - x)
        x, y = y.copy(), x
        if diff.sum() < n * tol:
            return x
    return None


def test_power_iteration_loop_is_bit_identical_to_the_plain_loop():
    rng = np.random.default_rng(4)
    checked = 0
    for _ in range(40):
        n = int(rng.integers(2, 200))
        src, dst, w = _random_graph(rng, n, int(rng.integers(1, 5 * n)))
        tm = transition_from_edges(n, src, dst, w)
        p = np.zeros(n)
        p[rng.integers(0, n, size=int(rng.integers(1, 5)))] = rng.uniform(0.5, 2.0)
        ref = _ppr_reference(tm, p)
        x, method = personalized_pagerank(tm, p)
        if ref is not None:
            assert method == "power" and np.array_equal(x, ref)
            checked += 1
    assert checked > 30


@pytest.mark.parametrize("max_nnz", [0, 16_384])
def test_batched_stopping_test_stops_at_the_same_iteration_as_the_plain_loop(max_nnz, monkeypatch):
    """The power iteration tests convergence a batch of iterations at a time on small graphs (every
    iteration on graphs above _PPR_BATCH_MAX_NNZ edges: max_nnz 0 takes that path here): for every
    max_iter (inside a batch, at its end, past convergence) the result is the plain loop's, and a run
    that the plain loop would not finish raises; with and without dangling nodes."""
    import world.ppr
    from world.ppr import PPRConvergenceError

    monkeypatch.setattr(world.ppr, "_PPR_BATCH_MAX_NNZ", max_nnz)

    rng = np.random.default_rng(5)
    for trial in range(12):
        n = int(rng.integers(3, 60))
        src, dst, w = _random_graph(rng, n, int(rng.integers(n, 5 * n)))
        if trial % 2:  # every node gets an out-edge: no dangling nodes (the Life stores' case)
            src = np.concatenate((src, np.arange(n)))
            dst = np.concatenate((dst, (np.arange(n) + 1) % n))
            pairs = dict.fromkeys(zip(src.tolist(), dst.tolist(), strict=True))
            src, dst = (np.array(x, dtype=np.int64) for x in zip(*pairs, strict=True))
            w = rng.choice([1.0, 0.5, 0.3], size=len(src))
        tm = transition_from_edges(n, src, dst, w)
        assert not (trial % 2 and tm.dangling.any())
        p = np.zeros(n)
        p[rng.integers(0, n, size=2)] = 1.0
        for max_iter in (1, 2, 7, 8, 9, 15, 16, 17, 30, 45, 61, 100):
            ref = _ppr_reference(tm, p, max_iter=max_iter)
            if ref is None:
                with pytest.raises(PPRConvergenceError):
                    personalized_pagerank(tm, p, max_iter=max_iter, fallback="raise")
            else:
                x, method = personalized_pagerank(tm, p, max_iter=max_iter, fallback="raise")
                assert method == "power" and np.array_equal(x, ref), (trial, max_iter)


def test_world_with_script_embeddings_branches_identically_from_a_snapshot():
    from world import Op, World, WorldConfig
    from world.embedding import CachedEmbedder

    cfg = WorldConfig.preset("life", "easy").replace(horizon=60)
    world = World(cfg, seed=1, embedder=CachedEmbedder(_BatchingHashing(cfg.embed_dim)))

    def rest(seed):
        rng = np.random.default_rng(seed)
        out = []
        while not world.done:
            ids = world.candidates()
            op = Op(int(rng.integers(7)))
            res = world.apply(op, ids[int(rng.integers(len(ids)))] if ids else None)
            out.append((res.memory_id, res.retrieved, res.reward_terms, world.event_vector().tobytes()))
            world.advance()
        return out

    for _ in range(20):
        world.apply(Op.WRITE)
        world.advance()
    state = world.get_state()
    assert state["_script_vecs"] is world._script_vecs  # a fixed script's vectors are shared, not copied
    first = rest(9)
    world.set_state(state)
    assert rest(9) == first


def test_event_cues_handed_to_the_store_are_the_ones_it_would_extract():
    """The world extracts an event's cues once and passes them to WRITE / UPDATE / QUERY: every stored
    episode's cues are exactly ``extract_cues(content, store.max_cues)``."""
    from world import Op, World, WorldConfig
    from world.cues import extract_cues

    world = World(WorldConfig.preset("life", "easy").replace(horizon=150), seed=2)
    rng = np.random.default_rng(0)
    seen = 0
    while not world.done:
        assert world.event_cues() == extract_cues(world.event.text, world.store.max_cues)
        ids = world.candidates()
        op = Op(int(rng.choice([1, 1, 2, 3, 5, 6])))
        world.apply(op, ids[int(rng.integers(len(ids)))] if ids else None)
        world.advance()
        for rec in world.store.episodic.values():
            assert rec.cues == extract_cues(rec.content, world.store.max_cues)
            seen += 1
    assert seen > 100


def test_hybrid_tail_in_python_floats_is_bit_identical_to_numpy():
    """The d = 0.5 tail term for a few rows is computed in Python floats (same IEEE operations);
    rows whose gap is ~0 (the creation still among the kept presentations) take numpy's branch."""
    from world.actr import MIN_LAG, _tail_rows_sqrt, hybrid_base_level_batch

    rng = np.random.default_rng(11)
    k = 8
    python_rows = 0
    for trial in range(300):
        m = int(rng.integers(1, 60))
        now = float(rng.integers(20, 3000))
        created = rng.integers(0, int(now) - 10, size=m).astype(float)
        n = rng.choice([1, 3, 8, 9, 10, 15, 60], size=m).astype(np.int64)
        recent = np.full((m, k), -np.inf)
        for i in range(m):
            kept = min(int(n[i]), k)
            lo = created[i] if (n[i] <= k or trial % 7 == 0) else created[i] + rng.uniform(0.0, 5.0)
            times = np.sort(rng.uniform(lo, now, size=kept))
            if n[i] <= k or trial % 7 == 0:
                times[0] = created[i]  # trial % 7: the creation kept (gap 0: numpy's pow branch)
            if trial % 5 == 0:
                times = np.floor(times)  # presentations on whole steps: ties and lags of exactly 1
            recent[i, :kept] = times
        got = hybrid_base_level_batch(now, created, n, recent.copy(), d=0.5, assume_no_nan=True)
        assert np.array_equal(got, _hybrid_reference(now, created, n, recent, d=0.5, min_lag=MIN_LAG)), trial
        rows = np.flatnonzero(n > k)
        if len(rows):
            lags = np.maximum(now - recent[rows], MIN_LAG)
            if _tail_rows_sqrt(now, created[rows].tolist(), n[rows].tolist(), lags.tolist(), k, MIN_LAG) is not None:
                python_rows += len(rows)
    assert python_rows > 100


def _signature_reference(text: str):
    """world.dedup.signature written plainly, word by word (as it was before its fast form)."""
    import hashlib
    import unicodedata

    from world.dedup import _DEDUP_STOP, TextSignature, _word, normalize, unicode_word_pattern

    raw = [_word(w) for w in unicode_word_pattern().findall(unicodedata.normalize("NFC", text))]
    words = tuple(w.lower() for w in raw)
    entities = frozenset(w.lower() for w in raw if w[0].isupper() or any(c.isdigit() for c in w))
    norm = normalize(text)
    return TextSignature(norm=norm, fp=hashlib.sha256(norm.encode("utf-8")).hexdigest()[:16], words=words,
                         word_set=frozenset(words), content=frozenset(w for w in words if w not in _DEDUP_STOP),
                         entities=entities)


def test_signature_fast_form_matches_the_plain_rule():
    from world.dedup import signature

    rng = np.random.default_rng(12)
    words = ["Alice's", "alice", "Bob’s", "BOB'S", "x's", "’s", "'s", "Paris.", "(Berlin)", "the", "it's", "42",
             "2024-05-01", "Zoë", "İstanbul's", "coffee", "tea,", "is", "not", "never", "Über", "“quoted”", "a1",
             "cat's'", "dog’s", "ÉCOLE'S", "on", "I", "my", "don't", "K", "3rd", "rock’n’roll", "O'Neil's",
             "张伟的", "咖啡", "コーヒー", "Пользователь", "Zoe\u0301", "हिन्दी", "٣", "x²", "René’s", "ผู้ใช้"]
    for _ in range(600):
        text = " ".join(rng.choice(words, size=int(rng.integers(0, 20))))
        assert signature(text) == _signature_reference(text), text


def test_plain_ascii_texts_give_the_words_and_tokens_of_the_ascii_patterns():
    """The Unicode word rule changes nothing for plain-ASCII texts (all the environments produce):
    same words as ``[A-Za-z0-9]+(?:['’][A-Za-z0-9]+)*``, same embedder tokens as before, and the
    signature's ASCII fast path equals the plain Unicode rule."""
    import re
    import string

    from world.dedup import _ASCII_WORD_RE, signature, unicode_word_pattern, words
    from world.embedding import tokenize

    old_tokens = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*")
    rng = np.random.default_rng(13)
    alphabet = list(string.ascii_letters + string.digits + string.punctuation + " \t\n_") + ["'s", "'S", "’", "’s"] * 4
    for _ in range(1500):
        text = "".join(rng.choice(alphabet, size=int(rng.integers(0, 60))))
        assert unicode_word_pattern().findall(text) == _ASCII_WORD_RE.findall(text), text
        assert tokenize(text) == [t[:-2] if t.endswith("'s") else t
                                  for t in old_tokens.findall(text.lower().replace("’", "'"))], text
        assert tokenize(text) == words(text), text
        assert signature(text) == _signature_reference(text), text


def test_world_event_signature_is_what_the_store_and_the_features_would_compute():
    """The world computes an event's signature once and hands it to the store (WRITE / UPDATE / LINK)
    and to the env's features; the store's signature of every memory is signature(content)."""
    import gymnasium as gym

    import envs  # noqa: F401
    from world.dedup import signature

    env = gym.make("MemGym/Life-Easy-v0", horizon=150).unwrapped
    env.reset(seed=3)
    world = env.world
    rng = np.random.default_rng(3)
    seen = 0
    done = False
    while not done:
        assert world.event_signature() == signature(world.event.text)
        key_cache = env._features._key_cache  # set once a step has candidates
        if key_cache is not None and key_cache[0] == world.event.text:
            assert key_cache[1][2] == signature(world.event.text)
        _, _, _, done, _ = env.step(np.array([int(rng.choice([1, 1, 2, 3, 5, 6])), int(rng.integers(env.K))]))
        store = world.store
        for mid, rec in list(store.episodic.items()) + list(store.semantic.items()):
            space = store._loc[mid][0]
            assert store._sig(space, mid) == signature(rec.content)
            seen += 1
        for mid, st in env._features._static.items():
            assert st[10] == signature(store.get(mid).text)
    assert seen > 100


def _random_actions_play(env_id: str, seed: int, steps: int, ops=None):
    """Yield the unwrapped env after each of ``steps`` seeded random steps (resets included)."""
    import gymnasium as gym

    import envs  # noqa: F401

    env = gym.make(env_id).unwrapped
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        op = int(rng.choice(ops)) if ops is not None else int(rng.integers(7))
        _, _, _, truncated, _ = env.step(np.array([op, int(rng.integers(env.K))]))
        if truncated:
            env.reset()
        yield env


def test_duplicate_column_equals_the_plain_dedup_rules():
    """The candidate 'duplicate' column (fingerprint / value-change checks inline, embedding rule only
    above its threshold) is exactly duplicate_rule(...) or embedding_duplicate(...)."""
    from envs.features import CANDIDATE_FEATURES
    from world.dedup import DedupConfig, duplicate_rule, embedding_duplicate, signature

    col = CANDIDATE_FEATURES.index("duplicate")
    ones = zeros = 0
    for env_id, seed in (("MemGym/Life-Easy-v0", 1), ("MemGym/Life-Hard-v0", 2), ("MemGym/Noise-Hard-v0", 3)):
        for env in _random_actions_play(env_id, seed, 400, ops=[0, 1, 1, 2, 3, 5, 6]):
            ids = env.candidate_ids
            if env.world.done or not ids:
                continue
            store = env.world.store
            cfg = store.dedup_config or DedupConfig()
            ev = signature(env.world.event.text)
            for j, mid in enumerate(ids):
                rec = store.get(mid)
                sim = float(env._features.candidates[j, 0])
                old = signature(rec.text)
                want = bool(rec.text) and (duplicate_rule(ev, old, cfg) is not None
                                           or embedding_duplicate(ev, old, sim, cfg))
                assert env._features.candidates[j, col] == float(want), (env.world.event.text, rec.text)
                ones += want
                zeros += not want
    assert ones > 5 and zeros > 500


def test_reflect_mask_reads_the_target_kind_not_its_hidden_cluster():
    """The REFLECT row is "a live episode" (store not full); whether the target has a cluster (hidden)
    does not enter it: masked-valid targets without a cluster and with one both occur, and every
    target with a cluster is masked valid."""
    from envs.memory_env import valid_rows

    checked = positive = lonely = 0
    for env in _random_actions_play("MemGym/Life-Hard-v0", 4, 500, ops=[1, 1, 1, 3, 4, 6]):
        ids = env.candidate_ids
        if env.world.done or not ids:
            continue
        world = env.world
        rows = valid_rows(world, ids)
        full = len(world.store) >= world.config.capacity
        for j, mid in enumerate(ids):
            want = not full and mid in world.store.episodic
            assert rows[3][j] == want, mid
            cluster = len(world._cluster(mid)) >= 2
            assert want or not cluster or full
            checked += 1
            positive += want and cluster
            lonely += want and not cluster
    assert checked > 1000 and positive > 50 and lonely > 50


def test_event_records_and_metrics_are_plain_values():
    """Events are built without the dataclass __init__ (equal, hashable, picklable as ever); the
    metrics dict handed out at episode end is fresh (no deep copy needed)."""
    import pickle

    from world import Event, World, WorldConfig
    from world.sim import _event

    world = World(WorldConfig.preset("life", "easy").replace(horizon=30), seed=5)
    for se in world.privileged.script:
        ev = _event(se)
        plain = Event(se.index, se.step, se.text, se.kind, se.session)
        assert ev == plain and hash(ev) == hash(plain) and repr(ev) == repr(plain)
        assert pickle.loads(pickle.dumps(ev)) == plain
    m = world.metrics()
    m["verdicts"]["correct"] = 99
    m["reward_terms"]["answer"] = 1.0
    m["ops"]["WRITE"] = 7
    assert world.metrics() == World(WorldConfig.preset("life", "easy").replace(horizon=30), seed=5).metrics()


def _bump_reference(row: np.ndarray, t: float) -> None:
    """The ACT-R presentation list update as first written (numpy search for the first -inf)."""
    empty = np.flatnonzero(np.isneginf(row))
    if len(empty):
        row[empty[0]] = t
    else:
        row[:-1] = row[1:]
        row[-1] = t


def test_actr_bump_list_search_matches_numpy_search():
    from world import MemoryStore

    rng = np.random.default_rng(13)
    store = MemoryStore()
    ids = [store.write_episode(0, f"memory number {i} about topic {i * 7}").memory_id for i in range(6)]
    space = store._space(store.default_namespace)
    expect = {mid: space.a_recent[store._loc[mid][1]].copy() for mid in ids}
    for step in range(1, 60):
        store.tick(step)
        chosen = rng.choice(ids, size=int(rng.integers(1, 4)), replace=False).tolist()
        slots = [store._loc[mid][1] for mid in chosen]
        store._bump(space, slots, [store.get(mid) for mid in chosen])  # (one retrieval's rows at once)
        for mid, slot in zip(chosen, slots, strict=True):
            _bump_reference(expect[mid], float(step))
            assert np.array_equal(space.a_recent[slot], expect[mid])
    assert all(np.isfinite(v).all() for v in expect.values())  # rows filled up, then shifted


def _find_duplicate_reference(store, space, sig, vec, semantic):
    """MemoryStore._find_duplicate as first written (every window candidate through duplicate_rule)."""
    from world.dedup import duplicate_rule, embedding_duplicate
    from world.memory import _matvec

    cfg = store.dedup_config
    for mid in space.fp.get(sig.fp, ()):
        if (store._records[mid].kind == "semantic") == semantic:
            return mid, "fingerprint"
    if not space.order:
        return None
    cand = np.fromiter(space.recent_slots, dtype=np.int64, count=len(space.recent_slots))[::-1]
    if len(cand) == 0:
        return None
    cand = cand[space.alive[cand] & space.active[cand] & (space.is_sem[cand] == semantic)]
    cand = np.fromiter(dict.fromkeys(cand.tolist()), dtype=np.int64)
    for slot in cand[: cfg.window].tolist():
        mid = space.slot_id[slot]
        rule = duplicate_rule(sig, store._sig(space, mid), cfg)
        if rule is not None:
            return mid, rule
    if len(cand):
        sims = _matvec(space.emb[cand], vec)
        for j in np.argsort(-sims, kind="stable"):
            if sims[j] < cfg.embed_threshold:
                break
            mid = space.slot_id[cand[j]]
            if embedding_duplicate(sig, store._sig(space, mid), float(sims[j]), cfg):
                return mid, "embedding"
    return None


def test_store_dedup_window_fast_reject_matches_the_plain_loop():
    from world import MemoryStore
    from world.dedup import signature

    rng = np.random.default_rng(14)
    subjects = ["Alice's", "Bob's", "My", "Carol's"]
    nouns = ["favourite drink", "car", "city", "job"]
    values = ["tea", "coffee", "Paris", "Rome", "a red car", "not tea", "never coffee"]
    store = MemoryStore()
    found = 0
    for step in range(400):
        text = f"{rng.choice(subjects)} {rng.choice(nouns)} is {rng.choice(values)}."
        if rng.random() < 0.2:
            text = text + " Really."
        space = store._space(store.default_namespace, create=True)
        sig, vec = signature(text), store.embed(text)
        got = store._find_duplicate(space, sig, vec, False)
        assert got == _find_duplicate_reference(store, space, sig, vec, False), text
        found += got is not None
        store.tick(step)
        store.write_episode(step, text)
        if rng.random() < 0.1 and len(store) > 3:
            store.forget(next(iter(store.episodic)))
    assert found > 50


def test_store_embed_normalisation_equals_linalg_norm():
    from world import MemoryStore

    class Raw:  # returns vectors that are not unit length
        name, dim = "raw", 16

        def __init__(self):
            self.rng = np.random.default_rng(15)

        def encode(self, text):
            return self.rng.normal(size=16).astype(np.float32) * float(self.rng.uniform(0.5, 3.0))

    store = MemoryStore(Raw())
    ref = Raw()
    for i in range(300):
        vec = np.asarray(ref.encode(str(i)), dtype=np.float32).ravel()
        norm = float(np.linalg.norm(vec))
        want = vec / norm if norm > 0 and abs(norm - 1.0) > 1e-4 else vec
        assert np.array_equal(store.embed(str(i)), want)


def test_ranked_similarities_equal_argsort_of_the_float64_similarities():
    """World.candidates ranks with store._ranked (float32, no copy): the same order as the stable
    argsort of -store.similarities(vec)[1] (float64), ties (repeated texts) included."""
    from world import MemoryStore

    rng = np.random.default_rng(16)
    words = ["tea", "coffee", "Alice", "Bob", "Paris", "likes", "moved", "to", "the", "car", "red"]
    store = MemoryStore(dedup=False)
    for step in range(150):
        store.tick(step)
        store.write_episode(step, " ".join(rng.choice(words, size=int(rng.integers(2, 6)))))
        if rng.random() < 0.15:
            store.forget(list(store.episodic)[int(rng.integers(len(store)))])
        vec = store.embed(" ".join(rng.choice(words, size=3)))
        ids, sims = store.similarities(vec)
        for limit in (1, 5, 18, 1000):
            got_ids, order = store._ranked(vec, limit)
            assert got_ids == ids
            assert order == np.argsort(-sims, kind="stable")[:limit].tolist()
    assert len(set(sims.tolist())) < len(sims)  # ties happened


def test_link_columns_follow_the_stores_link_changes():
    """The env recounts typed links only when the store's link counter moves; the links column it
    uses always equals min(store.link_count, 8) / 8."""
    checked = linked = 0
    for env in _random_actions_play("MemGym/Life-Hard-v0", 6, 400, ops=[1, 3, 3, 3, 5, 6, 0]):
        fb = env._features
        if env.world.done or not env.candidate_ids or fb._link_cache is None:
            continue
        store = env.world.store
        assert fb._link_cache[1] == store._link_changes
        for mid in env.candidate_ids:
            n = store.link_count(mid)
            assert fb._link_cache[2].get(mid, 0.0) == min(n, 8) / 8
            checked += 1
            linked += n > 0
    assert checked > 500 and linked > 100


def test_script_text_memo_gives_the_plain_cues_and_signatures_holds_script_texts_only_and_is_bounded(monkeypatch):
    """The worlds' process-wide memo of their script texts (world.sim._script_text): the cues,
    signatures and version keys it hands out are the plain ones, it holds nothing but script texts (a text a store
    brings in, an erased memory's, never enters it), stays out of snapshots and pickles, and keeps at
    most SCRIPT_TEXT_ENTRIES texts."""
    import pickle

    import world.sim as sim
    from world import Op, World, WorldConfig
    from world.cues import extract_cues
    from world.dedup import signature
    from world.keys import subject_and_topic_of

    monkeypatch.setattr(sim, "_SCRIPT_TEXTS", type(sim._SCRIPT_TEXTS)())
    world = World(WorldConfig.preset("life", "hard").replace(horizon=300), seed=8)
    texts = [e.text for e in world.privileged.script]
    assert len(set(texts)) < len(texts)  # texts recur within an episode
    secret = "The vault code is qzx5521 and only Mallory knows it."
    mem = world.store.write_episode(world.store.current_step, secret)
    world.store.erase(memory_id=mem.memory_id)
    while not world.done:
        text = world.event.text
        assert world.event_cues() == extract_cues(text, world.store.max_cues)
        assert world.event_signature() == signature(text)
        assert world.event_key() == (*subject_and_topic_of(signature(text)), signature(text))
        if world.is_valid(Op.WRITE)[0]:
            world.apply(Op.WRITE)
        world.advance()
    assert set(sim._SCRIPT_TEXTS) == set(texts)
    assert secret not in sim._SCRIPT_TEXTS
    blob, state = pickle.dumps(world), pickle.dumps(world.get_state())
    kept = dict(sim._SCRIPT_TEXTS)
    sim._SCRIPT_TEXTS.clear()  # snapshots and pickles hold nothing of the memo
    assert pickle.dumps(world) == blob and pickle.dumps(world.get_state()) == state
    sim._SCRIPT_TEXTS.update(kept)
    # a second world reads the memo: the same values for the same texts (another max_cues too)
    other = World(WorldConfig.preset("life", "hard").replace(horizon=300), seed=8)
    other.store.max_cues = 3
    while not other.done:
        assert other.event_cues() == extract_cues(other.event.text, 3)
        assert other.event_signature() == signature(other.event.text)
        assert other.event_key() == (*subject_and_topic_of(signature(other.event.text)), signature(other.event.text))
        other.advance()
    # bounded: first in, first out
    monkeypatch.setattr(sim, "SCRIPT_TEXT_ENTRIES", 50)
    world.reset(9)
    last = None
    while not world.done:
        world.event_cues()
        last = world.event.text
        world.advance()
    assert len(sim._SCRIPT_TEXTS) == 50 and last in sim._SCRIPT_TEXTS


def test_unit_norm_embedders_skip_a_normalisation_that_would_change_nothing():
    """HashingEmbedder vectors are unit to float32 rounding, so the store's |norm - 1| > 1e-4 test
    never fires for them: store.embed skips it (unit_norm) and returns exactly what it would return."""
    from world import MemoryStore
    from world.embedding import CachedEmbedder, HashingEmbedder

    class Plain:  # the same vectors without the flag: store.embed takes the checking path
        def __init__(self, inner):
            self.inner, self.name, self.dim = inner, inner.name, inner.dim

        def encode(self, text):
            return self.inner.encode(text)

    rng = np.random.default_rng(18)
    vocab = ["alice", "Bob's", "tea", "x", "42", "a", "the", "’s", "!!", "Zoë", "coffee", "paris"]
    for dim in (8, 64, 256):
        flagged = MemoryStore(CachedEmbedder(HashingEmbedder(dim)))
        plain = MemoryStore(Plain(HashingEmbedder(dim)))
        assert flagged.embedder.unit_norm and not getattr(plain.embedder, "unit_norm", False)
        for _ in range(300):
            text = " ".join(rng.choice(vocab, size=int(rng.integers(0, 12)))) or "!"
            vec = flagged.embed(text)
            assert abs(float(np.linalg.norm(vec)) - 1.0) < 1e-6
            assert np.array_equal(vec, plain.embed(text)), text
            # the env copies such a vector instead of clipping it to [-1, 1]: the clip is the identity
            clipped = np.maximum(np.minimum(vec, 1.0, dtype=np.float32), -1.0)
            assert clipped.tobytes() == vec.tobytes()


def test_cached_action_masks_equal_the_masks_built_from_the_rows():
    from envs.memory_env import valid_rows

    seen = set()
    for env_id in ("MemGym/Life-Easy-v0", "MemGym/Consolidation-Hard-v0"):
        for env in _random_actions_play(env_id, 7, 300, ops=[1, 1, 2, 3, 4, 5, 6, 0]):
            ids = env.candidate_ids
            n = max(len(ids), 1)
            slots = [True] * n + [False] * (env.K - n)
            if env.world.done:
                want = [True] + [False] * 6 + slots
            else:
                write_ok, update, link, reflect, forget = valid_rows(env.world, ids)
                want = [True, write_ok, any(update), any(link), any(reflect), True, any(forget)] + slots
            assert env.action_masks().tolist() == want
            seen.add(tuple(want))
    assert len(seen) > 6


def test_script_generation_shortcuts_draw_and_return_what_the_plain_code_does():
    """chitchat's per-template placeholder list, _render_fact without formatting unused templates and
    Cast.person without copying the cast: same values and the same random draws as the plain code."""
    from world.entities import _FILL, CHITCHAT, RELATIONS, Cast, chitchat, pick, tidy

    def chitchat_plain(rng):
        t = pick(rng, CHITCHAT)
        for k, pool in _FILL.items():
            token = "{" + k + "}"
            if token in t:
                t = t.replace(token, pick(rng, pool))
        return tidy(t)  # (the texts are tidied: "an odd week")

    def render_plain(rng, rel, s, o, avoid=None):
        options = [tidy(t.format(s=s, o=o)) for t in rel.fact]
        if avoid is not None and len(options) > 1:
            options = [t for t in options if t != avoid] or options
        return pick(rng, options)

    from world import WorldConfig
    from world.families import ScriptGenerator

    a, b = np.random.default_rng(19), np.random.default_rng(19)
    assert [chitchat(a) for _ in range(500)] == [chitchat_plain(b) for _ in range(500)]
    gen = ScriptGenerator(WorldConfig.preset("recall", "easy"), np.random.default_rng(20))
    ref = np.random.default_rng(20)
    ref.bit_generator.state = gen.rng.bit_generator.state
    for j, rel in enumerate(list(RELATIONS.values()) * 5):
        avoid = rel.fact[0].format(s="Ann", o="tea") if j % 3 == 0 else None
        assert gen._render_fact(rel, "Ann", "tea", avoid=avoid) == render_plain(ref, rel, "Ann", "tea", avoid)
    cast, plain = Cast(np.random.default_rng(21)), Cast(np.random.default_rng(21))
    for j in range(300):
        exclude = set(cast.people[:2]) if j % 4 == 0 else None
        got = cast.person(exclude)
        pool = [p for p in plain.people if not exclude or p not in exclude]
        want = plain.new_person() if not pool else pick(plain.rng, pool)
        assert got == want
        if j % 10 == 0:
            cast.new_person()
            plain.new_person()
    assert cast.rng.bit_generator.state == plain.rng.bit_generator.state


def test_graph_sorted_names_kept_by_bisect_give_the_transition_of_a_full_sort():
    import pickle

    from world.graph import AssocGraph
    from world.ppr import transition_from_edges

    def plain_transition(g):
        names = sorted(g._idx)
        order = np.fromiter((g._idx[n] for n in names), dtype=np.int64, count=len(names))
        pos = np.full(len(g._names), -1, dtype=np.int64)
        pos[order] = np.arange(len(order), dtype=np.int64)
        alive = g._ealive[: g._ehi]
        return transition_from_edges(len(order), pos[g._esrc[: g._ehi][alive]], pos[g._edst[: g._ehi][alive]],
                                     g._ew[: g._ehi][alive]), pos

    rng = np.random.default_rng(22)
    g = AssocGraph()
    prefixes = ["ep_", "sem_", "\x00cue:"]
    for step in range(300):
        name = str(rng.choice(prefixes)) + f"{int(rng.integers(0, 80)):06d}"
        g.add_node(name, "episodic")
        names = list(g._idx)
        for other in rng.choice(names, size=min(3, len(names)), replace=False):
            if other != name:
                g.add_edge(name, str(other), "has_cue", float(rng.choice([1.0, 0.5])))
        if rng.random() < 0.3:
            g.remove_node(str(rng.choice(list(g._idx))))
        if step % 50 == 49:
            g = pickle.loads(pickle.dumps(g))
        assert g._sorted == sorted(g._idx) and g._sorted_idx == [g._idx[n] for n in g._sorted]
        if step % 10 == 0 and len(g):
            (tm, pos), (ref, ref_pos) = g.transition(), plain_transition(g)
            assert np.array_equal(pos, ref_pos)
            for field in ("indptr", "indices", "data", "dangling"):
                assert np.array_equal(getattr(tm, field), getattr(ref, field)), field
    old = pickle.loads(pickle.dumps(g))  # a graph pickled before the sorted lists existed
    state = dict(old.__dict__)
    del state["_sorted"], state["_sorted_idx"]
    restored = AssocGraph.__new__(AssocGraph)
    restored.__setstate__(state)
    assert restored._sorted == sorted(restored._idx)


def test_erasure_cascade_equals_the_plain_fixed_point():
    """erase(memory_id=...) removes exactly the target's chain plus every record whose evidence /
    derived_from reaches it transitively (the fixed point computed here plainly, before the erase)."""
    from world import MemoryStore

    rng = np.random.default_rng(23)
    for trial in range(40):
        store = MemoryStore(dedup=False)
        ids = []
        for step in range(40):
            store.tick(step)
            roll = rng.random()
            if roll < 0.2 and len(ids) > 2:
                src = [str(x) for x in rng.choice(ids, size=2, replace=False)]
                rec = store.write_semantic(step, f"rule {trial} {step}", src)
            elif roll < 0.4 and len(ids) > 2:
                ev = [str(x) for x in rng.choice(ids, size=int(rng.integers(1, 3)), replace=False)]
                rec = store.write_episode(step, f"episode {trial} {step} with evidence", evidence=ev)
            elif roll < 0.5 and ids:
                live = [m for m in ids if m in store and store.get(m).active]
                rec = store.supersede(str(rng.choice(live)), f"update {trial} {step}", step) if live else \
                    store.write_episode(step, f"episode {trial} {step}")
            else:
                rec = store.write_episode(step, f"episode {trial} {step}")
            ids.append(rec.memory_id)
        target = str(rng.choice([m for m in ids if m in store]))
        records = {m: store.get(m) for m in list(store.episodic) + list(store.semantic)}
        want = {target}
        key = records[target].key
        if key is not None:
            want |= {r.memory_id for r in store.versions(key)}
        changed = True
        while changed:
            changed = False
            for m, rec in records.items():
                refs = set(rec.evidence) | set(getattr(rec, "derived_from", ()))
                if m not in want and refs & want:
                    want.add(m)
                    changed = True
        report = store.erase(memory_id=target)
        assert set(report.episodic) | set(report.semantic) == want, trial
        assert not want & (set(store.episodic) | set(store.semantic))


def test_feature_rows_past_the_candidates_and_the_slot_mask_are_rebuilt_exactly():
    """The builder zeroes only the rows an earlier step filled and copies the slot mask from a table:
    after every step the buffer past the candidates is all zero and the mask is 1 on exactly the
    filled slots, as building them from scratch gives (FORGET-heavy play: the candidate count goes
    up and down, to 0 and back)."""
    shrank = 0
    previous = 0
    for env in _random_actions_play("MemGym/Life-Easy-v0", 11, 400, ops=[1, 1, 3, 6, 6, 6, 0]):
        fb = env._features
        m = len(env.candidate_ids)
        assert not fb.candidates[m:].any()
        assert fb.mask.tolist() == [1] * m + [0] * (env.K - m)
        shrank += m < previous
        previous = m
    assert shrank > 20


def test_pairs_of_an_env_pickled_before_the_full_flag_existed():
    """Envs pickled by the previous release kept the observed step's rows in ``_rows`` (and had no
    ``_full``): their first ``action_mask_pairs()`` answers from those rows, as that release did."""
    import pickle

    from envs import MemoryEnv
    from envs.memory_env import valid_rows
    from world import WorldConfig

    env = MemoryEnv(config=WorldConfig.preset("life", "easy"))
    env.reset(seed=4)
    rng = np.random.default_rng(0)
    for _ in range(12):
        env.step(np.array([rng.integers(7), rng.integers(env.K)]))
    expected = env.action_mask_pairs()
    old = pickle.loads(pickle.dumps(env))
    old.__dict__["_rows"] = valid_rows(old.world, old._ids)  # the previous release's layout
    del old.__dict__["_full"]
    old._pair_stale = True
    assert np.array_equal(old.action_mask_pairs(), expected)
    assert expected[1:].any()  # (not the NOOP-only answer of a finished episode)


def test_the_observation_after_the_last_event_embeds_no_text():
    """After the last event there are no candidates, so the observation needs no similarity: it must not
    embed a placeholder text (with MiniLM that was one forward pass, ~15 ms, per episode)."""
    from envs import MemoryEnv
    from world import WorldConfig

    env = MemoryEnv(config=WorldConfig.preset("life", "easy").replace(horizon=30))
    env.reset(seed=2)
    rng = np.random.default_rng(2)
    truncated = False
    while not truncated:
        *_, truncated, _ = env.step(np.array([1 if rng.random() < 0.7 else 0, 0]))
    store = env.world.store
    assert len(store) > 0  # (the observation reads the store's activations then)
    embedded = []
    original = store.embed
    store.embed = lambda text: embedded.append(text) or original(text)
    obs = env._observe()
    assert embedded == []
    assert obs["candidate_mask"].sum() == 0 and 0.0 < obs["store"][3] < 1.0  # the store mean is still read


def _top_k_reference(scores, k):
    """query_scored's top-k as first written: partition at the k-th score, lexsort (-score, position)."""
    n = len(scores)
    if k < n:
        kth = np.partition(scores, n - k)[n - k]
        cand = np.flatnonzero(scores >= kth)
    else:
        cand = np.arange(n)
    return cand[np.lexsort((cand, -scores[cand]))][:k]


def test_query_top_k_is_the_partition_and_lexsort_selection():
    """The store's top-k (a stable argsort of -scores when no score is NaN) picks the same positions in
    the same order as the partition + lexsort it replaced: ties (zeros of both signs included), -inf
    for inactive rows, and NaN scores (kept on the old route)."""
    from world.memory import _top_k

    rng = np.random.default_rng(21)
    for trial in range(3000):
        n = int(rng.integers(1, 70))
        scores = np.round(rng.normal(size=n), int(rng.integers(0, 3)))  # (rounding makes ties)
        if trial % 3 == 0:
            scores[rng.random(n) < 0.3] = -np.inf
        if trial % 5 == 0:
            scores[rng.random(n) < 0.2] = 0.0
            scores[rng.random(n) < 0.2] = -0.0
        if trial % 11 == 0:
            scores[rng.random(n) < 0.2] = np.nan
        for k in {1, min(5, n), n, int(rng.integers(1, n + 1))}:
            assert _top_k(scores, k).tolist() == _top_k_reference(scores, k).tolist(), (trial, k)


@pytest.mark.parametrize("alpha_ppr", [0.5, 0.0, -0.0, -0.3])
def test_query_scores_without_ppr_seeds_are_the_written_formula(alpha_ppr):
    """A query whose cues are not in the graph scores alpha_ppr * 0 * 10 for PPR without computing it
    (+0.0, or -0.0 for a negative or -0.0 alpha_ppr): the formula's bits, signed zeros included."""
    from world import MemoryStore
    from world.memory import _matvec

    store = MemoryStore()
    for i in range(7):
        store.write_episode(i, f"note {i} about the garden shed and tool number {i * 3}")
    store.tick(9)
    space = store._space(store.default_namespace)
    ids, slots = space.view()
    text = "zzz qqq"
    sims = _matvec(space.emb[: space.hi], store.embed(text))[slots].astype(np.float64)
    act = store._activation_rows(space, slots)
    ppr = np.zeros(len(slots))
    ref = 0.35 * sims + alpha_ppr * ppr * 10.0 + 0.15 * act * 0.1 + 0.1 * space.importance[slots]
    ref = ref - (1.0 - space.conf_w[slots]) * np.abs(ref)
    got = store._scores(space, ids, slots, text, ["nowhere"], alpha_ppr, 0.35, 0.15)
    assert store.last_ppr_method is None and got.tobytes() == ref.tobytes()
