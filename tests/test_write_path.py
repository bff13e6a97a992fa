"""The store's write path: its shortcuts give exactly what the plain computations they replace give."""

from __future__ import annotations

import random

import numpy as np


def test_dedup_window_in_write_order_gives_the_window_pass_candidates():
    """While a namespace's dedup window still holds every write in order (``window_in_order``, shorter
    than its maxlen), _find_duplicate reads its candidates from the view: after the filter by
    ``active`` they are exactly the window's distinct slots newest first, with forgets recycling slots
    and supersessions clearing ``active``; and every dedup answer is the one of the window pass."""
    from world import MemoryStore
    from world.dedup import signature

    rng = random.Random(3)
    words = "tea coffee Paris Rome car city job red blue Alice Bob Carol drinks likes".split()
    checks = 0
    for window in (3, 8, 40, 512):
        store = MemoryStore(embed_window=window)
        for step in range(120):
            ids = list(store._records)
            r = rng.random()
            text = " ".join(rng.choice(words) for _ in range(rng.randint(2, 6))) + "."
            space = store._space(store.default_namespace, create=True)
            if r < 0.6 or not ids:
                sig, vec = signature(text), store.embed(text)
                got = store._find_duplicate(space, sig, vec, False)
                space.window_in_order = False  # the pass over the window
                try:
                    assert got == store._find_duplicate(space, sig, vec, False), text
                finally:
                    space.window_in_order = True
                store.write_episode(step, text)
            elif r < 0.8:
                store.forget(rng.choice(ids))
            elif store._records[m := rng.choice(ids)].active:
                store.supersede(m, text, step)
            recent = space.recent_slots
            if len(recent) < recent.maxlen:
                assert space.window_in_order
                a = np.fromiter(dict.fromkeys(reversed(recent)), dtype=np.int64)
                b = space.view()[1][::-1]
                assert a[space.active[a]].tolist() == b[space.active[b]].tolist()
                checks += 1
    assert checks > 100
