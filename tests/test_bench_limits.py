"""Two limits of `memgym bench`: an episode that never ends (--episode-timeout) and Ctrl-C, which kept nothing
of the finished episodes (results.partial.json). Tiny runs (recall, horizon 30, 2-3 seeds)."""

from __future__ import annotations

import io
import json
import math
import multiprocessing as mp
import os
import signal
import threading

import pytest

from agents import base, bench, report
from agents.baselines import WriteAllAgent
from agents.cli import main

RUN = dict(families=["recall"], progress=False, plot=False, overrides={"horizon": 30})
TINY = ["--families", "recall", "--seeds", "2", "--set", "horizon=30", "--no-progress", "--no-plot"]
#: the agents below are registered in this process: forked workers (Linux) inherit them
FORKED_WORKERS = pytest.mark.skipif(bench._pool_context().get_start_method() != "fork",
                                    reason="the workers are not forked: they do not have the test's agents")
TIMEOUT = 1.5  # s: far above a 30-event episode (milliseconds), so that only the hanging one exceeds it


@pytest.fixture
def registry(monkeypatch):
    """Agents registered by the test leave the registry as it was."""
    base._load_builtin()
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))
    monkeypatch.setattr(base, "_RUNTIME", set(base._RUNTIME))


class Hangs(WriteAllAgent):
    """write_all whose act never returns on seed 10001 (a memory server that stopped answering), with SIGTERM
    ignored (a library that installs its own handler): only a kill stops it. Each hang is noted in
    ``attempts`` (one pid a line)."""

    name = "hangs"
    attempts = None

    def reset(self, seed):
        super().reset(seed)
        self.seed = seed

    def act(self, observation, info):
        if self.seed == 10_001:
            with open(Hangs.attempts, "a") as fh:
                fh.write(f"{os.getpid()}\n")
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            threading.Event().wait()
        return super().act(observation, info)


# ------------------------------------------------------------------------------------ --episode-timeout


@FORKED_WORKERS
def test_an_episode_over_the_timeout_fails_its_agent_and_its_worker_is_killed(tmp_path, registry):
    """An agent whose act never returned held the whole run forever. With episode_timeout its episode fails
    that agent like an exception (the others' results written, the reason in errors.txt and the one-line
    report), its worker is terminated, then killed (it ignores SIGTERM) and replaced, and the task is not
    played again."""
    Hangs.attempts = tmp_path / "attempts"
    base.register_agent("hangs")(Hangs)
    out = tmp_path / "out"
    with pytest.raises(bench.AgentFailedError) as err:
        bench.run_bench("quick", agents=["hangs", "write_all"], seeds=3, workers=2, out_dir=out,
                        episode_timeout=TIMEOUT, **RUN)
    reason = ("episode seed 10001 on MemGym/Recall-Easy-v0 exceeded --episode-timeout 1.5 s (its worker process was "
              "stopped; a timed-out episode is not played again)")
    (failure,) = err.value.failures
    assert (failure["agent"], failure["seed"], failure["error"]) == ("hangs", 10_001, reason)
    assert str(err.value).startswith(f"agent 'hangs' failed on recall/easy, seed 10001: {reason}; the other "
                                     "agents' results (write_all, random, oracle) were written to ")
    (pid,) = map(int, Hangs.attempts.read_text().split())  # played once, not again in a fresh worker
    assert pid != os.getpid()
    assert mp.active_children() == []  # (the hanging worker was killed: none is left)
    data = json.loads((out / "results.json").read_text())
    assert data["agents"] == ["write_all", "random", "oracle"] and len(data["episodes"]) == 9
    assert (out / "errors.txt").read_text().startswith(f"agent 'hangs' on recall/easy, seed 10001: {reason}\n")


@FORKED_WORKERS
def test_with_one_worker_a_timeout_plays_in_a_worker_process_and_random_ends_the_run(tmp_path, monkeypatch):
    """With --workers 1 the episodes ran in the main process, where no episode stuck in native code can be
    stopped: with a timeout they run in one worker process. A timed-out `random` (or `oracle`) ends the run
    as its other failures do (EpisodeError: no normalised score without it), writing no results."""
    attempts = tmp_path / "attempts"
    play = bench.run_episode

    def hangs(agent, env, seed, **kw):  # (the forked worker inherits this patch)
        if agent.name == "random" and seed == 10_001:
            attempts.write_text(str(os.getpid()))
            threading.Event().wait()
        return play(agent, env, seed, **kw)

    monkeypatch.setattr(bench, "run_episode", hangs)
    out = tmp_path / "out"
    with pytest.raises(bench.EpisodeError, match=r"^agent 'random' on recall/easy, seed 10001: episode seed 10001 on "
                                                 r"MemGym/Recall-Easy-v0 exceeded --episode-timeout 1.5 s "):
        bench.run_bench("quick", agents=["write_all"], seeds=2, workers=1, out_dir=out, episode_timeout=TIMEOUT,
                        **RUN)
    assert int(attempts.read_text()) != os.getpid()  # a worker process played it
    assert mp.active_children() == []
    assert not (out / "results.json").exists()


def test_a_timeout_that_is_not_reached_changes_no_byte_of_results_json(tmp_path):
    """The timeout is a setting of the machine, like --workers: it goes to timings.json, and results.json is
    the same with it as without (there the episodes ran in the main process, here in a worker process)."""
    bench.run_bench("quick", agents=["write_all"], seeds=2, workers=1, out_dir=tmp_path / "no", **RUN)
    bench.run_bench("quick", agents=["write_all"], seeds=2, workers=1, out_dir=tmp_path / "yes",
                    episode_timeout=60, **RUN)
    assert (tmp_path / "yes" / "results.json").read_bytes() == (tmp_path / "no" / "results.json").read_bytes()
    timings = [json.loads((tmp_path / d / "timings.json").read_text()) for d in ("no", "yes")]
    assert [(t["workers"], t["episode_timeout"]) for t in timings] == [(1, None), (1, 60.0)]


@pytest.mark.parametrize("value", [0, -1, math.nan, math.inf, "30", True])
def test_a_bad_episode_timeout_is_refused_before_anything_runs(value, tmp_path):
    with pytest.raises(ValueError, match=r"^episode_timeout \(--episode-timeout\) must be a finite number of "
                                         r"seconds > 0, or None for no limit; got "):
        bench.run_bench("quick", agents=["write_all"], seeds=1, workers=1, out_dir=tmp_path / "o",
                        episode_timeout=value, **RUN)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("text, why", [("0", "must be a finite number of seconds > 0, got '0'"),
                                       ("inf", "must be a finite number of seconds > 0, got 'inf'"),
                                       ("soon", "expected a number of seconds > 0, got 'soon'")])
def test_the_cli_names_the_option_of_a_bad_timeout(text, why, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "--episode-timeout", text, *TINY])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"memgym bench: error: argument --episode-timeout: {why}"


# --------------------------------------------------------------------------------------------- Ctrl-C


class Interrupts(WriteAllAgent):
    """write_all that is Ctrl-C'd (in the main process: --workers 1) in its episode of seed 10001."""

    name = "interrupts"

    def reset(self, seed):
        super().reset(seed)
        self.seed = seed

    def act(self, observation, info):
        if self.seed == 10_001:
            raise KeyboardInterrupt
        return super().act(observation, info)


def test_ctrl_c_writes_the_finished_episodes_to_results_partial_json_and_leaves_results_json(tmp_path, registry,
                                                                                             capsys):
    """Ctrl-C wrote nothing: an hour of finished episodes was lost. Now they go to results.partial.json (the
    rows of results.json, marked incomplete, with what was not finished), and the folder's results.json and
    leaderboard, of an earlier complete run, stay as they were; exit code 130 and one line naming the file.
    replay reads the partial file, plot refuses it, and the next complete run removes it."""
    base.register_agent("interrupts")(Interrupts)
    out = tmp_path / "out"
    args = ["bench", "--workers", "1", "--out", str(out), *TINY]
    assert main([*args, "--agents", "write_all"], out=io.StringIO()) == 0
    before = {name: (out / name).read_bytes() for name in ("results.json", "leaderboard.md", "results.csv")}
    capsys.readouterr()

    # tasks in order: write_all (2 episodes), interrupts (Ctrl-C in its second episode), random, oracle
    assert main([*args, "--agents", "write_all,interrupts"], out=io.StringIO()) == 130
    partial = out / "results.partial.json"
    assert capsys.readouterr().err == (f"memgym bench: interrupted; the 2 finished episodes were written to {partial} "
                                       "(an incomplete run: no results.json or leaderboard was written)\n")
    assert {name: (out / name).read_bytes() for name in before} == before
    data = json.loads(partial.read_text())
    complete = json.loads(before["results.json"])
    drop = ("summary", "ablation", "episodes", "agents")
    assert {k: v for k, v in data.items() if k not in drop and k not in ("incomplete", "unfinished",
            "unfinished_agents", "failed")} == {k: v for k, v in complete.items() if k not in drop}
    assert data["incomplete"] is True and data["failed"] == [] and "summary" not in data
    assert data["agents"] == ["write_all", "interrupts", "random", "oracle"]
    # the rows of results.json, numbered within the file
    written = [{**e, "episode": None} for e in complete["episodes"] if e["agent"] == "write_all"]
    assert [{**e, "episode": None} for e in data["episodes"]] == written
    assert [e["episode"] for e in data["episodes"]] == [0, 1]
    assert data["unfinished"] == [{"agent": a, "family": "recall", "difficulty": "easy", "seeds": [10_000, 10_001]}
                                  for a in ("interrupts", "random", "oracle")]
    assert data["unfinished_agents"] == ["interrupts", "random", "oracle"]

    printed = io.StringIO()
    assert main(["replay", str(partial), "-e", "1"], out=printed) == 0
    assert printed.getvalue().endswith(f"recorded {data['episodes'][1]['return']:+.4f}: identical\n")
    assert main(["plot", str(partial), "--out", str(tmp_path / "x.png")]) == 2
    assert capsys.readouterr().err == (
        f"memgym plot: error: {partial} holds the finished episodes of an interrupted memgym bench run "
        "(\"incomplete\": true), without a summary: there is no leaderboard to draw from part of a run; run the "
        "benchmark to the end for a results.json (memgym replay can replay its episodes)\n")
    assert not (tmp_path / "x.png").exists() and (out / "leaderboard.md").read_bytes() == before["leaderboard.md"]
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "results.partial.json").write_bytes(partial.read_bytes())
    assert main(["replay", str(alone), "-e", "0"]) == 2
    assert capsys.readouterr().err == (
        f"memgym replay: error: results file not found: {alone / 'results.json'} ({alone / 'results.partial.json'} "
        "holds the finished episodes of an interrupted run: memgym replay reads it when given its path)\n")

    assert main([*args, "--agents", "write_all"], out=io.StringIO()) == 0  # a complete run: the partial file goes
    assert not partial.exists() and (out / "results.json").read_bytes() == before["results.json"]


class _InterruptedBar:
    """A progress bar whose second update is a Ctrl-C: it arrives in the main process after two tasks."""

    def __init__(self) -> None:
        self.updates = 0

    def update(self, n: int) -> None:
        self.updates += 1
        if self.updates == 2:
            raise KeyboardInterrupt

    def close(self) -> None:
        pass


def test_ctrl_c_with_worker_processes_keeps_the_tasks_that_came_in(tmp_path, monkeypatch):
    """With --workers 2 the episodes of the tasks that reached the main process before the Ctrl-C are kept (which
    ones depends on the workers' pace); every other episode is listed as unfinished, and no worker is left."""
    monkeypatch.setattr(bench, "_progress", lambda total, desc, enabled: _InterruptedBar())
    out = tmp_path / "out"
    with pytest.raises(bench.BenchInterrupted) as err:
        bench.run_bench("quick", agents=["write_all"], seeds=2, workers=2, out_dir=out, **RUN)
    assert isinstance(err.value, KeyboardInterrupt) and err.value.path == out / "results.partial.json"
    assert sorted(p.name for p in out.iterdir()) == ["results.partial.json"]
    data = json.loads((out / "results.partial.json").read_text())
    assert json.loads(report.dumps(err.value.payload)) == data  # (the file is the exception's payload)
    played = [(e["agent"], e["seed"]) for e in data["episodes"]]
    assert len(played) == 4 and len({a for a, _ in played}) == 2  # two tasks (an agent's 2 seeds each) came in
    missing = [(u["agent"], s) for u in data["unfinished"] for s in u["seeds"]]
    assert sorted(played + missing) == sorted((a, s) for a in ("write_all", "random", "oracle") for s in
                                              (10_000, 10_001))
    assert mp.active_children() == []


def test_a_second_ctrl_c_while_the_partial_file_is_written_loses_neither_it_nor_the_line(tmp_path, monkeypatch):
    """Ctrl-C pressed twice: the second, while results.partial.json is written, is ignored (the run is stopping
    already), so that the file is written and BenchInterrupted, which names it, is what the caller gets."""
    monkeypatch.setattr(bench, "_progress", lambda total, desc, enabled: _InterruptedBar())
    write = report.write_partial

    def pressed_again(payload, out_dir):
        os.kill(os.getpid(), signal.SIGINT)  # (delivered at once: to this process, its main thread)
        return write(payload, out_dir)

    monkeypatch.setattr(report, "write_partial", pressed_again)
    out = tmp_path / "out"
    with pytest.raises(bench.BenchInterrupted) as err:
        bench.run_bench("quick", agents=["write_all"], seeds=1, workers=1, out_dir=out, **RUN)
    assert err.value.path == out / "results.partial.json" and err.value.path.is_file()
    assert len(err.value.payload["episodes"]) == 2
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # (restored)
