"""The env's fast paths give exactly what the plain computations they replace give (bit for bit),
so that speed work never changes a seeded trajectory."""

from __future__ import annotations

import numpy as np
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
