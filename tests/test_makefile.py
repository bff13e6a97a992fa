"""The Makefile's setup rules, read through `make -n` (a dry run: nothing is installed)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make")


def _dry(*args: str) -> str:
    return subprocess.run(["make", "-n", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def test_another_torch_spec_or_index_reinstalls():
    """The stamp ignored TORCH_SPEC: on a built .venv, `make test TORCH_SPEC=...` silently kept the old
    torch. And the spec was quoted whole, so no pip option could reach the torch step."""
    out = _dry("venv", "TORCH_SPEC=torch==2.9.1")
    assert 'pip install --quiet  "torch==2.9.1"' in out and "-e \".[all,dev]\"" in out
    out = _dry("venv", "TORCH_INDEX=https://download.pytorch.org/whl/cpu")
    assert '--index-url https://download.pytorch.org/whl/cpu "torch==2.13.0"' in out


def test_a_half_built_venv_is_rebuilt_and_every_phony_target_has_a_rule():
    out = _dry("venv", "TORCH_SPEC=torch==2.9.1")
    # (python3 -m venv writes bin/python before pip: testing for the interpreter alone reused a venv without pip)
    assert "-m pip --version >/dev/null 2>&1 || python3 -m venv --clear .venv" in out
    phony = next(line for line in (ROOT / "Makefile").read_text().splitlines() if line.startswith(".PHONY:"))
    for target in phony.split(":", 1)[1].split():
        assert "Nothing to be done" not in subprocess.run(["make", "-n", target, "TORCH_SPEC=torch==0"], cwd=ROOT,
                                                           capture_output=True, text=True).stdout, target


def test_a_torch_of_another_spec_or_index_is_uninstalled_first(tmp_path):
    """pip keeps an installed torch==2.13.0 whatever index it came from: after TORCH_INDEX changed, the CUDA
    build stayed. The rule uninstalls torch when .venv holds the stamp of another spec or index (and only
    then: a pyproject change keeps the stamp's name, and the torch). Its shell line runs on a fake .venv."""
    line = next(x for x in _dry("venv", "TORCH_INDEX=https://x").splitlines() if "pip uninstall" in x)
    ours = line.split("grep -qvx '.venv/")[1].split("'")[0]  # this spec's stamp, .installed-<cksum>
    venv = tmp_path / "v"
    script = line.replace(".venv/bin/python -m pip uninstall", "echo uninstall").replace(".venv/", f"{venv}/")
    for stamps, uninstalls in (([], False), ([ours], False), ([".installed-123"], True),
                               ([ours, ".installed-123"], True)):
        shutil.rmtree(venv, ignore_errors=True)
        venv.mkdir()
        for name in stamps:
            (venv / name).touch()
        ran = subprocess.run(["sh", "-c", script], capture_output=True, text=True)
        assert ("uninstall" in ran.stdout) is uninstalls, (stamps, ran.stdout, ran.stderr)
