"""AssocGraph's batched calls (add_star, remove_hub, predecessors) leave exactly the graph, edge slots and
free lists of the add_node / add_edge / remove_node calls they stand for."""

import numpy as np
import pytest

from world.graph import AssocGraph


def _state(g: AssocGraph):
    """Everything observable about a graph's layout (slots included: they decide later recycling)."""
    hi = g._ehi
    return (dict(g._idx), list(g._sorted), list(g._sorted_idx), list(g._names), list(g._kinds), list(g._free_nodes),
            [dict(d) for d in g._out], [dict(d) for d in g._in], list(g._free_edges), hi, g._n_edges,
            g._esrc[:hi].tolist(), g._edst[:hi].tolist(), g._ew[:hi].tolist(),
            [g._rels[c] for c in g._erel[:hi].tolist()], g._ealive[:hi].tolist())


def _plain_star(g, center, kind, leaves, leaf_kind, out_rel, in_rel, weight):
    i = g.add_node(center, kind)
    for leaf in leaves:
        if leaf not in g:
            g.add_node(leaf, leaf_kind)
        g.add_edge(center, leaf, out_rel, weight)
        g.add_edge(leaf, center, in_rel, weight)
    return i


def _plain_remove_hub(g, name, leaf_rel):
    if name not in g:
        return 0, []
    leaves = [n for n, rel, _w in g.out_edges(name) if rel == leaf_rel]
    removed = g.remove_node(name)
    orphans = []
    for leaf in leaves:
        if leaf in g and g.degree(leaf) == 0:
            g.remove_node(leaf)
            orphans.append(leaf)
    return removed, orphans


def _random_ops(seed: int, batched: bool):
    rng = np.random.default_rng(seed)
    g = AssocGraph()
    results = []
    mems = [f"ep_{k:03d}" for k in range(12)]
    cues = [f"cue::w{k}" for k in range(30)]  # (many: most removals leave a few cue nodes isolated)
    for _ in range(400):
        r = rng.random()
        if r < 0.45:
            mid = str(rng.choice(mems))
            leaves = [str(c) for c in rng.choice(cues, size=int(rng.integers(0, 6)))]  # repeats allowed
            if rng.random() < 0.05:
                leaves.append(mid)  # a self-loop
            w = float(rng.choice([1.0, 0.5]))
            star = g.add_star if batched else (lambda *a: _plain_star(g, *a))
            results.append(star(mid, "episodic", leaves, "cue", "has_cue", "cue_of", w))
        elif r < 0.6 and len(g):
            names = [n for n in g.nodes() if not n.startswith("cue::")]
            if len(names) >= 2:
                a, b = (str(x) for x in rng.choice(names, size=2, replace=False))
                g.add_edge(a, b, str(rng.choice(["follows", "supports", "derived_from"])), 1.0)
        elif r < 0.9:
            mid = str(rng.choice(mems + ["nobody"]))
            results.append(g.remove_hub(mid, "has_cue") if batched else _plain_remove_hub(g, mid, "has_cue"))
        elif len(g):
            name = str(rng.choice(g.nodes()))
            rels = [["follows", "supports"], None, ["contradicts"], []][int(rng.integers(0, 4))]
            if batched:
                results.append(g.predecessors(name, rels))
            else:
                results.append([s for s, rel, _w in g.in_edges(name) if rels is None or rel in rels])
    return g, results


@pytest.mark.parametrize("seed", range(6))
def test_batched_calls_equal_the_plain_calls(seed):
    plain, plain_results = _random_ops(seed, batched=False)
    batched, batched_results = _random_ops(seed, batched=True)
    assert batched_results == plain_results
    assert _state(batched) == _state(plain)
    (tm, pos), (ref, ref_pos) = batched.transition(), plain.transition()
    assert np.array_equal(pos, ref_pos)
    for name in ("indptr", "indices", "data", "dangling"):
        assert np.array_equal(getattr(tm, name), getattr(ref, name)), name


def test_add_star_refuses_a_bad_weight_before_any_change():
    g = AssocGraph()
    before = _state(g)
    with pytest.raises(ValueError, match="edge weight must be finite"):
        g.add_star("ep_1", "episodic", ["cue::a"], "cue", "has_cue", "cue_of", float("nan"))
    assert _state(g) == before
