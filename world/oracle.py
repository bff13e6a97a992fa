"""The privileged oracle: a memory policy that reads the hidden payloads and the future script.

It is the upper bound of the benchmark and the instrument of the validity check
(``scripts/validate_world.py``): with ``disabled_ops`` it plays the same game with operations
removed, which shows what each operation is worth on each family.

Policy (targets are always chosen among ``world.candidates()``, as an agent's would be):

- question -> QUERY;
- erasure request -> FORGET the memory holding the value (queued if it is not a candidate now);
- a statement some later question needs (payload ``last_use`` > now): a change -> UPDATE the live
  version of the attribute (without UPDATE: WRITE, and FORGET the stale version later); a
  referring statement -> LINK to its antecedent (without LINK: WRITE); a habit episode -> lean:
  WRITE only episodes carrying the answer until two are live, then REFLECT them and store nothing
  more of the habit (see :meth:`Oracle._habit`); otherwise WRITE;
- anything else is a free slot, used for the first pending chore: REFLECT a habit cluster whose
  majority is the answer of its question, FORGET a stale version or an erased value not yet
  reachable, QUERY (rehearse) when the event's retrieval reaches a needed memory that a sweep will
  drop before its last use unless something presents it again, and no later event surely will
  (:meth:`Oracle._rehearse_now`: an ACT-R forecast over the script's future steps), FORGET a memory
  no question needs any more (a lean store), QUERY a repeat of a needed fact, else NOOP.

The rehearsal rule replaced a margin (rehearse once activation + importance is within 0.6 of the
threshold *now*): a reference of a multi-hop chain, which few event texts retrieve, was often past the
last free event that retrieved it before it counted as close, and was swept before its question.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable

from world.actr import ActRRecord
from world.families import QUESTION, REQUEST
from world.grading import FACT_KINDS
from world.sim import Op, World, _as_op


class Oracle:
    """Privileged policy. ``act(world) -> (op, target)``; ``disabled_ops`` are never used."""

    def __init__(self, disabled_ops: Iterable[Op | int | str] = (), cleanup: bool = True):
        """``disabled_ops``: a list of ops, each an op name (any case), an :class:`Op`, its int value
        (numpy's too) or its decimal string, as the world takes them; anything else is a ``ValueError``
        naming ``disabled_ops``, and a single op not in a list (``"FORGET"``) a ``TypeError``."""
        if isinstance(disabled_ops, (str, bytes)) or not isinstance(disabled_ops, Iterable):
            # (a bare "FORGET" was iterated letter by letter: "unknown op 'F'")
            raise TypeError(f"disabled_ops must be a list of ops, got {type(disabled_ops).__name__} "
                            f"{disabled_ops!r} (one op: [{disabled_ops!r}])")
        self.disabled = frozenset(_op(o) for o in disabled_ops)
        self.cleanup = cleanup
        self._to_forget: list[tuple[str, str]] = []  # (subject, relation) whose stale/erased memories must go
        self._sweep_cache: tuple | None = None  # see _sweeps

    def reset(self) -> None:
        self._to_forget = []
        self._sweep_cache = None

    def on(self, op: Op) -> bool:
        return op not in self.disabled

    def act(self, world: World) -> tuple[Op, str | None]:
        acc = world.privileged
        p = acc.event_payload
        ev = world.event
        now = ev.index
        cands = world.candidates()
        if ev.kind == QUESTION:
            return (Op.QUERY, None) if self.on(Op.QUERY) else (Op.NOOP, None)
        if ev.kind == REQUEST:
            if self.on(Op.FORGET):
                for mid in acc.find(p["subject"], p["relation"]):
                    if mid in cands:
                        if len(acc.find(p["subject"], p["relation"])) > 1:
                            self._to_forget.append((p["subject"], p["relation"]))
                        return Op.FORGET, mid
                self._to_forget.append((p["subject"], p["relation"]))
            return self._free(world, cands)
        kind = p.get("kind")
        needed = p.get("last_use", -1) > now and kind != "repeat"  # repeats: rehearse, never store
        full = len(world.store) >= world.config.capacity
        if needed and not full:
            if kind == "change":
                heads = [m for m in acc.find(p["subject"], p["relation"], kinds=FACT_KINDS)
                         if (r := world.store.get(m)) is not None and r.active]
                if heads and self.on(Op.UPDATE):
                    for h in reversed(heads):
                        if h in cands:
                            return Op.UPDATE, h
                if self.on(Op.WRITE):
                    if heads and self.on(Op.FORGET):
                        self._to_forget.append(("stale", p["subject"], p["relation"], p["object"]))
                    return Op.WRITE, None
            elif kind == "ref":
                ante = acc.find(event=p.get("antecedent"))
                if self.on(Op.LINK):
                    for a in ante:
                        if a in cands:
                            return Op.LINK, a
                if self.on(Op.WRITE):
                    return Op.WRITE, None
            elif kind == "episode":
                return self._habit(world, p, cands)
            elif self.on(Op.WRITE):
                return Op.WRITE, None
        return self._free(world, cands)

    def _habit(self, world: World, p: dict, cands: list[str]) -> tuple[Op, str | None]:
        """A habit episode a "usually" question needs: lean. Only a rule answers that question, and a
        rule needs >= 2 live episodes, so: WRITE episodes carrying the gold (the final majority) until
        two are live, REFLECT them (here, or at the next free slot), then store nothing more of the
        habit. The two episodes stay until the question: FORGET of an episode would erase the rule
        made from it (the erasure cascade follows ``derived_from``). Without REFLECT no episode is
        worth storing."""
        acc = world.privileged
        if not self.on(Op.REFLECT) or p["object"] != _gold(world, p):
            return self._free(world, cands)
        mine = acc.find(p["subject"], p["relation"])
        if any(acc.payload(m).get("kind") == "rule" for m in mine):
            return self._free(world, cands)
        episodes = [m for m in mine if acc.payload(m).get("kind") == "episode"]
        if len(episodes) >= 2:
            if self._gold_cluster(world, p) is not None:
                for m in cands:
                    if m in episodes and acc.can_reflect(m):
                        return Op.REFLECT, m
            return self._free(world, cands)
        if self.on(Op.WRITE):
            return Op.WRITE, None
        return self._free(world, cands)

    # ------------------------------------------------------------------ free slots
    def _free(self, world: World, cands: list[str]) -> tuple[Op, str | None]:
        acc = world.privileged
        now = world.event.index
        # 1. reflect habit clusters whose majority is the answer of their question
        if self.on(Op.REFLECT):
            rules = {(q["subject"], q["relation"]) for _, q in acc.items() if q.get("kind") == "rule"}
            for mid in cands:
                q = acc.payload(mid)
                if not q or q.get("kind") != "episode" or q.get("last_use", -1) <= now:
                    continue
                if (q["subject"], q["relation"]) in rules or self._gold_cluster(world, q) is None:
                    continue
                if acc.can_reflect(mid):
                    return Op.REFLECT, mid
        # 2. forget stale versions (no UPDATE) and erased values not yet reachable
        if self.on(Op.FORGET) and self._to_forget:
            for item in list(self._to_forget):
                if item[0] == "stale":
                    # the versions older than the newest stated value, read now: a later change may have
                    # been UPDATEd onto the written one since this was queued, and FORGET erases a whole
                    # chain, so nothing in the newest version's chain (nor with its value) is a victim
                    _, s, r, _new = item
                    facts = acc.find(s, r, kinds=FACT_KINDS)
                    victims = []
                    if facts:
                        newest = max(facts, key=lambda m: acc.payload(m)["event"])
                        keep = set(acc.chain(newest)) | {newest}
                        value = acc.payload(newest)["object"]
                        victims = [m for m in facts if m not in keep and acc.payload(m)["object"] != value]
                else:
                    s, r = item
                    victims = acc.find(s, r)
                if not victims:
                    self._to_forget.remove(item)
                    continue
                for m in victims:
                    if m in cands:
                        return Op.FORGET, m
        # 3. rehearse a needed memory that a sweep would drop before its last use, when this event's
        #    retrieval reaches it and no later event surely rehearses it (before the clean-up: a memory
        #    no question needs can wait one event, a rehearsal cannot)
        if self.on(Op.QUERY) and self._rehearse_now(world):
            return Op.QUERY, None
        # 4. forget what no question needs any more
        if self.cleanup and self.on(Op.FORGET):
            for mid in cands:
                q = acc.payload(mid)
                if q is not None and q.get("last_use", -1) < now and not self._chain_needed(world, mid, now):
                    return Op.FORGET, mid
        # 5. rehearse a needed fact on its repeat (cheap insurance: a repeat retrieves it)
        p = acc.event_payload
        if self.on(Op.QUERY) and p.get("kind") == "repeat" and any(
            acc.payload(m).get("last_use", -1) > now for m in acc.find(p["subject"], p["relation"])
        ):
            return Op.QUERY, None
        return Op.NOOP, None

    def _rehearse_now(self, world: World) -> bool:
        """Whether this event's retrieval reaches a needed memory that :meth:`_swept_at` says a sweep
        drops before its last use and that no later event surely rehearses (:meth:`_rehearsed_before`).
        (A habit's episodes under its rule are not needed: the rule answers.)"""
        acc = world.privileged
        now = acc.index
        ruled = {(q["subject"], q["relation"]) for _, q in acc.items() if q.get("kind") == "rule"}
        needed = [m for m, q in acc.items() if q.get("last_use", -1) > now
                  and not (q.get("kind") == "episode" and (q["subject"], q["relation"]) in ruled)]
        if not needed:
            return False
        reached = set(acc.query(world.event.text)).intersection(needed)
        if not reached:
            return False
        actr = world.store.actr_of(sorted(reached))
        for m, rec in actr.items():
            death = self._swept_at(world, m, rec)
            if death is not None and not self._rehearsed_before(world, m, death):
                return True
        return False

    def _sweeps(self, world: World) -> tuple[list[int], list[int]]:
        """(event indices, their steps) of the sweeps on arriving at the events after the current one
        (the store sweeps when the clock crosses a multiple of ``sweep_every``), in order, maybe with
        earlier ones before them. Kept while the script is the same list of the same length (an endless
        world's grows) and the clock has not gone back before the first event it covers (a snapshot
        restored); the past is not read (an endless world releases it)."""
        script = world.privileged.script
        now = world.privileged.index
        key = (id(script), len(script), world.config.sweep_every)
        cached = self._sweep_cache
        if cached is None or cached[0] != key or cached[1] > now:
            every = world.config.sweep_every
            at, steps = [], []
            for j in range(now + 1, len(script)):
                e, before = script[j], script[j - 1]
                if e is not None and before is not None and e.step // every > before.step // every:
                    at.append(j)
                    steps.append(e.step)
            # (the script is held so that its id stays its own while the entry lives)
            cached = self._sweep_cache = (key, now, script, at, steps)
        return cached[3], cached[4]

    def _swept_at(self, world: World, mid: str, rec: ActRRecord) -> int | None:
        """The event on whose arrival a sweep drops the needed memory ``mid`` before its last use
        (:func:`_needed_until`) if nothing presents it again, else None (``rec``: its ACT-R state now).

        A forecast from the script's future steps (privileged; session gaps are in them): the store
        sweeps when the clock crosses a multiple of ``sweep_every`` and drops a memory whose ACT-R base
        level (``ActRRecord.activation``: world/actr.py, the store's decay) + importance is below
        ``forget_threshold``. Without a presentation B only falls, so if the last sweep before the
        last use keeps it, every earlier one does; else the first sweep below the threshold is found
        by bisection."""
        acc = world.privileged
        now = acc.index
        # (a question still pending beyond an endless world's window: forecast to the window's end)
        end = min(_needed_until(world, mid), len(acc.script) - 1)
        at, steps = self._sweeps(world)
        first, last = bisect_right(at, now), bisect_right(at, end)  # the sweeps on arriving in (now, end]
        floor = world.config.forget_threshold - world.store.get(mid).importance
        if first == last or rec.activation(steps[last - 1]) >= floor:
            return None
        lo, hi = first, last - 1  # the first sweep below: in [lo, hi]
        while lo < hi:
            mid_i = (lo + hi) // 2
            if rec.activation(steps[mid_i]) < floor:
                hi = mid_i
            else:
                lo = mid_i + 1
        return at[lo]

    @staticmethod
    def _rehearsed_before(world: World, mid: str, death: int) -> bool:
        """Whether an event before ``death`` will rehearse ``mid`` for sure, so that a QUERY now can wait:
        a repeat of its statement (the repeat rule QUERYs it) or a question resting on it, with no change
        of its attribute in between (a superseded version is never retrieved).

        Only those count: whether any other later event retrieves it cannot be read off the store of now
        (the store grows and the memory's own activation, part of the retrieval score, falls; waiting
        for such events lost more answers on multi_hop-hard than the QUERYs it saved)."""
        acc = world.privileged
        q = acc.payload(mid)
        event = q.get("event")
        key = (q.get("subject"), q.get("relation"))
        for j in range(acc.index + 1, death):
            e = acc.future_payload(j)
            if e is None:
                continue
            kind = e.get("kind")
            if kind == "change" and (e.get("subject"), e.get("relation")) == key:
                return False
            if (kind == "repeat" and e.get("of") == event) or (kind == QUESTION and event in e.get("evidence", ())):
                return True
            if kind == QUESTION and e.get("subject") == key[0] and mid in acc.query(acc.script[j].text):
                return True
        return False

    @staticmethod
    def _gold_cluster(world: World, q: dict) -> list[str] | None:
        """The live, not superseded episodes of ``q``'s habit (what REFLECT consolidates) when REFLECT on
        them gives the answer of the habit's question (their majority is the gold), else None."""
        acc = world.privileged
        cluster = [m for m in acc.find(q["subject"], q["relation"], kinds={"episode"}) if world.store.get(m).active]
        if len(cluster) < 2 or _majority([acc.payload(m) for m in cluster]) != _gold(world, q):
            return None
        return cluster

    @staticmethod
    def _chain_needed(world: World, mid: str, now: int) -> bool:
        acc = world.privileged
        for m in acc.chain(mid) + acc.neighbours(mid):
            q = acc.payload(m)
            if q is not None and q.get("last_use", -1) >= now:
                return True
        return False


def _needed_until(world: World, mid: str) -> int:
    """The last event before which the needed memory ``mid`` must still be in the store.

    A fact or reference: the last question whose ``evidence`` holds its event (a superseded version a
    "current" question no longer rests on need not outlive its successor). A habit episode: the next
    episode of its habit carrying the answer (the second of the pair REFLECT consolidates; the rule
    answers from then on), else its question. A habit's rule: its question."""
    acc = world.privileged
    q = acc.payload(mid)
    now = acc.index
    last = q["last_use"]
    if q.get("kind") == "episode":
        for j in range(now + 1, last):
            e = acc.future_payload(j)
            if e is not None and e.get("kind") == "episode" and e.get("subject") == q["subject"] \
                    and e.get("relation") == q["relation"] and e.get("object") == q["object"]:
                return j + 1
        return last
    if q.get("kind") == "rule":
        return last
    event = q.get("event")
    for j in range(last, now, -1):
        e = acc.future_payload(j)
        if e is not None and e.get("kind") == QUESTION and event in e.get("evidence", ()):
            return j
    return now


def _gold(world: World, q: dict) -> str | None:
    """The gold of the question that last uses the statement ``q`` (None: no question uses it). In an
    endless world that question may not be generated yet (still pending beyond the window): read there
    too (else the oracle skipped every habit whose question crossed a window's end)."""
    i = q.get("last_use", -1)
    payload = world.privileged.future_payload(i) if i >= 0 else None
    return None if payload is None else payload.get("gold")


def _majority(payloads: list[dict]) -> str | None:
    """The value REFLECT would consolidate: most frequent, ties to the earliest stated."""
    if not payloads:
        return None
    counts: dict[str, int] = {}
    first: dict[str, int] = {}
    for p in sorted(payloads, key=lambda q: q["event"]):
        counts[p["object"]] = counts.get(p["object"], 0) + 1
        first.setdefault(p["object"], p["event"])
    return max(counts, key=lambda o: (counts[o], -first[o]))


def _op(o) -> Op:
    """An op of ``disabled_ops``: its name (any case), else what the world takes (``_as_op``: an Op, an
    int, numpy's too, or its decimal string). Not a float nor a bool: ``Op(int(o))`` disabled WRITE for
    1.9 and True, NOOP for -0.5."""
    if isinstance(o, str) and o.upper() in Op.__members__:
        return Op[o.upper()]
    op = _as_op(o)
    if op is None:
        raise ValueError(f"disabled_ops: unknown op {o!r}; ops are names of {[x.name for x in Op]} (any case), "
                         f"Op members or their int values 0-{len(Op) - 1}")
    return op
