"""Limits of `memgym bench`: an episode that never ends (--episode-timeout). Tiny runs (recall, horizon 30,
2-3 seeds)."""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import os
import signal
import threading

import pytest

from agents import base, bench
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
