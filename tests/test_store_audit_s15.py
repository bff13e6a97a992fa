"""The findings of audit a1 of session 15 on the memory store (docs/store.md), one section each; the
tests of a finding failed on the code before its fix, except those that pin what must not change."""

from __future__ import annotations

import copy
import math
import pickle
import unicodedata

import numpy as np
import pytest

from world import persistence
from world.cues import extract_cues
from world.dedup import fingerprint, normalize, signature
from world.embedding import CachedEmbedder, HashingEmbedder
from world.memory import EpisodicMemory, MemoryStore, SemanticMemory
from world.persistence import StoreFileError, load_store
from world.summary import RollingSummary

NAN, INF = math.nan, math.inf


def _store(**kw) -> MemoryStore:
    return MemoryStore(CachedEmbedder(HashingEmbedder(64)), **kw)


def _snapshot(store: MemoryStore) -> str:
    """Everything the store holds (records, edges, ACT-R rows, layout, counters, config, embeddings)."""
    state = store._export_state()
    state["embeddings"] = state["embeddings"].tobytes()
    return repr(state)


def _filled() -> MemoryStore:
    s = _store()
    s.write_episode(1, "Alice likes tea", key="alice/drink")
    s.write_episode(2, "Bob likes coffee")
    s.tick(5)
    return s


def _old_file(store: MemoryStore, path, patch):
    """``store`` saved with its exported state changed by ``patch(state)`` (valid checksums), as an
    earlier release (or its unchecked attributes) wrote it."""
    state = store._export_state()
    patch(state)
    persistence._write_sqlite(path, persistence._rows(state))
    return path


# --------------------------------------------------------------------------- 1. configuration
@pytest.mark.parametrize("name, value", [
    ("forget_threshold", NAN), ("forget_threshold", INF), ("forget_threshold", "-5"),
    ("decay", 0.0), ("decay", 1.0), ("decay", NAN),
    ("ppr_alpha", 1.0), ("ppr_alpha", 0.0), ("ppr_alpha", NAN),
    ("ppr_tol", 0.0), ("ppr_tol", INF), ("ppr_tol", NAN),
    ("max_cues", 0), ("max_cues", 2.5), ("max_cues", True),
    ("ppr_max_iter", 0), ("ppr_max_iter", 3.0),
    ("ppr_fallback", "retry"),
    ("embed_window", 0), ("embed_window", 1.5),
    ("actr_k", 0),
    ("default_namespace", "*"), ("default_namespace", ""), ("default_namespace", 7),
])
def test_assigning_a_config_attribute_runs_the_constructors_check(tmp_path, name, value):
    """Seed 001's ``store.forget_threshold = x`` (and the other constructor arguments) took any value:
    a NaN threshold silently turned every sweep off, and save() wrote what load() (which rebuilds
    the store through the constructor) then refused, so the saved data could not be loaded."""
    s = _filled()
    before, kept = _snapshot(s), getattr(s, name)
    with pytest.raises(ValueError, match=name):
        setattr(s, name, value)
    assert getattr(s, name) == kept and _snapshot(s) == before
    loaded = load_store(s.save(tmp_path / "s.db"))
    assert _snapshot(loaded) == before


def test_config_attributes_assigned_good_values_are_used_and_saved(tmp_path):
    s = _filled()
    s.forget_threshold = -1  # an int, kept as a float as the constructor keeps it
    s.decay, s.ppr_alpha, s.ppr_tol, s.max_cues = 0.3, 0.5, 1e-5, 3
    s.ppr_max_iter, s.ppr_fallback = 50, "raise"
    s.default_namespace = "other"
    assert type(s.forget_threshold) is float and s.forget_threshold == -1.0
    s.write_episode(6, "Carol met Dan and Eve in Lyon")  # in namespace "other", 3 cues at most
    assert s.get("ep_000003").namespace == "other" and s.get("ep_000003").cues == ["carol", "dan", "eve"]
    loaded = load_store(s.save(tmp_path / "s.db"))
    for name in ("forget_threshold", "decay", "ppr_alpha", "ppr_tol", "max_cues", "ppr_max_iter", "ppr_fallback",
                 "default_namespace"):
        assert getattr(loaded, name) == getattr(s, name), name
    assert _snapshot(loaded) == _snapshot(s)
    s.tick(10**6)
    loaded.tick(10**6)
    # B + importance at lag ~1e6 with d = 0.3: about -3.6, above the default threshold (-5), below -1
    assert s.sweep_decayed() == loaded.sweep_decayed() == ["ep_000001", "ep_000002", "ep_000003"]


@pytest.mark.parametrize("step", [4, -10, "abc", 7.5, True, NAN, 2**60])
def test_setting_current_step_is_tick(step):
    """``store.current_step = x`` (seed 001's attribute) went back in time silently and took "abc",
    which save / load kept and the next tick failed on (TypeError)."""
    s = _filled()
    before = _snapshot(s)
    with pytest.raises(ValueError, match="current_step"):
        s.current_step = step
    assert s.current_step == 5 and _snapshot(s) == before
    s.current_step = 9
    assert s.current_step == 9
    s.tick(9)
    with pytest.raises(ValueError, match="^step must be >= the current step 9"):
        s.tick(8)


@pytest.mark.parametrize("clock", ["abc", 7.5, None, 2**60])
def test_a_file_whose_clock_is_no_step_is_refused(tmp_path, clock):
    path = _old_file(_filled(), tmp_path / "s.db", lambda state: state["meta"].__setitem__("clock", clock))
    with pytest.raises(StoreFileError, match="meta.clock must be an int"):
        load_store(path)


def test_a_file_with_a_clock_set_back_still_loads(tmp_path):
    """An earlier release let ``current_step = -10`` through and saved it: such a file loads with its
    clock (ACT-R reads it as any other; lags are floored at 1), and the clock moves on from there."""
    s = _filled()
    path = _old_file(s, tmp_path / "s.db", lambda state: state["meta"].__setitem__("clock", -10))
    loaded = load_store(path)
    assert loaded.current_step == -10 and len(loaded) == 2
    loaded.tick(3)
    assert loaded.current_step == 3


@pytest.mark.parametrize("name, value", [("actr_k", 4), ("embed_window", 5), ("embed_window", None)])
def test_actr_k_and_embed_window_are_fixed_once_a_namespace_exists(tmp_path, name, value):
    """Both size a namespace's state when it is created: a change reached only namespaces created
    later, and a reloaded copy (every namespace built with the new value) ranked otherwise."""
    empty = _store()
    setattr(empty, name, value)  # no namespace yet: taken
    assert getattr(empty, name) == value
    s = _filled()
    before, kept = _snapshot(s), getattr(s, name)
    with pytest.raises(ValueError, match=f"{name} cannot change once the store holds a namespace"):
        setattr(s, name, value)
    setattr(s, name, kept)  # the same value: nothing to change
    assert getattr(s, name) == kept and _snapshot(s) == before


def test_a_store_pickled_with_plain_config_attributes_still_loads():
    """A pickle of an earlier release holds the attributes as plain ones (no leading underscore)."""
    s = _filled()
    state = dict(s.__dict__)
    for name in ("current_step", "forget_threshold", "decay", "actr_k", "max_cues", "ppr_alpha", "ppr_max_iter",
                 "ppr_tol", "ppr_fallback", "embed_window", "default_namespace"):
        state[name] = state.pop("_" + name)
    old = MemoryStore.__new__(MemoryStore)
    old.__setstate__(state)
    assert old.current_step == 5 and old.forget_threshold == -5.0 and old.default_namespace == "default"
    assert "current_step" not in old.__dict__
    assert [r.memory_id for r in old.query("tea", bump=False)] == [r.memory_id for r in s.query("tea", bump=False)]
    again = pickle.loads(pickle.dumps(s))
    assert again.current_step == 5 and _snapshot(again) == _snapshot(s)


# --------------------------------------------------------------------------- 2. Unicode NFC
NFC = "Zoë wohnt in Köln"
NFD = unicodedata.normalize("NFD", NFC)


def test_nfd_text_has_the_fingerprint_cues_and_signature_of_its_nfc_form():
    assert NFD != NFC
    assert fingerprint(NFD) == fingerprint(NFC) and normalize(NFD) == normalize(NFC) == "zoë wohnt in köln"
    assert extract_cues(NFD) == extract_cues(NFC) == ["zoë", "wohnt", "köln"]
    assert signature(NFD) == signature(NFC)
    # a text with letters of a script written without spaces too
    mixed = "Zoë wohnt in 東京"
    assert extract_cues(unicodedata.normalize("NFD", mixed)) == extract_cues(mixed)
    assert fingerprint("Alice likes tea") == fingerprint("alice  likes TEA")  # plain ASCII as before


def test_the_same_text_in_nfd_is_a_duplicate_under_its_key_unkeyed_and_in_supersede():
    """Under its key it was written as a new version (the history showed two identical texts)."""
    s = _store()
    a = s.write_episode(1, NFC, key="zoe/home")
    assert s.write_episode(2, NFD, key="zoe/home") is a and s.last_write.status == "duplicate"
    assert len(s.versions("zoe/home")) == 1
    b = s.write_episode(3, "Max wohnt in Bonn")
    assert s.write_episode(4, unicodedata.normalize("NFD", "Max wohnt in Bonn")) is b
    assert s.last_write.rule == "fingerprint"
    assert s.supersede(a.memory_id, NFD, 5) is a and s.last_write.status == "duplicate"


def test_a_query_in_nfd_reaches_the_cues_of_an_nfc_text_and_back():
    """An NFD query reached no cue node: PageRank was off and the best score fell from 2.03 to 0.26."""
    for text, query in ((NFC, NFD), (NFD, NFC)):
        s = _store()
        s.write_episode(1, text)
        s.write_episode(2, "Max wohnt in Bonn")
        got = s.query_scored(query, bump=False)
        assert s.last_ppr_method == "power"
        assert got == s.query_scored(NFC, bump=False)
        assert s.get("ep_000001").cues == ["zoë", "wohnt", "köln"]


def test_a_callers_cues_are_kept_in_nfc():
    s = _store()
    rec = s.write_episode(1, "Zoë was here", cues=[unicodedata.normalize("NFD", "Zoë"), "Zoë", "here"])
    assert rec.cues == ["Zoë", "here"]  # the two forms of one cue are one cue; case kept as given
    assert s.query_scored("x", cues=[unicodedata.normalize("NFD", "Zoë")], bump=False)[0][0] is rec
    assert s.last_ppr_method == "power"


def test_a_file_of_an_earlier_release_with_nfd_text_and_cues_is_migrated(tmp_path):
    """That release kept an NFD text's cues in NFD (and fingerprinted it so): on load the cues are put
    in NFC (the fingerprint is recomputed from the content), so NFC and NFD queries and writes meet it."""
    s = _store()
    s.write_episode(1, NFD, key="zoe/home")
    s.write_episode(2, "Max wohnt in Bonn", cues=[unicodedata.normalize("NFD", "Bäume"), "Bonn"])
    fresh = _snapshot(s)

    def patch(state):
        for rec in state["records"]:
            rec["cues"] = [unicodedata.normalize("NFD", c) for c in rec["cues"]]

    old_path = _old_file(s, tmp_path / "old.db", patch)
    loaded = load_store(old_path)
    assert loaded.get("ep_000001").cues == ["zoë", "wohnt", "köln"]
    assert loaded.get("ep_000002").cues == ["Bäume", "Bonn"]
    assert _snapshot(loaded) == fresh  # as this release writes it
    assert loaded.query_scored(NFC, bump=False) == s.query_scored(NFC, bump=False)
    assert loaded.last_ppr_method == "power"
    assert loaded.write_episode(3, NFC, key="zoe/home").memory_id == "ep_000001"
    assert loaded.last_write.status == "duplicate"
    # and the migrated store saves what it loads
    again = load_store(loaded.save(tmp_path / "new.db"))
    assert _snapshot(again) == _snapshot(loaded)


# --------------------------------------------------------------------------- 3. query weights
def _three() -> MemoryStore:
    s = _store()
    for i, text in enumerate(("Alice likes tea", "Bob likes coffee", "Carol rides bikes"), start=1):
        s.write_episode(i, text)
    return s


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # (numpy's, before the refusal)
@pytest.mark.parametrize("weights", [{"alpha_ppr": 1e308}, {"alpha_sim": 1e308, "alpha_ppr": 1e308},
                                     {"alpha_actr": -1e308, "alpha_ppr": 1e308}])
def test_weights_that_overflow_the_scores_are_refused_before_bumping(weights):
    """alpha_ppr=1e308 passes the finite-weight check, overflows the best match's sum to inf, and its
    tier factor (0 * inf) made it NaN: ranked last, silently."""
    s = _three()
    before = _snapshot(s)
    name = next(iter(weights))
    with pytest.raises(ValueError, match=f"query weights .*{name}=.*overflow the scores"):
        s.query_scored("Alice tea", **weights)
    assert _snapshot(s) == before  # nothing bumped
    got = s.query_scored("Alice tea", alpha_ppr=1e307, bump=False)  # large, but finite sums: ranked
    assert [m.memory_id for m, _ in got] == ["ep_000001", "ep_000002", "ep_000003"]
    assert all(math.isfinite(sc) for _, sc in got)


@pytest.mark.parametrize("confidence", [0.0, 0.3, 0.79])
def test_the_tier_rule_is_unchanged_for_an_inference(confidence):
    """Applied to inferences only now, with the same arithmetic: an inference scores exactly
    s - (1 - c) * |s|, where s is the score of the same memory as a fact."""
    fact, inference = _store(), _store()
    for s, tier, conf in ((fact, "fact", 1.0), (inference, "inference", confidence)):
        s.write_episode(1, "Alice likes tea", tier=tier, confidence=conf)
        s.write_episode(2, "Bob likes coffee")
        s.tick(40)
    for query in ("Alice tea", "Bob", "nothing here"):
        sf = dict((m.memory_id, sc) for m, sc in fact.query_scored(query, bump=False))
        si = dict((m.memory_id, sc) for m, sc in inference.query_scored(query, bump=False))
        expect = np.float64(sf["ep_000001"])
        assert si["ep_000001"] == float(expect - (1.0 - confidence) * abs(expect))
        assert si["ep_000002"] == sf["ep_000002"]


# --------------------------------------------------------------------------- 4. records
def test_a_record_has_seed_001s_embedding_read_only():
    s = _store()
    rec = s.write_episode(1, "Alice likes tea")
    emb = rec.embedding
    assert emb.dtype == np.float32 and np.array_equal(emb, s.embed("Alice likes tea"))
    emb[:] = 0  # a copy: the store's row is untouched
    assert np.array_equal(rec.embedding, s.embed("Alice likes tea"))
    with pytest.raises(AttributeError):
        rec.embedding = [0.0] * 64
    sem = s.write_semantic(2, "Alice drinks tea daily", [rec.memory_id])
    assert np.array_equal(sem.embedding, s.embed("Alice drinks tea daily"))
    assert copy.copy(rec).embedding is None  # detached
    s.forget(rec.memory_id)
    assert rec.embedding is None
    assert "embedding" not in rec.__dict__ and "embedding" not in EpisodicMemory.__dataclass_fields__


def test_seed_001s_positional_record_order_is_refused_not_misassigned():
    """Seed 001's order is (memory_id, step, content, cues, importance, embedding, links): here links
    took the sixth place and key the seventh, so the seed's call gave links=None, key=['ep_y']."""
    with pytest.raises(TypeError, match="positional argument"):
        EpisodicMemory("ep_x", 1, "text", ["text"], 0.5, None, ["ep_y"])
    with pytest.raises(TypeError, match="positional argument"):
        SemanticMemory("sem_x", "rule", ["ep_x"], 1, 0, ["cue"])
    # the seed's leading fields keep their places; the rest are named
    rec = EpisodicMemory("ep_x", 1, "text", ["text"], 0.5, links=["ep_y"], key="k")
    assert (rec.importance, rec.links, rec.key, rec.written_at) == (0.5, ["ep_y"], "k", 1)
    sem = SemanticMemory("sem_x", "rule", ["ep_x"], 1, 2, cues=["cue"])
    assert (sem.applications, sem.cues) == (2, ["cue"])


# --------------------------------------------------------------------------- 5. subject with a slash
@pytest.mark.parametrize("subject", ["alice", "alice/", "alice//", "Alice/"])
def test_a_subject_given_as_its_key_prefix_with_the_slash_is_the_same_subject(subject):
    """erase(subject="alice/") (the prefix as the keys are written) matched no key: it returned an
    empty report, and the record stayed."""
    s = _store()
    s.write_episode(1, "The code is 4417", key="alice/locker")
    s.write_episode(2, "Drinks coffee", key="user:42/pref/drink")
    s.write_episode(3, "The old code was 1234", key="alice/old")
    s.forget("ep_000003")  # a version that already left: its key's history still names it
    report = s.erase(subject=subject)
    assert report.removed_ids == ["ep_000001"] and report.gone == ["ep_000003"]
    assert report.target["subject"] == subject.rstrip("/")
    assert len(s) == 1 and s.erase(subject="user:42/").removed_ids == ["ep_000002"]


@pytest.mark.parametrize("subject", ["/", "//", " /"])
def test_a_subject_of_slashes_only_is_refused(subject):
    s = _filled()
    before = _snapshot(s)
    with pytest.raises(ValueError, match="erase: subject must name a subject"):
        s.erase(subject=subject)
    assert _snapshot(s) == before


def test_a_subject_with_the_slash_reaches_the_rolling_summary_too():
    """The summary matches turns by the report's subject: it gets the subject as the store matched it."""
    s = _store()
    rs = RollingSummary(s, "default", max_turns=2, keep_recent=1)
    rs.add_turn("The locker code is 4711.", step=0, key="zed/locker")
    for i, text in enumerate(["Gina rows on the river.", "Frank teaches pottery.", "Hugo plays the oboe."], 1):
        rs.add_turn(text, step=i)
    assert "4711" in rs.text
    s.forget(rs.folded[0].memory_id)  # the turn's memory left the store; the summary keeps its words
    s.erase(subject="zed/")
    assert "4711" not in rs.text and "Gina" in rs.text
