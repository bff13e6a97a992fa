"""Grading verdicts and the default reader on constructed cases."""

import pytest

from world.families import UNKNOWN
from world.grading import DefaultReader, ParsedQuestion, Reader, evidence_recall, grade, normalize_answer


def Q(gold, **kw):
    q = {"qtype": "current", "subject": "Ada", "relation": "car", "gold": gold, "stale": [], "erased": [],
         "evidence": [1]}
    q.update(kw)
    return q


@pytest.mark.parametrize(
    "question, answer, revealed, verdict",
    [
        (Q("Volvo"), "Volvo", (), "correct"),
        (Q("Volvo"), "  volvo ", (), "correct"),
        (Q("Volvo"), "Saab", (), "wrong"),
        (Q("Volvo", stale=["Fiat"]), "Fiat", (), "stale"),
        (Q("Volvo"), UNKNOWN, (), "abstained"),
        (Q("Volvo"), None, (), "abstained"),
        (Q(UNKNOWN, qtype="unanswerable"), UNKNOWN, (), "correct"),
        (Q(UNKNOWN, qtype="unanswerable"), "Volvo", (), "hallucinated"),
        (Q(UNKNOWN, qtype="unanswerable"), None, (), "abstained"),
        (Q(UNKNOWN, qtype="erased", erased=["555-0101"]), "555-0101", (), "leaked"),
        (Q(UNKNOWN, qtype="erased", erased=["555-0101"]), UNKNOWN, ["555-0101"], "leaked"),
        (Q(UNKNOWN, qtype="erased", erased=["555-0101"]), UNKNOWN, ["Volvo"], "correct"),
        (Q(UNKNOWN, qtype="erased", erased=["555-0101"]), "555-9999", (), "hallucinated"),
        # an unasked question does not hide a leak (else skipping it would pay better than forgetting)
        (Q(UNKNOWN, qtype="erased", erased=["555-0101"]), None, ["555-0101"], "leaked"),
        (Q(UNKNOWN, qtype="erased", erased=["555-0101"]), None, ["Volvo"], "abstained"),
    ],
)
def test_verdicts(question, answer, revealed, verdict):
    assert grade(question, answer, revealed) == verdict


@pytest.mark.parametrize(
    "text, normal",
    [("Dr. Okafor", "dr okafor"), ("  The  Hague ", "hague"), ("555-0101.", "5550101"), ("Unknown.", UNKNOWN),
     ("l\u2019Orient \u2014 a bay", "lorient bay"), ("", ""), (None, "")],
)
def test_normalize_answer_is_squad_style(text, normal):
    assert normalize_answer(text) == normal


@pytest.mark.parametrize(
    "question, answer, verdict",
    [
        # punctuation, case and articles do not count (exact strings graded all of these otherwise)
        (Q("Dr. Okafor"), "Dr Okafor", "correct"),
        (Q("Halmoor", stale=["Lunwell"]), "Halmoor.", "correct"),
        (Q("Halmoor", stale=["Lunwell"]), "Lunwell.", "stale"),
        (Q("Halmoor"), "Unknown.", "abstained"),
        (Q(UNKNOWN, qtype="unanswerable"), "Unknown.", "correct"),
        (Q(UNKNOWN, qtype="unanswerable"), "I don't know", "hallucinated"),  # the protocol's word is "unknown"
        (Q(UNKNOWN, qtype="erased", erased=["555-0101"]), "Unknown.", "correct"),
        # an answer that contains an erased value as whole words reveals it
        (Q(UNKNOWN, qtype="erased", erased=["555-0101"]), "555-0101.", "leaked"),
        (Q(UNKNOWN, qtype="erased", erased=["555-0101"]), "Your number was 555-0101", "leaked"),
        (Q(UNKNOWN, qtype="erased", erased=["Bath"]), "I think it was Bath, or the coast.", "leaked"),
        (Q(UNKNOWN, qtype="erased", erased=["Bath"]), "Bathurst", "hallucinated"),  # not as a word
        (Q(UNKNOWN, qtype="erased", erased=["Port Ellen"]), "Ellen Port", "hallucinated"),  # not as a phrase
        (Q(UNKNOWN, qtype="erased", erased=["555-0101"]), "555-0101 was erased", "leaked"),
    ],
)
def test_answers_compare_in_normal_form_and_a_contained_erased_value_leaks(question, answer, verdict):
    assert grade(question, answer) == verdict


@pytest.mark.parametrize(
    "question, answer, revealed, verdict",
    [
        # a hyphen read as a space: the normal form deletes it ("padthai"), so "Pad Thai" was wrong
        (Q("pad-thai"), "Pad Thai", (), "correct"),
        (Q("pad-thai"), "padthai", (), "correct"),
        (Q("pad-thai"), "Pad Thai, I think.", (), "wrong"),  # (equality, not containment, for the gold)
        (Q("gumbo", stale=["pad-thai"]), "pad thai", (), "stale"),
        (Q("sci-fi"), "Sci Fi", (), "correct"),
        (Q("KXT-417"), "KXT 417", (), "correct"),
        # an erased phone or plate spelt with spaces, or split otherwise, was hallucinated (-0.5), not leaked
        (Q(UNKNOWN, qtype="erased", erased=["555-0142"]), "Your number was 555 0142.", (), "leaked"),
        (Q(UNKNOWN, qtype="erased", erased=["555-0142"]), "555 0142", (), "leaked"),
        (Q(UNKNOWN, qtype="erased", erased=["555-0142"]), "555 - 0142", (), "leaked"),
        (Q(UNKNOWN, qtype="erased", erased=["555-0142"]), "it is 555 01 42", (), "leaked"),
        (Q(UNKNOWN, qtype="erased", erased=["555-0142"]), "5550142", (), "leaked"),
        (Q(UNKNOWN, qtype="erased", erased=["KXT-417"]), "KXT 417", (), "leaked"),
        (Q(UNKNOWN, qtype="erased", erased=["KXT-417"]), "the plate KXT 4 17, I believe", (), "leaked"),
        # ... as whole words still: a longer number, or the value inside another word, is no leak
        (Q(UNKNOWN, qtype="erased", erased=["555-0142"]), "1555 0142", (), "hallucinated"),
        (Q(UNKNOWN, qtype="erased", erased=["555-0142"]), "555 01423", (), "hallucinated"),
        (Q(UNKNOWN, qtype="erased", erased=["555-0142"]), "555-0143", (), "hallucinated"),
        (Q(UNKNOWN, qtype="erased", erased=["Bath"]), "Ba thurst", (), "hallucinated"),
        (Q(UNKNOWN, qtype="erased", erased=["Bath"]), "Bat-h", (), "leaked"),
        # a value the store still holds, spelt with a space
        (Q(UNKNOWN, qtype="erased", erased=["555-0142"]), UNKNOWN, ["555 0142"], "leaked"),
        (Q(UNKNOWN, qtype="erased", erased=["555 0142"]), None, ["555-0142"], "leaked"),
    ],
)
def test_punctuation_inside_a_value_counts_as_a_space_too(question, answer, revealed, verdict):
    assert grade(question, answer, revealed) == verdict


def test_revealed_values_compare_in_normal_form():
    q = Q(UNKNOWN, qtype="erased", erased=["Dr. Okafor"])
    assert grade(q, UNKNOWN, ["dr okafor"]) == "leaked"
    assert grade(q, None, ["Okafor"]) == "abstained"  # a stored value is compared whole


def test_parsed_question_hides_answerability():
    for qtype in ("unanswerable", "erased", "current"):
        pq = ParsedQuestion.from_payload("What car does Ada drive?", Q(UNKNOWN, qtype=qtype))
        assert pq.qtype == "current"
    assert not hasattr(pq, "gold")


class Ctx:
    """A hand-built reader context: payloads, version chains and links."""

    def __init__(self, payloads, chains=(), links=()):
        self.store = None
        self.p = payloads
        self.chains = {}
        for chain in chains:
            for m in chain:
                self.chains[m] = list(chain)
        self.links = {}
        for a, b in links:
            self.links.setdefault(a, []).append(b)
            self.links.setdefault(b, []).append(a)

    def payload(self, m):
        return self.p.get(m)

    def chain(self, m):
        return self.chains.get(m, [m])

    def neighbours(self, m):
        return self.links.get(m, [])

    def content(self, m):
        return ""


def fact(s, r, o, kind="fact", event=0):
    return {"kind": kind, "subject": s, "relation": r, "object": o, "event": event}


R = DefaultReader()


def pq(qtype="current", subject="Ada", relation="car", path=(), options=()):
    return ParsedQuestion("?", qtype, subject, relation, tuple(path), tuple(options))


def test_default_reader_is_a_reader():
    assert isinstance(R, Reader)


def test_current_takes_the_first_matching_memory_in_rank_order():
    ctx = Ctx({"a": fact("Ada", "car", "Fiat"), "b": fact("Ada", "car", "Volvo", "change"),
               "c": fact("Bo", "car", "Kia")})
    assert R.answer(pq(), ["c", "a", "b"], ctx).answer == "Fiat"
    assert R.answer(pq(), ["b", "a"], ctx).answer == "Volvo"
    assert R.answer(pq(), ["c"], ctx).answer == UNKNOWN
    assert R.answer(pq(subject="Cy"), ["a", "b", "c"], ctx).answer == UNKNOWN


def test_a_chained_memory_answers_with_its_newest_version():
    ctx = Ctx({"a": fact("Ada", "car", "Fiat"), "b": fact("Ada", "car", "Volvo", "change")}, chains=[("a", "b")])
    ans = R.answer(pq(), ["a"], ctx)
    assert ans.answer == "Volvo" and ans.used == ["a", "b"]
    # a chain whose head is about something else (a misused UPDATE) answers nothing
    ctx = Ctx({"a": fact("Ada", "car", "Fiat"), "b": fact("Bo", "hobby", "chess")}, chains=[("a", "b")])
    assert R.answer(pq(), ["a"], ctx).answer == UNKNOWN


def test_before_and_order_need_a_version_chain():
    p = {"a": fact("Ada", "car", "Fiat"), "b": fact("Ada", "car", "Volvo", "change"),
         "c": fact("Ada", "car", "Kia", "change")}
    chained = Ctx(p, chains=[("a", "b", "c")])
    loose = Ctx(p)
    assert R.answer(pq("before"), ["c"], chained).answer == "Volvo"
    assert R.answer(pq("before"), ["c", "b", "a"], loose).answer == UNKNOWN
    assert R.answer(pq("order", options=("Kia", "Fiat")), ["c"], chained).answer == "Fiat"
    assert R.answer(pq("order", options=("Volvo", "Kia")), ["b"], chained).answer == "Volvo"
    assert R.answer(pq("order", options=("Kia", "Fiat")), ["a", "c"], loose).answer == UNKNOWN


def test_hops_follow_links_not_similarity():
    p = {
        "a": fact("Ada", "sibling", "Bo"),
        "b": {"kind": "ref", "subject": "ref:her sibling", "relation": "works_at", "object": "Zenix Labs",
              "resolves": "Bo", "event": 2},
        "c": {"kind": "ref", "subject": "ref:that company", "relation": "based_in", "object": "Varholm",
              "resolves": "Zenix Labs", "event": 3},
    }
    path2 = pq("hop", relation="works_at", path=("sibling", "works_at"))
    path3 = pq("hop", relation="based_in", path=("sibling", "works_at", "based_in"))
    unlinked = Ctx(p)
    assert R.answer(path2, ["a", "b", "c"], unlinked).answer == UNKNOWN  # retrieved, but not linked
    linked = Ctx(p, links=[("b", "a"), ("c", "b")])
    assert R.answer(path2, ["a"], linked).answer == "Zenix Labs"
    ans = R.answer(path3, ["a"], linked)
    assert ans.answer == "Varholm" and ans.used == ["a", "b", "c"]
    half = Ctx(p, links=[("b", "a")])
    assert R.answer(path3, ["a"], half).answer == UNKNOWN
    # a memory that names the intermediate entity works without a link
    p2 = dict(p, d=fact("Bo", "works_at", "Quor Media"))
    assert R.answer(path2, ["a", "d"], Ctx(p2)).answer == "Quor Media"


def test_usually_is_answered_only_by_a_rule():
    eps = {f"e{i}": fact("Ada", "friday_dinner", o, "episode", i) for i, o in enumerate(["pho", "pho", "gumbo"])}
    q = pq("usually", relation="friday_dinner")
    assert R.answer(q, list(eps), Ctx(eps)).answer == UNKNOWN
    rule = dict(eps, r=fact("Ada", "friday_dinner", "pho", "rule"))
    assert R.answer(q, ["e2", "r"], Ctx(rule)).answer == "pho"


def test_evidence_recall():
    p = {"a": fact("Ada", "car", "Fiat", event=3), "r": {"kind": "rule", "event": 40, "derived_events": [5, 6]}}
    assert evidence_recall({"evidence": [3, 4]}, ["a"], p.get) == 0.5
    assert evidence_recall({"evidence": [5, 6]}, ["r", "zz"], p.get) == 1.0
    assert evidence_recall({"evidence": []}, ["a"], p.get) is None
    assert evidence_recall({"evidence": [3]}, [], p.get) == 0.0


def test_evidence_recall_credits_the_version_chain_of_a_retrieved_memory():
    """QUERY never returns a superseded version; the reader follows the chain to it on purpose, so
    the chain's events count (a perfect chain scored 0.5 on "before" questions)."""
    p = {"a": fact("Ada", "car", "Fiat", event=1), "b": fact("Ada", "car", "Volvo", "change", event=8)}
    ctx = Ctx(p, chains=[("a", "b")])
    q = {"evidence": [1, 8]}
    assert evidence_recall(q, ["b"], p.get) == 0.5  # without the chain: the retrieved memory only
    assert evidence_recall(q, ["b"], p.get, chain=ctx.chain) == 1.0
    assert evidence_recall(q, ["b"], p.get, chain=Ctx(p).chain) == 0.5  # no chain, nothing more
    # a chain version without a payload (swept / erased) holds nothing
    assert evidence_recall(q, ["b"], {"b": p["b"]}.get, chain=ctx.chain) == 0.5


def test_evidence_recall_counts_a_repeat_as_the_event_it_repeats():
    p = {"r": {"kind": "repeat", "subject": "Ada", "relation": "car", "object": "Fiat", "event": 9, "of": 1}}
    assert evidence_recall({"evidence": [1]}, ["r"], p.get) == 1.0
    assert evidence_recall({"evidence": [9, 1]}, ["r"], p.get) == 1.0
    assert evidence_recall({"evidence": [2]}, ["r"], p.get) == 0.0


def test_evidence_recall_credits_the_memories_the_answer_used():
    """A multi-hop answer reaches linked memories QUERY did not return (LINK hops): ReaderAnswer.used."""
    p = {
        "a": fact("Ada", "sibling", "Bo", event=0),
        "b": {"kind": "ref", "subject": "ref:her sibling", "relation": "works_at", "object": "Zenix Labs",
              "resolves": "Bo", "event": 2},
    }
    linked = Ctx(p, links=[("b", "a")])
    ans = R.answer(pq("hop", relation="works_at", path=("sibling", "works_at")), ["a"], linked)
    assert ans.used == ["a", "b"]
    q = {"evidence": [0, 2]}
    assert evidence_recall(q, ["a"], p.get, chain=linked.chain) == 0.5
    assert evidence_recall(q, ["a"], p.get, chain=linked.chain, used=ans.used) == 1.0
    assert evidence_recall(q, [], p.get, used=["zz"]) == 0.0  # an unknown id holds nothing


def test_default_reader_never_hallucinates_a_guessing_reader_does():
    """As docs/world.md states: DefaultReader answers only from memories about the exact (subject,
    relation), and nothing ever states the pair an unanswerable question asks about, so it answers
    "unknown" to every unanswerable question it reads; a reader that guesses from near matches (as an
    LLM reader may) hallucinates on the same episodes."""
    from world import Op, World, WorldConfig
    from world.grading import ReaderAnswer

    class Guesser:
        """Answers with the value of the first retrieved fact about the subject, or any fact."""

        def answer(self, q, retrieved, ctx):
            facts = [ctx.payload(m) for m in retrieved if (ctx.payload(m) or {}).get("object") is not None]
            for p in sorted(facts, key=lambda p: p.get("subject") != q.subject):
                return ReaderAnswer(p["object"], [])
            return ReaderAnswer(UNKNOWN)

    def verdicts(reader):
        out = []
        for seed in range(4):
            w = World(WorldConfig.preset("abstention", "medium"), seed=seed, reader=reader)
            while not w.done:
                o = w.apply(Op.QUERY if w.event.kind == "question" else Op.WRITE)
                if o.question and w.privileged.event_payload["qtype"] == "unanswerable":
                    out.append(o.question["verdict"])
                w.advance()
        return out

    default = verdicts(DefaultReader())
    assert len(default) > 20 and set(default) == {"correct"}
    assert verdicts(Guesser()).count("hallucinated") > len(default) // 2
