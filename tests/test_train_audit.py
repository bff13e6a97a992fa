"""memgym train: defects found by the training audits (resume of a finished checkpoint, Ctrl-C in the warm
start, the last evaluation row and checkpoint vs model.zip, TensorBoard accuracy steps, --headline keys,
progress bars, --stop-after and resume vs the uninterrupted run). Tiny recipes, seconds each."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

from test_train import ROOT, tiny  # noqa: E402

from agents import train as T  # noqa: E402
from agents.train_config import TrainConfig, TrainConfigError  # noqa: E402


def _evaluate_on_validation(model_path, cfg: TrainConfig) -> float:
    """Mean return of a saved model on the validation seeds, as the evaluation callback plays them."""
    from sb3_contrib.common.maskable.evaluation import evaluate_policy

    env = T._vec_env([T._EnvFactory(cfg, T._SeedList(cfg.eval.seeds))], False)
    try:
        rewards, _ = evaluate_policy(T.load_model(model_path), env, n_eval_episodes=cfg.eval.episodes,
                                     deterministic=cfg.eval.deterministic, return_episode_rewards=True)
    finally:
        env.close()
    return float(np.mean(rewards))


def _same_weights(a, b) -> bool:
    pa, pb = T.load_model(a).policy.state_dict(), T.load_model(b).policy.state_dict()
    return all(np.array_equal(pa[k].numpy(), pb[k].numpy()) for k in pa)


def _torch_members(path) -> dict:
    """Every torch file of a saved model (policy weights, optimizer state, ...), loaded."""
    import torch

    with zipfile.ZipFile(path) as z:
        return {n: torch.load(io.BytesIO(z.read(n)), weights_only=False) for n in z.namelist() if n.endswith(".pth")}


def _same_model(a, b) -> bool:
    """Bit-identical policy weights and optimizer state (every tensor, exactly)."""
    import torch

    def same(x, y) -> bool:
        if isinstance(x, torch.Tensor):
            return isinstance(y, torch.Tensor) and x.dtype == y.dtype and torch.equal(x, y)
        if isinstance(x, dict):
            return isinstance(y, dict) and x.keys() == y.keys() and all(same(x[k], y[k]) for k in x)
        if isinstance(x, list | tuple):
            return isinstance(y, list | tuple) and len(x) == len(y) and all(same(i, j) for i, j in zip(x, y))
        return x == y

    ma, mb = _torch_members(a), _torch_members(b)
    return ma.keys() == mb.keys() and "policy.pth" in ma and same(ma, mb)


def _results(run) -> list[dict]:
    """The evaluation rows without their wall time."""
    return [{k: v for k, v in r.items() if k != "wall_time_s"} for r in T.read_evaluations(run / "evaluations.csv")]


# ------------------------------------------------------------------------ 1. resume at or past total_steps
def test_resume_of_a_checkpoint_past_total_steps_finishes_the_run(tmp_path):
    """total_steps 200 with 64-step rollouts: training overshoots to 256 and checkpoints there. Killed
    after that checkpoint (model.zip not yet written), --resume writes the final artefacts without
    training further or adding an evaluation row; resuming the finished run again does the same."""
    cfg = tiny(tmp_path, total_steps=200)
    out = tmp_path / "run"
    first = T.train(cfg, seed=0, out_dir=out, test_eval=False)
    assert first.finished and first.timesteps == 256
    rows = T.read_evaluations(out / "evaluations.csv")
    assert [r["timesteps"] for r in rows] == [128, 256]
    for name in ("model.zip", "model.json", "learning_curve.png"):
        (out / name).unlink()

    again = T.train(None, out_dir=out, resume=True, test_eval=True)
    assert again.finished and again.timesteps == 256 and (out / "model.zip").is_file()
    assert (out / "test_eval.json").is_file() and (out / "learning_curve.png").is_file()
    assert T.read_evaluations(out / "evaluations.csv") == rows  # no duplicate row for 256
    assert _same_weights(out / "model.zip", out / "checkpoints" / "model_256_steps.zip")

    third = T.train(None, out_dir=out, resume=True, test_eval=False)  # an already finished run
    assert third.finished and third.timesteps == 256
    assert T.read_evaluations(out / "evaluations.csv") == rows


# ------------------------------------------------------------------------ 2. Ctrl-C in the warm start
def test_same_command_after_ctrl_c_in_the_warm_start_starts_the_run(tmp_path, monkeypatch):
    cfg = tiny(tmp_path, pretrain={"agent": "versioned", "episodes": 1, "epochs": 1})
    out = tmp_path / "run"
    real = T.pretrain_by_imitation

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(T, "pretrain_by_imitation", interrupt)
    stopped = T.train(cfg, seed=0, out_dir=out, test_eval=False)
    assert stopped.stop_reason == "interrupted" and T.latest_checkpoint(out) is None

    monkeypatch.setattr(T, "pretrain_by_imitation", real)
    # another recipe or seed in that folder is still refused (it holds this run's config)
    with pytest.raises(TrainConfigError, match="holds the start of another run .*differs in seed"):
        T.train(cfg, seed=1, out_dir=out, test_eval=False)
    result = T.train(cfg, seed=0, out_dir=out, test_eval=False)  # "run the same command again"
    assert result.finished and result.timesteps == 256 and (out / "pretrain.json").is_file()
    # a finished (or checkpointed) run is never started over
    with pytest.raises(TrainConfigError, match="already holds a run"):
        T.train(cfg, seed=0, out_dir=out, test_eval=False)


def test_same_command_after_a_kill_before_the_first_checkpoint_starts_the_run(tmp_path):
    """A run killed (SIGKILL: no handler runs) during RL before its first checkpoint left TensorBoard
    events and evaluation rows but no checkpoint: the same command was refused ("already holds a run")
    and --resume found no checkpoint, so the folder had to be cleared by hand. Now --resume says what to
    do, and the same command starts the run again with the partial output moved to partial-1/."""
    cfg = tiny(tmp_path)
    out = tmp_path / "run"
    first = T.train(cfg, seed=0, out_dir=out, test_eval=False)
    rows = T.read_evaluations(out / "evaluations.csv")
    # what a kill between the first evaluation and the first checkpoint leaves behind
    for path in (out / "checkpoints").iterdir():
        path.unlink()
    for name in ("model.zip", "model.json", "learning_curve.png", "evaluations.npz"):
        (out / name).unlink(missing_ok=True)
    (out / "evaluations.csv").write_text((out / "evaluations.csv").read_text().splitlines()[0] + "\n")
    tb_files = sorted(p.relative_to(out / "tb") for p in (out / "tb").rglob("*") if p.is_file())

    with pytest.raises(TrainConfigError, match="without --resume to start it again"):
        T.train(None, out_dir=out, resume=True, test_eval=False)
    with pytest.raises(TrainConfigError, match="holds the start of another run"):  # another seed: still refused
        T.train(cfg, seed=1, out_dir=out, test_eval=False)
    again = T.train(cfg, seed=0, out_dir=out, test_eval=False)
    assert again.finished and again.timesteps == first.timesteps
    def results(rs):
        return [{k: v for k, v in r.items() if k != "wall_time_s"} for r in rs]

    assert results(T.read_evaluations(out / "evaluations.csv")) == results(rows)  # the same run, from the start
    kept = out / "partial-1"
    assert sorted(p.relative_to(kept / "tb") for p in (kept / "tb").rglob("*") if p.is_file()) == tb_files
    assert (kept / "evaluations.csv").is_file() and (kept / "checkpoints").is_dir()
    with pytest.raises(TrainConfigError, match="already holds a run"):  # now checkpointed
        T.train(cfg, seed=0, out_dir=out, test_eval=False)


# ------------------------------------------------------------------------ 3. last row = model.zip
def test_last_evaluation_row_and_checkpoint_are_the_saved_model(tmp_path):
    """The last evaluation (256) and checkpoint (256) land on the end of the last rollout: both must
    describe the policy after that rollout's update, i.e. model.zip."""
    cfg_path = tiny(tmp_path, hyperparams={"n_steps": 64, "batch_size": 32, "n_epochs": 4, "learning_rate": 0.01})
    out = tmp_path / "run"
    result = T.train(cfg_path, seed=0, out_dir=out, test_eval=False)
    cfg = TrainConfig.from_yaml(cfg_path)
    rows = T.read_evaluations(out / "evaluations.csv")
    assert [r["timesteps"] for r in rows] == [128, 256]
    assert _same_weights(result.model_path, out / "checkpoints" / "model_256_steps.zip")
    assert rows[-1]["mean_return"] == pytest.approx(_evaluate_on_validation(result.model_path, cfg), abs=1e-9)
    npz = np.load(out / "evaluations.npz")
    assert list(npz["timesteps"]) == [128, 256]
    assert float(np.mean(npz["results"][-1])) == pytest.approx(rows[-1]["mean_return"], abs=1e-9)


# ------------------------------------------------------------------------ 4. TensorBoard accuracy
def test_tensorboard_accuracy_has_the_steps_and_values_of_the_evaluations(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "run"
    # evaluations at 96 (inside a 64-step rollout), 192 (at a rollout's end) and 256 (after learn())
    T.train(tiny(tmp_path, total_steps=200, eval={"freq": 96, "episodes": 2, "test_episodes": 1, "baselines": []}),
            seed=0, out_dir=out, test_eval=False)
    rows = T.read_evaluations(out / "evaluations.csv")
    steps = [r["timesteps"] for r in rows]
    assert steps == [96, 192, 256]
    (events,) = list((out / "tb").rglob("events.out.tfevents.*"))
    acc = EventAccumulator(str(events.parent))
    acc.Reload()
    reward = acc.Scalars("eval/mean_reward")
    accuracy = acc.Scalars("eval/mean_accuracy")
    assert [e.step for e in reward] == steps
    assert [e.step for e in accuracy] == steps
    assert [e.value for e in accuracy] == pytest.approx([r["mean_accuracy"] for r in rows], abs=1e-6)


# ------------------------------------------------------------------------ 5. --headline keys
def test_headline_reports_every_run_even_with_the_same_seed(tmp_path, capsys):
    run = T.train(tiny(tmp_path), seed=0, out_dir=tmp_path / "a", test_eval=False)
    shutil.copytree(run.run_dir, tmp_path / "b")
    capsys.readouterr()
    text, data = T.headline([tmp_path / "a", tmp_path / "b"], episodes=2, baselines=["write_all"], progress=True)
    assert "memgym train --headline" in capsys.readouterr().err  # the progress bar (write_all, random, oracle, a, b)
    table = data["table"]
    assert {"learned a", "learned b", "learned (pooled, 2 runs)"} <= set(table)
    assert table["learned (pooled, 2 runs)"]["episodes"] == 4
    assert "| learned a |" in text and "| learned b |" in text
    assert "learned s0" not in table
    assert "Note:" not in text and "Trained on" not in text and data["recipes_differ_in"] == []  # one recipe
    # distinct seeds keep the short labels
    other = T.train(tiny(tmp_path), seed=1, out_dir=tmp_path / "c", test_eval=False)
    _, data = T.headline([run.run_dir, other.run_dir], episodes=1, baselines=["write_all"])
    assert {"learned s0", "learned s1", "learned (pooled, 2 runs)"} <= set(data["table"])


# ------------------------------------------------------------------------ 7. progress bars
def test_final_test_and_headline_show_a_progress_bar_when_asked(tmp_path, capsys):
    cfg = TrainConfig.from_yaml(tiny(tmp_path))
    T.evaluate_agents(["write_all", "random"], cfg, [10_000, 10_001], progress=True)
    err = capsys.readouterr().err
    assert "final test" in err and "/4 [" in err and "episodes/s" in err
    T.evaluate_agents(["write_all", "random"], cfg, [10_000, 10_001], progress=False)
    assert capsys.readouterr().err == ""


# ------------------------------------------------------------------------ 7. the last checkpoint mid-rollout
def test_a_run_ends_on_a_checkpoint_of_its_final_policy_and_resume_keeps_model_zip(tmp_path):
    """total_steps 200, checkpoints every 100, 64-step rollouts: the schedule's checkpoints (100, 200) fall
    inside rollouts and training ends at 256. The run now also checkpoints its final policy at 256. A run
    without that checkpoint (trained before, or the file lost) used to be 'resumed' from 200: model.zip
    was replaced by the older policy and the 256 evaluation row dropped. Now --resume keeps both."""
    cfg = tiny(tmp_path, total_steps=200, checkpoint_freq=100)
    out = tmp_path / "run"
    first = T.train(cfg, seed=0, out_dir=out, test_eval=False)
    assert first.finished and first.timesteps == 256
    assert T._checkpoint_steps(out)[-1] == 256
    assert _same_weights(out / "model.zip", out / "checkpoints" / "model_256_steps.zip")
    rows = T.read_evaluations(out / "evaluations.csv")
    assert rows[-1]["timesteps"] == 256
    final = tmp_path / "final.zip"
    shutil.copy(out / "model.zip", final)

    for name in ("model_256_steps.zip", "state_256.json"):  # a run as trained before the fix
        (out / "checkpoints" / name).unlink()
    (out / "learning_curve.png").unlink()
    again = T.train(None, out_dir=out, resume=True, test_eval=False)
    assert again.finished and again.timesteps == 256
    assert _same_weights(out / "model.zip", final)
    assert T.read_evaluations(out / "evaluations.csv") == rows
    assert (out / "learning_curve.png").is_file()  # what was missing is written
    assert T._checkpoint_steps(out)[-1] == 200  # (no checkpoint claims a seed position it does not know)

    # extending such a run past model.zip would have to start from 200: refused, nothing changed
    with pytest.raises(TrainConfigError, match="model.zip holds 256 steps but the last checkpoint only 200"):
        T.train(None, out_dir=out, resume=True, total_steps=600, test_eval=False)
    assert _same_weights(out / "model.zip", final)


# ------------------------------------------------------------------------ 8. headline statistics (audit)
def _fake_headline(monkeypatch, runs: int, baselines: list[str]):
    """headline() with synthetic returns: every agent's return on a seed is its level plus that seed's
    difficulty (shared by all agents); every learned run plays exactly alike."""
    from agents.sb3_agent import SB3Agent

    rng = np.random.default_rng(0)
    base = {s: rng.normal(0, 3) for s in range(10_000, 10_050)}
    level = {"random": -2.0, "oracle": 12.0, "versioned": 5.0, "oracle[-LINK]": 11.5}

    def fake_eval(bench, name, env, seeds, bar):
        lvl = 6.0 if name.startswith("sb3:") else level[name]
        return [{"return": lvl + base[s], "accuracy": 0.5, "seed": s} for s in seeds]

    monkeypatch.setattr(T, "_evaluate_with_bar", fake_eval)
    monkeypatch.setattr(T, "_finished_run", lambda r: {"env": {"id": "MemGym/Life-Easy-v0"},
                                                      "seed": int(str(r)[-1]), "train_wall_time_s": 1})
    monkeypatch.setattr(T, "_run_config", lambda r: {"eval": {"baselines": ["versioned"]}})
    monkeypatch.setattr(SB3Agent, "__init__", lambda self, p: None)
    monkeypatch.setattr(SB3Agent, "check_env", lambda self, env: None)
    return T.headline([f"/x/r{i}" for i in range(runs)], episodes=50, progress=False, baselines=baselines), fake_eval


def test_pooled_ci_of_identical_runs_is_one_runs_ci(monkeypatch):
    """Three runs that play alike hold no more information than one: the pooled CI was ~sqrt(3) narrower
    than each run's (it bootstrapped the 150 replays of 50 seeds as independent episodes)."""
    (_, data), _ = _fake_headline(monkeypatch, 3, ["versioned"])
    table = data["table"]
    pooled, one = table["learned (pooled, 3 runs)"], table["learned s0"]
    assert pooled["normalised"] == pytest.approx(one["normalised"])
    assert pooled["normalised_ci"] == pytest.approx(one["normalised_ci"])
    assert pooled["episodes"] == 150


def test_the_best_heuristic_is_never_a_privileged_or_learned_agent(monkeypatch):
    """An ablated oracle among the baselines (allowed) was called the best heuristic, and the learned
    policy was paired against it."""
    (text, data), fake_eval = _fake_headline(monkeypatch, 1, ["versioned", "oracle[-LINK]"])
    assert data["best_heuristic"] == "versioned" and "Best heuristic: versioned" in text
    eps = {n: fake_eval(None, n, None, list(range(10_000, 10_050)), None)
           for n in ["sb3:m.zip", "random", "oracle", "versioned", "oracle[-LINK]"]}
    assert T.best_heuristic(T.summarise(eps)) == "versioned"
    assert not T.is_heuristic("memsys:pkg.mod:make") and not T.is_heuristic("sb3:x.zip")


# ------------------------------------------------------------------------ 9. --stop-after, then --resume
def test_stop_after_then_resume_equals_the_uninterrupted_run(tmp_path):
    """--stop-after returned from the rollout's last step before its update: the stop checkpoint (and the
    evaluation at that step) held the policy of one rollout earlier, and the resume re-seeded the RNGs and
    reset the envs. Now a session stops at the end of the rollout reaching N, after its update, and saves
    the session (envs mid-episode, RNG states): stopped inside a rollout (100 -> 128), resumed, stopped on a
    rollout's end (256), resumed to the end, the run is the uninterrupted one, exactly."""
    cfg = tiny(tmp_path, total_steps=384)
    whole = T.train(cfg, seed=2, out_dir=tmp_path / "whole", test_eval=False)
    assert whole.finished and whole.timesteps == 384

    out = tmp_path / "sliced"
    first = T.train(cfg, seed=2, out_dir=out, stop_after=100, test_eval=False)
    assert first.stop_reason == "stop_after" and first.timesteps == 128  # the end of the rollout reaching 100
    assert _same_model(out / "checkpoints" / "model_128_steps.zip", whole.run_dir / "checkpoints" / "model_128_steps.zip")
    assert _results(out) == _results(whole.run_dir)[:1]
    second = T.train(None, out_dir=out, resume=True, stop_after=256, test_eval=False)
    assert second.stop_reason == "stop_after" and second.timesteps == 256
    last = T.train(None, out_dir=out, resume=True, test_eval=False)
    assert last.finished and last.timesteps == 384
    assert _same_model(last.model_path, whole.model_path)
    assert _results(out) == _results(whole.run_dir) and [r["timesteps"] for r in _results(out)] == [128, 256, 384]


def test_stop_after_at_or_past_total_steps_is_a_normal_finish(tmp_path):
    """--stop-after 256 with total_steps 256 counted as finished (model.zip written) but stopped before the
    last update, so model.zip was not the uninterrupted run's policy."""
    cfg = tiny(tmp_path)
    whole = T.train(cfg, seed=1, out_dir=tmp_path / "whole", test_eval=False)
    for stop in (256, 1000):
        run = T.train(cfg, seed=1, out_dir=tmp_path / f"stop{stop}", stop_after=stop, test_eval=False)
        assert run.finished and run.stop_reason is None and run.timesteps == 256
        assert _same_model(run.model_path, whole.model_path)
        assert _results(run.run_dir) == _results(whole.run_dir)


# ------------------------------------------------------------------------ 10. --quick's default run folder
def test_quick_and_full_runs_of_a_recipe_have_their_own_default_folders(tmp_path, monkeypatch):
    """--quick and the full run both defaulted to runs/<name>_s<seed>: after a quick try the full run was
    refused ("already holds a run: pass --resume", which would have extended the quick recipe)."""
    cfg = tiny(tmp_path, total_steps=128, quick={"total_steps": 64, "eval": {"freq": 64}})
    monkeypatch.chdir(tmp_path)
    quick = T.train(cfg, seed=4, quick=True, test_eval=False)
    assert quick.finished and quick.run_dir == Path("runs") / "tiny_quick_s4" and quick.timesteps == 64
    full = T.train(cfg, seed=4, test_eval=False)
    assert full.finished and full.run_dir == Path("runs") / "tiny_s4" and full.timesteps == 128
    assert T.train(None, out_dir=quick.run_dir, resume=True, test_eval=False).timesteps == 64  # still its own run


# ------------------------------------------------------------------------ 11. interrupts outside RL
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_during_the_baselines_exits_130_and_says_to_run_the_command_again(tmp_path, sig):
    """SIGTERM while the baselines played gave exit 143 and only "Terminated"; SIGINT exit 130 and only
    "memgym train: interrupted": no word on what to do (the docs: code 130, run the same command again)."""
    cfg = tiny(tmp_path, eval={"freq": 128, "episodes": 900, "test_episodes": 1,
                               "baselines": ["mem0", "generative_agents"]})  # ~30 s of baselines
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "agents.cli", "train", "--config", str(cfg), "--out", str(out), "--no-progress",
         "--no-test"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # a background shell ignores SIGINT
    )
    try:
        deadline = time.time() + 60
        while not (out / "seeds.json").exists():  # written just before the baselines start
            assert proc.poll() is None, proc.communicate()[1]
            assert time.time() < deadline
            time.sleep(0.1)
        time.sleep(0.5)
        assert proc.poll() is None
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted during the baselines" in err and "run the same command again" in err, err
    assert not (out / "baselines.json").exists() and T.latest_checkpoint(out) is None


def test_an_interrupt_during_the_final_test_says_how_to_finish_the_run(tmp_path, monkeypatch, capsys):
    real = T.evaluate_agents

    def interrupt_the_test(agents, cfg, seeds, **kwargs):
        if seeds[0] >= T.TEST_SEED_START:
            raise KeyboardInterrupt
        return real(agents, cfg, seeds, **kwargs)

    monkeypatch.setattr(T, "evaluate_agents", interrupt_the_test)
    cfg = tiny(tmp_path, total_steps=128)
    out = tmp_path / "run"
    stopped = T.train(cfg, seed=0, out_dir=out)
    assert not stopped.finished and stopped.stop_reason == "interrupted" and stopped.timesteps == 128
    assert f"finish the run (model.zip, the curve, the final test) with --resume --out {out}" in capsys.readouterr().err
    monkeypatch.setattr(T, "evaluate_agents", real)
    done = T.train(None, out_dir=out, resume=True)
    assert done.finished and done.timesteps == 128 and (out / "test_eval.json").is_file()


def test_extending_a_finished_run_equals_training_that_long_with_two_envs(tmp_path):
    """total_steps 100 with two subprocess envs (64-step rollouts) ends at 128 on a checkpoint of its own,
    saved with its session (that save once read the envs after they were closed: OSError). Extended with
    --resume --total-steps 192, the run is exactly the one trained to 192 from the start."""
    common = {"n_envs": 2, "checkpoint_freq": 50, "hyperparams": {"n_steps": 32, "batch_size": 32, "n_epochs": 1},
              "eval": {"freq": 64, "episodes": 1, "test_episodes": 1, "baselines": []}}
    run = T.train(tiny(tmp_path, "short", total_steps=100, **common), seed=0, out_dir=tmp_path / "run", test_eval=False)
    assert run.finished and run.timesteps == 128
    assert T.latest_checkpoint(run.run_dir)[1]["reason"] == "final"
    assert (run.run_dir / "checkpoints" / "session_128.pkl").is_file()
    longer = T.train(None, out_dir=run.run_dir, resume=True, total_steps=192, test_eval=False)
    whole = T.train(tiny(tmp_path, "long", total_steps=192, **common), seed=0, out_dir=tmp_path / "whole",
                    test_eval=False)
    assert longer.finished and longer.timesteps == whole.timesteps == 192
    assert _same_model(longer.model_path, whole.model_path)
    assert _results(run.run_dir) == _results(whole.run_dir) and len(_results(whole.run_dir)) == 3


# ------------------------------------------------------------------------ test results of another model
def test_a_resume_that_replaces_model_zip_sets_the_old_test_results_aside(tmp_path):
    """`--resume --total-steps N --no-test` on a tested run replaced model.zip and model.json but left
    test_eval.json and summary.md ("128 steps") in place, describing a model that is no longer model.zip.
    A resume that keeps the policy keeps them; one that replaces it renames them after the old model's steps."""
    from agents import cli

    cfg = tiny(tmp_path, total_steps=128, checkpoint_freq=64)
    out = tmp_path / "run"
    assert T.train(cfg, seed=0, out_dir=out, test_eval=True).finished
    test_eval, summary = (out / "test_eval.json").read_bytes(), (out / "summary.md").read_bytes()
    assert b"seed 0, 128 steps" in summary

    # finishing the same run again trains nothing: model.zip's policy, its test results stay
    assert cli.main(["train", "--resume", "--out", str(out), "--no-test", "--no-progress"]) == 0
    assert (out / "test_eval.json").read_bytes() == test_eval and (out / "summary.md").read_bytes() == summary

    assert cli.main(["train", "--resume", "--out", str(out), "--total-steps", "192", "--no-test", "--no-progress"]) == 0
    assert json.loads((out / "model.json").read_text())["timesteps"] == 192
    assert not (out / "test_eval.json").exists() and not (out / "summary.md").exists()
    assert (out / "test_eval_128_steps.json").read_bytes() == test_eval
    assert (out / "summary_128_steps.md").read_bytes() == summary

    # with the test, the new model's results are written (the set-aside ones stay)
    assert cli.main(["train", "--resume", "--out", str(out), "--total-steps", "256", "--no-progress"]) == 0
    assert b"seed 0, 256 steps" in (out / "summary.md").read_bytes() and (out / "test_eval.json").is_file()
    assert (out / "summary_128_steps.md").read_bytes() == summary and not (out / "summary_192_steps.md").exists()


# ------------------------------------------------------------------------ 12. interrupts that train nothing
def test_an_interrupt_while_learn_sets_up_saves_nothing_and_the_same_command_starts_the_run(tmp_path, monkeypatch,
                                                                                          capsys):
    """A Ctrl-C / SIGTERM before SB3 gave the callbacks the model (here in the training env's first reset,
    inside learn()) raised AttributeError from the interrupt's checkpoint, and the run folder was moved to
    crashed-1/ as a failed run. It is an interrupt with nothing to save: the same command starts again."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    real_reset = DummyVecEnv.reset
    calls = []

    def reset_then_ctrl_c(self):
        calls.append(1)
        if len(calls) == 1:  # the training env's first reset, in learn()'s set-up
            raise KeyboardInterrupt
        return real_reset(self)

    monkeypatch.setattr(DummyVecEnv, "reset", reset_then_ctrl_c)
    cfg = tiny(tmp_path, total_steps=64, checkpoint_freq=64, eval={"freq": 64, "episodes": 1, "test_episodes": 1,
                                                                  "baselines": []})
    out = tmp_path / "run"
    stopped = T.train(cfg, seed=0, out_dir=out, test_eval=False)
    assert not stopped.finished and stopped.stop_reason == "interrupted" and stopped.timesteps == 0
    assert "nothing to save yet; run the same command again" in capsys.readouterr().err
    assert not list(out.glob("crashed-*")) and T.latest_checkpoint(out) is None
    assert {"config.yaml", "seeds.json", "baselines.json"} <= {p.name for p in out.iterdir()}
    assert T.train(cfg, seed=0, out_dir=out, test_eval=False).finished


def test_an_interrupted_resume_that_trains_nothing_keeps_the_newest_checkpoint_and_its_replay_buffer(
        tmp_path, monkeypatch):
    """A resume that only finishes a DQN run does not read the replay buffer; an interrupt in its learn(0)
    saved a checkpoint at the same step over the real one: an empty buffer and `session: false`, from which
    a later --resume --total-steps learned without a word."""
    from stable_baselines3.common.callbacks import CallbackList

    cfg = tiny(tmp_path, algo="dqn", total_steps=64, checkpoint_freq=32,
               hyperparams={"learning_starts": 16, "buffer_size": 500, "train_freq": 4, "batch_size": 8},
               eval={"freq": 64, "episodes": 1, "test_episodes": 1, "baselines": []})
    out = tmp_path / "run"
    T.train(cfg, seed=0, out_dir=out, test_eval=False)
    for name in ("model.zip", "model.json"):  # as if killed after the last checkpoint, before model.zip
        (out / name).unlink()
    ckpts = out / T.CHECKPOINT_DIR
    before = {p.name: p.read_bytes() for p in ckpts.iterdir()}
    assert {"replay_buffer_64_steps.pkl", "state_64.json", "session_64.pkl"} <= set(before)

    def ctrl_c_as_learn_ends(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(CallbackList, "_on_training_end", ctrl_c_as_learn_ends)
    stopped = T.train(None, out_dir=out, resume=True, test_eval=False)
    assert stopped.stop_reason == "interrupted" and stopped.timesteps == 64
    assert {p.name: p.read_bytes() for p in ckpts.iterdir()} == before


# ------------------------------------------------------------------------ 13. '|' in training's Markdown tables
def _cells(line: str) -> int:
    """The number of cells a GFM table line has (an escaped ``\\|`` does not end one)."""
    return line.replace("\\|", "").count("|") - 1


def test_summary_table_escapes_a_pipe_in_an_agent_name():
    """summary.md wrote an `sb3:`/`memsys:` baseline's name raw: one holding '|' gave its row a sixth cell."""
    s = {"episodes": 2, "mean_return": 1.0, "return_ci": [0.5, 1.5], "mean_accuracy": 0.5, "normalised": 0.5,
         "normalised_ci": [0.1, 0.9]}
    lines = T.summary_table({"sb3:runs/a|b/model.zip": s}).splitlines()
    assert lines[2] == "| sb3:runs/a\\|b/model.zip | 2 | 1.000 [0.500, 1.500] | 0.500 | 0.500 [0.100, 0.900] |"
    assert [_cells(line) for line in lines] == [5, 5, 5]


def test_headline_tables_escape_a_pipe_in_a_run_label(tmp_path):
    """--headline labels two runs of one seed by their folders, written raw: a folder named with '|' added
    a cell to its rows in the score table and in the paired-difference table."""
    run = T.train(tiny(tmp_path, total_steps=64, eval={"freq": 64, "episodes": 1, "test_episodes": 1,
                                                       "baselines": []}),
                  seed=0, out_dir=tmp_path / "a|b", test_eval=False).run_dir
    shutil.copytree(run, tmp_path / "c|d")
    text, data = T.headline([run, tmp_path / "c|d"], episodes=1, baselines=["versioned"])
    label = "learned a|b"
    assert label in data["table"]  # the numbers keep the label as it is
    assert f"| {label.replace('|', chr(92) + '|')} | " in text
    tables = [block.splitlines() for block in text.split("\n\n") if block.startswith("| ")]
    assert len(tables) >= 2  # the scores, then a paired difference per reference
    assert {_cells(line) for line in tables[0]} == {5}
    assert all({_cells(line) for line in table} == {3} for table in tables[1:])


# ------------------------------------------------------------------------ s15: --headline pools what it should
@pytest.fixture(scope="module")
def two_recipes(tmp_path_factory) -> tuple[Path, Path]:
    """Two finished tiny runs of different recipes and envs: MaskablePPO on Life-Easy with horizon 30, A2C on
    Life-Easy with horizon 40 (the same observation layout, so both models play either env)."""
    tmp = tmp_path_factory.mktemp("recipes")
    small = {"freq": 64, "episodes": 1, "test_episodes": 1, "baselines": ["write_all"]}
    a = T.train(tiny(tmp, "ppo", total_steps=64, eval=small), seed=0, out_dir=tmp / "ppo", test_eval=False)
    b = T.train(tiny(tmp, "a2c", total_steps=64, eval=small, algo="a2c", hyperparams={"n_steps": 8},
                     env={"id": "MemGym/Life-Easy-v0", "overrides": {"horizon": 40}}),
                seed=1, out_dir=tmp / "a2c", test_eval=False)
    return a.run_dir, b.run_dir


def test_headline_refuses_runs_of_different_envs_without_env(two_recipes, capsys):
    """The env (and overrides) came from the first run's model.json only: a model trained on another env was
    tested on it and pooled with the others as a "training seed", without a word."""
    from agents import cli

    a, b = two_recipes
    with pytest.raises(TrainConfigError) as err:
        T.headline([a, b], episodes=1)
    msg = str(err.value)
    assert "the runs were trained on different envs" in msg and "give --env ID" in msg
    assert f"{a} on MemGym/Life-Easy-v0 with {{'horizon': 30}}" in msg
    assert f"{b} on MemGym/Life-Easy-v0 with {{'horizon': 40}}" in msg
    assert cli.main(["train", "--headline", str(a), str(b), "--episodes", "1", "--no-progress"]) == 2
    assert "memgym train: error: --headline: the runs were trained on different envs" in capsys.readouterr().err


def test_headline_with_env_tests_every_run_on_it_and_says_the_pool_mixes_recipes(two_recipes):
    """With --env every run plays that env, with the overrides all runs were trained with (none here: 30 vs
    40; the first run's horizon was applied to all), and the text says that the pooled row mixes recipes."""
    a, b = two_recipes
    text, data = T.headline([a, b], env="MemGym/Life-Easy-v0", overrides={"horizon": 20}, episodes=1,
                            progress=False)
    assert data["env"] == "MemGym/Life-Easy-v0 with {'horizon': 20}"
    assert {"algo", "env.overrides.horizon", "hyperparams.n_steps"} <= set(data["recipes_differ_in"])
    assert "seed" not in data["recipes_differ_in"] and "name" not in data["recipes_differ_in"]
    assert "Note: the runs are not training seeds of one recipe (their config.yaml differ in algo, " in text
    assert "the pooled row and the line above mix them." in text
    assert ("Trained on: learned s0: MemGym/Life-Easy-v0 with {'horizon': 30}; learned s1: MemGym/Life-Easy-v0 "
            "with {'horizon': 40}; each tested on MemGym/Life-Easy-v0 with {'horizon': 20}.") in text
    assert {"write_all", "random", "oracle"} <= set(data["table"])  # (the runs' baselines)
    # the overrides every run was trained with are applied; --set on top
    env_id, shared, mixed = T._headline_env([a, b], [{"env": {"id": "X", "overrides": {"horizon": 30, "capacity": 8}}},
                                                     {"env": {"id": "X", "overrides": {"horizon": 40, "capacity": 8}}}],
                                            "MemGym/Life-Easy-v0")
    assert (env_id, shared, mixed) == ("MemGym/Life-Easy-v0", {"capacity": 8}, True)


def test_headline_plays_a_run_folder_given_twice_once(two_recipes, tmp_path, capsys):
    """The same folder given twice was two runs: "pooled, 2 runs" of one model, its CI narrowed as if two
    training seeds agreed. Now it is played once (as bench plays a name given twice once), with a note;
    another spelling of the path or a link to the folder is the same folder."""
    a, _ = two_recipes
    link = tmp_path / "link"
    link.symlink_to(a, target_is_directory=True)
    capsys.readouterr()
    text, data = T.headline([a, a, Path(f"{a}/"), link], episodes=1, baselines=["write_all"], progress=False)
    assert "learned (pooled, 1 runs)" in data["table"] and "learned s0" in data["table"]
    assert [k for k in data["table"] if k.startswith("learned")] == ["learned (pooled, 1 runs)", "learned s0"]
    assert data["table"]["learned (pooled, 1 runs)"]["episodes"] == 1
    err = capsys.readouterr().err
    assert err.count(f"is the run folder {a} again: played once") == 3 and f"{link} is the run folder" in err
