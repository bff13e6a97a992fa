"""PPR on the cached CSR matrix agrees with networkx.pagerank; convergence failures are never silent."""

import networkx as nx
import numpy as np
import pytest

from world.graph import AssocGraph
from world.ppr import PPRConvergenceError, personalized_pagerank, transition_matrix


def _random_graphs(seed, n=50, m=180, dangling=5):
    rng = np.random.default_rng(seed)
    g, G = AssocGraph(), nx.DiGraph()
    for i in range(n):
        g.add_node(f"n{i:03d}", "x")
        G.add_node(f"n{i:03d}")
    for _ in range(m):
        a, b = (int(v) for v in rng.integers(0, n - dangling, 2))  # the last nodes stay dangling...
        w = float(rng.uniform(0.1, 2.0))
        g.add_edge(f"n{a:03d}", f"n{b:03d}", "r", w)
        G.add_edge(f"n{a:03d}", f"n{b:03d}", weight=w)
    for j in range(n - dangling, n):  # ...but receive edges
        g.add_edge("n000", f"n{j:03d}", "r", 1.0)
        G.add_edge("n000", f"n{j:03d}", weight=1.0)
    return g, G


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("alpha", [0.5, 0.85])
def test_agrees_with_networkx(seed, alpha):
    g, G = _random_graphs(seed)
    seeds = ["n001", "n007", "n049"]
    x, pos, method = g.ppr(seeds, alpha=alpha, tol=1e-10, max_iter=1000)
    ref = nx.pagerank(G, alpha=alpha, personalization={s: 1.0 for s in seeds}, tol=1e-10, max_iter=1000)
    assert method == "power"
    diff = max(abs(x[pos[g.index(n)]] - ref[n]) for n in G)
    assert diff < 1e-6
    assert x.sum() == pytest.approx(1.0)


def test_same_default_tolerance_as_networkx():
    g, G = _random_graphs(5)
    x, pos, _ = g.ppr(["n002"], alpha=0.85, tol=1e-6, max_iter=100)
    ref = nx.pagerank(G, alpha=0.85, personalization={"n002": 1.0}, tol=1e-6, max_iter=100)
    assert max(abs(x[pos[g.index(n)]] - ref[n]) for n in G) < 1e-6


def test_cache_updates_when_graph_changes():
    g, G = _random_graphs(3)
    g.ppr(["n001"])
    v = g.version
    g.add_edge("n001", "n002", "r", 5.0)
    G.add_edge("n001", "n002", weight=5.0)
    g.remove_node("n010")
    G.remove_node("n010")
    assert g.version > v
    x, pos, _ = g.ppr(["n001"], tol=1e-10, max_iter=1000)
    ref = nx.pagerank(G, personalization={"n001": 1.0}, tol=1e-10, max_iter=1000)
    assert set(g.nodes()) == set(G.nodes())
    assert max(abs(x[pos[g.index(n)]] - ref[n]) for n in G) < 1e-6


def test_insertion_order_does_not_change_bits():
    g1, _ = _random_graphs(4)
    g2 = AssocGraph()
    for name in reversed(g1.nodes()):
        g2.add_node(name, "x")
    for src, dst, rel, w in reversed(list(g1.edges())):
        g2.add_edge(src, dst, rel, w)
    x1, p1, _ = g1.ppr(["n003", "n004"])
    x2, p2, _ = g2.ppr(["n004", "n003"])
    for n in g1.nodes():
        assert x1[p1[g1.index(n)]] == x2[p2[g2.index(n)]]


def test_non_convergence_falls_back_to_exact_solve():
    g, G = _random_graphs(1)
    x, pos, method = g.ppr(["n001"], max_iter=2, tol=1e-12)
    assert method == "solve"
    ref = nx.pagerank(G, personalization={"n001": 1.0}, tol=1e-12, max_iter=2000)
    assert max(abs(x[pos[g.index(n)]] - ref[n]) for n in G) < 1e-9


def test_non_convergence_can_raise():
    g, _ = _random_graphs(1)
    with pytest.raises(PPRConvergenceError, match="did not converge"):
        g.ppr(["n001"], max_iter=2, tol=1e-12, fallback="raise")


def test_bad_input():
    g, _ = _random_graphs(0)
    with pytest.raises(ValueError, match="seed"):
        g.ppr(["nope"])
    tm = transition_matrix(np.eye(3))
    with pytest.raises(ValueError, match="personalization"):
        personalized_pagerank(tm, np.zeros(3))
    with pytest.raises(ValueError, match="alpha"):
        personalized_pagerank(tm, np.ones(3), alpha=1.0)


def test_all_dangling_graph():
    tm = transition_matrix(np.zeros((4, 4)))
    x, method = personalized_pagerank(tm, np.array([1.0, 0, 0, 0]))
    np.testing.assert_allclose(x, [1.0, 0, 0, 0], atol=1e-9)


@pytest.mark.parametrize("bad", [100.0, 12.5, np.float64(50), "100", -1, True, None])
def test_max_iter_must_be_an_integer_whatever_the_graph(bad):
    """A float max_iter was accepted or refused depending on when the batched power iteration
    converged; every non-integer (and a negative one) is now refused up front, naming the field."""
    tm = transition_matrix(np.eye(3))
    with pytest.raises(ValueError, match=r"max_iter must be an integer >= 0"):
        personalized_pagerank(tm, np.ones(3), max_iter=bad)
    assert personalized_pagerank(tm, np.ones(3), max_iter=np.int64(100))[1] == "power"


@pytest.mark.parametrize("bad", [np.inf, np.nan])
def test_non_finite_personalization_is_refused(bad):
    g = nx.DiGraph([(0, 1), (1, 2)])
    tm = transition_matrix(nx.to_scipy_sparse_array(g, nodelist=[0, 1, 2]))
    with pytest.raises(ValueError, match="finite"):
        personalized_pagerank(tm, np.array([bad, 1.0, 0.0]))


@pytest.mark.parametrize("weight", [float("nan"), float("inf"), -1.0])
def test_edge_weights_must_be_finite_and_non_negative(weight):
    g = AssocGraph()
    for node in "abc":
        g.add_node(node, "x")
    g.add_edge("a", "b", "rel")
    with pytest.raises(ValueError, match="edge weight"):
        g.add_edge("b", "c", "rel", weight)
    assert g.number_of_edges() == 1  # nothing half-added
    scores, _, _ = g.ppr(["a"])
    assert np.isfinite(scores).all() and (scores >= 0).all()


@pytest.mark.parametrize("seed", [0, 1])
def test_graph_ppr_is_the_seed_indicators_pagerank_with_repeated_and_unknown_seeds(seed):
    """AssocGraph.ppr (_seeded_pagerank on the seeds' rows) scores as personalized_pagerank of the 0/1
    vector of its distinct known seeds, bit for bit: a repeated seed counts once, an unknown one not at
    all; its parameter errors are personalized_pagerank's."""
    g, _ = _random_graphs(seed)
    tm, pos = g.transition()
    for seeds in (["n003"], ["n003", "n003", "n010"], ["n010", "nope", "n003", "n049", "n010"]):
        p = np.zeros(tm.n)
        p[[pos[g.index(s)] for s in seeds if s in g]] = 1.0
        x, got_pos, method = g.ppr(seeds)
        ref, ref_method = personalized_pagerank(tm, p)
        assert x.tobytes() == ref.tobytes() and method == ref_method and got_pos is pos
    with pytest.raises(ValueError, match=r"max_iter must be an integer >= 0"):
        g.ppr(["n003"], max_iter=1.5)
    with pytest.raises(ValueError, match=r"alpha must be in \(0, 1\)"):
        g.ppr(["n003"], alpha=1.0)
    with pytest.raises(ValueError, match=r"fallback must be"):
        g.ppr(["n003"], fallback="nope")


@pytest.mark.parametrize("bad", [np.inf, np.nan, 0.0, -1.0, -np.inf, "1e-6", None, True])
def test_tol_must_be_a_finite_number_above_zero(bad):
    """tol=inf stopped after one iteration and returned a wrong vector labelled "power"; NaN, 0 and
    a negative tol never converged (fell back or raised PPRConvergenceError naming no parameter)."""
    g, _ = _random_graphs(0)
    tm, _ = g.transition()
    p = np.zeros(tm.n)
    p[0] = 1.0
    with pytest.raises(ValueError, match=r"tol must be a finite number > 0, got "):
        personalized_pagerank(tm, p, tol=bad, fallback="raise")
    with pytest.raises(ValueError, match=r"tol must be a finite number > 0"):
        g.ppr(["n003"], tol=bad)
    x, method = personalized_pagerank(tm, p, tol=np.float32(1e-6))  # numpy numbers are fine
    assert method == "power" and x.tobytes() == personalized_pagerank(tm, p, tol=1e-6)[0].tobytes()
    assert personalized_pagerank(tm, p, tol=1)[1] == "power"


def _ppr_of(edges, seed):
    g = AssocGraph()
    for u, v, _ in edges:
        for name in (u, v):
            if name not in g:
                g.add_node(name, "x")
    for u, v, w in edges:
        g.add_edge(u, v, "r", w)
    x, pos, method = g.ppr([seed], tol=1e-12, max_iter=1000)
    return np.array([x[pos[g.index(name)]] for name in sorted(g.nodes())]), method


@pytest.mark.parametrize("extreme, scaled", [
    # out-weights summing past the float range: 1 / inf = 0 left the row's mass out (the scores summed to 0.15)
    ([("a", "b", 1e308), ("a", "c", 1e308), ("b", "a", 1.0), ("c", "a", 1.0)],
     [("a", "b", 1.0), ("a", "c", 1.0), ("b", "a", 1.0), ("c", "a", 1.0)]),
    # a subnormal sole out-weight: 1 / 5e-324 = inf made the entry inf (b took all the mass)
    ([("a", "b", 5e-324), ("b", "a", 1.0)], [("a", "b", 1.0), ("b", "a", 1.0)]),
    # subnormal weights summing to a subnormal out-weight, beside an ordinary row
    ([("a", "b", 5e-324), ("a", "c", 1e-323), ("b", "a", 2.0), ("c", "b", 1.0)],
     [("a", "b", 0.5), ("a", "c", 1.0), ("b", "a", 2.0), ("c", "b", 1.0)]),
])
def test_extreme_finite_weights_give_the_pagerank_of_their_proportions(extreme, scaled):
    got, method = _ppr_of(extreme, "a")
    want, _ = _ppr_of(scaled, "a")
    assert method == "power" and got.tobytes() == want.tobytes()  # the same matrix, bit for bit
    assert got.sum() == pytest.approx(1.0, abs=1e-12)


def test_out_weights_near_the_float_range_agree_with_networkx():
    # a row summing above 2**1022 has a subnormal inverse (a few bits lost): normalised like the above
    edges = [("a", "b", 1e308), ("a", "c", 1e307), ("a", "d", 1.0), ("b", "c", 3.0), ("c", "a", 1.0), ("d", "a", 1.0)]
    got, _ = _ppr_of(edges, "a")
    G = nx.DiGraph()
    for u, v, w in edges:
        G.add_edge(u, v, weight=w / 1e308 if u == "a" else w)  # (networkx's 1 / out_w of row a is 0 here)
    ref = nx.pagerank(G, personalization={"a": 1.0}, tol=1e-12, max_iter=1000)
    np.testing.assert_allclose(got, [ref[n] for n in sorted(G)], rtol=0, atol=1e-9)
