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
from typing import TYPE_CHECKING

import numpy as np

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
IMPORTANCE_CAP = 2.5
LINK_CAP = 8
CHAIN_CAP = 8
ENDLESS_CLOCK_SCALE = 1_000.0
TIERS = ("fact", "preference", "inference")
_TIER_COL = {t: CANDIDATE_FEATURES.index(f"tier_{t}") for t in TIERS}
_LOG_AGE_CAP = math.log1p(AGE_CAP)


def squash_activation(b: np.ndarray, threshold: float) -> np.ndarray:
    """Map ACT-R base-level activations to (0, 1): ``1 / (1 + exp(-(B - threshold)))``.

    This is the retrieval probability of ACT-R with noise scale s = 1 and retrieval threshold at the
    store's forget threshold: 0.5 means "about to be swept". ``-inf`` (no presentation) maps to 0,
    NaN to 0.
    """
    x = np.asarray(b, dtype=np.float64) - threshold
    x = np.nan_to_num(x, nan=-np.inf)
    with np.errstate(over="ignore"):
        out = 1.0 / (1.0 + np.exp(-x))
    return out


class FeatureBuilder:
    """Builds the candidate list and the candidate / store feature arrays for one world.

    Buffers are allocated once; :meth:`build` fills them in place (callers copy what they return to
    users). Per-text caches (event cues) are bounded.
    """

    def __init__(self, n_candidates: int, n_recent: int) -> None:
        if n_candidates < 1:
            raise ValueError(f"n_candidates must be >= 1, got {n_candidates}")
        self.k = int(n_candidates)
        self.n_recent = int(n_recent)
        self.candidates = np.zeros((self.k, N_CANDIDATE_FEATURES), dtype=np.float32)
        self.mask = np.zeros(self.k, dtype=np.int8)
        self.store = np.zeros(N_STORE_FEATURES, dtype=np.float32)
        self.ids: list[str] = []
        self._cue_cache: dict[str, frozenset[str]] = {}

    # ------------------------------------------------------------------ features
    def event_cues(self, text: str) -> frozenset[str]:
        cues = self._cue_cache.get(text)
        if cues is None:
            from world import extract_cues

            cues = frozenset(extract_cues(text))
            if len(self._cue_cache) > 4096:
                self._cue_cache.clear()
            self._cue_cache[text] = cues
        return cues

    def build(self, world: World, event_vec: np.ndarray | None, event_text: str | None,
              event_index: int, last_invalid: bool) -> list[str]:
        """Fill ``self.candidates``, ``self.mask``, ``self.store``; return the candidate ids."""
        store = world.store
        cfg = world.config
        threshold = float(cfg.forget_threshold)
        ids = world.candidates() if event_vec is not None else []
        self.ids = ids
        c = self.candidates
        c.fill(0.0)
        self.mask.fill(0)
        m = len(ids)
        now = int(store.current_step)
        if m:
            self.mask[:m] = 1
            c[:m, 0] = np.clip(store.similarities(event_vec, ids)[1], -1.0, 1.0)
            c[:m, 1] = squash_activation(store.activations(ids), threshold)
            ev_cues = self.event_cues(event_text) if event_text else frozenset()
            n_ev = max(1, len(ev_cues))
            recent = set(store.recent_ids(self.n_recent)) if self.n_recent else set()
            episodic = store.episodic
            for i, mid in enumerate(ids):
                rec = episodic.get(mid)
                semantic = rec is None
                if semantic:
                    rec = store.semantic[mid]
                row = c[i]
                row[2] = min(max(float(rec.importance) / IMPORTANCE_CAP, 0.0), 1.0)
                age = max(0, now - int(rec.written_at))
                row[3] = min(math.log1p(age) / _LOG_AGE_CAP, 1.0)
                col = _TIER_COL.get(rec.tier)
                if col is not None:
                    row[col] = 1.0
                row[7] = 1.0 if semantic else 0.0
                row[8] = min(store.link_count(mid), LINK_CAP) / LINK_CAP
                if ev_cues and rec.cues:
                    row[9] = len(ev_cues.intersection(rec.cues)) / n_ev
                row[10] = 1.0 if mid in recent else 0.0
                row[11] = 0.0 if rec.superseded_at is None else 1.0
                key = rec.key
                n_versions = len(store.versions(key)) if key is not None else 1
                row[12] = min(max(n_versions, 1), CHAIN_CAP) / CHAIN_CAP
                row[13] = min(max(float(rec.confidence), 0.0), 1.0)
        # store features
        s = self.store
        cap = max(1, int(cfg.capacity))
        n_live = len(store)
        s[0] = min(n_live / cap, 1.0)
        s[1] = min(len(store.episodic) / cap, 1.0)
        s[2] = min(len(store.semantic) / cap, 1.0)
        if n_live:
            all_ids = list(store.episodic) + list(store.semantic)
            s[3] = float(np.mean(squash_activation(store.activations(all_ids), threshold)))
        else:
            s[3] = 0.0
        every = max(1, int(cfg.sweep_every))
        s[4] = (every - (now % every)) / every
        horizon = cfg.horizon
        step = max(0, int(event_index))
        if horizon:
            s[5] = min(step / horizon, 1.0)
        else:
            s[5] = step / (step + ENDLESS_CLOCK_SCALE)
        s[6] = m / self.k
        s[7] = 1.0 if last_invalid else 0.0
        return ids
