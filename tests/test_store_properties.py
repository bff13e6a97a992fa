"""Property tests (hypothesis): store invariants under random operation sequences, namespace
isolation, and erasure leaving no trace of a secret."""

import pickle

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from world import CachedEmbedder, HashingEmbedder, MemoryStore

NAMES = ["Alice", "Bob", "Carol", "Dan"]
THINGS = ["tea", "coffee", "chess", "Paris", "Rome", "dogs", "jazz", "42"]
VERBS = ["likes", "hates", "visited", "mentioned"]

text_st = st.builds(lambda n, v, t, extra: f"{n} {v} {t}" + (" today" if extra else ""),
                    st.sampled_from(NAMES), st.sampled_from(VERBS), st.sampled_from(THINGS), st.booleans())

op_st = st.one_of(
    st.tuples(st.just("write"), text_st, st.sampled_from([None, "k1", "k2"]), st.floats(0, 2)),
    st.tuples(st.just("rule"), text_st, st.integers(0, 30)),
    st.tuples(st.just("link"), st.integers(0, 30), st.integers(0, 30), st.sampled_from(["supports", "follows"])),
    st.tuples(st.just("forget"), st.integers(0, 30)),
    st.tuples(st.just("supersede"), st.integers(0, 30), text_st),
    st.tuples(st.just("query"), text_st, st.booleans()),
    st.tuples(st.just("tick"), st.integers(1, 400)),
    st.tuples(st.just("sweep")),
    st.tuples(st.just("erase"), st.integers(0, 30)),
)


def _pick(store, i, namespace=None):
    ids = store.recent_ids(10_000, namespace=namespace)
    return ids[i % len(ids)] if ids else None


def apply_ops(store, ops, namespace=None):
    ns = store.namespace(namespace) if namespace else store
    step = store.current_step
    for op in ops:
        kind = op[0]
        if kind == "write":
            ns.write_episode(step, op[1], key=op[2], importance=op[3])
        elif kind == "rule":
            src = _pick(store, op[2], namespace)
            ns.write_semantic(step, "rule: " + op[1], [src] if src else [])
        elif kind == "link":
            a, b = _pick(store, op[1], namespace), _pick(store, op[2], namespace)
            if a and b:
                ns.link(a, b, op[3])
        elif kind == "forget":
            m = _pick(store, op[1], namespace)
            if m:
                ns.forget(m)
        elif kind == "supersede":
            m = _pick(store, op[1], namespace)
            if m and store.get(m).active:
                ns.supersede(m, op[2], step)
        elif kind == "query":
            ns.query(op[1], bump=op[2])
        elif kind == "tick":
            step += op[1]
            store.tick(step)
        elif kind == "sweep":
            ns.sweep_decayed()
        elif kind == "erase":
            m = _pick(store, op[1], namespace)
            if m:
                ns.erase(memory_id=m)


def check_invariants(store):
    g = store.graph
    live = set(store.episodic) | set(store.semantic)
    assert len(live) == len(store) == len(store.episodic) + len(store.semantic)
    mem_nodes = {n for n, d in g.nodes(data=True) if d["kind"] in ("episodic", "semantic")}
    assert mem_nodes == live
    for n, d in g.nodes(data=True):
        if d["kind"] == "cue":
            assert g.degree(n) > 0, f"orphaned cue node {n}"
            for m in g.successors(n):
                assert m in live
    for u, v in g.edges():
        assert u in g and v in g
    for mid in live:
        rec = store.get(mid)
        for other in rec.links:
            assert other in live and g.edges[mid, other]["rel"] in ("supports", "follows", "contradicts", "references")
    st_ = store.stats()
    assert st_["graph_nodes"] == g.number_of_nodes() and st_["graph_edges"] == g.number_of_edges()
    assert st_["embedding_rows"] == len(store) and st_["active"] + st_["superseded"] == len(store)
    assert store.conflicts() == []
    assert sorted(store.actr) == sorted(live)
    ids, sims = store.similarities(store.embed("Alice tea"))
    assert len(ids) == len(set(ids))
    assert np.all(np.isfinite(sims))


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.lists(op_st, max_size=40))
def test_invariants_hold_after_any_sequence(ops):
    store = MemoryStore(CachedEmbedder(HashingEmbedder(32)), forget_threshold=-2.0)
    apply_ops(store, ops)
    check_invariants(store)
    clone = MemoryStore._from_state(store._export_state(), store.embedder)
    check_invariants(clone)
    q = [(r.memory_id, s) for r, s in store.query_scored("Alice likes tea", bump=False)]
    assert q == [(r.memory_id, s) for r, s in clone.query_scored("Alice likes tea", bump=False)]
    pickle.loads(pickle.dumps(store))


@SETTINGS
@given(st.lists(op_st, max_size=25), st.lists(op_st, max_size=25), text_st)
def test_namespaces_never_influence_each_other(ops_a, ops_b, question):
    shared = MemoryStore(CachedEmbedder(HashingEmbedder(32)), forget_threshold=-2.0)
    # b's operations first, then a's: ids differ, but contents, scores and ranks in "a" must not
    apply_ops(shared, ops_b, namespace="b")
    mark = shared.current_step
    alone2 = MemoryStore(CachedEmbedder(HashingEmbedder(32)), forget_threshold=-2.0)
    alone2.tick(mark)
    apply_ops(alone2, ops_a, namespace="a")
    apply_ops(shared, ops_a, namespace="a")
    got = [(r.content, s) for r, s in shared.namespace("a").query_scored(question, bump=False)]
    want = [(r.content, s) for r, s in alone2.namespace("a").query_scored(question, bump=False)]
    assert got == want
    for rec in shared.namespace("a").query(question, top_k=50, bump=False):
        assert rec.namespace == "a"
    check_invariants(shared)


SECRET = "Zq7xK9secret"


@settings(max_examples=25, deadline=None)
@given(st.lists(op_st, max_size=20), st.sampled_from(["episode", "version", "subject", "key"]))
def test_erased_secret_is_found_nowhere(ops, how):
    emb = CachedEmbedder(HashingEmbedder(32))
    store = MemoryStore(emb, forget_threshold=-50.0)
    apply_ops(store, ops)
    step = store.current_step
    first = store.write_episode(step, f"Victor's locker code is {SECRET}", key="victor/locker")
    other = store.write_episode(step, "Wanda keeps the spare keys")
    if how == "version":
        v = store.supersede(first.memory_id, f"Victor's locker code is now {SECRET}2", step + 1)
    else:
        v = first
    store.link(other.memory_id, v.memory_id, "references")
    store.write_semantic(step + 1, "Victor guards his locker carefully", [v.memory_id])
    store.query(f"what is {SECRET}")
    if how in ("episode", "version"):
        report = store.erase(memory_id=first.memory_id)
    elif how == "subject":
        report = store.erase(subject="Victor")
    else:
        report = store.erase(key="victor/locker")
    assert report.total >= 2 and report.semantic
    assert SECRET not in repr(report)
    for rec in list(store.episodic.values()) + list(store.semantic.values()):
        assert SECRET not in repr(rec)
    g = store.graph
    assert SECRET.lower() not in " ".join(map(str, g.nodes())) + repr(list(g.edges(data=True)))
    assert not any(SECRET.lower() in t.lower() for t in emb.texts())
    state = store._export_state()
    blob = pickle.dumps({k: v for k, v in state.items() if k != "embeddings"})
    assert SECRET.encode() not in blob and SECRET.lower().encode() not in blob
    check_invariants(store)
