"""The power iteration's batches are sized by the convergence rate seen; a stopping threshold that can
never be met (tol <= 0 or NaN) must still run to max_iter and fall back, as the plain loop does."""

import math

import numpy as np
import pytest

from world.ppr import PPRConvergenceError, _next_batch, personalized_pagerank, transition_matrix


@pytest.mark.parametrize("tol", [0.0, -1.0, math.nan])
def test_a_threshold_never_met_falls_back_after_max_iter(tol):
    tm = transition_matrix(np.array([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))
    p = np.array([1.0, 0.0, 0.0])
    x, method = personalized_pagerank(tm, p, tol=tol)
    assert method == "solve"
    assert np.array_equal(x, personalized_pagerank(tm, p, tol=0.0)[0])
    with pytest.raises(PPRConvergenceError):
        personalized_pagerank(tm, p, tol=tol, fallback="raise")


def test_next_batch_predicts_from_the_rate_and_falls_back_without_one():
    steps = [0.5 ** i for i in range(8)]  # rate 1/2: from 2^-7 down to 2^-17 takes 10 more
    assert _next_batch(steps, 2.0 ** -17 * 1.5) == 10
    assert _next_batch(steps, 1e-300) == 64  # capped
    assert _next_batch([1.0, 1.0, 1.0, 1.0], 1e-6) == 8  # not shrinking
    assert _next_batch([1.0], 1e-6) == 8  # too few steps
    assert _next_batch(steps, 0.0) == 8 and _next_batch(steps, math.nan) == 8
