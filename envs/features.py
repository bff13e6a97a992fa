"""Observation features of :class:`envs.MemoryEnv`: the candidate memories as numbers, and the store.

The candidates are the world's (:meth:`world.World.candidates`, shared with the oracle and the
heuristic agents so that a target means the same thing to all of them): up to ``n_recent`` most
recently written memories (newest first), then the active memories most similar to the event text
(most similar first; ties keep write order), deduplicated, at most K. Slots without a memory are all
zeros and masked out.

Every feature is a float32 inside the bounds in :data:`CANDIDATE_LOW` / :data:`CANDIDATE_HIGH` and
:data:`STORE_LOW` / :data:`STORE_HIGH`; nothing depends on wall-clock time or on Python's salted
``hash``, so the same world state gives bit-identical features in any process.
"""

from __future__ import annotations

import math
import struct
from itertools import compress
from operator import attrgetter
from typing import TYPE_CHECKING

import numpy as np

from world.dedup import DedupConfig, duplicate_rule, embedding_duplicate, signature
from world.keys import subject_and_topic_of

if TYPE_CHECKING:  # pragma: no cover
    from world import World

#: Columns of ``observation["candidates"].reshape(K, F)``.
CANDIDATE_FEATURES: tuple[str, ...] = (
    "similarity",       # cosine(event, memory), in [-1, 1]
    "activation",       # ACT-R base level B squashed: 1 / (1 + exp(-(B - forget_threshold))), 0 when never seen
    "importance",       # importance / IMPORTANCE_CAP (the seed-000 scorer's cap, 2.5), clipped to [0, 1]
    "age",              # log1p(steps since written) / log1p(AGE_CAP), clipped to [0, 1]
    "tier_fact",        # one-hot of the record's tier (all zero for other tiers)
    "tier_preference",
    "tier_inference",
    "semantic",         # 1 for a semantic rule (REFLECT), 0 for an episode
    "links",            # typed links, min(n, LINK_CAP) / LINK_CAP
    "cue_overlap",      # |cues(event) & cues(memory)| / max(1, |cues(event)|)
    "recent",           # 1 if among the n_recent most recently written live memories
    "superseded",       # 1 if a newer version of the memory exists
    "chain_length",     # versions in the memory's chain, min(n, CHAIN_CAP) / CHAIN_CAP
    "confidence",       # confidence clipped to [0, 1]
    # appended (visible text only, world.keys / world.dedup; never a hidden payload):
    "same_subject",     # 1 if event and memory share a subject word (entity-like word, or "user" for I/my)
    "same_topic",       # 1 if they share a topic word (content word that is not a subject word)
    "same_key",         # same_subject and same_topic: the same version key as the `versioned` baseline reads it
    "key_best",         # 1 for the best key match: active episode, same subject and (same topic or
                        # similarity >= KEY_SIM), highest (shared subject + topic words, similarity)
    "duplicate",        # 1 if the event is a duplicate of the memory by the store's dedup rules
)
N_CANDIDATE_FEATURES = len(CANDIDATE_FEATURES)
CANDIDATE_LOW = np.zeros(N_CANDIDATE_FEATURES, dtype=np.float32)
CANDIDATE_LOW[0] = -1.0
CANDIDATE_HIGH = np.ones(N_CANDIDATE_FEATURES, dtype=np.float32)

#: Entries of ``observation["store"]``.
STORE_FEATURES: tuple[str, ...] = (
    "fill",             # live memories / capacity
    "episodic",         # live episodes / capacity
    "semantic",         # live semantic rules / capacity
    "mean_activation",  # mean squashed activation (as the candidate column) over the live store
    "sweep_countdown",  # steps until the next ACT-R sweep / sweep_every
    "clock",            # event index / horizon; endless worlds: index / (index + ENDLESS_CLOCK_SCALE)
    "n_candidates",     # filled candidate slots / K
    "last_invalid",     # 1 if the previous action was invalid
)
N_STORE_FEATURES = len(STORE_FEATURES)
STORE_LOW = np.zeros(N_STORE_FEATURES, dtype=np.float32)
STORE_HIGH = np.ones(N_STORE_FEATURES, dtype=np.float32)

EVENT_KINDS: tuple[str, ...] = ("statement", "question", "request")

AGE_CAP = 10_000
KEY_SIM = 0.5  # similarity that stands in for a shared topic word in key_best (versioned's topic_sim)
IMPORTANCE_CAP = 2.5
LINK_CAP = 8
CHAIN_CAP = 8
ENDLESS_CLOCK_SCALE = 1_000.0
TIERS = ("fact", "preference", "inference")
_LOG_AGE_CAP = math.log1p(AGE_CAP)
_CHAIN_ONE = 1.0 / CHAIN_CAP
_KEY_BEST = CANDIDATE_FEATURES.index("key_best")
#: packed float32 (native order, as the buffers): ``pack_into`` writes a candidate row, the store
#: features or one entry straight into a buffer from Python numbers (bools as 0 / 1), each rounded to
#: float32 as numpy's assignment of a list rounds it (a C cast from double), without a list or a
#: numpy call
_STORE_ROW = struct.Struct(f"={N_STORE_FEATURES}f")
_FLOAT = struct.Struct("=f")
_LINKS = attrgetter("links")
#: a candidate row as ``pack_into`` takes it from a memory's static row: the four columns tier_fact ..
#: semantic and the confidence come packed once per memory (``16s``, ``4s``: the bytes ``=4f`` / ``=f``
#: give, copied), and key_best as pad bytes (zeros: +0.0; the best row's is set afterwards)
_ROW = struct.Struct("=4f16s5f4s3f4xf")
_STATIC_FLOATS = struct.Struct("=4f")
_FLOAT64 = np.dtype(np.float64)  # (a native float64 array's dtype is this instance: an identity test)
assert _ROW.size == 4 * N_CANDIDATE_FEATURES and CANDIDATE_FEATURES[4:8] == (
    "tier_fact", "tier_preference", "tier_inference", "semantic") and CANDIDATE_FEATURES[13] == "confidence"
# uncached (subject_and_topic_of a fresh signature): the env must not keep the words of erased memories
# in a process-wide cache; the builder computes a memory's key once, in its per-memory row, and the
# event's once per event


def squash_activation(b: np.ndarray, threshold: float) -> np.ndarray:
    """Map ACT-R base-level activations to (0, 1): ``1 / (1 + exp(-(B - threshold)))``.

    This is the retrieval probability of ACT-R with noise scale s = 1 and retrieval threshold at the
    store's forget threshold: 0.5 means B is at the threshold. A sweep drops a memory when
    ``B + importance < threshold`` (``MemoryStore.sweep_decayed``), i.e. when this value is below
    ``1 / (1 + exp(importance))`` (about 0.33-0.38 at the worlds' importances 0.5-0.72), not 0.5;
    the importance column shows the rest. ``-inf`` and NaN map to ~0 (the
    exponent is capped at 60, so no overflow warning is possible).
    """
    if type(b) is np.ndarray and b.dtype is _FLOAT64:
        x = threshold - b  # (float64 already: the same subtraction without the dtype keyword's cost)
    else:
        x = np.subtract(threshold, b, dtype=np.float64)
    np.fmin(x, 60.0, out=x)  # fmin drops NaN in favour of 60; -inf activations become 60 too
    np.exp(x, out=x)
    x += 1.0
    return np.reciprocal(x, out=x)


class _StoreArrays:
    """Vectorised per-step reads of the store through its slot arrays: the candidates' similarities
    (one mat-vec) and the squashed ACT-R activations of every live memory (one activation batch),
    from which both the candidates' column and the store's mean are taken.

    Uses the store's internal layout (``_spaces``, a space's ``view()`` / ``order`` / ``emb``,
    ``_records``, ``_activation_rows``); any store without it (or memories in other namespaces) takes
    the public API instead. A test checks both paths
    give the same numbers.
    """

    fast = True  # False forces the public-API path (tests compare the two)

    @classmethod
    def read(cls, store, ids: list[str], vec: np.ndarray | None, threshold: float) -> tuple[list, list, list, float, bool]:
        """(similarities of ``ids`` to ``vec``, every live memory's id, their squashed activations in
        that order, the mean of those, whether those ids are in write order), as Python lists, a float
        and a bool; the store must not be empty, and ``vec`` may be None only without ``ids``. In write
        order (the default namespace's view, the fast path), the last n ids are ``store.recent_ids(n)``.

        The candidates' activations are to be picked out of the store-wide list (``ids`` are live
        memories): each row of ``hybrid_base_level_batch`` and of the squash is computed on its own
        (the same operations on the same inputs whatever the other rows), so a row picked out of
        the batch has the bits a batch of the candidates alone would give."""
        try:
            if not cls.fast:
                raise LookupError("public path requested")
            space = store._spaces[store.default_namespace]
            all_ids, all_slots = space.view()
            if len(all_ids) != len(store._records):
                raise LookupError("several namespaces")
            squashed = squash_activation(store._activation_rows(space, all_slots), threshold)
            if ids:
                # every live memory is in the default namespace (checked above), so are the candidates;
                # (ndarray.dot: the same BLAS gemv as ``@``, bit for bit, with less call overhead)
                # (the slots from the space's id -> slot dict, looked up in C)
                sims = space.emb.take(list(map(space.order.__getitem__, ids)), axis=0).dot(vec).tolist()
            else:
                sims = []
            write_order = True
        except (AttributeError, KeyError, LookupError, TypeError, ValueError):
            all_ids = list(store.episodic) + list(store.semantic)
            squashed = squash_activation(store.activations(all_ids), threshold)
            sims = store.similarities(vec, ids)[1].tolist() if ids else []
            write_order = False
        mean = float(np.add.reduce(squashed)) / len(all_ids)  # (= ndarray.sum)
        return sims, all_ids, squashed.tolist(), mean, write_order


def _link_columns(store) -> dict[str, float]:
    """memory id -> its ``links`` column, ``min(n, LINK_CAP) / LINK_CAP`` with n its typed links in both
    directions (``len(record.links)``, its outgoing ones, which the store keeps in step with the
    graph, plus those of other records that point at it): ``store.link_count`` without walking the
    graph's cue edges, for every memory at once; memories without typed links are left out (0.0).
    A test checks the counts against ``store.link_count``."""
    counts: dict[str, int] = {}
    for records in (store.episodic, store.semantic):
        # (the records with typed links picked in C: most have none)
        for mid, rec in compress(records.items(), map(_LINKS, records.values())):
            counts[mid] = counts.get(mid, 0) + len(rec.links)
            for dst in rec.links:
                counts[dst] = counts.get(dst, 0) + 1
    return {mid: (n if n < LINK_CAP else LINK_CAP) / LINK_CAP for mid, n in counts.items()}


def _chain_length_of(store):
    """key -> ``len(store.versions(key))``: the length of the default namespace's chain read from the
    store's chain index (``store.versions`` builds the list of records only to be counted), else by
    ``versions``."""
    try:
        chains = store._spaces[store.default_namespace].chains
    except (AttributeError, KeyError, TypeError):
        return lambda key: len(store.versions(key))
    return lambda key: len(chains.get(key, ()))


def _store_signature(store, mid: str, text: str):
    """``signature(text)`` of a stored memory: the store's own (it keeps those of recent writes, and
    the world handed it the event's), else computed here."""
    try:
        space = store._loc[mid][0]
        if store._records[mid].text == text:
            return store._sig(space, mid)
    except (AttributeError, KeyError, TypeError):
        pass
    return signature(text)


class FeatureBuilder:
    """Builds the candidate list and the candidate / store feature arrays for one world.

    Buffers are allocated once; :meth:`build` fills them in place (callers copy what they return to
    users). Per-text caches (event cues) are bounded.
    """

    # (class defaults: builders pickled before these existed load with them)
    _filled: int | None = None  # candidate rows the last build filled (None: any row may hold data)
    _masks: tuple | None = None  # slot mask of m filled slots, m = 0..K (read-only arrays)
    _position_cache: tuple | None = None  # (the store's view id list, id -> index in it)
    _link_cache: tuple | None = None  # (store, store._link_changes, _link_columns(store))
    _config_consts: tuple | None = None  # (config, threshold, capacity, sweep_every, horizon) as build reads them
    _state_key: tuple | None = None  # (store, world._version, store._link_changes) when links / static were last read
    n_current = 0  # filled slots whose memory is the newest version of its chain (last build)
    n_episodes = 0  # filled slots holding an episode (last build)

    def __init__(self, n_candidates: int, n_recent: int) -> None:
        if n_candidates < 1:
            raise ValueError(f"n_candidates must be >= 1, got {n_candidates}")
        self.k = int(n_candidates)
        self.n_recent = int(n_recent)
        self.candidates = np.zeros((self.k, N_CANDIDATE_FEATURES), dtype=np.float32)
        self.mask = np.zeros(self.k, dtype=np.int8)
        self.store = np.zeros(N_STORE_FEATURES, dtype=np.float32)
        self.ids: list[str] = []
        self._cue_cache: tuple[str, frozenset[str]] | None = None
        self._key_cache: tuple | None = None
        self._links_key: tuple | None = None
        self._static_store = None
        self._static: dict = {}
        self._static_version: tuple | None = None
        self._links: dict = {}

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        for name in ("_static_store", "_static", "_static_version", "_state_key", "_link_cache", "_position_cache"):
            state.pop(name, None)  # a cache of the store's records: rebuilt from the store after loading
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        # (the per-memory rows are rebuilt from the store: a builder pickled by an earlier release kept
        # rows of another shape, and one that is loaded mid-episode would read them)
        self._static_store = None
        self._static = {}
        self._static_version = None
        self._state_key = None
        self._link_cache = self._position_cache = None

    # ------------------------------------------------------------------ features
    def _link_counts(self, world: World) -> dict:
        """Incoming typed links and chain lengths, cached while the store is unchanged (the world
        bumps ``_version`` on every write, link, erasure and sweep)."""
        key = (world.store, getattr(world, "_version", None))
        if self._links_key != key or key[1] is None:
            self._links_key = key
            self._links = {}
        return self._links

    def _static_rows(self, store) -> dict:
        """Per-memory parts that never change while the memory lives (ids are never reused). Entries of
        memories that left the store are dropped whenever one may have left (the store's
        ``_link_changes`` counter moves with every removal; without it, on every store change), so
        that nothing of a forgotten memory (its record, its cues) outlives it in the env."""
        if self._static_store is not store:
            self._static_store = store
            self._static = {}
            self._static_version = None
        version = getattr(store, "_link_changes", None)
        if version is None:
            version = self._links_key
        if version != self._static_version:
            self._static_version = version
            static = self._static
            records = getattr(store, "_records", None)  # live ids: one set difference in C
            gone = static.keys() - records.keys() if isinstance(records, dict) else \
                [m for m in static if m not in store]
            for mid in gone:
                del static[mid]
        return self._static

    @staticmethod
    def _static_row(store, mid: str, event_keys: tuple = ()) -> tuple:
        """The parts of a live memory's feature row that stay while it lives: ``(record, written_at,
        confidence clipped, cues, its confidence column packed, its tier_fact .. semantic columns packed,
        semantic, subject words, topic words, has text, signature, the signature's fingerprint and
        content words)``.
        ``event_keys``: entries ``(text, (subject, topic, signature))`` of :meth:`event_key`; a memory
        written from one of those texts (a write of the previous event, as a rule) takes its key from
        there (the same pure functions of the same text)."""
        episodic = getattr(store, "_episodic", None)  # (the public property wraps it in a new proxy)
        rec = (episodic if isinstance(episodic, dict) else store.episodic).get(mid)
        semantic = rec is None
        if semantic:
            rec = store.semantic[mid]
        tier = rec.tier
        conf = float(rec.confidence)
        text = rec.text or ""
        for known in event_keys:
            if known is not None and known[0] == text:
                subj, topic, sig = known[1]
                break
        else:
            sig = _store_signature(store, mid, text)
            subj, topic = subject_and_topic_of(sig)
        conf = min(max(conf, 0.0), 1.0)
        return (rec, int(rec.written_at), conf, frozenset(rec.cues or ()), _FLOAT.pack(conf),
                _STATIC_FLOATS.pack(float(tier == "fact"), float(tier == "preference"), float(tier == "inference"),
                                    float(semantic)),
                semantic, subj, topic, bool(text), sig, sig.fp, sig.content)

    def event_cues(self, text: str) -> frozenset[str]:
        """Cues of the current event text (``world.extract_cues``), computed once per event."""
        cached = self._cue_cache
        if cached is not None and cached[0] == text:
            return cached[1]
        from world import extract_cues

        cues = frozenset(extract_cues(text))
        # one entry only: the env must not keep words of past events around (an erased fact's
        # words would survive a FORGET in the env's memory and in its pickles)
        self._cue_cache = (text, cues)
        return cues

    def event_key(self, text: str, sig=None, key: tuple | None = None) -> tuple:
        """(subject, topic, dedup signature) of the current event text, computed once per event (one
        entry only, as the cue cache). ``sig``: the text's signature when the caller has it; ``key``:
        the whole triple when the caller has it (the world's memo of its own script text)."""
        cached = self._key_cache
        if cached is not None and cached[0] == text:
            return cached[1]
        if key is not None:
            out = key
        else:
            if sig is None:
                sig = signature(text)
            subj, topic = subject_and_topic_of(sig)
            out = (subj, topic, sig)
        self._key_cache = (text, out)
        return out

    def build(self, world: World, event_vec: np.ndarray | None, event_text: str | None,
              event_index: int, last_invalid: bool) -> list[str]:
        """Fill ``self.candidates``, ``self.mask``, ``self.store`` (and the slot counts
        ``n_current`` / ``n_episodes``); return the candidate ids."""
        store = world.store
        cfg = world.config
        consts = self._config_consts
        if consts is None or consts[0] is not cfg:  # (a WorldConfig is frozen)
            consts = self._config_consts = (cfg, float(cfg.forget_threshold), max(1, int(cfg.capacity)),
                                            max(1, int(cfg.sweep_every)), cfg.horizon)
        _, threshold, cap, every, horizon = consts
        ids = world.candidates() if event_vec is not None else []
        self.ids = ids
        m = len(ids)
        now = int(store.current_step)
        n_live = len(store)
        if n_live:
            # (after the last event there are no candidates, so no similarity to take: embedding a
            # placeholder text here ran the model once per episode with MiniLM, ~15 ms)
            sims, all_ids, squashed, mean_act, write_order = _StoreArrays.read(store, ids, event_vec, threshold)
        else:
            mean_act = 0.0
        state = (store, getattr(world, "_version", None), getattr(store, "_link_changes", None))
        if state[1] is None or state[2] is None or state != self._state_key:
            if self._state_key is None or self._state_key[0] is not store:
                # another store (a reset, set_state): keep nothing of the last one, whose records the
                # link cache would otherwise hold until the first step with a candidate
                self._link_cache = self._position_cache = None
            self._state_key = state
            links = self._link_counts(world)
            static = self._static_rows(store)  # (after _link_counts: prunes on a store change)
        else:  # (neither the world's version nor the store's link / removal counter moved: both as they were)
            links, static = self._links, self._static
        n_superseded = n_semantic = 0
        if m:
            # the n_recent newest memories: the view's last positions (write order), else the store's list
            recent = len(all_ids) - self.n_recent if write_order else None
            n_superseded, n_semantic = self._fill_rows(world, store, ids, sims, self._positions(all_ids), squashed,
                                                       event_text, now, links, static, recent)
        c = self.candidates
        filled = self._filled if self._filled is not None else self.k  # rows an earlier step may have filled
        if filled > m:
            c[m:filled] = 0.0
        self._filled = m
        self.n_current = m - n_superseded
        self.n_episodes = m - n_semantic
        masks = self._masks
        if masks is None:  # mask of m filled slots, for every m (read-only: shared by every step)
            masks = self._masks = tuple(np.array([1] * i + [0] * (self.k - i), dtype=np.int8)
                                        for i in range(self.k + 1))
            for mask in masks:
                mask.setflags(write=False)
        self.mask = masks[m]
        # store features
        try:  # (the store's dicts: the public properties wrap each in a new read-only proxy)
            live_episodes, live_rules = len(store._episodic), len(store._semantic)
        except AttributeError:
            live_episodes, live_rules = len(store.episodic), len(store.semantic)
        step = max(0, int(event_index))
        # (``1.0 if 1.0 < x else x`` is ``min(x, 1.0)``, without a builtin call per entry)
        fill, episodic, semantic = n_live / cap, live_episodes / cap, live_rules / cap
        clock = step / horizon if horizon else step / (step + ENDLESS_CLOCK_SCALE)
        _STORE_ROW.pack_into(
            self.store, 0,
            1.0 if 1.0 < fill else fill,
            1.0 if 1.0 < episodic else episodic,
            1.0 if 1.0 < semantic else semantic,
            mean_act,
            (every - (now % every)) / every,
            (1.0 if 1.0 < clock else clock) if horizon else clock,
            m / self.k,
            1.0 if last_invalid else 0.0,
        )
        return ids

    def _positions(self, ids: list[str]) -> dict[str, int]:
        """memory id -> its index in ``ids``, kept while the store hands out the same view list (one
        per version of its slot view; the public path makes a new list each step)."""
        cached = self._position_cache
        if cached is None or cached[0] is not ids:
            cached = self._position_cache = (ids, dict(zip(ids, range(len(ids)))))  # (built in C)
        return cached[1]

    def _fill_rows(self, world: World, store, ids: list[str], sims: list, position: dict, squashed: list,
                   event_text: str | None, now: int, links: dict, static: dict,
                   first_recent: int | None = None) -> tuple[int, int]:
        """Write the feature rows of the candidates ``ids`` (all live) into ``self.candidates``;
        return (superseded, semantic) candidate counts. ``squashed[position[mid]]``: a candidate's
        squashed activation; ``first_recent``: when positions are in write order, the first position
        among the ``n_recent`` newest (``recent`` is then ``position[mid] >= first_recent``; None: ask
        ``store.recent_ids``)."""
        # the world's analysis of its own event text, read once: (index, cues, signature, version key)
        # from its script-text memo, the values event_cues() / event_key() return (the env keeps none:
        # a text's words must not outlive an erasure here)
        world_analysis = getattr(world, "_event_analysis", None) if event_text else None
        if world_analysis is not None and world.event.text == event_text:
            _, world_cues, _, world_key = world_analysis()
        else:
            world_cues = world_key = None
        if not event_text:
            ev_cues = frozenset()
        elif world_cues is not None and getattr(store, "max_cues", None) == 8:
            ev_cues = frozenset(world_cues)  # the world's per-event cues (max_cues 8, as here)
        else:
            ev_cues = self.event_cues(event_text)
        n_ev = max(1, len(ev_cues))
        previous_key = self._key_cache  # (the previous event's: the text a write of it stored)
        if event_text:
            ev_subj, ev_topic, ev_sig = self.event_key(event_text, key=world_key)
        else:
            ev_subj, ev_topic, ev_sig = frozenset(), frozenset(), None
        event_keys = (self._key_cache, previous_key)
        dedup_cfg = getattr(store, "dedup_config", None) or DedupConfig()
        embed_threshold = dedup_cfg.embed_threshold
        value_aware = dedup_cfg.value_aware
        check_dup = ev_sig is not None
        if check_dup:
            ev_fp, ev_content = ev_sig.fp, ev_sig.content
        best_offset, best_score = -1, None
        if first_recent is None:
            recent = store.recent_ids(self.n_recent) if self.n_recent else ()
        link_column = self._link_columns(store, links).get
        chain_length = None  # (_chain_length_of(store) when a chain's length is first needed this version)
        buffer = self.candidates
        pack_into = _ROW.pack_into
        row_size = _ROW.size
        log1p = math.log1p
        links_get = links.get
        n_superseded = n_semantic = 0
        offset = 0
        for mid, sim in zip(ids, sims):
            try:
                st = static[mid]
            except KeyError:
                st = static[mid] = self._static_row(store, mid, event_keys)
            rec, written_at, _, cues, conf, tiers, sem, subj, topic, has_text, _, fp, content = st
            imp = rec.importance / IMPORTANCE_CAP
            key = rec.key
            if key is None:
                chain = _CHAIN_ONE
            else:
                chain = links_get(key)
                if chain is None:
                    if chain_length is None:
                        chain_length = _chain_length_of(store)
                    chain = links[key] = min(max(chain_length(key), 1), CHAIN_CAP) / CHAIN_CAP
            age = now - written_at
            if age > 0:
                age = log1p(age) / _LOG_AGE_CAP
                if age > 1.0:
                    age = 1.0
            else:
                age = 0.0
            if not -1.0 <= sim <= 1.0:
                sim = 1.0 if sim > 1.0 else -1.0
            same_subj = not ev_subj.isdisjoint(subj)  # (no intersection set unless key_best needs its size)
            same_topic = not ev_topic.isdisjoint(topic)
            superseded = rec.superseded_at is not None
            if superseded:
                n_superseded += 1
            if sem:
                n_semantic += 1
            elif same_subj and (same_topic or sim >= KEY_SIM) and not superseded and has_text:
                score = (len(ev_subj & subj) + len(ev_topic & topic), sim)
                if best_score is None or score > best_score:  # ties: the earlier slot
                    best_offset, best_score = offset, score
            if not (check_dup and has_text):
                dup = False
            elif ev_fp == fp:
                dup = True  # duplicate_rule's first rule
            elif value_aware and not ev_content <= content and not content <= ev_content:
                # a value change (words substituted: each side has words the other lacks; two subset
                # tests build no set): neither rule fires (world.dedup)
                dup = False
            else:  # embedding_duplicate is False below its threshold: tested first, it saves a call
                sig = st[10]
                dup = (duplicate_rule(ev_sig, sig, dedup_cfg) is not None
                       or (sim >= embed_threshold and embedding_duplicate(ev_sig, sig, sim, dedup_cfg)))
            pos = position[mid]
            pack_into(
                buffer, offset,
                sim,
                squashed[pos],
                1.0 if imp > 1.0 else (imp if imp > 0.0 else 0.0),
                age,
                tiers,  # (tier_fact, tier_preference, tier_inference, semantic)
                link_column(mid, 0.0),
                len(ev_cues & cues) / n_ev,  # (0.0 when either set is empty: n_ev >= 1)
                pos >= first_recent if first_recent is not None else mid in recent,
                superseded,
                chain,
                conf,
                same_subj,
                same_topic,
                same_subj and same_topic,
                # key_best: 0.0 (pad bytes); set below for the best row
                dup,
            )
            offset += row_size
        if best_offset >= 0:
            _FLOAT.pack_into(buffer, best_offset + _KEY_BEST * _FLOAT.size, 1.0)
        return n_superseded, n_semantic

    def _link_columns(self, store, links: dict) -> dict[str, float]:
        """:func:`_link_columns`, recounted only when the store's typed links may have changed (its
        ``_link_changes`` counter moved; without one, per store version)."""
        changes = getattr(store, "_link_changes", None)
        if changes is None:
            columns = links.get("link_columns")
            if columns is None:
                columns = links["link_columns"] = _link_columns(store)
            return columns
        cached = self._link_cache
        if cached is not None and cached[0] is store and cached[1] == changes:
            return cached[2]
        columns = _link_columns(store)
        self._link_cache = (store, changes, columns)
        return columns
