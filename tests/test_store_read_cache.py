"""The store's read path keeps every live row's ACT-R activation per (step, space version, decay):
the numbers it hands out must be those of a fresh computation after any change."""

import numpy as np

from world import CachedEmbedder, HashingEmbedder, MemoryStore


def _fresh(store: MemoryStore, ids: list[str]) -> np.ndarray:
    """Each memory's activation from its own ActRRecord snapshot (a one-row batch, no cache)."""
    records = store.actr
    return np.array([records[m].activation(store.current_step) for m in ids])


def test_cached_activations_equal_a_fresh_computation_after_every_change():
    rng = np.random.default_rng(7)
    store = MemoryStore(CachedEmbedder(HashingEmbedder(64)), forget_threshold=-50.0)
    names = ["ada", "bo", "cy", "dee", "eli"]
    things = ["car", "boat", "cat", "tea", "jazz"]
    step = 0
    checked = 0
    for _ in range(150):
        op = int(rng.integers(6))
        live = list(store._records)
        if op == 0 or not live:
            who, what = str(rng.choice(names)), str(rng.choice(things))
            store.write_episode(step, f"{who} likes {what} number {int(rng.integers(1000))}", cues=[who, what])
        elif op == 1:
            store.query(f"what does {rng.choice(names)} like", cues=[str(rng.choice(things))], top_k=2)
        elif op == 2:
            step += int(rng.integers(1, 4))
            store.tick(step)
        elif op == 3:
            store.forget(str(rng.choice(live)))
        elif op == 4:
            mid = str(rng.choice(live))
            if store.get(mid).active:
                store.supersede(mid, f"changed {int(rng.integers(1000))}", step)
        else:
            store.sweep_decayed()
        ids = list(store._records)
        if ids:
            first = store.activations(ids)
            assert first.tobytes() == _fresh(store, ids).tobytes()
            # a second read at the same step (served from the cache), in another order and as a subset
            rev = ids[::-1][: max(1, len(ids) // 2)]
            assert store.activations(rev).tobytes() == _fresh(store, rev).tobytes()
            checked += 1
    assert checked > 100


def test_a_query_bump_changes_the_activations_read_at_the_same_step():
    store = MemoryStore(CachedEmbedder(HashingEmbedder(64)))
    a = store.write_episode(0, "ada likes tea", cues=["ada", "tea"])
    b = store.write_episode(0, "bo likes jazz", cues=["bo", "jazz"])
    store.tick(5)
    before = store.activations([a.memory_id, b.memory_id])
    got = store.query("ada tea", cues=["ada"], top_k=1)
    assert [r.memory_id for r in got] == [a.memory_id]
    after = store.activations([a.memory_id, b.memory_id])
    assert after[0] > before[0] and after[1] == before[1]
    assert after.tobytes() == _fresh(store, [a.memory_id, b.memory_id]).tobytes()


def test_activations_read_across_ticks_equal_a_fresh_computation():
    """The step-independent part of the batch is kept across steps that only move the clock; rows
    with more presentations than k (the tail term) and the read path's whole-view read included."""
    rng = np.random.default_rng(5)
    for decay in (0.5, 0.35):
        store = MemoryStore(CachedEmbedder(HashingEmbedder(64)), forget_threshold=-50.0, decay=decay, actr_k=2)
        for i in range(12):
            store.write_episode(i, f"fact {i} about topic{i % 3}", cues=[f"topic{i % 3}", f"f{i}"])
        step = 12
        checked = 0
        for _ in range(120):
            if rng.random() < 0.3:  # bumps: several memories pass k presentations
                store.query("topic", cues=[f"topic{int(rng.integers(3))}"], top_k=3)
            step += int(rng.integers(0, 3))
            store.tick(step)
            space = store._space(store.default_namespace)
            ids, live = space.view()
            whole = store._activation_rows(space, live)
            assert not whole.flags.writeable  # (handed to every reader of the step)
            assert whole.tobytes() == _fresh(store, ids).tobytes()
            part = ids[::3]
            assert store.activations(part).tobytes() == _fresh(store, part).tobytes()
            checked += 1
        assert max(r.n for r in store.actr.values()) > 2 and checked == 120
