"""Defects of `memgym bench` / `plot` / `replay` and their reports found by an audit: a figure that fails
loses no run, names are written literally (figure and Markdown), replay refuses what bench refuses and
names the field of results.json at fault."""

from __future__ import annotations

import io
import json
import re

import pytest

from agents import bench, cli, report


def run(argv):
    out = io.StringIO()
    code = cli.main(argv, out=out)
    return code, out.getvalue()


def _payload(extra=(), seeds=(10_000,)) -> dict:
    """A results payload without episodes played: random (return 0), oracle (2) and each ``extra`` agent (1)
    on recall, one row per seed."""
    rows = []
    for agent in ("random", "oracle", *extra):
        for seed in seeds:
            rows.append({"agent": agent, "family": "recall", "difficulty": "easy", "seed": seed,
                         "env_id": "MemGym/Recall-Easy-v0",
                         "return": {"random": 0.0, "oracle": 2.0}.get(agent, 1.0), "events": 1, "questions": 0,
                         "verdicts": dict.fromkeys(bench.VERDICTS, 0), "accuracy": float("nan"),
                         "stale_rate": float("nan"), "hallucination_rate": float("nan"),
                         "leak_rate": float("nan"), "evidence_recall": float("nan"), "live_memories_mean": 0.0,
                         "live_memories_final": 0, "ops": dict.fromkeys(bench.OP_NAMES, 0), "ops_per_event": 0.0,
                         "invalid_actions": 0})
    rows.sort(key=bench._sort_key)
    for i, r in enumerate(rows):
        r["episode"] = i
    return {"schema": 1, "suite": "t", "agents": ["random", "oracle", *extra], "families": ["recall"],
            "difficulties": ["easy"], "seeds": list(seeds), "overrides": {}, "ablate": False,
            "summary": bench.summarise(rows), "ablation": None, "episodes": rows}


DOLLARS = "sb3:runs/$a_b_c$/model.zip"  # mathtext: "Double subscript"


# ------------------------------------------------------------------ 1. the figure never loses a run


def test_the_figure_draws_every_name_literally(tmp_path):
    """Agent names went to matplotlib as tick labels and were parsed as mathtext: a name holding two '$'
    raised ValueError ("Double subscript") after the whole run."""
    import matplotlib

    svg = tmp_path / "lb.svg"
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # texts as <text> elements, not glyph paths
        assert report.plot_leaderboard(_payload([DOLLARS, "w$1$"]), svg) is True
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", svg.read_text())
    assert texts.count(DOLLARS) == 2 and texts.count("w$1$") == 2  # one per panel, as written


def test_a_figure_that_fails_is_a_warning_and_every_other_file_is_written(tmp_path, monkeypatch, capsys):
    """write_all deleted the staged results.json/csv/md and re-raised any error of the figure that was not an
    OSError, saving the results nowhere: the finished benchmark was lost."""
    payload = _payload(["write_all"])
    report.write_all(payload, tmp_path / "ref", plot=False)
    out = tmp_path / "out"
    out.mkdir()
    (out / report.LEADERBOARD_PNG).write_text("an earlier run's figure")

    def broken(*a, **k):
        raise ValueError("\nmatplotlib\n  cannot draw this")

    monkeypatch.setattr(report, "plot_leaderboard", broken)
    written = report.write_all(payload, out, plot=True)
    png = out / report.LEADERBOARD_PNG
    assert capsys.readouterr().err == (f"warning: cannot write {png}: ValueError: matplotlib cannot draw this; the "
                                       "other files of the run were written, without the figure\n")
    assert sorted(written) == ["csv", "leaderboard", "results"]
    assert sorted(p.name for p in out.iterdir()) == ["leaderboard.md", "results.csv", "results.json"]
    for name in ("results.json", "leaderboard.md"):  # the same bytes as without a figure
        assert (out / name).read_bytes() == (tmp_path / "ref" / name).read_bytes()


def test_a_report_that_raises_saves_the_results_elsewhere(tmp_path, monkeypatch):
    """Any other exception while writing (here leaderboard.md's rendering) re-raised without saving anything."""
    import tempfile

    spare = tmp_path / "tmpdir"
    spare.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spare))
    payload = _payload()
    out = tmp_path / "out"

    def broken(payload):
        raise OverflowError("int too large to convert to float")

    monkeypatch.setattr(report, "leaderboard_md", broken)
    with pytest.raises(report.OutputWriteError) as err:
        report.write_all(payload, out, plot=False)
    (saved,) = spare.iterdir()
    assert str(err.value) == (f"cannot write {out / 'leaderboard.md'}: OverflowError: int too large to convert to "
                              f"float; nothing in {out} was changed; the results were saved to {saved / 'results.json'}"
                              f" instead (`memgym plot {saved}` draws the leaderboard from it)")
    assert (saved / "results.json").read_text() == report.dumps(payload)
    assert list(out.iterdir()) == []  # no temporary file left


def test_bench_and_plot_with_an_agent_named_like_mathtext(tmp_path, monkeypatch, capsys):
    """`memgym bench --agents 'sb3:runs/$a_b_c$/model.zip'` played every episode and then wrote nothing (exit 2,
    a multi-line mathtext message); `memgym plot` on its results gave a traceback."""
    from agents import base
    from agents.baselines import WriteAllAgent

    base._load_builtin()
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))
    monkeypatch.setattr(base, "_RUNTIME", set(base._RUNTIME))
    base.register_agent("wa$x_1_2$")(WriteAllAgent)
    out = tmp_path / "out"
    code, printed = run(["bench", "--agents", "wa$x_1_2$", "--families", "recall", "--seeds", "1", "--workers", "1",
                         "--set", "horizon=20", "--no-progress", "--out", str(out)])
    assert code == 0 and capsys.readouterr().err == "", printed
    assert sorted(p.name for p in out.iterdir()) == sorted(report.OUTPUT_FILES[:4] + (report.LEADERBOARD_PNG,))
    png = tmp_path / "again.png"
    code, printed = run(["plot", str(out), "--out", str(png)])
    assert code == 0 and printed == f"wrote {png} and {out / 'leaderboard.md'}\n"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_reports_a_drawing_failure_in_one_line(tmp_path, monkeypatch, capsys):
    report.write_all(_payload(), tmp_path, plot=False)

    def broken(*a, **k):
        raise ValueError("\na_b_c\n^\nParseFatalException: Double subscript")

    monkeypatch.setattr(report, "plot_leaderboard", broken)
    code, printed = run(["plot", str(tmp_path)])
    assert (code, printed) == (2, "")
    assert capsys.readouterr().err == (f"memgym plot: error: cannot draw {tmp_path / 'leaderboard.png'}: ValueError: "
                                       "a_b_c ^ ParseFatalException: Double subscript\n")


# --------------------------------------------------- 2, 5. replay refuses what bench refuses, names the field


@pytest.fixture
def results_file(tmp_path):
    """Write a results.json (8 episodes of recall-easy, numbered 0..7) changed by ``edit(data)``; its path."""
    def write(edit=None, name="res"):
        data = json.loads(report.dumps(_payload(["write_all", "versioned"], seeds=(10_000, 10_001))))
        if edit is not None:
            edit(data)
        path = tmp_path / name / "results.json"
        path.parent.mkdir()
        path.write_text(json.dumps(data))
        return path
    return write


@pytest.fixture
def no_replay(monkeypatch):
    """Fail (not hang) if an episode is played: the errors below must come before."""
    played = []

    def refuse(*a, **k):
        played.append(a)
        raise AssertionError("an episode was played")

    monkeypatch.setattr(bench, "run_episode", refuse)
    return played


def _replay_error(path, episode, capsys):
    code, printed = run(["replay", str(path), "--episode", str(episode), "--max-steps", "2"])
    err = capsys.readouterr().err
    assert (code, printed) == (2, ""), err
    return err


def test_replay_refuses_an_endless_episode_without_a_horizon(results_file, no_replay, capsys):
    """A row of life/endless with no overrides.horizon passed load_results, and replay played an episode that
    never ended (bench refuses that world with _finite_env)."""
    path = results_file(lambda d: d["episodes"][3].update(family="life", difficulty="endless",
                                                           env_id="MemGym/Life-Endless-v0"))
    assert _replay_error(path, 3, capsys) == (
        f"memgym replay: error: episode 3 of {path} cannot be replayed: episodes[3] is life-endless, an endless "
        "world, and overrides.horizon is not set: the episode would never end (memgym bench refuses to run it "
        "without a horizon, so a run of it has one)\n")
    assert no_replay == []


def test_replay_names_the_episodes_that_the_file_holds(results_file, no_replay, capsys):
    """The hint said 'episodes are 0..5' for a file holding episodes 12..17, and '0..-1' for one holding none."""
    def renumber(d):
        d["episodes"] = [{**r, "episode": r["episode"] + 12} for r in d["episodes"] if r["episode"] != 2]

    path = results_file(renumber)
    assert _replay_error(path, 0, capsys) == (f"memgym replay: error: --episode 0 not in {path}; its episodes are "
                                              "12..13, 15..19\n")
    path = results_file(lambda d: d.update(episodes=[]), name="empty")
    assert _replay_error(path, 0, capsys) == f"memgym replay: error: --episode 0 not in {path}; it holds no episodes\n"
    assert no_replay == []


@pytest.mark.parametrize("edit, reason", [
    (lambda d: d["episodes"][1].update(family="Recall"),
     "episodes[1].family is 'Recall'; families: recall, update, temporal, multi_hop, consolidation, abstention, "
     "erasure, noise, life"),
    (lambda d: d["episodes"][1].update(difficulty="Easy"),
     "episodes[1].difficulty is 'Easy'; difficulties: easy, medium, hard, endless"),
    (lambda d: d["episodes"][1].update(difficulty="endless"),
     "episodes[1].difficulty is 'endless', which recall does not have; its difficulties: easy, medium, hard"),
    (lambda d: d.update(overrides={"capcity": 10}), "overrides {\"capcity\": 10}: unknown config key 'capcity'; "
                                                    "allowed keys: ['horizon', "),
])
def test_replay_blames_the_field_of_the_file_not_the_agent(edit, reason, results_file, no_replay, capsys):
    """A bad family or overrides was reported as the agent's fault ("agent 'oracle': config='Recall': ...")."""
    path = results_file(edit)
    err = _replay_error(path, 1, capsys)
    assert err.startswith(f"memgym replay: error: episode 1 of {path} cannot be replayed: {reason}"), err
    assert "agent" not in err and no_replay == []


# ------------------------------------------------------------------- 3. '|' in a name, Markdown tables


def test_a_pipe_in_an_agent_name_keeps_every_table_row_whole():
    """`--agents 'sb3:runs/a|b/model.zip'` gave that agent's rows one cell more than the header in every table
    of leaderboard.md (and of the console): GFM cut or shifted them."""
    name = "sb3:runs/a|b/model.zip"
    markdown = report.leaderboard_md(_payload([name]))
    tables = [block for block in markdown.split("\n\n") if block.startswith("| ")]
    assert len(tables) == 5
    for table in tables:
        cells = [len(re.split(r"(?<!\\)\|", row)) for row in table.splitlines()]  # GFM's split
        assert cells == [cells[0]] * len(cells), table
        assert "sb3:runs/a\\|b/model.zip" in table
    assert name not in markdown.replace("\\|", "/")  # (no unescaped one anywhere)


# ---------------------------------------------------------- 4. the seeds of an explicit list, as played


@pytest.mark.parametrize("seeds, said", [
    ((10_005, 10_000, 10_010), "10000, 10005, 10010 (3 per family)"),  # was "10005..10010 (3 per family)"
    ((10_000, 10_005), "10000, 10005 (2 per family)"),                 # was the range "10000..10005"
    ((10_003, 10_001, 10_002, 10_007), "10001..10003, 10007 (4 per family)"),
    (tuple(bench.eval_seeds(5)), "10000..10004 (5 per family)"),      # the usual header, unchanged
    ((10_000,), "10000 (1 per family)"),
])
def test_the_leaderboard_header_states_the_seeds_played(seeds, said):
    head = report.leaderboard_md(_payload(seeds=seeds)).splitlines()[2]
    assert head == f"Families: recall; difficulty: easy; evaluation seeds {said}; memgym None."


def test_a_dead_worker_names_the_seeds_of_its_group():
    failure = bench._died(("write_all", "recall", "easy", {}, [10_005, 10_000, 10_010]), [9, 9])
    assert "twice while playing seeds 10000, 10005, 10010 (played again" in failure["error"]


# ------------------------------------------------------- 6. an integer beyond a float in results.json


@pytest.mark.parametrize("where, edit", [
    ('summary.agents["oracle"].overall.return.mean must be a number or null within a float\'s range (about '
     '±1.8e308), got 1000000000',
     lambda d: d["summary"]["agents"]["oracle"]["overall"]["return"].update(mean=10**400)),
    ('summary.agents["oracle"].normalised.per_task["recall"] must be a number or null within a float\'s range',
     lambda d: d["summary"]["agents"]["oracle"]["normalised"]["per_task"].update(recall=-10**309)),
    ("episodes[1].return must be a finite number, got 1000000000", lambda d: d["episodes"][1].update({"return": 10**400})),
])
def test_an_integer_too_large_for_a_float_is_refused_by_the_schema(where, edit, results_file, capsys):
    """A statistic written as a 401-digit integer passed load_results; rendering leaderboard.md then raised
    OverflowError (a traceback, exit 1). episodes[i].return raised it inside load_results itself."""
    path = results_file(edit)
    md = path.parent / "leaderboard.md"
    code, printed = run(["plot", str(path)])
    err = capsys.readouterr().err
    assert (code, printed) == (2, "") and err.startswith(f"memgym plot: error: {path}: {where}"), err
    assert not md.exists()
