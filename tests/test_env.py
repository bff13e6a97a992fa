"""MemoryEnv: spaces, masks, invalid actions, rewards, truncation, render, registration, features."""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import envs
from envs import MemoryEnv
from envs.features import CANDIDATE_FEATURES, STORE_FEATURES, squash_activation
from world import FAMILIES, Op, WorldConfig
from world.sim import NO_CLUSTER

NF = len(CANDIDATE_FEATURES)
COL = {name: i for i, name in enumerate(CANDIDATE_FEATURES)}
TARGETED = (Op.UPDATE, Op.LINK, Op.REFLECT, Op.FORGET)


def _until(env, kind, max_steps=200):
    """NOOP until the current event has the given kind; returns False if the episode ends first."""
    for _ in range(max_steps):
        if env.world.done:
            return False
        if env.world.event.kind == kind:
            return True
        env.step(np.array([Op.NOOP, 0]))
    return False


def _check_obs(env, obs):
    assert env.observation_space.contains(obs)
    for key, value in obs.items():
        assert np.all(np.isfinite(value)), key


# ---------------------------------------------------------------------- spaces
def test_spaces_follow_the_config():
    env = MemoryEnv("recall-easy", n_candidates=5, n_recent=1)
    assert env.action_space == spaces.MultiDiscrete([7, 5])
    obs_space = env.observation_space
    assert set(obs_space.spaces) == {"event", "event_kind", "candidates", "candidate_mask", "store"}
    assert obs_space["event"].shape == (env.config.embed_dim,)
    assert obs_space["candidates"].shape == (5 * NF,)
    assert obs_space["candidate_mask"] == spaces.Box(0, 1, shape=(5,), dtype=np.int8)
    assert obs_space["store"].shape == (len(STORE_FEATURES),)
    obs, info = env.reset(seed=0)
    _check_obs(env, obs)
    assert info["action_mask"].shape == (7 + 5,)
    assert info["candidate_ids"] == []


def test_empty_store_mask_keeps_a_pickable_action():
    env = MemoryEnv("recall-easy")
    env.reset(seed=3)
    mask = env.action_masks()
    assert mask.dtype == bool and mask.shape == (7 + env.K,)
    assert mask[Op.NOOP]
    assert not any(mask[op] for op in TARGETED)  # nothing to target yet
    assert mask[7] and not mask[8:].any()  # slot 0 stays allowed


def test_write_shows_the_memory_as_a_recent_candidate():
    env = MemoryEnv("recall-easy")
    env.reset(seed=5)
    assert _until(env, "statement")
    text = env.world.event.text
    obs, _, _, _, info = env.step(np.array([Op.WRITE, 0]))
    assert info["invalid_action"] is False
    mid = info["memory_id"]
    assert mid in info["candidate_ids"]
    slot = info["candidate_ids"].index(mid)
    rows = obs["candidates"].reshape(env.K, NF)
    assert obs["candidate_mask"][slot] == 1 and rows[slot, COL["recent"]] == 1.0
    assert env.world.store.get(mid).content == text
    # the op mask now allows targeted ops, the slot mask exactly the filled slots
    mask = env.action_masks()
    assert mask[Op.FORGET]
    np.testing.assert_array_equal(mask[7:], obs["candidate_mask"].astype(bool))
    assert env.agent_view().candidate_ids == tuple(info["candidate_ids"])
    assert env.agent_view().candidate_contents[slot] == text


def test_agent_view_shows_candidates_but_no_payloads():
    env = MemoryEnv("recall-easy")
    env.reset(seed=5)
    assert _until(env, "statement")
    _, _, _, _, info = env.step(np.array([Op.WRITE, 0]))
    view = env.agent_view()
    assert view.candidate_ids == tuple(info["candidate_ids"]) and view.event == env.world.event
    mid = info["memory_id"]
    assert view.content(mid) == env.world.store.get(mid).content  # falls through to the WorldView
    for name in ("privileged", "_w", "_payloads", "payload"):
        assert not hasattr(view, name), name
    assert not any("payload" in n for n in dir(view))


def test_unmasked_invalid_action_is_a_penalised_noop():
    env = MemoryEnv("recall-easy")
    env.reset(seed=1)
    assert not env.action_masks()[Op.FORGET]
    before = len(env.world.store)
    obs, reward, terminated, truncated, info = env.step(np.array([Op.FORGET, 3]))
    assert info["invalid_action"] is True and info["invalid_reason"]
    assert len(env.world.store) == before
    assert reward < 0 and reward == pytest.approx(sum(info["reward_terms"].values()))
    assert terminated is False and truncated is False
    # the store feature "last_invalid" reports it in the next observation, and only there
    assert obs["store"][STORE_FEATURES.index("last_invalid")] == 1.0
    obs, *_ = env.step(np.array([Op.NOOP, 0]))
    assert obs["store"][STORE_FEATURES.index("last_invalid")] == 0.0


def test_out_of_space_action_is_a_clear_error():
    env = MemoryEnv("recall-easy")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="op must be in 0..6"):
        env.step(np.array([9, 0]))
    with pytest.raises(ValueError, match=r"slot in 0..7"):
        env.step(np.array([0, 8]))
    with pytest.raises(ValueError, match=r"\[op, slot\]"):
        env.step("write")


def test_truncation_at_the_horizon_with_metrics():
    env = MemoryEnv("recall-easy", horizon=12)
    env.reset(seed=2)
    for t in range(12):
        obs, _, terminated, truncated, info = env.step(np.array([Op.WRITE, 0]))
        assert terminated is False
        assert truncated is (t == 11)
        assert ("metrics" in info) == (t == 11)
        _check_obs(env, obs)
    assert info["metrics"]
    assert not obs["event"].any()  # nothing left to show


def test_write_all_answers_questions_and_noop_does_not():
    """The reward plumbing: a write-everything/query-questions policy gets correct answers, NOOP none."""

    def run(policy):
        env = MemoryEnv("recall-easy")
        env.reset(seed=11)
        verdicts, total = [], 0.0
        done = False
        while not done:
            kind = env.world.event.kind
            _, r, _, done, info = env.step(np.array([policy(kind), 0]))
            total += r
            assert r == sum(info["reward_terms"].values())
            if "question" in info:
                assert info["question"]["family"] == "recall"
                verdicts.append(info["question"]["verdict"])
        return verdicts, total

    wa, ret_wa = run(lambda k: Op.QUERY if k == "question" else Op.WRITE)
    noop, ret_noop = run(lambda k: Op.NOOP)
    assert wa and wa.count("correct") >= len(wa) // 2
    assert noop.count("correct") == 0
    assert ret_wa > ret_noop


def test_reset_options_switch_preset_and_reject_unknown_keys():
    env = MemoryEnv("recall-easy")
    env.reset(seed=0, options={"difficulty": "medium"})
    assert env.config.difficulty == "medium" and env.config.family == "recall"
    env.reset(seed=0, options={"family": "update"})
    assert env.config.family == "update"
    with pytest.raises(ValueError, match="allowed: 'family', 'difficulty'"):
        env.reset(seed=0, options={"level": 3})


def test_config_forms_and_errors():
    assert MemoryEnv({"family": "update", "difficulty": "hard"}).config == WorldConfig.preset("update", "hard")
    assert MemoryEnv(WorldConfig.preset("noise", "easy"), capacity=7).config.capacity == 7
    from pathlib import Path

    yaml_path = Path(__file__).resolve().parents[1] / "configs" / "world" / "update-medium.yaml"
    assert MemoryEnv(str(yaml_path)).config == WorldConfig.preset("update", "medium")
    with pytest.raises(ValueError, match="no such config file"):
        MemoryEnv("configs/world/nope.yaml")
    with pytest.raises(ValueError, match="family"):
        MemoryEnv("nonsense-easy")
    with pytest.raises(ValueError, match="capacity"):
        MemoryEnv("recall-easy", capacity=0)
    with pytest.raises(ValueError, match="render_mode"):
        MemoryEnv("recall-easy", render_mode="video")


# ---------------------------------------------------------------------- robustness
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    family=st.sampled_from(FAMILIES),
    seed=st.integers(0, 2**31 - 1),
    actions=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 7)), min_size=1, max_size=60),
)
def test_random_actions_never_crash_or_leave_bounds(family, seed, actions):
    env = MemoryEnv(f"{family}-easy", horizon=40)
    obs, _ = env.reset(seed=seed)
    _check_obs(env, obs)
    for op, slot in actions:
        obs, reward, terminated, truncated, info = env.step(np.array([op, slot]))
        _check_obs(env, obs)
        assert np.isfinite(reward)
        assert isinstance(info["invalid_action"], bool)
        mask = info["action_mask"]
        assert mask[Op.NOOP] and mask[7:].any()
        if truncated:
            obs, _ = env.reset()
            _check_obs(env, obs)


def test_masked_random_policy_keeps_the_op_mask_honest():
    """Any op the mask allows is valid on at least one slot the mask allows; the only masked pair the
    world refuses is a REFLECT whose target turns out to have no cluster (hidden, so not masked)."""
    rng = np.random.default_rng(0)
    env = MemoryEnv("life-easy")
    env.reset(seed=4)
    invalid = 0
    for _ in range(100):
        pairs = env.action_mask_pairs()
        mask = env.action_masks()
        assert np.array_equal(mask[:7], pairs.any(axis=1))
        ops = np.flatnonzero(mask[:7])
        op = int(rng.choice(ops))
        slots = np.flatnonzero(pairs[op])
        _, _, _, truncated, info = env.step(np.array([op, int(rng.choice(slots))]))
        if info["invalid_action"]:
            assert (op, info["invalid_reason"]) == (Op.REFLECT, NO_CLUSTER)
            invalid += 1
        if truncated:
            env.reset()
    assert invalid > 0  # (REFLECTs were sampled and refused: the check above ran)


# ---------------------------------------------------------------------- candidates and masks
def _play(env, rng, n):
    """n masked-random steps (REFLECT taken whenever it would consolidate something, which is rare, so
    that rules show up), yielding after each one."""
    for _ in range(n):
        can = [j for j, m in enumerate(env.candidate_ids) if m is not None and env.world.privileged.can_reflect(m)]
        if can:
            action = [Op.REFLECT, rng.choice(can)]
        else:
            mask = env.action_masks()
            action = [rng.choice(np.flatnonzero(mask[:7])), rng.choice(np.flatnonzero(mask[7:]))]
        env.step(np.array(action))
        if env.world.done:
            env.reset()
        yield


def _reference_key_best(env, ids):
    """The slot of the best key match, written out plainly: active episodes with the same subject and
    (same topic or similarity >= 0.5), most shared words, then most similar, then first slot."""
    from world.keys import subject_and_topic

    store, ev = env.world.store, env.world.event
    subj, topic = subject_and_topic(ev.text)
    best, best_score = None, None
    for j, mid in enumerate(ids):
        rec = store.get(mid)
        if mid in store.semantic or not rec.active or not rec.text:
            continue
        sim = float(np.clip(store.similarities(store.embed(ev.text), [mid])[1][0], -1, 1))
        c_subj, c_topic = subject_and_topic(rec.text)
        if subj & c_subj and (topic & c_topic or sim >= 0.5):
            score = (len(subj & c_subj) + len(topic & c_topic), sim)
            if best is None or score > best_score:
                best, best_score = j, score
    return best


def _reference_row(env, mid, key_best=False):
    """One candidate's features from the public store API, written out plainly (the env computes
    them through caches and the store's slot arrays)."""
    import math

    from world import extract_cues
    from world.dedup import DedupConfig, duplicate_rule, embedding_duplicate, signature
    from world.keys import subject_and_topic

    store, world = env.world.store, env.world
    rec = store.get(mid)
    ev = world.event
    ev_cues = set(extract_cues(ev.text))
    chain = len(store.versions(rec.key)) if rec.key else 1
    sim = float(np.clip(store.similarities(store.embed(ev.text), [mid])[1][0], -1, 1))
    subj, topic = subject_and_topic(ev.text)
    c_subj, c_topic = subject_and_topic(rec.text)
    cfg = store.dedup_config or DedupConfig()
    dup = duplicate_rule(signature(ev.text), signature(rec.text), cfg) is not None or \
        embedding_duplicate(signature(ev.text), signature(rec.text), sim, cfg)
    return np.array([
        sim,
        squash_activation(store.activations([mid]), env.config.forget_threshold)[0],
        min(max(rec.importance / 2.5, 0.0), 1.0),
        min(math.log1p(max(store.current_step - rec.written_at, 0)) / math.log1p(10_000), 1.0),
        rec.tier == "fact", rec.tier == "preference", rec.tier == "inference",
        mid in store.semantic,
        min(store.link_count(mid), 8) / 8,
        len(ev_cues & set(rec.cues)) / max(1, len(ev_cues)) if ev_cues else 0.0,
        mid in store.recent_ids(env.config.n_recent),
        not rec.active,
        min(chain, 8) / 8,
        min(max(rec.confidence, 0.0), 1.0),
        bool(subj & c_subj),
        bool(topic & c_topic),
        bool(subj & c_subj) and bool(topic & c_topic),
        key_best,
        dup,
    ], dtype=np.float32)


def test_candidates_are_the_worlds_with_features_as_documented():
    env = MemoryEnv("life-easy", n_recent=2)
    env.reset(seed=8)
    rng = np.random.default_rng(3)
    seen = np.zeros(len(CANDIDATE_FEATURES))
    for _ in _play(env, rng, 150):
        store = env.world.store
        ids = env.candidate_ids
        assert ids == env.world.candidates() and len(set(ids)) == len(ids)
        rows = env._features.candidates
        best = _reference_key_best(env, ids)
        for j, mid in enumerate(ids):
            np.testing.assert_allclose(rows[j], _reference_row(env, mid, j == best), atol=1e-6, err_msg=mid)
            seen += rows[j] > 0
        assert not rows[len(ids):].any()
        acts = store.activations(list(store.episodic) + list(store.semantic))
        mean = squash_activation(acts, env.config.forget_threshold).mean() if len(acts) else 0.0
        assert env._features.store[STORE_FEATURES.index("mean_activation")] == pytest.approx(mean, abs=1e-6)
    # the play exercised every column except the tiers the world never writes
    unused = {"tier_preference"}
    for name, count in zip(CANDIDATE_FEATURES, seen):
        if name not in unused:
            assert count > 0, name


def test_fast_store_reads_equal_the_public_api(monkeypatch):
    """The store-internals fast path of the feature builder gives the public API's numbers."""
    from envs.features import _StoreArrays

    def run():
        env = MemoryEnv("life-easy")
        env.reset(seed=12)
        rng = np.random.default_rng(5)
        out = []
        for _ in _play(env, rng, 120):
            out.append((env._features.candidates.copy(), env._features.store.copy()))
        return out

    from world import MemoryStore

    calls = []
    public = MemoryStore.activations
    monkeypatch.setattr(MemoryStore, "activations", lambda self, ids: calls.append(1) or public(self, ids))
    fast = run()
    assert not calls  # the fast path really ran (the store's own retrieval does not call this method)
    monkeypatch.setattr(_StoreArrays, "fast", False)
    slow = run()
    assert calls
    assert len(fast) == len(slow)
    for (fc, fs), (sc, ss) in zip(fast, slow):
        np.testing.assert_allclose(fc, sc, atol=1e-6)
        np.testing.assert_allclose(fs, ss, atol=1e-6)


def test_mask_pairs_agree_with_world_is_valid():
    """envs' vectorised validity equals World.is_valid on every (op, candidate) pair."""
    for family in ("life", "consolidation", "update"):
        env = MemoryEnv(f"{family}-easy", capacity=12)  # small capacity: the store fills up too
        env.reset(seed=5)
        rng = np.random.default_rng(1)
        reflect_ok = 0
        for _ in _play(env, rng, 150):
            pairs = env.action_mask_pairs()
            ids = env.candidate_ids
            for op in Op:
                if op in TARGETED:
                    for j in range(env.K):
                        expect = j < len(ids) and env.world.is_valid(op, ids[j])[0]
                        assert pairs[op, j] == expect, (op.name, j)
                else:
                    assert pairs[op, 0] == env.world.is_valid(op, None)[0], op.name
                    assert not pairs[op, 1:].any()
            reflect_ok += pairs[Op.REFLECT].any()
        if family == "consolidation":
            assert reflect_ok > 0


# ---------------------------------------------------------------------- render
def test_agent_view_has_no_event_after_the_last_step():
    env = MemoryEnv("life-easy", horizon=10)
    env.reset(seed=0)
    assert env.agent_view().event is env.world.event
    for _ in range(10):
        obs, _, _, truncated, _ = env.step(np.array([1, 0]))
    assert truncated and not obs["event"].any()
    view = env.agent_view()
    assert view.event is None and view.candidate_ids == ()


def test_rgb_dots_never_move_while_their_memories_live():
    """A dot's position depends on its memory's embedding only (fixed projection and scale): adding a
    memory far from the others does not move the rest (the scale used to follow the farthest dot)."""
    from envs.render import SIZE, dot_positions

    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((6, 64)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    far = np.zeros((1, 64), dtype=np.float32)
    far[0, :] = dot_positions.__globals__["_projection"](64)[:, 0]  # (the direction that projects farthest)
    far /= np.linalg.norm(far)
    alone = dot_positions(vecs)
    together = dot_positions(np.concatenate([vecs, far]))
    assert np.array_equal(alone, together[:6])
    assert ((together >= 0) & (together < SIZE)).all()


def test_render_modes(capsys):
    env = MemoryEnv("recall-easy", render_mode="ansi")
    env.reset(seed=0)
    assert _until(env, "statement")
    text = env.world.event.text
    frame = env.render()
    assert isinstance(frame, str) and text in frame
    env.step(np.array([Op.WRITE, 0]))
    assert "WRITE" in env.render()

    rgb = MemoryEnv("recall-easy", render_mode="rgb_array")
    rgb.reset(seed=0)
    empty = rgb.render()
    assert empty.shape[2] == 3 and empty.dtype == np.uint8
    for _ in range(15):
        rgb.step(np.array([Op.WRITE, 0]))
    full = rgb.render()
    assert full.shape == empty.shape and (full != empty).any()

    human = MemoryEnv("recall-easy", render_mode="human")
    human.reset(seed=0)
    assert "candidates" in capsys.readouterr().out


# ---------------------------------------------------------------------- registration
def test_registration_ids_and_names():
    ids = envs.registered_ids()
    assert len(ids) == len(FAMILIES) * 3 + 1 and len(set(ids)) == len(ids)
    assert all(i in gym.registry for i in ids)
    assert envs.env_id("multi_hop", "easy") == "MemGym/MultiHop-Easy-v0"
    assert envs.env_id("life", "endless") == "MemGym/Life-Endless-v0"
    assert envs.parse_env_id("MemGym/MultiHop-Hard-v0") == ("multi_hop", "hard")
    with pytest.raises(ValueError, match="valid families"):
        envs.env_id("dreams", "easy")
    with pytest.raises(ValueError, match="only life-endless"):
        envs.env_id("recall", "endless")
    with pytest.raises(ValueError, match="registered ids"):
        envs.parse_env_id("MemGym/Life-Impossible-v0")
    env = gym.make("MemGym/Temporal-Medium-v0")
    assert env.unwrapped.config == WorldConfig.preset("temporal", "medium")



@pytest.mark.parametrize("bad", [None, 123, b"MemGym/Life-Easy-v0", ["MemGym/Life-Easy-v0"]])
def test_parse_env_id_refuses_what_is_not_a_string_naming_the_ids(bad):
    """(a raw TypeError before: "argument of type 'NoneType' is not iterable")"""
    with pytest.raises(ValueError, match=r"env id must be a string, got .*; registered ids: MemGym/Recall-Easy-v0, "):
        envs.parse_env_id(bad)


def test_id_table_matches_presets_and_docs():
    rows = envs.id_table("rows")
    assert [r["id"] for r in rows] == envs.registered_ids()
    for r in rows:
        cfg = WorldConfig.preset(r["family"], r["difficulty"])
        assert (r["horizon"], r["capacity"], r["n_candidates"]) == (cfg.horizon, cfg.capacity, cfg.n_candidates)
    table = envs.id_table()
    assert table.count("\n") == len(rows) + 2
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    for name in ("docs/env.md", "README.md"):
        doc = (root / name).read_text()
        assert table in doc, f"{name}'s id table is stale: run envs.write_id_table('{name}')"


def test_make_with_module_prefix_in_a_fresh_process():
    code = (
        "import gymnasium as gym\n"
        "env = gym.make('envs:MemGym/Life-Easy-v0')\n"
        "obs, info = env.reset(seed=0)\n"
        "print(env.unwrapped.config.family, env.unwrapped.config.difficulty, sorted(obs))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("life easy") and "candidates" in out


def test_bench_env_quick_prints_the_table():
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "scripts" / "bench_env.py"
    out = subprocess.run([sys.executable, str(script), "--quick", "--duration", "0.05", "--split"],
                         capture_output=True, text=True, check=True, timeout=300).stdout
    rows = {line.split("|")[1].strip(): line for line in out.splitlines() if line.startswith("| ")}
    for name in ("CartPole-v1 (reference)", "MemGym/Life-Easy-v0", "MemGym/Life-Hard-v0",
                 "MemGym/Life-Easy-v0 SyncVectorEnv x 8", "world.apply", "env (observation, masks, info)"):
        assert name in rows, name
    rate = float(rows["MemGym/Life-Easy-v0"].split("|")[2].replace(",", ""))
    assert rate > 0
    assert rows["MemGym/Life-Easy-v0"].rstrip().endswith(("| yes |", "| NO |"))


@pytest.mark.parametrize("argv, message", [
    (["--ids", "MemGym/Foo-v0"], "--ids: unknown env id 'MemGym/Foo-v0'; registered ids: MemGym/Recall-Easy-v0"),
    (["--ids", ","], "--ids: no env id in ','"),
    (["--num-envs", "0"], "--num-envs must be >= 1, got 0"),
    (["--duration", "nan"], "--duration must be a number of seconds > 0, got nan"),  # (it never ended)
    (["--duration", "-1"], "--duration must be a number of seconds > 0, got -1.0"),
    (["--minilm-episodes", "0"], "--minilm-episodes must be >= 1, got 0"),
])
def test_bench_env_refuses_bad_options_before_measuring(argv, message, capsys):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "bench_env.py"
    spec = importlib.util.spec_from_file_location("bench_env_under_test", path)
    bench_env = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_env)
    with pytest.raises(SystemExit) as exc:
        bench_env.main(["--quick", "--no-minilm", *argv])
    assert exc.value.code == 2
    captured = capsys.readouterr()
    assert message in captured.err and "Traceback" not in captured.err and captured.out == ""


def test_an_episode_without_questions_ends_with_none_rates():
    """A Recall-Easy episode cut at 10 events (reset seed 10000 asks nothing): the final info's metrics
    give the per-question rates as None, not 0.0."""
    env = gym.make("MemGym/Recall-Easy-v0", horizon=10)
    env.reset(seed=10_000)
    truncated, info = False, {}
    while not truncated:
        _, _, _, truncated, info = env.step(np.array([Op.WRITE, 0]))
        assert "question" not in info
    m = info["metrics"]
    assert m["questions"] == 0 and m["events"] == 10
    assert all(m[k] is None for k in ("accuracy", "stale_rate", "hallucination_rate", "leak_rate", "evidence_recall"))
