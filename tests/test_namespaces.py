"""Namespace isolation: a query in one namespace never returns, scores against, or is influenced by
(PPR mass, dedup, ACT-R, rolling summaries) another namespace's memories.

The property test runs a random interleaving of operations on two namespaces in one store, and the
same operations of each namespace alone in a store of its own; every result in the shared store
must equal the lone store's result (ids mapped, scores equal)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from world.embedding import HashingEmbedder
from world.memory import MemoryStore, RelationType
from world.summary import summaries

NS = ("alice", "bob")
# A shared pool: both namespaces write the same and near-same texts, so cross-namespace dedup,
# shared cues (PPR seeds) and shared keys would all show up as differences.
TEXTS = [
    "Alice lives in Lisbon.",
    "Alice lives in Lisbon now.",
    "Alice moved to Oslo in May.",
    "Bob plays chess with Carol on Fridays.",
    "Bob plays chess with Carol.",
    "Carol is a nurse at the city hospital.",
    "The hospital is near the harbour in Oslo.",
    "Dave remembers the key to the cellar.",
    "Erin's favourite drink is green tea.",
    "Erin's favourite drink is coffee.",
    "Lisbon has a harbour and old trams.",
    "Frank teaches chess at the library.",
]
KEYS = ["alice/home", "erin/drink", "bob/hobby"]
QUERIES = ["where does Alice live", "chess", "Oslo harbour hospital", "Erin drink", "Lisbon", "key cellar"]
RELS = [RelationType.SUPPORTS, RelationType.FOLLOWS, RelationType.CONTRADICTS, RelationType.REFERENCES]

ns_st = st.sampled_from(NS)
idx = st.integers(min_value=0, max_value=30)
op_st = st.one_of(
    st.tuples(st.just("write"), ns_st, st.integers(0, len(TEXTS) - 1)),
    st.tuples(st.just("keyed"), ns_st, st.integers(0, len(KEYS) - 1), st.integers(0, len(TEXTS) - 1)),
    st.tuples(st.just("supersede"), ns_st, idx, st.integers(0, len(TEXTS) - 1)),
    st.tuples(st.just("link"), ns_st, idx, idx, st.integers(0, len(RELS) - 1)),
    st.tuples(st.just("reflect"), ns_st, idx, idx),
    st.tuples(st.just("turn"), ns_st, st.integers(0, len(TEXTS) - 1)),
    st.tuples(st.just("turn"), ns_st, st.integers(0, len(TEXTS) - 1)),  # twice: folds must happen
    st.tuples(st.just("query"), ns_st, st.integers(0, len(QUERIES) - 1)),
    st.tuples(st.just("forget"), ns_st, idx),
    st.tuples(st.just("erase"), ns_st, idx),
    st.tuples(st.just("tick"), st.integers(1, 15)),
    st.tuples(st.just("sweep")),
)


def new_store() -> MemoryStore:
    # forget_threshold high enough that sweeps do drop memories within a short run
    return MemoryStore(embedder=HashingEmbedder(dim=64), forget_threshold=-0.9)


class Harness:
    """The shared store and one lone store per namespace, kept in lock-step."""

    def __init__(self) -> None:
        self.shared = new_store()
        self.lone = {ns: new_store() for ns in NS}
        self.idmap: dict[str, dict[str, str]] = {ns: {} for ns in NS}  # shared id -> lone id
        self.written: dict[str, list[str]] = {ns: [] for ns in NS}  # shared ids, write order
        self.step = 0
        for ns in NS:
            summaries(self.shared, ns, max_turns=2, keep_recent=1)
            summaries(self.lone[ns], ns, max_turns=2, keep_recent=1)

    def view(self, ns: str):
        # exercise both APIs: the scoped view for "alice", the namespace= keyword for "bob"
        return self.shared.namespace(ns) if ns == "alice" else None

    def pick(self, ns: str, i: int) -> tuple[str, str] | None:
        live = [m for m in self.written[ns] if m in self.shared]
        if not live:
            return None
        m = live[i % len(live)]
        return m, self.idmap[ns][m]

    def record(self, ns: str, shared_rec, lone_rec) -> None:
        mid = shared_rec.memory_id
        if mid in self.idmap[ns]:
            assert self.idmap[ns][mid] == lone_rec.memory_id
        else:
            assert lone_rec.memory_id not in self.idmap[ns].values()
            self.idmap[ns][mid] = lone_rec.memory_id
            self.written[ns].append(mid)
        assert shared_rec.namespace == ns and lone_rec.namespace == ns
        assert shared_rec.content == lone_rec.content

    def sync_summary(self, ns: str) -> None:
        """The rolling summaries of the namespace agree (text, folds, window, memory)."""
        ra, rb = summaries(self.shared, ns), summaries(self.lone[ns], ns)
        assert ra.text == rb.text
        assert (ra.memory_id is None) == (rb.memory_id is None)
        if ra.memory_id is not None:
            self.record(ns, ra.memory, rb.memory)
        assert [self.idmap[ns][t.memory_id] for t in ra.folded] == [t.memory_id for t in rb.folded]
        assert [self.idmap[ns][t.memory_id] for t in ra.window] == [t.memory_id for t in rb.window]

    def check_live(self, ns: str) -> None:
        mine = {m for m, r in self.shared.episodic.items() if r.namespace == ns}
        mine |= {m for m, r in self.shared.semantic.items() if r.namespace == ns}
        lone = set(self.lone[ns].episodic) | set(self.lone[ns].semantic)
        assert {self.idmap[ns][m] for m in mine} == lone

    def apply(self, op: tuple) -> None:
        kind = op[0]
        if kind == "tick":
            self.step += op[1]
            for s in (self.shared, *self.lone.values()):
                s.tick(self.step)
            return
        if kind == "sweep":
            dropped = self.shared.sweep_decayed()
            for ns in NS:
                lone_dropped = self.lone[ns].sweep_decayed()
                mine = [m for m in dropped if m in self.idmap[ns]]
                assert sorted(self.idmap[ns][m] for m in mine) == sorted(lone_dropped)
            return
        ns = op[1]
        lone = self.lone[ns]
        view = self.view(ns)
        kw = {} if view is not None else {"namespace": ns}
        target = view if view is not None else self.shared
        if kind == "write":
            text = TEXTS[op[2]]
            a = target.write_episode(self.step, text, **kw)
            sa = self.shared.last_write.status
            b = lone.write_episode(self.step, text, namespace=ns)
            assert sa == lone.last_write.status
            self.record(ns, a, b)
        elif kind == "keyed":
            key, text = KEYS[op[2]], TEXTS[op[3]]
            a = target.write_episode(self.step, text, key=key, source="user", **kw)
            sa = self.shared.last_write.status
            b = lone.write_episode(self.step, text, key=key, source="user", namespace=ns)
            assert sa == lone.last_write.status
            self.record(ns, a, b)
            va = [self.idmap[ns][r.memory_id] for r in self.shared.versions(key, namespace=ns)]
            vb = [r.memory_id for r in lone.versions(key, namespace=ns)]
            assert va == vb
        elif kind == "supersede":
            pair = self.pick(ns, op[2])
            if pair is None or not self.shared.get(pair[0]).active:
                return
            text = TEXTS[op[3]]
            a = target.supersede(pair[0], text, self.step)
            b = lone.supersede(pair[1], text, self.step)
            self.record(ns, a, b)
        elif kind == "link":
            p, q = self.pick(ns, op[2]), self.pick(ns, op[3])
            if p is None or q is None:
                return
            rel = RELS[op[4]]
            assert target.link(p[0], q[0], rel) == lone.link(p[1], q[1], rel)
        elif kind == "reflect":
            p, q = self.pick(ns, op[2]), self.pick(ns, op[3])
            if p is None or q is None:
                return
            rule = f"{self.shared.get(p[0]).content} and {self.shared.get(q[0]).content}"
            a = target.write_semantic(self.step, rule, [p[0], q[0]], confidence=0.5, **kw)
            b = lone.write_semantic(self.step, rule, [p[1], q[1]], confidence=0.5, namespace=ns)
            self.record(ns, a, b)
        elif kind == "turn":
            text = TEXTS[op[2]]
            ra, rb = summaries(self.shared, ns), summaries(lone, ns)
            a = ra.add_turn(text, step=self.step)
            b = rb.add_turn(text, step=self.step)
            self.record(ns, a, b)
            self.sync_summary(ns)
        elif kind == "query":
            q = QUERIES[op[2]]
            a = target.query_scored(q, top_k=5, **kw)
            b = lone.query_scored(q, top_k=5, namespace=ns)
            assert all(r.namespace == ns for r, _ in a)
            assert [self.idmap[ns][r.memory_id] for r, _ in a] == [r.memory_id for r, _ in b]
            assert [s for _, s in a] == pytest.approx([s for _, s in b], rel=1e-12, abs=1e-12)
        elif kind == "forget":
            pair = self.pick(ns, op[2])
            if pair is None:
                return
            assert target.forget(pair[0]) == lone.forget(pair[1])
        elif kind == "erase":
            pair = self.pick(ns, op[2])
            if pair is None:
                return
            ra = target.erase(memory_id=pair[0])
            rb = lone.erase(memory_id=pair[1])
            assert sorted(self.idmap[ns][m] for m in ra.removed_ids) == sorted(rb.removed_ids)
            assert ra.namespaces == [ns]
            self.sync_summary(ns)
        self.check_live(ns)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op_st, min_size=10, max_size=80))
def test_namespaces_are_isolated(ops):
    h = Harness()
    for op in ops:
        h.apply(op)
    # at the end every query, in every namespace, with and without PPR, matches the lone store
    for ns in NS:
        for q in QUERIES:
            for alpha_ppr in (0.5, 0.0):
                a = h.shared.query_scored(q, top_k=50, alpha_ppr=alpha_ppr, namespace=ns, bump=False)
                b = h.lone[ns].query_scored(q, top_k=50, alpha_ppr=alpha_ppr, namespace=ns, bump=False)
                assert [h.idmap[ns][r.memory_id] for r, _ in a] == [r.memory_id for r, _ in b]
                assert [s for _, s in a] == pytest.approx([s for _, s in b], rel=1e-12, abs=1e-12)
        assert h.shared.conflicts(namespace=ns) == h.lone[ns].conflicts(namespace=ns)
        for key in KEYS:
            assert h.shared.explain(key, namespace=ns).count("\n") == h.lone[ns].explain(key, namespace=ns).count("\n")


def test_cross_namespace_operations_are_refused():
    store = new_store()
    a = store.write_episode(0, "Alice lives in Lisbon.", namespace="alice")
    b = store.write_episode(0, "Alice lives in Lisbon.", namespace="bob")
    assert a.memory_id != b.memory_id and store.last_write.status == "written"  # no cross-namespace dedup
    assert store.link(a.memory_id, b.memory_id, RelationType.SUPPORTS) is False
    with pytest.raises(ValueError, match="namespace"):
        store.write_semantic(0, "Alice likes Lisbon.", [a.memory_id], namespace="bob")
    bob = store.namespace("bob")
    assert bob.get(a.memory_id) is None and a.memory_id not in bob
    assert bob.forget(a.memory_id) is False and a.memory_id in store
    assert bob.erase(memory_id=a.memory_id).total == 0 and a.memory_id in store
    assert [m.memory_id for m in bob.query("Alice Lisbon", top_k=10)] == [b.memory_id]


def test_erasure_across_namespaces_reports_in_the_store_order_in_every_process():
    """erase(namespace="*") walked a set of namespace names: its report's order (semantic, cascaded,
    fingerprints) changed with PYTHONHASHSEED."""
    import subprocess
    import sys

    code = (
        "from world.memory import MemoryStore\n"
        "from world.embedding import make_embedder\n"
        "s = MemoryStore(make_embedder('hashing', 64))\n"
        "for ns in ['alpha', 'beta', 'gamma', 'delta']:\n"
        "    a = s.write_episode(1, f'Ada drives a Kia number {ns}.', namespace=ns)\n"
        "    b = s.write_episode(2, f'Ada parks the Kia at {ns} station.', namespace=ns)\n"
        "    s.write_semantic(3, f'The usual car in {ns} is a compact one.', [a.memory_id, b.memory_id], namespace=ns)\n"
        "r = s.erase(subject='Ada', namespace='*')\n"
        "print(r.episodic, r.semantic, r.cascaded, r.fingerprints)\n"
    )
    import os
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": str(h), "PYTHONPATH": root}).stdout
            for h in range(4)}
    assert len(outs) == 1
    assert "['sem_000001', 'sem_000002', 'sem_000003', 'sem_000004']" in outs.pop()


# ----------------------------------------------------------------------------- audit session 9
def test_cue_nodes_of_different_namespaces_never_merge_in_the_store_graph():
    """`cue::alice::tea` was both the default namespace's caller cue "alice::tea" and namespace
    alice's cue "tea": the store.graph view merged them (audit session 9)."""
    store = MemoryStore(HashingEmbedder(64))
    for cues in (["alice::tea"], [":tea"], ["tea", "a::b"]):
        with pytest.raises(ValueError, match="^cues: a cue must not contain '::' nor begin with ':'"):
            store.write_episode(0, "Tea time.", cues=cues)
        with pytest.raises(ValueError, match="^cues: a cue must not contain '::'"):
            store.namespace("alice").write_semantic(0, "Tea time.", [], cues=cues)
        with pytest.raises(ValueError, match="^cues: a cue must not contain '::'"):
            store.query("tea", cues=cues)
    assert len(store) == 0
    # a text's own cues never hold '::' ("alice::tea" in a text is the cue "alice:tea")
    rec = store.write_episode(0, "Tea at alice::tea with std::vector::size today.")
    assert not any("::" in c for c in rec.cues) and "alice:tea" in rec.cues and "std:vector:size" in rec.cues
    store.query("what about alice::tea", bump=False)
    assert store.last_ppr_method is not None  # the query's cue is the text's
    store.namespace("alice").write_episode(0, "I like tea.", cues=["tea"])
    store.namespace("x:").write_episode(0, "Sun.", cues=["a"])
    store.namespace("x").write_episode(0, "Moon.", cues=["a:"])
    g = store.graph
    assert g.number_of_nodes() == sum(store.namespace_graph(n).number_of_nodes() for n in store.namespaces())
    assert g.number_of_edges() == sum(store.namespace_graph(n).number_of_edges() for n in store.namespaces())
    assert g.nodes["cue::alice:tea"]["namespace"] == "default" and g.nodes["cue::alice::tea"]["namespace"] == "alice"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["default", "a", "a:", ":a", "a::b", "b"]),
                          st.lists(st.text(alphabet=":ab", min_size=1, max_size=5), min_size=1, max_size=3)),
                min_size=1, max_size=8))
def test_no_two_cue_nodes_share_a_name_in_the_store_graph(writes):
    """Whatever the namespace names, an accepted cue gets a node name no other (namespace, cue) has."""
    store = MemoryStore(HashingEmbedder(64))
    for i, (ns, cues) in enumerate(writes):
        bad = any("::" in c or c.startswith(":") for c in cues)
        try:
            store.write_episode(i, f"Memory number {i}.", cues=cues, namespace=ns)
        except ValueError as exc:
            assert bad and str(exc).startswith("cues:")
        else:
            assert not bad
    g = store.graph
    assert g.number_of_nodes() == sum(store.namespace_graph(n).number_of_nodes() for n in store.namespaces())


def test_a_view_offers_summaries_actr_and_namespace_graph_scoped_to_its_namespace():
    """docs/DESIGN.md and docs/lifecycle.md say the view has the store's methods; these three were missing."""
    store = MemoryStore(HashingEmbedder(64))
    alice = store.namespace("alice")
    a = alice.write_episode(1, "Alice lives in Lisbon.")
    b = store.write_episode(2, "Bob lives in Oslo.")
    store.tick(5)
    alice.query("Lisbon")
    rs = alice.summaries(max_turns=2, keep_recent=1)
    assert rs is summaries(store, "alice") and rs is store.summaries("alice") and rs.namespace == "alice"
    with pytest.raises(ValueError, match="namespace 'bob' given for a view of namespace 'alice'"):
        alice.summaries("bob")
    assert set(alice.actr) == {a.memory_id} and b.memory_id in store.actr
    assert alice.actr[a.memory_id] == store.actr[a.memory_id] and alice.actr[a.memory_id].n == 2
    assert alice.namespace_graph() is store.namespace_graph("alice") and alice.namespace_graph("alice") is not None
    with pytest.raises(ValueError, match="namespace 'default' given for a view of namespace 'alice'"):
        alice.namespace_graph("default")
    assert store.namespace("empty").namespace_graph() is None and store.namespace("empty").actr == {}


def test_a_view_refuses_a_bad_relation_as_the_store_does():
    """view.link("nope", "nope2", "bogus") returned False where store.link raises."""
    store = MemoryStore(HashingEmbedder(64))
    view = store.namespace("alice")
    a = view.write_episode(1, "Alice lives in Lisbon.")
    b = view.write_episode(2, "Alice works at the port.")
    for where in (store, view):
        with pytest.raises(ValueError, match="relation must be one of"):
            where.link("nope", "nope2", "bogus")
        with pytest.raises(ValueError, match="relation must be one of"):
            where.link(a.memory_id, b.memory_id, "bogus")
    assert view.link("nope", b.memory_id, "supports") is False
    assert view.link(a.memory_id, b.memory_id, RelationType.SUPPORTS) is True
