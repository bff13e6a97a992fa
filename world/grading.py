"""The reader (answers a question from the store) and the grader (verdict of an answer).

The default reader is deterministic and deliberately literal, so that memory management, not
reading skill, decides the score. It receives the question as a parser would extract it from the
text (:class:`ParsedQuestion`: type, subject, relation, hop path, options; never the gold, never
whether the question is answerable) and the memories QUERY retrieved, in rank order. It reads
their structured payloads:

- ``current``: the first retrieved fact about (subject, relation); a fact that belongs to a
  version chain stands for the chain's newest version (``store.versions``). Two unrelated
  memories with different values cannot be told apart: rank order decides (so keeping a stale
  version alive next to the new one costs answers).
- ``before`` / ``order``: only a version chain orders values; without one the reader says unknown.
- ``hop``: the first hop from a retrieved fact about the subject, every further hop from a
  memory *linked* to the previous one (typed LINK edges, either direction) that states the next
  relation about an unnamed referent ("That company is based in ..."), or a retrieved memory
  naming the intermediate entity.
- ``usually``: only a semantic rule (made by REFLECT) about (subject, habit) answers it; single
  episodes say what happened once, not what is usual.

Nothing found -> ``"unknown"``. A :class:`Reader` protocol lets an LLM reader replace it: it gets
the question text and the retrieved records' contents through the same context object.

With this reader ``hallucinated`` never happens: it answers only from memories about the exact
(subject, relation), and the generator never states the pair an unanswerable question asks about,
so it answers those "unknown" (correct). Unanswerable questions then test only that the agent
QUERYs; hallucination needs a reader that guesses (an LLM reader through :class:`Reader`).

Verdicts (:func:`grade`): ``correct``, ``wrong``, ``stale`` (an outdated value of the attribute),
``hallucinated`` (an answer where the right answer is unknown), ``leaked`` (the answer reveals an
erased value, or the store still holds the erased fact: worse than wrong; the world also charges a
leak, not graded as a question, for a request whose question the horizon cut off), ``abstained`` (unknown on an
answerable question, or the question was not answered with QUERY). Answers and values are compared
in their SQuAD normal form (:func:`normalize_answer`: case, punctuation, articles and spacing do not
count) and, as the normal form deletes punctuation ("pad-thai" -> "padthai"), also with punctuation
read as a space ("Pad Thai" is "pad-thai"); an answer that spells an erased value as whole words, in
either form or split by spaces ("555-0142", "555 0142", "555 01 42", "5550142"), is a leak. The
default reader answers with stored values verbatim, so this matters only for readers that phrase
answers (LLMs).
"""

from __future__ import annotations

import string
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from world.families import UNKNOWN

VERDICTS: tuple[str, ...] = ("correct", "wrong", "stale", "hallucinated", "leaked", "abstained")
FACT_KINDS = frozenset({"fact", "change", "repeat", "distractor"})


@dataclass(frozen=True)
class ParsedQuestion:
    """What a question's text says (as a parser would extract it). ``qtype`` is one of current,
    before, order, hop, usually: unanswerable and erased questions look like ``current`` ones."""

    text: str
    qtype: str
    subject: str
    relation: str
    path: tuple[str, ...] = ()
    options: tuple[str, ...] = ()

    @classmethod
    def from_payload(cls, text: str, payload: dict) -> ParsedQuestion:
        qtype = payload["qtype"]
        if qtype in ("unanswerable", "erased"):
            qtype = "current"
        return cls(text, qtype, payload["subject"], payload["relation"], tuple(payload.get("path", ())),
                   tuple(payload.get("options", ())))


@dataclass
class ReaderAnswer:
    answer: str
    used: list[str] = field(default_factory=list)  # memory ids the answer rests on


class ReaderContext(Protocol):
    """What a reader may consult: the store (read-only use), payloads of stored memories, links
    and version chains."""

    store: object

    def payload(self, memory_id: str) -> dict | None: ...
    def neighbours(self, memory_id: str) -> list[str]: ...
    def chain(self, memory_id: str) -> list[str]: ...
    def content(self, memory_id: str) -> str: ...


@runtime_checkable
class Reader(Protocol):
    def answer(self, question: ParsedQuestion, retrieved: Sequence[str], ctx: ReaderContext) -> ReaderAnswer: ...


_ARTICLES = frozenset({"a", "an", "the"})
_ASCII_PUNCT = str.maketrans("", "", string.punctuation)  # (deletes them)
_ASCII_PUNCT_SPACE = str.maketrans(string.punctuation, " " * len(string.punctuation))


def _is_punct(ch: str) -> bool:
    return ch in string.punctuation or unicodedata.category(ch).startswith("P")


def normalize_answer(x: str | None) -> str:
    """SQuAD-style normal form of an answer or a value (Rajpurkar et al. 2016, the official evaluation
    script): lower case, punctuation removed (ASCII ``string.punctuation`` and every Unicode
    punctuation character), the articles a / an / the dropped, runs of white space collapsed.
    ``"Dr. Okafor"`` and ``"dr okafor"`` are equal; ``"555-0101."`` becomes ``"5550101"``.
    None -> ``""``."""
    if x is None:
        return ""
    low = str(x).lower()
    if low.isascii():  # (the ASCII characters _is_punct takes are exactly string.punctuation)
        text = low.translate(_ASCII_PUNCT)
    else:
        text = "".join(ch for ch in low if not _is_punct(ch))
    return " ".join(w for w in text.split() if w not in _ARTICLES)


_norm = normalize_answer


def _words(x: str | None) -> tuple[str, ...]:
    """The words of ``x`` in the normal form but with punctuation read as a space: ``"Pad-Thai"`` ->
    ``("pad", "thai")``, ``"555-0142."`` -> ``("555", "0142")`` (the normal form deletes it: "padthai")."""
    if x is None:
        return ()
    low = str(x).lower()
    if low.isascii():
        text = low.translate(_ASCII_PUNCT_SPACE)
    else:
        text = "".join(" " if _is_punct(ch) else ch for ch in low)
    return tuple(w for w in text.split() if w not in _ARTICLES)


class _Forms:
    """A value or an answer in both forms :func:`grade` compares: the normal form (punctuation deleted)
    and the words with punctuation read as a space."""

    __slots__ = ("norm", "words", "spaced")

    def __init__(self, x: str | None):
        self.norm = _norm(x)
        self.words = _words(x)
        self.spaced = " ".join(self.words)

    def same(self, other: _Forms) -> bool:
        """Equal in either form: "Pad Thai" is "pad-thai" (spaced) and "padthai" is "pad-thai" (normal)."""
        return self.norm == other.norm or (bool(self.spaced) and self.spaced == other.spaced)

    def spells(self, value: _Forms) -> bool:
        """Whether this answer reveals ``value``: its normal form holds the value's as whole words, or a
        run of its words, joined, is the value's words joined ("555 0142", "555 01 42" and "5550142" spell
        555-0142; "1555 0142" and "bathurst" do not spell 555-0142 and bath)."""
        if _contains(self.norm, value.norm):
            return True
        target = "".join(value.words)
        if not target:
            return False
        words = self.words
        for i in range(len(words)):
            run = ""
            for w in words[i:]:
                run += w
                if run == target:
                    return True
                if not target.startswith(run):
                    break
        return False


def _contains(answer: str, value: str) -> bool:
    """Whether the normalised ``value`` occurs in the normalised ``answer`` as whole words (a phrase
    match: "5550101" is in "your number was 5550101", "bath" is not in "bathurst")."""
    return bool(value) and f" {value} " in f" {answer} "


class DefaultReader:
    """The deterministic payload reader described in the module docstring."""

    def answer(self, question: ParsedQuestion, retrieved: Sequence[str], ctx: ReaderContext) -> ReaderAnswer:
        q = question
        if q.qtype == "usually":
            for mid in retrieved:
                p = ctx.payload(mid)
                if p and p.get("kind") == "rule" and p.get("subject") == q.subject and p.get("relation") == q.relation:
                    return ReaderAnswer(p["object"], [mid])
            return ReaderAnswer(UNKNOWN)
        if q.qtype == "hop":
            return self._hop(q, retrieved, ctx)
        if q.qtype in ("before", "order"):
            return self._history(q, retrieved, ctx)
        for _mid, value, used in self._facts(q.subject, q.relation, retrieved, ctx):
            return ReaderAnswer(value, used)
        return ReaderAnswer(UNKNOWN)

    # -------------------------------------------------------------- helpers
    @staticmethod
    def _matches(p: dict | None, subject: str, relation: str) -> bool:
        return bool(p) and p.get("kind") in FACT_KINDS and p.get("subject") == subject and p.get("relation") == relation

    def _facts(self, subject: str, relation: str, ids: Sequence[str], ctx: ReaderContext):
        """(memory, current value, used ids) for memories about (subject, relation), rank order;
        a chained memory stands for its chain's newest version."""
        for mid in ids:
            if not self._matches(ctx.payload(mid), subject, relation):
                continue
            chain = ctx.chain(mid)
            head = chain[-1] if chain else mid
            hp = ctx.payload(head)
            if self._matches(hp, subject, relation):
                yield head, hp["object"], [mid] if head == mid else [mid, head]

    def _history(self, q: ParsedQuestion, retrieved: Sequence[str], ctx: ReaderContext) -> ReaderAnswer:
        for mid in retrieved:
            if not self._matches(ctx.payload(mid), q.subject, q.relation):
                continue
            chain = ctx.chain(mid)
            values: list[str] = []
            for c in chain:
                p = ctx.payload(c)
                if self._matches(p, q.subject, q.relation) and (not values or values[-1] != p["object"]):
                    values.append(p["object"])
            if len(values) < 2:
                continue
            if q.qtype == "before":
                return ReaderAnswer(values[-2], list(chain))
            a, b = q.options
            if a in values and b in values:
                return ReaderAnswer(a if values.index(a) < values.index(b) else b, list(chain))
        return ReaderAnswer(UNKNOWN)

    def _hop(self, q: ParsedQuestion, retrieved: Sequence[str], ctx: ReaderContext) -> ReaderAnswer:
        for mid, value, used in self._facts(q.subject, q.path[0], retrieved, ctx):
            cur, val, trail = mid, value, list(used)
            for rel in q.path[1:]:
                nxt = None
                for x, v, _ in self._facts(val, rel, retrieved, ctx):  # a memory naming the entity
                    nxt = (x, v)
                    break
                if nxt is None:
                    for x in ctx.neighbours(cur):
                        p = ctx.payload(x)
                        if p and p.get("kind") == "ref" and p.get("relation") == rel:
                            nxt = (x, p["object"])
                            break
                if nxt is None:
                    break
                cur, val = nxt
                trail.append(cur)
            else:
                return ReaderAnswer(val, trail)
        return ReaderAnswer(UNKNOWN)


def reveals(erased: Sequence[str], revealed: Sequence[str]) -> bool:
    """Whether the values ``revealed`` (objects of live memories about an erased subject and
    relation) hold one of the ``erased`` values: equal after :func:`normalize_answer`, or with
    punctuation read as a space ("pad thai" reveals "pad-thai", as in :func:`grade`)."""
    gone = [f for f in map(_Forms, erased) if f.norm]
    return bool(gone) and any(g.same(r) for r in map(_Forms, revealed) for g in gone)


def grade(question: dict, answer: str | None, revealed: Sequence[str] = ()) -> str:
    """Verdict of ``answer`` (None = not answered) to a question payload.

    Two texts are equal when their normal forms are (:func:`normalize_answer`: case, punctuation,
    articles and spacing do not count), or their words with punctuation read as a space are (the normal
    form deletes it, so "Pad Thai" and "pad-thai" differed there): "Lunwell." is the stale value
    "Lunwell", "Unknown." is "unknown", "KXT 417" is "KXT-417". In this order:

    1. ``leaked``: a value in ``revealed`` is (equal to) an erased value, or the answer *spells* an
       erased value as whole words: its normal form contains the value's, or a run of its words
       (punctuation read as a space) joined is the value's words joined ("Your number was 555-0101.",
       "555 0101" and "555 01 01" reveal "555-0101"; "1555 0101" and "Bathurst" reveal neither
       "555-0101" nor "Bath");
    2. ``abstained``: no answer (None);
    3. gold "unknown" (unanswerable and erased questions): ``correct`` for "unknown", else
       ``hallucinated``;
    4. ``correct`` (equal to the gold), ``abstained`` ("unknown"), ``stale`` (equal to an outdated
       value), else ``wrong``.

    ``revealed``: values the store still holds for the erased fact (the world passes the objects of
    live memories about the question's subject and relation); an erased value among them is a
    leak even if the reader said unknown, or the question went unanswered.
    """
    # (reveals() inline: the erased values' forms serve both leak tests; most questions erase nothing)
    erased = [f for f in map(_Forms, question.get("erased", ())) if f.norm]
    if erased and any(e.same(r) for r in map(_Forms, revealed) for e in erased):
        return "leaked"
    if answer is None:
        return "abstained"
    a = _Forms(answer)
    if any(a.spells(e) for e in erased):
        return "leaked"
    gold = _Forms(question["gold"])
    if gold.norm == UNKNOWN:
        return "correct" if a.norm == UNKNOWN else "hallucinated"
    if a.same(gold):
        return "correct"
    if a.norm == UNKNOWN:
        return "abstained"
    if any(a.same(_Forms(v)) for v in question.get("stale", ())):
        return "stale"
    return "wrong"


def evidence_recall(question: dict, retrieved: Sequence[str], payload: Callable[[str], dict | None], *,
                    chain: Callable[[str], Sequence[str]] | None = None, used: Sequence[str] = ()) -> float | None:
    """Share of the question's gold evidence events held by the memories the reader could read.

    The memories read: every memory in ``retrieved`` (what QUERY returned), every version of its
    version chain (``chain(id)``: QUERY never returns a superseded version, the reader follows the
    chain to it on purpose), and every memory in ``used`` (``ReaderAnswer.used``, what the answer
    rests on: e.g. the memories a multi-hop answer reached over LINK edges). A memory *holds* its own
    event (payload ``event``), the event a repeat restates (``of``: a repeat stored in place of its
    original holds the same fact) and the events a rule was consolidated from (``derived_events``);
    an id without a payload (swept, erased, unknown) holds nothing::

        evidence_recall = |held(read memories) & evidence| / |evidence|     (None: no evidence)
    """
    gold = set(question.get("evidence", ()))
    if not gold:
        return None
    read: dict[str, None] = {}
    for mid in retrieved:
        read[mid] = None
        if chain is not None:
            read.update(dict.fromkeys(chain(mid)))
    read.update(dict.fromkeys(used))
    hit: set[int] = set()
    for mid in read:
        p = payload(mid)
        if not p:
            continue
        held = [p.get("event"), p.get("of"), *p.get("derived_events", ())]
        hit.update(e for e in held if e in gold)
    return len(hit) / len(gold)
