"""Benchmark of the memory store: write / query / sweep latency and peak RSS.

For N = 1,000 / 5,000 / 10,000 / 100,000 episodes (hashing embedder, dim 384, 8 cues each) the store
is filled, queried and swept; every size runs in its own process so that peak RSS is per size.
Beside our query latency it measures, in the same run, a reference that answers the same queries
the way seed 001 did: `networkx.pagerank` on the graph plus a per-memory Python loop over embeddings
held as Python lists (capped at N = 5,000, it is slow). Targets (issue 2): query p50 <= 1 ms at 1k,
<= 5 ms at 10k, <= 50 ms at 100k; >= 50x faster than the reference at 1k and 5k; peak RSS <= 1.5 GB
at 100k.

    python scripts/bench_store.py            # full run (a few minutes)
    python scripts/bench_store.py --quick    # small sizes, seconds
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import resource
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

REF_CAP = 5_000
FULL_SIZES = (1_000, 5_000, 10_000, 100_000)
QUICK_SIZES = (200, 500)


def _texts(n: int, rng: np.random.Generator) -> tuple[list[str], list[list[str]]]:
    """n distinct episodes, each with 8 cues drawn from a vocabulary that grows with n."""
    vocab = max(64, n // 4)
    texts, cues = [], []
    for i in range(n):
        words = [f"w{int(j)}" for j in rng.choice(vocab, size=8, replace=False)]
        cues.append(words)
        texts.append(f"Event {i}: " + " ".join(words) + f" noted at step {i}")
    return texts, cues


def _pct(xs: list[float]) -> tuple[float, float]:
    a = np.asarray(xs) * 1e3
    return float(np.percentile(a, 50)), float(np.percentile(a, 95))


def _reference_queries(store, queries: list[tuple[str, list[str]]]) -> list[float]:
    """Seed 001's query path: networkx.pagerank + Python loop with list embeddings and cosine."""
    import networkx as nx

    graph = nx.DiGraph(store.graph)  # a plain (mutable) DiGraph, as the seed kept
    mems = list(store.episodic.values())
    emb_lists = {m.memory_id: store.embed(m.content).astype(float).tolist() for m in mems}
    actr = store.actr
    times = []
    for text, cues in queries:
        t0 = time.perf_counter()
        q = store.embedder.encode(text).astype(float).tolist()
        seeds = [f"cue::{c}" for c in cues if graph.has_node(f"cue::{c}")]
        ppr = {}
        if seeds:
            try:
                ppr = nx.pagerank(graph, alpha=0.85, personalization={s: 1.0 / len(seeds) for s in seeds},
                                  max_iter=50, tol=1e-4)
            except nx.PowerIterationFailedConvergence:
                ppr = {}
        scored = []
        for m in mems:
            e = emb_lists[m.memory_id]
            sim = sum(x * y for x, y in zip(q, e))
            rec = actr[m.memory_id]
            lags = [max(1, store.current_step - t) for t in rec.recent]
            act = math.log(sum(lag ** -0.5 for lag in lags))
            score = 0.35 * sim + 0.5 * ppr.get(m.memory_id, 0.0) * 10 + 0.15 * act * 0.1 + 0.1 * m.importance
            scored.append((score, m))
        scored.sort(key=lambda t: t[0], reverse=True)
        _ = [m for _, m in scored[:5]]
        times.append(time.perf_counter() - t0)
    return times


def run_one(n: int, n_queries: int, n_ref: int, n_sweeps: int, seed: int = 0, progress: bool = True) -> dict:
    from world import CachedEmbedder, HashingEmbedder, MemoryStore

    rng = np.random.default_rng(seed)
    texts, cues = _texts(n, rng)
    store = MemoryStore(CachedEmbedder(HashingEmbedder(384)))
    write_t = []
    it = range(n)
    if progress:
        try:
            from tqdm import tqdm

            it = tqdm(it, desc=f"write N={n:,}", leave=False, file=sys.stderr, mininterval=1.0)
        except ImportError:
            pass
    imp = rng.uniform(0.0, 1.0, size=n)
    for i in it:
        t0 = time.perf_counter()
        store.write_episode(i, texts[i], cues=cues[i], importance=float(imp[i]))
        write_t.append(time.perf_counter() - t0)
    assert len(store) == n, f"dedup dropped {n - len(store)} synthetic episodes"
    store.tick(n)
    queries = []
    vocab = max(64, n // 4)
    for _ in range(n_queries):
        ws = [f"w{int(j)}" for j in rng.choice(vocab, size=3, replace=False)]
        queries.append(("what happened with " + " ".join(ws), ws))
    gc.collect()
    t0 = time.perf_counter()
    store.query(queries[0][0], cues=queries[0][1], bump=False)  # builds the CSR cache
    first_query = time.perf_counter() - t0
    query_t = []
    for text, qc in queries:
        t0 = time.perf_counter()
        store.query(text, cues=qc, top_k=5)
        query_t.append(time.perf_counter() - t0)
    # the store's own peak (writes and queries): read before the reference, whose networkx graph and list
    # embeddings live in this process too (they doubled the 5k figure), and before the sweeps (which
    # only remove)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    ref_t: list[float] = []
    if n <= REF_CAP and n_ref > 0:
        # ours on exactly the queries the reference answers (before it: the reference leaves a large
        # networkx graph behind whose garbage collection would be charged to us), then the reference
        same = []
        for text, qc in queries[:n_ref]:
            t0 = time.perf_counter()
            store.query(text, cues=qc, top_k=5, bump=False)
            same.append(time.perf_counter() - t0)
        ref_t = _reference_queries(store, queries[:n_ref])
        store._graph_view = None  # drop the cached networkx view the reference asked for
        gc.collect()
    sweep_t, swept = [], 0
    for j in range(n_sweeps):
        store.tick(n + (j + 1) * max(1, n // 2))
        t0 = time.perf_counter()
        swept += len(store.sweep_decayed())
        sweep_t.append(time.perf_counter() - t0)
    out = {
        "n": n,
        "write_p50_ms": _pct(write_t)[0], "write_p95_ms": _pct(write_t)[1],
        "query_p50_ms": _pct(query_t)[0], "query_p95_ms": _pct(query_t)[1],
        "first_query_ms": first_query * 1e3,
        "sweep_p50_ms": _pct(sweep_t)[0], "sweep_p95_ms": _pct(sweep_t)[1], "swept": swept,
        "peak_rss_mb": peak_kb / 1024.0,
        "graph_edges": store.stats()["graph_edges"] if len(store) else 0,
        "ppr_fallbacks": store.counters["ppr_solve"],
    }
    if ref_t:
        out["ref_p50_ms"], out["ref_p95_ms"] = _pct(ref_t)
        out["ours_same_p50_ms"] = _pct(same)[0]
        out["speedup_p50"] = out["ref_p50_ms"] / out["ours_same_p50_ms"]
    return out


def _fmt(v, spec=".3f") -> str:
    return "-" if v is None else format(v, spec)


def table(rows: list[dict]) -> str:
    head = ("| N | write p50 / p95 (ms) | query p50 / p95 (ms) | sweep p50 / p95 (ms) | swept | peak RSS (MB) "
            "| reference query p50 / p95 (ms) | speed-up (p50) |")
    lines = [head, "|" + "---|" * 8]
    for r in rows:
        if "ref_p50_ms" in r:
            ref = f"{_fmt(r.get('ref_p50_ms'), '.1f')} / {_fmt(r.get('ref_p95_ms'), '.1f')}"
        else:
            ref = f"- (N > {REF_CAP:,})" if r["n"] > REF_CAP else "- (not run)"
        sp = f"{r['speedup_p50']:.0f}x" if "speedup_p50" in r else "-"
        lines.append(
            f"| {r['n']:,} | {r['write_p50_ms']:.3f} / {r['write_p95_ms']:.3f} | {r['query_p50_ms']:.3f} / "
            f"{r['query_p95_ms']:.3f} | {r['sweep_p50_ms']:.2f} / {r['sweep_p95_ms']:.2f} | {r['swept']:,} | {r['peak_rss_mb']:.0f} "
            f"| {ref} | {sp} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    def count(minimum: int):
        def parse(text: str) -> int:
            try:
                value = int(text)
            except ValueError:
                raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text!r}") from None
            if value < minimum:
                raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {value}")
            return value
        return parse

    p.add_argument("--quick", action="store_true", help="small sizes and few queries (seconds; used by the tests)")
    p.add_argument("--sizes", type=count(1), nargs="+", help="override the store sizes (integers >= 1)")
    p.add_argument("--queries", type=count(1), default=None, help="queries per size (default 200, quick 30)")
    p.add_argument("--ref-queries", type=count(0), default=None,
                   help="reference queries per size (default 20, quick 5; 0: no reference)")
    p.add_argument("--sweeps", type=count(1), default=None, help="sweeps per size (default 10, quick 3)")
    p.add_argument("--json", type=str, default=None, help="also write the rows to this JSON file")
    p.add_argument("--one", type=count(1), default=None, help=argparse.SUPPRESS)  # child process: one size
    args = p.parse_args(argv)
    if args.json:
        folder = os.path.dirname(os.path.abspath(args.json))
        if not os.path.isdir(folder):
            p.error(f"--json {args.json}: the folder {folder} does not exist")
        if os.path.isdir(args.json):
            p.error(f"--json {args.json} is a folder; give a file path such as {os.path.join(args.json, 'store.json')}")
        if (os.path.exists(args.json) and not os.access(args.json, os.W_OK)) or not os.access(folder, os.W_OK):
            p.error(f"--json {args.json}: not writable")
    nq = args.queries if args.queries is not None else (30 if args.quick else 200)
    nr = args.ref_queries if args.ref_queries is not None else (5 if args.quick else 20)
    ns = args.sweeps if args.sweeps is not None else (3 if args.quick else 10)
    if args.one is not None:
        print(json.dumps(run_one(args.one, nq, nr, ns, progress=not args.quick)))
        return 0
    sizes = args.sizes or (QUICK_SIZES if args.quick else FULL_SIZES)
    rows = []
    for n in sizes:
        cmd = [sys.executable, os.path.abspath(__file__), "--one", str(n), "--queries", str(nq),
               "--ref-queries", str(nr), "--sweeps", str(ns)] + (["--quick"] if args.quick else [])
        print(f"running N={n:,} ...", file=sys.stderr, flush=True)
        res = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True)
        rows.append(json.loads(res.stdout.strip().splitlines()[-1]))
    print(table(rows))
    print()
    print("hashing embedder dim 384, 8 cues per episode, top_k 5; reference = networkx.pagerank + per-memory "
          "Python loop (seed 001), same queries, same process; peak RSS per size (own process, after the writes "
          "and queries, before the reference and the sweeps).")
    if args.json:
        try:
            with open(args.json, "w") as fh:
                json.dump(rows, fh, indent=2)
        except OSError as exc:  # (checked before the run; the disk may still fill up)
            print(f"bench_store.py: error: could not write --json {args.json}: {exc.strerror or exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
