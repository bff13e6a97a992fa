"""The power iteration's batches are sized by the convergence rate seen; a stopping threshold that can
never be met (tol <= 0 or NaN) must still run to max_iter and fall back, as the plain loop does."""

import math

import numpy as np
import pytest

from world.ppr import PPRConvergenceError, _next_batch, personalized_pagerank, transition_matrix


@pytest.mark.parametrize("max_iter", [0, 1, 3])
def test_a_threshold_not_met_falls_back_after_max_iter(max_iter):
    """(A tol that can never be met, 0, negative or NaN, is refused up front now: tests/test_ppr.py.)"""
    tm = transition_matrix(np.array([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))
    p = np.array([1.0, 0.0, 0.0])
    x, method = personalized_pagerank(tm, p, tol=1e-15, max_iter=max_iter)
    assert method == "solve"
    assert np.array_equal(x, personalized_pagerank(tm, p, tol=1e-15, max_iter=1)[0])
    np.testing.assert_allclose(x, personalized_pagerank(tm, p, tol=1e-12, max_iter=1000)[0], atol=1e-10)
    with pytest.raises(PPRConvergenceError):
        personalized_pagerank(tm, p, tol=1e-15, max_iter=max_iter, fallback="raise")


def test_next_batch_predicts_from_the_rate_and_falls_back_without_one():
    steps = [0.5 ** i for i in range(8)]  # rate 1/2: from 2^-7 down to 2^-17 takes 10 more
    assert _next_batch(steps, 2.0 ** -17 * 1.5) == 10
    assert _next_batch(steps, 1e-300) == 64  # capped
    assert _next_batch([1.0, 1.0, 1.0, 1.0], 1e-6) == 8  # not shrinking
    assert _next_batch([1.0], 1e-6) == 8  # too few steps
    assert _next_batch(steps, 0.0) == 8 and _next_batch(steps, math.nan) == 8


def test_first_batch_is_the_contraction_bound():
    from world.ppr import _PPR_BATCH_CAP, _first_batch

    for alpha, stop in ((0.85, 5e-5), (0.5, 1e-6), (0.85, 1e-3), (0.99, 1e-2)):
        k = _first_batch(alpha, stop)
        assert 2 * alpha ** (k - 1) < stop or k == _PPR_BATCH_CAP  # passed in exact arithmetic
        assert k == 1 or 2 * alpha ** (k - 2) >= stop or k == _PPR_BATCH_CAP  # and not before
    assert _first_batch(0.85, 1e-300) == _PPR_BATCH_CAP
    assert _first_batch(0.85, 2.0) == 1 and _first_batch(0.85, math.inf) == 1
    assert _first_batch(0.85, 0.0) == _PPR_BATCH_CAP and _first_batch(0.85, math.nan) == _PPR_BATCH_CAP


@pytest.mark.parametrize("max_iter", [1, 5, 40, 100])
def test_seeded_pagerank_is_personalized_pagerank_of_the_seeds_indicator(max_iter):
    """_seeded_pagerank (the graph's route) gives personalized_pagerank's scores for the 0/1 vector of
    its seed rows, bit for bit, with and without dangling nodes and for any number of seeds."""
    from world.ppr import _seeded_pagerank, transition_from_edges

    rng = np.random.default_rng(11)
    for trial in range(30):
        n = int(rng.integers(2, 80))
        m = int(rng.integers(1, 4 * n))
        src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
        pairs = dict.fromkeys(zip(src.tolist(), dst.tolist(), strict=True))
        src, dst = (np.array(x, dtype=np.int64) for x in zip(*pairs, strict=True))
        w = rng.choice([1.0, 0.5, 0.3, 2.7], size=len(src))
        tm = transition_from_edges(n, src, dst, w)
        rows = rng.choice(n, size=int(rng.integers(1, min(n, 7) + 1)), replace=False)
        p = np.zeros(n)
        p[rows] = 1.0
        for fallback in ("solve", "raise"):
            try:
                ref = personalized_pagerank(tm, p, max_iter=max_iter, fallback=fallback)
            except PPRConvergenceError:
                with pytest.raises(PPRConvergenceError):
                    _seeded_pagerank(tm, rows, max_iter=max_iter, fallback=fallback)
                continue
            x, method = _seeded_pagerank(tm, rows, max_iter=max_iter, fallback=fallback)
            assert method == ref[1] and x.tobytes() == ref[0].tobytes(), (trial, fallback)


def test_a_transition_matrix_pickled_without_the_dangling_rows_slot_loads():
    import pickle

    from world.ppr import TransitionMatrix

    tm = transition_matrix(np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))
    state = tm.__reduce_ex__(2)
    slots = dict(state[2][1])
    del slots["_dangling_rows"]  # (as a matrix cached by an older version holds it)
    old = TransitionMatrix.__new__(TransitionMatrix)
    old.__setstate__((None, slots))
    loaded = pickle.loads(pickle.dumps(old))
    p = np.array([1.0, 0.0, 0.0])
    assert personalized_pagerank(loaded, p)[0].tobytes() == personalized_pagerank(tm, p)[0].tobytes()


@pytest.mark.parametrize("scratch_floats", [0, 65 * 40, 1 << 17])
def test_iterate_buffer_reuse_changes_no_result(scratch_floats, monkeypatch):
    """The batched power iteration's per-thread iterate buffer (kept between calls, wider than a small
    graph's n, or not kept at all past _SCRATCH_FLOATS) gives the scores of a fresh buffer in a fresh
    thread, bit for bit, in any call order: with and without dangling nodes, graphs growing and
    shrinking."""
    import threading

    import world.ppr
    from world.ppr import transition_from_edges

    monkeypatch.setattr(world.ppr, "_SCRATCH_FLOATS", scratch_floats)
    rng = np.random.default_rng(17)
    cases = []
    for n in (5, 60, 3, 120, 40, 41, 7, 200, 99):
        m = int(rng.integers(n, 4 * n))
        live = n - n % 2  # (odd n: the last node has no out-edge, it dangles; the others have one at least)
        src = np.concatenate((rng.integers(0, live, m), np.arange(live)))
        dst = np.concatenate((rng.integers(0, n, m), (np.arange(live) + 1) % n))
        pairs = dict.fromkeys(zip(src.tolist(), dst.tolist(), strict=True))
        src, dst = (np.array(x, dtype=np.int64) for x in zip(*pairs, strict=True))
        tm = transition_from_edges(n, src, dst, rng.choice([1.0, 0.5, 0.3], size=len(src)))
        p = np.zeros(n)
        p[rng.integers(0, n, size=2)] = 1.0
        assert tm.dangling.any() == bool(n % 2)
        cases.append((tm, p))

    def fresh(tm, p, out):
        world.ppr._scratch.__dict__.clear()  # (a new thread's local is empty anyway)
        out.append(personalized_pagerank(tm, p)[0])

    for order in (range(len(cases)), reversed(range(len(cases)))):
        for i in order:
            tm, p = cases[i]
            got = personalized_pagerank(tm, p)[0]
            ref: list = []
            t = threading.Thread(target=fresh, args=(tm, p, ref))
            t.start()
            t.join()
            assert got.tobytes() == ref[0].tobytes() and got.shape == (tm.n,), i


def test_out_weights_with_a_negative_weight_take_the_column_ordered_sum():
    """The one-bincount route for out-weights holds only for non-negative weights whose partial sums
    are exact: a negative weight (transition_from_edges is public and does not refuse one) let a
    row's sum differ from the column-ordered sum by 4 units of 2**-10."""
    from world.ppr import transition_from_edges

    u = 2.0 ** -10
    src = np.array([0, 0, 0, 0, 0, 1])
    dst = np.array([5, 1, 2, 3, 4, 0])
    w = np.array([-(2.0 ** 54 + 4) * u, u, u, u, u, 1.0])
    tm = transition_from_edges(6, src, dst, w)
    row0 = 0.0
    for j in np.argsort(dst[:5], kind="stable"):  # (row 0's entries in column order)
        row0 += w[j]
    inv = 1.0 / row0
    expected = {int(d): float(inv * wt) for d, wt in zip(dst[:5], w[:5])}
    pt = tm.pt.toarray()
    for d, value in expected.items():
        assert pt[d, 0] == value
