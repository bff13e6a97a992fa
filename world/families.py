"""Task-family generators: seeded scripts of events, each with text and a hidden payload.

A *thread* is one small story of a family (a fact and its question; a fact, its change and a
question; a habit's episodes and the "usually" question; ...). :class:`ScriptGenerator` draws
threads, places them on the timeline (each event at the first free slot at or after its wanted
position, order kept; the free slots between a referring statement and its antecedent get
chit-chat, and a thread is placed later when another thread's statement there would be a second
antecedent of the same type), and fills the free slots with filler: chit-chat, distractor facts (never
asked) and verbatim or paraphrased repeats of earlier facts. Endless worlds generate the timeline
window by window (``config.chunk`` events) and raise the level (longer delays, more noise) as the
agent succeeds.

Payloads are plain dicts (JSON-able). Fields common to all: ``event`` (index), ``kind``,
``family``, ``thread``. Statements: ``subject``, ``relation``, ``object``, ``last_use`` (index of the
last question that needs it, -1 if none). Kinds:

========== ====================================================================================
fact        a first statement of (subject, relation, object)
change      a new value of (subject, relation) (update / temporal)
ref         multi-hop: subject is ``"ref:<description>"``; ``resolves`` (hidden) names the entity,
            ``antecedent`` the event it refers back to (only a LINK connects them)
episode     one habit episode (consolidation), ``relation`` = the habit
distractor  a fact nobody asks about
repeat      a repeat of event ``of`` (``verbatim`` True/False)
chitchat    nothing to remember
request     an erasure request for (subject, relation); ``erases`` = the value
question    ``qtype`` (current, before, order, hop, usually, unanswerable, erased), ``subject``,
            ``relation``, ``path`` (hop), ``options`` (order), ``gold`` (``"unknown"`` when
            nothing should be answered), ``stale`` (outdated values), ``erased`` (values that
            must not be revealed), ``evidence`` (indices of the events that support the gold)
========== ====================================================================================
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from world.config import WorldConfig
from world.entities import (
    CHANGE_RELATIONS,
    FORGET_PERSON_REQUESTS,
    FORGET_REQUESTS,
    HABITS,
    PERSON_RELATIONS,
    RELATIONS,
    USER_RELATIONS,
    BlockDraws,
    Cast,
    chitchat,
    gender_of,
    pick,
    randint,
    tidy,
)

UNKNOWN = "unknown"
STATEMENT, QUESTION, REQUEST = "statement", "question", "request"

HOP_ASK: dict[tuple[str, ...], tuple[str, ...]] = {
    ("works_at", "based_in"): ("Where is the company {s} works for based?", "In which town is {s}'s employer based?"),
    ("sibling", "works_at"): ("Where does {s}'s sibling work?", "Which company employs {s}'s sibling?"),
    ("sibling", "lives_in"): ("Where does {s}'s sibling live?", "In which town does {s}'s sibling live?"),
    ("lives_in", "region"): ("Which region is {s}'s home town in?", "In which region is the town where {s} lives?"),
    ("sibling", "works_at", "based_in"): ("Where is the company of {s}'s sibling based?",
                                          "In which town is the employer of {s}'s sibling based?"),
    ("sibling", "lives_in", "region"): ("Which region does {s}'s sibling live in?",),
}
#: Referring statements: (antecedent relation, relation stated) -> templates; {r} = the description.
REF_TEXT: dict[tuple[str, str], tuple[tuple[str, str], ...]] = {
    ("works_at", "based_in"): (("That company", "{r} is based in {o}."), ("The firm", "{r} has its headquarters in {o}."),
                               ("That employer", "{r} sits in {o}, by the way.")),
    ("sibling", "works_at"): (("{P} sibling", "{r} works at {o}."), ("{P} sibling", "{r} has a job at {o}.")),
    ("sibling", "lives_in"): (("{P} sibling", "{r} lives in {o}."), ("{P} sibling", "{r} has a flat in {o}.")),
    ("lives_in", "region"): (("That town", "{r} lies in {o}."), ("The town", "{r} is in {o}, I believe.")),
}
#: Relations whose events name (or ask about) a company / a town: a reference "That company" (after
#: ``works_at``) or "The town" (after ``lives_in``) could point at any of them (see ``_rivals``).
_NAMING: dict[str, tuple[str, ...]] = {"works_at": ("works_at", "based_in"),
                                       "lives_in": ("lives_in", "based_in", "region")}


@dataclass
class ScriptEvent:
    """One event of the script: what agents see (index, step, session, kind, text) + the payload."""

    index: int
    step: int
    session: int
    kind: str
    text: str
    payload: dict


@dataclass
class _TE:
    """A thread event before placement: wanted gap after the previous one, kind, text, payload."""

    gap: int
    kind: str
    text: str
    payload: dict
    evidence: list[int] = field(default_factory=list)  # thread-local positions
    stale_from: list[int] = field(default_factory=list)


#: A thread whose referring statement would be ambiguous where it was drawn is placed up to this many
#: slots later (then dropped).
PLACE_TRIES = 40
#: Endless worlds keep this many events before the newest window (older ones are released).
ENDLESS_HISTORY = 1_000
#: ... and this many people in their cast (older ones retire: no new facts about them).
ENDLESS_CAST = 200


class EventLog:
    """A list of items by index whose oldest ones can be released (an endless world's script, and its
    prefetched embeddings). ``len`` counts every item ever appended and ``log[i]`` is None for a released
    one, as a list with None in those places was, without keeping a slot per released item (that grew
    by 8 bytes per event however long the world ran). Slices give lists."""

    def __init__(self, items=()) -> None:
        self._items = list(items)
        self._start = 0  # index of self._items[0]

    def __len__(self) -> int:
        return self._start + len(self._items)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"event index {i} out of range (0..{n - 1})")
        j = i - self._start
        return self._items[j] if j >= 0 else None

    def __iter__(self):
        for _ in range(self._start):
            yield None
        yield from self._items

    def append(self, item) -> None:
        self._items.append(item)

    def extend(self, items) -> None:
        self._items.extend(items)

    @property
    def released(self) -> int:
        return self._start

    def release(self, upto: int) -> None:
        """Release every item before index ``upto``."""
        drop = min(upto, len(self)) - self._start
        if drop > 0:
            del self._items[:drop]
            self._start += drop


class PairSet:
    """A set of ``(subject, relation)`` pairs kept by subject, so that the pairs of retiring subjects go
    at a cost of their own pairs (:meth:`drop_subjects`), not of the whole set: an endless world retires
    people at every window, and rebuilding the set each time made its cost grow with the run."""

    __slots__ = ("_by",)

    def __init__(self, pairs=()) -> None:
        self._by: dict[str, set[str]] = {}
        for subject, relation in pairs:
            self.add((subject, relation))

    def __contains__(self, pair) -> bool:
        relations = self._by.get(pair[0])
        return relations is not None and pair[1] in relations

    def add(self, pair: tuple[str, str]) -> None:
        self._by.setdefault(pair[0], set()).add(pair[1])

    def discard(self, pair: tuple[str, str]) -> None:
        relations = self._by.get(pair[0])
        if relations is not None:
            relations.discard(pair[1])
            if not relations:
                del self._by[pair[0]]

    def drop_subjects(self, subjects) -> None:
        """Forget every pair of these subjects."""
        for subject in subjects:
            self._by.pop(subject, None)

    def __iter__(self):
        return ((subject, relation) for subject, relations in self._by.items() for relation in relations)

    def __len__(self) -> int:
        return sum(map(len, self._by.values()))

    def __eq__(self, other) -> bool:
        return set(self) == set(other) if isinstance(other, (PairSet, set, frozenset)) else NotImplemented

    def __getstate__(self):
        return self._by

    def __setstate__(self, state) -> None:
        self._by = state


def release_before(items, upto: int, start: int = 0) -> None:
    """Release the items of ``items`` before index ``upto``: an :class:`EventLog` drops them; a plain
    list (a world pickled before EventLog existed) gets None in their places, from ``start`` on."""
    if isinstance(items, EventLog):
        items.release(upto)
    else:
        for i in range(start, min(upto, len(items))):
            items[i] = None


@lru_cache(maxsize=64)
def _mix_table(weights: tuple[tuple[str, float], ...]) -> tuple[tuple[str, ...], tuple[float, ...]]:
    """The families of a mix (sorted) and the cumulative distribution of their weights, as the numpy
    cumsum of the normalised weights gives it (floats). Cached per mix (a reset needs it once), hence
    tuples: every generator of the mix shares them."""
    names = tuple(k for k, _ in weights)
    w = np.array([v for _, v in weights], dtype=float)
    return names, tuple(np.cumsum(w / w.sum()).tolist())


class ScriptGenerator:
    """Generates the script of one episode. Fixed-horizon worlds generate everything at
    construction; endless ones call :meth:`extend` as the clock approaches the end."""

    def __init__(self, config: WorldConfig, rng: np.random.Generator):
        self.cfg = config
        self.rng = rng
        self.cast = Cast(rng)
        # endless: old events are released (an EventLog keeps no slot for them); fixed horizon: a list
        self.events: list[ScriptEvent] | EventLog = EventLog() if config.endless else []
        self._pending: dict[int, tuple[str, str, dict]] = {}  # slot -> (kind, text, payload)
        self._quiet: set[int] = set()  # free slots that get chit-chat (see _slots)
        self._used = PairSet()  # (subject, relation) pairs stated or reserved
        self._offstage: list[str] = []  # people made for one thread and never in the cast (see _release)
        self._repeatable: list[int] = []  # indices of finalized facts that may be repeated
        self._threads = 0
        self._released = 0  # endless worlds: events[:_released] are None (see _release)
        self.level = 0
        weights = config.mix or {config.family: 1.0}
        self._mix_names, self._mix_cdf = _mix_table(tuple(sorted(weights.items())))
        # endless (with or without a horizon): windows on demand, sessions of session_len events; a
        # horizon there only ends the episode (the script does not depend on it)
        if config.endless:
            self.session_len = config.session_len
        else:
            # sessions of ceil(horizon / sessions) events, the last taking the rest (as WorldConfig
            # documents): an even spread would change the life-easy and life-medium scripts
            self.session_len = -(-config.horizon // config.sessions)
        self._buffered(self._start)

    def _start(self) -> None:
        """The episode's first ``n_entities`` people, then (fixed horizon) the whole timeline."""
        for _ in range(self.cfg.n_entities):
            self.cast.new_person()
        if not self.cfg.endless:
            self._window(0, self.cfg.horizon)

    def _buffered(self, work, *args) -> None:
        """``work(*args)`` drawing through a :class:`BlockDraws` of the generator: the same draws, and
        the generator left where the plain calls would have left it (also when ``work`` raises)."""
        rng = self.rng
        if not isinstance(rng, np.random.Generator):  # (already buffered, or not a numpy Generator)
            work(*args)
            return
        draws = self.rng = self.cast.rng = BlockDraws(rng)
        try:
            work(*args)
        finally:
            self.rng = self.cast.rng = rng
            draws.settle()

    # ------------------------------------------------------------------ timeline
    def step_of(self, index: int) -> int:
        return index + (index // self.session_len) * self.cfg.session_gap

    def extend(self, n_events: int | None = None, level: int | None = None) -> None:
        """Endless worlds: generate the next window (``config.chunk`` events by default)."""
        if level is not None:
            self.level = level
        self._buffered(self._window, len(self.events), n_events or self.cfg.chunk)
        self._release()

    def _release(self) -> None:
        """Endless worlds: keep the generator's memory bounded however long the world runs (the
        script grew by ~0.9 KB per event, its bookkeeping by ~57 bytes). Called between windows,
        when no thread is half built.

        - Events more than :data:`ENDLESS_HISTORY` before the newest window become None. Nothing
          reads them any more: the world reads its current event, the oracle the future and the past
          of live memories only as far as their last use (released events are all in the past), and
          repeats draw from the facts still kept. ``events`` keeps its length, so every index stays
          the event's index.
        - The cast keeps its newest :data:`ENDLESS_CAST` people; older ones retire: no new thread is
          about them (the texts already written stay as they are), so the (subject, relation) pairs
          reserved for them can go. Names stay used (a retired name is never
          given to a new person)."""
        cast = self.cast
        used = self._used
        if not isinstance(used, PairSet):  # (a generator pickled when this was a set)
            used = self._used = PairSet(used)
        offstage = getattr(self, "_offstage", None) or []
        if len(cast.people) > ENDLESS_CAST or offstage:
            # only the retired people's pairs: "user" and the other subjects keep theirs (a user's
            # relation stated once must not be stated again as a new fact); people made off-stage (a
            # multi-hop sibling, the subject of an unanswerable question) were never in the cast and
            # their names are never given again: their pairs go at the first window too
            used.drop_subjects(cast.people[:-ENDLESS_CAST])
            del cast.people[:-ENDLESS_CAST]
            used.drop_subjects(offstage)
            self._offstage = []
        keep_from = len(self.events) - self.cfg.chunk - ENDLESS_HISTORY
        if keep_from <= self._released:
            return
        release_before(self.events, keep_from, self._released)
        self._released = keep_from
        self._repeatable = [i for i in self._repeatable if i >= keep_from]

    def _put_offstage(self, name: str) -> None:
        """Take a person made for one thread out of the cast (only ever referred to, or never introduced);
        :meth:`_release` drops the pairs reserved for them."""
        self.cast.people.remove(name)
        self.__dict__.setdefault("_offstage", []).append(name)  # (a generator pickled before it existed)

    def _delay(self) -> int:
        scale = 1.0 + 0.5 * self.level
        lo, hi = self.cfg.delay_min, int(self.cfg.delay_max * scale)
        return randint(self.rng, lo, hi + 1)

    def _window(self, start: int, length: int) -> None:
        cfg, rng = self.cfg, self.rng
        end = start + length
        rate = cfg.thread_rate
        n = int(length * rate)
        n += int(rng.random() < length * rate - n)
        starts = sorted(rng.integers(start, max(start + 1, end - cfg.delay_min), size=n).tolist())
        for s in starts:
            # (bisect_right on the cdf is np.searchsorted(cdf, u, side="right"), without the array call)
            j = bisect_right(self._mix_cdf, rng.random())
            fam = self._mix_names[min(j, len(self._mix_names) - 1)]
            thread = self._build(fam)
            if thread:
                self._place(thread, s)
        self._fill(start, end)

    def _place(self, thread: list[_TE], start: int) -> None:
        quiet = self._quiet_slots()
        for shift in range(PLACE_TRIES):
            found = self._slots(thread, start + shift)
            if found is not None:
                break
        else:
            return  # every placement tried left a referring statement ambiguous: drop the thread
        slots, hush = found
        quiet.update(hush)
        placed = thread[: len(slots)]
        if not placed:
            return
        # a thread with no question is only filler-like context; keep it (it costs capacity). A
        # statement's last use is the thread's last question that rests on evidence: an unanswerable
        # or "erased" question (gold "unknown", no evidence) needs none of the thread's facts
        q_last = max((slots[i] for i, te in enumerate(placed) if te.kind == QUESTION and te.evidence), default=-1)
        for te, s in zip(placed, slots):
            p = te.payload
            p["event"] = s
            if "antecedent_pos" in p:
                p["antecedent"] = slots[p.pop("antecedent_pos")]
            if "of_pos" in p:
                p["of"] = slots[p.pop("of_pos")]
            if te.kind == QUESTION:
                p["evidence"] = [slots[j] for j in te.evidence if j < len(slots)]
            elif te.kind == STATEMENT:
                p["last_use"] = q_last if q_last > s else -1
            self._pending[s] = (te.kind, te.text, p)

    def _slots(self, thread: list[_TE], start: int) -> tuple[list[int], list[int]] | None:
        """Slots of the thread's events placed from ``start`` (each at the first free slot at or after
        its wanted position; cut at the horizon) and the free slots between a referring statement and
        its antecedent, which must get chit-chat. None when an event already placed between a
        referring statement and its antecedent would be another antecedent of the same type (the
        reference would be ambiguous)."""
        horizon = None if self.cfg.endless else self.cfg.horizon
        pending, quiet, done = self._pending, self._quiet_slots(), len(self.events)
        slots: list[int] = []
        hush: list[int] = []
        slot = start
        for i, te in enumerate(thread):
            slot = slot + (te.gap if i else 0)
            while slot in pending or slot in quiet or slot < done:
                slot += 1
            if horizon is not None and slot >= horizon:
                break
            ante = te.payload.get("antecedent_pos")
            if ante is not None:
                for b in range(slots[ante] + 1, slot):
                    if b in pending:
                        if self._rivals(thread[ante].payload, te.payload, pending[b][2]):
                            return None
                    elif b not in quiet:
                        hush.append(b)
            slots.append(slot)
        return slots, hush

    def _rivals(self, ante: dict, ref: dict, other: dict) -> bool:
        """Whether the event ``other``, told or asked between ``ante`` and the referring statement
        ``ref``, gives ``ref``'s description another thing to point at:

        - "That company" / "The town": a statement naming another company / town (a value of
          ``works_at``; ``based_in``'s subject for a company, its object for a town; ``region``'s
          subject for a town), or a question or request about one (its relation or hop path holds such
          a relation), unless it asks about the antecedent's own subject and relation;
        - "Her sibling": any other person with the same pronoun named in a statement, question or
          request (the pronoun could point at them), or another "her sibling" reference about
          someone else."""
        kind = other.get("kind")
        if kind in (None, "chitchat"):
            return False
        if ante["relation"] == "sibling":
            g = gender_of(ante["subject"])
            if any(x != ante["subject"] and gender_of(x) == g
                   for x in (other.get("subject"), other.get("object"), other.get("resolves"))):
                return True
            return kind == "ref" and other.get("subject") == ref["subject"] and other.get("resolves") != ref["resolves"]
        noun_relations = _NAMING.get(ante["relation"], (ante["relation"],))
        if kind in ("question", "request"):
            asked = other.get("path") or [other.get("relation")]
            own = (not other.get("path") and other.get("subject") == ante["subject"]
                   and other.get("relation") == ante["relation"])
            return not own and any(r in noun_relations for r in asked)
        r, obj = other.get("relation"), other.get("object")
        subj = other.get("resolves", other.get("subject"))
        if ante["relation"] == "works_at":
            named = obj if r == "works_at" else subj if r == "based_in" else None
        elif ante["relation"] == "lives_in":
            named = obj if r in ("lives_in", "based_in") else subj if r == "region" else None
        else:
            named = obj if r == ante["relation"] else None
        return named is not None and named != ante["object"]

    def _quiet_slots(self) -> set[int]:
        """Free slots reserved for chit-chat (between a referring statement and its antecedent)."""
        quiet = self.__dict__.get("_quiet")
        if quiet is None:  # (a generator pickled before these existed)
            quiet = self._quiet = set()
        return quiet

    def _fill(self, start: int, end: int) -> None:
        """Finalize the events of slots ``start`` .. ``end - 1``: the placed thread events, chit-chat in
        the quiet slots, filler elsewhere."""
        quiet, pending, events = self._quiet_slots(), self._pending, self.events
        session_len, session_gap = self.session_len, self.cfg.session_gap
        noise = min(1.0, self.cfg.noise_ratio + 0.05 * self.level)
        for slot in range(start, end):
            if slot in pending:
                kind, text, payload = pending.pop(slot)
            elif slot in quiet:
                quiet.discard(slot)
                kind, text, payload = STATEMENT, chitchat(self.rng), {"kind": "chitchat", "family": "noise",
                                                                      "thread": -1, "last_use": -1}
            else:
                kind, text, payload = self._filler(noise)
            payload["event"] = slot
            session = slot // session_len
            step = payload["step"] = slot + session * session_gap  # (step_of, once per event)
            events.append(ScriptEvent(slot, step, session, kind, tidy(text), payload))
            if payload.get("repeatable"):
                self._repeatable.append(slot)

    def _filler(self, noise: float) -> tuple[str, str, dict]:
        """A filler event: a repeat of an earlier fact, else chit-chat with probability ``noise``, else a
        distractor fact."""
        cfg, rng = self.cfg, self.rng
        u = rng.random()
        if u < cfg.repeat_ratio and self._repeatable:
            src = self.events[pick(rng, self._repeatable)]
            sp = src.payload
            verbatim = bool(rng.random() < 0.5)
            rel = RELATIONS.get(sp["relation"])
            if verbatim or rel is None:
                text = src.text
            else:
                text = self._render_fact(rel, sp["subject"], sp["object"], avoid=src.text)
            payload = {
                "kind": "repeat", "family": "noise", "thread": -1, "subject": sp["subject"],
                "relation": sp["relation"], "object": sp["object"], "of": src.index, "verbatim": verbatim,
                "last_use": -1,
            }
            return STATEMENT, text, payload
        if rng.random() < noise:
            return STATEMENT, chitchat(rng), {"kind": "chitchat", "family": "noise", "thread": -1, "last_use": -1}
        pair = self._alloc(PERSON_RELATIONS)
        if pair is None:
            return STATEMENT, chitchat(rng), {"kind": "chitchat", "family": "noise", "thread": -1, "last_use": -1}
        s, r = pair
        rel = RELATIONS[r]
        o = self.cast.value(rel.objects)
        payload = {"kind": "distractor", "family": "noise", "thread": -1, "subject": s, "relation": r,
                   "object": o, "last_use": -1, "repeatable": True}
        return STATEMENT, self._render_fact(rel, s, o), payload

    # ------------------------------------------------------------------ helpers
    def _alloc(self, relations, subject: str | None = None, tries: int = 40) -> tuple[str, str] | None:
        """A fresh (subject, relation) pair that nothing has stated or reserved."""
        rng = self.rng
        for t in range(tries):
            s = subject or (self.cast.person() if t < tries // 2 else self.cast.new_person())
            r = pick(rng, relations)
            if (s, r) not in self._used:
                self._used.add((s, r))
                return s, r
        return None

    def _render_fact(self, rel, s: str, o: str, avoid: str | None = None) -> str:
        if avoid is None:  # pick(rng, [every template formatted]) without formatting the others
            return tidy(pick(self.rng, rel.fact).format(s=s, o=o))
        options = [tidy(t.format(s=s, o=o)) for t in rel.fact]
        if avoid is not None and len(options) > 1:
            options = [t for t in options if t != avoid] or options
        return pick(self.rng, options)

    def _stmt(self, gap: int, kind: str, text: str, fam: str, **payload) -> _TE:
        return _TE(gap, STATEMENT, text, {"kind": kind, "family": fam, "thread": self._threads, **payload})

    def _question(self, gap: int, text: str, fam: str, qtype: str, gold: str, evidence: list[int],
                  **payload) -> _TE:
        p = {"kind": "question", "family": fam, "thread": self._threads, "qtype": qtype, "gold": gold,
             "stale": [], "erased": [], **payload}
        return _TE(gap, QUESTION, text, p, evidence=list(evidence))

    # ------------------------------------------------------------------ threads
    def _build(self, fam: str) -> list[_TE] | None:
        self._threads += 1
        return getattr(self, "_t_" + fam)(fam)

    def _t_recall(self, fam: str, repeatable: bool = True) -> list[_TE] | None:
        pair = self._alloc(PERSON_RELATIONS)
        if pair is None:
            return None
        s, r = pair
        rel = RELATIONS[r]
        o = self.cast.value(rel.objects)
        out = [self._stmt(0, "fact", self._render_fact(rel, s, o), fam, subject=s, relation=r, object=o,
                          repeatable=repeatable)]
        out.append(self._question(self._delay(), pick(self.rng, rel.ask).format(s=s), fam, "current", o, [0],
                                  subject=s, relation=r))
        if self.rng.random() < 0.25:
            out.append(self._question(self._delay(), pick(self.rng, rel.ask).format(s=s), fam, "current", o, [0],
                                      subject=s, relation=r))
        return out

    def _t_noise(self, fam: str) -> list[_TE] | None:
        return self._t_recall(fam)

    def _chain(self, fam: str, n_changes: int) -> tuple[list[_TE], str, str, list[str]] | None:
        pair = self._alloc(CHANGE_RELATIONS)
        if pair is None:
            return None
        s, r = pair
        rel = RELATIONS[r]
        values = [self.cast.value(rel.objects)]
        for _ in range(n_changes):
            values.append(self.cast.value(rel.objects, exclude=set(values)))
        out = [self._stmt(0, "fact", self._render_fact(rel, s, values[0]), fam, subject=s, relation=r,
                          object=values[0])]
        # the first value is restated or asked (and so rehearsed) before it changes, as in
        # conversation: an outdated version that is kept stays the better-known one
        if self.rng.random() < 0.85:
            para = self._render_fact(rel, s, values[0], avoid=out[0].text)
            out.append(self._stmt(randint(self.rng, 2, 5), "repeat", para, fam, subject=s, relation=r,
                                  object=values[0], of_pos=0, verbatim=False))
        if self.rng.random() < 0.4:
            out.append(self._question(randint(self.rng, 2, 6), pick(self.rng, rel.ask).format(s=s), fam,
                                      "current", values[0], [0], subject=s, relation=r))
        for v in values[1:]:
            gap = randint(self.rng, 3, max(4, self.cfg.delay_max // 2 + 1))
            out.append(self._stmt(gap, "change", pick(self.rng, rel.change).format(s=s, o=v), fam, subject=s,
                                  relation=r, object=v))
        return out, s, r, values

    def _changed_fact(self, fam: str) -> tuple[list[_TE], str, str, list[str], list[int]] | None:
        """A fact with 1..max_changes changes (`_chain`) and the positions of its fact/change events."""
        built = self._chain(fam, randint(self.rng, 1, self.cfg.max_changes + 1))
        if built is None:
            return None
        out, s, r, values = built
        ev = [i for i, te in enumerate(out) if te.payload["kind"] in ("fact", "change")]
        return out, s, r, values, ev

    def _t_update(self, fam: str) -> list[_TE] | None:
        built = self._changed_fact(fam)
        if built is None:
            return None
        out, s, r, values, ev = built
        rel = RELATIONS[r]
        out.append(self._question(self._delay(), pick(self.rng, rel.ask).format(s=s), fam, "current", values[-1],
                                  ev[-1:], subject=s, relation=r, stale=values[:-1]))
        return out

    def _t_temporal(self, fam: str) -> list[_TE] | None:
        built = self._changed_fact(fam)
        if built is None:
            return None
        out, s, r, values, ev = built
        rel = RELATIONS[r]
        if self.rng.random() < 0.5:
            text = pick(self.rng, rel.before).format(s=s)
            out.append(self._question(self._delay(), text, fam, "before", values[-2], ev[-2:], subject=s, relation=r))
        else:
            i, j = sorted(int(x) for x in self.rng.choice(len(values), size=2, replace=False))
            a, b = (values[i], values[j]) if self.rng.random() < 0.5 else (values[j], values[i])
            text = pick(self.rng, rel.order).format(s=s, a=a, b=b)
            out.append(self._question(self._delay(), text, fam, "order", values[i], [ev[i], ev[j]], subject=s,
                                      relation=r, options=[a, b]))
        return out

    def _t_multi_hop(self, fam: str) -> list[_TE] | None:
        hops = randint(self.rng, 2, self.cfg.max_hops + 1)
        paths = [p for p in HOP_ASK if len(p) == hops]
        path = paths[randint(self.rng, 0, len(paths))]
        pair = self._alloc((path[0],))
        if pair is None:
            return None
        s = pair[0]
        rel0 = RELATIONS[path[0]]
        if rel0.objects == "person":  # the sibling is a person of the story, only ever referred to;
            # of the other gender, so that "His sibling" can only mean the subject's ("Tom's sibling is
            # Lena." "His sibling works at ...", never "Tom's sibling is Carl." "His sibling ...")
            o = self.cast.new_person(female=gender_of(s) != "f")
            self.cast.used_objects.setdefault("person", set()).add(o)
            self._put_offstage(o)
        else:
            o = self.cast.value(rel0.objects)
        out = [self._stmt(0, "fact", self._render_fact(rel0, s, o), fam, subject=s, relation=path[0], object=o,
                          repeatable=True)]
        entity = o
        for k in range(1, hops):
            r = path[k]
            if (entity, r) in self._used:  # a town / company already given a region / headquarters
                # (a value drawn again once its pool ran low): never state it a second time
                self._used.discard(pair)
                return None
            self._used.add((entity, r))
            v = self.cast.value(RELATIONS[r].objects)
            desc, tmpl = pick(self.rng, REF_TEXT[(path[k - 1], r)])
            desc = desc.replace("{P}", self.cast.possessive(s).capitalize())
            text = tmpl.format(r=desc, o=v)
            out.append(self._stmt(randint(self.rng, 1, 4), "ref", text, fam, subject="ref:" + desc.lower(),
                                  relation=r, object=v, resolves=entity, antecedent_pos=k - 1))
            entity = v
        out.append(self._question(self._delay(), pick(self.rng, HOP_ASK[path]).format(s=s), fam, "hop", entity,
                                  list(range(hops)), subject=s, relation=path[-1], path=list(path)))
        return out

    def _t_consolidation(self, fam: str) -> list[_TE] | None:
        names = sorted(HABITS)
        for _ in range(20):
            s = self.cast.person()
            h = names[randint(self.rng, 0, len(names))]
            if (s, h) not in self._used:
                break
        else:
            return None
        self._used.add((s, h))
        habit = HABITS[h]
        n = randint(self.rng, self.cfg.episodes - 1, self.cfg.episodes + 2)
        major = self.cast._draw(habit.objects)
        objs = [major] * n
        if n >= 4:  # one odd episode: the rule is the majority, not the last episode
            odd = self.cast._draw(habit.objects)
            while odd == major:
                odd = self.cast._draw(habit.objects)
            objs[randint(self.rng, 0, n)] = odd
        week0 = randint(self.rng, 1, 40)
        out = []
        tmpls = list(habit.episode)
        order = self.rng.permutation(len(tmpls))
        for i, o in enumerate(objs):
            text = tmpls[int(order[i % len(tmpls)])].format(s=s, o=o, w=week0 + i)
            out.append(self._stmt(randint(self.rng, 2, 6) if i else 0, "episode", text, fam, subject=s,
                                  relation=h, object=o))
        delay = self._delay() + self.cfg.delay_max // 2
        out.append(self._question(delay, habit.ask.format(s=s), fam, "usually", major, list(range(n)), subject=s,
                                  relation=h))
        return out

    def _t_abstention(self, fam: str) -> list[_TE] | None:
        built = self._t_recall(fam)
        if built is None:
            return None
        fact = built[0].payload
        s, r = fact["subject"], fact["relation"]
        built = built[:2]
        if self.rng.random() < 0.35:
            return built  # an answerable question keeps "always unknown" honest
        u = self.rng.random()
        if u < 0.4:  # same subject, an attribute never stated
            free = [x for x in PERSON_RELATIONS if (s, x) not in self._used]
            if not free:
                return built
            r2, s2 = free[randint(self.rng, 0, len(free))], s
        elif u < 0.75:  # same attribute, another person of the story
            others = [p for p in self.cast.people if p != s and (p, r) not in self._used]
            if not others:
                return built
            s2, r2 = others[randint(self.rng, 0, len(others))], r
        else:  # someone never introduced
            s2 = self.cast.new_person()
            self._put_offstage(s2)
            r2 = r
        self._used.add((s2, r2))
        text = pick(self.rng, RELATIONS[r2].ask).format(s=s2)
        q = self._question(built[1].gap, text, fam, "unanswerable", UNKNOWN, [], subject=s2, relation=r2)
        return [built[0], q]

    def _t_erasure(self, fam: str) -> list[_TE] | None:
        free = [r for r in USER_RELATIONS if ("user", r) not in self._used]
        if free and self.rng.random() < 0.6:
            r = free[randint(self.rng, 0, len(free))]
            s = "user"
            self._used.add((s, r))
            rel = RELATIONS[r]
            req = pick(self.rng, FORGET_REQUESTS).format(n=rel.noun)
        else:  # someone else's detail, told in confidence
            pair = self._alloc(PERSON_RELATIONS)
            if pair is None:
                return None
            s, r = pair
            rel = RELATIONS[r]
            req = pick(self.rng, FORGET_PERSON_REQUESTS).format(s=s, n=rel.noun)
        v = self.cast.value(rel.objects)
        out = [
            self._stmt(0, "fact", self._render_fact(rel, s, v), fam, subject=s, relation=r, object=v),
            self._question(randint(self.rng, 2, 8), pick(self.rng, rel.ask).format(s=s), fam, "current", v, [0],
                           subject=s, relation=r),
        ]
        out.append(_TE(randint(self.rng, 3, 10), REQUEST, req,
                       {"kind": "request", "family": fam, "thread": self._threads, "subject": s,
                        "relation": r, "erases": v}))
        out.append(self._question(self._delay(), pick(self.rng, rel.ask).format(s=s), fam, "erased", UNKNOWN, [],
                                  subject=s, relation=r, erased=[v]))
        return out

    def _t_life(self, fam: str) -> list[_TE] | None:  # pragma: no cover - life uses the mix
        raise AssertionError("life threads are drawn from config.mix")


def generate_script(config: WorldConfig, seed: int) -> list[ScriptEvent]:
    """The full script of a fixed-horizon world (convenience for tests and tools)."""
    if config.endless:
        raise ValueError("generate_script needs a fixed-horizon world; an endless one (difficulty 'endless', "
                         "with or without a horizon) extends its script on demand")
    return ScriptGenerator(config, np.random.default_rng(seed)).events
