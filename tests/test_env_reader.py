"""MemoryEnv(reader=...): a custom world Reader (an LLM reader, say) grades every episode the env plays,
through resets, preset switches, snapshots of another config and pickles; a bad one is refused by name."""

from __future__ import annotations

import copy
import pickle
import threading

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the ids)
from envs import MemoryEnv
from world import Op
from world.grading import DefaultReader


class CountingReader(DefaultReader):
    """DefaultReader's answers, counting the questions it was asked (stands for an LLM reader)."""

    def __init__(self) -> None:
        self.calls = 0

    def answer(self, question, retrieved, ctx):
        self.calls += 1
        return super().answer(question, retrieved, ctx)


class LockedReader(DefaultReader):
    """A reader holding something that does not pickle (a client's lock)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()


class LambdaReader(DefaultReader):
    """A reader that deep-copies but does not pickle (a lambda)."""

    def __init__(self) -> None:
        self.normalise = lambda text: text.strip()


def _values(out):
    """A step's output as comparable plain values (arrays as bytes; pickle's bytes would also record
    which equal strings are one object, which a pickled copy need not keep)."""
    def conv(v):
        if isinstance(v, dict):
            return {k: conv(v[k]) for k in sorted(v)}
        if isinstance(v, (list, tuple)):
            return [conv(x) for x in v]
        if isinstance(v, np.ndarray):
            return (v.dtype.str, v.shape, v.tobytes())
        return v
    return conv(out)


def _query_questions(env, steps=60):
    """QUERY on every question event, NOOP otherwise, for up to ``steps`` steps."""
    u = env.unwrapped
    for _ in range(steps):
        if u.world.done:
            break
        op = Op.QUERY if u.world.event.kind == "question" else Op.NOOP
        env.step(np.array([op, 0]))


def test_reader_argument_grades_every_world_the_env_builds():
    reader = CountingReader()
    env = gym.make("MemGym/Life-Easy-v0", reader=reader)
    u = env.unwrapped
    assert u.world.reader is reader
    env.reset(seed=0)
    _query_questions(env)
    assert u.world.reader is reader and reader.calls > 0
    calls = reader.calls
    env.reset(seed=0, options={"family": "recall"})  # a new world for the switch: the same reader
    assert u.world.reader is reader
    _query_questions(env)
    assert reader.calls > calls
    other = gym.make("MemGym/Update-Easy-v0")
    other.reset(seed=1)
    u.set_state(other.unwrapped.get_state())  # a snapshot of another config: a new world again
    assert u.config.family == "update" and u.world.reader is reader
    calls = reader.calls
    _query_questions(env)
    assert reader.calls > calls


def test_a_reader_set_on_the_world_survives_switches_and_restores():
    """The audit's workaround (set env.unwrapped.world.reader) used to fall back to DefaultReader on the
    first preset switch or cross-config restore, grading the rest of the run with another reader."""
    env = gym.make("MemGym/Life-Easy-v0")
    u = env.unwrapped
    reader = CountingReader()
    u.world.reader = reader
    env.reset(seed=0, options={"family": "recall"})
    assert u.world.reader is reader
    other = gym.make("MemGym/Update-Easy-v0")
    other.reset(seed=1)
    u.set_state(other.unwrapped.get_state())
    assert u.world.reader is reader


def test_same_episode_with_a_reader_that_answers_like_the_default():
    """The reader only grades: DefaultReader's answers through a custom reader give the same episode."""
    def play(**kw):
        env = gym.make("MemGym/Life-Easy-v0", horizon=40, **kw)
        env.reset(seed=3)
        env.action_space.seed(3)
        out = []
        for _ in range(40):
            obs, r, te, tr, info = env.step(env.action_space.sample())
            out.append(_values((obs, r, te, tr, info)))
        return out, info["metrics"]

    assert play() == play(reader=CountingReader())


@pytest.mark.parametrize("bad, what", [(DefaultReader, "the class DefaultReader (pass an instance)"),
                                       (object(), "an instance of object, which has no callable answer"),
                                       ("default", "an instance of str, which has no callable answer")])
def test_bad_reader_is_a_type_error_naming_it(bad, what):
    with pytest.raises(TypeError, match=r"reader must follow the Reader protocol") as exc:
        gym.make("MemGym/Life-Easy-v0", reader=bad)
    assert what in str(exc.value)
    with pytest.raises(TypeError, match="reader must follow"):
        MemoryEnv("recall-easy", reader=bad)


def test_env_with_a_custom_reader_pickles_and_continues_identically():
    env = MemoryEnv("life-easy", reader=CountingReader(), horizon=30)
    env.reset(seed=5)
    env.action_space.seed(5)
    for _ in range(10):
        env.step(env.action_space.sample())
    twin = pickle.loads(pickle.dumps(env))
    assert type(twin.world.reader) is CountingReader and twin.world.reader is not env.world.reader
    env.action_space.seed(7)
    twin.action_space.seed(7)
    for _ in range(20):
        a = env.action_space.sample()
        assert twin.action_space.sample().tolist() == a.tolist()
        assert _values(env.step(a)) == _values(twin.step(a))
    assert env.world.reader.calls == twin.world.reader.calls


def test_a_reader_that_does_not_pickle_fails_naming_the_reader_but_copies_and_restores():
    env = MemoryEnv("life-easy", reader=LockedReader(), horizon=20)
    env.reset(seed=0)
    env.step(np.array([Op.WRITE, 0]))
    with pytest.raises(TypeError, match=r"its reader, a LockedReader, does not pickle .*__getstate__"):
        pickle.dumps(env)
    with pytest.raises(TypeError, match="its reader, a LockedReader"):
        pickle.dumps(env.world)
    # snapshots leave the reader out, and set_state copies the world without pickling it
    state = env.get_state()
    pickle.dumps(state)
    env.step(np.array([Op.WRITE, 0]))
    env.set_state(state)
    assert type(env.world.reader) is LockedReader
    shallow = copy.copy(env.world)
    assert shallow.reader is env.world.reader
    lam = MemoryEnv("life-easy", reader=LambdaReader(), horizon=20)
    lam.reset(seed=0)
    with pytest.raises(TypeError, match="its reader, a LambdaReader, does not pickle"):
        pickle.dumps(lam)
    deep = copy.deepcopy(lam.world)  # a deep copy needs no pickle: it copies the reader
    assert type(deep.reader) is LambdaReader and deep.reader is not lam.world.reader
