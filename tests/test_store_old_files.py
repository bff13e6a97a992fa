"""Store files written by the previous release (file format 1, before the stricter input checks of
session 9) still load and stay usable: what that release accepted and saved is migrated on load
(docs/store.md, "Files of the previous release").

Each old-style file is built here as that release wrote it: a store is saved by this code with its
exported state changed to what the old code kept (a tuple source saved as a list, an int evidence
id, a blank key, cues holding "::"), with valid checksums."""

from __future__ import annotations

from pathlib import Path

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
