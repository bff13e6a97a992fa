"""Personalized PageRank by power iteration on a scipy CSR matrix: the only place PPR lives.

Semantics are those of `networkx.pagerank` (networkx 3.x, `_pagerank_scipy`), so that results agree
to 1e-6 on the same graph and personalisation (Page et al. 1999; Haveliwala 2002 for the
personalised form):

* weights: each node's out-edge weights are divided by its total out-weight (row-stochastic);
* dangling nodes (out-weight 0) hand their mass back according to the personalisation vector;
* x0 uniform 1/N; iterate x <- alpha (x P + (x . dangling) p) + (1 - alpha) p;
* stop when ||x - x_prev||_1 < N * tol.

A power iteration that does not converge within `max_iter` never silently returns nothing: with
`fallback="solve"` (default) the exact fixed point is computed by a sparse linear solve,
y (I - alpha P) = p, x = y / sum(y) (valid because sum(x) = 1 is preserved); with
`fallback="raise"` a `PPRConvergenceError` is raised.
"""

from __future__ import annotations

import math
import threading

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

try:  # scipy's own CSR mat-vec kernel, called without the sparse-array dispatch overhead (~30 us a call)
    from scipy.sparse._sparsetools import csr_matvec as _csr_matvec
except ImportError:  # pragma: no cover
    _csr_matvec = None

__all__ = ["PPRConvergenceError", "TransitionMatrix", "transition_from_edges", "transition_matrix",
           "personalized_pagerank"]


#: Power iterations in the first stopping-test batch (see :func:`_power_batched`; later batches are
#: sized by the convergence rate seen). Batching saves per-call overhead, which only small graphs
#: notice: above ``_PPR_BATCH_MAX_NNZ`` edges an iteration costs more than the overhead saved, and the
#: wasted ones dominate (a 100k-memory store's query: 51 -> 57 ms p50 with batches of 8), so large
#: graphs test after every iteration.
_PPR_BATCH = 8
_PPR_BATCH_MAX_NNZ = 16_384
#: The longest batch (see :func:`_power_batched`): bounds the iterates held at once.
_PPR_BATCH_CAP = 64
#: Up to this many edges the first batch is the contraction bound of :func:`_first_batch` (a Life
#: store's PPR then takes one batch, a few iterations past convergence thrown away, instead of ~3);
#: above it an iteration costs more than a batch's overhead, and the first batch is ``_PPR_BATCH``.
_PPR_BOUND_MAX_NNZ = 1024


class PPRConvergenceError(RuntimeError):
    """Power iteration did not converge within max_iter and no fallback was allowed."""


class TransitionMatrix:
    """Row-stochastic transition matrix P, stored transposed as CSR arrays for a fast x P = P^T x.

    ``indptr`` / ``indices`` / ``data`` are the CSR arrays of P^T (rows = edge targets, column
    indices sorted); ``pt`` wraps them in a scipy matrix only when asked for (the solve fallback):
    building scipy objects costs far more than the power iteration on a small store.
    """

    __slots__ = ("indptr", "indices", "data", "dangling", "n", "_pt", "_scaled", "_dangling_rows")

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, dangling: np.ndarray, n: int):
        self.indptr = indptr
        self.indices = indices
        self.data = data
        self.dangling = dangling  # bool (n,)
        self.n = n
        self._pt: sp.csr_matrix | None = None
        self._scaled: tuple[float, np.ndarray] | None = None  # (alpha, alpha * data)
        self._dangling_rows: np.ndarray | None = None

    def __setstate__(self, state: tuple[dict | None, dict]) -> None:
        # (the slots' state; a matrix pickled inside a graph's cache before a cache slot existed
        # gets that slot empty)
        self._dangling_rows = None
        for name, value in state[1].items():
            setattr(self, name, value)

    @property
    def pt(self) -> sp.csr_matrix:
        """P transposed as a scipy CSR matrix (built on first use)."""
        if self._pt is None:
            self._pt = sp.csr_matrix((self.data, self.indices, self.indptr), shape=(self.n, self.n))
        return self._pt

    def scaled_data(self, alpha: float) -> np.ndarray:
        cached = self._scaled
        if cached is None or cached[0] != alpha:
            cached = self._scaled = (alpha, alpha * self.data)
        return cached[1]

    def dangling_rows(self) -> np.ndarray:
        """The rows of the dangling nodes, ascending (``dangling.nonzero()[0]``, found once per matrix)."""
        rows = self._dangling_rows
        if rows is None:
            rows = self._dangling_rows = self.dangling.nonzero()[0]
        return rows


def transition_from_edges(n: int, src: np.ndarray, dst: np.ndarray, weight: np.ndarray) -> TransitionMatrix:
    """The transition matrix of a graph on nodes 0..n-1 given as edge arrays (at most one edge per
    ordered pair), built with a few numpy calls.

    Bit-identical to the scipy route of :func:`transition_matrix` (row sums by ``np.add.reduceat``
    over each row's weights in column order, as scipy's CSR ``sum(axis=1)`` does; each entry
    ``w / out_w`` computed as ``inv(out_w) * w``; entries that come out 0 dropped, as scipy's
    sparse product does), so scores do not depend on which route built the matrix.

    A row whose out-weight has no normal inverse, summing past 2**1022 (two weights of 1e308 sum to
    inf) or below the normal floats (a sole weight of 5e-324), is normalised after dividing its
    weights by the row's largest: ``1 / out_w`` was 0 there (the row's mass vanished: the scores
    summed to 0.15) or inf (``inf * w``: a node took all the mass). ``networkx.pagerank`` gets these
    rows wrong too (a dangling node; no convergence): here they get their exact proportions. Other
    rows, and every row of the store's graphs (weights 1.0 and 0.5), are computed as before, bit for bit.
    """
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    weight = np.asarray(weight, dtype=np.float64)
    m = len(src)
    # (ndarray methods and in-place ufuncs below: np.argsort, np.cumsum and ndarray.all add a Python
    # wrapper per call, which a small store's rebuild notices)
    if _sums_exact(weight):
        # every partial sum is exact, so each row's sum is the same whatever the order: one bincount
        # (and a normal float or 0: whole multiples of 2**-10 below 2**53 of them)
        out_w = np.bincount(src, weights=weight, minlength=n)
    else:
        # out-weights: each row's entries in column order (the order of the CSR of the adjacency)
        key = src * n
        key += dst
        order = key.argsort(kind="stable")
        row_counts = np.bincount(src, minlength=n)
        nonempty = row_counts.nonzero()[0]
        starts = row_counts.cumsum()
        starts -= row_counts  # each row's first entry
        starts = starts[nonempty]
        out_w = np.zeros(n, dtype=np.float64)
        if len(nonempty):
            with np.errstate(over="ignore"):  # (a sum past the float range is inf: handled below)
                out_w[nonempty] = np.add.reduceat(weight[order], starts)
        extreme = (out_w > _MAX_OUT_WEIGHT) | ((out_w < _MIN_NORMAL) & (out_w > 0.0))
        if extreme.any():  # (the rare path: rows normalised after dividing by their largest weight)
            row_max = np.zeros(n, dtype=np.float64)
            if len(nonempty):
                row_max[nonempty] = np.maximum.reduceat(weight[order], starts)
            rows = extreme[src]
            weight = weight.copy()
            weight[rows] /= row_max[src[rows]]  # (in [0, 1], the largest exactly 1: the sum is in [1, m])
            out_w[nonempty] = np.add.reduceat(weight[order], starts)
    inv = np.zeros(n, dtype=np.float64)
    nz = out_w != 0  # (a row of zero weights sums to +0.0 or -0.0 by either route: both are 0 here)
    np.divide(1.0, out_w, out=inv, where=nz)
    vals = inv[src]
    vals *= weight
    if np.count_nonzero(vals) < m:
        keep = vals != 0
        src, dst, vals = src[keep], dst[keep], vals[keep]
    # P^T: rows = targets, columns (sources) ascending
    key = dst * n
    key += src
    order = key.argsort(kind="stable")
    indices = src[order].astype(np.int32)
    data = vals[order]
    # row starts: the running sum of the rows' entry counts shifted by one row (the first start is 0)
    indptr = np.add.accumulate(np.bincount(dst + 1, minlength=n + 1), dtype=np.int32)
    return TransitionMatrix(indptr, indices, data, ~nz, n)


#: Out-weights outside [_MIN_NORMAL, _MAX_OUT_WEIGHT] have no exact ``1 / out_w`` (0, inf or a subnormal
#: number, or the out-weight itself is subnormal): see :func:`transition_from_edges`.
_MIN_NORMAL = float(np.finfo(np.float64).tiny)  # 2**-1022
_MAX_OUT_WEIGHT = 1.0 / _MIN_NORMAL  # 2**1022: its inverse is the smallest normal float

#: Weights that are whole multiples of this power of two, below 2**33 and summing to less than 2**53
#: of it, add up exactly in any order (see :func:`_sums_exact`).
_EXACT_UNIT = 2.0 ** -10


def _sums_exact(weight: np.ndarray) -> bool:
    """Whether every partial sum of the (finite, non-negative) ``weight`` entries, in any order, is
    exact: all are whole multiples of ``_EXACT_UNIT`` and their total is below 2**53 units, so each
    partial sum is a whole number of units below 2**53, which a float64 holds exactly (the store's
    weights, 1.0 and 0.5, always are). Then a row's sum is the same float by any summation route.
    (The maximum is tested first, so that scaling and summing cannot overflow.)"""
    if not len(weight) or not np.maximum.reduce(weight) < 2.0 ** 33 or not np.minimum.reduce(weight) >= 0.0:
        return False  # (a negative weight could make a partial sum exceed the total's bound)
    units = weight * (1.0 / _EXACT_UNIT)  # (a power of two: exact)
    return not np.count_nonzero(np.modf(units)[0]) and np.add.reduce(units) < 2.0 ** 53


def transition_matrix(adj: sp.spmatrix) -> TransitionMatrix:
    """Build the row-normalised transition matrix of a weighted adjacency matrix (rows = sources)."""
    adj = sp.coo_matrix(adj, dtype=np.float64)
    n = adj.shape[0]
    if adj.shape != (n, n):
        raise ValueError(f"adjacency must be square, got shape {adj.shape}")
    adj.sum_duplicates()
    return transition_from_edges(n, adj.row, adj.col, adj.data)


def personalized_pagerank(
    tm: TransitionMatrix,
    personalization: np.ndarray,
    alpha: float = 0.85,
    max_iter: int = 100,
    tol: float = 1.0e-6,
    fallback: str = "solve",
) -> tuple[np.ndarray, str]:
    """Return (scores, method) where method is "power" or "solve" (the fallback was used).

    `personalization` is a non-negative (n,) vector (normalised here); it must not be all zero.
    """
    max_iter = _checked_params(alpha, max_iter, fallback, tol)
    n = tm.n
    if n == 0:
        return np.zeros(0), "power"
    p = np.asarray(personalization, dtype=np.float64)
    if p.shape != (n,):
        raise ValueError(f"personalization must have shape ({n},), got {p.shape}")
    total = np.add.reduce(p)
    if not 0 < total < np.inf or np.count_nonzero(p < 0):  # (a NaN or inf entry makes the sum NaN or inf)
        raise ValueError("personalization must be finite and non-negative with a positive sum")
    return _pagerank(tm, p / total, alpha, max_iter, tol, fallback)


def _seeded_pagerank(
    tm: TransitionMatrix,
    rows: np.ndarray,
    alpha: float = 0.85,
    max_iter: int = 100,
    tol: float = 1.0e-6,
    fallback: str = "solve",
) -> tuple[np.ndarray, str]:
    """:func:`personalized_pagerank` with the personalisation 1 on the matrix rows ``rows`` (distinct
    valid row indices, at least one, as :meth:`world.graph.AssocGraph.ppr` passes them: private, since
    it trusts them) and 0 elsewhere: the same scores, without building and checking that vector (a seed's normalised weight 1.0 / k for k seeds is exactly the 0/1 vector divided by
    its sum, k)."""
    max_iter = _checked_params(alpha, max_iter, fallback, tol)
    if not len(rows):
        raise ValueError("personalization must be finite and non-negative with a positive sum")
    p = np.zeros(tm.n)
    p[rows] = 1.0 / len(rows)
    return _pagerank(tm, p, alpha, max_iter, tol, fallback)


def _checked_params(alpha: float, max_iter: int, fallback: str, tol: float) -> int:
    """``max_iter`` as an int, or ValueError for a bad fallback, alpha, max_iter or tol (in that order)."""
    if fallback not in ("solve", "raise"):
        raise ValueError(f"fallback must be 'solve' or 'raise', got {fallback!r}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 0:
        # (checked up front: the batched loop would otherwise accept or reject a float by convergence)
        raise ValueError(f"max_iter must be an integer >= 0, got {max_iter!r}")
    # (the stop test is ||x - x_prev||_1 < n * tol: an infinite tol stopped after one iteration and
    # called that vector converged; NaN, 0 or a negative one never converge)
    if type(tol) is not float and (isinstance(tol, bool | np.bool_) or not isinstance(tol, int | float | np.integer | np.floating)) \
            or not 0.0 < tol < math.inf:  # (NaN fails the range test)
        raise ValueError(f"tol must be a finite number > 0, got {tol!r}")
    return int(max_iter)


def _pagerank(tm: TransitionMatrix, p: np.ndarray, alpha: float, max_iter: int, tol: float,
              fallback: str) -> tuple[np.ndarray, str]:
    """The scores for a checked, normalised personalisation ``p`` (shape (n,), n > 0)."""
    n = tm.n
    indptr, indices = tm.indptr, tm.indices
    data_a = tm.scaled_data(alpha)  # alpha folded into the matrix once per graph
    stop = n * tol
    if len(indices) <= _PPR_BATCH_MAX_NNZ:
        first = _first_batch(alpha, stop) if len(indices) <= _PPR_BOUND_MAX_NNZ else _PPR_BATCH
        x = _power_batched(n, p, alpha, tm.dangling_rows(), indptr, indices, data_a, max_iter, stop, first)
    else:
        x = _power_plain(n, p, alpha, tm.dangling_rows(), indptr, indices, data_a, max_iter, stop)
    if x is not None:
        return x, "power"
    if fallback == "raise":
        raise PPRConvergenceError(f"personalized PageRank did not converge in {max_iter} iterations (tol={tol})")
    # Exact fixed point: x (I - alpha P) = c p  =>  (I - alpha P)^T y = p, x = y / sum(y).
    system = sp.identity(n, format="csc") - alpha * tm.pt.tocsc()
    y = spla.spsolve(system, p)
    y = np.asarray(y, dtype=np.float64)
    return y / y.sum(), "solve"


def _power_plain(n, p, alpha, dangling, indptr, indices, data_a, max_iter, stop):
    """The power iteration, tested after every step: the first iterate whose L1 step is below
    ``stop``, or None after ``max_iter`` steps."""
    x = np.full(n, 1.0 / n)
    y = np.empty(n)
    diff = np.empty(n)
    has_dangling = len(dangling) > 0
    teleport = 1.0 - alpha
    add_reduce, multiply, subtract, absolute = np.add.reduce, np.multiply, np.subtract, np.absolute
    matvec = _csr_matvec if _csr_matvec is not None else _matvec_add
    for _ in range(max_iter):
        # y = alpha x P + (alpha (x . dangling) + 1 - alpha) p, written in place (hot loop: the
        # ufuncs are called directly, ndarray.sum is add.reduce behind a Python wrapper; c * 0.0 = 0.0
        # off the seeds, so y = c p is exactly the seeds' c * p_i with zeros elsewhere)
        c = alpha * add_reduce(x.take(dangling)) + teleport if has_dangling else teleport
        multiply(p, c, out=y)
        matvec(n, n, indptr, indices, data_a, x, y)
        subtract(y, x, out=diff)
        absolute(diff, out=diff)
        x, y = y, x
        if add_reduce(diff) < stop:
            return x.copy()
    return None


def _power_batched(n, p, alpha, dangling, indptr, indices, data_a, max_iter, stop, first=_PPR_BATCH):
    """:func:`_power_plain` with the stopping test run on a batch of iterates at once (one subtract,
    absolute and row-wise add.reduce instead of three calls per iteration; a row's reduce is the 1-D
    reduce of that row). The answer is the same first iterate whose step passes the test, whatever
    the batch sizes; the iterations computed after it in its batch are thrown away (small graphs
    only, where they are cheaper than the calls saved).

    The first batch has ``first`` iterations (capped by ``_PPR_BATCH_CAP``); each later one as many as
    the steps of the batch before predict are still needed (see :func:`_next_batch`). The iterates
    are the first n entries of the rows of a buffer (see :func:`_iterates`)."""
    teleport = 1.0 - alpha
    add_reduce, multiply, subtract, absolute = np.add.reduce, np.multiply, np.subtract, np.absolute
    matvec = _csr_matvec if _csr_matvec is not None else _matvec_add
    cap = min(_PPR_BATCH_CAP, max_iter)
    b = min(first, cap)
    buf, rows = _iterates(n, cap + 1)
    X = buf[:, :n] if buf.shape[1] != n else buf  # the iterates: X[i] is the first n entries of rows[i]
    X[0] = 1.0 / n
    if len(dangling):
        cp = None
        if buf.shape[1] != n:  # (the kernel writes n entries; multiply writes the whole row)
            p = np.concatenate((p, np.zeros(buf.shape[1] - n)))
    else:
        cp = p * teleport  # c p without dangling nodes: c = 1 - alpha
    done = 0
    while done < max_iter:
        b = min(b, max_iter - done)
        if len(rows) <= b:  # (a view costs ~0.1 us: made only for the rows a batch uses)
            rows.extend(buf[len(rows):b + 1])
        if cp is None:
            for x, y in zip(rows[:b], rows[1:b + 1]):
                multiply(p, alpha * add_reduce(x.take(dangling)) + teleport, out=y)
                matvec(n, n, indptr, indices, data_a, x, y)
        else:
            X[1:b + 1] = cp
            for x, y in zip(rows[:b], rows[1:b + 1]):
                matvec(n, n, indptr, indices, data_a, x, y)
        diff = subtract(X[1:b + 1], X[:b])
        absolute(diff, out=diff)
        steps = add_reduce(diff, axis=1)
        passed = (steps < stop).nonzero()[0]
        if len(passed):
            return X[passed[0] + 1].copy()
        done += b
        X[0] = X[b]
        b = _next_batch(steps.tolist(), stop)
    return None


#: Iterate buffers of at most this many floats (1 MiB) are kept, one per thread, for the next PPR.
_SCRATCH_FLOATS = 1 << 17
_scratch = threading.local()


def _iterates(n: int, n_rows: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """A float buffer of at least ``n_rows`` rows and ``n`` columns (its row views contiguous: the CSR
    kernel reads and writes the first n entries of a row) and a list of the views of its first rows.

    A small graph's PPR takes the thread's buffer, kept with the views of all its rows (making ~65
    views cost ~6 us a call); it is widened when a larger graph needs it, up to ``_SCRATCH_FLOATS``.
    Its contents are never read before the power iteration writes them, and what the iteration
    returns is a copy, so reusing it changes no result. A larger graph gets a buffer of its own, its
    views made as the batches need them."""
    rows_cap = _PPR_BATCH_CAP + 1
    if n_rows <= rows_cap and rows_cap * n <= _SCRATCH_FLOATS:
        kept = getattr(_scratch, "iterates", None)
        if kept is not None and kept[0].shape[1] >= n:
            return kept
        width = min(max(n, 2 * kept[0].shape[1]) if kept is not None else max(n, 128), _SCRATCH_FLOATS // rows_cap)
        buf = np.empty((rows_cap, width))
        kept = _scratch.iterates = (buf, list(buf))
        return kept
    buf = np.empty((n_rows, n))
    return buf, list(buf[:_PPR_BATCH + 1])


def _first_batch(alpha: float, stop: float) -> int:
    """The iterations after which the L1 step is surely below ``stop`` in exact arithmetic (at least
    1, capped by ``_PPR_BATCH_CAP``): the first step is at most 2 (both iterates are probability
    vectors) and each later one at most alpha times the one before (the iteration map is an
    alpha-contraction in L1), so step k <= 2 alpha^(k-1). Only a batch size: a Life store's PPR
    passes the test ~3-9 iterations before it. A threshold that is never met (<= 0 or NaN) runs
    batches of the cap."""
    if not 0.0 < stop < 2.0:
        return 1 if stop >= 2.0 else _PPR_BATCH_CAP
    need = math.floor(math.log(stop / 2.0) / math.log(alpha)) + 2
    return min(max(need, 1), _PPR_BATCH_CAP)


def _next_batch(steps: list[float], stop: float) -> int:
    """How many more iterations the power iteration is predicted to need, from the L1 steps of the
    last batch (all >= ``stop``): the steps shrink geometrically (by at most alpha per iteration), so
    the rate r over the batch's second half predicts log(stop / last) / log(r) more. Only a batch
    size: a short prediction costs one more batch, a long one a few iterations thrown away. Falls back
    to ``_PPR_BATCH`` when the steps give no rate (too few, or not shrinking)."""
    b = len(steps)
    last = steps[-1]
    if b < 2 or not 0.0 < last < steps[b // 2 - 1] or not 0.0 < stop < last:
        return _PPR_BATCH  # (a tol <= 0 or NaN never stops: the iteration runs to max_iter)
    rate = (last / steps[b // 2 - 1]) ** (1.0 / (b - b // 2))
    if not 0.0 < rate < 1.0:
        return _PPR_BATCH
    need = math.ceil(math.log(stop / last) / math.log(rate))
    return min(max(need, 1), _PPR_BATCH_CAP)


def _matvec_add(n_row, n_col, indptr, indices, data, x, y) -> None:  # pragma: no cover
    """y[:n_row] += A x[:n_col] for the CSR matrix (data, indices, indptr), in place: scipy's private
    kernel's signature (which reads and writes only those entries of longer vectors), for a scipy
    without it."""
    y[:n_row] += sp.csr_matrix((data, indices, indptr), shape=(n_row, n_col)) @ x[:n_col]
