"""scripts/bench_store.py runs in its --quick form and prints a complete table."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_bench_store_quick(tmp_path):
    out = tmp_path / "rows.json"
    res = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_store.py"), "--quick", "--json", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert res.returncode == 0, res.stderr
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("|")]
    assert lines[0].startswith("| N | write p50") and len(lines) == 2 + 2
    assert lines[2].startswith("| 200 |") and lines[3].startswith("| 500 |")
    rows = json.loads(out.read_text())
    assert [r["n"] for r in rows] == [200, 500]
    for r in rows:
        assert r["query_p50_ms"] > 0 and r["ref_p50_ms"] > 0 and r["peak_rss_mb"] > 0
        assert r["speedup_p50"] == r["ref_p50_ms"] / r["ours_same_p50_ms"]
        assert r["ppr_fallbacks"] == 0


def test_bench_scripts_refuse_bad_numbers_before_running():
    """Negative or zero sizes, counts and a --json path in a missing folder were tracebacks (after the whole
    run, for --json); 0 sweeps / queries silently became the defaults; bench_persistence ignored --n with
    --quick and crashed on --dim below 8."""
    cases = [
        ("bench_store.py", ["--quick", "--sizes", "-1"], "--sizes"),
        ("bench_store.py", ["--quick", "--sizes", "0"], "--sizes"),
        ("bench_store.py", ["--quick", "--queries", "-3"], "--queries"),
        ("bench_store.py", ["--quick", "--sweeps", "0"], "--sweeps"),
        ("bench_store.py", ["--quick", "--ref-queries", "-2"], "--ref-queries"),
        ("bench_store.py", ["--quick", "--json", "/nonexistent/dir/x.json"], "does not exist"),
        # a folder: a traceback after the whole run (the rows lost)
        ("bench_store.py", ["--quick", "--json", str(ROOT / "scripts")], "is a folder"),
        ("validate_world.py", ["--quick", "--seeds", "0"], "--seeds"),
        ("validate_world.py", ["--seeds", "-2"], "--seeds"),
        ("validate_world.py", ["--families", ""], "--families is empty"),
        ("validate_world.py", ["--difficulties", " , "], "--difficulties is empty"),
        ("bench.py", ["--seeds", "1000000000000000000000"], "--seeds"),
        ("bench_persistence.py", ["--quick", "--n", "-1"], "--n"),
        ("bench_persistence.py", ["--quick", "--dim", "0"], "--dim"),
    ]
    for script, args, needle in cases:
        res = subprocess.run([sys.executable, str(ROOT / "scripts" / script), *args], capture_output=True,
                             text=True, timeout=60, cwd=ROOT)
        assert res.returncode == 2, (script, args, res.stderr)
        assert needle in res.stderr and "Traceback" not in res.stderr, (script, args, res.stderr)


def test_scripts_train_runs_this_checkouts_code(tmp_path):
    # it imported whichever `agents` came first on the path (another checkout's, an installed one, or
    # none: ModuleNotFoundError under a plain python3), unlike scripts/bench.py
    fake = tmp_path / "agents"
    fake.mkdir()
    (fake / "__init__.py").write_text("")
    (fake / "train.py").write_text("def main():\n    print('ANOTHER CHECKOUT')\n    return 3\n")
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "train.py"), "--help"], capture_output=True,
                         text=True, timeout=120, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert res.returncode == 0 and "ANOTHER CHECKOUT" not in res.stdout, res.stdout + res.stderr
    assert "--config" in res.stdout


def test_bench_store_rss_is_the_stores_own():
    """The peak RSS was read after the reference had built its networkx graph in the same process (the 5k
    row doubled); it is now read before: the same with and without the reference."""
    rows = []
    for ref in ("5", "0"):
        res = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_store.py"), "--one", "500", "--quick",
                              "--queries", "10", "--ref-queries", ref, "--sweeps", "1"],
                             capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert res.returncode == 0, res.stderr
        rows.append(json.loads(res.stdout.strip().splitlines()[-1]))
    assert "ref_p50_ms" in rows[0] and "ref_p50_ms" not in rows[1]
    assert abs(rows[0]["peak_rss_mb"] - rows[1]["peak_rss_mb"]) < 0.05 * rows[1]["peak_rss_mb"]
