"""Written purely against seed 001's public API (world/memory.py of the seed): code that used the
seed store runs unchanged, and with the default weights ranks the same memories first."""

import math

import networkx as nx
import numpy as np

from world.memory import ActRRecord, EpisodicMemory, MemoryStore, RelationType, SemanticMemory, extract_cues  # noqa: F401

EPISODES = [
    (0, "Alice moved to Paris for a new job at the Louvre"),
    (1, "Bob adopted a grey cat named Pixel"),
    (2, "Alice's sister Clara visits Paris every spring"),
    (3, "The Louvre opens at nine on weekdays"),
    (4, "Bob's cat Pixel hates the vacuum cleaner"),
    (5, "Dana runs a bakery in Lyon"),
    (6, "Clara studies marine biology in Brest"),
    (7, "Dana's bakery sells croissants and baguettes"),
]


def build():
    store = MemoryStore(forget_threshold=-5.0)
    ids = [store.write_episode(step, text).memory_id for step, text in EPISODES]
    store.tick(10)
    return store, ids


def seed_reference_ranking(store, query_text, top_k=5):
    """Seed 001's query, re-done here: networkx.pagerank on the store's graph + a per-memory loop."""
    cues = extract_cues(query_text)
    graph = store.graph
    seeds = [f"cue::{c}" for c in cues if graph.has_node(f"cue::{c}")]
    ppr = {}
    if seeds:
        ppr = nx.pagerank(graph, alpha=0.85, personalization={n: 1.0 for n in seeds}, max_iter=1000, tol=1e-12)
    q = store.embedder.encode(query_text)
    scored = []
    for mid, mem in store.episodic.items():
        sim = float(np.dot(q, store.embedder.encode(mem.content)))
        act = math.log(max(1, store.current_step - mem.step) ** -0.5)
        score = 0.35 * sim + 0.5 * ppr.get(mid, 0.0) * 10 + 0.15 * act * 0.1 + 0.1 * mem.importance
        scored.append((score, mid))
    scored.sort(key=lambda t: t[0], reverse=True)
    return [mid for _, mid in scored[:top_k]]


def test_seed_workflow_runs_unchanged():
    store, ids = build()
    assert set(store.stats()) >= {"episodic", "semantic", "graph_nodes", "graph_edges"}
    assert store.stats()["episodic"] == len(EPISODES)
    mem = store.episodic[ids[0]]
    assert isinstance(mem, EpisodicMemory) and mem.step == 0 and "alice" in mem.cues
    rule = store.write_semantic(11, "Alice and Clara both spend time in Paris", [ids[0], ids[2]])
    assert isinstance(rule, SemanticMemory) and rule.derived_from == [ids[0], ids[2]] and rule.created_step == 11
    assert store.graph.has_edge(rule.memory_id, ids[0])
    assert store.link(ids[1], ids[4], RelationType.SUPPORTS)  # the seed crashed here (relation.value on str)
    assert ids[4] in store.episodic[ids[1]].links
    results = store.query("Where does Alice live?", top_k=3)
    assert results and results[0].memory_id in (ids[0], ids[2]) and "Alice" in results[0].content
    assert all(isinstance(r, (EpisodicMemory, SemanticMemory)) for r in results)
    assert store.forget(ids[5]) and ids[5] not in store.episodic
    assert not store.graph.has_node(ids[5])
    before = set(store.episodic) | set(store.semantic)
    store.tick(10**7)  # B = ln((1e7)^-0.5) = -8.06; + importance (<= 1) is below -5 for everyone
    dropped = store.sweep_decayed()
    assert set(dropped) == before and len(store) == 0
    assert store.stats()["episodic"] + store.stats()["semantic"] == len(store)
    rec = ActRRecord(created_step=0)
    rec.bump(5)
    assert rec.activation(10) > ActRRecord(created_step=0).activation(10)


def test_same_top_memories_as_seed_formula():
    store, _ = build()
    for q in ["Where does Alice live?", "Bob's cat", "bakery in Lyon", "Clara Paris spring", "Louvre opening hours"]:
        ours = [r.memory_id for r in store.query(q, top_k=3, bump=False)]
        assert ours == seed_reference_ranking(store, q, top_k=3), q


def test_seed_default_relation_constants():
    assert RelationType.CONTRADICTS == "contradicts" and RelationType.SUPPORTS == "supports"
    assert RelationType.FOLLOWS == "follows" and RelationType.REFERENCES == "references"
    assert extract_cues("Alice met Bob in Paris on 2024-05-01") == ["alice", "met", "bob", "paris", "2024-05-01"]
