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
