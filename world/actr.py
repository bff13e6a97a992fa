"""ACT-R declarative memory equations: the only place they live in memgym.

Base-level learning (Anderson & Lebiere 1998, "The Atomic Components of Thought", ch. 4):

    B = ln( sum_j t_j^(-d) )                      t_j: time since presentation j, d: decay (0.5)

Creation counts as the first presentation. Optimized learning folds all n presentations into
one term using L, the time since creation:

    B ~ ln( n / (1 - d) ) - d ln(L)

Petrov (2006, "Computationally efficient approximation of the base-level learning equation in
ACT-R") keeps the k most recent presentations exact and approximates the rest:

    B ~ ln[ sum_{j<=k} t_j^(-d) + (n - k) (L^(1-d) - t_k^(1-d)) / ((1 - d)(L - t_k)) ]

(t_k is the lag of the oldest presentation still kept.) With n <= k it is the exact equation.
When L == t_k the fraction is the limit L^(-d).

Retrieval probability P = 1 / (1 + exp(-(A - tau) / s)), latency T = F exp(-A), and a retrieval
failure takes F exp(-tau).

Scalar functions take lags (times since presentations). The vectorised function
`hybrid_base_level_batch` works on the store's arrays: creation time, presentation count and an
(m, k) matrix of the k most recent presentation times (NaN padded); `BaseLevelBatch` is the same
computation for rows that are asked for at many steps (the step-independent work done once).
"""

from __future__ import annotations

import math
from bisect import insort
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "ActRRecord",
    "base_level",
    "optimized_learning",
    "hybrid_base_level",
    "hybrid_base_level_batch",
    "BaseLevelBatch",
    "retrieval_probability",
    "retrieval_latency",
    "failure_latency",
    "MIN_LAG",
]

#: Lags shorter than this are clipped (a presentation "now" would give t^-d = inf). The store counts
#: time in integer steps, so one step is the shortest meaningful lag (the seed used the same floor).
MIN_LAG = 1.0


def _check_d(d: float) -> None:
    if not 0.0 < d < 1.0:
        raise ValueError(f"decay d must be in (0, 1), got {d!r}")


def _check_count(name: str, value: object, note: str = "") -> None:
    """ValueError unless ``value`` is an integer >= 1 (numpy integers too, bools not)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1{note}, got {value!r}")


def base_level(lags: Sequence[float], d: float = 0.5) -> float:
    """Exact base-level activation B = ln(sum_j t_j^-d) over all presentation lags (all > 0)."""
    _check_d(d)
    if len(lags) == 0:
        raise ValueError("lags must hold at least one presentation (creation counts as one)")
    total = 0.0
    for t in lags:
        if not 0 < t < math.inf:  # (NaN fails too)
            raise ValueError(f"lags must be finite and > 0, got {t!r}")
        total += t ** (-d)
    return math.log(total)


def optimized_learning(n: int, life: float, d: float = 0.5) -> float:
    """Optimized-learning approximation B = ln(n / (1 - d)) - d ln(L), L = time since creation."""
    _check_d(d)
    _check_count("n", n, " (creation counts)")
    if not 0 < life < math.inf:
        raise ValueError(f"life (L = time since creation) must be finite and > 0, got {life!r}")
    return math.log(n / (1.0 - d)) - d * math.log(life)


def _tail(n_old: float, life: float, t_k: float, d: float) -> float:
    if life - t_k <= 1e-12 * max(1.0, life):
        return n_old * life ** (-d)
    return n_old * (life ** (1.0 - d) - t_k ** (1.0 - d)) / ((1.0 - d) * (life - t_k))


def hybrid_base_level(recent_lags: Sequence[float], n: int, life: float, d: float = 0.5, k: int | None = None) -> float:
    """Petrov's hybrid: the k most recent lags exact, the other n - k approximated.

    `recent_lags` are the lags of the kept presentations (any order, at most k of them; if k is None
    it is len(recent_lags)); `n` counts all presentations including creation; `life` = L.
    """
    _check_d(d)
    lags = sorted(float(t) for t in recent_lags)
    if k is None:
        k = len(lags)
    _check_count("n", n, " (creation counts as a presentation)")
    _check_count("k", k)
    if len(lags) != min(n, k):
        raise ValueError(f"need len(recent_lags) = min(n, k) with k >= 1; got {len(lags)} lags, n={n}, k={k}")
    if not all(0 < t < math.inf for t in lags) or not 0 < life < math.inf:
        raise ValueError(f"recent_lags and life (L) must be finite and > 0, got {lags!r}, L={life!r}")
    if life < lags[-1]:
        raise ValueError(f"life (L = time since creation) must be >= every lag, got L={life!r} < {lags[-1]!r}")
    total = sum(t ** (-d) for t in lags)
    if n > k:
        total += _tail(n - k, life, lags[-1], d)
    return math.log(total)


def hybrid_base_level_batch(
    now: float,
    created: np.ndarray,
    n: np.ndarray,
    recent: np.ndarray,
    d: float = 0.5,
    min_lag: float = MIN_LAG,
    assume_no_nan: bool = False,
) -> np.ndarray:
    """Vectorised hybrid base level for m memories.

    created: (m,) creation times; n: (m,) presentation counts (creation included);
    recent: (m, k) times of the k most recent presentations, NaN or -inf where fewer than k exist.
    Lags are clipped below at `min_lag`. Exact when n <= k. `assume_no_nan`: the caller promises
    that ``recent`` holds no NaN (padding is -inf), which skips a scan. (``BaseLevelBatch(created,
    n, recent, ...).at(now)``: a caller that asks for the same rows at many steps keeps the batch.)
    """
    return BaseLevelBatch(created, n, recent, d, min_lag, assume_no_nan).at(now)


class BaseLevelBatch:
    """:func:`hybrid_base_level_batch` of fixed rows, evaluated at any step with :meth:`at`.

    What does not depend on the step is found once, here: which rows have a tail term (n > k) and
    their counts and times, or, for a large batch of mostly single presentations, each row's one
    presentation time. The store keeps a batch while its ACT-R arrays do not change (no write,
    removal or retrieval), so a step costs only the element-wise work. ``at(now)`` gives the bits
    ``hybrid_base_level_batch`` always gave: the same operations on the same numbers, in the same
    order. The arrays are kept by reference: they must not change while the batch is in use.
    """

    __slots__ = ("created", "n", "recent", "d", "min_lag", "assume_no_nan", "k", "_single", "_rows", "_py_tail")

    def __init__(self, created: np.ndarray, n: np.ndarray, recent: np.ndarray, d: float = 0.5,
                 min_lag: float = MIN_LAG, assume_no_nan: bool = False) -> None:
        if not 0.0 < d < 1.0:  # (inline: a hot path)
            _check_d(d)
        self.created, self.n, self.recent = created, n, recent
        self.d, self.min_lag, self.assume_no_nan = d, min_lag, assume_no_nan
        self.k = k = recent.shape[1]
        # (one presentation time per row, the rows with more, their batch) on the path for many rows
        self._single: tuple | None = None
        self._rows: np.ndarray | None = None  # rows with a tail term (n > k), None if there are none
        # (rows, created, n, oldest time) of those rows as Python lists, for the d = 0.5 tail in floats
        # (see _tail_from_oldest)
        self._py_tail: tuple | None = None
        m = len(n)
        if m > 256 and assume_no_nan:
            # Most memories were never retrieved (n == 1): their only term is their one presentation time,
            # the row's maximum (the rest is -inf padding, wherever it sits). Compute those rows from that
            # alone and the others in full. Same operations per element, so the result is bit-identical
            # to the general path (adding exact zeros changes nothing).
            multi = (n != 1).nonzero()[0]
            if len(multi) * 4 < m:
                col = recent[:, 0]  # (the store's rows: the time sits in column 0)
                pad = (col == -np.inf).nonzero()[0]
                if len(pad):  # a row padded at its start: its time is the row's maximum
                    col = col.copy()
                    col[pad] = np.maximum.reduce(recent[pad], axis=1)
                multi_batch = BaseLevelBatch(created[multi], n[multi], recent[multi], d, min_lag, True) \
                    if len(multi) else None
                self._single = (col, multi, multi_batch)
                return
        rows = (n > k).nonzero()[0]  # (ndarray methods: no Python wrapper on the hot path)
        if len(rows):
            self._rows = rows
            if d == 0.5 and len(rows) <= 32:
                rows_list = rows.tolist()
                pad = -math.inf
                oldest = []
                for i in rows_list:  # (the times a lag can come from: not NaN, not -inf padding)
                    kept = [t for t in recent[i].tolist() if t == t and t != pad]
                    oldest.append(min(kept) if kept else None)
                # (item by item: a tail row or two is the common case, where this beats a gather)
                self._py_tail = (rows_list, [created.item(i) for i in rows_list], [n.item(i) for i in rows_list],
                                 oldest)

    def at(self, now: float) -> np.ndarray:
        """The rows' hybrid base levels at step ``now`` (a new array)."""
        d, min_lag = self.d, self.min_lag
        single = self._single
        if single is not None:
            col, multi, multi_batch = single
            lag1 = np.maximum(now - col, min_lag)
            if d == 0.5:
                np.sqrt(lag1, out=lag1)
                np.divide(1.0, lag1, out=lag1)
                out = np.log(lag1)
            else:
                out = np.log(np.power(lag1, -d))
            if multi_batch is not None:
                out[multi] = multi_batch.at(now)
            return out
        lags = self._lags(now, self.recent)
        rows = self._rows
        py_tail = self._py_tail
        # Python floats for the tail (exact for Python floats; other number types keep numpy's promotion)
        in_floats = py_tail is not None and type(now) is float and type(min_lag) is float
        tail_lags = None
        if rows is not None and not in_floats:
            tail_lags = lags[rows]  # kept before the buffer is overwritten below
        if d == 0.5:  # t^-0.5 = 1 / sqrt(t): four times faster than pow
            np.sqrt(lags, out=lags)
            np.divide(1.0, lags, out=lags)
            total = np.add.reduce(lags, axis=1)  # what ndarray.sum calls
        else:
            total = np.add.reduce(np.power(lags, -d), axis=1)
        if rows is None:
            return np.log(total)
        k = self.k
        if py_tail is not None:
            if in_floats:
                tail = self._tail_from_oldest(now)
                if tail is None:  # (a case that route leaves out: numpy's tail below, from the rows' lags)
                    tail_lags = self._lags(now, self.recent[rows])
            else:
                tail = _tail_rows_sqrt(now, py_tail[1], py_tail[2], tail_lags.tolist(), k, min_lag)
            if tail is not None:
                for i, extra in zip(py_tail[0], tail):
                    total[i] += extra  # (float64 + float: the one addition ``total[rows] + tail`` makes)
                return np.log(total)
        # the tail term, only for the rows that have one (n > k): the same element-wise operations
        # as on all rows, so the result is bit-identical (other rows would add an exact 0.0)
        extra = self.n[rows] - k
        # rows with n > k are full, so their oldest kept lag is the row maximum; lags are already
        # >= min_lag, so clipping that maximum again changes nothing unless a row has no finite lag
        finite = np.isfinite(tail_lags)
        if finite.all():
            t_k = tail_lags.max(axis=1)
        else:
            t_k = np.maximum(np.where(finite, tail_lags, -np.inf).max(axis=1), min_lag)
        # L >= t_k: the folded presentations are no younger than the oldest kept one. Only a presentation
        # recorded before the memory's creation (a file of a release whose writes did not move the
        # clock) gives t_k > L, where the fraction leaves the equation; the scalar function refuses
        # that, here each such presentation counts as old as the memory (the same as L == t_k)
        life = np.maximum(np.maximum(now - self.created[rows], min_lag), t_k)
        gap = life - t_k
        big = gap > 1e-12 * np.maximum(life, 1.0)
        if big.all():  # np.where would pick the first branch everywhere (and safe_gap = gap)
            frac = (life ** (1.0 - d) - t_k ** (1.0 - d)) / ((1.0 - d) * gap)
        else:
            safe_gap = np.where(big, gap, 1.0)
            frac = np.where(big, (life ** (1.0 - d) - t_k ** (1.0 - d)) / ((1.0 - d) * safe_gap), life ** (-d))
        total[rows] = total[rows] + extra * frac
        return np.log(total)

    def _lags(self, now: float, recent: np.ndarray) -> np.ndarray:
        """``max(now - recent, min_lag)``, a new array; padding (-inf time, or NaN) becomes an infinite
        lag, whose t^-d is exactly 0."""
        lags = now - recent
        if not self.assume_no_nan:
            nan = np.isnan(lags)
            if nan.any():
                lags[nan] = np.inf
        np.maximum(lags, self.min_lag, out=lags)
        return lags

    def _tail_from_oldest(self, now: float) -> list | None:
        """:func:`_tail_rows_sqrt` of the tail rows at ``now`` (a finite float), from each row's oldest
        kept time: subtraction rounds monotonically, so the largest finite lag is ``now - oldest``
        (clipped at min_lag like every lag), without the row's other lags. None where that does not
        hold (a lag that overflows to inf, a non-finite now or min_lag) or a row needs numpy's branch."""
        min_lag = self.min_lag
        if not (math.isfinite(now) and math.isfinite(min_lag)):
            return None
        _, created, n, oldest = self._py_tail
        t_ks = []
        for t in oldest:
            if t is None:  # (no lag at all: the clip's floor)
                t_ks.append(min_lag)
                continue
            t_k = now - t
            if t_k == math.inf:
                return None
            t_ks.append(t_k if t_k > min_lag else min_lag)
        return _tails_sqrt(now, created, n, t_ks, self.k, min_lag)


def _tail_rows_sqrt(now: float, created: list, n: list, lags: list, k: int, min_lag: float) -> list | None:
    """``extra * frac`` of the vectorised tail term (:meth:`BaseLevelBatch.at`) for a few rows with
    d = 0.5, in Python floats, from the rows' clipped lags.

    With d = 0.5 every operation is one IEEE-754 operation that Python and numpy both round
    correctly (-, *, /, max, and sqrt, which is what numpy computes for ``x ** 0.5``), so the
    values are bit-identical to the numpy expression; this only saves numpy's per-call overhead on
    a handful of rows. None when a row needs the ``life ** -d`` branch (left to numpy's pow).
    """
    inf = math.inf
    t_ks = []
    for row in lags:
        t_k = -inf
        for x in row:
            if x != inf and x > t_k:  # the largest finite lag
                t_k = x
        t_ks.append(t_k if t_k > min_lag else min_lag)
    return _tails_sqrt(now, created, n, t_ks, k, min_lag)


def _tails_sqrt(now: float, created: list, n: list, t_ks: list, k: int, min_lag: float) -> list | None:
    """Each row's ``extra * frac`` (d = 0.5) from its oldest kept lag ``t_k`` (already clipped at
    ``min_lag``); None when a row needs the ``life ** -d`` branch."""
    sqrt = math.sqrt
    out = []
    for c, nn, t_k in zip(created, n, t_ks):
        life = now - c
        if not life > min_lag:
            life = min_lag
        if life < t_k:  # (L >= t_k, as in BaseLevelBatch.at)
            life = t_k
        gap = life - t_k
        if not gap > 1e-12 * (life if life > 1.0 else 1.0):
            return None
        out.append((nn - k) * ((sqrt(life) - sqrt(t_k)) / (0.5 * gap)))
    return out


def retrieval_probability(activation, tau: float = 0.0, s: float = 0.25):
    """P = 1 / (1 + exp(-(A - tau) / s)); works on floats and numpy arrays. A far below tau gives 0.0
    (exp overflows to inf: no warning)."""
    if not np.all((np.asarray(s, dtype=float) > 0) & np.isfinite(s)):
        raise ValueError(f"noise scale s must be finite and > 0, got {s!r}")
    if not np.all(np.isfinite(np.asarray(tau, dtype=float))):
        raise ValueError(f"threshold tau must be finite, got {tau!r}")
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-(np.asarray(activation, dtype=float) - tau) / s))


def _check_factor(latency_factor) -> None:
    if not np.all((np.asarray(latency_factor, dtype=float) > 0) & np.isfinite(latency_factor)):
        raise ValueError(f"latency factor F must be finite and > 0, got {latency_factor!r}")


def retrieval_latency(activation, latency_factor: float = 1.0):
    """T = F exp(-A) (an activation of -inf, never retrievable, takes inf)."""
    _check_factor(latency_factor)
    with np.errstate(over="ignore"):
        return latency_factor * np.exp(-np.asarray(activation, dtype=float))


def failure_latency(tau: float = 0.0, latency_factor: float = 1.0) -> float:
    """A retrieval failure takes F exp(-tau) (inf when that overflows)."""
    _check_factor(latency_factor)
    if not math.isfinite(tau):
        raise ValueError(f"threshold tau must be finite, got {tau!r}")
    try:
        return latency_factor * math.exp(-tau)
    except OverflowError:
        return math.inf


@dataclass(init=False)
class ActRRecord:
    """ACT-R state of one memory (kept from seed 001's public API).

    `created_step` is the first presentation; `n` counts every presentation (creation + each
    retrieval); `recent` holds the times of the k most recent presentations, in time order (oldest
    first), whatever order they were recorded in. The store keeps the same numbers in arrays and hands
    out ActRRecord snapshots (``n=`` and ``recent=`` given; ``recent`` is sorted).

    Seed 001's constructor ``ActRRecord(retrievals, created_step, decay_rate)`` works unchanged: the
    retrieval times are replayed through :meth:`bump`. ``retrievals`` reads back as a tuple (the kept
    retrieval times, at most k): record a presentation with :meth:`bump`, not by appending to it (a
    list would take the append and lose it). A dataclass (``dataclasses.asdict`` gives its fields).
    """

    created_step: float
    decay_rate: float
    k: int
    n: int
    recent: list[float]

    def __init__(self, retrievals: Sequence[float] = (), created_step: float = 0, decay_rate: float = 0.5,
                 k: int = 8, *, n: int | None = None, recent: Sequence[float] | None = None) -> None:
        _check_d(decay_rate)
        _check_count("k", k)
        if not math.isfinite(float(created_step)):
            raise ValueError(f"created_step must be finite, got {created_step!r}")
        self.created_step = created_step
        self.decay_rate = float(decay_rate)
        self.k = int(k)
        if n is None and recent is None:
            self.n = 1
            self.recent = [float(created_step)]
            try:
                times = list(retrievals)
            except TypeError:
                raise ValueError(f"retrievals must be a sequence of step times (seed 001's first argument), got "
                                 f"{retrievals!r}; a record created at step t is ActRRecord(created_step=t)") from None
            for t in times:
                self.bump(t)
            return
        if retrievals:
            raise ValueError("give either retrievals (seed 001's form) or n and recent (a snapshot), not both")
        recent = sorted(float(t) for t in (recent if recent is not None else [created_step]))
        n = len(recent) if n is None else n
        _check_count("n", n, " (creation counts)")
        if len(recent) != min(int(n), self.k):
            raise ValueError(f"recent must hold min(n, k) = {min(int(n), self.k)} times, got {len(recent)}")
        self.n = int(n)
        self.recent = recent

    @property
    def retrievals(self) -> tuple[float, ...]:
        """Kept retrieval times (presentations after creation, at most k)."""
        return tuple(self.recent[1:] if self.n <= self.k else self.recent)

    def bump(self, step: float) -> None:
        """Record one more presentation at `step` (not before the record's creation). Steps may come in
        any order (seed 001's constructor replays its list as given): `recent` keeps the k latest
        times, and an earlier one is folded into Petrov's tail, which the hybrid assumes holds the
        oldest presentations (keeping the last k recorded made the activation depend on the order)."""
        step = float(step)
        if not math.isfinite(step):
            raise ValueError(f"step must be finite, got {step!r}")
        if step < self.created_step:
            raise ValueError(f"step {step!r} is before the record's creation (created_step={self.created_step!r})")
        self.n += 1
        recent = self.recent
        insort(recent, step)
        if len(recent) > self.k:
            del recent[0]  # (the oldest: k + 1 times at most, one too many)

    def activation(self, current_step: float) -> float:
        """Hybrid base level at `current_step` (exact while n <= k); lags clipped at MIN_LAG."""
        if not math.isfinite(float(current_step)):
            raise ValueError(f"current_step must be finite, got {current_step!r}")
        out = hybrid_base_level_batch(
            float(current_step),
            np.array([float(self.created_step)]),
            np.array([self.n]),
            np.array([self.recent + [-np.inf] * (self.k - len(self.recent))], dtype=float),
            d=self.decay_rate,
        )
        return float(out[0])
