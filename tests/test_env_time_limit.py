"""gym.make(id, max_episode_steps=N): Gymnasium's TimeLimit cuts the episode from outside, where the env
cannot see it; the registered FinalMetrics wrapper puts the world's metrics into the last step's info
however the episode ends, and a cut below a fixed horizon warns once, naming horizon=N."""

from __future__ import annotations

import pickle
import warnings

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the ids)
from envs import MemoryEnv
from envs.wrappers import FinalMetrics, FlattenAction


def _play(env, seed=0, max_steps=2000):
    """Random actions (seeded) until the episode ends; returns the number of steps and the last info."""
    env.reset(seed=seed)
    env.action_space.seed(seed)
    for n in range(1, max_steps + 1):
        _, _, terminated, truncated, info = env.step(env.action_space.sample())
        if terminated or truncated:
            return n, info
    raise AssertionError("the episode did not end")


def test_time_limit_below_the_horizon_has_metrics_and_warns_once_naming_horizon():
    env = gym.make("MemGym/Erasure-Easy-v0", max_episode_steps=60)
    with pytest.warns(UserWarning, match=r"max_episode_steps=60 .* 100-event world .* clock stops at 0\.60; "
                                         r"gym\.make\(id, horizon=60\) plays a 60-event world"):
        n, info = _play(env)
    world = env.unwrapped.world
    assert n == 60 and not world.done  # the world went on: the limit cut it from outside
    assert info["metrics"] == world.metrics() and info["metrics"]["events"] == 60
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per env
        n, info = _play(env, seed=1)
    assert n == 60 and info["metrics"]["events"] == 60


def test_time_limit_below_the_shortest_horizon_names_the_minimum():
    env = gym.make("MemGym/Recall-Easy-v0", max_episode_steps=5)
    with pytest.warns(UserWarning, match=r"a horizon is at least 10: gym\.make\(id, horizon=10\)"):
        n, info = _play(env)
    assert n == 5 and info["metrics"]["events"] == 5


def test_endless_world_stays_endless_and_its_cut_has_metrics():
    env = gym.make("MemGym/Life-Endless-v0", max_episode_steps=300)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a time limit is the endless world's natural end: no warning
        n, info = _play(env, seed=3)
    u = env.unwrapped
    assert n == 300 and u.config.horizon is None and not u.world.done
    assert info["metrics"] == u.world.metrics()
    assert info["metrics"]["events"] == 300 and info["metrics"]["difficulty"] == "endless"


@pytest.mark.parametrize("kw", [{}, {"max_episode_steps": 100}, {"max_episode_steps": 500}])
def test_world_ended_episodes_pass_through_unchanged(kw):
    """Without a limit below the horizon the stack plays the bare env's episode, step for step, and
    the last info holds the env's own metrics (the world ended it)."""
    def trace(env):
        env.reset(seed=4)
        env.action_space.seed(4)
        out = []
        while True:
            obs, r, te, tr, info = env.step(env.action_space.sample())
            out.append(pickle.dumps((obs, r, te, tr, sorted(k for k in info))))
            if te or tr:
                return out, info["metrics"]

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        wrapped = trace(gym.make("MemGym/Update-Easy-v0", **kw))
    assert wrapped == trace(MemoryEnv("update-easy"))
    assert wrapped[1]["events"] == 100


def test_registered_ids_carry_final_metrics_and_the_spec_rebuilds_it():
    env = gym.make("MemGym/Life-Easy-v0", max_episode_steps=30)
    assert isinstance(env, FinalMetrics) and isinstance(env.env, gym.wrappers.TimeLimit)
    remade = gym.make(env.spec)
    assert isinstance(remade, FinalMetrics) and remade.env._max_episode_steps == 30
    assert not isinstance(remade.env.env, FinalMetrics)  # (once, not once per rebuild)
    flat = FlattenAction(env)
    assert [s.name for s in flat.spec.additional_wrappers] == ["FinalMetrics", "FlattenAction"]
    rebuilt = gym.make(flat.spec)
    assert isinstance(rebuilt, FlattenAction) and isinstance(rebuilt.env, FinalMetrics)


def test_final_metrics_over_a_time_limit_of_your_own():
    env = FinalMetrics(gym.wrappers.TimeLimit(MemoryEnv("noise-easy"), 40))
    with pytest.warns(UserWarning, match="horizon=40"):
        n, info = _play(env)
    assert n == 40 and info["metrics"]["events"] == 40
    bare = gym.wrappers.TimeLimit(MemoryEnv("noise-easy"), 40)  # (without it: what the audit saw)
    n, info = _play(bare)
    assert n == 40 and "metrics" not in info


def test_final_metrics_needs_a_memory_env():
    with pytest.raises(TypeError, match="expected a MemoryEnv underneath, got CartPoleEnv"):
        FinalMetrics(gym.make("CartPole-v1"))


def test_time_limited_env_pickles_mid_episode_and_ends_alike():
    env = gym.make("MemGym/Life-Endless-v0", max_episode_steps=50)
    env.reset(seed=2)
    env.action_space.seed(2)
    for _ in range(20):
        env.step(env.action_space.sample())
    twin = pickle.loads(pickle.dumps(env))
    env.action_space.seed(9)
    twin.action_space.seed(9)
    for _ in range(30):
        a = env.action_space.sample()
        out, tout = env.step(a), twin.step(a)
    assert out[3] and tout[3] and out[4]["metrics"] == tout[4]["metrics"]
    assert out[4]["metrics"]["events"] == 50


def test_set_state_under_a_time_limit_ends_where_the_limit_says_with_metrics():
    """The TimeLimit counts its own steps (set_state on the unwrapped env does not reset it): the cut
    comes by that count, and its metrics are the restored world's."""
    env = gym.make("MemGym/Life-Endless-v0", max_episode_steps=30)
    env.reset(seed=0)
    u = env.unwrapped
    state = u.get_state()
    for _ in range(10):
        env.step(np.array([1, 0]))
    u.set_state(state)  # back to step 0; the limit has counted 10
    truncated, n = False, 0
    while not truncated:
        _, _, _, truncated, info = env.step(np.array([1, 0]))
        n += 1
    assert n == 20
    assert info["metrics"] == u.world.metrics() and info["metrics"]["events"] == 20


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_vector_env_under_max_episode_steps_reports_metrics(mode):
    vec = gym.make_vec("MemGym/Life-Endless-v0", num_envs=2, vectorization_mode="sync", max_episode_steps=15,
                       vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode(mode)})
    vec.reset(seed=0)
    vec.action_space.seed(0)
    ends = []
    for _ in range(15):
        _, _, _, trunc, infos = vec.step(vec.action_space.sample())
        ends.append(trunc.tolist())
    assert ends == [[False, False]] * 14 + [[True, True]]
    got = infos["final_info"] if mode == "SameStep" else infos
    assert list(got["_metrics"]) == [True, True]
    assert got["metrics"]["events"].tolist() == [15, 15]  # (vector infos: a dict of per-env arrays)
    vec.close()


def test_sb3_make_vec_env_with_max_episode_steps_reports_metrics():
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.env_util import make_vec_env

    vec = make_vec_env("MemGym/Life-Endless-v0", n_envs=2, seed=0, env_kwargs={"max_episode_steps": 12})
    vec.reset()
    for _ in range(12):
        _, _, dones, infos = vec.step(np.array([[1, 0], [0, 0]]))
    assert dones.all()
    assert [i["metrics"]["events"] for i in infos] == [12, 12]
    assert all(i["TimeLimit.truncated"] for i in infos)
    vec.close()
