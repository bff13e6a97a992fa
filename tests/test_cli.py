"""The memgym command line: help everywhere, clear errors, play with scripted stdin, info, replay, plot."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from agents import cli

ROOT = Path(__file__).resolve().parents[1]
SUBCOMMANDS = ("bench", "play", "info", "replay", "plot", "train")


def run(argv, stdin=None):
    out = io.StringIO()
    if stdin is not None:
        # play reads from sys.stdin through cmd_play's default
        old = sys.stdin
        sys.stdin = io.StringIO(stdin)
        try:
            code = cli.main(argv, out=out)
        finally:
            sys.stdin = old
    else:
        code = cli.main(argv, out=out)
    return code, out.getvalue()


def test_top_level_help_lists_every_subcommand(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    for sub in SUBCOMMANDS:
        assert sub in text


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_every_subcommand_has_help(sub, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main([sub, "--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    assert f"memgym {sub}" in text and len(text) > 200


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    """Every subcommand's real parser (train's is built from agents.train, as `memgym train` does)."""
    parser = cli.build_parser(["train"])
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def _doc_section(doc: str, heading: str) -> str:
    """The text under ``heading`` (a Markdown heading line) up to the next heading of the same or a higher level."""
    lines = doc.splitlines()
    start = lines.index(heading)
    level = len(heading) - len(heading.lstrip("#"))
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].startswith("#") and len(lines[i]) - len(lines[i].lstrip("#")) <= level), len(lines))
    return "\n".join(lines[start:end])


def test_every_option_of_every_subcommand_is_documented():
    """docs/bench.md lists the options of bench, play, replay, plot and info (one section each), docs/train.md
    those of train: every option string and positional of each parser, in backticks, in its own section."""
    bench_doc = (ROOT / "docs" / "bench.md").read_text()
    train_doc = (ROOT / "docs" / "train.md").read_text()
    parsers = _subparsers()
    assert set(parsers) == set(SUBCOMMANDS)
    missing = []
    for name, parser in parsers.items():
        if name == "train":
            section = _doc_section(train_doc, "## Command-line options")
        else:
            section = _doc_section(_doc_section(bench_doc, "## Command-line options"), f"### memgym {name}")
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            names = action.option_strings or [action.dest]
            missing += [(name, opt) for opt in names if f"`{opt}`" not in section and f"`{opt} " not in section]
    assert not missing, missing


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_help_states_each_default_once_and_never_none(sub):
    parser = _subparsers()[sub]
    text = parser.format_help()
    assert "(default: None)" not in text
    formatter = parser._get_formatter()
    for action in parser._actions:
        if action.help:
            helped = " ".join(formatter._expand_help(action).split())
            assert helped.count("(default") <= 1, helped  # no hand-written default followed by argparse's


def test_bench_ablate_help_says_what_runs_without_agents():
    helped = " ".join(_subparsers()["bench"].format_help().split())
    assert "without --agents only random, oracle and the ablated oracles run" in helped
    assert "also run" not in helped


@pytest.mark.parametrize("argv, expected", [
    (["bench", "--agents", "random,nosuch", "--no-progress"], ["nosuch", "write_all", "generative_agents", "sb3:PATH"]),
    (["bench", "--families", "recal", "--no-progress"], ["recal", "multi_hop", "consolidation"]),
    (["bench", "--suite", "huge", "--no-progress"], ["huge", "quick", "default", "full"]),
    (["bench", "--difficulties", "insane", "--no-progress"], ["insane", "easy", "medium", "hard"]),
    (["bench", "--families", "life", "--difficulties", "endless", "--no-progress"], ["endless", "horizon"]),
    (["play", "MemGym/Life-Eazy-v0"], ["Life-Eazy", "MemGym/Life-Easy-v0", "MemGym/Recall-Easy-v0"]),
    (["replay", "/nonexistent/results.json", "--episode", "0"], ["not found"]),
    (["plot", "/nonexistent/results.json"], ["not found"]),
])
def test_user_errors_name_the_valid_values(argv, expected, capsys):
    code, _ = run(argv)
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"memgym {argv[0]}: error:")
    for word in expected:
        assert word in err, (word, err)


@pytest.mark.parametrize("value, needle", [("-1", "must be >= 0, got -1"), ("x", "expected an integer >= 0, got 'x'")])
def test_play_seed_must_be_a_non_negative_integer(value, needle, capsys):
    """--seed -1 was a gymnasium traceback ("Seed must be >= 0"), exit 1."""
    with pytest.raises(SystemExit) as e:
        run(["play", "MemGym/Recall-Easy-v0", "--seed", value], stdin="quit\n")
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "memgym play: error: argument --seed: " + needle in err, err


@pytest.mark.parametrize("cmd", ["play", "replay"])
@pytest.mark.parametrize("value, needle", [("0", "must be >= 1, got 0"), ("-2", "must be >= 1, got -2")])
def test_max_steps_must_be_at_least_one(cmd, value, needle, capsys):
    """--max-steps 0 was ignored (the whole episode was played / printed) and a negative one acted oddly."""
    target = ["MemGym/Recall-Easy-v0"] if cmd == "play" else ["results.json", "--episode", "0"]
    with pytest.raises(SystemExit) as e:
        run([cmd, *target, "--max-steps", value], stdin="WRITE\n" * 3)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"memgym {cmd}: error: argument --max-steps: {needle}" in err, err


def test_play_max_steps_stops_after_that_many_events():
    code, out = run(["play", "MemGym/Recall-Easy-v0", "--max-steps", "2"], stdin="WRITE\n" * 5)
    assert code == 0 and out.count("WRITE: reward") == 2 and "game over: 2 events" in out


@pytest.mark.parametrize("env_id, hint", [
    ("Life-Easy-v0", " (did you mean 'MemGym/Life-Easy-v0'?)"),
    ("lifeeasy", " (did you mean 'MemGym/Life-Easy-v0'?)"),
    ("MemGym/life-easy-v0", " (did you mean 'MemGym/Life-Easy-v0'?)"),
    ("MultiHop-Hard", " (did you mean 'MemGym/MultiHop-Hard-v0'?)"),
    ("banana", ""),
])
def test_play_names_an_unknown_env_id_and_the_nearest_registered_one(env_id, hint, capsys):
    """`memgym play Life-Easy-v0` said "family: must be one of [...], got 'Life-Easy'", and `lifeeasy` gave advice
    about YAML paths: the argument is an env id, and the error is about that."""
    code, out = run(["play", env_id], stdin="quit\n")
    err = capsys.readouterr().err
    assert code == 2 and out == ""
    assert err.startswith(f"memgym play: error: unknown env id {env_id!r}{hint}; registered ids: "
                          "MemGym/Recall-Easy-v0, "), err
    assert "MemGym/Life-Endless-v0" in err and ("did you mean" in err) == bool(hint)


@pytest.mark.parametrize("target", ["recall", "recall-easy", "envs:MemGym/Recall-Easy-v0"])
def test_play_still_takes_the_shorthands_of_make_env(target):
    code, out = run(["play", target, "--set", "horizon=10"], stdin="WRITE\nquit\n")
    assert code == 0 and "game over: 1 events" in out


def test_bad_override_names_the_field(capsys):
    code, _ = run(["bench", "--set", "horizon", "--no-progress"])
    assert code == 2
    assert "KEY=VALUE" in capsys.readouterr().err


def test_play_with_scripted_stdin():
    script = "help\nWRITE\nfly away\nLINK 99\nQUERY\nNOOP\nquit\n"
    code, out = run(["play", "MemGym/Recall-Easy-v0", "--seed", "3"], stdin=script)
    assert code == 0
    assert "commands:" in out
    assert out.count("reward") >= 3          # WRITE, QUERY, NOOP were played
    assert "WRITE: reward" in out and "QUERY: reward" in out
    assert "error: unknown operation 'fly'" in out
    assert "error: slot 99 out of range" in out
    assert "game over: 3 events" in out


def test_play_runs_to_the_end_and_grades_answers():
    # answer every question with QUERY, write everything else
    from agents.bench import make_env

    env = make_env("recall", "easy", {"horizon": 30})
    env.reset(seed=7)
    commands = []
    for _ in range(30):
        commands.append("QUERY" if env.unwrapped.world.event.kind == "question" else "WRITE")
        env.step([5 if commands[-1] == "QUERY" else 1, 0])
    code, out = run(["play", "MemGym/Recall-Easy-v0", "--seed", "7", "--set", "horizon=30"],
                    stdin="\n".join(commands) + "\n")
    assert code == 0
    assert "game over: 30 events" in out
    assert "-> CORRECT" in out or "-> WRONG" in out or "-> ABSTAINED" in out


def test_info_lists_ids_agents_suites_and_versions():
    code, out = run(["info"])
    assert code == 0
    for word in ("MemGym/Life-Easy-v0", "MemGym/Life-Endless-v0", "write_all", "actr_rehearsal", "quick",
                 "10000", "gymnasium", "Embedder"):
        assert word in out


@pytest.fixture(scope="module")
def tiny_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny")
    code, text = run(["bench", "--suite", "quick", "--agents", "write_all,versioned", "--families", "recall,update",
                      "--seeds", "2", "--workers", "1", "--out", str(out), "--no-progress", "--set", "horizon=40"])
    assert code == 0, text
    return out


def test_replay_reproduces_the_recorded_episode(tiny_results):
    data = json.loads((tiny_results / "results.json").read_text())
    ep = next(e for e in data["episodes"] if e["agent"] == "versioned" and e["family"] == "update")
    code, out = run(["replay", str(tiny_results / "results.json"), "--episode", str(ep["episode"])])
    assert code == 0, out
    assert f"agent versioned, {ep['env_id']}, seed {ep['seed']}" in out
    assert "identical" in out
    assert out.count("\n[") >= 40  # one block per event
    assert "+ ep_" in out          # the store's evolution
    code, out = run(["replay", str(tiny_results), "--episode", "999"])
    assert code == 2


def _replay_as(tiny_results, tmp_path, capsys, agent, system_source=None, monkeypatch=None):
    """Replay episode 0 of the tiny run as ``agent`` (with a memory-system module written beside it):
    (exit code, stderr, the results.json path)."""
    if system_source is not None:
        module = agent.split(":")[1]
        (tmp_path / f"{module}.py").write_text("from agents.memory_system import TinyMemorySystem\n\n" + system_source)
        monkeypatch.syspath_prepend(str(tmp_path))
    data = json.loads((tiny_results / "results.json").read_text())
    data["episodes"][0]["agent"] = agent
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    code, _ = run(["replay", str(path), "--episode", "0"])
    return code, capsys.readouterr().err, path


@pytest.mark.parametrize("agent, needles", [
    ("memsys:gone_memsys_module_x:make", ["cannot import module 'gone_memsys_module_x'", "current folder"]),
    ("sb3:/nonexistent/moved/model.zip", ["model file not found"]),
    ("no_such_agent", ["unknown agent 'no_such_agent'", "write_all"]),
])
def test_replay_of_an_agent_that_cannot_be_rebuilt_is_a_clean_error(agent, needles, tiny_results, tmp_path, capsys):
    code, err, path = _replay_as(tiny_results, tmp_path, capsys, agent)
    assert code == 2, err
    assert err.startswith(f"memgym replay: error: episode 0 of {path} cannot be replayed: ") and repr(agent) in err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, (needle, err)


def test_replay_reports_a_memory_system_that_returns_a_wrong_shape(tiny_results, tmp_path, monkeypatch, capsys):
    code, err, _ = _replay_as(tiny_results, tmp_path, capsys, "memsys:replay_bad_memsys:Bad",
                              "class Bad(TinyMemorySystem):\n    def add(self, text, metadata):\n        return 5\n",
                              monkeypatch)
    assert code == 2, err
    assert err.startswith("memgym replay: error: episode 0") and "MemorySystem.add returned 5" in err, err


def test_replay_reports_a_memory_system_that_raises_as_a_user_error(tiny_results, tmp_path, monkeypatch, capsys):
    """A system raising while the episode is replayed (a memory server gone: ConnectionError) gave a traceback
    and exit 1, the code that means "the replayed return differs"; memgym bench reports it in one line."""
    code, err, path = _replay_as(tiny_results, tmp_path, capsys, "memsys:replay_flaky_memsys:Flaky",
                                 "class Flaky(TinyMemorySystem):\n    def add(self, text, metadata):\n"
                                 "        raise ConnectionError('memory server unreachable')\n", monkeypatch)
    assert code == 2, err
    assert err == (f"memgym replay: error: episode 0 of {path} cannot be replayed: agent "
                   "'memsys:replay_flaky_memsys:Flaky': ConnectionError('memory server unreachable')\n"), err


def test_plot_redraws_the_figure(tiny_results, tmp_path):
    png = tmp_path / "lb.png"
    code, out = run(["plot", str(tiny_results / "results.json"), "--out", str(png)])
    assert code == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _cli_into_a_closed_pipe(*argv):
    """Run ``python -m agents.cli ARGV`` with stdout a pipe whose reader is gone (``memgym info | head -0``)."""
    import os

    read, write = os.pipe()
    os.close(read)  # closed before the child writes anything: every write to stdout fails with EPIPE
    try:
        res = subprocess.run([sys.executable, "-m", "agents.cli", *argv], stdout=write, stderr=subprocess.PIPE,
                             text=True, cwd=ROOT, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    finally:
        os.close(write)
    return res


@pytest.mark.parametrize("argv", [["info"], ["replay", "RESULTS", "--episode", "0"]])
def test_output_piped_into_a_closed_pipe_ends_quietly(argv, tiny_results):
    """`memgym info | head -2` / `memgym replay ... | head -1` printed a BrokenPipeError traceback."""
    argv = [str(tiny_results) if a == "RESULTS" else a for a in argv]
    res = _cli_into_a_closed_pipe(*argv)
    assert res.returncode == 141, res.stderr
    assert res.stderr == ""


@pytest.fixture(scope="module")
def long_episode(tmp_path_factory):
    """A results.json and the number of an episode whose replay prints far more than a pipe holds (64 KB)."""
    out = tmp_path_factory.mktemp("long")
    code, text = run(["bench", "--agents", "write_all", "--families", "recall", "--seeds", "1", "--workers", "1",
                      "--out", str(out), "--no-progress", "--no-plot", "--set", "horizon=2000"])
    assert code == 0, text
    episode = next(e["episode"] for e in json.loads((out / "results.json").read_text())["episodes"]
                   if e["agent"] == "write_all")
    return out, episode


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "PYTHONUNBUFFERED"])
def test_replay_piped_into_head_ends_quietly(long_episode, unbuffered):
    """`memgym replay RUN -e 2 | head -1` exited 2 blaming the agent ("agent 'write_all': BrokenPipeError"):
    the closed pipe surfaced in a print of the replay's trace, inside run_episode, and was caught as the
    agent's error. (The test above misses it: its replay fails at the first write, before the episode.)"""
    import os

    out, episode = long_episode
    code, whole = run(["replay", str(out), "--episode", str(episode)])
    assert code == 0 and len(whole.encode()) > 2 * 65536  # more than a pipe holds: the writer must block or fail
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env.update(PYTHONPATH=str(ROOT), **({"PYTHONUNBUFFERED": "1"} if unbuffered else {}))
    proc = subprocess.Popen([sys.executable, "-m", "agents.cli", "replay", str(out), "--episode", str(episode)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=env)
    try:
        first = b""
        while b"\n" not in first:  # `head -1`: the reader takes the first line (the header), then goes away
            chunk = os.read(proc.stdout.fileno(), 4096)
            assert chunk, proc.stderr.read().decode()
            first += chunk
        proc.stdout.close()
        err = proc.stderr.read().decode()
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert first.startswith(b"episode ")
    assert code == 141, err
    assert err == ""

def test_train_delegates_to_agents_train(monkeypatch):
    parser = cli.build_parser(["train"])
    args = parser.parse_args(["train", "--config", "x.yaml", "--quick"])
    assert args.quick and args.config == "x.yaml"
    # without agents.train the command says what is missing
    monkeypatch.setitem(sys.modules, "agents.train", None)
    with pytest.raises(cli.CliError, match="memgym\\[train\\]"):
        cli._load_train()


def test_train_subparser_is_lazy():
    parser = cli.build_parser(["bench"])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert "train" in sub.choices


def test_scripts_bench_is_a_thin_wrapper():
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench.py"), "--help"], capture_output=True,
                         text=True, cwd=ROOT, timeout=60)
    assert res.returncode == 0 and "memgym bench" in res.stdout


def test_play_and_make_env_take_a_world_yaml_file_by_a_path_with_folders(tmp_path):
    """docs/bench.md: make_env takes a world YAML file; one given by a path with a "/" was read as an env
    id ("unknown env id 'configs/world/recall-easy.yaml'"), in `memgym play` and in make_env."""
    from agents.bench import make_env
    from world import WorldConfig

    path = tmp_path / "worlds" / "mine.yaml"
    path.parent.mkdir()
    WorldConfig.preset("recall", "easy").replace(horizon=12).to_yaml(path)
    env = make_env(str(path))
    assert env.config.family == "recall" and env.config.horizon == 12
    code, out = run(["play", str(path)], stdin="WRITE\nquit\n")
    assert code == 0 and "game over: 1 events" in out


@pytest.mark.parametrize("target", ["{d}/worlds/lif-easy.yaml", "lif-easy.yml", "{d}/worlds/LIFE.YAML", "{d}/worlds/mine",
                                    "./nowhere/x"])
def test_play_and_make_env_say_no_such_config_file_for_a_missing_yaml_path(tmp_path, capsys, target):
    """`memgym play configs/world/lif-easy.yaml` (a mistyped file) said "unknown env id '...'": a YAML path
    was recognised only when the file existed. A target ending in .yaml/.yml or with folders that is not an
    env id names a file; missing, it is "<path>: no such config file" (WorldConfig.from_yaml's words)."""
    from agents.bench import make_env
    from world import WorldConfig
    from world.config import ConfigError

    (tmp_path / "worlds").mkdir()
    WorldConfig.preset("life", "easy").to_yaml(tmp_path / "worlds" / "life-easy.yaml")
    target = target.format(d=tmp_path)
    code, out = run(["play", target], stdin="quit\n")
    err = capsys.readouterr().err
    assert code == 2 and out == "", err
    assert err.startswith(f"memgym play: error: {target}: no such config file") and err.count("\n") == 1, err
    assert "unknown env id" not in err and "Traceback" not in err
    if target.endswith("lif-easy.yaml"):  # the nearest file of its folder as a hint
        assert f"did you mean {str(tmp_path / 'worlds' / 'life-easy.yaml')!r}" in err, err
    with pytest.raises(ConfigError, match="no such config file"):
        make_env(target)


def test_play_says_a_folder_is_not_a_config_file_and_env_ids_keep_their_hints(tmp_path, capsys):
    code, _ = run(["play", str(tmp_path)], stdin="quit\n")
    err = capsys.readouterr().err
    assert code == 2 and f"{tmp_path}: is a folder, not a config file" in err, err
    # an env id with a typo is still an env id (a "/" alone does not make a path)
    code, _ = run(["play", "MemGym/Lif-Easy-v0"], stdin="quit\n")
    err = capsys.readouterr().err
    assert code == 2 and "unknown env id 'MemGym/Lif-Easy-v0' (did you mean 'MemGym/Life-Easy-v0'?)" in err, err
    # and so is a near miss of another shape (no version, upper-case V, a trailing space): not a file path
    for near in ("MemGym/Life-Easy", "MemGym/Life-Easy-V0", "MemGym/Life-Easy-v0 "):
        code, _ = run(["play", near], stdin="quit\n")
        err = capsys.readouterr().err
        assert code == 2 and f"unknown env id {near!r} (did you mean 'MemGym/Life-Easy-v0'?)" in err, err
        assert "no such config file" not in err


def test_an_unknown_set_key_lists_only_keys_the_command_takes(capsys):
    """The error listed family and difficulty as allowed keys, which --set refuses."""
    code, _ = run(["play", "life", "--set", "horizn=3"], stdin="quit\n")
    err = capsys.readouterr().err
    assert code == 2 and "unknown config key 'horizn'" in err and "'horizon'" in err
    assert "'family'" not in err and "'difficulty'" not in err


def test_the_leaderboard_and_the_summary_say_which_world_overrides_ran(tmp_path, capsys):
    """--set overrides (reward weights, horizon) were only in results.json: the leaderboard and the
    printed summary read as the presets' numbers."""
    out = tmp_path / "o"
    code, printed = run(["bench", "--suite", "quick", "--agents", "random,oracle", "--families", "recall",
                         "--difficulties", "easy", "--seeds", "1", "--workers", "1", "--out", str(out), "--no-plot",
                         "--no-progress", "--set", 'rewards={"correct": 2.0}', "--set", "horizon=40"])
    line = 'World overrides (not the presets): horizon=40; rewards={"correct": 2.0}.'
    assert code == 0 and line in printed, printed
    assert line in (out / "leaderboard.md").read_text()
    code, printed = run(["bench", "--suite", "quick", "--agents", "random,oracle", "--families", "recall",
                         "--difficulties", "easy", "--seeds", "1", "--workers", "1", "--out", str(tmp_path / "p"),
                         "--no-plot", "--no-progress"])
    assert code == 0 and "World overrides" not in printed
    assert "World overrides" not in (tmp_path / "p" / "leaderboard.md").read_text()
