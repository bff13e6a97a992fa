"""The memory store: episodic + semantic memories, associative graph, PPR retrieval, ACT-R decay.

Implements seed 001's `MemoryStore` (public names kept) with seed 000's deduplication and importance
scoring and seed 003's versioned facts (keys, tiers, confidence, supersession, explain, hard
erasure). Design and the list of seed bugs fixed: docs/store.md.

Layout for speed: every namespace is a partition (`_Space`) with its own contiguous float32
embedding matrix (rows recycled through a free list), ACT-R arrays, importance / tier arrays and its
own associative graph. A query is one mat-vec, one vectorised ACT-R evaluation and one PPR power
iteration on a cached CSR matrix. Namespaces share nothing that enters a score, so a query in one
namespace is bit-identical whatever the other namespaces hold.

Query score (seed 001's formula, default weights):

    score = alpha_sim * cos(q, m) + alpha_ppr * 10 * PPR(m) + alpha_actr * 0.1 * B(m) + 0.1 * importance(m)

then tier rules: superseded versions never rank; an `inference` memory with confidence c scores
score - (1 - c) * |score| (its score moves towards -inf by the fraction 1 - c, whatever its sign).
"""

from __future__ import annotations

import math
import types
import unicodedata
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import KW_ONLY, asdict, dataclass, field
from enum import Enum
from itertools import islice
from operator import attrgetter
from typing import Any, ClassVar

import networkx as nx
import numpy as np

from world.actr import ActRRecord, BaseLevelBatch
from world.cues import colon_rule, cue_name_ok, extract_cues, nfc_cues
from world.dedup import DedupConfig, TextSignature, duplicate_rule, embedding_duplicate, signature, words
from world.embedding import (
    CachedEmbedder,
    HashingEmbedder,
    check_embedder_config,
    embedder_config,
    embedder_from_config,
    not_finite_error,
)
from world.graph import AssocGraph
from world.importance import ImportanceScorer, Scorer

__all__ = [
    "MemoryStore",
    "EpisodicMemory",
    "SemanticMemory",
    "RelationType",
    "ActRRecord",
    "WriteReport",
    "ErasureReport",
    "EraseHookError",
    "EraseCacheError",
    "NamespaceView",
    "TIERS",
    "INFERENCE_MAX_CONFIDENCE",
    "STATE_SCHEMA",
]

TIERS = ("fact", "preference", "inference")
INFERENCE_MAX_CONFIDENCE = 0.8
STATE_SCHEMA = 1
ALL_NAMESPACES = "*"
#: Texts remembered per memory that were merged into it as duplicates with other wording (dropped from
#: the embedder's cache when the memory is erased); past this, a further one is dropped at once.
MERGED_CAP = 64

_CUE = "cue::"
_DERIVED = "derived_from"
_CONSOLIDATED = "consolidated_into"
_STRUCTURAL = frozenset({_DERIVED, _CONSOLIDATED, "has_cue", "cue_of"})


class RelationType(str, Enum):
    """Typed links between memories (a str enum: RelationType.SUPPORTS == "supports")."""

    CONTRADICTS = "contradicts"
    SUPPORTS = "supports"
    FOLLOWS = "follows"
    REFERENCES = "references"

    def __str__(self) -> str:
        return self.value


_TYPED = frozenset(r.value for r in RelationType)
#: the keyword arguments MemoryStore.supersede takes
_SUPERSEDE_KWARGS = frozenset({"tier", "confidence", "source", "evidence", "importance", "cues", "derived_from", "sig"})


# --------------------------------------------------------------------------- records
class _ScoredField:
    """A record field that enters the store's scores (``importance``, ``confidence``, ``tier``), set
    on the class once the dataclass is built.

    The store keeps these numbers in per-namespace arrays as well (what queries and sweeps read, and
    what ``save`` rebuilds from the records). Set on a record that lives in a store, the value is
    checked as a write's argument (``ValueError`` naming the field; nothing changes) and written to
    those arrays too, so the running store and a saved-and-reloaded copy never disagree. A record in no
    store (before its insertion, after it left the store, a copy) takes any value, as a plain dataclass.

    The descriptor defines ``__set__`` only: with no ``__get__``, a read finds the value in the
    instance's ``__dict__`` at plain attribute speed (the env reads ``importance`` of every candidate at
    every step); only assignments pay for a Python call.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __set__(self, rec: _Record, value: object) -> None:
        d = rec.__dict__
        home = d.get("_home")
        if home is None:
            d[self.name] = value
        else:
            _set_scored(rec, home, self.name, value)


class _Record:
    """What EpisodicMemory and SemanticMemory share beyond their fields: a record inserted in a store
    holds ``_home`` = (its namespace's partition, its row) while it lives there (see
    :class:`_ScoredField`). A copy or a pickle of the record alone does not take it along (it would be
    tied to the store's rows, and a deep copy would copy the whole namespace): a pickled store binds
    its records again when it is loaded (``MemoryStore.__setstate__``)."""

    __slots__ = ()

    @property
    def embedding(self) -> np.ndarray | None:
        """The memory's unit embedding (seed 001's ``EpisodicMemory.embedding``, a list there): a float32
        copy of its row of the store's matrix (the matrix is the store's, and a row is recycled once the
        memory leaves), None for a record in no store. Read-only: the store embeds the content."""
        home = self.__dict__.get("_home")
        if home is None:
            return None
        space, slot = home
        return space.emb[slot].copy()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__
        if "_home" in state:
            state = dict(state)
            del state["_home"]
        return state


@dataclass
class EpisodicMemory(_Record):
    """An episode. Seed 001's fields keep their places (``memory_id, step, content, cues, importance``);
    the seed's sixth, ``embedding``, is the read-only property of :class:`_Record` (the store keeps the
    vector in its matrix), so the fields after ``importance`` are keyword-only: a record built in the
    seed's positional order (``..., importance, embedding, links``) is a TypeError instead of a record
    with ``links=None`` and the seed's links as its ``key``."""

    memory_id: str
    step: int
    content: str
    cues: list[str] = field(default_factory=list)
    importance: float = 0.5
    _: KW_ONLY
    links: list[str] = field(default_factory=list)
    key: str | None = None
    tier: str = "fact"
    confidence: float = 1.0
    source: str | None = None
    evidence: list[str] = field(default_factory=list)
    written_at: int | None = None
    superseded_at: int | None = None
    namespace: str = "default"

    kind: ClassVar[str] = "episodic"

    def __post_init__(self) -> None:
        if self.written_at is None:
            self.written_at = self.step

    @property
    def active(self) -> bool:
        return self.superseded_at is None

    @property
    def text(self) -> str:
        return self.content


@dataclass
class SemanticMemory(_Record):
    """A semantic memory (a rule and the memories it rests on). Seed 001's fields keep their places
    (``memory_id, rule, derived_from, created_step, applications``); the fields added after them are
    keyword-only, as :class:`EpisodicMemory`'s are."""

    memory_id: str
    rule: str
    derived_from: list[str]
    created_step: int
    applications: int = 0
    _: KW_ONLY
    cues: list[str] = field(default_factory=list)
    importance: float = 0.6
    links: list[str] = field(default_factory=list)
    key: str | None = None
    tier: str = "inference"
    confidence: float = 0.7
    source: str | None = None
    evidence: list[str] = field(default_factory=list)
    written_at: int | None = None
    superseded_at: int | None = None
    namespace: str = "default"

    kind: ClassVar[str] = "semantic"

    def __post_init__(self) -> None:
        if self.written_at is None:
            self.written_at = self.created_step

    @property
    def content(self) -> str:
        return self.rule

    @property
    def text(self) -> str:
        return self.rule

    @property
    def step(self) -> int:
        return self.created_step

    @property
    def active(self) -> bool:
        return self.superseded_at is None


Record = EpisodicMemory | SemanticMemory

# (after @dataclass: the generated __init__ keeps the defaults; its assignments go through __set__)
for _cls in (EpisodicMemory, SemanticMemory):
    for _name in ("importance", "confidence", "tier"):
        setattr(_cls, _name, _ScoredField(_name))
del _cls, _name


def _set_scored(rec: Record, home: tuple[_Space, int], name: str, value: object) -> None:
    """Set the score field ``name`` of ``rec``, which lives at row ``home`` = (space, slot), on the
    record and in the space's arrays, after checking it as a write would (ValueError naming the field
    and the allowed values; nothing changes then)."""
    space, slot = home
    d = rec.__dict__
    if name == "importance":
        if not _is_finite_number(value) or value < 0:
            raise ValueError(f"importance must be a finite number >= 0, got {value!r} (memory {rec.memory_id!r})")
        value = float(value)
        d["importance"] = value
        space.importance[slot] = value
        return
    if name == "confidence":
        tier = d["tier"]
        _check_tier(tier, value)  # (names confidence: a number in [0, 1], < 0.8 for an inference)
        value = float(value)
    else:  # tier
        tier = value
        if tier not in TIERS:
            raise ValueError(f"tier must be one of {TIERS}, got {tier!r} (memory {rec.memory_id!r})")
        if tier == "inference" and d["confidence"] >= INFERENCE_MAX_CONFIDENCE:
            raise ValueError(f"tier: an 'inference' must have confidence < {INFERENCE_MAX_CONFIDENCE}, and memory "
                             f"{rec.memory_id!r} has confidence {d['confidence']!r}: lower its confidence first")
    d[name] = value
    space.conf_w[slot] = d["confidence"] if tier == "inference" else 1.0


@dataclass
class WriteReport:
    status: str  # "written" | "duplicate" | "superseded"
    memory_id: str
    duplicate_of: str | None = None
    superseded: str | None = None
    rule: str | None = None  # which dedup rule fired on a duplicate


@dataclass
class ErasureReport:
    """What `erase` removed, by kind. Holds ids, counts and content fingerprints, never content."""

    target: dict[str, Any]
    episodic: list[str] = field(default_factory=list)
    semantic: list[str] = field(default_factory=list)
    cascaded: list[str] = field(default_factory=list)  # removed because their evidence was erased
    keys: list[str] = field(default_factory=list)  # version chains removed entirely
    # the same chains as (namespace, key): a key names a chain only within its namespace, and a chain
    # whose versions had all left the store (forget, sweeps) counts too; readers that act on one
    # namespace (a rolling summary dropping the turns of an erased key) match these, not `keys`
    chains: list[tuple[str, str]] = field(default_factory=list)
    # ids of versions that had already left the store (forget, sweeps) before this erasure and that it
    # took out of their keys' histories (ids only, sorted): a rolling summary's turn written as such a
    # version before it got its key (supersede gives an unkeyed memory "chain:<id>") is matched by id
    gone: list[str] = field(default_factory=list)
    cue_nodes: int = 0  # a count: cue names are words of the erased text
    edges: int = 0
    embedding_rows: int = 0
    cache_entries: int = 0
    fingerprints: list[str] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # filled by erase hooks (e.g. summaries rebuilt)

    @property
    def removed_ids(self) -> list[str]:
        return self.episodic + self.semantic

    @property
    def total(self) -> int:
        return len(self.episodic) + len(self.semantic)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class EraseHookError(RuntimeError):
    """One or more erase hooks raised. The erasure itself is complete (``report`` says what went) and
    every hook ran; ``errors`` are the hooks' exceptions in hook order, ``namespaces`` the namespaces
    they name (an error with a ``namespace`` attribute, e.g. ``world.summary.SummaryRebuildError``)."""

    def __init__(self, report: ErasureReport, errors: list[Exception]) -> None:
        self.report = report
        self.errors = list(errors)
        self.namespaces = [e.namespace for e in self.errors if isinstance(getattr(e, "namespace", None), str)]
        parts = "; ".join(str(e) if str(e) else type(e).__name__ for e in self.errors)
        where = f" (namespaces {self.namespaces})" if self.namespaces else ""
        super().__init__(f"erase: the erasure is complete, but {len(self.errors)} erase hook(s) failed{where}: {parts}")


class EraseCacheError(RuntimeError):
    """The embedder's cache failed while an erasure dropped the erased texts from it (e.g. a corrupted
    cache file: ``world.embedding.CacheFileError`` naming the path). The store's erasure is complete:
    records, graph, embedding rows, counters, ``report`` and the erase hooks, and every cache drop was
    still tried (a ``CachedEmbedder`` forgets its entries in memory first); but copies of erased text
    may remain in the cache (its file): delete the file. ``errors`` are the cache's exceptions,
    ``hook_errors`` those of erase hooks that failed too (``EraseHookError`` is not raised then)."""

    def __init__(self, report: ErasureReport, errors: list[Exception], hook_errors: list[Exception] = ()) -> None:
        self.report = report
        self.errors = list(errors)
        self.hook_errors = list(hook_errors)
        first = str(self.errors[0]) or type(self.errors[0]).__name__
        more = f" (and {len(self.errors) - 1} more cache error(s))" if len(self.errors) > 1 else ""
        hooks = (f"; {len(self.hook_errors)} erase hook(s) failed too: "
                 + "; ".join(str(e) or type(e).__name__ for e in self.hook_errors)) if self.hook_errors else ""
        super().__init__(f"erase: the store's erasure is complete, but the embedder cache failed while dropping the "
                         f"erased texts, so copies of them may remain in it (delete its file): {first}{more}{hooks}")


# --------------------------------------------------------------------------- partition
class _Space:
    """One namespace: its rows, arrays, graph, key chains and dedup indexes."""

    #: ((step, version, decay), activations of the live rows in view order (read-only), that view's
    #: slots, their BaseLevelBatch, the activations by slot or None until asked for): see
    #: MemoryStore._activation_rows. A retrieval (``_bump``) sets it to None. (A class default as well:
    #: a space pickled before the cache existed has none.)
    acts: tuple[tuple[int, int, float], np.ndarray, np.ndarray, BaseLevelBatch, np.ndarray | None] | None = None
    #: True while ``recent_slots`` holds the slot of every write of this space, in write order (only
    #: ``_insert`` appended to it, none dropped off yet while it is shorter than its maxlen): its
    #: distinct slots newest first, once filtered by ``active``, are then the view's slots reversed,
    #: filtered the same way (a slot's last append is its current memory's write). A restored layout
    #: brings its own list (False from then on), and so does a space pickled before the flag existed.
    window_in_order = False

    def __init__(self, name: str, dim: int, k: int, embed_window: int | None, dedup_window: int = 0) -> None:
        self.name = name
        self.dim = dim
        self.k = k
        cap = 16
        self.emb = np.zeros((cap, dim), dtype=np.float32)
        self.alive = np.zeros(cap, dtype=bool)
        self.active = np.zeros(cap, dtype=bool)
        self.is_sem = np.zeros(cap, dtype=bool)
        self.importance = np.zeros(cap, dtype=np.float64)
        self.conf_w = np.ones(cap, dtype=np.float64)
        self.a_created = np.zeros(cap, dtype=np.float64)
        self.a_n = np.zeros(cap, dtype=np.int64)
        self.a_recent = np.full((cap, k), -np.inf, dtype=np.float64)  # -inf: no presentation
        self.gnode = np.full(cap, -1, dtype=np.int64)
        self.slot_id: list[str | None] = [None] * cap
        self.hi = 0
        self.free: list[int] = []
        self.graph = AssocGraph()
        self.order: dict[str, int] = {}  # id -> slot, write order
        self.version = 0
        self._view: tuple[int, list[str], np.ndarray] | None = None
        self.fp: dict[str, list[str]] = {}  # fingerprint -> active ids
        self.chains: dict[str, list[str]] = {}  # key -> ids, oldest first
        # key -> ids of the key's chain that left the store by forget or a sweep (oldest first), and
        # id -> key: a record may still cite such an id as evidence, and erasing the key (or the id)
        # must reach it (docs/store.md, "Forgetting and erasure")
        self.gone: dict[str, list[str]] = {}
        self.gone_key: dict[str, str] = {}
        self.fps: dict[str, str] = {}  # id -> content fingerprint (every live memory)
        # signatures of recently written memories (what the dedup window looks at); older ones are
        # recomputed from the text on demand: keeping all of them cost ~3.5 kB per memory
        self.sigs: dict[str, TextSignature] = {}
        self.sig_cap = 2 * max(64, embed_window or 0)
        # rows written last (dedup candidates); unused (kept empty) when the window is the whole namespace.
        # It spans both windows: the embedding rule's (embed_window) and the lexical rules'
        # (DedupConfig.window, ``dedup_window``), each cut to its own in MemoryStore._find_duplicate; sized
        # by embed_window alone, a smaller embed_window capped the lexical rules' window too
        self.recent_slots: deque[int] = deque(maxlen=max(embed_window, dedup_window) if embed_window else 0)
        self.embed_window = embed_window
        self.window_in_order = True
        self.acts = None

    @property
    def capacity(self) -> int:
        return len(self.alive)

    def _grow(self) -> None:
        cap = self.capacity * 2

        def grow(arr: np.ndarray, fill) -> np.ndarray:
            new = np.full((cap,) + arr.shape[1:], fill, dtype=arr.dtype)
            new[: len(arr)] = arr
            return new

        self.emb = grow(self.emb, 0.0)
        self.alive = grow(self.alive, False)
        self.active = grow(self.active, False)
        self.is_sem = grow(self.is_sem, False)
        self.importance = grow(self.importance, 0.0)
        self.conf_w = grow(self.conf_w, 1.0)
        self.a_created = grow(self.a_created, 0.0)
        self.a_n = grow(self.a_n, 0)
        self.a_recent = grow(self.a_recent, -np.inf)
        self.gnode = grow(self.gnode, -1)
        self.slot_id.extend([None] * (cap - len(self.slot_id)))

    def alloc(self, slot: int | None = None) -> int:
        if slot is not None:  # restoring a saved layout
            while slot >= self.capacity:
                self._grow()
            self.hi = max(self.hi, slot + 1)
            return slot
        if self.free:
            return self.free.pop()
        if self.hi == self.capacity:
            self._grow()
        self.hi += 1
        return self.hi - 1

    def view(self) -> tuple[list[str], np.ndarray]:
        """(ids in write order, their slots), cached until the space changes."""
        view = self._view
        if view is None or view[0] != self.version:
            ids = list(self.order)
            slots = np.fromiter(self.order.values(), dtype=np.int64, count=len(ids))
            view = self._view = (self.version, ids, slots)
        return view[1], view[2]

    def active_version(self, key: str, records: Mapping[str, Record]) -> Record | None:
        for mid in reversed(self.chains.get(key, ())):
            rec = records[mid]
            if rec.active:
                return rec
        return None


_MATVEC_BLOCK = 1024


_NEG_INF = -math.inf
_FLOAT32 = np.dtype(np.float32)  # (a native float32 array's dtype is this instance: an identity test)
_max_reduce = np.maximum.reduce
_min_reduce = np.minimum.reduce


def _matvec(mat: np.ndarray, vec: np.ndarray) -> np.ndarray:
    """mat @ vec in blocks of 1024 rows. Each block stays under OpenBLAS's threading threshold: on a
    busy machine a multi-threaded gemv was 10-50x slower than single-threaded blocks (measured), and
    the blocks give bit-identical results (each row is the same dot product)."""
    n = mat.shape[0]
    if n <= _MATVEC_BLOCK:
        return mat.dot(vec)  # (the same BLAS gemv as ``mat @ vec``, bit for bit, with less call overhead)
    out = np.empty(n, dtype=np.result_type(mat.dtype, vec.dtype))
    for start in range(0, n, _MATVEC_BLOCK):
        stop = min(n, start + _MATVEC_BLOCK)
        np.matmul(mat[start:stop], vec, out=out[start:stop])
    return out


def _top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """The positions of the ``k`` (1 <= k <= len) highest ``scores``, highest first, ties in position
    (write) order: the first k candidates of the partition at the k-th highest score, sorted by
    (-score, position). Without a NaN that is the first k of the stable argsort of -scores, one call
    instead of seven; a NaN (which never compares) keeps the partition route and what it gives."""
    top = _max_reduce(scores)  # (NaN if any score is)
    if top == top:
        return np.negative(scores).argsort(kind="stable")[:k]
    n = len(scores)
    if k < n:
        kth = scores.copy()
        kth.partition(n - k)  # (the method: np.partition adds a Python wrapper)
        cand = (scores >= kth[n - k]).nonzero()[0]
    else:
        cand = np.arange(n)
    return cand[np.lexsort((cand, -scores[cand]))][:k]


def _cue_node(cue: str) -> str:
    return _CUE + cue


def _is_number(value: object) -> bool:
    """A real number (Python or numpy), not a bool."""
    t = type(value)
    if t is float or t is int:  # the common case, one test (bool is a subclass of int, not int)
        return True
    return not isinstance(value, (bool, np.bool_)) and isinstance(value, (int, float, np.integer, np.floating))


def _is_finite_number(value: object) -> bool:
    """A finite real number (Python or numpy), not a bool. An int beyond float range (10**400) is not:
    math.isfinite and float() raise OverflowError on it, which escaped the checks unnamed."""
    try:
        return _is_number(value) and math.isfinite(value)
    except OverflowError:
        return False


def _finite(name: str, value: object, allowed: str = "a finite number") -> float:
    """``value`` as a float; ValueError naming the parameter unless it is a finite real number
    (NaN and inf would corrupt every later score, silently)."""
    if type(value) is float and value - value == 0.0:  # a finite float as it is (inf - inf and NaN give NaN)
        return value
    if not _is_finite_number(value):
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    return float(value)


def _int_at_least(name: str, value: object, low: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    return int(value)


#: steps are read as floats by ACT-R: beyond 2**53 they would not be exact (and 10**400 overflows float()
#: in the first sweep or query, after the clock has moved past any step the store would take back)
_STEP_MAX = 2**53


def _id_list(name: str, ids: object, none: str = "") -> list:
    """``ids`` (a list or other iterable of memory ids) as a new list; ValueError naming ``name`` for
    something that is no iterable (an int, None where it is not allowed). ``none``: what the message
    adds about None. The ids themselves are checked by ``MemoryStore._check_refs``."""
    try:
        return list(ids)  # type: ignore[call-overload]
    except TypeError:
        raise ValueError(f"{name} must be a list of memory ids{none}, got {ids!r}") from None


def _ids_arg(method: str, ids: object, none: str = "") -> list:
    """The ``ids`` argument of ``method`` (a list or other iterable of memory ids) as a new list;
    ValueError naming the method and ``ids`` for a string (it was read letter by letter: KeyError
    "unknown memory id 'e'") or something that is no iterable (a bare TypeError before)."""
    if type(ids) is not list and isinstance(ids, str):  # (a list: one test)
        raise ValueError(f"{method}: ids must be a list of memory ids, not a string, got {ids!r}")
    return _id_list(f"{method}: ids", ids, none)


def _relation(relation: object) -> str:
    """A typed link's relation as its name (a RelationType or its value); ValueError naming the
    allowed ones otherwise."""
    rel = relation.value if isinstance(relation, RelationType) else relation
    if rel not in _TYPED:
        raise ValueError(f"relation must be one of {sorted(_TYPED)}, got {relation!r}")
    return rel


def _check_step(step: object, name: str = "step") -> int:
    if type(step) is int and -_STEP_MAX <= step <= _STEP_MAX:  # (every step the world passes: one test)
        return step
    if isinstance(step, (bool, np.bool_)) or not isinstance(step, (int, np.integer)):
        raise ValueError(f"{name} must be an int (a world step), got {step!r}")
    if not -_STEP_MAX <= step <= _STEP_MAX:
        raise ValueError(f"{name} must be an int of at most 2**53 in size (a world step), got {step!r}")
    return int(step)


# The store's configuration checks: the constructor runs them, and so does assigning the attribute
# later (MemoryStore's properties), so that a running store never holds a value its constructor, and
# so ``load`` (which rebuilds the store through it), would refuse. Each returns the value to keep.
def _check_forget_threshold(value: object) -> float:
    return _finite("forget_threshold", value)


def _check_decay(value: object) -> float:
    if not _is_number(value) or not 0.0 < value < 1.0:  # (NaN fails the range test)
        raise ValueError(f"decay must be a number in (0, 1), got {value!r}")
    return float(value)


def _check_ppr_alpha(value: object) -> object:
    if not _is_number(value) or not 0.0 < value < 1.0:
        raise ValueError(f"ppr_alpha must be a number in (0, 1), got {value!r}")
    return value


def _check_ppr_tol(value: object) -> object:
    if not _is_finite_number(value) or not 0.0 < value:
        raise ValueError(f"ppr_tol must be a finite number > 0, got {value!r}")
    return value


def _check_embed_window(value: object) -> object:
    if value is not None:
        _int_at_least("embed_window (None: the whole namespace)", value, 1)
    return value


def _check_ppr_fallback(value: object) -> object:
    if value not in ("solve", "raise"):
        raise ValueError(f"ppr_fallback must be 'solve' or 'raise', got {value!r}")
    return value


def _check_namespace_name(value: object, name: str = "namespace") -> str:
    if not isinstance(value, str) or not value or value == ALL_NAMESPACES:
        raise ValueError(f"{name} must be a non-empty string other than '*', got {value!r}")
    return value


def _count_check(name: str) -> Callable[[object], object]:
    """The check of a count ``name`` (an int >= 1), returning the value as given."""

    def check(value: object) -> object:
        _int_at_least(name, value, 1)
        return value

    return check


def _config_property(name: str, check: Callable[[object], object], doc: str) -> property:
    """A store configuration attribute ``name`` kept in ``_<name>``: a read is a C-level attribute fetch
    (operator.attrgetter; the store's own hot paths read ``_<name>`` directly), an assignment keeps
    ``check(value)``, the constructor's check (ValueError naming the attribute; nothing changes then)."""
    private = "_" + name

    def fset(self: MemoryStore, value: object) -> None:
        setattr(self, private, check(value))

    return property(attrgetter(private), fset, doc=doc)


def _check_cues(cues: object) -> list[str] | None:
    """A write's or query's ``cues`` as a list, or None; ValueError naming ``cues`` unless None or an
    iterable of strings. A string would be iterated letter by letter (no cue node: PPR silently off), a
    generator consumed by the check itself: the caller uses the list returned."""
    if cues is None:
        return None
    if type(cues) is not list and (isinstance(cues, str) or not isinstance(cues, Iterable)):  # (a list: one test)
        raise ValueError(f"cues must be a list of strings or None, got {cues!r}")
    out = list(cues)
    try:  # (str.join refuses exactly what is not a str: one C call checks every cue)
        joined = "".join(out)
    except TypeError:
        raise ValueError(f"cues must be a list of strings or None, got {cues!r}") from None
    if ":" in joined:  # (one scan for the usual cues; the exact rule only when a colon is there)
        for c in out:
            if not cue_name_ok(c):
                # store.graph names namespace N's cue node "cue::N::<cue>" and the default namespace's
                # "cue::<cue>": with no "::" in a cue nor a leading ":", the last "::" of a name splits
                # it one way only, so no two (namespace, cue) pairs share a node (extract_cues never
                # gives such a cue: it reads "a::b" in a text as "a:b")
                raise ValueError(f"cues: a cue must not contain '::' nor begin with ':' (it would share its "
                                 f"store.graph node name with another namespace's cue), got {c!r}")
    if not joined.isascii():  # in NFC, as extracted cues are (an NFD cue met no query's cue)
        out = nfc_cues(out)
    return out


def _legacy_source(source: object) -> str | None:
    """A ``source`` read from a file, as writes take one now (None or a string). The previous release
    (same file format) kept any value, and JSON turned a tuple into a list: a list becomes its items
    joined by "/" (("chat", "tg") -> "chat/tg"), any other value its ``str()``."""
    if source is None or isinstance(source, str):
        return source
    if isinstance(source, list):
        return "/".join(x if isinstance(x, str) else str(x) for x in source)
    return str(source)


def _legacy_record(d: dict[str, Any]) -> None:
    """Migrate, in place, a record read from a file to what writes take now. The previous release
    (same file format 1) kept a ``source`` of any type (a tuple came back a list: ``_legacy_source``)
    and cited ids of any type (``evidence=[5]``: each becomes its ``str()``, "5"), which the write
    checks of a supersession inheriting them then refused, naming a field its caller never passed.
    Its cues could hold "::" ("std::vector", extracted, or a caller's "alice::tea") or begin with
    ":": they are rewritten by today's rule (_check_cues, extract_cues: a run of colons is one, a
    leading ':' goes; a cue left empty or repeated is dropped), before the graph is built, so that
    queries reach them (the query's cue is "std:vector" now) and store.graph keeps namespaces apart.
    Cues are put in Unicode NFC, as extraction and writes now give them (the content's fingerprint is
    recomputed on load anyway, by ``signature``)."""
    cues = d.get("cues")
    if cues and ":" in "".join(cues) and not all(cue_name_ok(c) for c in cues):
        fixed = (colon_rule(c) for c in cues)
        d["cues"] = cues = list(dict.fromkeys(c for c in fixed if c))
    if cues:  # in NFC (releases before session 15 kept an NFD text's cues in NFD: no query reached them)
        d["cues"] = nfc_cues(cues)
    source = d.get("source")
    if source is not None and not isinstance(source, str):
        d["source"] = _legacy_source(source)
    for name in ("evidence", "derived_from"):
        ids = d.get(name)
        if ids and not all(isinstance(m, str) for m in ids):
            d[name] = [m if isinstance(m, str) else str(m) for m in ids]


def _check_layout(name: str, lay: object) -> dict[str, Any]:
    """A saved namespace row layout (``_export_state()["meta"]["layout"][name]``), checked: a file can
    pass its checksums and still put two memories in one row, or list a live row as free (the next
    write would then overwrite a live memory's vector). Returns it with plain ints; ValueError naming
    the namespace and the field otherwise."""
    where = f"layout of namespace {name!r}"
    if not isinstance(lay, Mapping):
        raise ValueError(f"{where}: must be an object, got {type(lay).__name__}")
    missing = [k for k in ("capacity", "hi", "free", "slots", "recent_slots") if k not in lay]
    if missing:
        raise ValueError(f"{where}: lacks {', '.join(missing)}")

    def whole(field: str, value: object, low: int, high: int) -> int:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or not low <= value < high:
            raise ValueError(f"{where}: {field} must be an int in [{low}, {high}), got {value!r}")
        return int(value)

    hi = whole("hi", lay["hi"], 0, 2**40)
    # rows grow from 16 by doubling when full, so the capacity is the smallest such size >= hi
    cap = whole("capacity", lay["capacity"], max(hi, 1), max(16, 2 * hi) + 1)
    slots, free, recent = lay["slots"], lay["free"], lay["recent_slots"]
    if not isinstance(slots, Mapping):
        raise ValueError(f"{where}: slots must be an object (id -> row), got {type(slots).__name__}")
    if not isinstance(free, list) or not isinstance(recent, list):
        raise ValueError(f"{where}: free and recent_slots must be lists")
    owner: dict[int, str] = {}
    for mid, slot in slots.items():
        slot = whole(f"slots[{mid!r}]", slot, 0, hi)
        if slot in owner:
            raise ValueError(f"{where}: row {slot} is the slot of both {owner[slot]!r} and {mid!r}")
        owner[slot] = mid
    free = [whole("free", f, 0, hi) for f in free]
    if len(set(free)) != len(free):
        raise ValueError(f"{where}: the free list names a row twice")
    for f in free:
        if f in owner:
            raise ValueError(f"{where}: row {f} is in the free list but holds {owner[f]!r}")
    recent = [whole("recent_slots", r, 0, hi) for r in recent]
    return {**lay, "capacity": cap, "hi": hi, "free": free, "recent_slots": recent,
            "slots": {m: int(v) for m, v in slots.items()}}


def _check_unicode(name: str, value: str) -> None:
    """ValueError naming the field if ``value`` holds a lone surrogate (half of a UTF-16 pair, e.g. a
    text cut in the middle of an emoji by a UTF-16 API): Python keeps it, but it has no UTF-8 form, so
    the store could not be saved (world/persistence.py) nor the text kept in a cache file."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{name} must be valid Unicode text: it holds a lone surrogate {value[exc.start]!r} at "
                         f"position {exc.start} (half of a UTF-16 pair), which has no UTF-8 form") from None


def _subject_name(subject: str) -> str:
    """An erasure's ``subject`` as it is matched: trailing slashes removed, since the key prefix as keys
    are written ("alice/", "user:42/") names the same subject as "alice" (it matched no key, the keys
    being "alice/..." and not "alice//...", and the erasure silently removed nothing), and in Unicode NFC
    when it is not plain ASCII, as cues and words are. ValueError for a subject of slashes only."""
    name = subject.rstrip("/")
    if not name.strip():
        raise ValueError(f"erase: subject must name a subject (a key prefix such as 'alice' or 'alice/', or "
                         f"words), got {subject!r}")
    return name if name.isascii() else unicodedata.normalize("NFC", name)


def _key_of_subject(key: str, subject: str) -> bool:
    """``key`` is the subject's (lower-cased ``subject``): the subject itself or under it, "<subject>/...",
    in any letter case, compared in NFC (the subject is: ``_subject_name``)."""
    k = key.lower()
    if not k.isascii():
        k = unicodedata.normalize("NFC", k)
    return k == subject or k.startswith(subject + "/")


def _check_tier(tier: str, confidence: float) -> None:
    if type(confidence) is float and 0.0 <= confidence <= 1.0 and (tier == "fact" or tier == "preference"):
        return  # (the usual write: one test; an inference's cap is checked below)
    if tier not in TIERS:
        raise ValueError(f"tier must be one of {TIERS}, got {tier!r}")
    # (compared as given: float() of an int beyond float range, 10**400, raised OverflowError)
    if not _is_number(confidence) or not 0.0 <= confidence <= 1.0:
        raise ValueError(f"confidence must be a number in [0, 1], got {confidence!r}")
    if tier == "inference" and confidence >= INFERENCE_MAX_CONFIDENCE:
        raise ValueError(
            f"confidence: an 'inference' must have confidence < {INFERENCE_MAX_CONFIDENCE}, got {confidence!r}"
        )


#: the store's attributes that are checked properties over ``_<name>`` (a pickle of an earlier release
#: holds them as plain attributes: ``MemoryStore.__setstate__``)
_CONFIG_NAMES = ("current_step", "forget_threshold", "decay", "actr_k", "max_cues", "ppr_alpha", "ppr_max_iter",
                 "ppr_tol", "ppr_fallback", "embed_window", "default_namespace")


# --------------------------------------------------------------------------- store
class MemoryStore:
    """Unified episodic + semantic store with HippoRAG-style retrieval and ACT-R forgetting.

    Arguments: `embedder` (default: cached `HashingEmbedder(256)`), `forget_threshold` (sweep drops
    memories with B + importance below it), `decay` (ACT-R d), `actr_k` (presentations kept exact in
    Petrov's hybrid), `dedup` (True / False / a `DedupConfig`), `importance_scorer` (used when a
    write passes importance=None), `namespace` (the default namespace).
    """

    def __init__(
        self,
        embedder=None,
        forget_threshold: float = -5.0,
        *,
        decay: float = 0.5,
        actr_k: int = 8,
        dedup: bool | DedupConfig = True,
        importance_scorer: Scorer | None = None,
        namespace: str = "default",
        max_cues: int = 8,
        ppr_alpha: float = 0.85,
        ppr_max_iter: int = 100,
        ppr_tol: float = 1.0e-6,
        ppr_fallback: str = "solve",
        embed_window: int | None = 512,
    ) -> None:
        # every parameter checked before anything is built (NaN / inf rejected by name), by the checks
        # that assigning the attribute later runs too (the properties below)
        forget_threshold = _check_forget_threshold(forget_threshold)
        decay = _check_decay(decay)
        _int_at_least("actr_k", actr_k, 1)
        _int_at_least("max_cues", max_cues, 1)
        _check_ppr_alpha(ppr_alpha)
        _int_at_least("ppr_max_iter", ppr_max_iter, 1)
        _check_ppr_tol(ppr_tol)
        _check_embed_window(embed_window)
        _check_ppr_fallback(ppr_fallback)
        _check_namespace_name(namespace)
        self.embedder = embedder if embedder is not None else CachedEmbedder(HashingEmbedder(256))
        # the configuration, read on hot paths through these private attributes (the public names are
        # properties whose setters check a value as the constructor does: see _CONFIG_DOC)
        self._forget_threshold = forget_threshold
        self._decay = decay
        self._actr_k = actr_k
        if dedup is True:
            self.dedup_config: DedupConfig | None = DedupConfig()
        elif dedup is False or dedup is None:
            self.dedup_config = None
        elif isinstance(dedup, DedupConfig):
            self.dedup_config = dedup
        else:
            raise ValueError(f"dedup must be True, False or a DedupConfig, got {dedup!r}")
        if importance_scorer is not None and not callable(getattr(importance_scorer, "score", None)):
            raise ValueError(f"importance_scorer must have a score(text, query=None) method (world.importance.Scorer), "
                             f"got {type(importance_scorer).__name__}")
        self.importance_scorer: Scorer = importance_scorer if importance_scorer is not None else ImportanceScorer()
        self._default_namespace = namespace
        self._max_cues = max_cues
        self._ppr_alpha = ppr_alpha
        self._ppr_max_iter = ppr_max_iter
        self._ppr_tol = ppr_tol
        self._ppr_fallback = ppr_fallback
        self._embed_window = embed_window
        self._current_step = 0
        self._episodic: dict[str, EpisodicMemory] = {}
        self._semantic: dict[str, SemanticMemory] = {}
        self._records: dict[str, Record] = {}
        self._loc: dict[str, tuple[_Space, int]] = {}
        self._spaces: dict[str, _Space] = {}
        self._counters = {"ep": 0, "sem": 0}
        self._dim: int | None = getattr(self.embedder, "dim", None)
        self._erase_hooks: list[Callable[[ErasureReport], Any]] = []
        self._graph_view: tuple[tuple, nx.DiGraph] | None = None
        self.counters = {"ppr_power": 0, "ppr_solve": 0, "duplicates": 0, "superseded": 0, "swept": 0, "erased": 0}
        # bumps whenever typed links may have changed (a link added, a memory removed): a cache key for
        # readers that count links (the env's candidate features)
        self._link_changes = 0
        self.last_write: WriteReport | None = None
        self.last_ppr_method: str | None = None
        #: JSON-able state of attached components (e.g. rolling summaries); exported under "extra".
        self.extra_state: dict[str, Any] = {}
        # memory id -> texts merged into that memory as duplicates with other wording (each embedded,
        # so cached, before dedup found the match): an erasure of the memory drops them from the cache
        self._merged: dict[str, list[str]] = {}
        #: attached components with to_state() -> JSON-able / from_state(state); exported under "extra".
        self.extras: dict[str, Any] = {}

    # ------------------------------------------------------------------ clock and basics
    def tick(self, step: int) -> None:
        """Move the clock to ``step`` (an int, never backwards: ACT-R lags are measured from it)."""
        if type(step) is int and -_STEP_MAX <= self._current_step <= step <= _STEP_MAX:  # (every world step: one test)
            self._current_step = step
            return
        self._move_clock(step, "step")

    def _move_clock(self, step: object, name: str) -> None:
        """``tick``'s checks, naming ``name``: an int of at most 2**53 in size, never below the clock."""
        step = _check_step(step, name)
        if step < self._current_step:
            raise ValueError(f"{name} must be >= the current step {self._current_step} (the clock never goes back), "
                             f"got {step!r}")
        self._current_step = step

    @property
    def current_step(self) -> int:
        """The clock (seed 001's attribute). Setting it is ``tick``: an int, never backwards (a ValueError
        naming ``current_step`` otherwise; the clock stays). Unchecked, "abc" or a step back was taken,
        saved, and broke the store later (a loaded "abc" failed the next tick)."""
        return self._current_step

    @current_step.setter
    def current_step(self, step: int) -> None:
        self._move_clock(step, "current_step")

    # Configuration (seed 001's forget_threshold and the constructor's other arguments): each is checked
    # when assigned as the constructor checks it. Unchecked, a NaN threshold silently turned every sweep
    # off, and save() wrote a value that load() (rebuilding the store through the constructor) refused,
    # leaving the data recoverable only by editing the file.
    forget_threshold = _config_property(
        "forget_threshold", _check_forget_threshold,
        "Sweeps drop a memory whose B + importance is below it: a finite number (seed 001's attribute).")
    decay = _config_property("decay", _check_decay, "ACT-R decay d: a number in (0, 1), kept as a float.")
    max_cues = _config_property("max_cues", _count_check("max_cues"),
                                "Cues extracted per write and query: an int >= 1.")
    ppr_alpha = _config_property("ppr_alpha", _check_ppr_alpha, "PageRank damping: a number in (0, 1).")
    ppr_max_iter = _config_property("ppr_max_iter", _count_check("ppr_max_iter"),
                                    "PageRank power iterations at most: an int >= 1.")
    ppr_tol = _config_property("ppr_tol", _check_ppr_tol, "PageRank tolerance: a finite number > 0.")
    ppr_fallback = _config_property("ppr_fallback", _check_ppr_fallback,
                                    "What a PageRank that does not converge does: 'solve' or 'raise'.")
    default_namespace = _config_property(
        "default_namespace", lambda v: _check_namespace_name(v, "default_namespace"),
        "The namespace of methods called with namespace=None: a non-empty string other than '*'.")

    @property
    def actr_k(self) -> int:
        """Presentation times kept exact per memory (Petrov's hybrid folds older ones). Fixed once a
        namespace exists: its ACT-R arrays hold actr_k times per memory (see ``_fixed_once_built``)."""
        return self._actr_k

    @actr_k.setter
    def actr_k(self, value: int) -> None:
        _int_at_least("actr_k", value, 1)
        self._fixed_once_built("actr_k", value, self._actr_k)
        self._actr_k = value

    @property
    def embed_window(self) -> int | None:
        """Writes the embedding dedup rule looks back over (None: the whole namespace). Fixed once a
        namespace exists: its dedup window is sized by it (see ``_fixed_once_built``)."""
        return self._embed_window

    @embed_window.setter
    def embed_window(self, value: int | None) -> None:
        _check_embed_window(value)
        self._fixed_once_built("embed_window", value, self._embed_window)
        self._embed_window = value

    def _fixed_once_built(self, name: str, value: object, current: object) -> None:
        """ValueError unless ``value`` equals ``current`` or the store has no namespace yet. A namespace
        sizes its arrays (actr_k) and its window of recent writes (embed_window) when it is created: a
        change afterwards reached only namespaces created later, and a saved-and-reloaded copy (which
        builds every namespace with the new value) then ranked and deduplicated otherwise."""
        if self._spaces and value != current:
            raise ValueError(f"{name} cannot change once the store holds a namespace (it sizes each namespace's "
                             f"state when the namespace is created): it is {current!r}, got {value!r}; pass "
                             f"{name}= to MemoryStore")

    @property
    def episodic(self) -> Mapping[str, EpisodicMemory]:
        return types.MappingProxyType(self._episodic)

    @property
    def semantic(self) -> Mapping[str, SemanticMemory]:
        return types.MappingProxyType(self._semantic)

    @property
    def actr(self) -> dict[str, ActRRecord]:
        """ACT-R state of every live memory, as ActRRecord snapshots."""
        return self.actr_of(self._loc)

    def actr_of(self, ids: Iterable[str]) -> dict[str, ActRRecord]:
        """ACT-R state of the live memories ``ids``, as ActRRecord snapshots (ValueError for ``ids`` that
        are no list of ids, KeyError naming an id that is not live)."""
        out = {}
        loc = self._loc
        for mid in _ids_arg("actr_of", ids):
            if mid not in loc:
                raise KeyError(f"actr_of: {mid!r} is no live memory")
            space, slot = loc[mid]
            n = int(space.a_n[slot])
            recent = [float(t) for t in space.a_recent[slot] if math.isfinite(t)]
            out[mid] = ActRRecord(
                created_step=int(space.a_created[slot]), decay_rate=self._decay, k=self._actr_k, n=n, recent=recent
            )
        return out

    def get(self, memory_id: str) -> Record | None:
        return self._records.get(memory_id)

    def __contains__(self, memory_id: object) -> bool:
        return memory_id in self._records

    def __len__(self) -> int:
        return len(self._records)

    def namespaces(self) -> list[str]:
        return [n for n, s in self._spaces.items() if s.order]

    def namespace(self, name: str) -> NamespaceView:
        if not isinstance(name, str) or not name or name == ALL_NAMESPACES:
            raise ValueError(f"namespace must be a non-empty string other than '*', got {name!r}")
        return NamespaceView(self, name)

    def _ns(self, namespace: str | None) -> str:
        if namespace is None:
            return self._default_namespace
        if not isinstance(namespace, str) or not namespace or namespace == ALL_NAMESPACES:
            raise ValueError(f"namespace must be a non-empty string other than '*', got {namespace!r}")
        return namespace

    def _space(self, name: str, create: bool = False) -> _Space | None:
        space = self._spaces.get(name)
        if space is None and create:
            if self._dim is None:
                self._dim = int(self.embed("dimension probe").shape[0])
            space = _Space(name, self._dim, self._actr_k, self._embed_window, self._dedup_window())
            self._spaces[name] = space
        return space

    # ------------------------------------------------------------------ embedding helpers
    def embed(self, text: str) -> np.ndarray:
        """Unit float32 embedding of `text` through the embedder (and its cache). A lone surrogate is
        refused as by a write (a `ValueError` naming `text`; it has no UTF-8 form to hash or cache), and
        so is a vector holding NaN or inf from an embedder that does not declare `unit_norm` (a
        `ValueError` naming the embedder and the text, raised before a write or query changes anything).
        Such an embedder's vector is normalised in float32, or in float64 before the cast where its float32
        norm is out of range (see `_unit`)."""
        if isinstance(text, str) and not text.isascii():
            _check_unicode("text", text)
        embedder = self.embedder
        # an embedder whose vectors are unit to float32 rounding (unit_norm) would pass the test in
        # _unit unchanged: skip it
        if getattr(embedder, "unit_norm", False):
            vec = embedder.encode(text)
            if type(vec) is not np.ndarray or vec.dtype is not _FLOAT32 or vec.ndim != 1 or not vec.flags.c_contiguous:
                # (a contiguous 1-D native float32 array, the usual answer, is taken as it is: asarray
                # and ravel would only wrap it in a view)
                vec = np.asarray(vec, dtype=np.float32).ravel()
        else:
            vec = self._unit(embedder.encode(text), text)
        if self._dim is None:
            self._dim = int(vec.shape[0])
        elif vec.shape[0] != self._dim:
            raise ValueError(f"embedder returned dimension {vec.shape[0]}, store uses {self._dim}")
        return vec

    def _unit(self, out: object, text: str) -> np.ndarray:
        """The embedder's output ``out`` as a unit float32 vector (a vector unit within 1e-4 is kept as it
        is, a zero vector stays zero): in float32 where its norm is a normal float32 number, else
        normalised in float64 and then cast. Cast first and normalised in float32, a finite vector
        beyond float32's range (1e39) became inf and was refused, and the squares of tiny entries (1e-23)
        underflowed: the vector came out unnormalised. A NaN or inf entry is a ValueError naming the
        embedder and the text, before anything is written (a NaN row scored NaN against every query,
        which then returned fewer than top_k)."""
        with np.errstate(over="ignore", invalid="ignore"):  # (out of float32's range: the path below)
            vec = np.asarray(out, dtype=np.float32).ravel()
            n32 = float(np.sqrt(vec.dot(vec)))
        if 1e-15 < n32 < math.inf:
            # the usual range: in float32, exactly as the previous release computed it (stored vectors
            # and query scores stay bit-identical); unit within 1e-4 (MiniLM): as given, not even copied
            return vec / n32 if abs(n32 - 1.0) > 1e-4 else vec
        wide = np.asarray(out, dtype=np.float64).ravel()
        with np.errstate(over="ignore"):  # (entries beyond ~1e154 square past float64: handled below)
            norm = math.sqrt(float(wide.dot(wide)))
        if 1e-150 < norm < 1e150:
            return (wide / norm).astype(np.float32)
        # the rare path: NaN / inf, squares past float64's range, or a zero vector
        top = float(np.abs(wide).max()) if wide.size else 0.0
        if not math.isfinite(top):
            raise not_finite_error(getattr(self.embedder, "name", type(self.embedder).__name__), wide, text)
        if top == 0.0:
            return wide.astype(np.float32)
        wide = wide / top  # (largest entry 1: the norm is in [1, sqrt(dim)])
        return (wide / math.sqrt(float(wide.dot(wide)))).astype(np.float32)

    def _group(self, id_list: list[str]) -> list[tuple[_Space, np.ndarray, np.ndarray | None]]:
        """Group ids by namespace: [(space, slots, positions or None when all ids share one space)]."""
        loc = self._loc
        try:
            pairs = [loc[m] for m in id_list]
        except KeyError:
            bad = next(m for m in id_list if m not in loc)
            raise KeyError(f"unknown memory id {bad!r}") from None
        except TypeError:  # (an unhashable item: a list inside the list)
            bad = next(m for m in id_list if not isinstance(m, str))
            raise ValueError(f"ids must hold memory ids (strings), got {bad!r}") from None
        if not pairs:
            return []
        first = pairs[0][0]
        if all(p[0] is first for p in pairs):  # the common case: one namespace
            return [(first, np.fromiter((p[1] for p in pairs), dtype=np.int64, count=len(pairs)), None)]
        groups: dict[int, tuple[_Space, list[int], list[int]]] = {}
        for pos, (space, slot) in enumerate(pairs):
            g = groups.setdefault(id(space), (space, [], []))
            g[1].append(slot)
            g[2].append(pos)
        return [(sp_, np.asarray(sl, dtype=np.int64), np.asarray(ps, dtype=np.int64)) for sp_, sl, ps in groups.values()]

    def similarities(self, vec: np.ndarray, ids: Iterable[str] | None = None, namespace: str | None = None):
        """(ids, cosine similarities) of `vec` against live memories: one mat-vec.

        ids=None: every live memory of the namespace (write order). Otherwise the given ids, a list
        (any iterable) of ids: KeyError on an unknown id, ValueError naming ``ids`` for a single id
        string or something that is no iterable. ``vec``: a 1-d vector of the store's embedding
        dimension (ValueError naming ``vec`` otherwise).
        """
        vec = np.asarray(vec, dtype=np.float32)
        if vec.ndim != 1 or (self._dim is not None and vec.shape[0] != self._dim):
            raise ValueError(f"vec must be a 1-d vector of the store's embedding dimension "
                             f"{self._dim if self._dim is not None else '(any until the first write)'}, "
                             f"got shape {vec.shape}")
        if ids is None:
            space = self._space(self._ns(namespace))
            if space is None or not space.order:
                return [], np.zeros(0, dtype=np.float64)
            id_list, slots = space.view()
            sims = _matvec(space.emb[: space.hi], vec)
            return list(id_list), sims[slots].astype(np.float64)
        id_list = _ids_arg("similarities", ids, " or None")
        out = np.empty(len(id_list), dtype=np.float64)
        for space, slots, positions in self._group(id_list):
            vals = space.emb[slots] @ vec
            if positions is None:
                out[:] = vals
            else:
                out[positions] = vals
        return id_list, out

    def _ranked(self, vec: np.ndarray, limit: int) -> tuple[list[str], list[int]]:
        """(ids of the default namespace in write order, the positions of the ``limit`` most similar
        to the unit vector ``vec``, most similar first, ties in write order): what
        ``np.argsort(-similarities(vec)[1], kind="stable")[:limit]`` gives, without the float64 copy
        (float32 -> float64 is exact and monotone, so the stable order is the same)."""
        space = self._space(self._default_namespace)
        if space is None or not space.order:
            return [], []
        id_list, slots = space.view()
        if type(vec) is not np.ndarray or vec.dtype != np.float32:  # (the event's vector already is)
            vec = np.asarray(vec, dtype=np.float32)
        sims = _matvec(space.emb[: space.hi], vec).take(slots)  # (take: the rows of [slots], one call cheaper)
        np.negative(sims, out=sims)
        order = sims.argsort(kind="stable")
        return id_list, (order if limit >= len(order) else order[:limit]).tolist()

    def activations(self, ids: Iterable[str]) -> np.ndarray:
        """ACT-R base-level activation (Petrov hybrid, exact for n <= k) at current_step of the memories
        ``ids``, a list (any iterable) of ids: KeyError on an unknown id, ValueError naming ``ids`` for a
        single id string or something that is no iterable."""
        id_list = _ids_arg("activations", ids)
        out = np.empty(len(id_list), dtype=np.float64)
        for space, slots, positions in self._group(id_list):
            vals = self._activation_rows(space, slots)
            if positions is None:
                out[:] = vals
            else:
                out[positions] = vals
        return out

    def _activation_rows(self, space: _Space, slots: np.ndarray) -> np.ndarray:
        """Activations of the given live slots at current_step (a read-only array), from every live row's,
        computed once per (step, space version, decay) and kept in ``space.acts`` until then: one step
        reads them up to three times (the sweep, the observation, a QUERY). The rows' step-independent
        work (:class:`world.actr.BaseLevelBatch`) is kept as well while the version and decay stay and
        no retrieval bumps a row, i.e. across steps that only move the clock. Exact: a row's activation
        does not depend on the other rows of its batch (tests/test_actr.py checks row by row), the ACT-R
        arrays change only with the space's version (writes, removals) or a bump (which drops the
        cache), and the cache holds numbers only, no text."""
        key = (self._current_step, space.version, self._decay)
        cached = space.acts
        batch = None
        if cached is not None and len(cached) == 5:  # (a space pickled before held (key, by_slot))
            if cached[0] == key:
                if slots is cached[2]:
                    return cached[1]
                return self._activations_by_slot(space, cached)[slots]
            if cached[0][1] == key[1] and cached[0][2] == key[2]:
                batch = cached[3]
        _, live = space.view()
        if batch is None:
            # (take for the 2-d rows: the same rows as fancy indexing, about a microsecond less)
            batch = BaseLevelBatch(space.a_created[live], space.a_n[live], space.a_recent.take(live, axis=0),
                                   d=self._decay, assume_no_nan=True)  # (the store pads with -inf)
        vals = batch.at(float(self._current_step))
        vals.setflags(write=False)  # (handed to every reader of this step)
        cached = space.acts = (key, vals, live, batch, None)
        return vals if slots is live else self._activations_by_slot(space, cached)[slots]

    @staticmethod
    def _activations_by_slot(space: _Space, cached: tuple) -> np.ndarray:
        """The activations of ``space.acts`` indexed by slot (NaN at dead slots, never asked for),
        built when a reader first asks for other slots than the live view's."""
        by_slot = cached[4]
        if by_slot is None:
            by_slot = np.empty(space.hi)
            by_slot.fill(np.nan)  # (np.full adds a Python wrapper)
            by_slot[cached[2]] = cached[1]
            space.acts = cached[:4] + (by_slot,)
        return by_slot

    def link_count(self, memory_id: str) -> int:
        """Typed links (not cue / provenance edges) touching the memory, both directions."""
        space, _ = self._locate(memory_id)
        n = 0
        for _, rel, _w in space.graph.out_edges(memory_id):
            n += rel in _TYPED
        for _, rel, _w in space.graph.in_edges(memory_id):
            n += rel in _TYPED
        return n

    def recent_ids(self, n: int, namespace: str | None = None, active_only: bool = False) -> list[str]:
        """The n most recently written live ids of the namespace, newest first (an int n; none for
        n <= 0; ValueError naming ``n`` for anything else)."""
        if type(n) is not int and (isinstance(n, bool | np.bool_) or not isinstance(n, int | np.integer)):
            raise ValueError(f"n must be an int (how many ids; none for n <= 0), got {n!r}")
        # (the default namespace without two method calls: the env reads it twice per step)
        space = self._spaces.get(self._default_namespace if namespace is None else self._ns(namespace))
        if space is None or n <= 0:
            return []
        if not active_only:
            return list(islice(reversed(space.order), n))
        out = []
        for mid in reversed(space.order):
            if self._records[mid].active:
                out.append(mid)
                if len(out) == n:
                    break
        return out

    def _locate(self, memory_id: str) -> tuple[_Space, int]:
        try:
            return self._loc[memory_id]
        except KeyError:
            raise KeyError(f"unknown memory id {memory_id!r}") from None

    # ------------------------------------------------------------------ write
    def _next_id(self, kind: str) -> str:
        self._counters[kind] += 1
        return f"{kind}_{self._counters[kind]:06d}"

    def _importance(self, importance: float | None, text: str) -> float:
        if importance is None:
            score = self.importance_scorer.score(text)
            # a scorer's NaN would never be swept and poison every query score; a negative one would
            # sweep the memory at once: refused, as an importance passed directly would be
            if not _is_finite_number(score) or score < 0:
                raise ValueError(f"importance_scorer: {type(self.importance_scorer).__name__}.score returned "
                                 f"{score!r}; an importance must be a finite number >= 0")
            return float(score)
        if type(importance) is float and 0.0 <= importance < math.inf:  # (the usual value: one test; NaN fails)
            return importance
        # numpy numbers too, as for confidence and steps (_is_number; the stored value is a float)
        if not _is_finite_number(importance):
            raise ValueError(f"importance must be a finite number >= 0 or None, got {importance!r}")
        if importance < 0:
            raise ValueError(f"importance must be >= 0, got {importance!r}")
        return float(importance)

    def _dedup_window(self) -> int:
        """How many recent memories the lexical dedup rules look at (``DedupConfig.window``; 0 without dedup)."""
        cfg = self.dedup_config
        return cfg.window if cfg is not None else 0

    def _find_duplicate(self, space: _Space, sig: TextSignature, vec: np.ndarray, semantic: bool) -> tuple[str, str] | None:
        cfg = self.dedup_config
        if cfg is None:
            return None
        for mid in space.fp.get(sig.fp, ()):
            if (self._records[mid].kind == "semantic") == semantic:
                return mid, "fingerprint"
        if not space.order:
            return None
        recent = space.recent_slots
        if space.embed_window and not (space.window_in_order and len(recent) < recent.maxlen):
            # newest first, each slot once (dict.fromkeys keeps the first: a recycled slot may sit twice
            # in the window, and both entries name its current memory)
            cand = np.fromiter(dict.fromkeys(reversed(recent)), dtype=np.int64)
        else:
            # the whole namespace, or a window that still holds every write in order (window_in_order):
            # the same candidates once filtered by active below, from the view (usually cached) without
            # a pass over the window
            _, slots = space.view()
            cand = slots[::-1]
        if len(cand) == 0:
            return None
        # (active implies alive: _insert sets both, _remove clears both, _mark_superseded clears active);
        # active and of the write's kind: a rule's rows are active & is_sem, an episode's active > is_sem
        # (True > False, the one pair that holds), one numpy call less than comparing is_sem first
        act, sem = space.active[cand], space.is_sem[cand]
        cand = cand[act & sem if semantic else act > sem]
        slot_id, sigs = space.slot_id, space.sigs
        value_aware, content = cfg.value_aware, sig.content
        for slot in cand[: cfg.window].tolist():
            mid = slot_id[slot]
            old = sigs.get(mid) or self._sig(space, mid)  # (_sig inlined for the usual hit: ~12 per write)
            if value_aware and sig.fp != old.fp and not content <= old.content and not old.content <= content:
                continue  # a value change (each side has words the other lacks): duplicate_rule is None (world.dedup)
            rule = duplicate_rule(sig, old, cfg)
            if rule is not None:
                return mid, rule
        window = space.embed_window
        if window is not None and recent.maxlen > window:
            # the write window reaches past the embedding rule's (embed_window < DedupConfig.window): its
            # candidates are those of the last embed_window writes only
            cand = np.fromiter(dict.fromkeys(islice(reversed(recent), window)), dtype=np.int64)
            act, sem = space.active[cand], space.is_sem[cand]
            cand = cand[act & sem if semantic else act > sem]
        if len(cand):
            sims = _matvec(space.emb.take(cand, axis=0), vec)  # (take: the rows of emb[cand], one call less)
            # nothing near enough (the usual case): no sort (the reduction is ndarray.max without its wrapper)
            if _max_reduce(sims) < cfg.embed_threshold:
                return None
            for j in (-sims).argsort(kind="stable"):
                if sims[j] < cfg.embed_threshold:
                    break
                mid = space.slot_id[cand[j]]
                if embedding_duplicate(sig, self._sig(space, mid), float(sims[j]), cfg):
                    return mid, "embedding"
        return None

    def write_episode(
        self,
        step: int,
        content: str,
        cues: list[str] | None = None,
        importance: float | None = 0.5,
        *,
        key: str | None = None,
        tier: str = "fact",
        confidence: float = 1.0,
        source: str | None = None,
        evidence: Iterable[str] | None = None,
        namespace: str | None = None,
        sig: TextSignature | None = None,
    ) -> EpisodicMemory:
        """Store an episode; on a duplicate nothing is stored and the existing record is returned.

        `store.last_write` tells what happened. A `key` with an active version of other content is
        superseded by this write; the same content under the key is a duplicate. Unkeyed writes go
        through the dedup rules (docs/store.md). importance=None asks the importance scorer.
        `sig`: ``world.dedup.signature(content)`` when the caller has it already (the world computes
        it once per event); it must be exactly that.
        """
        return self._write("ep", step, content, cues, importance, key, tier, confidence, source, evidence, namespace,
                           None, sig)

    def write_semantic(
        self,
        step: int,
        rule: str,
        derived_from: Iterable[str],
        *,
        key: str | None = None,
        tier: str = "inference",
        confidence: float = 0.7,
        source: str | None = None,
        evidence: Iterable[str] | None = None,
        namespace: str | None = None,
        cues: list[str] | None = None,
        importance: float | None = 0.6,
    ) -> SemanticMemory:
        """Store a consolidated rule derived from other memories (REFLECT).

        `derived_from` ids that are live get derived_from / consolidated_into edges; ids that are not
        live are kept in the list (provenance) without edges; an id living in another namespace is an
        error. `evidence` defaults to `derived_from`.
        """
        if isinstance(derived_from, str):
            raise TypeError("derived_from must be a list of memory ids, not a string")
        derived = _id_list("derived_from", derived_from, " ([] for none)")
        return self._write("sem", step, rule, cues, importance, key, tier, confidence, source, evidence, namespace, derived, None)  # type: ignore[return-value]

    def _check_write(self, kind, step, content, cues, importance, key, tier, confidence, evidence, namespace, derived,
                     source=None):
        """Validate a write's arguments (nothing changes): returns (step, importance, namespace, evidence
        list, cue list or None)."""
        field_name = "content" if kind == "ep" else "rule"
        if not isinstance(content, str) or not content.strip():
            raise ValueError(f"{field_name} must be a non-empty string, got {content!r}")
        step = _check_step(step)
        _check_tier(tier, confidence)
        # a blank key (" ") could be written but not erased (erase refuses blank targets): one rule,
        # but for the chain of one a file of the previous release holds (_blank_chain)
        if key is not None and (not isinstance(key, str) or not key.strip()) and not self._blank_chain(key, namespace):
            raise ValueError(f"key must be a non-empty string (not only whitespace) or None, got {key!r}")
        # a bytes / tuple source was kept: a save failed on it later naming nothing, or it came back a list
        if source is not None and not isinstance(source, str):
            raise ValueError(f"source must be a string or None, got {source!r}")
        cues = _check_cues(cues)
        # every string the record keeps must have a UTF-8 form (a save would fail on it later, far from
        # the write that let it in); isascii() first: one C call for the usual text
        if not content.isascii():
            _check_unicode(field_name, content)
        if key is not None and isinstance(key, str) and not key.isascii():
            _check_unicode("key", key)
        if source is not None and not source.isascii():  # (a str: checked above)
            _check_unicode("source", source)
        if namespace is not None and isinstance(namespace, str) and not namespace.isascii():
            _check_unicode("namespace", namespace)
        if cues and not "".join(cues).isascii():
            for c in cues:
                _check_unicode("cues", c)
        imp = self._importance(importance, content)
        ns = self._ns(namespace)
        semantic = kind == "sem"
        if isinstance(evidence, str):
            raise ValueError(f"evidence must be a list of memory ids or None, not a string, got {evidence!r}")
        evidence_list = (_id_list("evidence", evidence, " or None") if evidence is not None
                         else (list(derived) if semantic else []))
        # the erasure cascade follows evidence / derived_from inside a namespace: an id of another
        # namespace would be skipped by it and survive the erasure of what it cites (and an id that is
        # no live memory's is kept as given: it must have a UTF-8 form too)
        self._check_refs(ns, derived if semantic else (), evidence_list)
        return step, imp, ns, evidence_list, cues

    def _blank_chain(self, key: object, namespace: str | None) -> bool:
        """Whether the blank ``key`` names a version chain (live or gone versions) of ``namespace``
        (None: the default, "*": any). Writes and erase refuse a blank key, but a file of the previous
        release may hold one: its chain must stay writable (a supersession keeps the key) and erasable."""
        if not isinstance(key, str) or not key:
            return False
        spaces = self._spaces.values() if namespace == ALL_NAMESPACES else [self._spaces.get(self._ns(namespace))]
        return any(sp is not None and (key in sp.chains or key in sp.gone) for sp in spaces)

    def _check_refs(self, ns: str, derived, evidence) -> None:
        """ValueError naming the field for a cited id of another namespace or without a UTF-8 form
        (an id that is no live memory's is kept as given)."""
        if not derived and not evidence:  # (most writes cite nothing)
            return
        for field_name, refs in (("derived_from", derived), ("evidence", evidence)):
            for mid in refs:
                # (ids are kept and saved as given: a bytes id failed the save naming nothing, a list one
                # was a bare TypeError from the lookup below)
                if not isinstance(mid, str):
                    raise ValueError(f"{field_name} must hold memory ids (strings), got {mid!r}")
                if not mid.isascii():
                    _check_unicode(field_name, mid)
                rec = self._records.get(mid)
                if rec is not None and rec.namespace != ns:
                    raise ValueError(
                        f"{field_name}: {mid!r} lives in namespace {rec.namespace!r}, not {ns!r} "
                        f"(a record may only cite memories of its own namespace)"
                    )

    def _write(self, kind, step, content, cues, importance, key, tier, confidence, source, evidence, namespace, derived,
               sig=None, checked=None):
        """The write behind write_episode / write_semantic / supersede. ``checked``: what _check_write returned
        for exactly these arguments (supersede validates before it touches its target), or None."""
        if checked is None:
            checked = self._check_write(kind, step, content, cues, importance, key, tier, confidence, evidence,
                                        namespace, derived, source)
        step, imp, ns, evidence_list, cues = checked
        semantic = kind == "sem"
        if sig is None:
            sig = signature(content)
        to_supersede: Record | None = None
        current: Record | None = None
        same = False
        if key is not None:
            existing = self._spaces.get(ns)
            current = existing.active_version(key, self._records) if existing is not None else None
            if current is not None:
                # the same content as the active version is a duplicate, whatever the kind of either
                same = existing.fps[current.memory_id] == sig.fp
                if not same and step < current.written_at:  # checked before anything changes
                    raise ValueError(
                        f"step must be >= {current.written_at}, when the active version {current.memory_id!r} of key "
                        f"{key!r} was written (a new version cannot start before it), got {step!r}"
                    )
            elif existing is not None and existing.chains.get(key):
                # no active version (it was forgotten), but the history is kept: a new version still cannot
                # start before the end of the latest one (versions() oldest first, value_at one per step)
                last = max(max(self._records[m].written_at, self._records[m].superseded_at or 0)
                           for m in existing.chains[key])
                if step < last:
                    raise ValueError(f"step must be >= {last}, where the history of key {key!r} ends (a new version "
                                     f"cannot start before it), got {step!r}")
        vec = self.embed(content)
        space = self._space(ns, create=True)
        if current is not None:
            if same:
                return self._report_duplicate(current, "key", content)
            to_supersede = current
        elif key is None:
            dup = self._find_duplicate(space, sig, vec, semantic)
            if dup is not None:
                return self._report_duplicate(self._records[dup[0]], dup[1], content)
        mid = self._next_id(kind)
        cue_list = cues if cues is not None else extract_cues(content, self._max_cues)
        if semantic:
            rec: Record = SemanticMemory(mid, content, derived, step, cues=cue_list, importance=imp, key=key, tier=tier,
                                         confidence=float(confidence), source=source, evidence=evidence_list,
                                         written_at=step, namespace=ns)
        else:
            rec = EpisodicMemory(mid, step, content, cues=cue_list, importance=imp, key=key, tier=tier,
                                 confidence=float(confidence), source=source, evidence=evidence_list, written_at=step,
                                 namespace=ns)
        self._insert(space, rec, vec, sig)
        if to_supersede is not None:
            self._mark_superseded(space, to_supersede, step)
            self.counters["superseded"] += 1
            self.last_write = WriteReport("superseded", mid, superseded=to_supersede.memory_id)
        else:
            self.last_write = WriteReport("written", mid)
        return rec

    def __setstate__(self, state: dict) -> None:
        # (a store pickled before an attribute existed gets its empty default)
        state.setdefault("_merged", {})
        for name in _CONFIG_NAMES:  # (pickled before they became checked properties: plain attributes)
            if name in state:
                state["_" + name] = state.pop(name)
        self.__dict__.update(state)
        # a record's pickle leaves out its row (_Record.__getstate__): bind the records to their rows again
        records = self._records
        for mid, home in self._loc.items():
            records[mid].__dict__["_home"] = home

    def _report_duplicate(self, existing: Record, rule: str, text: str | None = None) -> Record:
        """Count a write merged into ``existing`` and say so in ``last_write``. ``text``: the content
        the write embedded (through the embedder's cache) before dedup found the match. If it is not
        the existing memory's own text, no erasure rule would find its cache entry once ``existing``
        is erased (it need not quote it, nor hold a word only it had): it is remembered with
        ``existing`` (``_merged``) and dropped from the cache when ``existing`` is erased. It stays
        cached until then, so a recurring duplicate is not embedded again (with MiniLM ~45 ms each).
        Past :data:`MERGED_CAP` texts per memory, a further one is dropped at once instead."""
        self.counters["duplicates"] += 1
        self.last_write = WriteReport("duplicate", existing.memory_id, duplicate_of=existing.memory_id, rule=rule)
        if text is not None and text != existing.content:
            merged = self._merged.setdefault(existing.memory_id, [])
            if text not in merged:
                if len(merged) < MERGED_CAP:
                    merged.append(text)
                else:  # (last: a cache that fails leaves the store right)
                    drop = getattr(self.embedder, "drop", None)
                    if drop is not None:
                        drop(text)
        return existing

    def _insert(self, space: _Space, rec: Record, vec: np.ndarray, sig: TextSignature,
                actr: tuple[float, int, list[float]] | None = None, slot: int | None = None) -> None:
        mid = rec.memory_id
        kind = rec.kind
        semantic = kind == "semantic"
        active = rec.superseded_at is None  # (rec.active, read once)
        slot = space.alloc(slot)
        space.emb[slot] = vec
        space.alive[slot] = True
        space.active[slot] = active
        space.is_sem[slot] = semantic
        space.importance[slot] = rec.importance
        space.conf_w[slot] = rec.confidence if rec.tier == "inference" else 1.0
        if actr is None:  # a new memory: one presentation, at its write (no other presentation: -inf)
            written = float(rec.written_at)
            space.a_created[slot] = written
            space.a_n[slot] = 1
            row = space.a_recent[slot]
            row.fill(_NEG_INF)
            row[0] = written
        else:
            space.a_created[slot] = actr[0]
            space.a_n[slot] = actr[1]
            space.a_recent[slot] = -np.inf
            recent = actr[2][-self._actr_k:]
            space.a_recent[slot, : len(recent)] = recent
        space.slot_id[slot] = mid
        space.order[mid] = slot
        space.recent_slots.append(slot)
        space.fps[mid] = sig.fp
        space.sigs[mid] = sig
        if len(space.sigs) > space.sig_cap:
            del space.sigs[next(iter(space.sigs))]
        if active:
            space.fp.setdefault(sig.fp, []).append(mid)
        if rec.key is not None:
            space.chains.setdefault(rec.key, []).append(mid)
        space.version += 1
        g = space.graph
        # the memory's node, then per cue its node (if new) and the has_cue / cue_of edges
        space.gnode[slot] = g.add_star(mid, kind, [_CUE + cue for cue in rec.cues], "cue", "has_cue", "cue_of", 1.0)
        if semantic:
            for src in rec.derived_from:  # type: ignore[union-attr]
                if src in g and src != mid and src in self._records:
                    g.add_edge(mid, src, _DERIVED, 1.0)
                    g.add_edge(src, mid, _CONSOLIDATED, 0.5)
            self._semantic[mid] = rec  # type: ignore[assignment]
        else:
            self._episodic[mid] = rec  # type: ignore[assignment]
        self._records[mid] = rec
        self._loc[mid] = rec.__dict__["_home"] = (space, slot)  # (the record's score fields write through)

    def _sig(self, space: _Space, mid: str) -> TextSignature:
        sig = space.sigs.get(mid)
        if sig is None:
            sig = signature(self._records[mid].content)
        return sig

    def _mark_superseded(self, space: _Space, rec: Record, step: int) -> None:
        rec.superseded_at = step
        _, slot = self._loc[rec.memory_id]
        space.active[slot] = False
        fp = space.fps[rec.memory_id]
        ids = space.fp.get(fp)
        if ids and rec.memory_id in ids:
            ids.remove(rec.memory_id)
            if not ids:
                del space.fp[fp]
        space.version += 1

    # ------------------------------------------------------------------ link / forget / sweep
    def link(self, a: str, b: str, relation: RelationType | str) -> bool:
        """Add a typed link a -> b. False if either is not a live memory, a == b, they live in
        different namespaces, or a provenance edge (derived_from / consolidated_into) already joins them."""
        rel = _relation(relation)
        ra, rb = self._records.get(a), self._records.get(b)
        if ra is None or rb is None or a == b or ra.namespace != rb.namespace:
            return False
        space = self._loc[a][0]
        existing = space.graph.edge(a, b)
        if existing is not None and existing[0] not in _TYPED:
            return False
        space.graph.add_edge(a, b, rel, 1.0)
        if b not in ra.links:
            ra.links.append(b)
        self._link_changes = getattr(self, "_link_changes", 0) + 1
        return True

    def add_evidence(self, memory_id: str, evidence: Iterable[str], derived_from: Iterable[str] = ()) -> None:
        """Extend a live memory's provenance in place: `evidence` ids are appended to its `evidence`
        and, for a semantic memory, `derived_from` ids to its `derived_from` (a live one also gets the
        derived_from / consolidated_into edges a write gives it, unless the two are joined already),
        each id once. For a memory whose content stays while what it rests on grows (a rolling summary
        whose fold left its text unchanged: the store keeps the version as a duplicate): the erasure
        cascade follows `evidence`, so it must name everything the memory was derived from.
        KeyError for an unknown id; ValueError for an id of another namespace, as in a write."""
        rec = self._records.get(memory_id)
        if rec is None:
            raise KeyError(f"unknown memory id {memory_id!r}")
        if isinstance(evidence, str) or isinstance(derived_from, str):
            raise ValueError("evidence and derived_from must be lists of memory ids, not strings")
        evidence, derived = _id_list("evidence", evidence), _id_list("derived_from", derived_from)
        if derived and rec.kind != "semantic":
            raise TypeError(f"add_evidence(): derived_from applies to semantic memories only; {memory_id!r} is an episode")
        self._check_refs(rec.namespace, derived, evidence)
        have = set(rec.evidence)
        for mid in evidence:
            if mid not in have:
                have.add(mid)
                rec.evidence.append(mid)
        if not derived:
            return
        have = set(rec.derived_from)  # type: ignore[union-attr]
        g = self._loc[memory_id][0].graph
        for src in derived:
            if src in have:
                continue
            have.add(src)
            rec.derived_from.append(src)  # type: ignore[union-attr]
            # (as _insert does for a live id; an existing edge, a typed link, is left as it is)
            if src != memory_id and src in self._records and not g.has_edge(memory_id, src) and not g.has_edge(src, memory_id):
                g.add_edge(memory_id, src, _DERIVED, 1.0)
                g.add_edge(src, memory_id, _CONSOLIDATED, 0.5)

    def forget(self, memory_id: str) -> bool:
        """Remove one memory and every trace of it (graph node and edges, cue nodes left without
        memories, embedding row, ACT-R state, key chain entry, dedup indexes)."""
        if memory_id not in self._records:
            return False
        self._remove(memory_id)
        return True

    def _remove(self, memory_id: str, remember: bool = True) -> tuple[int, list[str]]:
        """Remove a record; returns (edges removed, cue nodes removed). remember=True (forget, sweeps)
        keeps the id of a keyed record in its key's history of gone versions (erasure passes False)."""
        self._merged.pop(memory_id, None)  # (erase took them first; forget and sweeps leave them cached)
        rec = self._records.pop(memory_id)
        space, slot = self._loc.pop(memory_id)
        del rec.__dict__["_home"]  # (its row is freed: a later change to the record must not reach it)
        if remember and rec.key is not None:
            space.gone.setdefault(rec.key, []).append(memory_id)
            space.gone_key[memory_id] = rec.key
        self._link_changes = getattr(self, "_link_changes", 0) + 1
        g = space.graph
        for src in g.predecessors(memory_id, _TYPED):  # its typed in-links leave the linking records
            other = self._records.get(src)
            if other is not None and memory_id in other.links:
                other.links.remove(memory_id)
        # the node, its edges, and the cue nodes that no other memory shares
        edges, removed_cues = g.remove_hub(memory_id, "has_cue")
        space.emb[slot] = 0.0
        space.alive[slot] = False
        space.active[slot] = False
        space.is_sem[slot] = False
        space.importance[slot] = 0.0
        space.conf_w[slot] = 1.0
        space.a_created[slot] = 0.0
        space.a_n[slot] = 0
        space.a_recent[slot] = -np.inf
        space.gnode[slot] = -1
        space.slot_id[slot] = None
        space.free.append(slot)
        del space.order[memory_id]
        space.sigs.pop(memory_id, None)
        fp = space.fps.pop(memory_id)
        ids = space.fp.get(fp)
        if ids and memory_id in ids:
            ids.remove(memory_id)
            if not ids:
                del space.fp[fp]
        if rec.key is not None:
            chain = space.chains.get(rec.key)
            if chain is not None and memory_id in chain:
                chain.remove(memory_id)
                if not chain:
                    del space.chains[rec.key]
        space.version += 1
        if rec.kind == "semantic":
            del self._semantic[memory_id]
        else:
            del self._episodic[memory_id]
        return edges, removed_cues

    def sweep_decayed(self, namespace: str | None = None) -> list[str]:
        """Drop every memory (episodic and semantic) with B + importance < forget_threshold.

        namespace=None sweeps every namespace. Returns the dropped ids (write order per namespace).
        """
        spaces = list(self._spaces.values()) if namespace is None else [self._spaces.get(self._ns(namespace))]
        dropped: list[str] = []
        for space in spaces:
            if space is None or not space.order:
                continue
            ids, slots = space.view()
            act = self._activation_rows(space, slots) + space.importance[slots]
            for j in (act < self._forget_threshold).nonzero()[0]:
                dropped.append(ids[j])
        for mid in dropped:
            self._remove(mid)
        self.counters["swept"] += len(dropped)
        return dropped

    # ------------------------------------------------------------------ retrieval
    def query(self, query_text: str, cues: list[str] | None = None, top_k: int = 5, alpha_ppr: float = 0.5,
              alpha_sim: float = 0.35, alpha_actr: float = 0.15, *, namespace: str | None = None,
              bump: bool = True) -> list[Record]:
        """Top-k memories of the namespace by PPR + similarity + ACT-R (see module docstring).

        `cues` (PPR seeds; None or empty: the cues of `query_text`) are checked as a write's: an
        iterable of strings, else a ValueError naming `cues` before anything is bumped.

        bump=True records a retrieval (ACT-R presentation at current_step, importance +0.02 up to
        1.0 for episodes, applications +1 for semantic memories) for each returned memory; a memory
        written at a step ahead of the clock gets no ACT-R presentation before it exists (as
        ``ActRRecord.bump`` refuses one), only the other two.
        """
        return [r for r, _ in self.query_scored(query_text, cues, top_k, alpha_ppr, alpha_sim, alpha_actr,
                                                namespace=namespace, bump=bump)]

    def query_scored(self, query_text: str, cues: list[str] | None = None, top_k: int = 5, alpha_ppr: float = 0.5,
                     alpha_sim: float = 0.35, alpha_actr: float = 0.15, *, namespace: str | None = None,
                     bump: bool = True) -> list[tuple[Record, float]]:
        """Like `query`, with each memory's final score."""
        if not isinstance(query_text, str):
            raise ValueError(f"query_text must be a string, got {query_text!r}")
        if not query_text.isascii():  # (isascii is O(1): the common case costs nothing)
            _check_unicode("query_text", query_text)
        if type(top_k) is not int and (isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer))) \
                or top_k < 0:  # (a plain int first: one test)
            raise ValueError(f"top_k must be an int >= 0, got {top_k!r}")
        alpha_ppr = _finite("alpha_ppr", alpha_ppr)
        alpha_sim = _finite("alpha_sim", alpha_sim)
        alpha_actr = _finite("alpha_actr", alpha_actr)
        cues = _check_cues(cues)  # (the write's check, before anything is bumped)
        space = self._spaces.get(self._default_namespace if namespace is None else self._ns(namespace))
        if space is None or not space.order or top_k == 0:
            return []
        ids, slots = space.view()
        mask = space.active[slots]
        n_ok = np.count_nonzero(mask)
        if not n_ok:
            return []
        scores = self._scores(space, ids, slots, query_text, cues, alpha_ppr, alpha_sim, alpha_actr)
        n = len(scores)
        if n_ok < n:  # (np.where with an all-True mask would only copy)
            scores = np.where(mask, scores, -np.inf)
        cand = _top_k(scores, min(int(top_k), n_ok))
        records = self._records
        picked = [records[ids[j]] for j in cand.tolist()]
        out = list(zip(picked, scores.take(cand).tolist()))
        if bump:
            self._bump(space, slots.take(cand).tolist(), picked)
        return out

    def _scores(self, space: _Space, ids: list[str], slots: np.ndarray, query_text: str, cues,
                alpha_ppr: float, alpha_sim: float, alpha_actr: float) -> np.ndarray:
        qvec = self.embed(query_text)
        sims = _matvec(space.emb[: space.hi], qvec).take(slots).astype(np.float64)
        query_cues = cues if cues else extract_cues(query_text, self._max_cues)
        graph = space.graph
        seeds = graph.present([_CUE + c for c in query_cues])  # (_cue_node's names)
        if seeds and alpha_ppr != 0.0:
            x, pos, method = graph.ppr(
                seeds, alpha=self._ppr_alpha, max_iter=self._ppr_max_iter, tol=self._ppr_tol, fallback=self._ppr_fallback
            )
            ppr_term = alpha_ppr * x.take(pos.take(space.gnode.take(slots))) * 10.0
        else:
            method = None
            ppr_term = np.zeros(len(slots))  # alpha_ppr * 0.0 * 10.0, exactly: +0.0 for a finite alpha_ppr >= +0.0
            if math.copysign(1.0, alpha_ppr) < 0.0:  # (-0.0 for a negative one)
                ppr_term = alpha_ppr * ppr_term * 10.0
        act = self._activation_rows(space, slots)
        score = alpha_sim * sims + ppr_term + alpha_actr * act * 0.1 + 0.1 * space.importance.take(slots)
        conf = space.conf_w.take(slots)
        low = (conf < 1.0).nonzero()[0]
        if len(low):  # the tier rule, on inferences only: a fact's score is its sum (0 * inf was NaN)
            s = score.take(low)
            score[low] = s - (1.0 - conf.take(low)) * np.abs(s)
        # Every term is finite and bounded but for the weights (any finite number) and importance: a
        # weight near float's limit overflows the sum (alpha_ppr=1e308 scored the best match NaN, ranked
        # last). Such scores rank nothing (infinities tie), so the query is refused, before any bump.
        if not math.isfinite(_max_reduce(score)) or not math.isfinite(_min_reduce(score)):
            raise ValueError(f"query weights alpha_ppr={alpha_ppr!r}, alpha_sim={alpha_sim!r}, alpha_actr="
                             f"{alpha_actr!r} overflow the scores past float's range (inf or NaN): use weights "
                             f"of a sane size (the default ones are below 1)")
        if method is not None:  # (counted once the query is answered: a refused one changes nothing)
            self.counters["ppr_" + method] += 1
        self.last_ppr_method = method
        return score

    def _bump(self, space: _Space, slots: list[int], recs: list[Record]) -> None:
        """Record a retrieval of each record ``recs[i]`` at its row ``slots[i]``: an ACT-R presentation
        at current_step (none before the memory's creation), importance +0.02 up to 1.0 for an episode, applications +1 for a semantic
        memory (one call for a query's records: row by row, a fancy-indexed batch costs more)."""
        space.acts = None  # (the rows' activations change)
        t = float(self._current_step)
        a_n, a_recent, a_created, importance = space.a_n, space.a_recent, space.a_created, space.importance
        for slot, rec in zip(slots, recs):
            # A memory written ahead of the clock (a write at step 5, no tick: README's example) is not
            # presented before it exists, as ActRRecord.bump refuses that: such presentations were
            # clipped to lag 1 until the clock caught up, and then put Petrov's oldest kept lag past
            # the memory's life. Its other retrieval effects below still count (untimed).
            if a_created[slot] <= t:
                a_n[slot] += 1
                row = a_recent[slot]
                times = row.tolist()  # (k floats: a list search beats two numpy calls)
                if _NEG_INF in times:
                    row[times.index(_NEG_INF)] = t  # the first empty (-inf) place
                else:
                    row[:-1] = row[1:]
                    row[-1] = t
            if rec.kind == "episodic":
                imp = rec.importance
                if imp < 1.0:  # seed: min(1.0, imp + 0.02); never lowers importance > 1
                    # (record and row both, as the record's own setter would, without its checks)
                    rec.__dict__["importance"] = importance[slot] = min(1.0, imp + 0.02)
            else:
                rec.applications += 1  # type: ignore[union-attr]

    # ------------------------------------------------------------------ versions
    def supersede(self, memory_id: str, new_content: str, step: int, **write_kwargs) -> Record:
        """Write a new version of the memory `memory_id` (an agent's UPDATE).

        The target's key is reused; a target without a key gets the fresh key "chain:<memory_id>"
        (shared by the whole chain; "chain:<memory_id>#n" if a caller's keyed write took that key). Tier, confidence, source, importance and evidence are inherited
        unless given. Same content -> duplicate (the target is returned, last_write says so).
        """
        rec = self._records.get(memory_id)
        if rec is None:
            raise KeyError(f"unknown memory id {memory_id!r}")
        if not rec.active:
            raise ValueError(f"memory {memory_id!r} is superseded; supersede the active version of key {rec.key!r}")
        unknown = write_kwargs.keys() - _SUPERSEDE_KWARGS
        if unknown:
            raise TypeError(f"supersede() got unexpected keyword arguments {sorted(unknown)}; "
                            f"allowed: {sorted(_SUPERSEDE_KWARGS)}")
        space, _ = self._loc[memory_id]
        if not isinstance(new_content, str) or not new_content.strip():
            raise ValueError(f"new_content must be a non-empty string, got {new_content!r}")
        semantic = rec.kind == "semantic"
        if not semantic and "derived_from" in write_kwargs:
            raise TypeError(f"supersede(): derived_from applies to semantic memories only; {memory_id!r} is an "
                            "episode (its provenance is evidence=)")
        key = rec.key
        if key is None:  # a fresh key for the new chain: "chain:<id>", or "chain:<id>#n" if a caller took it
            key, n = f"chain:{memory_id}", 1
            while key in space.chains or key in space.gone:  # (gone: versions that left keep their key)
                n += 1
                key = f"chain:{memory_id}#{n}"
        kw = dict(
            key=key,
            tier=write_kwargs.get("tier", rec.tier),
            confidence=write_kwargs.get("confidence", rec.confidence),
            source=write_kwargs.get("source", rec.source),
            evidence=write_kwargs.get("evidence", list(rec.evidence)),
            namespace=rec.namespace,
        )
        cues = write_kwargs.get("cues")
        importance = write_kwargs.get("importance", rec.importance)
        derived = write_kwargs.get("derived_from", list(rec.derived_from)) if semantic else None  # type: ignore[union-attr]
        # validate everything the write will check before touching the target (its key), so that a
        # rejected call changes nothing
        if semantic and isinstance(derived, str):
            raise TypeError("derived_from must be a list of memory ids, not a string")
        if semantic:
            derived = _id_list("derived_from", derived, " ([] for none)")
        # (the write gets the checked values, and does not check them again: a generator would be consumed
        # by the check)
        kind = "sem" if semantic else "ep"
        checked = self._check_write(kind, step, new_content, cues, importance, kw["key"], kw["tier"], kw["confidence"],
                                    kw["evidence"], rec.namespace, derived, kw["source"])
        step = checked[0]
        sig = write_kwargs.get("sig")  # signature(new_content) precomputed by the caller (the world), or None
        if sig is None:
            sig = signature(new_content)
        if sig.fp == space.fps[memory_id]:  # the same content is a duplicate at any step, as for a keyed write
            return self._report_duplicate(rec, "key")
        if step < rec.written_at:
            raise ValueError(f"step must be >= {rec.written_at}, when {memory_id!r} was written (a new version "
                             f"cannot start before the one it supersedes), got {step!r}")
        assigned = rec.key is None
        if assigned:
            rec.key = kw["key"]
            space.chains.setdefault(rec.key, []).append(memory_id)
        try:
            return self._write(kind, step, new_content, checked[4], importance, kw["key"], kw["tier"], kw["confidence"],
                               kw["source"], checked[3], rec.namespace, derived, None if semantic else sig, checked)
        except BaseException:
            if assigned and rec.active:  # the write failed (e.g. the embedder raised): undo the key
                chain = space.chains.get(rec.key)
                if chain is not None and memory_id in chain:
                    chain.remove(memory_id)
                    if not chain:
                        del space.chains[rec.key]
                rec.key = None
            raise

    def versions(self, key: str, namespace: str | None = None) -> list[Record]:
        """The version chain of `key`, oldest first. A key that is not a string is a ValueError."""
        return self._versions("versions", key, namespace)

    def _versions(self, method: str, key: object, namespace: str | None) -> list[Record]:
        # a key of another type names no chain: it was answered "no record" (explain(42) with a live
        # key "42"), which erase(key=42) refuses by name, and an unhashable one was a bare TypeError
        if not isinstance(key, str):
            raise ValueError(f"{method}: key must be a string, got {key!r}")
        space = self._space(self._ns(namespace))
        if space is None:
            return []
        return [self._records[m] for m in space.chains.get(key, ())]

    def value_at(self, key: str, step: int, namespace: str | None = None) -> Record | None:
        """The version that was valid at `step` (written_at <= step < superseded_at), or None."""
        _finite("step", step)
        best = None
        for rec in self._versions("value_at", key, namespace):
            if rec.written_at <= step and (rec.superseded_at is None or rec.superseded_at > step):
                best = rec
        return best

    def explain(self, key: str, namespace: str | None = None) -> str:
        """Readable history of a key: one line per version."""
        chain = self._versions("explain", key, namespace)
        if not chain:
            return f"{key}: no record"
        lines = [f"{key}: {len(chain)} version(s)"]
        for rec in chain:
            until = "now (active)" if rec.active else f"step {rec.superseded_at} (superseded)"
            lines.append(
                f"  [{rec.memory_id}] steps {rec.written_at} .. {until}: {rec.content!r} "
                f"(tier={rec.tier}, confidence={rec.confidence:.2f}, source={rec.source or 'unknown'})"
            )
        return "\n".join(lines)

    def conflicts(self, namespace: str | None = None) -> list[str]:
        """Keys with more than one active version (an audit: empty unless the store is corrupted).

        namespace=None audits every namespace.
        """
        spaces = self._spaces.values() if namespace is None else [self._spaces.get(self._ns(namespace))]
        out = []
        for space in spaces:
            if space is None:
                continue
            for key, chain in space.chains.items():
                if sum(1 for m in chain if self._records[m].active) > 1:
                    out.append(key)
        return sorted(set(out))

    # ------------------------------------------------------------------ erasure
    def add_erase_hook(self, fn: Callable[[ErasureReport], Any]) -> None:
        """Register fn(report), called after every erase (e.g. rolling summaries rebuild)."""
        if not callable(fn):
            raise TypeError("erase hook must be callable")
        self._erase_hooks.append(fn)

    def _subject_match(self, rec: Record, subject: str) -> bool:
        """``rec`` is about ``subject`` (as ``_subject_name`` gives it): its key is the subject or one of
        the subject's keys, a cue of it is the subject, or its text mentions the subject as words."""
        s = subject.lower()
        if rec.key is not None and _key_of_subject(rec.key, s):
            return True
        # a caller's cues are kept as given ("Alice"), extracted ones lower-cased: compare folded
        if s in rec.cues or any(c.lower() == s for c in rec.cues):
            return True
        text_words = " " + " ".join(self._sig(self._loc[rec.memory_id][0], rec.memory_id).words) + " "
        target = " " + " ".join(signature(subject).words) + " "
        return target.strip() != "" and target in text_words

    def erase(self, key: str | None = None, memory_id: str | None = None, subject: str | None = None, *,
              namespace: str | None = None) -> ErasureReport:
        """Hard erasure (right to be forgotten), with the full cascade.

        Targets: `memory_id` (with its whole version chain), `key` (the chain), `subject` (records whose
        key owner is the subject, whose cues hold it (any letter case), or whose text mentions it as words, plus their
        chains). key / subject look in `namespace` (None: the default namespace, "*": all); memory_id
        looks wherever the id lives when `namespace` is None, only in that namespace when one is given
        (an id of another namespace is then left alone: `report.extra["not_in_namespace"]` names it).
        Ids that already left the store (forget, sweeps) still count: the versions of an erased key's or
        live memory's chain that left earlier (`report.gone` lists those ids), and the `memory_id` asked
        for even if it is gone.
        Cascade: records whose evidence / derived_from hold an erased id (transitively), graph nodes and
        edges, cue nodes left without memories, embedding rows (zeroed, freed), embedder cache entries
        (the erased texts, cached texts quoting them, and the hashing embedder's cached words and word
        pairs containing a word only the erased memories had). Then every erase hook runs; if any
        raised, `EraseHookError` (with the complete report) is raised once all of them ran. If the
        embedder's cache failed (a corrupted cache file), the erasure still completes (counters, report,
        hooks) and `EraseCacheError` (with the report) is raised at the end: erased text may remain in
        the cache. An unknown memory_id / key erases nothing (empty report).
        """
        if key is None and memory_id is None and subject is None:
            raise ValueError("erase needs at least one of key=, memory_id=, subject=")
        for name, value in (("key", key), ("memory_id", memory_id), ("subject", subject)):
            # a wrong type erased nothing and looked like a success (erase(key=42) of the key "42/...")
            if value is not None and (not isinstance(value, str) or not value.strip()) and not (
                    name == "key" and self._blank_chain(value, namespace)):  # (an old file's blank key)
                raise ValueError(f"erase: {name} must be a non-empty string, got {value!r}")
            if value is not None and not value.isascii():
                _check_unicode(f"erase: {name}", value)
        if subject is not None:
            subject = _subject_name(subject)  # ("alice/" is "alice"; the report's target holds this form)
        if namespace == ALL_NAMESPACES:
            spaces = list(self._spaces.values())
        else:
            sp_ = self._spaces.get(self._ns(namespace))
            spaces = [sp_] if sp_ is not None else []
        report = ErasureReport(target={"key": key, "memory_id": memory_id, "subject": subject, "namespace": namespace})
        targets: dict[str, None] = {}
        # ids that already left the store but may still be cited, and the namespaces where citing
        # records are looked for
        ghosts: set[str] = set()
        ghost_spaces: dict[str, _Space] = {}

        def add_gone(space: _Space, k: str) -> None:
            gone = space.gone.get(k)
            if gone:
                ghosts.update(gone)
                ghost_spaces[space.name] = space

        def add_chain(rec: Record, with_gone: bool = True) -> None:
            targets[rec.memory_id] = None
            if rec.key is not None:
                space = self._loc[rec.memory_id][0]
                for m in space.chains.get(rec.key, ()):
                    targets[m] = None
                if with_gone:
                    add_gone(space, rec.key)

        if memory_id is not None:
            rec = self._records.get(memory_id)
            if rec is not None:
                if namespace is None or namespace == ALL_NAMESPACES or rec.namespace == self._ns(namespace):
                    # the whole chain, versions that already left the store included (records citing
                    # them, e.g. a reflection on a swept version, go too)
                    add_chain(rec)
                else:  # an explicit namespace scopes the id too: another namespace's memory is left alone
                    report.extra["not_in_namespace"] = memory_id
            else:
                # gone already (forgotten, swept) or never existed: records citing it still go, and so
                # does the rest of its version chain
                ghosts.add(memory_id)
                for space in (self._spaces.values() if namespace is None else spaces):
                    ghost_spaces[space.name] = space
                    k = space.gone_key.get(memory_id)
                    if k is not None:
                        for m in list(space.chains.get(k, ())):
                            add_chain(self._records[m])
                        add_gone(space, k)
        for space in spaces:
            if key is not None:
                for m in list(space.chains.get(key, ())):
                    add_chain(self._records[m])
                add_gone(space, key)
            if subject is not None:
                for m in list(space.order):
                    if self._subject_match(self._records[m], subject):
                        add_chain(self._records[m])
                s = subject.lower()
                for k in list(space.gone):
                    if _key_of_subject(k, s):
                        add_gone(space, k)
        direct = set(targets)
        records = self._records
        # cascade through evidence / derived_from, to a fixed point
        changed = True
        while changed:
            changed = False
            erased_ns = {records[m].namespace for m in targets}
            erased_ns.update(ghost_spaces)
            # in the store's namespace order (iterating the set would follow PYTHONHASHSEED)
            for ns in [n for n in self._spaces if n in erased_ns]:
                for m in self._spaces[ns].order:
                    rec = records[m]
                    ev = rec.evidence
                    if rec.kind == "semantic":
                        if m in targets:
                            continue
                        refs = set(ev)
                        refs.update(rec.derived_from)  # type: ignore[union-attr]
                        hit = not targets.keys().isdisjoint(refs) or (ghosts and not ghosts.isdisjoint(refs))
                    elif ev and m not in targets:  # (most episodes cite nothing: no set, no generator)
                        hit = any(r in targets or r in ghosts for r in ev)
                    else:
                        continue
                    if hit:
                        targets[m] = None
                        changed = True
        # the (namespace, key) of the erased records' chains, read before any of them is removed
        keys_before: set[tuple[str, str]] = set()
        # the erased memories' signatures (or texts), read by mentions() only, which most erasures never
        # call (no merged texts, an embedder without drop_matching / drop_words): their words are
        # gathered on first use
        erased_sources: list[tuple[TextSignature | None, str, list[str]]] = []
        erased_words: set[str] = set()
        texts = []
        namespaces = set()
        merged_texts = self._merged
        for m in targets:
            rec = records[m]
            if rec.key is not None:
                keys_before.add((rec.namespace, rec.key))
        for m in targets:
            rec = records[m]
            merged = merged_texts.get(m, ())
            texts.append(rec.content)
            if merged:
                texts.extend(merged)
            namespaces.add(rec.namespace)
            space = self._loc[m][0]
            erased_sources.append((space.sigs.get(m), rec.content, merged))
            report.fingerprints.append(space.fps[m])
            (report.semantic if rec.kind == "semantic" else report.episodic).append(m)
            if m not in direct:
                report.cascaded.append(m)
            edges, cues = self._remove(m, remember=False)
            report.edges += edges
            report.cue_nodes += len(cues)
            report.embedding_rows += 1
        # the erased ids that had already gone are forgotten by their keys' histories too
        gone_ids: list[str] = []
        for space in ghost_spaces.values():
            for m in ghosts:
                k = space.gone_key.pop(m, None)
                if k is not None:
                    gone_ids.append(m)
                    gone = space.gone[k]
                    gone.remove(m)
                    if not gone:
                        del space.gone[k]
                        if k not in space.chains:
                            keys_before.add((space.name, k))
        for ns, k in sorted(keys_before):
            if k not in self._spaces[ns].chains:
                report.chains.append((ns, k))
                if k not in report.keys:
                    report.keys.append(k)
        report.gone = sorted(gone_ids)  # (sorted: `ghosts` is a set, its order follows PYTHONHASHSEED)
        report.namespaces = sorted(namespaces)
        # The store's part is done. A cache that fails from here on (a corrupted cache file) must not
        # leave the erasure half-way: every drop is still tried (a CachedEmbedder forgets its entries
        # in memory before it touches its file), counters, report and hooks follow as usual, and the
        # failure is raised at the end (EraseCacheError): erased text may be left in the cache.
        cache_errors: list[Exception] = []
        drop = getattr(self.embedder, "drop", None)
        if callable(drop):
            for t in dict.fromkeys(texts):
                try:
                    report.cache_entries += int(drop(t))
                except Exception as exc:  # noqa: BLE001 - raised below, once the erasure is complete
                    cache_errors.append(exc)
        drop_matching = getattr(self.embedder, "drop_matching", None)
        drop_words = getattr(self.embedder, "drop_words", None)
        # the words of the erased memories and the texts that mention them: needed only to clean texts
        # merged into surviving memories or an embedder cache that drops by matching / by words
        if (targets or subject is not None) and (self._merged or callable(drop_matching) or callable(drop_words)):
            low: list[str] = []  # the erased texts and the subject, lower-cased (filled with erased_words)
            gathered: list[bool] = []

            def erased() -> set[str]:
                """The content words of the erased memories and of the texts merged into them, as _sig /
                signature give them (gathered once, when first needed, with ``low``)."""
                if not gathered:
                    gathered.append(True)
                    for sig, content, merged in erased_sources:
                        erased_words.update((sig or signature(content)).content)
                        for t in merged:  # (texts merged into it: their words go with it)
                            erased_words.update(signature(t).content)
                    low.extend(t.lower() for t in dict.fromkeys(texts) if t.strip())
                    if subject is not None and subject.strip():
                        low.append(subject.lower())
                return erased_words

            unique_words: list[frozenset] = []

            def unique() -> frozenset:
                """The content words only the erased memories had (computed once, when first needed: a
                pass over every surviving record)."""
                if not unique_words:
                    left = set(erased())
                    loc = self._loc
                    for m in self._records:
                        if not left:
                            break
                        # (the store's signature of the record: its words, as words(content) gives them)
                        left.difference_update(self._sig(loc[m][0], m).word_set)
                    unique_words.append(frozenset(left))
                return unique_words[0]

            def mentions(text: str) -> bool:
                """A text quoting erased content, mentioning the subject or holding a word only the erased
                memories had."""
                words_erased = erased()
                t = text.lower()
                if any(n in t for n in low):
                    return True
                content = signature(text).content
                if content.isdisjoint(words_erased):  # (no erased word at all: no need for unique())
                    return False
                only = unique()
                return bool(only) and not only.isdisjoint(content)

            if self._merged:
                # texts merged into surviving memories that mention what was erased go too (the store
                # would keep them, and save them; a merge by containment or Jaccard can add words, so a
                # duplicate of a surviving memory may hold an erased memory's words)
                for m in list(self._merged):
                    kept = [t for t in self._merged[m] if not mentions(t)]
                    for t in self._merged[m]:
                        if t not in kept and callable(drop):
                            try:
                                report.cache_entries += int(drop(t))
                            except Exception as exc:  # noqa: BLE001 - raised below, once the erasure is complete
                                cache_errors.append(exc)
                    if kept:
                        self._merged[m] = kept
                    else:
                        del self._merged[m]
            if callable(drop_matching) or callable(drop_words):
                # Cached texts (queries included) that quote erased content, mention the subject, or use a
                # content word that only the erased memories had (a secret code, a name) go too, and so do
                # the hashing embedder's cached words and word pairs holding such a word (whatever text,
                # known to the cache or not, they came from). A subject's part runs even when no live
                # memory matched it (they were forgotten or swept before): its queries and the texts that
                # mentioned it may still be cached.
                if callable(drop_words):
                    gone_words = set(unique())
                    if subject is not None:
                        gone_words.update(words(subject))
                    if gone_words:
                        try:
                            drop_words(gone_words)
                        except Exception as exc:  # noqa: BLE001 - raised below, once the erasure is complete
                            cache_errors.append(exc)
                if callable(drop_matching):
                    try:
                        report.cache_entries += drop_matching(mentions)
                    except Exception as exc:  # noqa: BLE001 - raised below, once the erasure is complete
                        cache_errors.append(exc)
        self._graph_view = None
        self.counters["erased"] += report.total
        # every hook runs, even after one failed (a rolling summary whose summarizer fails must not
        # keep another namespace's summary from being rebuilt); then one error names the failures
        errors: list[Exception] = []
        for fn in list(self._erase_hooks):
            try:
                fn(report)
            except Exception as exc:  # noqa: BLE001 - collected and raised below, after every hook ran
                errors.append(exc)
        if cache_errors:
            raise EraseCacheError(report, cache_errors, errors) from cache_errors[0]
        if errors:
            raise EraseHookError(report, errors) from errors[0]
        return report

    # ------------------------------------------------------------------ persistence
    def _export_state(self) -> dict[str, Any]:
        """Everything needed to rebuild the store exactly (format: docs/DESIGN.md).

        meta also carries each namespace's row layout (slots, free list, dedup window) so that a
        rebuilt store computes bit-identical scores and recycles rows in the same order.
        """
        records = []
        actr: dict[str, dict[str, Any]] = {}
        for mid, rec in self._records.items():
            d = asdict(rec)
            d["kind"] = rec.kind
            records.append(d)
            space, slot = self._loc[mid]
            actr[mid] = {
                "created": float(space.a_created[slot]),
                "n": int(space.a_n[slot]),
                "recent": [float(t) for t in space.a_recent[slot] if math.isfinite(t)],
            }
        edges = []
        for space in self._spaces.values():
            for src, dst, rel, w in space.graph.edges():
                if rel in ("has_cue", "cue_of"):
                    continue
                edges.append([src, dst, rel, w])
        ids = list(self._records)
        dim = self._dim or 0
        emb = np.zeros((len(ids), dim), dtype=np.float32)
        for r, mid in enumerate(ids):
            space, slot = self._loc[mid]
            emb[r] = space.emb[slot]
        layout = {
            name: {
                "capacity": space.capacity,
                "hi": space.hi,
                "free": list(space.free),
                "slots": {m: int(s) for m, s in space.order.items()},
                "recent_slots": [int(s) for s in space.recent_slots],
                **({"gone": {k: list(v) for k, v in space.gone.items()}} if space.gone else {}),
            }
            for name, space in self._spaces.items()
        }
        cfg = self.dedup_config
        meta = {
            "clock": self._current_step,
            "counters": dict(self._counters),
            "stats_counters": dict(self.counters),
            "config": {
                "forget_threshold": self._forget_threshold,
                "decay": self._decay,
                "actr_k": self._actr_k,
                "dedup": asdict(cfg) if cfg is not None else None,
                "namespace": self._default_namespace,
                "max_cues": self._max_cues,
                "ppr_alpha": self._ppr_alpha,
                "ppr_max_iter": self._ppr_max_iter,
                "ppr_tol": self._ppr_tol,
                "ppr_fallback": self._ppr_fallback,
                "embed_window": self._embed_window,
            },
            "embedder": getattr(self.embedder, "name", type(self.embedder).__name__),
            "dim": dim,
            "layout": layout,
        }
        if self._merged:  # (only then: files without merged texts stay as they were)
            meta["merged"] = {m: list(t) for m, t in self._merged.items()}
        emb_config = embedder_config(self.embedder)
        if emb_config is not None:  # (a hashing embedder: rebuilt exactly on load, bigram_weight included)
            meta["embedder_config"] = emb_config
        extra = dict(self.extra_state)
        for name, comp in self.extras.items():
            extra[name] = comp.to_state()
        return {
            "schema": STATE_SCHEMA,
            "meta": meta,
            "records": records,
            "edges": edges,
            "actr": actr,
            "embedding_ids": ids,
            "embeddings": emb,
            "extra": extra,
        }

    #: name -> restore(store, state): called by `_from_state` for every `state["extra"][name]` present,
    #: after the store is rebuilt, so attached components (rolling summaries) are live at once.
    _extra_restorers: ClassVar[dict[str, Callable[[MemoryStore, Any], Any]]] = {}

    @classmethod
    def register_extra(cls, name: str, restore: Callable[[MemoryStore, Any], Any]) -> None:
        """Register how a component named `name` re-attaches itself to a store rebuilt by `_from_state`
        (it finds its JSON state in `store.extra_state[name]`, also passed as the second argument)."""
        if not callable(restore):
            raise TypeError("restore must be callable")
        cls._extra_restorers[name] = restore

    def summaries(self, namespace: str | None = None, **kwargs) -> Any:
        """The rolling summary of `namespace` (world/summary.py), created with `kwargs` (max_turns,
        keep_recent, summarizer, confidence, source) on first use. Added for issue 3 (summaries)."""
        from world.summary import summaries

        return summaries(self, namespace, **kwargs)

    def save(self, path):
        """Save to one SQLite file (world/persistence.py: atomic, exact round trip)."""
        from world.persistence import save_store

        return save_store(self, path)

    @classmethod
    def load(cls, path, embedder=None, **kwargs) -> MemoryStore:
        """Load a store saved by `save` (raises world.persistence.StoreFileError on a bad file)."""
        from world.persistence import load_store

        return load_store(path, embedder, **kwargs)

    @classmethod
    def _from_state(cls, state: Mapping[str, Any], embedder=None) -> MemoryStore:
        """Rebuild a store from `_export_state()` output. embedder=None: a hashing embedder of the
        saved dimension if the store used one, else ValueError (pass the embedder it was built with)."""
        schema = state.get("schema")
        if schema != STATE_SCHEMA:
            raise ValueError(f"state schema must be {STATE_SCHEMA}, got {schema!r}")
        meta = state["meta"]
        cfg = meta["config"]
        dim = int(meta.get("dim") or 0)
        saved_config = meta.get("embedder_config")
        if embedder is None:
            name = str(meta.get("embedder", ""))
            if isinstance(saved_config, dict) and saved_config.get("name") == "hashing":
                embedder = CachedEmbedder(embedder_from_config(saved_config))
            elif name.startswith("hashing-") and dim:  # (a state saved before embedder_config existed)
                embedder = CachedEmbedder(HashingEmbedder(dim))
            else:
                raise ValueError(f"embedder: the store was built with {name!r}; pass that embedder to load it")
        else:
            check_embedder_config(saved_config, embedder, saved_name=meta.get("embedder"))
        dedup_cfg = cfg.get("dedup")
        if isinstance(dedup_cfg, dict) and not isinstance(dedup_cfg.get("value_aware", True), bool):
            # a previous release took any value_aware and used its truth ("no" kept the guard on, None
            # turned it off): a file keeps what it did; DedupConfig now asks for a bool
            dedup_cfg = {**dedup_cfg, "value_aware": bool(dedup_cfg["value_aware"])}
        dedup = DedupConfig(**dedup_cfg) if dedup_cfg is not None else False
        store = cls(
            embedder, cfg["forget_threshold"], decay=cfg["decay"], actr_k=cfg["actr_k"], dedup=dedup,
            namespace=cfg["namespace"], max_cues=cfg["max_cues"], ppr_alpha=cfg["ppr_alpha"],
            ppr_max_iter=cfg["ppr_max_iter"], ppr_tol=cfg["ppr_tol"], ppr_fallback=cfg["ppr_fallback"],
            embed_window=cfg["embed_window"],
        )
        merged = meta.get("merged", {})
        if not isinstance(merged, dict) or not all(
                isinstance(m, str) and isinstance(t, list) and all(isinstance(x, str) for x in t)
                for m, t in merged.items()):
            raise ValueError("meta.merged must map memory ids to lists of texts")
        # the clock as tick() takes one (an int of at most 2**53 in size): unchecked, a file's "abc" loaded
        # and failed the next tick. Not compared with 0: a file of a release whose clock could be set
        # back keeps its (negative) clock, which ACT-R reads like any other (lags are floored at 1)
        store._current_step = _check_step(meta["clock"], "meta.clock")
        store._counters = {k: int(v) for k, v in meta["counters"].items()}
        store.counters.update(meta.get("stats_counters", {}))
        if dim:
            store._dim = dim
        ids = list(state["embedding_ids"])
        emb = np.asarray(state["embeddings"], dtype=np.float32)
        if emb.shape[0] != len(ids) or (len(ids) and emb.shape[1] != dim):
            raise ValueError(f"embeddings: shape {emb.shape} does not match {len(ids)} ids of dimension {dim}")
        row_of = {m: i for i, m in enumerate(ids)}
        layout = meta.get("layout", {})
        if not isinstance(layout, Mapping):
            raise ValueError(f"layout must be an object (namespace -> row layout), got {type(layout).__name__}")
        layout = {name: _check_layout(name, lay) for name, lay in layout.items()}
        actr = state["actr"]
        # the spaces first, in the saved order: namespaces(), sweeps, erasures across namespaces and
        # the next export all walk the spaces in this order, which the records' order need not give
        # (the first record of a namespace may be gone while a later namespace's is still there)
        for name, lay in layout.items():
            space = _Space(name, dim, store._actr_k, store._embed_window, store._dedup_window())
            while space.capacity < lay["capacity"]:
                space._grow()
            store._spaces[name] = space
        for d in state["records"]:
            d = dict(d)
            kind = d.pop("kind")
            mid = d["memory_id"]
            _legacy_record(d)
            if kind == "episodic":
                rec: Record = EpisodicMemory(**d)
            elif kind == "semantic":
                rec = SemanticMemory(**d)
            else:
                raise ValueError(f"record {mid!r}: kind must be 'episodic' or 'semantic', got {kind!r}")
            _check_tier(rec.tier, rec.confidence)
            if mid in store._records:
                raise ValueError(f"record {mid!r} appears twice")
            if mid not in row_of:
                raise ValueError(f"record {mid!r} has no embedding row")
            space = store._spaces.get(rec.namespace)
            if space is None:  # (a state without a layout: rows are allocated afresh)
                space = _Space(rec.namespace, dim, store._actr_k, store._embed_window, store._dedup_window())
                store._spaces[rec.namespace] = space
            a = actr[mid]
            lay = layout.get(rec.namespace)
            if lay is None and layout:
                raise ValueError(f"record {mid!r}: namespace {rec.namespace!r} has no row layout")
            if lay is not None and mid not in lay["slots"]:
                raise ValueError(f"record {mid!r}: no row in the layout of namespace {rec.namespace!r}")
            slot = lay["slots"][mid] if lay is not None else None
            store._insert(space, rec, emb[row_of[mid]], signature(rec.content),
                          actr=(float(a["created"]), int(a["n"]), [float(t) for t in a["recent"]]), slot=slot)
        for name, lay in layout.items():
            space = store._spaces[name]
            if len(space.order) != len(lay["slots"]):
                ghosts = sorted(set(lay["slots"]) - set(space.order))[:3]
                raise ValueError(f"layout of namespace {name!r}: rows for ids that are no records of it "
                                 f"({', '.join(map(repr, ghosts))})")
            space.hi = lay["hi"]
            space.free = list(lay["free"])
            space.recent_slots.clear()
            space.recent_slots.extend(lay["recent_slots"])
            space.window_in_order = False  # (the file's window, not this load's writes)
            space.gone = {str(k): [str(m) for m in v] for k, v in (lay.get("gone") or {}).items()}
            space.gone_key = {m: k for k, v in space.gone.items() for m in v}
        for src, dst, rel, w in state["edges"]:
            rs, rd = store._records.get(src), store._records.get(dst)
            if rs is None or rd is None or rs.namespace != rd.namespace:
                raise ValueError(f"edge {src!r} -> {dst!r}: both ends must be live memories of one namespace")
            store._loc[src][0].graph.add_edge(src, dst, rel, float(w))
        stray = sorted(set(merged) - store._records.keys())[:3]
        if stray:
            raise ValueError(f"meta.merged: texts for ids that are no records ({', '.join(map(repr, stray))})")
        store._merged = {m: list(t) for m, t in merged.items()}
        store.extra_state = dict(state.get("extra") or {})
        for name, restore in list(cls._extra_restorers.items()):
            if name in store.extra_state:
                restore(store, store.extra_state[name])
        return store

    # ------------------------------------------------------------------ views and stats
    @property
    def graph(self) -> nx.DiGraph:
        """Read-only (frozen) networkx view of the associative graph of every namespace, always current.

        Cue nodes are "cue::<cue>" in the default namespace and "cue::<namespace>::<cue>" elsewhere;
        no two namespaces' cues share a name (a cue holds no "::" and does not begin with ":").
        """
        sig = tuple((name, id(s.graph), s.graph.version) for name, s in self._spaces.items())
        if self._graph_view is not None and self._graph_view[0] == sig:
            return self._graph_view[1]
        g = nx.DiGraph()
        for name, space in self._spaces.items():
            sg = space.graph
            rename = (lambda n: n) if name == self._default_namespace else (
                lambda n, _p=f"{_CUE}{name}::": _p + n[len(_CUE):] if n.startswith(_CUE) else n)
            for node in sorted(sg.nodes()):
                g.add_node(rename(node), kind=sg.kind(node), namespace=name)
            for src, dst, rel, w in sg.edges():
                g.add_edge(rename(src), rename(dst), rel=rel, weight=w)
        g = nx.freeze(g)
        self._graph_view = (sig, g)
        return g

    def namespace_graph(self, namespace: str | None = None) -> AssocGraph | None:
        """The namespace's own AssocGraph (what PPR runs on)."""
        space = self._space(self._ns(namespace))
        return space.graph if space is not None else None

    def stats(self, namespace: str | None = None) -> dict[str, int]:
        """Counts; namespace=None covers the whole store."""
        if namespace is None:
            spaces = list(self._spaces.values())
            recs = self._records.values()
        else:
            sp_ = self._spaces.get(self._ns(namespace))
            spaces = [sp_] if sp_ is not None else []
            recs = [self._records[m] for s in spaces for m in s.order]
        recs = list(recs)
        n_sem = sum(1 for r in recs if r.kind == "semantic")
        return {
            "episodic": len(recs) - n_sem,
            "semantic": n_sem,
            "graph_nodes": sum(s.graph.number_of_nodes() for s in spaces),
            "graph_edges": sum(s.graph.number_of_edges() for s in spaces),
            "cue_nodes": sum(len(s.graph.nodes("cue")) for s in spaces),
            "active": sum(1 for r in recs if r.active),
            "superseded": sum(1 for r in recs if not r.active),
            "keys": sum(len(s.chains) for s in spaces),
            "namespaces": sum(1 for s in spaces if s.order),
            "embedding_rows": sum(int(s.alive.sum()) for s in spaces),
            "embedding_capacity": sum(s.capacity for s in spaces),
        }

    def __repr__(self) -> str:
        return f"MemoryStore(episodic={len(self._episodic)}, semantic={len(self._semantic)}, step={self._current_step})"


# --------------------------------------------------------------------------- namespaced view
class NamespaceView:
    """The store seen from one namespace: the store's per-namespace methods and views (writes,
    queries, versions, erasure, `graph`, `namespace_graph`, `actr`, `summaries`, `stats`, ...), every
    call scoped to `name`. What is store-wide stays on `view.store`: configuration, `save` / `load`,
    `namespaces()`, `counters`, `extras`."""

    def __init__(self, store: MemoryStore, name: str) -> None:
        self.store = store
        self.name = name

    @property
    def current_step(self) -> int:
        return self.store.current_step

    def tick(self, step: int) -> None:
        self.store.tick(step)

    def _own(self, memory_id: str) -> bool:
        rec = self.store.get(memory_id)
        return rec is not None and rec.namespace == self.name

    # (a namespace= kwarg was dropped silently and the write went to this namespace: another one is
    # refused as by the view's other methods, this one or None is fine)
    def write_episode(self, step, content, cues=None, importance=0.5, **kw) -> EpisodicMemory:
        ns = self._scope(kw.pop("namespace", None))
        return self.store.write_episode(step, content, cues, importance, namespace=ns, **kw)

    def write_semantic(self, step, rule, derived_from, **kw) -> SemanticMemory:
        ns = self._scope(kw.pop("namespace", None))
        return self.store.write_semantic(step, rule, derived_from, namespace=ns, **kw)

    @property
    def last_write(self) -> WriteReport | None:
        return self.store.last_write

    @property
    def embedder(self):
        return self.store.embedder

    def add_erase_hook(self, fn) -> None:
        """Hooks are store-wide (an erase in any namespace calls them)."""
        self.store.add_erase_hook(fn)

    def link(self, a, b, relation) -> bool:
        _relation(relation)  # the relation first, as the store does: a bad one is an error, not False
        return self._own(a) and self._own(b) and self.store.link(a, b, relation)

    def forget(self, memory_id: str) -> bool:
        return self._own(memory_id) and self.store.forget(memory_id)

    def add_evidence(self, memory_id: str, evidence, derived_from=()) -> None:
        if not self._own(memory_id):
            raise KeyError(f"unknown memory id {memory_id!r} in namespace {self.name!r}")
        self.store.add_evidence(memory_id, evidence, derived_from)

    def sweep_decayed(self) -> list[str]:
        return self.store.sweep_decayed(namespace=self.name)

    def query(self, query_text, cues=None, top_k=5, alpha_ppr=0.5, alpha_sim=0.35, alpha_actr=0.15, *, bump=True):
        return self.store.query(query_text, cues, top_k, alpha_ppr, alpha_sim, alpha_actr, namespace=self.name, bump=bump)

    def query_scored(self, query_text, cues=None, top_k=5, alpha_ppr=0.5, alpha_sim=0.35, alpha_actr=0.15, *, bump=True):
        return self.store.query_scored(query_text, cues, top_k, alpha_ppr, alpha_sim, alpha_actr,
                                       namespace=self.name, bump=bump)

    def supersede(self, memory_id, new_content, step, **kw):
        if not self._own(memory_id):
            raise KeyError(f"unknown memory id {memory_id!r} in namespace {self.name!r}")
        return self.store.supersede(memory_id, new_content, step, **kw)

    def versions(self, key):
        return self.store.versions(key, namespace=self.name)

    def value_at(self, key, step):
        return self.store.value_at(key, step, namespace=self.name)

    def explain(self, key):
        return self.store.explain(key, namespace=self.name)

    def conflicts(self):
        return self.store.conflicts(namespace=self.name)

    def erase(self, key=None, memory_id=None, subject=None) -> ErasureReport:
        # the real id, scoped to this namespace: the store leaves another namespace's memory alone, and
        # an id of this namespace that already left (forgotten, swept) still reaches what cites it and
        # the rolling summary's turn
        report = self.store.erase(key=key, memory_id=memory_id, subject=subject, namespace=self.name)
        report.extra.pop("not_in_namespace", None)  # ids of other namespaces are invisible here
        return report

    def get(self, memory_id):
        return self.store.get(memory_id) if self._own(memory_id) else None

    def __contains__(self, memory_id) -> bool:
        return self._own(memory_id)

    def __len__(self) -> int:
        space = self.store._spaces.get(self.name)
        return len(space.order) if space is not None else 0

    def _ids(self) -> list[str]:
        space = self.store._spaces.get(self.name)
        return list(space.order) if space is not None else []

    @property
    def episodic(self) -> dict[str, EpisodicMemory]:
        return {m: self.store._episodic[m] for m in self._ids() if m in self.store._episodic}

    @property
    def semantic(self) -> dict[str, SemanticMemory]:
        return {m: self.store._semantic[m] for m in self._ids() if m in self.store._semantic}

    @property
    def graph(self) -> nx.DiGraph:
        g = self.store.namespace_graph(self.name)
        return nx.freeze(g.to_networkx()) if g is not None else nx.freeze(nx.DiGraph())

    def _scope(self, namespace: str | None) -> str:
        if namespace is not None and namespace != self.name:
            raise ValueError(f"namespace {namespace!r} given for a view of namespace {self.name!r}")
        return self.name

    def namespace_graph(self, namespace: str | None = None) -> AssocGraph | None:
        """This namespace's own AssocGraph (what PPR runs on), None while it holds nothing."""
        return self.store.namespace_graph(self._scope(namespace))

    @property
    def actr(self) -> dict[str, ActRRecord]:
        """ACT-R state of this namespace's live memories, as ActRRecord snapshots."""
        return self.store.actr_of(self._ids())

    def summaries(self, namespace: str | None = None, **kwargs) -> Any:
        """This namespace's rolling summary (world.summary.summaries), created with `kwargs` on first use."""
        from world.summary import summaries

        return summaries(self, namespace, **kwargs)

    def stats(self) -> dict[str, int]:
        return self.store.stats(namespace=self.name)

    def embed(self, text):
        return self.store.embed(text)

    def similarities(self, vec, ids=None):
        if ids is not None:
            ids = _ids_arg("similarities", ids, " or None")
            for m in ids:
                if not self._own(m):
                    raise KeyError(f"unknown memory id {m!r} in namespace {self.name!r}")
        return self.store.similarities(vec, ids, namespace=self.name)

    def activations(self, ids):
        ids = _ids_arg("activations", ids)
        for m in ids:
            if not self._own(m):
                raise KeyError(f"unknown memory id {m!r} in namespace {self.name!r}")
        return self.store.activations(ids)

    def link_count(self, memory_id):
        if not self._own(memory_id):
            raise KeyError(f"unknown memory id {memory_id!r} in namespace {self.name!r}")
        return self.store.link_count(memory_id)

    def recent_ids(self, n, active_only=False):
        return self.store.recent_ids(n, namespace=self.name, active_only=active_only)

    def __repr__(self) -> str:
        return f"NamespaceView({self.name!r}, memories={len(self)})"
