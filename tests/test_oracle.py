"""The privileged oracle: the benchmark's normaliser must be the best policy we know."""

from world import Op, World, WorldConfig
from world.oracle import Oracle


def _play(world, oracle):
    """Play the oracle to the end; yield (event index, outcome) of every apply."""
    while not world.done:
        out = world.apply(*oracle.act(world))
        yield world.event.index, out
        world.advance()


def test_oracle_reflects_only_clusters_whose_majority_is_the_answer():
    """Consolidation-Medium seed 2: at event 153 the store was full, the habit cluster became {ravioli,
    shakshuka} (a tie, so the rule said ravioli) and the free-slot REFLECT consolidated it anyway: the
    "usually" question at 233 (gold shakshuka) was answered wrong."""
    w = World(WorldConfig.preset("consolidation", "medium"), seed=2)
    rules = []
    for _i, out in _play(w, Oracle()):
        if out.op is Op.REFLECT and out.valid:
            p = w.privileged.payload(out.memory_id)
            rules.append((p["object"], w.privileged.script[p["last_use"]].payload["gold"]))
    assert rules and all(obj == gold for obj, gold in rules), rules
