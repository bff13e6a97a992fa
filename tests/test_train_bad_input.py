"""memgym train / the sb3: agent on bad input: every error names the field and the allowed values,
comes out as `memgym <cmd>: error: ...` with exit code 2 (no traceback), and loses nothing (no run
folder written for a bad recipe, checkpoints left as they were)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import yaml

pytest.importorskip("sb3_contrib")

from test_train import LIFE_EASY, tiny  # noqa: E402

from agents import cli  # noqa: E402
from agents import train as T  # noqa: E402
from agents.train_config import TrainConfig, TrainConfigError  # noqa: E402


def _recipe(**patch) -> dict:
    data = yaml.safe_load(LIFE_EASY.read_text())
    data.update(patch)
    return data


def _snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """A finished tiny run (seconds): checkpoints at 64 and 128 steps (both at a rollout's end: with their
    sessions), model.zip, model.json."""
    tmp = tmp_path_factory.mktemp("run")
    cfg = tiny(tmp, total_steps=128, checkpoint_freq=64)
    result = T.train(cfg, seed=0, out_dir=tmp / "run", test_eval=False)
    assert result.finished
    assert sorted(p.name for p in (result.run_dir / "checkpoints").iterdir()) == [
        "model_128_steps.zip", "model_64_steps.zip", "session_128.pkl", "session_64.pkl", "state_128.json",
        "state_64.json"]
    return result.run_dir


# ------------------------------------------------------------------------------------ 1. the recipe
@pytest.mark.parametrize(
    "patch, needles",
    [
        ({"env": {"id": "MemGym/Life-Easy-v0", "overrides": {"horizn": 3}}},
         ["key 'env.overrides.horizn'", "horizon", "capacity", "n_candidates"]),
        ({"env": {"id": "MemGym/Life-Easy-v0", "overrides": {"horizon": -3}}},
         ["key 'env.overrides.horizon'", "[10, 1000000]", "-3"]),
        ({"env": {"id": "MemGym/Nope-v0"}}, ["key 'env.id'", "MemGym/Life-Easy-v0"]),
        ({"eval": {"baselines": ["random", "nope"]}},
         ["key 'eval.baselines'", "'nope'", "versioned", "write_all", "oracle[-OP,...]", "sb3:PATH"]),
        ({"pretrain": {"agent": "nope"}}, ["key 'pretrain.agent'", "'nope'", "versioned"]),
        # the quick section is checked without --quick too
        ({"quick": {"totl_steps": 3}}, ["unknown key 'quick.totl_steps'", "quick.total_steps"]),
        ({"quick": {"eval": {"every": 3}}}, ["unknown key 'quick.eval.every'", "quick.eval.freq"]),
        ({"quick": {"total_steps": 0}}, ["key 'quick.total_steps' must be an integer >= 1"]),
        ({"quick": {"env": {"overrides": {"horizn": 3}}}}, ["key 'quick.env.overrides.horizn'", "horizon"]),
    ],
)
def test_bad_recipe_names_the_key_and_the_allowed_values(patch, needles):
    with pytest.raises(TrainConfigError) as err:
        TrainConfig.from_dict(_recipe(**patch))
    for needle in needles:
        assert needle in str(err.value)


def test_overrides_valid_only_together_are_accepted():
    """delay_min 30 alone is above the preset's delay_max; with delay_max 40 it is a valid pair."""
    env = {"id": "MemGym/Life-Easy-v0", "overrides": {"delay_min": 30, "delay_max": 40}}
    assert TrainConfig.from_dict(_recipe(env=env)).env_overrides == {"delay_min": 30, "delay_max": 40}
    with pytest.raises(TrainConfigError, match="key 'env.overrides.delay_min'"):
        TrainConfig.from_dict(_recipe(env={"id": "MemGym/Life-Easy-v0", "overrides": {"delay_min": 30}}))


@pytest.mark.parametrize(
    "changes, needle",
    [
        ({"env": {"id": "MemGym/Life-Easy-v0", "overrides": {"horizn": 3}}}, "key 'env.overrides.horizn'"),
        ({"env": {"id": "MemGym/Life-Easy-v0", "overrides": {"horizon": -3}}}, "key 'env.overrides.horizon'"),
        ({"eval": {"freq": 128, "episodes": 1, "test_episodes": 1, "baselines": ["random", "nope"]}},
         "key 'eval.baselines'"),
    ],
)
def test_cli_bad_recipe_fails_before_writing_the_run_folder(tmp_path, capsys, changes, needle):
    out = tmp_path / "run"
    rc = cli.main(["train", "--config", str(tiny(tmp_path, **changes)), "--quick", "--out", str(out),
                   "--no-progress", "--no-test"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("memgym train: error: ") and needle in err and "Traceback" not in err
    assert not out.exists()  # no config.yaml / seeds.json left behind to block the corrected command


# ------------------------------------------------------------------------------------ 2. --headline
@pytest.mark.parametrize(
    "extra, needles",
    [
        (["--set", "horizn=3"], ["--set horizn", "horizon", "capacity"]),
        (["--set", "horizon=-3"], ["--set horizon", "[10, 1000000]"]),
        (["--env", "MemGym/Nope-v0"], ["--env", "MemGym/Life-Easy-v0"]),
        (["--baselines", "random,nope"], ["--baselines", "'nope'", "versioned"]),
        (["--episodes", "0"], ["--episodes must be an integer >= 1"]),
    ],
)
def test_headline_bad_options_are_clean_errors(finished_run, capsys, extra, needles):
    rc = cli.main(["train", "--headline", str(finished_run), *extra])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("memgym train: error: ") and "Traceback" not in err
    for needle in needles:
        assert needle in err


def test_headline_of_a_missing_or_unfinished_run_is_a_clean_error(tmp_path, capsys):
    assert cli.main(["train", "--headline", str(tmp_path / "nope")]) == 2
    assert f"run folder {tmp_path / 'nope'} not found" in capsys.readouterr().err
    assert cli.main(["train", "--headline", str(tmp_path)]) == 2
    assert "holds no model.zip: not a finished run" in capsys.readouterr().err


def test_headline_options_without_headline_are_refused(tmp_path, capsys):
    rc = cli.main(["train", "--config", str(tiny(tmp_path)), "--out", str(tmp_path / "run"), "--set", "horizon=80"])
    assert rc == 2 and "--set applies only with --headline" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------------------------ 3. --resume
@pytest.mark.parametrize("victim", ["checkpoints/state_128.json", "checkpoints/model_128_steps.zip",
                                    "checkpoints/session_128.pkl"])
def test_resume_from_a_corrupt_checkpoint_names_the_file_and_changes_nothing(finished_run, tmp_path, capsys,
                                                                           victim):
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    path = run / victim
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # truncated, as by a full disk or a killed copy
    before = _snapshot(run)
    with pytest.raises(TrainConfigError) as err:
        T.train(None, out_dir=run, resume=True, total_steps=256, test_eval=False)
    msg = str(err.value)
    assert str(path) in msg
    assert "model_64_steps.zip, 64 steps" in msg and "move or delete" in msg  # what to do about it
    assert _snapshot(run) == before  # not even config.yaml's total_steps was rewritten
    assert cli.main(["train", "--resume", "--out", str(run), "--no-progress"]) == 2
    assert str(path) in capsys.readouterr().err
    assert _snapshot(run) == before


def test_resume_after_removing_the_corrupt_checkpoint_continues_from_the_earlier_one(finished_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    (run / "checkpoints" / "state_128.json").write_text("{not json")
    with pytest.raises(TrainConfigError, match="state_128.json"):
        T.train(None, out_dir=run, resume=True, test_eval=False)
    for name in ("state_128.json", "model_128_steps.zip"):  # what the error says to do
        (run / "checkpoints" / name).unlink()
    result = T.train(None, out_dir=run, resume=True, test_eval=False)
    assert result.finished and result.timesteps == 128


def test_resume_with_only_a_corrupt_checkpoint_says_there_is_no_earlier_one(finished_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    for name in ("state_128.json", "model_128_steps.zip"):
        (run / "checkpoints" / name).unlink()
    (run / "checkpoints" / "state_64.json").write_text('{"timesteps": 64}')  # valid JSON, not a state
    with pytest.raises(TrainConfigError, match="state_64.json does not hold this checkpoint's state") as err:
        T.train(None, out_dir=run, resume=True, test_eval=False)
    assert "no earlier checkpoint" in str(err.value)


# ------------------------------------------------------------------------------------ 4. sb3: models of another layout
class _OldLayoutEnv(gym.Env):
    """The Life-Easy spaces with `candidates` of another width: a model trained before the candidate
    features changed (14 per slot, shape (112,), instead of today's)."""

    def __init__(self, real: gym.Env, width: int):
        spaces = dict(real.observation_space.spaces)
        spaces["candidates"] = gym.spaces.Box(-1.0, 1.0, shape=(width,), dtype=np.float32)
        self.observation_space = gym.spaces.Dict(spaces)
        self.action_space = real.action_space


@pytest.fixture(scope="module")
def old_layout_model(tmp_path_factory) -> tuple[Path, tuple, tuple]:
    from sb3_contrib import MaskablePPO

    real = T.make_env("MemGym/Life-Easy-v0")
    old = _OldLayoutEnv(real, 112)
    model = MaskablePPO("MultiInputPolicy", old, n_steps=64, batch_size=32, policy_kwargs={"net_arch": [8]},
                        device="cpu", seed=0)
    path = tmp_path_factory.mktemp("old") / "model.zip"
    model.save(path)
    shapes = (old.observation_space["candidates"].shape, real.observation_space["candidates"].shape)
    real.close()
    assert shapes[0] != shapes[1]
    return path, shapes[0], shapes[1]


def test_sb3_agent_refuses_a_model_of_another_layout_before_acting(old_layout_model, finished_run):
    from agents.bench import evaluate
    from agents.sb3_agent import SB3Agent, SB3ModelError

    path, old, new = old_layout_model
    agent = SB3Agent(path)
    env = T.make_env("MemGym/Life-Easy-v0")
    with pytest.raises(SB3ModelError) as err:
        agent.check_env(env)
    msg = str(err.value)
    assert "'candidates'" in msg and str(old) in msg and str(new) in msg and "another env layout" in msg
    # without attach() the first observation is checked instead of SB3 failing inside predict
    obs, info = env.reset(seed=0)
    with pytest.raises(SB3ModelError, match="'candidates'"):
        SB3Agent(path).act(obs, info)
    env.close()
    with pytest.raises(SB3ModelError, match="'candidates'"):  # the bench path: attach() checks
        evaluate(f"sb3:{path}", "MemGym/Life-Easy-v0", [10_000])
    # a model of this layout passes the same check and plays
    rows = evaluate(f"sb3:{finished_run / 'model.zip'}", {"id": "MemGym/Life-Easy-v0", "overrides": {"horizon": 30}},
                    [10_000])
    assert rows[0]["events"] == 30


def test_bench_cli_reports_a_model_of_another_layout_as_a_clean_error(old_layout_model, tmp_path, capsys):
    path, old, new = old_layout_model
    rc = cli.main(["bench", "--suite", "quick", "--agents", f"sb3:{path}", "--families", "life",
                   "--difficulties", "easy", "--seeds", "1", "--workers", "2", "--set", "horizon=20",
                   "--no-plot", "--no-progress", "--out", str(tmp_path / "bench")])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("memgym bench: error: ") and "'candidates'" in err and str(old) in err
    assert "Traceback" not in err


def test_headline_refuses_a_model_of_another_layout_before_playing(finished_run, old_layout_model, tmp_path,
                                                                    capsys, monkeypatch):
    path, old, new = old_layout_model
    run = tmp_path / "old_run"
    shutil.copytree(finished_run, run)
    shutil.copy(path, run / "model.zip")
    played = []
    monkeypatch.setattr("agents.bench.evaluate", lambda *a, **k: played.append(a) or [])
    assert cli.main(["train", "--headline", str(run), "--episodes", "1"]) == 2
    err = capsys.readouterr().err
    assert "'candidates'" in err and str(old) in err and not played


# ------------------------------------------------------------------------------------ 5. --stop-after
def test_stop_after_is_a_planned_stop_with_exit_code_0(tmp_path, capsys):
    out = tmp_path / "run"
    rc = cli.main(["train", "--config", str(tiny(tmp_path)), "--out", str(out), "--stop-after", "128",
                   "--no-progress", "--no-test"])
    assert rc == 0
    assert T.latest_checkpoint(out)[1]["reason"] == "stop_after" and not (out / "model.zip").exists()
    assert f"--resume --out {out}" in capsys.readouterr().err


# ------------------------------------------------------------------------------------ the train extra
@pytest.mark.parametrize("module", ["torch", "sb3_contrib", "matplotlib", "tensorboard", "rich"])
def test_train_without_the_train_extra_names_it_and_writes_nothing(tmp_path, monkeypatch, capsys, module):
    """Without torch (or SB3, or matplotlib for the curve) `memgym train` died deep inside with a raw
    ModuleNotFoundError traceback and left an empty run folder (or, without matplotlib, after training)."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == module else real(name, *a))
    out = tmp_path / "run"
    rc = cli.main(["train", "--config", str(tiny(tmp_path)), "--quick", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2
    assert "memgym train: error:" in err and "pip install 'memgym[train]'" in err
    assert T.TRAIN_MODULES[module] in err and "Traceback" not in err
    assert not out.exists()


# ------------------------------------------------------------------------------------ 6. unreadable or out-of-range input
def _cli_train(tmp_path, *extra) -> tuple[int, Path]:
    out = tmp_path / "run"
    return cli.main(["train", "--out", str(out), "--no-progress", "--no-test", *extra]), out


@pytest.mark.parametrize(
    "changes, needle",
    [
        ({"total_steps": float("inf")}, "key 'total_steps' must be an integer >= 1, got inf"),
        ({"checkpoint_freq": float("nan")}, "key 'checkpoint_freq' must be an integer >= 1, got nan"),
        ({"eval": {"freq": float("-inf"), "episodes": 1, "baselines": []}}, "key 'eval.freq' must be an integer"),
        ({"pretrain": {"agent": "versioned", "temperature": float("inf")}},
         "key 'pretrain.temperature' must be a finite number > 0, got inf"),
    ],
)
def test_non_finite_numbers_in_the_recipe_are_clean_errors(tmp_path, capsys, changes, needle):
    """int(inf) raised OverflowError and int(nan) ValueError: tracebacks, not the key."""
    rc, out = _cli_train(tmp_path, "--config", str(tiny(tmp_path, **changes)))
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("memgym train: error: ") and needle in err and "Traceback" not in err
    assert not out.exists()


def test_a_config_that_is_a_directory_or_not_utf8_is_a_clean_error(tmp_path, capsys):
    folder = tmp_path / "configs"
    folder.mkdir()
    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes("name: caf\xe9\nenv: MemGym/Life-Easy-v0\n".encode("latin-1"))
    for path, needle in ((folder, "is a directory"), (latin1, "not a UTF-8 text file")):
        rc, out = _cli_train(tmp_path, "--config", str(path))
        err = capsys.readouterr().err
        assert rc == 2 and err.startswith("memgym train: error: ") and "Traceback" not in err
        assert str(path) in err and needle in err
        assert not out.exists()


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--seed", "5000000000"], "--seed must be an integer in [0, 4294967295]"),
        (["--seed", "-1"], "--seed must be an integer in [0, 4294967295]"),
        (["--stop-after", "0"], "--stop-after must be an integer >= 1"),
        (["--stop-after", "-1"], "--stop-after must be an integer >= 1"),
    ],
)
def test_out_of_range_seed_or_stop_after_is_refused_before_anything_is_written(tmp_path, capsys, extra, needle):
    """--seed 5000000000 crashed in NumPy's seeding and left an empty run folder; --stop-after 0 or -1 trained
    one step and wrote a stop checkpoint at step 1."""
    rc, out = _cli_train(tmp_path, "--config", str(tiny(tmp_path)), *extra)
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and "Traceback" not in err
    assert not out.exists()


def test_resume_with_stop_after_at_or_below_the_checkpoint_is_refused_and_changes_nothing(finished_run, tmp_path):
    """--resume --total-steps 512 --stop-after 100 on a run at 128 steps trained one step and wrote a
    checkpoint at 129 (and rewrote config.yaml's total_steps)."""
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    before = _snapshot(run)
    for stop in (100, 128):
        with pytest.raises(TrainConfigError, match=r"--stop-after must be greater than the step count the run "
                                                   r"resumes from \(128, model_128_steps.zip"):
            T.train(None, out_dir=run, resume=True, total_steps=512, stop_after=stop, test_eval=False)
    assert _snapshot(run) == before


# ------------------------------------------------------------------------------------ 7. values only a build shows
@pytest.mark.parametrize(
    "changes, needles",
    [
        ({"hyperparams": {"n_steps": 64, "batch_size": 32, "learning_rate": "abc"}},
         ["key 'hyperparams.learning_rate' must be a number > 0", "'abc'"]),
        ({"hyperparams": {"n_steps": 64, "batch_size": 32, "learning_rate": "3e-4"}},
         ["key 'hyperparams.learning_rate'", "3.0e-4"]),
        ({"hyperparams": {"n_steps": -5, "batch_size": 32}}, ["key 'hyperparams.n_steps' must be an integer >= 1"]),
        ({"hyperparams": {"n_steps": 64, "batch_size": 32, "gamma": 5}},
         ["key 'hyperparams.gamma' must be a number in (0, 1]"]),
        ({"hyperparams": {"n_steps": 64, "batch_size": 0}}, ["key 'hyperparams.batch_size' must be an integer >= 1"]),
        ({"policy_kwargs": {"foo": 1}}, ["key 'policy_kwargs.foo' is not an argument", "net_arch", "ortho_init"]),
        ({"policy_kwargs": {"ortho_init": "yes"}}, ["key 'policy_kwargs.ortho_init' must be true or false"]),
        ({"device": "tpu"}, ["key 'device' must be one of cpu, cuda, cuda:N, mps, auto", "'tpu'"]),
        ({"policy": "MlpPolicy"}, ["key 'policy' must be MultiInputPolicy", "Dict"]),
        ({"env": {"id": "CartPole-v1"}}, ["key 'env.id'", "not a MemGym env", "MemGym/Life-Easy-v0"]),
        # an endless env without a horizon: the first validation episode never ended (the run hung)
        ({"env": {"id": "MemGym/Life-Endless-v0"}}, ["key 'env.overrides.horizon'", "never ends", "horizon: 800"]),
        ({"eval": {"freq": 128, "episodes": 1, "baselines": ["random", "sb3:/nope/model.zip"]}},
         ["key 'eval.baselines'", "sb3:/nope/model.zip"]),
        ({"eval": {"freq": 128, "episodes": 1, "baselines": ["memsys:nope.mod:make"]}},
         ["key 'eval.baselines'", "memsys:nope.mod:make"]),
        ({"pretrain": {"agent": "memsys:nope"}}, ["key 'pretrain.agent'", "memsys:nope"]),
        # only building the model shows these: the error names the key that fails on its own
        ({"algo": "ppo", "hyperparams": {"n_steps": 1, "batch_size": 32}},
         ["key 'hyperparams.n_steps' times n_envs must be >= 2 for ppo"]),
        ({"algo": "a2c", "hyperparams": {"n_steps": 5, "vf_coef": "x"}}, ["key 'hyperparams.vf_coef'"]),
        ({"policy_kwargs": {"optimizer_kwargs": {"betas": 5}}}, ["key 'policy_kwargs.optimizer_kwargs' is rejected"]),
    ],
)
def test_recipe_values_that_crashed_the_run_are_refused_before_anything_is_written(tmp_path, capsys, changes,
                                                                                     needles):
    """Each of these passed validation, crashed with a traceback after config.yaml and seeds.json were
    written, and that folder then refused the corrected command ("already holds a run")."""
    rc, out = _cli_train(tmp_path, "--config", str(tiny(tmp_path, **changes)))
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("memgym train: error: ") and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err
    assert not out.exists()


def test_a_folder_holding_the_start_of_another_run_says_what_differs(tmp_path, capsys):
    """A run folder with config.yaml and seeds.json but no checkpoint (a run stopped before its first one) of
    another recipe: the corrected command was told to pass --resume, and --resume to drop it."""
    first = tiny(tmp_path, "first")
    out = tmp_path / "run"
    stopped = T.train(first, seed=0, out_dir=out, test_eval=False)
    shutil.rmtree(out / "checkpoints")
    for name in ("model.zip", "model.json", "evaluations.csv", "evaluations.npz", "learning_curve.png"):
        (out / name).unlink()
    shutil.rmtree(out / "tb")
    assert stopped.finished and sorted(p.name for p in out.iterdir()) == ["baselines.json", "config.yaml", "seeds.json"]
    other = tiny(tmp_path, "other", hyperparams={"n_steps": 32, "batch_size": 32, "n_epochs": 1})
    rc, _ = _cli_train(tmp_path, "--config", str(other), "--seed", "1")
    err = capsys.readouterr().err
    assert rc == 2 and "holds the start of another run" in err and "--resume" not in err
    assert "differs in name, hyperparams.n_steps, seed" in err and f"delete {out}" in err


# ------------------------------------------------------------------------------------ 8. evaluations.csv / .npz on resume
def test_resume_drops_a_torn_last_evaluation_row(finished_run, tmp_path, capsys):
    """A kill while a row was appended leaves a last line without its line end: --resume crashed on it
    (TypeError: int() of None) after rewriting config.yaml. It is dropped now, and the run extends."""
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    rows = T.read_evaluations(run / "evaluations.csv")
    with (run / "evaluations.csv").open("a") as fh:
        fh.write("300,0.5,0.1")
    assert T.read_evaluations(run / "evaluations.csv") == rows  # never read as a row
    result = T.train(None, out_dir=run, resume=True, total_steps=192, test_eval=False)
    assert result.finished and result.timesteps == 192
    assert "the last line was cut off ('300,0.5,0.1'" in capsys.readouterr().err
    after = T.read_evaluations(run / "evaluations.csv")
    assert after[:len(rows)] == rows and [r["timesteps"] for r in after] == [128, 192]
    assert (run / "evaluations.csv").read_text().endswith("\n")


@pytest.mark.parametrize(
    "damage, needles",
    [
        (lambda p: p.write_text(p.read_text().replace("\n", "\nnot,a,row\n", 1)),
         ["evaluations.csv: line 2 is not what memgym train writes", "expected the 8 fields"]),
        (lambda p: p.write_text("steps,return\n1,2\n"), ["evaluations.csv: line 1", "the header must be timesteps,"]),
        (lambda p: p.with_suffix(".npz").write_bytes(p.with_suffix(".npz").read_bytes()[:40]),
         ["evaluations.npz: cannot be read as SB3's record", "move it away"]),
    ],
)
def test_resume_with_a_corrupt_evaluation_record_names_it_and_changes_nothing(finished_run, tmp_path, damage,
                                                                            needles):
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    damage(run / "evaluations.csv")
    before = _snapshot(run)
    with pytest.raises(TrainConfigError) as err:
        T.train(None, out_dir=run, resume=True, total_steps=256, test_eval=False)
    for needle in needles:
        assert needle in str(err.value)
    assert "nothing was changed" in str(err.value).lower()
    assert _snapshot(run) == before  # config.yaml's total_steps was not rewritten


# ------------------------------------------------------------------------------------ 9. --headline --out
def test_headline_out_must_be_a_file_and_is_checked_before_playing(finished_run, tmp_path, capsys, monkeypatch):
    """--out DIR crashed with IsADirectoryError after every episode had been played."""
    played = []
    real = T._evaluate_with_bar
    monkeypatch.setattr(T, "_evaluate_with_bar", lambda *a: played.append(a[1]) or real(*a))
    rc = cli.main(["train", "--headline", str(finished_run), "--episodes", "1", "--no-progress", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and "--out with --headline is the JSON file" in err and f"{tmp_path} is a directory" in err
    assert not played and "Traceback" not in err
    out = tmp_path / "new" / "headline.json"
    assert cli.main(["train", "--headline", str(finished_run), "--episodes", "1", "--no-progress", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert played and {"random", "oracle", "learned s0"} <= set(data["table"]) and data["seeds"] == [10_000]


# ------------------------------------------------------------------------------------ 10. options that were ignored
@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--seed", "7"], "--seed 7 is not the seed of the run"),
        (["--n-envs", "2"], "--n-envs 2 is not the run's n_envs (1"),
        (["--quick"], "is not a --quick run"),
        (["--config", "OTHER"], "differs from"),
    ],
)
def test_resume_refuses_options_that_disagree_with_the_run(finished_run, tmp_path, capsys, extra, needle):
    """`--resume --out RUN --config other.yaml --seed 7 --n-envs 2` exited 0 and went on with the run's
    own recipe, seed and n_envs: the options were silently ignored."""
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    other = tiny(tmp_path, "other", hyperparams={"n_steps": 32, "batch_size": 32, "n_epochs": 1}, total_steps=128,
                 checkpoint_freq=64)
    extra = [str(other) if e == "OTHER" else e for e in extra]
    before = _snapshot(run)
    rc = cli.main(["train", "--resume", "--out", str(run), "--no-progress", "--no-test", "--total-steps", "192", *extra])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and "Traceback" not in err, err
    if "--config" in extra:
        assert "hyperparams.n_steps" in err and "total_steps" not in err.split("differs from")[1]
    assert _snapshot(run) == before


def test_resume_accepts_the_starting_command_again(finished_run, tmp_path):
    """The command that started the run plus --resume (same recipe, seed, n_envs) is fine."""
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    recipe = finished_run.parent / "tiny.yaml"
    rc = cli.main(["train", "--resume", "--out", str(run), "--config", str(recipe), "--seed", "0", "--n-envs", "1",
                   "--no-progress", "--no-test"])
    assert rc == 0 and T.latest_checkpoint(run)[1]["timesteps"] == 128


def test_resume_with_the_starting_command_finds_the_default_run_folder(finished_run, tmp_path, monkeypatch, capsys):
    """docs/train.md: "the command that started it, plus --resume, works"; for a run in its default folder
    (no --out) that was `--resume needs --out`. The folder is derived as a fresh run derives it."""
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "runs" / "tiny_s0"
    shutil.copytree(finished_run, run)
    recipe = finished_run.parent / "tiny.yaml"
    base = ["train", "--config", str(recipe), "--resume", "--no-progress", "--no-test"]
    assert cli.main([*base, "--seed", "0", "--total-steps", "192"]) == 0
    assert T.latest_checkpoint(run)[1]["timesteps"] == 192 and json.loads((run / "model.json").read_text())["timesteps"] == 192
    assert cli.main(base) == 0  # --seed defaults to 0, as for a fresh run
    assert T.latest_checkpoint(run)[1]["timesteps"] == 192
    before = _snapshot(tmp_path)
    for extra, folder in ((["--seed", "3"], "tiny_s3"), (["--quick"], "tiny_quick_s0")):
        assert cli.main([*base, *extra]) == 2
        err = capsys.readouterr().err
        assert f"cannot resume: {Path('runs') / folder}/config.yaml not found" in err and "default run folder" in err, err
    rc = cli.main(["train", "--resume", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and "--resume needs --out" in err and "--config" in err and "Traceback" not in err, err
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("extra", [["--seed", "3"], ["--config", "x.yaml"], ["--quick"], ["--resume"], ["--n-envs", "2"],
                                   ["--total-steps", "5"], ["--stop-after", "5"], ["--no-test"]])
def test_headline_refuses_training_options(finished_run, capsys, extra):
    rc = cli.main(["train", "--headline", str(finished_run), *extra])
    err = capsys.readouterr().err
    assert rc == 2 and f"{extra[0]} applies only to training, not with --headline" in err


# ------------------------------------------------------------------------- review of the fixes above
def test_a_device_that_cannot_build_the_model_is_blamed_not_a_hyperparameter(tmp_path, capsys):
    """With a device torch lacks (mps on Linux) the first hyperparameter tried alone was named."""
    import torch

    if torch.backends.mps.is_available():  # pragma: no cover - macOS with Metal
        pytest.skip("mps works here")
    rc, out = _cli_train(tmp_path, "--config", str(tiny(tmp_path, device="mps")))
    err = capsys.readouterr().err
    assert rc == 2 and "key 'device'" in err and "'mps'" in err and "hyperparams." not in err, err
    assert not out.exists()


def test_dqn_takes_train_freq_as_the_validator_advertises_and_refuses_a_net_arch_mapping(tmp_path, capsys):
    """`train_freq: [1, episode]` passed validation and SB3 refused the list (it wants a tuple); a
    `net_arch` mapping was advertised for DQN, whose Q-network indexes a list (KeyError: 0)."""
    dqn = {"algo": "dqn", "hyperparams": {"learning_starts": 16, "buffer_size": 500, "batch_size": 16,
                                          "train_freq": [1, "episode"]}}
    T.check_recipe(TrainConfig.from_yaml(tiny(tmp_path, **dqn)))  # builds
    with pytest.raises(TrainConfigError, match=r"net_arch' must be a list of positive ints \(DQN"):
        TrainConfig.from_yaml(tiny(tmp_path, **dqn, policy_kwargs={"net_arch": {"qf": [64]}}))


def test_resume_with_the_starting_recipe_after_an_extension_or_a_new_baseline(finished_run, tmp_path):
    """`--resume --config RECIPE` was refused for a run extended with --total-steps (config.yaml holds the
    extended budget) and for a recipe that only gained a baseline (baselines train nothing)."""
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    recipe = finished_run.parent / "tiny.yaml"
    assert cli.main(["train", "--resume", "--out", str(run), "--total-steps", "192", "--no-progress", "--no-test"]) == 0
    assert cli.main(["train", "--resume", "--out", str(run), "--config", str(recipe), "--no-progress",
                     "--no-test"]) == 0
    data = yaml.safe_load(recipe.read_text())
    data.setdefault("eval", {})["baselines"] = ["random", "oracle", "abstain", "versioned"]
    more = tmp_path / "tiny.yaml"
    more.write_text(yaml.safe_dump(data))
    assert cli.main(["train", "--resume", "--out", str(run), "--config", str(more), "--no-progress",
                     "--no-test"]) == 0


def test_the_do_nothing_floor_is_not_the_best_heuristic():
    """`abstain` (stores nothing) was picked as the "best heuristic" once it outscored them; it is a
    floor, compared apart in the headline (`paired_floors`)."""
    assert not T.is_heuristic("abstain") and T.is_heuristic("versioned")
    summary = {"abstain": {"mean_return": 5.0}, "versioned": {"mean_return": 1.0}, "random": {"mean_return": -9.0}}
    assert T.best_heuristic(summary) == "versioned"


@pytest.mark.parametrize("algo", ["maskable_ppo", "ppo"])
@pytest.mark.parametrize("hyper, needle", [({"n_steps": 64, "batch_size": 1}, "key 'hyperparams.batch_size' must be >= 2"),
                                           ({"n_steps": 1, "batch_size": 2}, "key 'hyperparams.n_steps' times n_envs")])
def test_a_ppo_minibatch_of_one_is_refused_before_anything_is_written(tmp_path, capsys, algo, hyper, needle):
    """MaskablePPO took batch_size 1 (or a one-step rollout), wrote the run folder and died mid-run on NaN
    logits (one advantage has no std)."""
    rc, out = _cli_train(tmp_path, "--config", str(tiny(tmp_path, algo=algo, hyperparams=hyper)))
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and "Traceback" not in err, err
    assert not out.exists()


@pytest.mark.parametrize("env_id", ["Foo-v0", "CartPole-v1"])
def test_headline_and_recipe_name_the_memgym_ids_for_an_unknown_or_foreign_env(finished_run, tmp_path, capsys, env_id):
    rc = cli.main(["train", "--headline", str(finished_run), "--env", env_id])
    err = capsys.readouterr().err
    assert rc == 2 and "MemGym/Life-Easy-v0" in err and "family:" not in err, err
    rc, out = _cli_train(tmp_path, "--config", str(tiny(tmp_path, env={"id": env_id})))
    err = capsys.readouterr().err
    assert rc == 2 and "MemGym/Life-Easy-v0" in err, err


def test_a_maskable_ppo_rollout_leaving_a_last_minibatch_of_one_is_refused(tmp_path, capsys):
    """n_steps 33, batch_size 32: the rollout's last minibatch holds one sample, which MaskablePPO
    normalises to NaN (SB3's PPO skips it): the run died mid-way after writing its folder."""
    hyper = {"n_steps": 33, "batch_size": 32, "n_epochs": 1}
    rc, out = _cli_train(tmp_path, "--config", str(tiny(tmp_path, hyperparams=hyper)))
    err = capsys.readouterr().err
    assert rc == 2 and "leaves a last minibatch of one sample" in err, err
    assert not out.exists()
    with pytest.warns(UserWarning, match="truncated mini-batch of size 1"):  # PPO copes (and says so)
        T.check_recipe(TrainConfig.from_yaml(tiny(tmp_path, algo="ppo", hyperparams=hyper)))


@pytest.mark.parametrize("body, needle", [('raise RuntimeError("boom in add")', "RuntimeError: boom in add"),
                                          ("raise SystemExit(3)", "SystemExit: 3")])
def test_headline_reports_a_failing_baseline_in_one_line(finished_run, tmp_path, monkeypatch, capsys, body, needle):
    """A raising memsys: baseline gave a raw traceback (exit 1), a sys.exit() one ended the command silently."""
    import textwrap

    module = "failing_sys_exit" if "SystemExit" in body else "failing_sys_raise"  # (imports are cached)
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(f'''
        from agents.memory_system import TinyMemorySystem

        class Fails(TinyMemorySystem):
            def add(self, text, metadata):
                {body}
        '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    rc = cli.main(["train", "--headline", str(finished_run), "--episodes", "1", "--baselines",
                   f"memsys:{module}:Fails,random", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and f"agent 'memsys:{module}:Fails' failed while playing" in err and needle in err, err
    assert "Traceback" not in err


def test_results_of_episodes_without_questions_are_strict_json_and_print_n_a():
    """With horizon=10 most test episodes ask nothing: summary.md, the headline table and the log printed
    "nan" and baselines.json / test_eval.json / pretrain.json / the headline --out file held NaN, which
    JSON parsers other than Python's refuse; the bench writes null and prints n/a for the same episodes."""
    import json
    import math

    import numpy as np

    from agents import train

    text = train._strict_json({"mean_accuracy": float("nan"), "r": np.float32(1.5), "n": [np.int64(3), math.inf]})
    assert json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c))) == \
        {"mean_accuracy": None, "r": 1.5, "n": [3, None]}
    rows = {"oracle": [{"return": 2.0, "accuracy": float("nan")}], "random": [{"return": 0.0, "accuracy": None}],
            "versioned": [{"return": 1.0, "accuracy": float("nan")}]}
    table = train.summary_table(train.summarise(rows))
    assert "nan" not in table and table.count("| n/a |") == 3


# ------------------------------------------------------------------------------------ 11. --out that cannot be a folder
@pytest.mark.parametrize("where, needle", [("file", "a file of that name exists"),
                                           ("file/sub", "is a file, not a folder"),
                                           ("file/sub/deeper", "is a file, not a folder")])
def test_out_that_is_or_lies_under_a_file_is_refused_before_the_checks(tmp_path, capsys, monkeypatch, where, needle):
    """`--out FILE` ended in a FileExistsError traceback (exit 1) after the recipe's checks, `--out FILE/sub` in
    NotADirectoryError; bench's --out gives one line with exit 2. Checked before the recipe is built."""
    (tmp_path / "file").write_text("keep me\n")
    built = []
    monkeypatch.setattr(T, "check_recipe", lambda cfg: built.append(cfg))
    out = tmp_path / where
    rc = cli.main(["train", "--config", str(tiny(tmp_path)), "--out", str(out), "--no-progress", "--no-test"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith(f"memgym train: error: --out {out}: ") and needle in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and not built
    if where != "file":
        assert str(tmp_path / "file") in err
    assert (tmp_path / "file").read_text() == "keep me\n" and sorted(p.name for p in tmp_path.iterdir()) == \
        ["file", "tiny.yaml"]


def test_out_in_a_folder_that_is_not_writable_is_refused(tmp_path, capsys, monkeypatch):
    """The writability check (root writes anywhere, so os.access is what is faked here)."""
    real = T.os.access
    monkeypatch.setattr(T.os, "access", lambda p, mode, **kw: False if Path(p) == tmp_path else real(p, mode, **kw))
    out = tmp_path / "run"
    rc = cli.main(["train", "--config", str(tiny(tmp_path)), "--out", str(out), "--no-progress", "--no-test"])
    err = capsys.readouterr().err
    assert rc == 2 and f"--out {out}: " in err and f"{tmp_path} is not writable" in err, err
    assert not out.exists()


# ------------------------------------------------------------------------------------ 12. --baselines' names
def test_headline_baselines_are_stripped_and_split_outside_brackets(finished_run, tmp_path, capsys):
    """`--baselines "versioned, abstain"` kept " abstain": not the do-nothing floor (FLOORS), so it could be
    named the best heuristic and the floor's paired table was missing; `oracle[-LINK,-FORGET]` was cut at
    its inner comma. Split and stripped as `memgym bench --agents` does."""
    out = tmp_path / "h.json"
    rc = cli.main(["train", "--headline", str(finished_run), "--episodes", "1", "--no-progress", "--out", str(out),
                   "--baselines", " versioned , abstain,, oracle[-LINK,-FORGET] "])
    assert rc == 0, capsys.readouterr().err
    data = json.loads(out.read_text())
    assert {"versioned", "abstain", "oracle[-LINK,-FORGET]", "random", "oracle"} <= set(data["table"])
    assert not [name for name in data["table"] if name != name.strip()]
    assert data["best_heuristic"] == "versioned" and list(data["paired_floors"]) == ["abstain"]
    for bad, needle in ((" , ", "--baselines: empty list"), ("oracle[-LINK", "a '[' is never closed")):
        rc = cli.main(["train", "--headline", str(finished_run), "--baselines", bad])
        err = capsys.readouterr().err
        assert rc == 2 and err.startswith("memgym train: error: ") and needle in err and "Traceback" not in err, err


def test_recipe_baselines_and_headline_api_names_are_stripped(finished_run, tmp_path):
    """A recipe's `eval.baselines: [" abstain"]` passed the check (agent specs are stripped there) and then
    counted as a heuristic; so did headline(baselines=[" abstain"])."""
    assert T.is_heuristic("versioned") and not T.is_heuristic("abstain")
    cfg = TrainConfig.from_yaml(tiny(tmp_path, eval={"freq": 64, "episodes": 1, "baselines": ["random", " abstain "]}))
    assert cfg.eval.baselines == ("random", "abstain")
    _, data = T.headline([finished_run], episodes=1, baselines=[" versioned", "abstain ", " "], progress=False)
    assert set(data["table"]) >= {"versioned", "abstain"} and data["best_heuristic"] == "versioned"
    assert list(data["paired_floors"]) == ["abstain"]


def test_resume_on_another_env_layout_does_not_advise_an_earlier_checkpoint(finished_run, tmp_path):
    """Every checkpoint of a run shares its env layout: the error advised moving the newest checkpoint away
    to resume from the previous one, which failed the same way and cost the newest checkpoint."""
    import shutil

    import yaml

    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    cfg["env"]["overrides"] = {**(cfg["env"].get("overrides") or {}), "n_candidates": 4, "n_recent": 2}
    (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    before = sorted(p.name for p in (run / "checkpoints").iterdir())
    with pytest.raises(T.TrainConfigError) as err:
        T.train(None, out_dir=run, resume=True, total_steps=256, test_eval=False)
    msg = str(err.value)
    assert "another env layout" in msg and "all share that layout" in msg, msg
    assert "previous checkpoint" not in msg and "move or delete" not in msg, msg
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == before


def test_a_missing_recipe_says_where_the_shipped_recipes_are(tmp_path):
    """An installed copy run outside the source tree has no configs/train/: the error said only "not found"."""
    from agents.train_config import TrainConfig, TrainConfigError

    with pytest.raises(TrainConfigError) as exc:
        TrainConfig.from_yaml(tmp_path / "configs" / "train" / "life_easy.yaml")
    assert str(exc.value) == (f"training config not found: {tmp_path / 'configs' / 'train' / 'life_easy.yaml'} "
                              "(the shipped recipes, e.g. configs/train/life_easy.yaml, are in memgym's source "
                              "tree: run from a checkout, or give the path of a copy)")


@pytest.mark.parametrize("agent, needle", [("memsys:agents.memory_system:TinyMemorySystem", "is a memsys: memory system"),
                                           ("undeclared_copy_agent", "does not declare that it can be copied")])
def test_rollout_improvement_refuses_a_warm_start_agent_that_cannot_be_copied(tmp_path, capsys, monkeypatch, agent,
                                                                               needle):
    """`pretrain.improve: rollout` branches by copy.deepcopy of `pretrain.agent`: with a memsys: system the recipe
    passed the checks and the run crashed in the warm start with a raw deepcopy traceback (a client holding a
    lock), or its gains were silently wrong (memories in a server). Refused before anything is written, naming
    both keys; improve: none still takes such an agent."""
    from agents.base import _REGISTRY, BaseAgent

    class Undeclared(BaseAgent):  # (BaseAgent's default: not declared copyable)
        name = "undeclared_copy_agent"

        def decide(self, observation, info):
            return 0, 0

    monkeypatch.setitem(_REGISTRY, "undeclared_copy_agent", (Undeclared, "test"))
    pre = {"agent": agent, "episodes": 1, "epochs": 1, "improve": "rollout"}
    rc, out = _cli_train(tmp_path, "--config", str(tiny(tmp_path, pretrain=pre)))
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("memgym train: error: ") and "Traceback" not in err, err
    assert "key 'pretrain.improve': rollout" in err and "key 'pretrain.agent'" in err and needle in err, err
    assert not out.exists()
    cfg = TrainConfig.from_yaml(tiny(tmp_path, pretrain={**pre, "improve": "none"}))
    T.check_agents(cfg)  # (no error)


# ------------------------------------------------------------------------------------ s15: the allowed overrides
def test_an_unknown_override_lists_only_the_settings_as_bench_does(finished_run, tmp_path, capsys):
    """--headline --set and a recipe's env.overrides listed family and difficulty as allowed, then refused
    them ("family names the world's preset, it is not a setting of it"); memgym bench lists only the rest."""
    import ast

    from agents import bench
    from agents.train_config import check_env
    from world.config import ConfigError, _check_keys

    with pytest.raises(ConfigError) as err:
        _check_keys({"horizn": 5}, bench.LABEL_FIELDS)
    bench_allowed = ast.literal_eval(str(err.value).split("allowed keys: ")[1])
    with pytest.raises(TrainConfigError) as err:
        check_env("MemGym/Life-Easy-v0", {"horizn": 5})
    allowed = str(err.value).split("; allowed: ")[1].split(", ")
    assert allowed == bench_allowed and "horizon" in allowed
    assert "family" not in allowed and "difficulty" not in allowed

    assert cli.main(["train", "--headline", str(finished_run), "--set", "horizn=5"]) == 2
    err = capsys.readouterr().err
    assert "memgym train: error: --set horizn: unknown WorldConfig field 'horizn'; allowed: horizon, " in err
    assert "family" not in err and "difficulty" not in err
    recipe = tiny(tmp_path, env={"id": "MemGym/Life-Easy-v0", "overrides": {"horizn": 5}})
    assert cli.main(["train", "--config", str(recipe), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "key 'env.overrides.horizn': unknown WorldConfig field 'horizn'; allowed: horizon, " in err
    assert "family" not in err and "difficulty" not in err and not (tmp_path / "run").exists()
