"""FlattenAction, MaskInObservation and TextInterface."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from gymnasium import spaces

from envs import MemoryEnv
from envs.wrappers import FlattenAction, MaskInObservation, TextInterface
from world import Op
from world.sim import NO_CLUSTER


def _until_statement(env, step_noop):
    for _ in range(200):
        if env.unwrapped.world.event.kind == "statement":
            return
        step_noop()
    raise AssertionError("no statement event")


# ---------------------------------------------------------------------- FlattenAction
def test_flatten_action_space_and_decoding():
    env = FlattenAction(MemoryEnv("recall-easy"))
    k = env.unwrapped.K
    assert env.action_space == spaces.Discrete(7 * k)
    env.reset(seed=0)
    _until_statement(env, lambda: env.step(0))
    _, _, _, _, info = env.step(int(Op.WRITE) * k)
    assert info["memory_id"] is not None and info["outcome_op"] == "WRITE"
    assert info["action_mask"].shape == (7 * k,)
    with pytest.raises(ValueError, match=r"0\.\.55"):
        env.step(7 * k)


def test_flatten_action_mask_is_exact_for_pairs():
    """A masked random policy over (op, slot) pairs never makes an invalid action, but for a REFLECT
    whose target has no cluster (hidden, so not in the mask: refused after the fact)."""
    env = FlattenAction(MemoryEnv("life-easy"))
    rng = np.random.default_rng(0)
    env.reset(seed=3)
    ops_seen = set()
    for _ in range(200):
        mask = env.action_masks()
        assert mask[0]  # NOOP on slot 0
        a = int(rng.choice(np.flatnonzero(mask)))
        _, _, _, truncated, info = env.step(a)
        if info["invalid_action"]:
            assert (a // env.K, info["invalid_reason"]) == (Op.REFLECT, NO_CLUSTER)
        ops_seen.add(info["outcome_op"])
        if truncated:
            env.reset()
    assert {"WRITE", "FORGET", "LINK"} <= ops_seen


# ---------------------------------------------------------------------- MaskInObservation
@pytest.mark.parametrize("layout", ["rllib", "flat"])
def test_mask_in_observation_matches_action_masks(layout):
    env = MaskInObservation(MemoryEnv("life-easy"), layout=layout)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    rng = np.random.default_rng(1)
    for _ in range(30):
        np.testing.assert_array_equal(obs["action_mask"], env.unwrapped.action_masks().astype(np.float32))
        obs, *_ = env.step(np.array([rng.integers(7), rng.integers(8)]))
        assert env.observation_space.contains(obs)
    flat = MaskInObservation(FlattenAction(MemoryEnv("life-easy")), layout=layout)
    obs, _ = flat.reset(seed=0)
    assert obs["action_mask"].shape == (7 * 8,) and flat.observation_space.contains(obs)


def test_mask_in_observation_rllib_layout_nests_the_original_observation_unchanged():
    """The layout RLlib's ActionMaskingRLModule / ActionMaskModel read: exactly the keys "action_mask"
    and "observations", the latter the wrapped env's space and observation as they are."""
    inner = FlattenAction(MemoryEnv("life-easy"))
    env = MaskInObservation(inner)  # the default layout
    assert env.layout == "rllib"
    space = env.observation_space
    assert set(space.spaces) == {"action_mask", "observations"}
    assert space["observations"] == inner.observation_space
    assert space["action_mask"] == spaces.Box(0.0, 1.0, shape=(inner.action_space.n,), dtype=np.float32)
    ref = FlattenAction(MemoryEnv("life-easy"))
    obs, _ = env.reset(seed=5)
    raw, _ = ref.reset(seed=5)
    for a in [0, 8, 0, 8, 0]:
        assert set(obs) == {"action_mask", "observations"}
        assert set(obs["observations"]) == set(raw)
        for key in raw:
            np.testing.assert_array_equal(obs["observations"][key], raw[key])
        np.testing.assert_array_equal(obs["action_mask"], ref.action_masks().astype(np.float32))
        obs, *_ = env.step(a)
        raw, *_ = ref.step(a)


def test_mask_in_observation_flat_layout_adds_the_mask_next_to_the_keys():
    inner = MemoryEnv("life-easy")
    env = MaskInObservation(inner, layout="flat")
    assert set(env.observation_space.spaces) == set(inner.observation_space.spaces) | {"action_mask"}
    assert not any(isinstance(s, spaces.Dict) for s in env.observation_space.spaces.values())


def test_mask_in_observation_flat_layout_passes_sb3_checker():
    from stable_baselines3.common.env_checker import check_env

    for env in (MaskInObservation(MemoryEnv("recall-easy", horizon=20), layout="flat"),
                MaskInObservation(FlattenAction(MemoryEnv("recall-easy", horizon=20)), layout="flat")):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            check_env(env, warn=True)


def test_mask_in_observation_bad_layout_names_the_allowed_values():
    with pytest.raises(ValueError, match=r"layout must be one of 'rllib', 'flat', got 'nested'"):
        MaskInObservation(MemoryEnv("life-easy"), layout="nested")


# ---------------------------------------------------------------------- TextInterface
def test_text_interface_commands():
    env = TextInterface(MemoryEnv("recall-easy"))
    frame, _ = env.reset(seed=0)
    assert env.observation_space.contains(frame) and frame.startswith("EVENT")
    _until_statement(env, lambda: env.step("NOOP"))
    frame, _, _, _, info = env.step("write")
    mid = info["memory_id"]
    assert mid is not None and mid in frame
    assert env.observation_space.contains(frame)
    slot = env.unwrapped.candidate_ids.index(mid)
    # commands are case-insensitive, memory ids included (an LLM may upper-case the whole command)
    assert env.parse(f"FORGET {mid.upper()}").tolist() == env.parse(f"forget {mid}").tolist() == [6, slot]
    _, _, _, _, info = env.step(f"forget {mid}")  # a memory id works as a target too
    assert info["invalid_action"] is False and mid not in env.unwrapped.world.store


@pytest.mark.parametrize(
    "command, message",
    [
        ("", "malformed command"),
        ("JUMP 3", "unknown operation 'JUMP'"),
        ("WRITE 3", "WRITE takes no target"),
        ("LINK", "LINK needs a target"),
        ("FORGET 99", "slot 99 out of range"),
        ("UPDATE ep_999999", "neither a slot number"),
        ("LINK 1 2", "malformed command"),
    ],
)
def test_text_interface_malformed_commands_name_the_problem(command, message):
    env = TextInterface(MemoryEnv("recall-easy"))
    env.reset(seed=0)
    with pytest.raises(ValueError, match=message) as exc:
        env.step(command)
    assert "NOOP" in str(exc.value) or "slot" in str(exc.value)


def test_text_interface_on_error_noop():
    env = TextInterface(MemoryEnv("recall-easy"), on_error="noop")
    env.reset(seed=0)
    before = len(env.unwrapped.world.store)
    frame, reward, _, _, info = env.step("DANCE")
    assert info["invalid_action"] is True and "unknown operation" in info["parse_error"]
    assert reward < 0 and len(env.unwrapped.world.store) == before
    assert isinstance(frame, str)
