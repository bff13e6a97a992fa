"""Every registered id passes Gymnasium's and Stable-Baselines3's checkers with no warning; the envs
run under SyncVectorEnv, SB3's DummyVecEnv / SubprocVecEnv, and MaskablePPO trains on them."""

from __future__ import annotations

import functools
import tempfile
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import envs

IDS = envs.registered_ids()


def _small(env_id: str) -> dict:
    # short horizons keep the checks fast; endless worlds have no horizon to shorten
    return {} if env_id.endswith("Endless-v0") else {"horizon": 20}


@pytest.mark.parametrize("env_id", IDS)
def test_gymnasium_check_env_no_warnings(env_id):
    from gymnasium.utils.env_checker import check_env

    env = gym.make(env_id, **_small(env_id))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped)  # also makes the env once per render mode through its spec
    env.close()


@pytest.mark.parametrize("env_id", IDS)
def test_sb3_check_env_no_warnings(env_id):
    from stable_baselines3.common.env_checker import check_env

    env = gym.make(env_id, **_small(env_id)).unwrapped
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env, warn=True)


def test_sync_vector_env_autoresets():
    vec = gym.vector.SyncVectorEnv([lambda: gym.make("MemGym/Recall-Easy-v0", horizon=10) for _ in range(3)])
    obs, _ = vec.reset(seed=0)
    assert obs["candidates"].shape[0] == 3
    vec.action_space.seed(0)
    truncations = 0
    for _ in range(25):
        obs, rew, term, trunc, info = vec.step(vec.action_space.sample())
        assert vec.observation_space.contains(obs)
        assert np.all(np.isfinite(rew))
        truncations += int(trunc.sum())
    assert truncations == 6  # 3 envs x 2 episodes of 10 steps (plus the autoreset steps)
    vec.close()


def _make(env_id: str, horizon: int):
    # a module-level factory: SubprocVecEnv pickles it; "envs:" imports the package in the worker
    return gym.make("envs:" + env_id, horizon=horizon)


@pytest.mark.parametrize("kind", ["dummy", "subproc"])
def test_sb3_vec_envs_and_masks(kind):
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    fns = [functools.partial(_make, "MemGym/Life-Easy-v0", 15) for _ in range(2)]
    vec = DummyVecEnv(fns) if kind == "dummy" else SubprocVecEnv(fns, start_method="fork")
    try:
        vec.seed(0)
        obs = vec.reset()
        assert obs["event"].shape[0] == 2
        rng = np.random.default_rng(0)
        dones = 0
        for _ in range(20):
            masks = np.stack(vec.env_method("action_masks"))
            assert masks.shape == (2, 7 + 8) and masks[:, 0].all()
            acts = np.array([[rng.choice(np.flatnonzero(m[:7])), rng.choice(np.flatnonzero(m[7:]))] for m in masks])
            obs, rew, done, infos = vec.step(acts)
            assert np.all(np.isfinite(rew))
            for d, info in zip(done, infos):
                if d:
                    dones += 1
                    assert "terminal_observation" in info and "metrics" in info
        assert dones == 2
    finally:
        vec.close()


def test_sb3_obs_wrappers_take_the_observation_as_is():
    """VecNormalize (every key by default) and VecFrameStack accept Box and Dict-of-Box only: the
    candidate mask is a 0/1 Box (MultiBinary made both raise)."""
    from stable_baselines3.common.vec_env import DummyVecEnv, VecFrameStack, VecNormalize

    fns = [functools.partial(_make, "MemGym/Life-Easy-v0", 15)]
    stacked = VecFrameStack(DummyVecEnv(fns), n_stack=3)
    obs = stacked.reset()
    k = obs["candidate_mask"].shape[1] // 3
    assert obs["candidate_mask"].shape == (1, 3 * k) and obs["event"].shape[1] % 3 == 0
    obs, *_ = stacked.step(np.array([[1, 0]]))
    assert set(np.unique(obs["candidate_mask"])) <= {0, 1}
    norm = VecNormalize(DummyVecEnv(fns))
    norm.reset()
    obs, *_ = norm.step(np.array([[1, 0]]))
    assert all(np.all(np.isfinite(v)) for v in obs.values())
    stacked.close()
    norm.close()


def test_maskable_ppo_learns_a_few_hundred_steps():
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.utils import get_action_masks

    env = gym.make("MemGym/Recall-Easy-v0", horizon=40)
    model = MaskablePPO("MultiInputPolicy", env, n_steps=128, batch_size=64, n_epochs=2, seed=0, device="cpu",
                        policy_kwargs={"net_arch": [32]})
    before = set(Path(tempfile.gettempdir()).glob("SB3-*"))
    model.learn(total_timesteps=256)
    assert model.num_timesteps >= 256
    # (tests/conftest.py sends SB3's default log folder to pytest's own temp folder)
    assert set(Path(tempfile.gettempdir()).glob("SB3-*")) <= before
    obs, _ = env.reset(seed=1)
    for _ in range(40):
        masks = get_action_masks(env)
        action, _ = model.predict(obs, action_masks=masks, deterministic=True)
        assert masks[int(action[0])] and masks[7 + int(action[1])]
        obs, _, _, truncated, _ = env.step(action)
        if truncated:
            break
