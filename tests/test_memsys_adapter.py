"""The ``memsys:`` adapter as a user meets it: a module in the current folder imports through the
``memgym`` console script too, and a MemorySystem returning the wrong shapes gets an error naming the
method, what it returned and the shapes allowed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agents.memory_system import TinyMemorySystem

REPO = Path(__file__).resolve().parents[1]

ADAPTER = '''
from agents.memory_system import TinyMemorySystem


def make_system():
    return TinyMemorySystem()
'''

# What pip writes for `[project.scripts] memgym = "agents.cli:main"`, plus (when SPAWN is set) the bench's
# worker pool switched to spawn, whose workers import the user's module afresh.
CONSOLE_SCRIPT = '''
import os
import sys

from agents.cli import main

if __name__ == "__main__":
    if os.environ.get("SPAWN"):
        import multiprocessing as mp

        from agents import bench

        bench._pool_context = lambda: mp.get_context("spawn")
    sys.exit(main())
'''


def _console_script(tmp_path: Path, cwd: Path, *args: str, spawn: bool = False) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "memgym"
    script.write_text(CONSOLE_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPAWN")}
    env.update(PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", **({"SPAWN": "1"} if spawn else {}))
    return subprocess.run([sys.executable, str(script), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


BENCH = ["bench", "--agents", "memsys:mypkg.adapter:make_system", "--families", "recall", "--difficulties", "easy",
         "--seeds", "2", "--set", "horizon=20", "--no-plot", "--no-progress"]


@pytest.mark.parametrize("spawn", [False, True], ids=["fork-or-inline", "spawned-workers"])
def test_console_script_imports_a_memsys_module_from_the_current_folder(tmp_path, spawn):
    work = tmp_path / "work"
    (work / "mypkg").mkdir(parents=True)
    (work / "mypkg" / "__init__.py").write_text("")
    (work / "mypkg" / "adapter.py").write_text(ADAPTER)
    proc = _console_script(tmp_path, work, *BENCH, "--workers", "2", "--out", "out", spawn=spawn)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads((work / "out" / "results.json").read_text())["episodes"]
    mine = [r for r in rows if r["agent"] == "memsys:mypkg.adapter:make_system"]
    assert len(mine) == 2 and all(r["ops"]["WRITE"] > 0 for r in mine)


def test_console_script_names_the_module_that_cannot_be_imported(tmp_path):
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    proc = _console_script(tmp_path, empty, *BENCH, "--workers", "1", "--out", "out")
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr
    assert err.startswith("memgym bench: error: ") and "Traceback" not in err, err
    assert "cannot import module 'mypkg.adapter'" in err and "No module named 'mypkg'" in err, err
    assert f"importable from the current folder ({empty})" in err and "PYTHONPATH" in err, err
    assert not (empty / "out").exists()


def test_a_module_whose_own_import_fails_is_not_blamed_on_the_path(tmp_path, monkeypatch):
    from agents.base import make_agent

    (tmp_path / "needs_missing_lib.py").write_text("import surely_not_installed_lib_x\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError) as exc:
        make_agent("memsys:needs_missing_lib:make")
    msg = str(exc.value)
    assert "importing module 'needs_missing_lib' failed" in msg and "surely_not_installed_lib_x" in msg, msg
    assert "current folder" not in msg


def test_a_missing_factory_names_the_module_and_the_attribute(tmp_path, monkeypatch):
    from agents.base import make_agent

    (tmp_path / "has_no_factory.py").write_text(textwrap.dedent("x = 1\n"))
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match=r"module has_no_factory \(.*has_no_factory.py\) has no attribute 'make'"):
        make_agent("memsys:has_no_factory:make")


def test_a_factory_returning_the_class_is_refused_before_the_run(tmp_path, monkeypatch, capsys):
    """`return TinyMemorySystem` (no parentheses) passed the pre-run check (a class's methods are callable), the
    other agents played, and this one failed at its first episode on "reset() missing 1 required positional
    argument: 'self'". Refused by the check, naming the class and the fix; MemorySystemAgent refuses it too."""
    from agents import cli
    from agents.base import validate_agent_specs
    from agents.memory_system import MemorySystemAgent

    (tmp_path / "returns_the_class.py").write_text(textwrap.dedent("""
        from agents.memory_system import TinyMemorySystem

        def make():
            return TinyMemorySystem
        """))
    monkeypatch.syspath_prepend(str(tmp_path))
    needle = ("agent 'memsys:returns_the_class:make': returns_the_class:make() returned the class TinyMemorySystem, "
              "not an instance: return TinyMemorySystem()")
    with pytest.raises(ValueError) as err:
        validate_agent_specs(["memsys:returns_the_class:make"])
    assert str(err.value).startswith(needle), err.value
    out = tmp_path / "out"
    rc = cli.main(["bench", "--suite", "quick", "--agents", "random,memsys:returns_the_class:make", "--families",
                   "recall", "--difficulties", "easy", "--seeds", "1", "--workers", "1", "--out", str(out),
                   "--no-progress"])
    msg = capsys.readouterr().err
    assert rc == 2 and needle in msg and "failed on" not in msg, msg
    assert not (out / "results.json").exists()  # refused before any episode was played
    with pytest.raises(TypeError, match=r"got the class TinyMemorySystem, not an instance: pass TinyMemorySystem\(\)"):
        MemorySystemAgent(TinyMemorySystem)


# ------------------------------------------------------------------ what add / search may return
ENV = {"id": "MemGym/Erasure-Easy-v0", "overrides": {}}


class Shaped(TinyMemorySystem):
    """TinyMemorySystem's decisions, returned through ``add_as`` / ``search_as``."""

    def __init__(self, add_as=lambda r: r, search_as=lambda r: r):
        super().__init__()
        self.add_as, self.search_as = add_as, search_as
        self.deleted: list[str] = []

    def add(self, text, metadata):
        return self.add_as(super().add(text, metadata))

    def search(self, query, k):
        return self.search_as(super().search(query, k))

    def delete(self, id):
        self.deleted.append(id)
        return super().delete(id)


def _play(system, seeds=(10_000,)):
    from agents.bench import evaluate
    from agents.memory_system import MemorySystemAgent

    return [{k: v for k, v in r.items() if k not in ("timing", "agent")}
            for r in evaluate(MemorySystemAgent(system, name="shaped"), ENV, list(seeds))]


@pytest.mark.parametrize("method, convert, needle", [
    ("add", lambda r: 5, "MemorySystem.add returned 5: type int is none of these shapes"),
    ("add", lambda r: True, "MemorySystem.add returned True: type bool"),
    ("add", lambda r: (r[0]["id"], r[0]["event"]), "a tuple is ambiguous"),
    ("add", lambda r: iter(r), "type list_iterator is none of these shapes"),
    ("add", lambda r: {"memory": "x", "event": "ADD"}, "a dict with neither 'id' nor 'results'"),
    ("add", lambda r: [{"memory": "x", "event": "ADD"}], "has no 'id'"),
    ("add", lambda r: [{"id": None, "event": "ADD"}], "whose 'id' is None"),
    ("add", lambda r: [{"id": "x", "event": "INSERT"}], "'event' is 'INSERT', not one of ADD, UPDATE, DELETE, NONE"),
    ("add", lambda r: {"results": tuple(r)}, "its 'results' is a tuple, not a list"),
    ("search", lambda r: None, "MemorySystem.search returned None: type NoneType is not a list of hits"),
    ("search", lambda r: ["a", "b"], "a hit 'a' is a str, not a dict with an 'id'"),
    ("search", lambda r: [{"text": "x", "score": 1.0}], "has no 'id'"),
    ("search", lambda r: {"hits": r}, "a dict without 'results'"),
])
def test_wrong_return_shapes_name_the_method_the_value_and_the_allowed_shapes(method, convert, needle):
    from agents.memory_system import MemorySystemError

    system = Shaped(**{f"{method}_as": convert})
    with pytest.raises(MemorySystemError) as exc:
        _play(system)
    msg = str(exc.value)
    assert isinstance(exc.value, ValueError)
    assert msg.startswith(f"MemorySystem.{method} returned ") and needle in msg, msg
    allowed = "{'results': [that list]}" if method == "search" else "the new id as a str (an ADD), or None"
    assert "; allowed: " in msg and allowed in msg, msg


def test_mem0_shapes_and_single_dicts_are_read_like_plain_lists():
    """{"results": [...]} from add and search (Mem0's own shape), a single dict from add and int ids
    give exactly the episodes of the plain list form."""
    plain = _play(Shaped(), seeds=(10_000, 10_001))
    assert plain[0]["ops"]["WRITE"] > 0 and plain[0]["ops"]["FORGET"] + plain[1]["ops"]["FORGET"] > 0
    wrapped = _play(Shaped(add_as=lambda r: {"results": r}, search_as=lambda r: {"results": r}),
                    seeds=(10_000, 10_001))
    assert wrapped == plain
    assert _play(Shaped(add_as=lambda r: r[0]), seeds=(10_000, 10_001)) == plain  # one dict

    def int_ids(r):  # "m12" -> 12, and back in delete()
        return [{**h, "id": int(h["id"][1:])} for h in r]

    class IntIds(Shaped):
        def delete(self, id):
            return super().delete(f"m{id}")

    assert _play(IntIds(add_as=int_ids, search_as=int_ids), seeds=(10_000, 10_001)) == plain


def test_numpy_integer_ids_are_read_like_ints():
    """A library keyed by numpy integers (FAISS-style np.int64 ids) was refused with "an id is a non-empty str
    or an int": now any integer (numbers.Integral) is an id, as str(int(id)); a bool is not."""
    import numpy as np

    from agents.memory_system import MemorySystemError, _hits

    assert _hits([{"id": np.int64(3)}, {"id": np.uint8(4)}, {"id": 5}]) == ["3", "4", "5"]
    plain = _play(Shaped(), seeds=(10_000, 10_001))

    def numpy_ids(r):  # "m12" -> np.int64(12), and back in delete()
        return [{**h, "id": np.int64(h["id"][1:])} for h in r]

    got = []

    class NumpyIds(Shaped):
        def delete(self, id):
            got.append(id)
            return super().delete(f"m{id}")

    assert _play(NumpyIds(add_as=numpy_ids, search_as=numpy_ids), seeds=(10_000, 10_001)) == plain
    assert got and all(isinstance(i, str) and i.isdigit() for i in got)
    for bad in (True, np.bool_(True), 1.0):
        with pytest.raises(MemorySystemError, match=r"whose 'id' is .*\(an id is a non-empty str or an integer"):
            _hits([{"id": bad}])


def test_an_erasure_request_deletes_only_the_best_hit_even_if_search_ignores_k():
    everything = Shaped()
    everything.search = lambda query, k: TinyMemorySystem.search(everything, query, 10**6)  # all, best first
    best = Shaped()
    _play(everything)
    _play(best)
    assert best.deleted and everything.deleted == best.deleted  # one delete per request, the first hit


def test_bench_reports_a_wrong_shape_as_a_clean_error(tmp_path, monkeypatch, capsys):
    from agents import cli

    (tmp_path / "shaped_bad.py").write_text(textwrap.dedent('''
        from agents.memory_system import TinyMemorySystem

        class Bad(TinyMemorySystem):
            def add(self, text, metadata):
                return ("m1", "UPDATE")
        '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "o"
    code = cli.main(["bench", "--agents", "memsys:shaped_bad:Bad", "--families", "recall", "--seeds", "1",
                     "--workers", "1", "--set", "horizon=20", "--no-progress", "--no-plot", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("memgym bench: error: agent 'memsys:shaped_bad:Bad' failed on recall/easy, seed 10000: "
                          "MemorySystem.add returned ('m1', 'UPDATE'): a tuple is ambiguous"), err
    assert "Traceback" not in err
    import json

    assert json.loads((out / "results.json").read_text())["agents"] == ["random", "oracle"]  # kept


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_memory_system_that_raises_loses_no_other_agents_results(tmp_path, monkeypatch, capsys, workers):
    """A user's system raising mid-run stopped the bench with a doubled traceback (exit 1) and wrote
    nothing: every other agent's finished episodes were lost."""
    import json

    from agents import cli

    (tmp_path / "raising.py").write_text(textwrap.dedent('''
        from agents.memory_system import TinyMemorySystem

        class Raises(TinyMemorySystem):
            def add(self, text, metadata):
                if metadata["step"] > 15:
                    raise KeyError("boom")
                return super().add(text, metadata)
        '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = tmp_path / "o"
    code = cli.main(["bench", "--agents", "write_all,memsys:raising:Raises", "--families", "recall", "--seeds", "2",
                     "--workers", workers, "--set", "horizon=30", "--no-progress", "--no-plot", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    assert "agent 'memsys:raising:Raises' failed on recall/easy" in err and "KeyError('boom')" in err
    data = json.loads((out / "results.json").read_text())
    assert data["agents"] == ["write_all", "random", "oracle"]
    assert {e["agent"] for e in data["episodes"]} == {"write_all", "random", "oracle"} and len(data["episodes"]) == 6
    errors = (out / "errors.txt").read_text()
    assert errors.count("Traceback") == 1 and "KeyError: 'boom'" in errors


def test_delete_returning_none_counts_as_deleted():
    """Many clients' delete returns nothing: the adapter ignored those deletions (no FORGET), so every
    erased fact leaked. False still means "not deleted"."""
    from agents.bench import evaluate
    from agents.memory_system import MemorySystemAgent

    class NoneDelete(TinyMemorySystem):
        def delete(self, id):
            super().delete(id)
            return None

    class FalseDelete(TinyMemorySystem):
        def delete(self, id):
            return False

    import numpy as np

    class NumpyFalseDelete(TinyMemorySystem):
        def delete(self, id):
            return np.bool_(False)

    class NumpyZeroDelete(TinyMemorySystem):
        def delete(self, id):
            return np.int64(0)

    seeds = list(range(10_000, 10_004))
    for cls in (NumpyFalseDelete, NumpyZeroDelete):  # numpy's False / 0 mean "not deleted" too
        rows = evaluate(MemorySystemAgent(cls(), name="t"), "MemGym/Erasure-Easy-v0", seeds)
        assert sum(r["ops"]["FORGET"] for r in rows) == 0
    ref = evaluate(MemorySystemAgent(TinyMemorySystem(), name="t"), "MemGym/Erasure-Easy-v0", seeds)
    none = evaluate(MemorySystemAgent(NoneDelete(), name="t"), "MemGym/Erasure-Easy-v0", seeds)
    false = evaluate(MemorySystemAgent(FalseDelete(), name="t"), "MemGym/Erasure-Easy-v0", seeds)
    forgets = [sum(r["ops"]["FORGET"] for r in rows) for rows in (ref, none, false)]
    assert forgets[0] > 0 and forgets[1] == forgets[0] and forgets[2] == 0
    assert [r["return"] for r in none] == [r["return"] for r in ref]


def test_reset_gets_the_episode_seed_when_it_takes_one():
    from agents.memory_system import MemorySystemAgent

    seen = []

    class Seeded(TinyMemorySystem):
        def reset(self, seed=None):
            seen.append(seed)
            super().reset()

    class KeywordSeeded(TinyMemorySystem):  # Gymnasium's reset(*, seed=None) form
        def reset(self, *, seed=None):
            seen.append(("kw", seed))
            super().reset()

    from agents.bench import evaluate

    evaluate(MemorySystemAgent(Seeded(), name="s"), ENV, [10_003, 10_004])
    assert seen[-2:] == [10_003, 10_004]
    evaluate(MemorySystemAgent(KeywordSeeded(), name="s"), ENV, [10_003, 10_004])
    assert seen[-2:] == [("kw", 10_003), ("kw", 10_004)]


def test_several_decisions_mirror_an_update_of_a_held_memory_else_the_add():
    """An UPDATE of an id the world does not hold came first and was written under that id, while the
    ADD in the same result (the memory that held the text) was dropped."""
    from agents.memory_system import MemorySystemAgent

    class TwoDecisions(TinyMemorySystem):
        def add(self, text, metadata):
            out = super().add(text, metadata)
            ids = [e["id"] for e in out] if isinstance(out, list) else [out] if isinstance(out, str) else []
            if not ids:
                return out
            return [{"id": "summary", "event": "UPDATE"}] + [{"id": i, "event": "ADD"} for i in ids[:1]]

    agent = MemorySystemAgent(TwoDecisions(), name="two")
    from agents.bench import evaluate

    evaluate(agent, ENV, [10_000])
    assert "summary" not in agent._to_world and agent._to_world  # the ADDs were mirrored


def test_a_memory_system_that_exits_is_reported_and_loses_nothing(tmp_path, monkeypatch, capsys):
    """SystemExit from a system killed a pool worker (the run then waited forever) or, with one worker,
    ended the run silently with nothing written."""
    import json

    from agents import cli

    (tmp_path / "exiting.py").write_text(textwrap.dedent('''
        from agents.memory_system import TinyMemorySystem

        class Exits(TinyMemorySystem):
            def add(self, text, metadata):
                if metadata["step"] > 15:
                    raise SystemExit(3)
                return super().add(text, metadata)
        '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = tmp_path / "o"
    code = cli.main(["bench", "--agents", "write_all,memsys:exiting:Exits", "--families", "recall", "--seeds", "2",
                     "--workers", "2", "--set", "horizon=30", "--no-progress", "--no-plot", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "agent 'memsys:exiting:Exits' failed" in err and "SystemExit(3)" in err, err
    assert json.loads((out / "results.json").read_text())["agents"] == ["write_all", "random", "oracle"]


def test_an_agent_failure_is_still_reported_when_the_outputs_cannot_be_written(tmp_path, monkeypatch):
    from agents import bench, report

    (tmp_path / "raising2.py").write_text(textwrap.dedent('''
        from agents.memory_system import TinyMemorySystem

        class Raises(TinyMemorySystem):
            def add(self, text, metadata):
                raise KeyError("boom")
        '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "o"
    real = report.write_all

    def fail_after_run(payload, out_dir, **kw):
        (Path(out_dir) / report.CSV).mkdir(parents=True)  # something in the way appears during the run
        return real(payload, out_dir, **kw)

    monkeypatch.setattr(report, "write_all", fail_after_run)
    import tempfile

    spare = tmp_path / "spare"
    spare.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spare))  # where the results are saved instead (not /tmp)
    with pytest.raises(bench.AgentFailedError) as exc:
        bench.run_bench("quick", agents=["memsys:raising2:Raises"], families=["recall"], seeds=1, workers=1,
                        out_dir=out, progress=False, plot=False, overrides={"horizon": 20})
    msg = str(exc.value)
    assert "agent 'memsys:raising2:Raises' failed" in msg and "were not written" in msg and "saved to" in msg, msg
    assert [p.name.startswith("memgym-bench-") for p in spare.iterdir()] == [True]


def test_a_folder_in_place_of_errors_txt_is_refused_before_the_run(tmp_path):
    from agents import bench, report

    out = tmp_path / "o"
    (out / bench.ERRORS_FILE).mkdir(parents=True)
    with pytest.raises(report.OutputDirError):
        bench.run_bench("quick", agents=["write_all"], families=["recall"], seeds=1, workers=1, out_dir=out,
                        progress=False, plot=False, overrides={"horizon": 20})


def test_reset_parameters_not_named_seed_get_nothing():
    """`reset(self, keep=False)` got the seed as `keep` (episodes leaked into each other for every seed
    but 0), and a proxy's `reset(*a, **k)` forwarded it to an inner reset() that takes none."""
    from agents.bench import evaluate
    from agents.memory_system import MemorySystemAgent

    class Keep(TinyMemorySystem):
        def reset(self, keep=False):
            if not keep:
                super().reset()

    class Proxy(TinyMemorySystem):
        def __init__(self):
            self.inner = TinyMemorySystem()

        def reset(self, *a, **k):
            return self.inner.reset(*a, **k)

        def add(self, text, metadata):
            return self.inner.add(text, metadata)

        def search(self, query, k):
            return self.inner.search(query, k)

        def delete(self, id):
            return self.inner.delete(id)

    ref = [r["return"] for r in evaluate(MemorySystemAgent(TinyMemorySystem(), name="t"), ENV, [10_000, 10_001])]
    for system in (Keep(), Proxy()):
        assert [r["return"] for r in evaluate(MemorySystemAgent(system, name="t"), ENV, [10_000, 10_001])] == ref


def test_a_multi_line_error_is_reported_in_one_line(tmp_path, monkeypatch, capsys):
    from agents import cli

    (tmp_path / "multiline.py").write_text(textwrap.dedent('''
        from agents.memory_system import TinyMemorySystem

        class Two(TinyMemorySystem):
            def add(self, text, metadata):
                raise ValueError("line one\\nline two")
        '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    code = cli.main(["bench", "--agents", "memsys:multiline:Two", "--families", "recall", "--seeds", "1",
                     "--workers", "1", "--set", "horizon=20", "--no-progress", "--no-plot", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "line one line two" in err, err


def _env_with(folder) -> dict:
    """This process's environment with ``folder`` (a memory system's module) and the repo importable."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(REPO), os.environ.get("PYTHONPATH", "")])}


def test_a_worker_that_dies_without_an_exception_is_reported_and_the_run_ends(tmp_path):
    """os._exit() (or a segfault in a native library) in a worker: multiprocessing.Pool replaced the
    worker and waited for its task forever."""
    import json

    (tmp_path / "dying.py").write_text(textwrap.dedent('''
        import os

        from agents.memory_system import TinyMemorySystem

        class Dies(TinyMemorySystem):
            def add(self, text, metadata):
                if metadata["step"] > 5:
                    os._exit(9)
                return super().add(text, metadata)
        '''))
    out = tmp_path / "o"
    env = _env_with(tmp_path)
    # in a subprocess with a timeout: the bug this guards against was a run that never ended
    proc = subprocess.run([sys.executable, "-m", "agents.cli", "bench", "--agents", "write_all,memsys:dying:Dies",
                           "--families", "recall", "--seeds", "2", "--workers", "2", "--set", "horizon=30",
                           "--no-progress", "--no-plot", "--out", str(out)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    err = proc.stderr
    assert proc.returncode == 2 and "agent 'memsys:dying:Dies' failed" in err, err
    assert "worker process died (exit code 9)" in err and "Traceback" not in err, err
    assert json.loads((out / "results.json").read_text())["agents"] == ["write_all", "random", "oracle"]


def test_an_agent_whose_workers_keep_dying_across_many_tasks_ends_the_run(tmp_path):
    """Every task of the agent kills its worker at once (30 tasks of 5 seeds): a replacement worker that
    took a task and died between two polls of the pool was never seen, and its task waited forever."""
    (tmp_path / "dying_fast.py").write_text(textwrap.dedent('''
        import os

        from agents.memory_system import TinyMemorySystem

        class Dies(TinyMemorySystem):
            def add(self, text, metadata):
                os._exit(3)
        '''))
    out = tmp_path / "o"
    env = _env_with(tmp_path)
    # in a subprocess with a timeout: the bug this guards against was a run that never ended
    proc = subprocess.run([sys.executable, "-m", "agents.cli", "bench", "--agents", "write_all,memsys:dying_fast:Dies",
                           "--families", "recall", "--seeds", "150", "--workers", "2", "--set", "horizon=10",
                           "--no-progress", "--no-plot", "--out", str(out)],
                          capture_output=True, text=True, timeout=90, env=env, cwd=tmp_path)
    err = proc.stderr
    assert proc.returncode == 2 and "agent 'memsys:dying_fast:Dies' failed on recall/easy, seed 10000" in err, err
    assert "worker process died (exit code 3)" in err and "Traceback" not in err, err
    results = json.loads((out / "results.json").read_text())
    assert results["agents"] == ["write_all", "random", "oracle"]
    assert len(results["episodes"]) == 3 * 150
    assert "worker process died (exit code 3)" in (out / "errors.txt").read_text()


class Repeats:
    """A library that keeps a text under one id: the 1st time ADD; the 2nd time ADD a new id and DELETE the old
    one (replaced); from the 3rd on DELETE it (dropped). Texts under 40 characters are not stored."""

    def reset(self):
        self.mem, self.seen, self.n = {}, {}, 0

    def add(self, text, metadata):
        if len(text) < 40:
            return None
        count = self.seen[text] = self.seen.get(text, 0) + 1
        old = [i for i, t in self.mem.items() if t == text]
        for i in old:
            del self.mem[i]
        deletes = [{"id": i, "event": "DELETE"} for i in old]
        if count >= 3:
            return deletes
        self.n += 1
        self.mem[f"m{self.n}"] = text
        return [{"id": f"m{self.n}", "event": "ADD"}, *deletes]

    def search(self, query, k):
        return []

    def delete(self, id):
        return self.mem.pop(id, None) is not None


def test_a_delete_keeps_a_world_memory_that_another_library_id_still_mirrors():
    """The world merges a repeated text into the memory holding it (info["memory_id"] is the old id), so the
    replaced id and the new one mirrored one world memory: the DELETE of the old id FORGOT it while the
    library still held the text under the new id. It is forgotten only when no live library id maps to it."""
    import numpy as np

    from agents.base import FORGET
    from agents.bench import make_env, run_episode
    from agents.memory_system import MemorySystemAgent

    env = make_env("noise", "easy")
    erased = []  # per FORGET: does the library still hold the erased memory's text?

    class Watched(MemorySystemAgent):
        def act(self, observation, info):
            action = super().act(observation, info)
            op, slot = (int(x) for x in np.asarray(action).reshape(-1))
            if op == FORGET:
                text = env.unwrapped.world.store.get(self.view.candidate_ids[slot]).content
                erased.append(text in self.system.mem.values())
            return action

    run_episode(Watched(Repeats(), name="repeats"), env, 10_000)
    # FORGETs still happen (a text dropped on its 3rd repeat), and none erases a text the library holds
    assert erased and not any(erased), erased


def test_a_delete_never_erases_the_version_chain_of_a_memory_another_library_id_mirrors():
    """m1 and m2 mirrored one world memory (a merged repeat); the library UPDATEd m1 (the world superseded
    that memory) and then DELETEd m2: the FORGET of m2's memory erased the whole chain, m1's new version
    with it, though the library still held m1. Now an UPDATE of a shared memory is written as a memory
    of its own, and a DELETE whose FORGET would reach a version another live id mirrors drops the mirror
    only."""
    from collections import Counter

    from agents.bench import make_env, run_episode
    from agents.memory_system import MemorySystemAgent

    env = make_env("noise", "easy")

    class Lib:
        def reset(self):
            self.mem, self.state, self.repeated = {}, 0, None

        def add(self, text, metadata):
            if self.repeated is None:
                said = [e.text for e in env.unwrapped.world.privileged.script if e.kind == "statement"]
                counts = Counter(said)
                self.repeated = next(t for t in said if counts[t] >= 2)
            if self.state in (0, 1) and text == self.repeated:  # the text, then its repeat under a new id
                sid = f"m{self.state + 1}"
                self.mem[sid] = text
                self.state += 1
                return [{"id": sid, "event": "ADD"}]
            if self.state == 2:  # the next statement updates m1
                self.mem["m1"] = text
                self.state = 3
                return [{"id": "m1", "event": "UPDATE"}]
            if self.state == 3:  # and the one after drops m2
                del self.mem["m2"]
                self.state = 4
                return [{"id": "m2", "event": "DELETE"}]
            return None

        def search(self, query, k):
            return []

        def delete(self, id):
            return self.mem.pop(id, None) is not None

    agent = MemorySystemAgent(Lib(), name="lib")
    run_episode(agent, env, 10_000)
    assert agent.system.state == 4 and set(agent.system.mem) == {"m1"}
    held = agent.system.mem["m1"]
    store = env.unwrapped.world.store
    assert any(r.content == held and r.superseded_at is None for r in store.episodic.values())


def test_a_waiting_delete_is_void_once_the_library_stores_that_id_again():
    """A DELETE that came with an ADD waits for a free event; a library whose ids are content hashes
    added the deleted text back under its old id before then, and the waiting DELETE FORGOT the memory
    it had just added (noise-easy seed 10000). Storing an id again voids its waiting DELETE."""
    import hashlib
    from collections import Counter

    import numpy as np

    from agents.base import FORGET
    from agents.bench import make_env, run_episode
    from agents.memory_system import MemorySystemAgent

    env = make_env("noise", "easy")

    def hid(text):
        return hashlib.sha1(text.encode()).hexdigest()[:8]

    class HashLib:
        def reset(self):
            self.mem, self.first, self.phase = {}, None, 0

        def add(self, text, metadata):
            if self.first is None:  # the first text the stream says again later
                said = [e.text for e in env.unwrapped.world.privileged.script if e.kind == "statement"]
                counts = Counter(said)
                self.first = next(t for t in said if counts[t] >= 2)
            h = hid(text)
            if self.phase == 1:  # the statement after it: ADD this one, DELETE the first
                self.phase = 2
                del self.mem[hid(self.first)]
                self.mem[h] = text
                return [{"id": h, "event": "ADD"}, {"id": hid(self.first), "event": "DELETE"}]
            if self.phase in (0, 2):
                if text == self.first:
                    self.phase += 1  # 0 -> 1: seen; 2 -> 3: added back under its old id, then nothing more
                self.mem[h] = text
                return [{"id": h, "event": "ADD"}]
            return None

        def search(self, query, k):
            return []

        def delete(self, id):
            return self.mem.pop(id, None) is not None

    erased = []

    class Watched(MemorySystemAgent):
        def act(self, observation, info):
            action = super().act(observation, info)
            op, slot = (int(x) for x in np.asarray(action).reshape(-1))
            if op == FORGET:
                erased.append(env.unwrapped.world.store.get(self.view.candidate_ids[slot]).content)
            return action

    agent = Watched(HashLib(), name="hashes")
    run_episode(agent, env, 10_000)
    assert agent.system.phase == 3
    held = set(agent.system.mem.values())
    assert agent.system.first in held and not [t for t in erased if t in held], erased
    assert not agent._deletes


def _children(pid: int) -> set[int]:
    """Live processes whose parent is ``pid`` (from /proc; zombies count as gone)."""
    kids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                kids.add(int(entry))
    return kids


def _alive(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_an_answer_the_main_process_cannot_load_fails_its_task_and_the_run_goes_on():
    """A worker's answer that does not unpickle in the main process: that task fails with the error named,
    its worker is replaced and the other tasks are played (the main process waited forever to join the
    live worker)."""
    code = textwrap.dedent('''
        import agents.bench as B

        def _boom():
            raise RuntimeError("cannot load this")

        class Unloadable:
            def __reduce__(self):
                return (_boom, ())

        B._task = lambda task: ([Unloadable()], None) if task[4][0] == 1 else ([task[4][0]], None)
        got = []
        B._run_in_pool([("a", "recall", "easy", {}, [i]) for i in range(5)], 2, got.append)
        rows = sorted(r[0][0] for r in got if r[0])
        failures = [r[1]["error"] for r in got if r[1]]
        print(rows, failures)
    ''')
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("[0, 2, 3, 4] [\"its results could not be read in the main process: "
                                 "RuntimeError('cannot load this')\"]"), out.stdout


_LINGERING = '''
import os
import signal
import threading
import time

from agents.memory_system import TinyMemorySystem


class Slow(TinyMemorySystem):
    def add(self, text, metadata):
        time.sleep(0.3)
        return super().add(text, metadata)


class Flusher(TinyMemorySystem):
    """A library with a background (non-daemon) flush thread that never ends, and a SIGTERM handler."""

    def add(self, text, metadata):
        if not getattr(Flusher, "started", False):
            Flusher.started = True
            signal.signal(signal.SIGTERM, lambda *a: None)
            threading.Thread(target=lambda: time.sleep(3600), daemon=False).start()
        return super().add(text, metadata)
'''


def test_a_worker_that_does_not_end_does_not_hold_the_run(tmp_path):
    """An agent's library keeps a non-daemon thread alive and ignores SIGTERM: its worker never ended,
    and the run waited for it forever before writing anything. It is asked, terminated, then killed."""
    (tmp_path / "lingering.py").write_text(_LINGERING)
    env = _env_with(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "agents.cli", "bench", "--agents", "memsys:lingering:Flusher",
                           "--families", "recall", "--seeds", "2", "--workers", "2", "--set", "horizon=20",
                           "--no-progress", "--no-plot", "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "o" / "results.json").read_text())["agents"][0] == "memsys:lingering:Flusher"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG and /proc")
@pytest.mark.parametrize("agent, how", [("write_all", "SIGTERM"), ("memsys:lingering:Slow", "SIGKILL")])
def test_workers_do_not_outlive_a_killed_bench(tmp_path, agent, how):
    """SIGTERM or SIGKILL to the main process of a `--workers 2` run alone (kill, the OOM killer): its
    workers end at once and release the caller's stdout. Forked, they held the main process's ends of
    their pipes and never saw EOF (`communicate()` and `| tee` waited forever); then they went on with
    their current task (five slow episodes of `Slow`: minutes) until it ended."""
    import signal
    import time

    (tmp_path / "lingering.py").write_text(_LINGERING)
    proc = subprocess.Popen([sys.executable, "-m", "agents.cli", "bench", "--agents", agent, "--families",
                             "recall,temporal", "--seeds", "40", "--workers", "2", "--set", "horizon=300",
                             "--no-progress", "--no-plot", "--out", str(tmp_path / "o")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            env=_env_with(tmp_path), start_new_session=True)
    try:
        workers: set[int] = set()
        for _ in range(600):  # (until both workers run: at most ~60 s)
            workers = _children(proc.pid)
            if len(workers) >= 2:
                break
            time.sleep(0.1)
        assert len(workers) >= 2, "the bench never started its workers"
        time.sleep(1.0)  # (inside their first tasks)
        os.kill(proc.pid, getattr(signal, how))
        proc.communicate(timeout=30)  # returns once every holder of its stdout is gone
        for _ in range(300):
            if not any(_alive(w) for w in workers):
                break
            time.sleep(0.1)
        assert not any(_alive(w) for w in workers)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # (whatever is left of the group, if the test failed)
        except ProcessLookupError:
            pass
