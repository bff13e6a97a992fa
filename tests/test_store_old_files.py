"""Store files written by the previous release (file format 1, before the stricter input checks of
session 9) still load and stay usable: what that release accepted and saved is migrated on load
(docs/store.md, "Files of the previous release").

Each old-style file is built here as that release wrote it: a store is saved by this code with its
exported state changed to what the old code kept (a tuple source saved as a list, an int evidence
id, a blank key, cues holding "::"), with valid checksums."""

from __future__ import annotations

from pathlib import Path

import pytest

from world import persistence
from world.memory import MemoryStore
from world.persistence import load_store
from world.summary import summaries


def _old_file(store: MemoryStore, path: Path, patch) -> Path:
    """``store`` saved with its state changed by ``patch(state)``, as the previous release wrote it."""
    state = store._export_state()
    patch(state)
    persistence._write_sqlite(path, persistence._rows(state))
    return path


def _records(state: dict) -> dict[str, dict]:
    return {r["memory_id"]: r for r in state["records"]}


# --------------------------------------------------------------------------- 1. summary source
def test_a_summary_saved_with_a_tuple_source_loads_with_it_joined_by_slashes(tmp_path):
    """summaries(store, source=("bot", "v1")) was accepted and saved as a list; RollingSummary's new
    source check then ran on load: StoreFileError "inconsistent store contents" (review of session 9)."""
    s = MemoryStore()
    sm = summaries(s, source="bot", max_turns=1, keep_recent=1)
    for i, text in enumerate(["Alice met Bob in Rome.", "Bob went to Paris.", "Carol flew to Oslo."]):
        sm.add_turn(text, step=i)
    assert sm.memory is not None

    def patch(state):
        state["extra"]["summaries"]["default"]["source"] = ["bot", "v1"]
        for rec in state["records"]:
            if rec["source"] == "bot":
                rec["source"] = ["bot", "v1"]

    loaded = load_store(_old_file(s, tmp_path / "old.db", patch))
    summary = summaries(loaded)
    assert summary.source == "bot/v1" and summary.text == sm.text
    summary.add_turn("Dan sailed to Nice.", step=5)  # folds: a new version, written with the source
    assert summary.memory.source == "bot/v1" and summary.memory.memory_id != sm.memory.memory_id
    again = load_store(loaded.save(tmp_path / "new.db"))
    assert summaries(again).source == "bot/v1"


# --------------------------------------------------------------------------- 2. record fields
def _old_records_file(tmp_path: Path) -> Path:
    """The previous release's r2 store: a tuple source (saved as a list), a blank key, an int evidence
    id and an int derived_from id."""
    s = MemoryStore()
    s.write_episode(1, "Erin sails a yawl.", source="chat")
    s.write_episode(2, "Bob's kayak is red.", key="bob/kayak")
    s.write_episode(3, "Carol likes jazz.", evidence=["ep_000009"])
    s.write_semantic(4, "Carol enjoys music.", ["ep_000003"])

    def patch(state):
        recs = _records(state)
        recs["ep_000001"]["source"] = ["chat", "tg"]
        recs["ep_000002"]["key"] = " "
        recs["ep_000003"]["evidence"] = [5]
        recs["sem_000001"]["derived_from"] = ["ep_000003", 7]
    return _old_file(s, tmp_path / "old.db", patch)


def test_old_record_fields_are_migrated_on_load(tmp_path):
    s = load_store(_old_records_file(tmp_path))
    assert s.get("ep_000001").source == "chat/tg"
    assert s.get("ep_000003").evidence == ["5"]
    assert s.get("sem_000001").derived_from == ["ep_000003", "7"]
    assert s.get("ep_000002").key == " " and [r.memory_id for r in s.versions(" ")] == ["ep_000002"]


def test_old_records_can_be_superseded_inheriting_their_fields(tmp_path):
    """supersede re-checked the inherited key, source and evidence with the write's checks: each old
    record was refused, naming a field the caller never passed (review of session 9)."""
    s = load_store(_old_records_file(tmp_path))
    new = s.supersede("ep_000001", "Erin sails a ketch.", 5)
    assert new.source == "chat/tg" and s.get("ep_000001").superseded_at == 5
    new = s.supersede("ep_000003", "Carol likes rock.", 5)
    assert new.evidence == ["5"] and new.key == "chain:ep_000003"
    new = s.supersede("sem_000001", "Carol enjoys rock music.", 5)
    assert new.derived_from == ["ep_000003", "7"]
    new = s.supersede("ep_000002", "Bob's kayak is blue.", 5)
    assert new.key == " " and [r.memory_id for r in s.versions(" ")] == ["ep_000002", new.memory_id]
    # what the caller passes is still checked, and named
    with pytest.raises(ValueError, match=r"^source must be a string or None"):
        s.supersede(new.memory_id, "Bob's kayak is green.", 6, source=("chat", "tg"))


def test_an_old_blank_key_chain_stays_erasable_by_key(tmp_path):
    """erase(key=" ") was refused (blank), and so the chain an old file holds could not be erased by key."""
    s = load_store(_old_records_file(tmp_path))
    s.supersede("ep_000002", "Bob's kayak is blue.", 5)
    s.write_episode(6, "Bob's kayak is green.", key=" ")  # a new version of the existing chain
    assert len(s.versions(" ")) == 3
    for blank in ("  ", "\t"):  # blank keys without a chain are still refused, by writes and erase
        with pytest.raises(ValueError, match=r"^erase: key must be a non-empty string"):
            s.erase(key=blank)
    report = s.erase(key=" ")
    assert sorted(report.episodic) == ["ep_000002", "ep_000004", "ep_000005"]
    assert s.versions(" ") == [] and not any("kayak" in r.content for r in s.episodic.values())
    with pytest.raises(ValueError, match=r"^key must be a non-empty string"):
        s.write_episode(7, "Bob's kayak is grey.", key=" ")  # the chain is gone: a blank key is refused again


def test_an_old_store_saves_and_loads_again_exactly(tmp_path):
    """(The review saw an old store with evidence=[5] fail its first re-save until add_evidence ran.)"""
    s = load_store(_old_records_file(tmp_path))
    state = s._export_state()
    assert _records(state)["ep_000003"]["evidence"] == ["5"]
    again = load_store(s.save(tmp_path / "again.db"))
    loaded = again._export_state()
    assert loaded.pop("embeddings").tobytes() == state.pop("embeddings").tobytes()
    assert loaded == state


# --------------------------------------------------------------------------- 3. cues holding "::"
def _old_cues_file(tmp_path: Path) -> Path:
    """The previous release's r3 store: an extracted cue "std::vector" (extract_cues kept colon runs), a
    caller's cue "alice::tea" in the default namespace next to namespace alice's cue "tea", and caller
    cues beginning with ':'."""
    s = MemoryStore()
    s.write_episode(1, "We use std::vector for the buffer.")
    s.write_episode(2, "Tea with Alice on Monday.", cues=["alice:tea", "Alice"])
    s.namespace("alice").write_episode(3, "The tea is green.", cues=["tea"])
    s.write_episode(4, "Dan moved to Oslo.", cues=["oslo", "lead"])

    def patch(state):
        recs = _records(state)
        assert recs["ep_000001"]["cues"] == ["use", "std:vector", "buffer"]  # (this code's extraction)
        recs["ep_000001"]["cues"] = ["use", "std::vector", "buffer"]
        recs["ep_000002"]["cues"] = ["alice::tea", "Alice"]
        recs["ep_000004"]["cues"] = ["oslo", "::", ":lead", "::oslo"]
    return _old_file(s, tmp_path / "old.db", patch)


def test_old_cues_holding_double_colons_are_rewritten_by_the_new_rule(tmp_path):
    """extract_cues reads "std::vector" as "std:vector" now, so a query could no longer reach the old
    cue node (PPR off), cues=["std::vector"] is refused, and store.graph merged the default namespace's
    cue "alice::tea" with namespace alice's "tea" (review of session 9)."""
    s = load_store(_old_cues_file(tmp_path))
    assert s.get("ep_000001").cues == ["use", "std:vector", "buffer"]
    assert s.get("ep_000002").cues == ["alice:tea", "Alice"]
    assert s.get("ep_000004").cues == ["oslo", "lead"]  # a cue left empty goes, a repeated one too
    assert s.query_scored("std::vector", top_k=1, bump=False)[0][0].memory_id == "ep_000001"
    assert s.last_ppr_method is not None  # the query's cue "std:vector" is a node: PPR ran
    assert [r.memory_id for r in s.query("what do we use", cues=["std:vector"], top_k=1, bump=False)] == ["ep_000001"]
    assert s.last_ppr_method is not None
    g = s.graph
    assert set(g.predecessors("cue::alice:tea")) == {"ep_000002"}
    assert set(g.predecessors("cue::alice::tea")) == {"ep_000003"}  # namespace alice's "tea" alone
    assert "cue::std::vector" not in g and "cue::" not in g
    state = s._export_state()
    again = load_store(s.save(tmp_path / "again.db"))._export_state()
    assert again.pop("embeddings").tobytes() == state.pop("embeddings").tobytes() and again == state


# --------------------------------------------------------------------------- dedup value_aware
@pytest.mark.parametrize("saved, kept", [("no", True), (None, False), (0, False)])
def test_a_store_saved_with_a_non_bool_value_aware_loads_with_its_truth(tmp_path, saved, kept):
    """DedupConfig took any value_aware (and used its truth); it now asks for a bool, so a file that
    holds "no" or None must still load, deduplicating as it did."""
    s = MemoryStore()
    s.write_episode(0, "Alice's locker code is 4711.")

    def patch(state):
        state["meta"]["config"]["dedup"]["value_aware"] = saved

    loaded = load_store(_old_file(s, tmp_path / "old.db", patch))
    assert loaded.dedup_config.value_aware is kept
    loaded.write_episode(1, "Alice's locker code is 5822.")  # a value change: a duplicate unless value-aware
    assert len(loaded) == (2 if kept else 1)
