"""Defects of `memgym bench` / `plot` / `replay` and their reports found by an audit: a figure that fails
loses no run, names are written literally (figure and Markdown), replay refuses what bench refuses and
names the field of results.json at fault."""

from __future__ import annotations

import io
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
