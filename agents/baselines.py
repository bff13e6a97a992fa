"""Heuristic baseline agents: memory policies from the seeds and the literature, as honest rules.

Every agent sees only what a memory system would see: the current event's text and kind, the K
candidate memories (ids, texts and the observation's features: similarity to the event, ACT-R
activation, importance, age, tier, ...) and the store's size. None reads the hidden payloads.
Each answers a question with QUERY (the world's fixed reader then answers from the store). A choice
that the env's mask forbids (e.g. WRITE at capacity) becomes NOOP.

| agent | rule | source |
| --- | --- | --- |
| `random` | uniform over the masked operations, then uniform over the filled slots | - |
| `write_all` | WRITE every statement, QUERY every question, never FORGET | the usual "store everything" default |
| `fifo` | fixed window: WRITE until the window is full, then fold the oldest visible memory into a summary (REFLECT) and evict it (FORGET) | seed 002 (ConversationMemory: recent turns verbatim, overflow folded into a running summary) |
| `importance` | WRITE when the importance score clears a threshold and the text is not a duplicate; when full, evict the lowest importance x recency x freshness | seed 000 (Memory: _calculate_importance, _is_duplicate, get_weighted) |
| `versioned` | key = subject + topic; same key, new content -> UPDATE (old version kept, superseded); same content -> NOOP; erasure request -> FORGET (hard, the whole chain) | seed 003 (versioned MemoryStore.write / forget(hard=True)) |
| `mem0` | ADD / UPDATE / DELETE / NOOP from similarity thresholds against the retrieved candidates | Mem0's update step (Chhikara et al. 2025) |
| `generative_agents` | WRITE every statement; on a statement where the summed importance of writes since the last reflection has reached a threshold, REFLECT on the most salient memory (recency + importance + relevance) instead (that statement is not stored) | Park et al. 2023 |
| `actr_rehearsal` | write-all, plus QUERY rehearsal when a statement repeats a memory whose squashed ACT-R activation is below 0.5 + margin (near or below the forget threshold) | ACT-R base-level learning (Anderson & Schooler 1991) |
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from agents.base import (
    FORGET,
    NOOP,
    QUERY,
    REFLECT,
    TARGETED,
    UPDATE,
    WRITE,
    BaseAgent,
    Candidate,
    register_agent,
)
from world.keys import subject_and_topic


def _kind(observation: dict, view: Any) -> str:
    if view is not None:
        return view.kind
    i = int(np.argmax(observation["event_kind"]))
    return ("statement", "question", "request")[i]


def _store_feature(observation: dict, name: str) -> float:
    from envs import features as F

    return float(observation["store"][F.STORE_FEATURES.index(name)])


def consolidatable(target: Candidate, cands: list[Candidate]) -> bool:
    """A visible guess at whether REFLECT on ``target`` finds a cluster: another visible episode
    shares a subject word and a topic word with it (``world.keys``, read from the texts only). The
    world's rule (>= 2 live, not superseded episodes on one hidden subject and relation) is not shown to agents; a
    REFLECT without a cluster is a penalised no-op. Over the (step, candidate episode) pairs of
    Life-Easy played by write_all (seeds 0-3; 3,044 pairs) the guess said yes 691 times, 431 of them
    right (62%), and found 431 of the 752 episodes with a cluster (57%)."""
    if target.semantic:
        return False
    subject, topic = subject_and_topic(target.text)
    if not subject:
        return False
    for c in cands:
        if c.memory_id != target.memory_id and not c.semantic:
            s, t = subject_and_topic(c.text)
            if not s.isdisjoint(subject) and not t.isdisjoint(topic):
                return True
    return False


class HeuristicAgent(BaseAgent):
    """Base of the text-reading heuristics: questions are answered with QUERY, the rest by :meth:`on_event`."""

    copyable = True  # counters, thresholds and an RNG: a deep copy plays on exactly as the original

    def decide(self, observation: dict, info: dict) -> tuple[int, int]:
        if self.view is None:
            raise RuntimeError(f"agent {self.name!r} reads the event text: call attach(view) first "
                               "(agents.bench does this for every episode)")
        kind = _kind(observation, self.view)
        cands = self.view.candidates(observation)
        if kind == "question":
            return QUERY, 0
        if kind == "request":
            return self.on_request(self.view.text, cands, observation)
        return self.on_statement(self.view.text, cands, observation)

    def on_statement(self, text: str, cands: list[Candidate], observation: dict) -> tuple[int, int]:
        return WRITE, 0

    def on_request(self, text: str, cands: list[Candidate], observation: dict) -> tuple[int, int]:
        return NOOP, 0

    def full(self) -> bool:
        return self.view.n_live >= self.view.capacity


# ---------------------------------------------------------------------------------------------


@register_agent("random", "uniform over the masked operations, then over the filled slots")
class RandomAgent(BaseAgent):
    """Uniform over the masked actions: an allowed operation, then (if targeted) an allowed slot."""

    name = "random"
    copyable = True  # its only state is the RNG

    def act(self, observation: Any, info: dict) -> np.ndarray:
        op_mask, slot_mask = self.masks(info)
        ops = np.flatnonzero(op_mask)
        op = int(self.rng.choice(ops)) if ops.size else NOOP
        slot = 0
        if op in TARGETED:
            slots = np.flatnonzero(slot_mask)
            slot = int(self.rng.choice(slots)) if slots.size else 0
        return np.array([op, slot], dtype=np.int64)


@register_agent("abstain", "store nothing, QUERY every question: always answers 'unknown' (the floor)")
class AbstainAgent(HeuristicAgent):
    """Writes nothing and asks the empty store every question, so every answer is "unknown": the
    do-nothing floor of issue 4 ("always answer unknown"). It pays no write or storage cost and is
    right on every question whose gold answer is "unknown" (never-stated attributes, erased facts),
    so a memory policy is worth its costs only where it scores above this row."""

    name = "abstain"

    def on_statement(self, text: str, cands: list[Candidate], observation: dict) -> tuple[int, int]:
        return NOOP, 0


@register_agent("write_all", "WRITE every statement, QUERY every question, never forget")
class WriteAllAgent(HeuristicAgent):
    """Store everything, forget nothing: the default of most chat memories."""

    name = "write_all"


@register_agent("fifo", "seed 002: fixed window, fold the oldest into a summary (REFLECT), evict it (FORGET) once visible again")
class FifoAgent(HeuristicAgent):
    """Seed 002's conversation buffer, as memory operations.

    ConversationMemory keeps the recent turns verbatim and, once the window is exceeded, folds the
    overflow into a running summary and drops it. Here: WRITE every statement while fewer than
    ``window`` memories are live (default: the store's capacity minus one, the room a summary
    needs). When the window is full, the oldest memory the agent can see (largest age among the
    candidates) is first folded into a summary (REFLECT, which consolidates it into a semantic rule)
    when it looks consolidatable (:func:`consolidatable`, a guess from the visible texts) and then
    evicted (FORGET). The candidates change with every event (the most similar ones follow the event
    text), so a folded memory is often out of sight at the next statement: a folded memory still
    live is evicted as soon as it is visible again (the oldest of them first), before any other
    memory. Erasure requests are ignored: the seed has no deletion. The event that triggers an
    eviction is not stored (one operation per event).
    """

    name = "fifo"

    def __init__(self, window: int | None = None, fold: bool = True) -> None:
        super().__init__()
        self.window = window
        self.fold = fold
        self._folded: set[str] = set()

    def reset(self, seed: int | None) -> None:
        super().reset(seed)
        self._folded = set()

    def on_statement(self, text: str, cands: list[Candidate], observation: dict) -> tuple[int, int]:
        window = self.window if self.window is not None else max(1, self.view.capacity - 1)
        if self.view.n_live < window:
            return WRITE, 0
        if not cands:
            return NOOP, 0
        folded = [c for c in cands if c.memory_id in self._folded]
        if folded:  # folded into a summary earlier: the overflow the seed drops
            victim = max(folded, key=lambda c: (c.age, -c.slot))
            self._folded.discard(victim.memory_id)
            return FORGET, victim.slot
        oldest = max(cands, key=lambda c: (c.age, -c.slot))
        if (self.fold and oldest.memory_id not in self._folded and self.view.valid(REFLECT, oldest.slot)
                and consolidatable(oldest, cands)):
            self._folded.add(oldest.memory_id)
            return REFLECT, oldest.slot
        return FORGET, oldest.slot


@register_agent("importance", "seed 000: write if importance clears a threshold and not a duplicate; evict lowest score")
class ImportanceAgent(HeuristicAgent):
    """Seed 000's memory: automatic importance, deduplication, importance x recency x freshness.

    - importance = ``world.importance.ImportanceScorer`` (seed 000's ``_calculate_importance``:
      1 + length bonus + keyword bonus, capped at 2.5); WRITE only if it is >= ``threshold``.
    - duplicates are skipped with seed 000's rules (``world.dedup.duplicate_rule``: containment,
      strong prefix, Jaccard >= 0.72, value-aware) against the visible memories.
    - when the store is full, the candidate with the lowest effective score
      ``importance x exp(-decay_rate x age) x freshness`` is evicted (FORGET) to make room; the
      seed's freshness ``exp(-0.01 x time since last access)`` is read from the ACT-R activation
      feature, which rises with every access and decays with time.
    """

    name = "importance"

    def __init__(self, threshold: float = 1.05, decay_rate: float = 0.01) -> None:
        super().__init__()
        from world.importance import ImportanceScorer

        self.scorer = ImportanceScorer()
        self.threshold = threshold
        self.decay_rate = decay_rate

    def effective(self, c: Candidate) -> float:
        importance = self.scorer.score(c.text) if c.text else 1.0
        return importance * math.exp(-self.decay_rate * c.age) * c.activation

    def on_statement(self, text: str, cands: list[Candidate], observation: dict) -> tuple[int, int]:
        from world.dedup import duplicate_rule, signature

        if self.scorer.score(text) < self.threshold:
            return NOOP, 0
        new = signature(text)
        if any(duplicate_rule(new, signature(c.text)) for c in cands if c.text):
            return NOOP, 0
        if self.full():
            if not cands:
                return NOOP, 0
            victim = min(cands, key=lambda c: (self.effective(c), c.slot))
            return FORGET, victim.slot
        return WRITE, 0


# Seed 003's key = subject + topic, read from the text: world.keys (shared with the env's features).
_subject_and_topic = subject_and_topic


@register_agent("versioned", "seed 003: same subject+topic -> UPDATE (history kept), erasure -> FORGET chain")
class VersionedAgent(HeuristicAgent):
    """Seed 003's versioned store: one version chain per key (entity + topic).

    - a statement whose subject (a shared entity-like word) and topic (a shared content word, or
      similarity >= ``topic_sim``) match an active candidate is a new version of that key: UPDATE
      (the world keeps the old version, marked superseded, as seed 003's ``write`` does); exactly
      the same content is a ``duplicate``: NOOP; anything else starts a new key: WRITE.
    - an erasure request FORGETs (hard: the whole chain, seed 003's ``forget(hard=True)``) the
      candidate with the same subject that shares a topic word with the request (or, failing
      that, is similar to it: similarity >= ``forget_sim``), best match first.
    - inferences stay below 0.8 confidence: the world's REFLECT enforces this tier rule; this agent
      never infers (seed 003 has no consolidation).
    """

    name = "versioned"

    def __init__(self, topic_sim: float = 0.5, forget_sim: float = 0.3) -> None:
        super().__init__()
        self.topic_sim = topic_sim
        self.forget_sim = forget_sim

    def on_statement(self, text: str, cands: list[Candidate], observation: dict) -> tuple[int, int]:
        from world.dedup import fingerprint

        fp = fingerprint(text)
        subj, topic = _subject_and_topic(text)
        best = None
        for c in cands:
            if c.superseded or c.semantic or not c.text:
                continue
            if fingerprint(c.text) == fp:
                return NOOP, 0
            c_subj, c_topic = _subject_and_topic(c.text)
            if subj & c_subj and (topic & c_topic or c.similarity >= self.topic_sim):
                score = (len(subj & c_subj) + len(topic & c_topic), c.similarity)
                if best is None or score > best[0]:
                    best = (score, c)
        if best is not None and self.view.valid(UPDATE, best[1].slot):
            return UPDATE, best[1].slot
        return WRITE, 0

    def on_request(self, text: str, cands: list[Candidate], observation: dict) -> tuple[int, int]:
        subj, topic = _subject_and_topic(text)
        scored = []
        for c in cands:
            c_subj, c_topic = _subject_and_topic(c.text)
            if not subj & c_subj:
                continue
            if topic & c_topic or c.similarity >= self.forget_sim:
                scored.append(((len(topic & c_topic), c.similarity, -c.slot), c))
        if not scored:
            return NOOP, 0
        return FORGET, max(scored, key=lambda t: t[0])[1].slot


@register_agent("mem0", "Mem0 update step: ADD / UPDATE / DELETE / NOOP by similarity thresholds")
class Mem0Agent(HeuristicAgent):
    """Mem0's update phase with similarity thresholds in place of the LLM's tool call.

    For each new statement the most similar active candidate (Mem0 retrieves the top-s similar
    memories) decides: similarity >= ``noop_sim`` or a lexical duplicate -> NOOP (already known);
    ``update_sim`` <= similarity < ``noop_sim`` -> UPDATE that memory (same id chain, new text);
    otherwise ADD (WRITE). An erasure request DELETEs (FORGET) the most similar candidate if its
    similarity is >= ``delete_sim``. Mem0 neither links nor consolidates.
    """

    name = "mem0"

    def __init__(self, noop_sim: float = 0.9, update_sim: float = 0.6, delete_sim: float = 0.3) -> None:
        super().__init__()
        self.noop_sim, self.update_sim, self.delete_sim = noop_sim, update_sim, delete_sim

    def on_statement(self, text: str, cands: list[Candidate], observation: dict) -> tuple[int, int]:
        from world.dedup import duplicate_rule, signature

        live = [c for c in cands if not c.superseded and not c.semantic]
        if not live:
            return WRITE, 0
        best = max(live, key=lambda c: (c.similarity, -c.slot))
        if best.similarity >= self.noop_sim or (best.text and duplicate_rule(signature(text), signature(best.text))):
            return NOOP, 0
        if best.similarity >= self.update_sim and self.view.valid(UPDATE, best.slot):
            return UPDATE, best.slot
        return WRITE, 0

    def on_request(self, text: str, cands: list[Candidate], observation: dict) -> tuple[int, int]:
        if not cands:
            return NOOP, 0
        best = max(cands, key=lambda c: (c.similarity, -c.slot))
        return (FORGET, best.slot) if best.similarity >= self.delete_sim else (NOOP, 0)


@register_agent("generative_agents", "Park et al.: write all; REFLECT when summed importance passes a threshold")
class GenerativeAgentsAgent(HeuristicAgent):
    """Park et al. (2023)'s memory stream and reflection trigger.

    Every statement is written, except where the agent reflects: each write adds its poignancy (seed 000's importance
    scorer mapped from [1, 2.5] to the paper's 1..10 scale) to a running sum, and on the first
    statement at which the sum has reached ``reflect_threshold`` the agent reflects *instead of*
    writing (one operation per event: that statement is not stored) on the most salient visible
    memory that looks consolidatable (:func:`consolidatable`): retrieval score = 0.5 recency + 3 relevance + 2 importance,
    each min-max scaled over the candidates (the weights of the released code; recency 0.99 ** age),
    and the sum restarts. If no visible memory looks consolidatable, the statement is written. The
    paper's threshold of 150 makes its agents reflect two or three times a day over
    hundreds of LLM-rated observations; memgym's easy episodes have about 85 statements whose
    poignancy is mostly 1-2, so 150 would never fire. The default, 30, keeps the paper's frequency
    (a few reflections per episode). Generative agents never delete.
    """

    name = "generative_agents"

    def __init__(self, reflect_threshold: float = 30.0, weights: tuple[float, float, float] = (0.5, 3.0, 2.0),
                 recency_decay: float = 0.99) -> None:
        super().__init__()
        from world.importance import ImportanceScorer

        self.scorer = ImportanceScorer()
        self.reflect_threshold = reflect_threshold
        self.weights = weights
        self.recency_decay = recency_decay
        self._acc = 0.0

    def reset(self, seed: int | None) -> None:
        super().reset(seed)
        self._acc = 0.0

    def poignancy(self, text: str) -> float:
        s = self.scorer.score(text)
        return 1.0 + 9.0 * min(1.0, max(0.0, (s - 1.0) / (self.scorer.cap - 1.0)))

    @staticmethod
    def _minmax(x: np.ndarray) -> np.ndarray:
        span = x.max() - x.min()
        return (x - x.min()) / span if span > 1e-12 else np.ones_like(x)

    def on_statement(self, text: str, cands: list[Candidate], observation: dict) -> tuple[int, int]:
        episodes = [c for c in cands if not c.semantic]
        if self._acc >= self.reflect_threshold and episodes:
            rec = self._minmax(np.array([self.recency_decay ** c.age for c in episodes]))
            rel = self._minmax(np.array([c.similarity for c in episodes]))
            imp = self._minmax(np.array([self.poignancy(c.text) for c in episodes]))
            wr, wv, wi = self.weights
            score = wr * rec + wv * rel + wi * imp
            for j in np.argsort(-score, kind="stable"):
                target = episodes[int(j)]
                if self.view.valid(REFLECT, target.slot) and consolidatable(target, cands):
                    self._acc = 0.0
                    return REFLECT, target.slot
        if self.view.valid(WRITE):
            self._acc += self.poignancy(text)
            return WRITE, 0
        return NOOP, 0


@register_agent("actr_rehearsal", "write-all + QUERY rehearsal of memories near the ACT-R forget threshold")
class ActrRehearsalAgent(HeuristicAgent):
    """Write everything and keep it alive by rehearsal.

    ACT-R's base level ``B = ln(sum t_j^-d)`` rises with every retrieval; the world sweeps memories
    whose activation falls below the forget threshold every ``sweep_every`` steps. A QUERY retrieves
    with the current event as the cue and so rehearses what it retrieves. When a statement repeats
    a visible memory (seed 000's duplicate rules, or similarity >= ``repeat_sim``) whose squashed
    activation (0.5 = at the threshold) is below ``0.5 + margin`` -- within ``margin`` above the
    threshold, or already below it (not yet swept) -- the agent QUERYs instead of writing: the fact is
    already stored, and the retrieval refreshes it before the next sweep. Everything else is as
    write_all.
    """

    name = "actr_rehearsal"

    def __init__(self, margin: float = 0.15, repeat_sim: float = 0.9) -> None:
        super().__init__()
        self.margin, self.repeat_sim = margin, repeat_sim

    def on_statement(self, text: str, cands: list[Candidate], observation: dict) -> tuple[int, int]:
        from world.dedup import duplicate_rule, signature

        new = None
        for c in cands:
            if c.activation >= 0.5 + self.margin or not c.text:
                continue
            if new is None:
                new = signature(text)
            if c.similarity >= self.repeat_sim or duplicate_rule(new, signature(c.text)):
                if self.view.valid(QUERY):
                    return QUERY, 0
        return WRITE, 0
