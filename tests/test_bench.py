"""The benchmark: statistics, output files and their schema, reproducibility across --workers, ordering."""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np
import pytest

from agents import bench, report

# ------------------------------------------------------------------------------------- statistics


def test_iqm_matches_scipy_trim_mean():
    from scipy.stats import trim_mean

    rng = np.random.default_rng(3)
    for n in (1, 2, 3, 4, 5, 8, 13, 40):
        x = rng.normal(size=n)
        assert bench.iqm(x) == pytest.approx(trim_mean(x, 0.25))
    assert bench.iqm([1, 2, 3, 100]) == pytest.approx(2.5)  # the outlier and the minimum are cut
    assert math.isnan(bench.iqm([]))


def test_normalised_score_maps_random_to_0_and_oracle_to_1():
    assert bench.normalised_score(-3.0, -3.0, 5.0) == 0.0
    assert bench.normalised_score(5.0, -3.0, 5.0) == 1.0
    assert bench.normalised_score(1.0, -3.0, 5.0) == 0.5
    assert bench.normalised_score(7.0, -3.0, 5.0) == 1.25
    assert math.isnan(bench.normalised_score(1.0, 2.0, 2.0))


def test_bootstrap_ci_is_seeded_and_covers_the_mean():
    rng = np.random.default_rng(0)
    x = rng.normal(loc=2.0, scale=1.0, size=200)
    lo, hi = bench.bootstrap_ci(x, seed=0)
    assert (lo, hi) == bench.bootstrap_ci(x, seed=0)
    assert (lo, hi) != bench.bootstrap_ci(x, seed=1)
    assert lo < x.mean() < hi
    # the 95% interval of the mean of 200 N(2, 1) draws is about +-1.96 / sqrt(200) = +-0.139
    assert hi - lo == pytest.approx(2 * 1.96 / math.sqrt(200), rel=0.2)
    assert bench.bootstrap_ci([4.0]) == (4.0, 4.0)
    assert all(math.isnan(v) for v in bench.bootstrap_ci([]))


def test_bootstrap_ci_coverage_is_about_95_percent():
    rng = np.random.default_rng(1)
    hits = 0
    for i in range(200):
        x = rng.exponential(size=60)
        lo, hi = bench.bootstrap_ci(x, n=500, seed=i)
        hits += lo <= 1.0 <= hi
    assert 0.88 <= hits / 200 <= 0.99


def test_stratified_iqm_ci_brackets_the_point():
    groups = [[0.0, 0.1, 0.2, 0.3], [0.8, 0.9, 1.0, 1.1]]
    point, lo, hi = bench.stratified_iqm_ci(groups, seed=0)
    assert point == pytest.approx(bench.iqm(np.concatenate(groups)))
    assert lo <= point <= hi
    assert bench.stratified_iqm_ci(groups, seed=0) == (point, lo, hi)


def test_eval_seeds_are_disjoint_from_training_seeds():
    seeds = bench.eval_seeds(5)
    assert seeds == [10_000, 10_001, 10_002, 10_003, 10_004]
    assert min(bench.EVAL_SEEDS) == 10_000
    with pytest.raises(ValueError, match="10000"):
        bench.eval_seeds(3, start=5)
    with pytest.raises(ValueError, match="seeds"):
        bench.eval_seeds(0)


def _row(agent, family, seed, ret, correct, questions=4, stale=0, leaked=0):
    verdicts = dict.fromkeys(bench.VERDICTS, 0)
    verdicts.update(correct=correct, stale=stale, leaked=leaked, wrong=questions - correct - stale - leaked)
    return {"agent": agent, "family": family, "difficulty": "easy", "seed": seed, "env_id": "x", "return": ret,
            "events": 10, "questions": questions, "verdicts": verdicts, "accuracy": correct / questions,
            "stale_rate": stale / questions, "hallucination_rate": 0.0, "leak_rate": leaked / questions,
            "evidence_recall": float("nan"), "live_memories_mean": 3.0, "live_memories_final": 4,
            "ops": dict.fromkeys(("NOOP", "WRITE", "UPDATE", "LINK", "REFLECT", "QUERY", "FORGET"), 0),
            "ops_per_event": 0.5, "invalid_actions": 0, "world_metrics": {}}


def test_summarise_normalises_per_family_and_pools_rates():
    rows = []
    for s in range(4):
        rows += [_row("random", "recall", s, 0.0, 1), _row("oracle", "recall", s, 10.0, 4),
                 _row("mid", "recall", s, 5.0 + (s - 1.5), 2, stale=1),
                 _row("random", "update", s, -2.0, 0), _row("oracle", "update", s, 2.0, 4),
                 _row("mid", "update", s, 0.0, 2, leaked=1)]
    summary = bench.summarise(rows)
    assert summary["tasks"] == ["recall", "update"]
    mid = summary["agents"]["mid"]
    assert mid["normalised"]["per_task"]["recall"] == pytest.approx(0.5)
    assert mid["normalised"]["per_task"]["update"] == pytest.approx(0.5)
    assert summary["agents"]["oracle"]["normalised"]["iqm"] == pytest.approx(1.0)
    assert summary["agents"]["random"]["normalised"]["iqm"] == pytest.approx(0.0)
    assert mid["overall"]["stale_rate"] == pytest.approx(4 / 32)
    assert mid["overall"]["leak_rate"] == pytest.approx(4 / 32)
    assert mid["tasks"]["recall"]["accuracy"]["mean"] == pytest.approx(0.5)
    assert mid["normalised"]["lo"] <= mid["normalised"]["iqm"] <= mid["normalised"]["hi"]


def test_report_tables_rank_by_normalised_score(tmp_path):
    rows = []
    for s in range(3):
        rows += [_row("random", "recall", s, 0.0, 1), _row("oracle", "recall", s, 10.0, 4),
                 _row("mid", "recall", s, 6.0, 2)]
    for i, r in enumerate(sorted(rows, key=bench._sort_key)):
        r["episode"] = i
    payload = {"schema": 1, "suite": "t", "agents": ["mid", "random", "oracle"], "families": ["recall"],
               "difficulties": ["easy"], "seeds": [10000, 10001, 10002], "overrides": {}, "ablate": False,
               "summary": bench.summarise(rows), "ablation": None, "episodes": sorted(rows, key=bench._sort_key)}
    table = report.leaderboard_table(payload)
    lines = [ln for ln in table.splitlines() if ln.startswith("|")][2:]
    assert [ln.split("|")[2].strip() for ln in lines] == ["oracle", "mid", "random"]
    paths = report.write_all(payload, tmp_path, plot=False)
    data = json.loads(paths["results"].read_text())  # strict JSON: NaN became null
    assert data["episodes"][0]["evidence_recall"] is None
    assert report.load_results(tmp_path)["suite"] == "t"


def _ablation_payload() -> dict:
    """A tiny ablation run without episodes played: random, oracle and each oracle[-OP], one family, 2 seeds."""
    agents = ["random", "oracle", *(f"oracle[-{op}]" for op in bench.ABLATION_OPS)]
    rows = []
    for s in range(2):
        for i, a in enumerate(agents):
            rows.append(_row(a, "recall", 10_000 + s, 0.0 if a == "random" else 10.0 - i, 2))
    rows.sort(key=bench._sort_key)
    for i, r in enumerate(rows):
        r["episode"] = i
    summary = bench.summarise(rows)
    return {"schema": 1, "suite": "t", "agents": agents, "families": ["recall"], "difficulties": ["easy"],
            "seeds": [10_000, 10_001], "overrides": {}, "ablate": True, "summary": summary,
            "ablation": bench.ablation_table(summary), "episodes": rows}


def _ablation_rows(markdown: str) -> list[str]:
    section = markdown.split("## Ablation", 1)[1] if "## Ablation" in markdown else markdown
    return [ln.split("|")[1].strip() for ln in section.splitlines() if ln.startswith("| ")][1:]


def test_plot_keeps_the_ablation_rows_in_the_documented_order(tmp_path):
    """results.json is written with sorted keys: read back, the ablation came out alphabetical (-FORGET first,
    the full oracle last), and `memgym plot` rewrote leaderboard.md in that order."""
    from agents import cli

    expected = ["(none: full oracle)", *(f"-{op}" for op in bench.ABLATION_OPS)]
    report.write_all(_ablation_payload(), tmp_path, plot=False)
    assert _ablation_rows((tmp_path / "leaderboard.md").read_text()) == expected
    assert _ablation_rows((tmp_path / "ablation.md").read_text()) == expected
    assert _ablation_rows(report.ablation_md(report.load_results(tmp_path))) == expected
    assert cli.main(["plot", str(tmp_path), "--out", str(tmp_path / "lb.png")], out=io.StringIO()) == 0
    assert _ablation_rows((tmp_path / "leaderboard.md").read_text()) == expected


def test_write_all_removes_the_files_of_an_earlier_run_that_it_does_not_write(tmp_path):
    """An ablation.md / leaderboard.png / timings.json of an earlier run stayed next to the new results."""
    stale = {report.ABLATION_MD: "# old ablation", report.LEADERBOARD_PNG: "old png", report.TIMINGS: "{}",
             "notes.txt": "the user's own file"}
    for name, text in stale.items():
        (tmp_path / name).write_text(text)
    payload = _ablation_payload()
    paths = report.write_all({**payload, "ablate": False, "ablation": None}, tmp_path, plot=False)
    assert sorted(p.name for p in paths.values()) == sorted([report.RESULTS, report.CSV, report.LEADERBOARD_MD])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*(p.name for p in paths.values()), "notes.txt"])
    assert (tmp_path / "notes.txt").read_text() == "the user's own file"  # only memgym's own names are removed
    # with an ablation and timings they are written again
    paths = report.write_all(payload, tmp_path, plot=False, timings={"workers": 1})
    assert {"ablation", "timings"} <= set(paths) and (tmp_path / report.ABLATION_MD).exists()


def test_load_results_errors_name_the_problem(tmp_path):
    with pytest.raises(report.ResultsFileError, match="not found"):
        report.load_results(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(report.ResultsFileError, match="not valid JSON"):
        report.load_results(bad)
    other = tmp_path / "other.json"
    other.write_text('{"a": 1}')
    with pytest.raises(report.ResultsFileError, match="episodes"):
        report.load_results(other)


# ------------------------------------------------------------------------------- end to end (quick)

EPISODE_FIELDS = {"agent", "family", "difficulty", "env_id", "seed", "episode", "return", "events", "questions",
                  "verdicts", "accuracy", "stale_rate", "hallucination_rate", "leak_rate", "evidence_recall",
                  "live_memories_mean", "live_memories_final", "ops", "ops_per_event", "invalid_actions"}


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """`memgym bench --suite quick` end to end through the CLI, with 2 worker processes."""
    import io

    from agents.cli import main

    out = tmp_path_factory.mktemp("quick_w2")
    buf = io.StringIO()
    assert main(["bench", "--suite", "quick", "--workers", "2", "--out", str(out), "--no-progress"], out=buf) == 0
    return out, buf.getvalue()


@pytest.mark.slow
def test_quick_suite_writes_every_file_with_the_schema(quick_run):
    out, printed = quick_run
    for name in ("results.json", "results.csv", "leaderboard.md", "leaderboard.png", "timings.json"):
        assert (out / name).stat().st_size > 0, name
    data = json.loads((out / "results.json").read_text())
    suite = bench.suites()["quick"]
    assert data["suite"] == "quick" and data["seeds"] == bench.eval_seeds(suite.seeds)
    n = len(suite.agents) * len(suite.families) * suite.seeds
    assert len(data["episodes"]) == n
    assert [e["episode"] for e in data["episodes"]] == list(range(n))
    for e in data["episodes"]:
        assert EPISODE_FIELDS <= set(e), EPISODE_FIELDS - set(e)
        assert set(e["verdicts"]) == set(bench.VERDICTS)
        assert sum(e["verdicts"].values()) == e["questions"]
        assert sum(e["ops"].values()) == e["events"]
        assert e["seed"] >= bench.EVAL_SEED_BASE
        assert "wall_s" not in e and "steps_per_s" not in e
    keys = [(e["agent"], e["family"], e["difficulty"], e["seed"]) for e in data["episodes"]]
    assert keys == sorted(keys)
    assert set(data["summary"]["agents"]) == set(suite.agents)
    with open(out / "results.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == n and float(rows[0]["steps_per_s"]) > 0
    timings = json.loads((out / "timings.json").read_text())
    assert timings["workers"] == 2 and len(timings["per_episode"]) == n
    assert "norm. score IQM" in printed and "oracle" in printed


@pytest.mark.slow
def test_results_json_is_byte_identical_across_workers(tmp_path):
    # every agent, two families, 3 seeds: 1 worker in-process vs 2 forked workers
    kw = dict(families=["update", "life"], seeds=3, progress=False, plot=False, overrides={"horizon": 60})
    bench.run_bench("quick", workers=1, out_dir=tmp_path / "w1", **kw)
    bench.run_bench("quick", workers=2, out_dir=tmp_path / "w2", **kw)
    one, two = (tmp_path / "w1" / "results.json").read_bytes(), (tmp_path / "w2" / "results.json").read_bytes()
    assert one == two
    t1 = json.loads((tmp_path / "w1" / "timings.json").read_text())
    t2 = json.loads((tmp_path / "w2" / "timings.json").read_text())
    assert (t1["workers"], t2["workers"]) == (1, 2)


@pytest.mark.slow
def test_oracle_beats_best_heuristic_beats_random_on_life(quick_run):
    out, _ = quick_run
    data = json.loads((out / "results.json").read_text())
    agents = data["summary"]["agents"]
    life = {a: v["tasks"]["life"]["return"]["mean"] for a, v in agents.items()}
    heuristics = {a: r for a, r in life.items() if a in bench.HEURISTICS}
    best = max(heuristics, key=heuristics.get)
    assert life["oracle"] > heuristics[best] > life["random"], life


def test_ablation_runs_every_op_removed_and_writes_the_table(tmp_path):
    payload = bench.run_bench("quick", families=["update"], seeds=2, workers=1, out_dir=tmp_path, ablate=True,
                              progress=False, plot=False, overrides={"horizon": 40})
    assert payload["agents"] == ["random", "oracle"] + [f"oracle[-{op}]" for op in bench.ABLATION_OPS]
    abl = payload["ablation"]
    assert list(abl) == ["none", *bench.ABLATION_OPS]
    assert abl["none"]["per_task"]["update"] == pytest.approx(1.0)
    episodes = [e for e in payload["episodes"] if e["agent"].startswith("oracle[-")]
    for e in episodes:
        removed = e["agent"][len("oracle[-"):-1]
        assert e["ops"][removed] == 0, e["agent"]
    text = (tmp_path / "ablation.md").read_text()
    assert "-UPDATE" in text and "-FORGET" in text


def test_evaluate_accepts_the_training_pipelines_env_spec():
    rows = bench.evaluate("write_all", {"id": "MemGym/Update-Easy-v0", "overrides": {"horizon": 30}}, [10_000])
    assert rows[0]["env_id"] == "MemGym/Update-Easy-v0" and rows[0]["events"] == 30
    assert rows[0]["timing"]["steps_per_s"] > 0
    with pytest.raises(ValueError, match="allowed: 'id', 'overrides'"):
        bench.evaluate("write_all", {"id": "MemGym/Update-Easy-v0", "horizon": 30}, [10_000])
    with pytest.raises(ValueError, match="MemGym/Life-Easy-v0"):
        bench.evaluate("write_all", "MemGym/Nope-Easy-v0", [10_000])


class _AlwaysUpdate:
    """Sends UPDATE of slot 0 whatever the mask says: on an empty store every one is invalid."""

    name = "always_update"

    def reset(self, seed):
        pass

    def act(self, observation, info):
        return np.array([2, 0], dtype=np.int64)


class _WriteThenInvalid(_AlwaysUpdate):
    """WRITE on odd steps, FORGET of the last candidate slot on even steps: invalid while that slot is empty
    (and WRITE is invalid on a question)."""

    def reset(self, seed):
        self.t = 0

    def act(self, observation, info):
        self.t += 1
        return np.array([1, 0] if self.t % 2 else [6, 7], dtype=np.int64)


def test_invalid_actions_count_as_noop_in_the_ops_columns():
    env = bench.make_env("recall", "easy", {"horizon": 20})
    row, _ = bench.run_episode(_AlwaysUpdate(), env, 10_000)
    assert row["invalid_actions"] == row["events"] == 20
    assert row["ops"] == {**dict.fromkeys(bench.OP_NAMES, 0), "NOOP": 20}  # they did nothing
    assert row["ops_per_event"] == 0.0
    steps = []
    row, _ = bench.run_episode(_WriteThenInvalid(), env, 10_000, trace=steps.append)
    invalid = [s for s in steps if s["invalid"]]
    assert row["invalid_actions"] == len(invalid) >= 5
    assert {s["attempted"] for s in invalid} >= {"FORGET"}    # replay still shows what was attempted
    assert all(s["op"] == "NOOP" for s in invalid)
    assert all(s["op"] == s["attempted"] for s in steps if not s["invalid"])
    counted = {op: sum(s["op"] == op for s in steps) for op in bench.OP_NAMES}
    assert row["ops"] == counted and row["ops"]["WRITE"] > 0
    assert row["ops_per_event"] == pytest.approx(1 - counted["NOOP"] / row["events"])


def test_live_memories_mean_is_the_worlds_count():
    """The row's live_memories_mean counted the store after env.step, i.e. after the next event's sweep:
    27.56 next to its own world_metrics' 27.64 (Erasure-Easy, write_all, seed 10000: 8 memories swept)."""
    from agents.bench import evaluate

    row = evaluate("write_all", "MemGym/Erasure-Easy-v0", [10_000])[0]
    assert row["world_metrics"]["swept"] > 0
    assert row["live_memories_mean"] == row["world_metrics"]["mean_live_memories"]


def test_an_episode_without_evidence_has_no_evidence_recall_anywhere():
    """Every question of Abstention-Easy seed 23 is unanswerable (no evidence): the row's
    evidence_recall is NaN (null in results.json) and the world's metrics say None, not 0.0 (which
    read as "the agent retrieved none of the evidence"); the row's world_metrics keep the key (null)."""
    from agents.bench import evaluate

    row = evaluate("oracle", "MemGym/Abstention-Easy-v0", [23])[0]
    assert row["questions"] == 8 and row["verdicts"]["correct"] == 8
    assert math.isnan(row["evidence_recall"])
    assert "evidence_recall" in row["world_metrics"] and row["world_metrics"]["evidence_recall"] is None
    # and an aggregate over it and an episode with evidence averages the one that has some
    with_ev = evaluate("oracle", "MemGym/Abstention-Easy-v0", [10_000])[0]
    overall = bench.summarise([{**row, "episode": 0}, {**with_ev, "episode": 1}])["agents"]["oracle"]["overall"]
    assert overall["evidence_recall"] == pytest.approx(with_ev["evidence_recall"])


def test_an_episode_without_questions_runs_through_the_bench_and_the_training_readers(tmp_path):
    """Recall-Easy cut at 10 events: the two evaluation seeds 10000 and 10001 ask nothing. The world's
    per-question rates are None there (they said 0.0); `memgym bench` writes its rows (NaN, null in
    results.json), tables and plot without formatting a None, and the training pipeline's readers of
    accuracy give no number (NaN, not 0)."""
    from agents.cli import main
    from agents.train import _accuracy_from_info, _row_accuracy

    out = tmp_path / "b"
    buf = io.StringIO()
    assert main(["bench", "--agents", "oracle,write_all", "--families", "recall", "--difficulties", "easy",
                 "--seeds", "2", "--set", "horizon=10", "--workers", "1", "--out", str(out), "--no-progress"],
                out=buf) == 0
    rows = report.load_results(out)["episodes"]
    assert len(rows) == 6 and all(r["questions"] == 0 for r in rows)
    for r in rows:
        assert r["accuracy"] is None and r["leak_rate"] is None  # (NaN, written as null)
        assert all(r["world_metrics"][k] is None for k in ("accuracy", "stale_rate", "hallucination_rate",
                                                           "leak_rate", "evidence_recall"))
        assert math.isnan(_row_accuracy({"metrics": r["world_metrics"]}))
        assert _accuracy_from_info({"metrics": r["world_metrics"]}) is None
    assert "| oracle " in buf.getvalue() and (out / "leaderboard.md").exists()


# ------------------------------------------------------------------------------------ worker pool

POOL_RUN = dict(families=["recall"], progress=False, plot=False, overrides={"horizon": 30})
#: a test that patches this process for its workers: only forked ones (Linux) inherit the patch
FORKED_WORKERS = pytest.mark.skipif(bench._pool_context().get_start_method() != "fork",
                                    reason="the workers are not forked: they do not inherit the test's patch")


@FORKED_WORKERS
def test_a_task_whose_worker_was_killed_is_played_again_in_a_fresh_worker(tmp_path, monkeypatch):
    """A worker killed from outside (SIGKILL, the OOM killer) in the middle of a task of `random` failed
    that agent, and as the normalised scores need random the run ended with EpisodeError and wrote
    nothing. The task is played again in a fresh worker: results.json is byte-identical to an
    undisturbed run's (here in-process: it is the same whatever the workers)."""
    import os
    import signal

    bench.run_bench("quick", agents=["write_all"], seeds=3, workers=1, out_dir=tmp_path / "calm", **POOL_RUN)
    marker = tmp_path / "was_killed"
    play = bench.run_episode

    def killed_once(agent, env, seed, **kw):  # (forked workers inherit this patch)
        if agent.name == "random" and seed == 10_001 and not marker.exists():  # (its first episode was played)
            marker.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        return play(agent, env, seed, **kw)

    monkeypatch.setattr(bench, "run_episode", killed_once)
    bench.run_bench("quick", agents=["write_all"], seeds=3, workers=2, out_dir=tmp_path / "killed", **POOL_RUN)
    assert int(marker.read_text()) != os.getpid()  # a worker was killed, not this process
    assert (tmp_path / "killed" / "results.json").read_bytes() == (tmp_path / "calm" / "results.json").read_bytes()
    assert not (tmp_path / "killed" / "errors.txt").exists()


@FORKED_WORKERS
def test_a_task_that_kills_every_worker_fails_after_two_deaths(tmp_path, monkeypatch):
    """An agent that os._exit()s (or crashes in native code) every time dies again in the fresh worker:
    its task is reported after the second death, as a failure of that agent, and the run goes on."""
    import os

    attempts = tmp_path / "attempts"
    play = bench.run_episode

    def exits(agent, env, seed, **kw):
        if agent.name == "write_all":
            with open(attempts, "a") as fh:
                fh.write(f"{os.getpid()}\n")
            os._exit(7)
        return play(agent, env, seed, **kw)

    monkeypatch.setattr(bench, "run_episode", exits)
    with pytest.raises(bench.AgentFailedError) as err:
        bench.run_bench("quick", agents=["write_all"], seeds=2, workers=2, out_dir=tmp_path / "o", **POOL_RUN)
    pids = attempts.read_text().split()
    assert len(pids) == len(set(pids)) == 2  # played twice, in two workers
    (failure,) = err.value.failures
    assert (failure["agent"], failure["seed"]) == ("write_all", 10_000)
    assert failure["error"] == ("its worker process died (exit code 7) twice while playing seeds 10000..10001 (played "
                                "again in a fresh worker, it died again): os._exit() or a crash in native code; "
                                "there is no traceback")
    assert err.value.payload["agents"] == ["random", "oracle"] and len(err.value.payload["episodes"]) == 4


_SIGINT_PROBE = '''
import multiprocessing as mp
import os
import signal

import agents.bench as bench


def sigint_state():
    """(is SIGINT blocked, is it ignored) in this process."""
    return signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, []), signal.getsignal(signal.SIGINT) == signal.SIG_IGN


def worker(*args):
    """A spawned worker's target: SIGINT's state at its first instruction, then the real worker, whose tasks
    answer with SIGINT's state while they are played."""
    at_start = sigint_state()
    bench._task = lambda task: ([(at_start, sigint_state())], None)
    bench._worker_loop(*args)


class InterruptedAtStart(mp.get_context("spawn").Process):
    """A worker that gets SIGINT (a Ctrl-C reaches the whole process group) as soon as it is started."""

    def start(self):
        super().start()
        os.kill(self.pid, signal.SIGINT)
'''


@pytest.mark.skipif(not hasattr(__import__("signal"), "pthread_sigmask"), reason="no signal masks (Windows)")
def test_a_spawned_worker_is_born_with_sigint_blocked(tmp_path, monkeypatch, capfd):
    """Under spawn (macOS) a Ctrl-C in the instant a worker started killed it or printed its
    KeyboardInterrupt traceback: it ignored SIGINT only once _worker_loop ran, after the interpreter's
    start-up and imports. A worker is born with SIGINT blocked; _worker_loop ignores it, then unblocks it
    (a Ctrl-C meanwhile is dropped), so the agent's own subprocesses are born with it unblocked."""
    import multiprocessing as mp
    import types

    (tmp_path / "sigint_probe.py").write_text(_SIGINT_PROBE)
    monkeypatch.syspath_prepend(str(tmp_path))  # (spawned workers get this process's sys.path)
    import sigint_probe

    spawn = mp.get_context("spawn")
    monkeypatch.setattr(bench, "_pool_context", lambda: types.SimpleNamespace(
        Pipe=spawn.Pipe, Process=sigint_probe.InterruptedAtStart, get_start_method=spawn.get_start_method))
    monkeypatch.setattr(bench, "_worker_loop", sigint_probe.worker)
    got = []
    bench._run_in_pool([("write_all", "recall", "easy", {}, [seed]) for seed in (10_000, 10_001)], 1, got.append)
    # blocked (not yet ignored) at the first instruction; ignored (not blocked) while a task is played
    assert got == [([((True, False), (False, True))], None)] * 2
    err = capfd.readouterr().err
    assert "KeyboardInterrupt" not in err and "Traceback" not in err, err


_RUNTIME_AGENTS = '''
from agents.baselines import WriteAllAgent


class Writer(WriteAllAgent):
    """write_all under another name; its module registers nothing (the test does, at run time)."""

    name = "runtime_writer"
'''


@pytest.fixture
def spawned_workers(monkeypatch):
    """The worker pool starts its workers with spawn (macOS's way: they import memgym afresh), and agents
    registered by the test leave the registry as it was."""
    import multiprocessing as mp

    from agents import base

    base._load_builtin()
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))
    monkeypatch.setattr(base, "_RUNTIME", set(base._RUNTIME))
    monkeypatch.setattr(bench, "_pool_context", lambda: mp.get_context("spawn"))


def test_an_agent_registered_at_run_time_plays_in_spawned_workers(tmp_path, monkeypatch, spawned_workers):
    """An agent registered at run time (register_agent in __main__, a notebook, a test) was unknown to spawned
    workers, which import only memgym's own agents: its every task failed. The main process sends them its
    run-time registrations, which they register again before their first task; one that does not load there
    (its module cannot be imported in a fresh process) fails its agent's tasks with the reason."""
    import sys
    import types

    from agents.base import register_agent
    from agents.baselines import WriteAllAgent

    (tmp_path / "runtime_agents.py").write_text(_RUNTIME_AGENTS)
    monkeypatch.syspath_prepend(str(tmp_path))  # (spawned workers get this process's sys.path)
    import runtime_agents

    register_agent("runtime_writer", "write_all, registered at run time")(runtime_agents.Writer)
    ghost = types.ModuleType("ghost_agents")  # (a module of this process only)

    class Ghost(WriteAllAgent):
        name = "ghost"

    Ghost.__module__, Ghost.__qualname__, ghost.Ghost = "ghost_agents", "Ghost", Ghost
    monkeypatch.setitem(sys.modules, "ghost_agents", ghost)
    register_agent("ghost")(Ghost)

    with pytest.raises(bench.AgentFailedError) as err:
        bench.run_bench("quick", agents=["runtime_writer", "ghost"], seeds=2, workers=2, **POOL_RUN)
    (failure,) = err.value.failures
    assert failure["agent"] == "ghost" and failure["error"] == (
        "agent 'ghost' is registered in the main process (agents.base.register_agent), but its registration could "
        "not be loaded in this worker process, which started afresh (spawn): ModuleNotFoundError(\"No module named "
        "'ghost_agents'\")")
    rows = [r for r in err.value.payload["episodes"] if r["agent"] == "runtime_writer"]
    expected = bench.evaluate("write_all", "recall", [10_000, 10_001], overrides=POOL_RUN["overrides"])
    assert [r["return"] for r in rows] == [r["return"] for r in expected] and len(rows) == 2
