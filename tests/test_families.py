"""Each family's generator produces the structure it claims (seeded, several seeds)."""

import re
from collections import Counter

import numpy as np
import pytest

from world import WorldConfig
from world.entities import gender_of
from world.families import UNKNOWN, ScriptGenerator, generate_script

SEEDS = range(4)


def script(family, seed, difficulty="easy", **over):
    cfg = WorldConfig.preset(family, difficulty)
    if over:
        cfg = cfg.replace(**over)
    return generate_script(cfg, seed)


def questions(events, qtype=None):
    return [e for e in events if e.kind == "question" and (qtype is None or e.payload["qtype"] == qtype)]


def statements_about(events, subject, relation, before=None):
    return [
        e for e in events[:before]
        if e.kind == "statement" and e.payload.get("subject") == subject and e.payload.get("relation") == relation
    ]


@pytest.mark.parametrize("family", ["recall", "update", "temporal", "multi_hop", "consolidation", "abstention",
                                    "erasure", "noise", "life"])
def test_deterministic_and_seed_dependent(family):
    a = [(e.index, e.step, e.kind, e.text) for e in script(family, 11)]
    b = [(e.index, e.step, e.kind, e.text) for e in script(family, 11)]
    c = [(e.index, e.step, e.kind, e.text) for e in script(family, 12)]
    assert a == b
    assert a != c
    assert len(a) == WorldConfig.preset(family, "easy").horizon
    assert [e[0] for e in a] == list(range(len(a)))
    assert len(questions(script(family, 11))) >= 5


@pytest.mark.parametrize("seed", SEEDS)
def test_recall_question_follows_its_fact(seed):
    ev = script("recall", seed)
    for q in questions(ev):
        p = q.payload
        facts = statements_about(ev, p["subject"], p["relation"], before=q.index)
        assert facts, q.text
        assert all(f.payload["object"] == p["gold"] for f in facts)
        assert p["evidence"] and all(ev[i].payload["object"] == p["gold"] for i in p["evidence"])
        assert p["subject"] in q.text


@pytest.mark.parametrize("seed", SEEDS)
def test_update_asks_for_the_newest_value_and_knows_the_stale_ones(seed):
    ev = script("update", seed, "medium")
    post = [q for q in questions(ev) if q.payload["stale"]]
    assert post
    for q in post:
        p = q.payload
        said = statements_about(ev, p["subject"], p["relation"], before=q.index)
        kinds = [s.payload["kind"] for s in said]
        assert "change" in kinds
        assert said[-1].payload["object"] == p["gold"]
        assert set(p["stale"]) == {s.payload["object"] for s in said} - {p["gold"]}
        # a change statement does not reuse the first statement's wording (WRITE cannot dedup it away)
        first = said[0]
        assert all(s.text != first.text for s in said if s.payload["kind"] == "change")


@pytest.mark.parametrize("seed", SEEDS)
def test_temporal_questions_follow_the_order_of_statements(seed):
    ev = script("temporal", seed, "medium")
    qs = questions(ev, "before") + questions(ev, "order")
    assert qs
    for q in qs:
        p = q.payload
        values = []
        for s in statements_about(ev, p["subject"], p["relation"], before=q.index):
            if s.payload["kind"] in ("fact", "change") and (not values or values[-1] != s.payload["object"]):
                values.append(s.payload["object"])
        assert len(values) >= 2
        if p["qtype"] == "before":
            assert p["gold"] == values[-2]
        else:
            a, b = p["options"]
            assert p["gold"] == (a if values.index(a) < values.index(b) else b)
            assert a in q.text and b in q.text


def test_before_questions_ask_for_the_value_before_the_last_change():
    """The gold of a "before" question is the value just before the current one; when the value
    changed more than once, "What was Cora's home town before?" (history Brydale, Halmoor, Lunwell;
    gold Halmoor) had two right answers (142 of 310 at medium, 355 of 633 at hard). Every wording
    now says "before the last ..."; two templates per relation, as before (the RNG draws stay)."""
    from world.entities import CHANGE_RELATIONS, RELATIONS

    for r in CHANGE_RELATIONS:
        assert len(RELATIONS[r].before) == 2
        assert all("before the last" in t for t in RELATIONS[r].before), RELATIONS[r].before
    several = 0
    for seed in range(6):
        ev = script("temporal", seed, "hard")
        for q in questions(ev, "before"):
            p = q.payload
            values = [s.payload["object"] for s in statements_about(ev, p["subject"], p["relation"], before=q.index)
                      if s.payload["kind"] in ("fact", "change")]
            several += len(values) >= 3
            assert "before the last" in q.text and p["gold"] == values[-2]
    assert several > 20


@pytest.mark.parametrize("seed", SEEDS)
def test_multi_hop_refers_without_naming_and_soon_after(seed):
    ev = script("multi_hop", seed, "medium")
    refs = [e for e in ev if e.payload["kind"] == "ref"]
    assert refs
    for r in refs:
        p = r.payload
        assert p["subject"].startswith("ref:")
        assert p["resolves"] not in r.text  # the referent is not named
        ante = ev[p["antecedent"]]
        assert 0 < r.index - ante.index <= 8  # it follows its antecedent within a few events
        assert ante.payload["object"] == p["resolves"] or ante.payload.get("resolves") is not None
    for q in questions(ev, "hop"):
        p = q.payload
        # walk the chain through the payloads: it must end at the gold
        ent = p["subject"]
        evid = [ev[i] for i in p["evidence"]]
        assert len(evid) == len(p["path"])
        for e, rel in zip(evid, p["path"]):
            assert e.payload["relation"] == rel
            assert e.payload.get("resolves", e.payload["subject"]) == ent
            ent = e.payload["object"]
        assert ent == p["gold"]


@pytest.mark.parametrize(("difficulty", "seeds"), [("medium", [12, 89, *range(0, 40)]), ("easy", [197, *range(0, 20)]),
                                                   ("hard", [44, *range(0, 40)])])
def test_a_reference_never_names_its_town_through_a_region(difficulty, seeds):
    """A region was drawn from the town names' syllables: "Vera's home town is Ossford." was followed
    by "That town lies in the Ossford province." (multi_hop medium seed 12; the other listed seeds had
    such a reference too), and a town drawn after a region could take its name ("The town is in the
    Rosbrook valley." ... "Dean's home town is Rosbrook.": medium seed 4; 12 of 40 medium and 21 of 40
    hard episodes). No region shares its name with a town of the episode, whichever came first."""
    for seed in seeds:
        ev = script("multi_hop", seed, difficulty)
        towns = {e.payload["object"] for e in ev
                 if e.kind == "statement" and e.payload.get("relation") in ("lives_in", "based_in")}
        refs = [e for e in ev if e.payload["kind"] == "ref"]
        assert refs and towns
        for r in refs:
            assert r.payload["resolves"] not in r.text, (seed, r.text)
            if r.payload["relation"] == "region":
                stem = r.payload["object"].split()[1]
                assert stem not in towns, (seed, r.text)


@pytest.mark.parametrize("family", ["abstention", "erasure", "life"])
def test_last_use_points_at_a_question_that_needs_the_fact(family):
    """``last_use`` is the last question that needs the statement: one whose evidence holds it (or, for
    an older version, its thread's last question with evidence). An unanswerable or "erased" question
    needs none of its thread's facts: abstention easy seed 0's 'Ravi drives a Mazda' pointed at 'What car
    does Elsa drive?' (unanswerable), so the oracle kept and rehearsed a fact no question asks for."""
    checked = freed = 0
    for seed in range(6):
        ev = script(family, seed, "medium")
        for e in ev:
            p = e.payload
            if e.kind != "statement" or p.get("thread", -1) < 0 or p["kind"] not in ("fact", "change"):
                continue
            asked = [q for q in ev[e.index + 1:] if q.kind == "question" and q.payload["thread"] == p["thread"]]
            needing = [q for q in asked if q.payload["evidence"]]
            if p["last_use"] >= 0:
                q = ev[p["last_use"]]
                assert q.kind == "question" and q.payload["evidence"], (seed, e.text, q.text)
                assert p["last_use"] == needing[-1].index
                checked += 1
            else:
                assert not needing, (seed, e.text)
            # the thread asks again later, with a question that needs no fact (the old rule's last_use)
            freed += bool(asked) and p["last_use"] < asked[-1].index
    assert checked > 10 and freed > 0


@pytest.mark.parametrize("family", ["multi_hop", "life"])
def test_referring_statements_have_one_antecedent(family):
    """No event between a referring statement and its antecedent gives the reference another thing to
    point at: "Carl has a sibling called Mina." "Jules's sibling is Elsa." "His sibling has a flat in
    Eldfield." (multi_hop easy seed 0) could mean either sibling; so could "That company" after two
    employers (10-11% of multi_hop references, up to 5% of life's), or after a question about
    another employer ("Which company employs Esme's sibling?" between "Esme has a job at Mirora
    Studios." and "That employer sits in Ardwick."), and "His sibling" after any other man is
    named. The slots between them get chit-chat."""
    rivals = gaps = 0
    for difficulty in ("easy", "hard"):
        for seed in range(4):
            gen = ScriptGenerator(WorldConfig.preset(family, difficulty), np.random.default_rng(seed))
            ev = gen.events
            for r in ev:
                p = r.payload
                if p["kind"] != "ref":
                    continue
                a = ev[p["antecedent"]].payload
                gaps += r.index - a["event"] > 1
                for e in ev[a["event"] + 1: r.index]:
                    q = e.payload
                    if q["kind"] == "chitchat":
                        continue
                    text = e.text.lower()
                    if a["relation"] == "sibling":  # any other person of the pronoun's gender, named
                        g = gender_of(a["subject"])
                        rivals += any(x != a["subject"] and gender_of(x) == g
                                      for x in (q.get("subject"), q.get("object")))
                        rivals += q["kind"] == "ref" and q["subject"] == p["subject"] and q["resolves"] != p["resolves"]
                    elif e.kind != "statement":  # a question / request about another company / town
                        own = "path" not in q and q.get("subject") == a["subject"]
                        words = ("compan", "employer", "firm", "job", "work") if a["relation"] == "works_at" else ("town",)
                        rivals += not own and any(w in text for w in words)
                    else:
                        rivals += q.get("relation") == a["relation"] and q["object"] != a["object"]
    assert rivals == 0
    assert gaps > 20  # (references still come a few events after their antecedent)


@pytest.mark.parametrize("family", ["multi_hop", "life"])
def test_sibling_pronoun_points_only_at_the_subject(family):
    """A sibling has the other gender than the subject, so that "His sibling" after "Tom's sibling
    is Lena." can only mean Tom's (with "Carl is Tom's sibling." it would read as Carl's sibling); the
    pronoun of every sibling reference is the subject's."""
    n = 0
    for difficulty in ("easy", "hard"):
        for seed in range(4):
            gen = ScriptGenerator(WorldConfig.preset(family, difficulty), np.random.default_rng(seed))
            for e in gen.events:
                p = e.payload
                if p.get("relation") == "sibling" and p["kind"] == "fact":
                    n += 1
                    assert {gender_of(p["subject"]), gender_of(p["object"])} == {"f", "m"}, e.text
                if p["kind"] == "ref" and p["subject"].endswith(" sibling"):
                    a = gen.events[p["antecedent"]].payload
                    pronoun = "her" if gender_of(a["subject"]) == "f" else "his"
                    assert e.text.startswith(pronoun.capitalize() + " sibling "), (e.text, a)
    assert n > 10


@pytest.mark.parametrize("seed", SEEDS)
def test_consolidation_majority_of_several_episodes(seed):
    ev = script("consolidation", seed)
    qs = questions(ev, "usually")
    assert qs
    for q in qs:
        p = q.payload
        eps = [e for e in statements_about(ev, p["subject"], p["relation"], before=q.index) if e.payload["kind"] == "episode"]
        assert len(eps) >= 3
        counts = Counter(e.payload["object"] for e in eps)
        assert counts.most_common(1)[0][0] == p["gold"] and counts[p["gold"]] > len(eps) / 2
        assert len({e.text for e in eps}) == len(eps)  # every episode is worded differently
        assert q.index - eps[-1].index >= WorldConfig.preset("consolidation", "easy").delay_min


@pytest.mark.parametrize("seed", SEEDS)
def test_abstention_asks_about_never_stated_attributes(seed):
    ev = script("abstention", seed)
    unans = questions(ev, "unanswerable")
    assert unans
    stated = {(e.payload.get("subject"), e.payload.get("relation")) for e in ev if e.kind == "statement"}
    for q in unans:
        assert q.payload["gold"] == UNKNOWN
        assert (q.payload["subject"], q.payload["relation"]) not in stated
    assert questions(ev, "current")  # answerable ones too


@pytest.mark.parametrize("seed", SEEDS)
def test_erasure_fact_question_request_question(seed):
    ev = script("erasure", seed)
    erased = questions(ev, "erased")
    assert erased
    for q in erased:
        p = q.payload
        assert p["gold"] == UNKNOWN and len(p["erased"]) == 1
        reqs = [e for e in ev[: q.index] if e.kind == "request" and e.payload["relation"] == p["relation"]
                and e.payload["subject"] == p["subject"]]
        assert reqs and reqs[-1].payload["erases"] == p["erased"][0]
        before = [e for e in questions(ev[: reqs[-1].index], "current")
                  if (e.payload["subject"], e.payload["relation"]) == (p["subject"], p["relation"])]
        assert before and before[-1].payload["gold"] == p["erased"][0]  # useful before the request
        assert p["erased"][0] not in reqs[-1].text


@pytest.mark.parametrize("seed", SEEDS)
def test_noise_repeats_copy_earlier_facts(seed):
    ev = script("noise", seed)
    reps = [e for e in ev if e.payload["kind"] == "repeat" and e.payload["family"] == "noise"]
    chit = [e for e in ev if e.payload["kind"] == "chitchat"]
    assert len(reps) >= 10 and len(chit) >= 10
    for r in reps:
        src = ev[r.payload["of"]]
        assert src.index < r.index
        assert (src.payload["subject"], src.payload["relation"], src.payload["object"]) == (
            r.payload["subject"], r.payload["relation"], r.payload["object"])
        if r.payload["verbatim"]:
            assert r.text == src.text
        else:
            assert r.text != src.text and r.payload["object"] in r.text


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_noise_has_more_chitchat_and_more_repeats_than_recall(difficulty):
    """The noise family is recall in heavy chit-chat and repeats; its preset used to lower noise_ratio
    (0.5) and draw repeats first, so it had less chit-chat than recall (easy: 0.221 vs 0.394 of the
    events)."""
    share = {}
    for fam in ("recall", "noise"):
        kinds = Counter(e.payload["kind"] for seed in range(6) for e in script(fam, seed, difficulty))
        n = sum(kinds.values())
        share[fam] = (kinds["chitchat"] / n, kinds["repeat"] / n)
        cfg = WorldConfig.preset(fam, difficulty)
        share[fam + " filler"] = ((1 - cfg.repeat_ratio) * cfg.noise_ratio, cfg.repeat_ratio)
    for i in (0, 1):
        assert share["noise"][i] > share["recall"][i] + 0.04, share
        assert share["noise filler"][i] > share["recall filler"][i], share


@pytest.mark.parametrize("seed", SEEDS)
def test_facts_never_contradict_outside_change_threads(seed):
    ev = script("life", seed, "medium")
    values: dict = {}
    for e in ev:
        p = e.payload
        if e.kind != "statement" or p["kind"] not in ("fact", "distractor", "repeat"):
            continue
        if p["family"] in ("update", "temporal"):
            continue
        key = (p["subject"], p["relation"])
        values.setdefault(key, set()).add(p["object"])
    assert all(len(v) == 1 for v in values.values())


def test_life_mixes_families_over_sessions():
    cfg = WorldConfig.preset("life", "easy")
    fams = Counter()
    for seed in SEEDS:
        ev = generate_script(cfg, seed)
        fams.update(q.payload["family"] for q in questions(ev))
        sessions = sorted({e.session for e in ev})
        assert sessions == list(range(cfg.sessions))
        jumps = [b.step - a.step for a, b in zip(ev, ev[1:])]
        assert jumps.count(1 + cfg.session_gap) == cfg.sessions - 1
    assert len(fams) >= 6


def test_endless_generator_extends_and_levels_raise_delays():
    cfg = WorldConfig.preset("life", "endless")
    gen = ScriptGenerator(cfg, np.random.default_rng(5))
    gen.extend()
    n = len(gen.events)
    assert n == cfg.chunk
    gen.extend(level=4)
    assert len(gen.events) == 2 * cfg.chunk and gen.level == 4
    assert [e.index for e in gen.events] == list(range(2 * cfg.chunk))
    assert gen._delay() <= int(cfg.delay_max * 3)


def test_endless_script_never_restates_a_region_or_headquarters():
    """A long endless script (30,000 events, past the 960 plain place names at ~19,000) never gives a
    town a second region nor a company a second headquarters (life-endless seed 0 told "That town lies
    in the Ulhaven coast." at #13422 and "... in the Ossbury valley." of the same town at #19482), and
    its place names stay fresh (the pool grows as it runs low)."""
    gen = ScriptGenerator(WorldConfig.preset("life", "endless"), np.random.default_rng(0))
    told: dict[tuple[str, str], str] = {}
    towns = 0
    while len(gen.events) < 30_000:
        start = len(gen.events)
        gen.extend()
        for e in gen.events[start:]:
            p = e.payload
            if p["kind"] in ("fact", "change", "distractor", "ref") and p.get("relation") in ("region", "based_in"):
                key = (p.get("resolves", p["subject"]), p["relation"])
                assert told.setdefault(key, p["object"]) == p["object"], (e.index, e.text, told[key])
                towns += p["relation"] == "region"
    assert towns > 50
    assert len(gen.cast.used_objects["place"]) > 960


def test_place_and_organisation_pools_grow_as_they_run_low():
    """Cast.value never hands out a used place / organisation name again: thousands stay distinct."""
    from world.entities import _PLACE_A, _PLACE_B, Cast

    cast = Cast(np.random.default_rng(0))
    places = [cast.value("place") for _ in range(3_000)]
    orgs = [cast.value("org") for _ in range(7_000)]
    regions = [cast.value("region") for _ in range(5_000)]
    assert len(set(places)) == 3_000 and len(set(orgs)) == 7_000 and len(set(regions)) == 5_000
    plain = {a + b for a in _PLACE_A for b in _PLACE_B}  # the 960 plain names come first, then longer ones
    assert all(p in plain for p in places[:480]) and sum(p not in plain for p in places) >= 3_000 - 960


def test_tidy_chooses_a_or_an_and_drops_a_double_period_after_an_initial():
    from world.entities import tidy

    assert tidy("Lena's car is a Opel.") == "Lena's car is an Opel."
    assert tidy("It's been a odd week, honestly.") == "It's been an odd week, honestly."
    assert tidy("A owl and a Skoda.") == "An owl and a Skoda."
    assert tidy("She plays a ukulele, a unique one.") == "She plays a ukulele, a unique one."
    assert tidy("I'd rather you didn't keep Lena S.'s car; ask Lena S..") == "I'd rather you didn't keep Lena S.'s car; ask Lena S."
    assert tidy("Theo's sibling is Lena S. T..") == "Theo's sibling is Lena S. T."
    assert tidy("Wait... what?") == "Wait... what?"


def test_event_texts_use_a_and_an_and_fitting_animal_noises():
    """"a Opel" / "a odd" (1.2% of events), "My neighbour's squirrel kept barking" and "Lena S.." at
    the end of a sentence (endless worlds, where names get initials) are gone from the scripts."""
    from world.config import FAMILIES

    bad, noises = [], Counter()
    texts = [e.text for fam in FAMILIES for seed in range(3) for e in script(fam, seed, "hard")]
    gen = ScriptGenerator(WorldConfig.preset("life", "endless"), np.random.default_rng(0))
    while len(gen.events) < 3_000:
        gen.extend()
    texts += [e.text for e in gen.events if e is not None]
    for t in texts:
        for art, word in re.findall(r"\b([Aa]n?) (\w+)", t):
            if (art.lower() == "an") != (word[0].lower() in "aeio"):
                bad.append(t)
        if re.search(r"\b[A-Z]\.\.", t):
            bad.append(t)
        m = re.search(r"neighbour's (\w+) kept (\w+)", t)
        if m:
            noises[m.groups()] += 1
    assert bad == []
    assert sum("Opel" in t for t in texts) > 0 and sum(" odd " in t for t in texts) > 0
    assert set(noises) <= {("dog", "barking"), ("cat", "meowing"), ("parrot", "squawking"), ("goose", "honking"),
                           ("rooster", "crowing")}
    assert len(noises) >= 3


@pytest.mark.parametrize("horizon, sessions, lengths", [
    (100, 3, [34, 34, 32]),  # life-easy
    (250, 4, [63, 63, 63, 61]),  # life-medium
    (600, 6, [100] * 6),  # life-hard
    (12, 5, [3, 3, 3, 3]),  # fewer sessions than asked
    (10, 20, [1] * 10),
])
def test_sessions_follow_the_documented_rule(horizon, sessions, lengths):
    """The docs said the episode is cut into `sessions` equal sessions; the generator cuts it into
    sessions of ceil(horizon / sessions) events, the last one taking the rest (so fewer sessions, or a
    shorter last one, when horizon is no multiple of sessions). Spreading the events evenly instead
    would change the life-easy and life-medium scripts, so the rule is now documented as it is."""
    cfg = WorldConfig.preset("life", "easy").replace(horizon=horizon, sessions=sessions)
    ev = generate_script(cfg, 0)
    assert list(Counter(e.session for e in ev).values()) == lengths
    assert all(e.session == e.index // -(-horizon // sessions) for e in ev)
    assert all(e.step == e.index + e.session * cfg.session_gap for e in ev)


def test_endless_sessions_are_session_len_events():
    cfg = WorldConfig.preset("life", "endless")
    gen = ScriptGenerator(cfg, np.random.default_rng(0))
    gen.extend(n_events=400)
    assert all(e.session == e.index // cfg.session_len for e in gen.events)
    assert all(e.step == e.index + e.session * cfg.session_gap for e in gen.events)
