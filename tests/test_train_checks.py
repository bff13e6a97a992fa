"""memgym train: defects of the second training audit (DQN replay buffers on disk and on resume, recipes
SB3 refuses only while training, what a resume checks before it changes anything, a stochastic evaluation
at a checkpoint's step, duplicate recipe keys, --quick on resume, unreadable model.json). Tiny recipes."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
import yaml

pytest.importorskip("sb3_contrib")

from test_train import tiny  # noqa: E402
from test_train_audit import _results, _same_model  # noqa: E402

from agents import cli  # noqa: E402
from agents import train as T  # noqa: E402
from agents.train_config import TrainConfig, TrainConfigError  # noqa: E402


def _snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """A finished tiny run: checkpoints at 64 and 128 steps, model.zip of 128 steps, no final test."""
    tmp = tmp_path_factory.mktemp("finished")
    result = T.train(tiny(tmp, total_steps=128, checkpoint_freq=64), seed=0, out_dir=tmp / "run", test_eval=False)
    assert result.finished and result.timesteps == 128
    return result.run_dir


def _copy(run: Path, tmp_path: Path) -> Path:
    shutil.copytree(run, tmp_path / "run")
    return tmp_path / "run"


# ------------------------------------------------------------------------ DQN replay buffers
DQN = {"algo": "dqn", "hyperparams": {"learning_starts": 32, "buffer_size": 5000, "train_freq": 4, "batch_size": 16},
       "total_steps": 128, "checkpoint_freq": 32, "eval": {"freq": 64, "episodes": 1, "test_episodes": 1,
                                                             "baselines": []}}


def test_dqn_keeps_the_newest_two_replay_buffers_with_their_filled_rows_and_resumes_exactly(tmp_path):
    """Every DQN checkpoint pickled SB3's whole preallocated replay buffer (1.85 GB with the default
    buffer_size) and every one was kept. Now only the newest two checkpoints keep one (the second for a
    fall-back from a broken newest one), holding the filled rows only; loaded (by memgym or SB3's load_replay_buffer) it is the whole buffer again, and a stopped and
    resumed run is still the uninterrupted one, exactly."""
    from stable_baselines3 import DQN as SB3DQN

    cfg = tiny(tmp_path, **DQN)
    whole = T.train(cfg, seed=0, out_dir=tmp_path / "whole", test_eval=False)
    ckpts = whole.run_dir / "checkpoints"
    assert sorted(p.name for p in ckpts.glob("replay_buffer_*")) == ["replay_buffer_128_steps.pkl",
                                                                     "replay_buffer_96_steps.pkl"]
    assert T._checkpoint_steps(whole.run_dir) == [32, 64, 96, 128]

    model = SB3DQN.load(ckpts / "model_128_steps.zip")
    model.load_replay_buffer(ckpts / "replay_buffer_128_steps.pkl")
    buf = model.replay_buffer
    assert (buf.buffer_size, buf.pos, buf.full) == (5000, 128, False)
    assert buf.rewards.shape == (5000, 1) and not buf.rewards[128:].any()
    assert all(arr.shape[0] == 5000 and not arr[128:].any() for arr in buf.observations.values())
    whole_bytes = sum(arr.nbytes for arr in (*buf.observations.values(), *buf.next_observations.values(),
                                             buf.actions, buf.rewards, buf.dones, buf.timeouts))
    # the file holds the 128 filled rows of 5000 (about 3% of the arrays), not the whole buffer
    assert (ckpts / "replay_buffer_128_steps.pkl").stat().st_size < 0.04 * whole_bytes

    out = tmp_path / "sliced"
    first = T.train(cfg, seed=0, out_dir=out, stop_after=64, test_eval=False)
    assert first.stop_reason == "stop_after" and first.timesteps == 64
    assert sorted(p.name for p in (out / "checkpoints").glob("replay_buffer_*")) == ["replay_buffer_32_steps.pkl",
                                                                                     "replay_buffer_64_steps.pkl"]
    last = T.train(None, out_dir=out, resume=True, test_eval=False)
    assert last.finished and last.timesteps == 128
    assert _same_model(last.model_path, whole.model_path) and _results(out) == _results(whole.run_dir)
    assert sorted(p.name for p in (out / "checkpoints").glob("replay_buffer_*")) == ["replay_buffer_128_steps.pkl",
                                                                                     "replay_buffer_96_steps.pkl"]


def test_dqn_resume_checks_the_replay_buffer_before_changing_anything(tmp_path):
    """A truncated replay buffer crashed the resume with an UnpicklingError after config.yaml had been
    rewritten for --total-steps; a missing one was skipped, and DQN went on from an empty buffer."""
    out = tmp_path / "run"
    assert T.train(tiny(tmp_path, **DQN), seed=0, out_dir=out, stop_after=64, test_eval=False).timesteps == 64
    replay = out / "checkpoints" / "replay_buffer_64_steps.pkl"
    replay.write_bytes(replay.read_bytes()[:1000])
    before = _snapshot(out)
    with pytest.raises(TrainConfigError, match="cannot be read") as err:
        T.train(None, out_dir=out, resume=True, total_steps=192, test_eval=False)
    assert f"checkpoint file {replay} cannot be read" in str(err.value)
    assert "to resume from the previous checkpoint (model_32_steps.zip, 32 steps)" in str(err.value)
    assert _snapshot(out) == before
    replay.unlink()
    before = _snapshot(out)
    with pytest.raises(TrainConfigError, match=f"checkpoint file {replay} is missing"):
        T.train(None, out_dir=out, resume=True, total_steps=192, test_eval=False)
    assert _snapshot(out) == before


def _move_checkpoint(run: Path, steps: int, to: Path) -> None:
    """What the resume error says to do with a broken checkpoint: move its files out of checkpoints/."""
    to.mkdir(exist_ok=True)
    for name in (f"model_{steps}_steps.zip", f"state_{steps}.json", f"session_{steps}.pkl",
                 f"replay_buffer_{steps}_steps.pkl"):
        if (run / "checkpoints" / name).exists():
            shutil.move(run / "checkpoints" / name, to / name)


def test_dqn_run_falls_back_to_the_previous_checkpoint_when_the_newest_is_broken(tmp_path):
    """A DQN run kept the replay buffer of its newest checkpoint only: with that checkpoint broken, the
    error said there was no earlier checkpoint to resume from, and the run was lost. The newest two keep
    one now: the error names the previous checkpoint, and moving the broken one away resumes from it (at a
    rollout's end: the uninterrupted run, exactly). One older than those two still has none, and says so."""
    cfg = tiny(tmp_path, **DQN)
    whole = T.train(cfg, seed=0, out_dir=tmp_path / "whole", test_eval=False).run_dir
    run = tmp_path / "run"
    assert T.train(cfg, seed=0, out_dir=run, stop_after=96, test_eval=False).timesteps == 96
    assert T._checkpoint_steps(run) == [32, 64, 96]
    assert sorted(p.name for p in (run / "checkpoints").glob("replay_buffer_*")) == \
        ["replay_buffer_64_steps.pkl", "replay_buffer_96_steps.pkl"]

    newest = run / "checkpoints" / "model_96_steps.zip"
    newest.write_bytes(newest.read_bytes()[:1000])  # truncated, as by a full disk
    before = _snapshot(run)
    with pytest.raises(TrainConfigError, match="cannot be loaded") as err:
        T.train(None, out_dir=run, resume=True, test_eval=False)
    msg = str(err.value)
    assert "to resume from the previous checkpoint (model_64_steps.zip, 64 steps), move or delete" in msg, msg
    assert str(run / "checkpoints" / "replay_buffer_96_steps.pkl") in msg and "no earlier" not in msg, msg
    assert _snapshot(run) == before

    # the previous one broken too: the one before it (32 steps) is older than the newest two, bufferless
    older = tmp_path / "older"
    shutil.copytree(run, older)
    _move_checkpoint(older, 96, tmp_path / "aside_older")
    (older / "checkpoints" / "state_64.json").write_text("{not json")
    with pytest.raises(TrainConfigError, match="state_64.json is not readable JSON") as err:
        T.train(None, out_dir=older, resume=True, test_eval=False)
    msg = str(err.value)
    assert "the previous checkpoint (model_32_steps.zip, 32 steps) has no replay buffer" in msg, msg
    assert "move or delete" not in msg and "restore the file" in msg, msg

    _move_checkpoint(run, 96, tmp_path / "aside")  # as the error says; then the same command again
    again = T.train(None, out_dir=run, resume=True, test_eval=False)
    assert again.finished and again.timesteps == 128
    assert _same_model(again.model_path, whole / "model.zip") and _results(run) == _results(whole)
    assert sorted(p.name for p in (run / "checkpoints").glob("replay_buffer_*")) == \
        ["replay_buffer_128_steps.pkl", "replay_buffer_96_steps.pkl"]


# ------------------------------------------------------------------------ recipes SB3 refuses while training
@pytest.mark.parametrize("changes, needles", [
    ({"algo": "a2c", "hyperparams": {"n_steps": 1, "normalize_advantage": True}},
     ["key 'hyperparams.n_steps' times n_envs must be >= 2 for a2c with normalize_advantage: true", "got 1"]),
    ({"algo": "dqn", "n_envs": 2, "hyperparams": {"buffer_size": 1000, "learning_starts": 10,
                                                  "train_freq": [1, "episode"]}},
     ["key 'hyperparams.train_freq' [1, 'episode']", "with one env only; got n_envs 2"]),
])
def test_recipes_sb3_refuses_only_while_training_are_refused_before_anything_is_written(tmp_path, capsys, changes,
                                                                                      needles):
    """A2C normalising the advantages of a one-step rollout (NaN logits at the second rollout) and DQN
    training per episode on two envs (SB3's assert in its first rollout) passed the recipe check and
    crashed mid-run with a traceback, after the run folder was written."""
    out = tmp_path / "run"
    rc = cli.main(["train", "--config", str(tiny(tmp_path, **changes)), "--out", str(out), "--no-progress",
                   "--no-test"])
    err = capsys.readouterr().err
    assert rc == 2 and all(n in err for n in needles) and "Traceback" not in err, err
    assert not out.exists()


@pytest.mark.filterwarnings("ignore:std")  # the one-step rollout's std: the failure itself
def test_a_run_that_fails_before_its_first_checkpoint_does_not_block_the_corrected_command(tmp_path, monkeypatch):
    """A run that crashed before its first checkpoint left config.yaml, seeds.json, baselines.json, tb/
    and an empty checkpoints/, and the corrected recipe into the same --out was refused ("holds the start
    of another run"). Its output is now moved to crashed-1/ and the corrected command starts there."""
    monkeypatch.setattr(T, "check_recipe", lambda cfg: None)  # a value that no check knows of yet
    bad = tiny(tmp_path, name="bad", algo="a2c", hyperparams={"n_steps": 1, "normalize_advantage": True})
    out = tmp_path / "run"
    with pytest.raises(ValueError, match="invalid values"):  # NaN logits in the second rollout
        T.train(bad, seed=0, out_dir=out, test_eval=False)
    assert sorted(p.name for p in out.iterdir()) == ["crashed-1"]
    assert {"config.yaml", "seeds.json", "baselines.json", "checkpoints"} <= {p.name for p in (out / "crashed-1").iterdir()}
    monkeypatch.undo()
    good = tiny(tmp_path, name="good", algo="a2c", hyperparams={"n_steps": 16}, total_steps=64, checkpoint_freq=64,
                eval={"freq": 64, "episodes": 1, "test_episodes": 1, "baselines": []})
    result = T.train(good, seed=0, out_dir=out, test_eval=False)
    assert result.finished and result.timesteps == 64 and (out / "crashed-1").is_dir()


# ------------------------------------------------------------------------ what a resume reads
def test_resume_checks_baselines_json_before_training(finished_run, tmp_path, capsys):
    """A truncated baselines.json was not checked: the resume trained, replaced model.zip, then crashed with
    a JSONDecodeError traceback before the curve and the final test (and so did every later resume)."""
    run = _copy(finished_run, tmp_path)
    path = run / "baselines.json"
    path.write_bytes(path.read_bytes()[:10])
    before = _snapshot(run)
    assert cli.main(["train", "--resume", "--out", str(run), "--total-steps", "192", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"memgym train: error: {path}: not the run's baselines (not readable JSON" in err, err
    assert "delete it and run the same command again" in err and "Traceback" not in err
    assert _snapshot(run) == before
    path.write_text('{"seeds": [9000], "summary": {"random": {"mean_return": "x"}}}')  # JSON, not a summary
    with pytest.raises(TrainConfigError, match="not the run's baselines .expected"):
        T.train(None, out_dir=run, resume=True, total_steps=192, test_eval=False)
    path.unlink()  # as the error says: recomputed
    result = T.train(None, out_dir=run, resume=True, total_steps=192, test_eval=False)
    assert result.finished and result.timesteps == 192 and T.read_baselines(path) == {}


def test_resume_refuses_total_steps_below_the_step_count_it_resumes_from(finished_run, tmp_path, capsys):
    """--resume --total-steps 64 on a 128-step run trained nothing but recorded total_steps 64 (and an
    `extended:` entry) in config.yaml beside the 128-step model."""
    run = _copy(finished_run, tmp_path)
    before = _snapshot(run)
    assert cli.main(["train", "--resume", "--out", str(run), "--total-steps", "64", "--no-progress", "--no-test"]) == 2
    err = capsys.readouterr().err
    assert (f"--total-steps 64 is below the step count the run resumes from (128, model_128_steps.zip in {run})"
            in err), err
    assert _snapshot(run) == before


def test_resume_with_a_recipe_of_other_baselines_says_they_are_not_played(finished_run, tmp_path, capsys):
    """A --config that adds a baseline was accepted, and the final test played the run's old list without a
    word (the docs said every key but the name was compared). The run keeps its list; a note says so."""
    run = _copy(finished_run, tmp_path)
    recipe = finished_run.parent / "tiny.yaml"
    assert cli.main(["train", "--resume", "--out", str(run), "--config", str(recipe), "--no-progress",
                     "--no-test"]) == 0
    assert "note:" not in capsys.readouterr().err
    data = yaml.safe_load(recipe.read_text())
    data["eval"]["baselines"] = ["random", "versioned"]
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(data))
    assert cli.main(["train", "--resume", "--out", str(run), "--config", str(tmp_path / "tiny.yaml"),
                     "--no-progress", "--no-test"]) == 0
    err = capsys.readouterr().err
    assert (f"note: --config {tmp_path / 'tiny.yaml'} adds random, versioned in eval.baselines; the resume keeps "
            f"the run's own list (none, in {run / 'config.yaml'})") in err, err
    assert yaml.safe_load((run / "config.yaml").read_text())["eval"]["baselines"] == []


# ------------------------------------------------------------------------ a stochastic evaluation at a checkpoint
def test_resume_from_a_scheduled_checkpoint_with_a_stochastic_evaluation_at_its_step_is_exact(tmp_path):
    """A checkpoint and an evaluation due at the same rollout's end were both run after its update, the
    checkpoint first: its session held the torch RNG state from before the evaluation, which a stochastic
    evaluation (eval.deterministic: false) draws from. A resume from it (the row kept, the evaluation not
    repeated) trained on with another RNG stream. The evaluation now runs first."""
    cfg = tiny(tmp_path, total_steps=128, checkpoint_freq=64,
               eval={"freq": 64, "episodes": 2, "test_episodes": 1, "baselines": [], "deterministic": False})
    whole = T.train(cfg, seed=0, out_dir=tmp_path / "whole", test_eval=False)
    assert [r["timesteps"] for r in _results(whole.run_dir)] == [64, 128]
    killed = tmp_path / "killed"  # as if killed right after the scheduled checkpoint at 64 steps
    shutil.copytree(whole.run_dir, killed)
    for name in ("model_128_steps.zip", "state_128.json", "session_128.pkl"):
        (killed / "checkpoints" / name).unlink()
    for name in ("model.zip", "model.json", "learning_curve.png"):
        (killed / name).unlink()
    resumed = T.train(None, out_dir=killed, resume=True, test_eval=False)
    assert resumed.finished and resumed.timesteps == 128
    assert _same_model(resumed.model_path, whole.model_path) and _results(killed) == _results(whole.run_dir)


# ------------------------------------------------------------------------ a key given twice
def test_a_key_given_twice_in_a_recipe_or_config_yaml_is_an_error_naming_it_and_both_lines(finished_run, tmp_path):
    """PyYAML keeps the last of two equal keys: a recipe's second `hyperparams:` silently dropped the
    first's n_steps and batch_size (and its first total_steps was lost)."""
    recipe = tmp_path / "dup.yaml"
    recipe.write_text("env: {id: MemGym/Life-Easy-v0}\ntotal_steps: 300000\nhyperparams: {n_steps: 64, batch_size: 32}\n"
                      "n_envs: 1\ntotal_steps: 128\nhyperparams: {learning_rate: 0.0001}\n")
    with pytest.raises(TrainConfigError) as err:
        TrainConfig.from_yaml(recipe)
    assert str(err.value).startswith(f"{recipe}: key 'total_steps' is given twice (lines 2 and 5)")
    recipe.write_text("env: {id: MemGym/Life-Easy-v0}\nhyperparams:\n  n_steps: 64\n  batch_size: 32\n  n_steps: 128\n")
    with pytest.raises(TrainConfigError, match=r"key 'hyperparams.n_steps' is given twice \(lines 3 and 5\)"):
        TrainConfig.from_yaml(recipe)
    run = _copy(finished_run, tmp_path)
    (run / "config.yaml").write_text((run / "config.yaml").read_text() + "n_envs: 2\n")
    with pytest.raises(TrainConfigError, match="config.yaml: key 'n_envs' is given twice .*it is the run's recipe"):
        T.train(None, out_dir=run, resume=True, test_eval=False)


# ------------------------------------------------------------------------ --quick on resume
def test_a_quick_run_resumes_with_its_config_without_quick_again(tmp_path, capsys):
    """A --quick run resumed with its --config but without --quick was refused: the recipe was compared in
    its full form, and the error listed the keys of its quick: section ("hyperparams.n_epochs, total_steps")
    without a word of --quick. As for --seed, an option not given now means the run's."""
    recipe = tiny(tmp_path, total_steps=128, checkpoint_freq=64, quick={"total_steps": 128, "hyperparams": {
        "n_steps": 64, "batch_size": 32, "n_epochs": 2}})
    out = tmp_path / "run"
    assert T.train(recipe, seed=0, out_dir=out, quick=True, stop_after=64, test_eval=False).timesteps == 64
    assert cli.main(["train", "--config", str(recipe), "--resume", "--out", str(out), "--no-progress", "--no-test"]) == 0
    assert T.read_evaluations(out / "evaluations.csv")[-1]["timesteps"] == 128
    other = tiny(tmp_path, name="other", total_steps=128, checkpoint_freq=64, quick={"total_steps": 128})  # n_epochs 1
    assert cli.main(["train", "--config", str(other), "--resume", "--out", str(out), "--no-progress", "--no-test"]) == 2
    err = capsys.readouterr().err
    assert f"differs from {out / 'config.yaml'} in hyperparams.n_epochs, compared with its quick: section merged: " \
        "the run is a --quick run)" in err, err


# ------------------------------------------------------------------------ an unreadable model.json
@pytest.mark.parametrize("content", [b"{oops", b"\xff\xfe{", b"[1, 2]"])
def test_an_unreadable_model_json_is_skipped_by_the_sb3_agent_and_named_by_load_model(finished_run, tmp_path,
                                                                                      content):
    """The sb3: agent skipped a model.json that is not JSON but raised a bare UnicodeDecodeError (naming no
    file) for one that is not UTF-8; load_model raised JSONDecodeError / UnicodeDecodeError on both."""
    from agents.sb3_agent import SB3Agent

    (tmp_path / "m").mkdir()
    model = tmp_path / "m" / "model.zip"
    shutil.copy(finished_run / "model.zip", model)
    (tmp_path / "m" / "model.json").write_bytes(content)
    assert SB3Agent(model).algo == "maskable_ppo"  # detected from the zip, as without a model.json
    with pytest.raises(TrainConfigError) as err:
        T.load_model(model)
    assert str(err.value).startswith(f"{tmp_path / 'm' / 'model.json'}: cannot tell how to load {model}")
