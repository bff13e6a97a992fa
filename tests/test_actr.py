"""ACT-R equations against published test vectors (ACTRModels.jl Memory_Tests.jl, Lisp ACT-R trace)."""

import math

import numpy as np
import pytest

from world.actr import (
    ActRRecord,
    base_level,
    failure_latency,
    hybrid_base_level,
    hybrid_base_level_batch,
    optimized_learning,
    retrieval_latency,
    retrieval_probability,
)


@pytest.mark.parametrize(
    "lags, d, expected",
    [([2, 10], 0.5, 0.023066), ([0.5, 10], 0.4, 0.540936), ([1], 0.5, 0.0), ([2], 0.5, -0.346573), ([5], 0.5, -0.80471)],
)
def test_base_level_vectors(lags, d, expected):
    # vectors are published to 5-6 decimals (truncated): compare at 1e-5
    assert base_level(lags, d) == pytest.approx(expected, abs=1e-5)


def test_retrieval_probability_vector():
    assert float(retrieval_probability(0.5, tau=0.0, s=0.25)) == pytest.approx(0.880797, abs=5e-7)
    assert float(retrieval_probability(1.5, tau=1.0, s=0.25)) == pytest.approx(0.880797, abs=5e-7)


def test_latency():
    assert float(retrieval_latency(0.0, 0.3)) == pytest.approx(0.3)
    assert float(retrieval_latency(1.0, 1.0)) == pytest.approx(math.exp(-1.0))
    assert failure_latency(tau=-1.0, latency_factor=2.0) == pytest.approx(2.0 * math.e)


LISP = dict(created=45.185, last=1265.185, now=1590.185, n=11)


def test_lisp_hybrid_k1():
    now, created, last = LISP["now"], LISP["created"], LISP["last"]
    b = hybrid_base_level([now - last], n=11, life=now - created, d=0.5, k=1)
    assert b == pytest.approx(-0.905594, abs=5e-7)
    vec = hybrid_base_level_batch(now, np.array([created]), np.array([11]), np.array([[last]]), d=0.5)
    assert vec[0] == pytest.approx(-0.905594, abs=5e-7)


def test_optimized_learning_formula():
    assert optimized_learning(4, 100.0, 0.5) == pytest.approx(math.log(4 / 0.5) - 0.5 * math.log(100.0))


def test_hybrid_exact_when_n_le_k():
    lags = [3.0, 7.0, 20.0]
    assert hybrid_base_level(lags, n=3, life=20.0, d=0.5, k=5) == pytest.approx(base_level(lags))
    now = 30.0
    times = now - np.array(lags)
    recent = np.full((1, 5), np.nan)
    recent[0, :3] = np.sort(times)
    got = hybrid_base_level_batch(now, np.array([10.0]), np.array([3]), recent)
    assert got[0] == pytest.approx(base_level(lags), abs=1e-12)


def test_hybrid_approximates_many_presentations():
    # 50 evenly spaced presentations: the hybrid with k=8 is close to the exact sum.
    times = np.linspace(0.0, 490.0, 50)
    now = 500.0
    exact = base_level(list(now - times))
    approx = hybrid_base_level(list(now - times[-8:]), n=50, life=now - times[0], k=8)
    assert approx == pytest.approx(exact, abs=0.02)
    assert approx != exact


def test_batch_matches_scalar_on_random_rows():
    rng = np.random.default_rng(0)
    k = 4
    rows, created, ns, expected = [], [], [], []
    now = 1000.0
    for _ in range(30):
        n = int(rng.integers(1, 12))
        c = float(rng.uniform(0, 500))
        times = np.sort(np.concatenate([[c], rng.uniform(c + 1, 999, n - 1)]))
        kept = times[-k:]
        row = np.full(k, np.nan)
        row[: len(kept)] = kept
        rows.append(row)
        created.append(c)
        ns.append(n)
        expected.append(hybrid_base_level(list(now - kept), n=n, life=now - c, k=k))
    got = hybrid_base_level_batch(now, np.array(created), np.array(ns), np.array(rows))
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


def test_creation_counts_after_retrieval():
    # seed bug: once retrieved, the creation presentation was ignored
    rec = ActRRecord(created_step=0, k=8)
    rec.bump(10)
    assert rec.n == 2
    assert rec.activation(20) == pytest.approx(base_level([20, 10]))


def test_record_keeps_k_most_recent():
    rec = ActRRecord(created_step=0, k=2)
    for t in (5, 9, 12):
        rec.bump(t)
    assert rec.n == 4 and rec.recent == [9.0, 12.0]
    assert rec.activation(20) == pytest.approx(hybrid_base_level([11, 8], n=4, life=20, k=2))


def test_record_keeps_the_latest_presentations_whatever_the_order_they_come_in():
    # seed 001's ActRRecord(retrievals=[...]) replays its list as given: the last k *recorded* times were
    # kept ([1, 2] of [10, 1, 2]), so the same presentations gave another activation in another order
    shuffled = ActRRecord([10, 1, 2], created_step=0, k=2)
    ordered = ActRRecord([1, 2, 10], created_step=0, k=2)
    assert shuffled == ordered and shuffled.recent == [2.0, 10.0] and shuffled.n == 4
    assert shuffled.activation(20) == ordered.activation(20)
    assert shuffled.activation(20) == pytest.approx(hybrid_base_level([18, 10], n=4, life=20, k=2), abs=1e-12)
    late = ActRRecord([7, 3], created_step=0, k=2)
    late.bump(1)  # older than both kept times: folded into the tail at once
    assert (late.n, late.recent) == (4, [3.0, 7.0])
    # with n <= k every time is kept, creation first; a snapshot's times are put in order as well
    whole = ActRRecord([10, 1, 2], created_step=0, k=8)
    assert whole.recent == [0.0, 1.0, 2.0, 10.0] and whole.retrievals == (1.0, 2.0, 10.0)
    assert whole.activation(20) == pytest.approx(base_level([20, 19, 18, 10]), abs=1e-12)
    assert ActRRecord(created_step=0, k=8, n=3, recent=[5, 0, 2]).recent == [0.0, 2.0, 5.0]


def test_bad_input_is_rejected():
    with pytest.raises(ValueError, match="decay"):
        base_level([1.0], d=1.5)
    with pytest.raises(ValueError, match="lags"):
        base_level([])
    with pytest.raises(ValueError):
        base_level([0.0])
    with pytest.raises(ValueError, match="s must be"):
        retrieval_probability(0.0, s=0.0)


def test_equal_life_and_tk_uses_limit():
    # all presentations at creation: L == t_k, the fraction is L^-d
    got = hybrid_base_level([4.0], n=3, life=4.0, k=1)
    assert got == pytest.approx(math.log(3 * 4.0 ** -0.5))


def test_batch_fast_path_is_bit_identical():
    rng = np.random.default_rng(3)
    m, k = 1000, 4
    created = rng.uniform(0, 100, m)
    n = np.ones(m, dtype=np.int64)
    recent = np.full((m, k), -np.inf)
    recent[:, 0] = created
    for i in rng.choice(m, 50, replace=False):  # a few retrieved memories, some beyond k
        times = np.sort(rng.uniform(created[i] + 1, 400, int(rng.integers(1, 9))))
        n[i] = 1 + len(times)
        kept = np.concatenate([[created[i]], times])[-k:]
        recent[i, : len(kept)] = kept
    for d in (0.5, 0.3):
        fast = hybrid_base_level_batch(500.0, created, n, recent, d=d, assume_no_nan=True)
        rows = [hybrid_base_level_batch(500.0, created[i:i + 1], n[i:i + 1], recent[i:i + 1], d=d)[0] for i in range(m)]
        assert fast.tobytes() == np.array(rows).tobytes()


def test_actr_record_takes_seed_001s_constructor():
    """Seed 001: ActRRecord(retrievals, created_step, decay_rate); the retrievals are presentations
    after creation (creation still counts). Appending to .retrievals was silently lost: it is a tuple."""
    from world.actr import ActRRecord

    seed_style = ActRRecord([5, 7], 0, 0.5)
    bumped = ActRRecord(created_step=0)
    bumped.bump(5)
    bumped.bump(7)
    assert seed_style == bumped and seed_style.n == 3 and seed_style.retrievals == (5.0, 7.0)
    assert seed_style.activation(10) == bumped.activation(10) > ActRRecord(created_step=0).activation(10)
    with pytest.raises(AttributeError):
        seed_style.retrievals.append(9)


@pytest.mark.parametrize("kwargs, field", [
    ({"decay_rate": 1.0}, "decay"), ({"decay_rate": -0.5}, "decay"), ({"k": 0}, "k"), ({"k": -1}, "k"),
    ({"k": 2.5}, "k"), ({"created_step": float("nan")}, "created_step"),
    ({"n": 0, "recent": []}, "n"), ({"n": 1, "recent": [1.0, 2.0]}, "recent"),
])
def test_actr_record_refuses_bad_fields(kwargs, field):
    from world.actr import ActRRecord

    with pytest.raises(ValueError, match=field):
        ActRRecord(**kwargs)


@pytest.mark.parametrize("lags, n, life, k, field", [
    ([4.0], 0, 4.0, None, "n must be"),              # no presentation at all
    ([2.0, 5.0, 9.0], 1, 9.0, None, "min\\(n, k\\)"),  # three lags for one presentation
    ([4.0], 3, 2.0, 1, "life"),                      # a lag older than creation
    ([float("inf")], 1, 4.0, None, "finite"),
])
def test_hybrid_base_level_refuses_inconsistent_input(lags, n, life, k, field):
    from world.actr import hybrid_base_level

    with pytest.raises(ValueError, match=field):
        hybrid_base_level(lags, n=n, life=life, k=k)


def test_retrieval_probability_refuses_non_finite_parameters():
    from world.actr import retrieval_probability

    for bad in ({"s": float("nan")}, {"s": float("inf")}, {"tau": float("nan")}):
        with pytest.raises(ValueError, match="s must|tau must"):
            retrieval_probability(0.5, **bad)


def test_actr_record_stays_a_dataclass_and_names_a_bad_first_argument():
    import dataclasses

    from world.actr import ActRRecord

    r = ActRRecord(created_step=2)
    r.bump(5)
    assert dataclasses.asdict(r) == {"created_step": 2, "decay_rate": 0.5, "k": 8, "n": 2, "recent": [2.0, 5.0]}
    with pytest.raises(ValueError, match="retrievals must be a sequence"):
        ActRRecord(5)


def test_retrieval_probability_takes_arrays():
    from world.actr import retrieval_probability

    p = retrieval_probability(np.array([0.1, 0.2]), tau=np.array([0.0, 0.1]), s=np.array([0.25, 0.25]))
    assert p[0] == p[1] and 0.5 < p[0] < 1.0
    with pytest.raises(ValueError, match="tau must"):
        retrieval_probability(np.array([0.1, 0.2]), tau=np.array([0.0, np.nan]))


@pytest.mark.parametrize("call, field", [
    (lambda: base_level([float("nan")]), "lags"),
    (lambda: base_level([float("inf")]), "lags"),
    (lambda: optimized_learning(2, float("nan")), "life"),
    (lambda: optimized_learning(2, float("inf")), "life"),
    (lambda: optimized_learning(2.5, 10.0), "n must be an integer"),
    (lambda: hybrid_base_level([1.0, 2.0], 3.5, 10.0, k=2), "n must be an integer"),
    (lambda: hybrid_base_level([1.0, 2.0], 3, 10.0, k=2.0), "k must be an integer"),
    (lambda: hybrid_base_level_batch(10.0, np.array([0.0]), np.array([3]), np.array([[5.0, 8.0]]), d=1.0), "decay d"),
    (lambda: hybrid_base_level_batch(10.0, np.array([0.0]), np.array([3]), np.array([[5.0, 8.0]]), d=0.0), "decay d"),
    (lambda: ActRRecord(created_step=0).activation(float("nan")), "current_step"),
    (lambda: retrieval_latency(0.0, -1.0), "latency factor"),
    (lambda: failure_latency(0.0, -2.0), "latency factor"),
    (lambda: failure_latency(float("nan")), "tau"),
])
def test_public_functions_refuse_non_finite_or_out_of_domain_input(call, field):
    with pytest.raises(ValueError, match=field):
        call()


def test_a_presentation_before_creation_is_refused():
    rec = ActRRecord(created_step=10, k=1)
    with pytest.raises(ValueError, match="before the record's creation"):
        rec.bump(2)
    assert rec.n == 1 and rec.recent == [10.0]  # nothing recorded


def test_extreme_activations_give_limits_without_warnings():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert float(retrieval_probability(-1000.0)) == 0.0
        assert failure_latency(-1000.0) == math.inf
        assert float(retrieval_latency(-1000.0)) == math.inf


@pytest.mark.parametrize("m", [10, 300])
def test_batch_padding_may_sit_anywhere_in_a_row(m):
    # the fast path for > 256 rows read a single presentation from column 0 only: padding first
    # gave -inf activations there and finite ones below 257 rows
    created = np.arange(m, dtype=float)
    n = np.ones(m, dtype=np.int64)
    right = np.full((m, 2), -np.inf)
    right[:, 1] = created
    left = np.full((m, 2), -np.inf)
    left[:, 0] = created
    for flag in (False, True):
        a = hybrid_base_level_batch(1000.0, created, n, right.copy(), assume_no_nan=flag)
        b = hybrid_base_level_batch(1000.0, created, n, left.copy(), assume_no_nan=flag)
        assert np.isfinite(a).all()
        assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("now, d", [(100.0, 0.5), (np.float64(100.0), 0.5), (100.0, 0.3)])
def test_batch_tail_never_sees_an_oldest_kept_lag_longer_than_the_life(now, d):
    # a row whose kept presentations precede its creation (a file of a release whose writes did not move
    # the store's clock): the tail was evaluated with t_k > L, off the equation (0.102 here, whichever
    # the route: Python floats, numpy for another number type, numpy for another d). Each folded
    # presentation now counts as old as the memory, the L == t_k limit: B = ln((8 + 3) * 100^-d)
    got = hybrid_base_level_batch(now, np.array([5.0]), np.array([11]), np.zeros((1, 8)), d=d)
    assert got[0] == pytest.approx(math.log(11 * 100.0 ** -d), abs=1e-12)
    # beside a row of the usual kind (its value the scalar equation's), each row as it is alone
    created, n = np.array([5.0, 0.0]), np.array([11, 12])
    rows = np.vstack([np.zeros(8), np.arange(30.0, 38.0)])
    together = hybrid_base_level_batch(now, created, n, rows, d=d)
    alone = hybrid_base_level_batch(now, created[1:], n[1:], rows[1:], d=d)
    assert together.tobytes() == np.array([got[0], alone[0]]).tobytes()
    assert alone[0] == pytest.approx(hybrid_base_level(list(100.0 - rows[1]), n=12, life=100.0, d=d, k=8), abs=1e-12)
