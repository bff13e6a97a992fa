"""memgym train: the YAML schema, the seed schedule, a --quick run with every artefact, resume,
Ctrl-C, determinism, and each algorithm for a few steps (small worlds, seconds each)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("sb3_contrib")

from agents import train as T  # noqa: E402
from agents.train_config import (  # noqa: E402
    TEST_SEED_START,
    TRAIN_SEED_LIMIT,
    TrainConfig,
    TrainConfigError,
)

ROOT = Path(__file__).resolve().parents[1]
LIFE_EASY = ROOT / "configs" / "train" / "life_easy.yaml"


def tiny(tmp_path: Path, name: str = "tiny", **changes) -> Path:
    """A recipe small enough for seconds: short episodes, a 16-unit net, evaluations every 128 steps."""
    data = {
        "env": {"id": "MemGym/Life-Easy-v0", "overrides": {"horizon": 30}},
        "algo": "maskable_ppo",
        "hyperparams": {"n_steps": 64, "batch_size": 32, "n_epochs": 1},
        "policy_kwargs": {"net_arch": [16]},
        "n_envs": 1,
        "total_steps": 256,
        "checkpoint_freq": 128,
        "eval": {"freq": 128, "episodes": 2, "test_episodes": 1, "baselines": []},
        "progress_bar": False,
    }
    for key, value in changes.items():
        data[key] = value
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


# ------------------------------------------------------------------------------------ config schema
def test_shipped_configs_load_full_and_quick():
    paths = sorted((ROOT / "configs" / "train").glob("*.yaml"))
    assert LIFE_EASY in paths
    for path in paths:
        full = TrainConfig.from_yaml(path)
        quick = TrainConfig.from_yaml(path, quick=True)
        assert full.env_id.startswith("MemGym/")
        assert quick.total_steps <= 5_000 < full.total_steps, path
        assert quick.n_envs == 1
        assert set(full.eval.seeds).isdisjoint(range(TRAIN_SEED_LIMIT))


@pytest.mark.parametrize(
    "patch, needle",
    [
        ({"algo": "sac"}, "key 'algo' must be one of maskable_ppo, ppo, a2c, dqn"),
        ({"totl_steps": 5}, "unknown key 'totl_steps'"),
        ({"n_envs": 0}, "key 'n_envs' must be an integer >= 1"),
        ({"total_steps": "many"}, "key 'total_steps' must be an integer"),
        ({"hyperparams": {"learnin_rate": 0.1}}, "key 'hyperparams.learnin_rate' is not an argument of maskable_ppo"),
        ({"hyperparams": {"seed": 3}}, "key 'hyperparams.seed' is set by the pipeline"),
        ({"eval": {"seed_start": 10}}, "key 'eval.seed_start' must be >= 9000"),
        ({"eval": {"seed_start": 9995, "episodes": 10}}, "below the benchmark's test seeds"),
        ({"eval": {"every": 10}}, "unknown key 'eval.every'"),
        ({"policy_kwargs": {"activation_fn": "sigmoid"}}, "key 'policy_kwargs.activation_fn' must be one of"),
        ({"policy_kwargs": {"net_arch": [64, -1]}}, "key 'policy_kwargs.net_arch'"),
        ({"env": {"name": "x"}}, "unknown key 'env.name'"),
        ({"quick": 3}, "key 'quick' must be a mapping"),
        ({"shaping": "potential"}, "key 'shaping' must be one of none, storage_potential, storage_potential_discounted"),
        ({"pretrain": {"agent": "oracle"}}, "key 'pretrain.agent' must be the name of a non-privileged"),
        ({"pretrain": {"epochs": -1}}, "key 'pretrain.epochs' must be an integer >= 0"),
        ({"pretrain": {"agent": "versioned"}, "algo": "dqn", "hyperparams": {}, "policy_kwargs": {"net_arch": [64]}},
         "key 'pretrain'"),
    ],
)
def test_bad_config_names_the_key(tmp_path, patch, needle):
    data = yaml.safe_load(LIFE_EASY.read_text())
    data.pop("quick")
    data.update(patch)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(TrainConfigError) as err:
        TrainConfig.from_yaml(path)
    assert needle in str(err.value)
    assert "bad.yaml" in str(err.value)


def test_quick_without_a_quick_section_merges_the_default_quick_form(tmp_path, capsys):
    """--quick on a recipe without a quick: section trained its full total_steps (in runs/<name>_quick_s0,
    without a word); docs promise "a few thousand steps". Now the default quick form is merged: each limit
    only where it shortens the recipe, and a note says so."""
    long = {"total_steps": 20_000, "checkpoint_freq": 10_000, "n_envs": 2,
            "eval": {"freq": 5_000, "episodes": 3, "test_episodes": 30, "baselines": []}}
    path = tiny(tmp_path, "long", **long, pretrain={"agent": "versioned", "episodes": 50, "epochs": 1})
    assert TrainConfig.from_yaml(path).total_steps == 20_000  # (the full recipe is untouched)
    quick = TrainConfig.from_yaml(path, quick=True)
    assert (quick.total_steps, quick.checkpoint_freq, quick.n_envs) == (2048, 1024, 1)
    assert (quick.eval.freq, quick.eval.episodes, quick.eval.test_episodes) == (1024, 2, 2)
    assert (quick.pretrain.episodes, quick.pretrain.epochs, quick.pretrain.workers) == (2, 1, 1)  # (never longer)
    assert quick.default_quick == {"total_steps": 2048, "checkpoint_freq": 1024,
                                   "eval": {"freq": 1024, "episodes": 2, "test_episodes": 2},
                                   "pretrain": {"episodes": 2, "epochs": 1, "workers": 1}}
    small = TrainConfig.from_yaml(tiny(tmp_path), quick=True)  # already small: kept as it is
    assert (small.total_steps, small.checkpoint_freq, small.eval.freq, small.eval.test_episodes) == (256, 128, 128, 1)
    assert TrainConfig.from_yaml(LIFE_EASY, quick=True).default_quick is None  # its own quick: section
    # end to end: the run folder's recipe is the quick form, and the note names it
    out = tmp_path / "run"
    result = T.train(tiny(tmp_path, "long2", **long), seed=0, out_dir=out, quick=True, stop_after=64, test_eval=False)
    assert result.timesteps == 64
    assert yaml.safe_load((out / "config.yaml").read_text())["total_steps"] == 2048
    assert ("--quick: " + str(tmp_path / "long2.yaml") + " has no quick: section; merging the default quick form: "
            "total_steps 2048, checkpoint_freq 1024, eval.freq 1024, eval.episodes 2, eval.test_episodes 2, "
            "n_envs 1") in capsys.readouterr().err


def test_quick_section_merges_deeply():
    full = TrainConfig.from_yaml(LIFE_EASY)
    quick = TrainConfig.from_yaml(LIFE_EASY, quick=True)
    data = yaml.safe_load(LIFE_EASY.read_text())
    # keys the quick section does not mention keep the full recipe's values
    assert quick.hyperparams["learning_rate"] == full.hyperparams["learning_rate"]
    assert quick.hyperparams["n_steps"] == data["quick"]["hyperparams"]["n_steps"]
    assert quick.eval.baselines == full.eval.baselines or "baselines" in data["quick"]["eval"]
    assert TrainConfig.from_dict(full.to_dict()) == full


def test_unknown_env_id_lists_registered_ids(tmp_path):
    path = tiny(tmp_path, env={"id": "MemGym/Lfe-Easy-v0"})
    with pytest.raises(TrainConfigError) as err:
        T.train(path, seed=0, out_dir=tmp_path / "run", test_eval=False)
    assert "MemGym/Life-Easy-v0" in str(err.value)


# ------------------------------------------------------------------------------------ seeds
def test_training_seed_schedule_is_disjoint_and_does_not_repeat():
    for n_envs in (1, 2, 4):
        seeds = [T.train_seed(7, w, j, n_envs) for j in range(TRAIN_SEED_LIMIT // n_envs) for w in range(n_envs)]
        assert len(set(seeds)) == len(seeds)  # 9,000 episodes without a repeat
        assert min(seeds) >= 0 and max(seeds) < TRAIN_SEED_LIMIT
    assert T.train_seed(0, 0, 0, 2) != T.train_seed(1, 0, 0, 2)


def _unmix32(x: int) -> int:
    """The inverse of `T._mix32` (each xor-shift and odd multiplication undone, in reverse order)."""
    m = 0xFFFFFFFF
    x ^= x >> 16
    x = (x * pow(0xC2B2AE35, -1, 2**32)) & m
    x ^= (x >> 13) ^ (x >> 26)
    x = (x * pow(0x85EBCA6B, -1, 2**32)) & m
    return x ^ (x >> 16)


def _prefix_code(seeds: list[int]) -> int:
    """What the first three worlds of a permuted schedule spell (the mixed radix of `T._permutation`)."""
    n = TRAIN_SEED_LIMIT
    first, second, third = seeds
    d1 = [x for x in range(n) if x not in (first, (first + 1) % n)].index(second)
    d2 = [x for x in range(n) if x not in (first, second)].index(third) % 54
    return first + n * (d1 + (n - 2) * d2)


LARGE_SEEDS = [9, 10, 17, 18, 27, 1000, 123_456_789, 2**31, 2**32 - 2, 2**32 - 1]


def test_training_seeds_9_apart_no_longer_share_their_schedule():
    """Seed s and s + 9 walked the same training worlds and warm-start demonstrations (offset 1000 * seed
    mod 9000: 9 offsets for 2**32 seeds), so "independent" runs trained on identical data."""
    first = {s: [T.train_seed(s, w, j, 2) for j in range(50) for w in range(2)] for s in range(40)}
    for s in range(31):
        assert first[s] != first[s + 9], s
        assert T.demo_seeds(s, 120, 0) != T.demo_seeds(s + 9, 120, 0), s
        assert T.demo_seeds(s, 120, 1) != T.demo_seeds(s + 9, 120, 1), s
    # any two seeds differ within their first three episodes: every seed's are distinct
    prefixes = [tuple(T.schedule_seed(s, i) for i in range(3)) for s in sorted({*range(2_000), *LARGE_SEEDS})]
    assert len(set(prefixes)) == len(prefixes)


def test_seeds_0_to_8_keep_their_schedule_and_the_others_spell_their_seed():
    """Runs trained at seeds 0..8 (the README's headline: 0-2) reproduce: their training and warm-start
    worlds are the rotation they always were. Every other seed's first three worlds spell `_mix32(seed)`, a
    bijection (its inverse is checked), so no two seeds share a schedule; and no permuted schedule is a
    rotation (its second world is never its first plus one)."""
    for s in range(T.ROTATION_SEEDS):
        for n_envs in (1, 2, 3):
            got = [T.train_seed(s, w, j, n_envs) for j in range(0, 4000, 7) for w in range(n_envs)]
            assert got == [(1000 * s + w + j * n_envs) % 9000 for j in range(0, 4000, 7) for w in range(n_envs)]
        for r in range(3):
            assert T.demo_seeds(s, 120, r) == [(1000 * s + 4500 + r * 120 + j) % 9000 for j in range(120)]
    rng = np.random.default_rng(0)
    for s in [*LARGE_SEEDS, *(int(x) for x in rng.integers(9, 2**32, 2_000))]:
        assert _unmix32(T._mix32(s)) == s
        prefix = [T.schedule_seed(s, i) for i in range(3)]
        assert _prefix_code(prefix) == T._mix32(s)
        assert prefix[1] != (prefix[0] + 1) % TRAIN_SEED_LIMIT
        assert T.train_seed(s, 1, 0, 2) == prefix[1] and T.train_seed(s, 0, 1, 2) == prefix[2]
    assert T.schedule_seed(9, 5, legacy=True) == T.schedule_seed(0, 5)  # (a resume of a run of before)
    with pytest.raises(ValueError, match=r"run_seed must be an integer in \[0, 4294967295\]"):
        T.schedule_seed(2**32, 0)


def test_every_schedule_walks_the_whole_training_pool_before_repeating():
    for s in (0, 8, 9, 2**32 - 1):
        pool = [T.schedule_seed(s, i) for i in range(TRAIN_SEED_LIMIT)]
        assert sorted(pool) == list(range(TRAIN_SEED_LIMIT))  # never a validation (9000..) or test (10000..) seed
        assert [T.schedule_seed(s, TRAIN_SEED_LIMIT + i) for i in range(5)] == pool[:5]


def test_a_resume_keeps_the_schedule_its_run_was_started_with(tmp_path):
    """A run of seed >= 9 started before the permutations (seeds.json without train.schedule) goes on with
    the rotation it was trained on; seeds 0..8 have one schedule either way; a seeds.json that cannot tell
    is an error naming it."""
    new = {"train": {"schedule": T.SCHEDULE_VERSION, "run_seed": 9}}
    old = {"train": {"rule": "seed(worker w, episode j) = (1000 * run_seed + w + j * n_envs) mod 9000"}}
    for doc, seed, legacy in ((new, 9, False), (old, 9, True), (old, 3, False), (None, 3, False)):
        path = tmp_path / "seeds.json"
        path.unlink(missing_ok=True)
        if doc is not None:
            path.write_text(json.dumps(doc))
        assert T._legacy_schedule(tmp_path, seed) is legacy
    for text in ("{", json.dumps({"train": {"schedule": 7}})):
        (tmp_path / "seeds.json").write_text(text)
        with pytest.raises(TrainConfigError, match="cannot resume: .*seeds.json.*training-seed schedule"):
            T._legacy_schedule(tmp_path, 12)
    assert T._TrainSeeds(9, 1, 2, legacy=True)(3) == (9000 + 1 + 3 * 2) % 9000

def test_seed_schedule_wrapper_ignores_caller_seed_and_rewinds():
    env = T.SeedSchedule(T.make_env("MemGym/Life-Easy-v0"), T._SeedList([9000, 9001]))
    obs_a, _ = env.reset(seed=123)
    assert env.last_seed == 9000
    env.reset()
    assert env.last_seed == 9001
    env.restart_seeds()
    obs_b, _ = env.reset(seed=999)
    assert env.last_seed == 9000
    for key in obs_a:
        np.testing.assert_array_equal(obs_a[key], obs_b[key])
    env.close()


def test_discounted_storage_shaping_keeps_every_discounted_return_up_to_the_start_potential():
    """Ng, Harada & Russell's form (gamma * Phi(s') - Phi(s)): for any actions, the shaped discounted
    return is the true discounted return minus Phi(s_0), so the optimal policy is unchanged. The
    undiscounted form (gamma = 1) does not have this property for gamma < 1 (checked too)."""
    gamma = 0.9
    for shaping_gamma, invariant in ((gamma, True), (1.0, False)):
        env = T.StorageShaping(T.make_env("MemGym/Life-Easy-v0"), gamma=shaping_gamma)
        rng = np.random.default_rng(0)
        env.reset(seed=5)
        phi0 = env._phi
        true_ret = shaped_ret = 0.0
        disc, done = 1.0, False
        while not done:
            mask = env.unwrapped.action_masks()
            action = np.array([rng.choice(np.flatnonzero(mask[:7])), rng.choice(np.flatnonzero(mask[7:]))])
            _, r, term, trunc, info = env.step(action)
            shaped_ret += disc * r
            true_ret += disc * (r - info["shaping"])
            disc *= gamma
            done = term or trunc
        assert (shaped_ret == pytest.approx(true_ret - phi0, abs=1e-9)) is invariant
        env.close()
    with pytest.raises(ValueError, match="gamma must be in"):
        T.StorageShaping(T.make_env("MemGym/Life-Easy-v0"), gamma=0.0)


def test_shaping_gamma_follows_the_recipe():
    from agents.train_config import TrainConfig

    base = {"env": {"id": "MemGym/Life-Easy-v0"}, "algo": "maskable_ppo"}
    assert T.shaping_gamma(TrainConfig.from_dict({**base, "shaping": "storage_potential"})) == 1.0
    assert T.shaping_gamma(TrainConfig.from_dict({**base, "shaping": "storage_potential_discounted"})) == 0.99
    cfg = TrainConfig.from_dict({**base, "shaping": "storage_potential_discounted", "hyperparams": {"gamma": 0.95}})
    assert T.shaping_gamma(cfg) == 0.95


def test_storage_shaping_bills_writes_up_front_and_keeps_the_return():
    """Potential-based: every episode's shaped return equals its true return; a WRITE is billed its
    storage to the end of the episode at once, and a NOOP in a steady store costs nothing extra."""
    env = T.StorageShaping(T.make_env("MemGym/Life-Easy-v0"))
    w = env.unwrapped.world.config.rewards["storage"]
    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        env.reset(seed=seed)
        true_ret = shaped_ret = 0.0
        done = False
        while not done:
            mask = env.unwrapped.action_masks()
            action = np.array([rng.choice(np.flatnonzero(mask[:7])), rng.choice(np.flatnonzero(mask[7:]))])
            _, r, term, trunc, info = env.step(action)
            shaped_ret += r
            true_ret += r - info["shaping"]
            done = term or trunc
        assert shaped_ret == pytest.approx(true_ret, abs=1e-9)
    env.reset(seed=3)
    world = env.unwrapped.world
    while world.event.kind != "statement":
        env.step(np.array([5, 0]))
    live, index, horizon = len(world.store), world.event.index, world.config.horizon
    _, _, _, _, info = env.step(np.array([1, 0]))  # WRITE
    grown = len(world.store) - live  # 1, or less if a sweep fell on this step
    # this step's storage charge plus the shaping = the new memories' storage to the end of the episode
    billed = info["shaping"] + info["reward_terms"]["storage_cost"]
    assert billed == pytest.approx(w * (horizon - index) * grown)
    live, index = len(world.store), world.event.index
    _, _, _, _, info = env.step(np.array([0, 0]))  # NOOP: nothing billed beyond what is already paid
    assert info["shaping"] + info["reward_terms"]["storage_cost"] == pytest.approx(
        w * (horizon - index) * (len(world.store) - live))
    env.close()


# ------------------------------------------------------------------------------------ end to end
def test_quick_run_of_life_easy_produces_every_artefact(tmp_path):
    parser = T.add_arguments(argparse.ArgumentParser())
    out = tmp_path / "run"
    args = parser.parse_args(["--config", str(LIFE_EASY), "--quick", "--seed", "0", "--out", str(out),
                              "--no-progress"])
    t0 = time.perf_counter()
    assert T.run(args) == 0
    elapsed = time.perf_counter() - t0
    quick = TrainConfig.from_yaml(LIFE_EASY, quick=True)

    for name in ("config.yaml", "seeds.json", "evaluations.csv", "evaluations.npz", "baselines.json",
                 "model.zip", "model.json", "learning_curve.png", "test_eval.json", "summary.md"):
        assert (out / name).is_file(), name
    assert list((out / "tb").rglob("events.out.tfevents.*"))
    assert list((out / "checkpoints").glob("model_*_steps.zip"))
    assert (out / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    resolved = yaml.safe_load((out / "config.yaml").read_text())
    assert resolved["seed"] == 0 and resolved["total_steps"] == quick.total_steps and resolved["quick"] is True

    seeds = json.loads((out / "seeds.json").read_text())
    assert seeds["validation"] == quick.eval.seeds
    assert seeds["test"] == list(range(TEST_SEED_START, TEST_SEED_START + quick.eval.test_episodes))
    assert set(seeds["validation"]).isdisjoint(seeds["test"])
    assert all(s < TRAIN_SEED_LIMIT for row in seeds["train"]["first"] for s in row)

    rows = T.read_evaluations(out / "evaluations.csv")
    assert [r["timesteps"] for r in rows] == list(range(quick.eval.freq, quick.total_steps + 1, quick.eval.freq))
    assert all(np.isfinite(r["mean_return"]) and 0.0 <= r["mean_accuracy"] <= 1.0 for r in rows)

    test_eval = json.loads((out / "test_eval.json").read_text())
    agent = f"sb3:{out / 'model.zip'}"
    assert set(test_eval["summary"]) == {agent, *quick.eval.baselines}
    assert [r["seed"] for r in test_eval["episodes"][agent]] == seeds["test"]
    assert "normalised" in test_eval["summary"][agent]
    assert agent in (out / "summary.md").read_text()
    base = json.loads((out / "baselines.json").read_text())
    assert set(base["summary"]) == set(quick.eval.baselines)

    # the saved model plays the env with masks, as `memgym bench --agents sb3:...` does
    model = T.load_model(out / "model.zip")
    env = T.make_env("MemGym/Life-Easy-v0")
    obs, info = env.reset(seed=10_000)
    action, _ = model.predict(obs, action_masks=env.unwrapped.action_masks(), deterministic=True)
    assert env.action_space.contains(np.asarray(action))
    env.close()
    assert elapsed < 120, f"--quick took {elapsed:.0f}s"


def test_resume_continues_from_the_checkpoint(tmp_path):
    cfg = tiny(tmp_path)
    out = tmp_path / "run"
    first = T.train(cfg, seed=1, out_dir=out, stop_after=128, test_eval=False)
    assert not first.finished and first.stop_reason == "stop_after" and first.model_path is None
    assert not (out / "model.zip").exists()
    ckpt, state = T.latest_checkpoint(out)
    assert state["timesteps"] == 128 and ckpt.name == "model_128_steps.zip"
    rows_before = T.read_evaluations(out / "evaluations.csv")
    assert [r["timesteps"] for r in rows_before] == [128]

    with pytest.raises(TrainConfigError, match="already holds a run"):
        T.train(cfg, seed=1, out_dir=out, test_eval=False)

    second = T.train(None, out_dir=out, resume=True, test_eval=False)
    assert second.finished and second.timesteps == 256  # counted on from 128, not restarted at 0
    rows = T.read_evaluations(out / "evaluations.csv")
    assert [r["timesteps"] for r in rows] == [128, 256]
    assert rows[0] == rows_before[0]
    meta = json.loads((out / "model.json").read_text())
    assert meta["timesteps"] == 256 and meta["seed"] == 1
    # the workers' seed schedule continues too: more episodes started at 256 than at 128
    later = json.loads((out / "checkpoints" / "state_256.json").read_text())
    assert later["episodes_started"][0] > state["episodes_started"][0]

    # a finished run can be extended: --resume --total-steps N
    third = T.train(None, out_dir=out, resume=True, total_steps=384, test_eval=False)
    assert third.finished and third.timesteps == 384
    assert [r["timesteps"] for r in T.read_evaluations(out / "evaluations.csv")] == [128, 256, 384]
    assert yaml.safe_load((out / "config.yaml").read_text())["total_steps"] == 384


def test_imitation_warm_start_clones_the_agent(tmp_path):
    """`pretrain:` fits the policy to a baseline's actions: the greedy policy then agrees with it far
    more than an untrained one (which picks one op everywhere)."""
    common = {"policy_kwargs": {"net_arch": [64]}, "total_steps": 64,
              "eval": {"freq": 64, "episodes": 1, "baselines": [], "test_episodes": 1}}
    cold = T.train(tiny(tmp_path, "cold", pretrain={"agent": "versioned", "episodes": 3, "epochs": 0}, **common),
                   seed=0, out_dir=tmp_path / "cold", test_eval=False)
    assert cold.finished and not (tmp_path / "cold" / "pretrain.json").exists()
    warm = T.train(tiny(tmp_path, "warm", pretrain={"agent": "versioned", "episodes": 3, "epochs": 100, "batch_size": 16, "learning_rate": 0.003}, **common),
                   seed=0, out_dir=tmp_path / "warm", test_eval=False)
    assert warm.finished
    stats = json.loads((tmp_path / "warm" / "pretrain.json").read_text())
    assert stats["agent"] == "versioned" and stats["samples"] + stats["dropped"] == 90 and stats["samples"] > 80
    assert all(s < TRAIN_SEED_LIMIT for s in stats["seeds"])
    assert stats["seeds"] == T.demo_seeds(0, 3)  # the seeds the demonstrations were played on
    assert stats["op_agreement"] > 0.75
    # the same demonstrations scored by an untrained policy of the same seed
    cfg = TrainConfig.from_yaml(tmp_path / "warm.yaml")
    cfg.pretrain.epochs = 0
    model = T.load_model(cold.model_path)
    untrained = T.pretrain_by_imitation(model, cfg, 0)
    assert untrained["op_agreement"] < stats["op_agreement"] - 0.2, (untrained, stats)


def test_resume_without_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(TrainConfigError, match="not a run folder"):
        T.train(None, out_dir=tmp_path / "nothing", resume=True)


def test_same_seed_same_first_evaluation(tmp_path):
    cfg = tiny(tmp_path, total_steps=128)
    a = T.train(cfg, seed=5, out_dir=tmp_path / "a", test_eval=False)
    b = T.train(cfg, seed=5, out_dir=tmp_path / "b", test_eval=False)
    keys = ("timesteps", "mean_return", "std_return", "mean_accuracy", "mean_length")
    assert [a.evaluations[0][k] for k in keys] == [b.evaluations[0][k] for k in keys]
    pa = T.load_model(a.model_path).policy.state_dict()
    pb = T.load_model(b.model_path).policy.state_dict()
    assert all(np.array_equal(pa[k].numpy(), pb[k].numpy()) for k in pa)


@pytest.mark.parametrize(
    "algo, hyper",
    [
        ("ppo", {"n_steps": 64, "batch_size": 32, "n_epochs": 1}),
        ("a2c", {"n_steps": 16}),
        ("dqn", {"learning_starts": 32, "buffer_size": 500, "train_freq": 4, "batch_size": 16}),
    ],
)
def test_other_algorithms_train_and_reload(tmp_path, algo, hyper):
    cfg = tiny(tmp_path, algo=algo, hyperparams=hyper, total_steps=128)
    result = T.train(cfg, seed=0, out_dir=tmp_path / algo, test_eval=False)
    assert result.finished and (tmp_path / algo / "model.zip").exists()
    meta = json.loads((tmp_path / algo / "model.json").read_text())
    assert meta["algo"] == algo and meta["flatten_action"] == (algo == "dqn")
    model = T.load_model(result.model_path)
    env = T.make_env("MemGym/Life-Easy-v0", flatten=algo == "dqn")
    obs, _ = env.reset(seed=9000)
    action, _ = model.predict(obs, deterministic=True)
    assert env.action_space.contains(np.asarray(action))
    env.close()


def test_ctrl_c_saves_a_checkpoint_and_exits_130(tmp_path):
    cfg = tiny(tmp_path, total_steps=10_000_000, checkpoint_freq=10_000_000,
               eval={"freq": 10_000_000, "episodes": 1, "baselines": []})
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "train.py"), "--config", str(cfg), "--out", str(out),
         "--no-progress", "--no-test"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # a background shell ignores SIGINT
    )
    try:
        deadline = time.time() + 60
        while not list((out / "tb").rglob("events.out.tfevents.*")):  # training has started
            assert proc.poll() is None, proc.communicate()[1]
            assert time.time() < deadline
            time.sleep(0.2)
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    found = T.latest_checkpoint(out)
    assert found is not None, err
    assert found[1]["reason"] == "interrupted" and found[1]["timesteps"] > 0
    assert "--resume" in err


def test_headline_table_and_paired_difference(tmp_path):
    """`memgym train --headline`: per-run and pooled rows, and the paired difference against the best
    heuristic, whose mean is the difference of the mean returns over the oracle - random range."""
    run = T.train(tiny(tmp_path), seed=0, out_dir=tmp_path / "run", test_eval=False)
    text, data = T.headline([run.run_dir], episodes=3, baselines=["versioned", "write_all"])
    table = data["table"]
    assert {"learned s0", "learned (pooled, 1 runs)", "versioned", "write_all", "random", "oracle"} <= set(table)
    assert table["learned (pooled, 1 runs)"]["normalised"] == pytest.approx(table["learned s0"]["normalised"])
    best = data["best_heuristic"]
    assert best in ("versioned", "write_all") and table[best]["normalised"] >= min(
        table["versioned"]["normalised"], table["write_all"]["normalised"])
    span = table["oracle"]["mean_return"] - table["random"]["mean_return"]
    want = (table["learned s0"]["mean_return"] - table[best]["mean_return"]) / span
    for name in ("learned s0", "learned (mean of 1 runs)"):
        p = data["paired"][name]
        assert p["normalised"] == pytest.approx(want, abs=1e-9)
        assert p["normalised_ci"][0] <= p["normalised"] <= p["normalised_ci"][1]
        assert sum(p["better_worse_equal"]) == 3
    assert f"| learned s0 - {best} |" in text and "Paired on the same seeds" in text


def test_ctrl_c_during_the_warm_start_exits_cleanly(tmp_path, monkeypatch):
    """A Ctrl-C while the warm start runs (minutes with `improve: rollout`) ends the run as interrupted,
    closes the envs and leaves no checkpoint to resume (the warm start is not one)."""
    closed = []
    real_close = T._close_env

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    def close(env, *, interrupted):
        closed.append(interrupted)
        real_close(env, interrupted=interrupted)

    monkeypatch.setattr(T, "pretrain_by_imitation", interrupt)
    monkeypatch.setattr(T, "_close_env", close)
    cfg = tiny(tmp_path, pretrain={"agent": "versioned", "episodes": 1, "epochs": 1})
    result = T.train(cfg, seed=0, out_dir=tmp_path / "run", test_eval=False)
    assert not result.finished and result.stop_reason == "interrupted" and result.model_path is None
    assert closed == [True, True]
    assert T.latest_checkpoint(tmp_path / "run") is None and not (tmp_path / "run" / "model.zip").exists()
    args = argparse.Namespace(headline=None, config=str(cfg), seed=0, out=str(tmp_path / "run2"), quick=False,
                              resume=False, n_envs=None, total_steps=None, stop_after=None, no_progress=True,
                              no_test=True)
    assert T.run(args) == 130
