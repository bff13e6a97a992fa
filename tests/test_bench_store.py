"""scripts/bench_store.py runs in its --quick form and prints a complete table."""

import json
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
