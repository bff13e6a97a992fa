"""The script generator's buffered draws (world.entities.BlockDraws) are the plain generator's draws.

BlockDraws hands out ``random()`` floats from blocks of 64 and settles the generator before any other
draw; the reference hashes of the speed work cover the generator through whole scripts, these tests
pin the mechanism itself: mixed draws across block boundaries, the state it leaves, and a failure in
the middle of generation.
"""

import numpy as np
import pytest

from world import WorldConfig
from world.entities import BlockDraws, tidy
from world.families import ScriptGenerator


def _ops(seed: int, n: int) -> list[tuple]:
    """A random programme of draws: runs of scalar floats (some longer than a block) between the other
    draws a script makes."""
    plan = np.random.default_rng(seed)
    ops = []
    for _ in range(n):
        kind = int(plan.integers(5))
        if kind <= 1:
            ops.append(("floats", int(plan.choice([1, 2, 5, 63, 64, 65, 130]))))
        elif kind == 2:
            ops.append(("integers", int(plan.integers(2, 1000))))
        elif kind == 3:
            ops.append(("choice", int(plan.integers(2, 40))))
        else:
            ops.append(("permutation", int(plan.integers(1, 12))))
    return ops


def _run(rng, ops) -> list:
    out = []
    for kind, arg in ops:
        if kind == "floats":
            out.extend(rng.random() for _ in range(arg))
        elif kind == "integers":
            out.append(int(rng.integers(0, arg)))
        elif kind == "choice":
            out.append(rng.choice(arg, 2, replace=False).tolist())
        else:
            out.append(rng.permutation(arg).tolist())
    return out


@pytest.mark.parametrize("seed", range(8))
def test_mixed_draws_match_the_plain_generator_and_leave_its_state(seed):
    ops = _ops(seed, 40)
    plain = np.random.default_rng(1000 + seed)
    gen = np.random.default_rng(1000 + seed)
    draws = BlockDraws(gen)
    assert _run(draws, ops) == _run(plain, ops)
    draws.settle()
    assert gen.bit_generator.state == plain.bit_generator.state
    assert gen.random() == plain.random()  # and the next draw after it agrees


@pytest.mark.parametrize("n", [0, 1, 63, 64, 65, 128])
def test_settle_at_and_around_block_boundaries(n):
    plain, gen = np.random.default_rng(5), np.random.default_rng(5)
    draws = BlockDraws(gen)
    got = [draws.random() for _ in range(n)]
    assert got == [plain.random() for _ in range(n)]
    draws.settle()
    draws.settle()  # (a second settle changes nothing)
    assert gen.bit_generator.state == plain.bit_generator.state


def test_a_failure_mid_generation_leaves_the_generator_where_the_plain_draws_did():
    class Boom(RuntimeError):
        pass

    cfg = WorldConfig.preset("life", "easy")
    gen = ScriptGenerator(cfg, np.random.default_rng(3))
    rng = gen.rng
    plain = np.random.default_rng(0)
    rng.bit_generator.state = plain.bit_generator.state

    def work():
        for _ in range(70):
            gen.rng.random()
        gen.rng.integers(0, 10)
        for _ in range(3):
            gen.rng.random()
        raise Boom

    with pytest.raises(Boom):
        gen._buffered(work)
    for _ in range(70):
        plain.random()
    plain.integers(0, 10)
    for _ in range(3):
        plain.random()
    assert gen.rng is rng and gen.cast.rng is rng  # the plain generator is back in place
    assert rng.bit_generator.state == plain.bit_generator.state


def test_generated_scripts_leave_the_generator_as_unbuffered_generation_does(monkeypatch):
    """The same script and the same generator state with BlockDraws switched off (work run directly)."""
    cfg = WorldConfig.preset("life", "medium")

    def unbuffered(self, work, *args):
        work(*args)

    a_rng = np.random.default_rng(21)
    a = ScriptGenerator(cfg, a_rng)
    monkeypatch.setattr(ScriptGenerator, "_buffered", unbuffered)
    b_rng = np.random.default_rng(21)
    b = ScriptGenerator(cfg, b_rng)
    assert [(e.index, e.step, e.kind, e.text, e.payload) for e in a.events] == \
        [(e.index, e.step, e.kind, e.text, e.payload) for e in b.events]
    assert a_rng.bit_generator.state == b_rng.bit_generator.state


def test_block_draws_refuse_private_attributes_and_delegate_the_rest():
    gen = np.random.default_rng(1)
    draws = BlockDraws(gen)
    draws.random()
    with pytest.raises(AttributeError):
        draws._private  # noqa: B018
    assert draws.bit_generator is gen.bit_generator  # (settled first, then the generator's own)


@pytest.mark.parametrize("text,expected", [
    ("a a apple", "an a apple"),
    ("He drives a Opel.", "He drives an Opel."),
    ("A odd week, a unicorn and a hat.", "An odd week, a unicorn and a hat."),
    ("Lena S..", "Lena S."),
    ("nothing to change", "nothing to change"),
])
def test_tidy_is_the_same_on_a_first_and_a_memoised_call(text, expected):
    assert tidy(text) == expected
    assert tidy(text) == expected
