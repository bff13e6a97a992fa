"""Benchmark: save / load time and file size of a MemoryStore (world/persistence.py).

Builds a store of N episodic memories (hashing embedder, dim 384, up to 8 cues each; 10% keyed facts
that supersede each other, one typed link per 10 memories, one reflection per 100, 100 queries
spread over the run so ACT-R histories are non-trivial, two namespaces with rolling summaries), then saves it
to SQLite and loads it back, checks the loaded store answers queries exactly like the saved one,
and prints a Markdown table. The reference, measured in the same run, is pickling the same
exported state (protocol 5) to a file and back (same garbage-collector pause): no checks, no fsync,
no atomic rename, no SQLite.

    .venv/bin/python scripts/bench_persistence.py            # N = 100,000
    .venv/bin/python scripts/bench_persistence.py --quick    # N = 1,000 (what the test runs)
"""

from __future__ import annotations

import argparse
import pickle
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from world import persistence  # noqa: E402
from world.embedding import HashingEmbedder  # noqa: E402
from world.memory import MemoryStore, RelationType  # noqa: E402
from world.persistence import load_store, save_store  # noqa: E402
from world.summary import summaries  # noqa: E402

NAMES = ["Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Gina", "Hugo", "Ines", "Jon", "Kira", "Liam"]
PLACES = ["Lisbon", "Oslo", "Lima", "Kyoto", "Accra", "Quito", "Perth", "Riga", "Tunis", "Hanoi"]
THINGS = ["tea", "chess", "jazz", "cycling", "pottery", "sushi", "opera", "rowing", "origami", "salsa"]
QUERIES = ["where does Alice live", "who likes jazz", "Bob Kyoto", "Gina pottery", "Hugo rowing Riga"]


def progress(iterable, total: int, desc: str, enabled: bool):
    if not enabled:
        return iterable
    try:
        from tqdm import tqdm
    except ImportError:
        return iterable
    return tqdm(iterable, total=total, desc=desc, unit="mem", leave=False, mininterval=0.5)


def build(n: int, dim: int, seed: int, show: bool) -> MemoryStore:
    rng = random.Random(seed)
    store = MemoryStore(embedder=HashingEmbedder(dim=dim))
    rolls = {ns: summaries(store, ns, max_turns=8, keep_recent=4) for ns in ("default", "bob")}
    ids: list[str] = []
    query_every = max(1, n // 100)  # 100 retrievals in all (each one rebuilds the PPR matrix of a changed graph)
    for i in progress(range(n), n, "build", show):
        step = i // 4
        if i % 4 == 0:
            store.tick(step)
        ns = "bob" if i % 5 == 0 else "default"
        who, where, what = rng.choice(NAMES), rng.choice(PLACES), rng.choice(THINGS)
        if i % 10 == 1:
            m = store.write_episode(step, f"{who} {i % 97} lives in {where} now, record {i}.",
                                    key=f"{who}{i % 97}/home", source="user", namespace=ns)
        elif i % 200 == 7:
            m = rolls[ns].add_turn(f"{who} told us {what} in {where} matters, turn {i}.", step=step)
        else:
            m = store.write_episode(step, f"{who} met {rng.choice(NAMES)} in {where} for {what}, event {i}.",
                                    namespace=ns)
        ids.append(m.memory_id)
        if i % 10 == 9:
            a, b = ids[-1], ids[rng.randrange(len(ids))]
            if a != b and a in store and b in store:
                store.link(a, b, rng.choice([RelationType.SUPPORTS, RelationType.FOLLOWS]))
        if i % 100 == 99:
            src = [x for x in ids[-5:] if x in store and store.get(x).namespace == ns]
            if src:
                store.write_semantic(step, f"{who} often does {what} (rule {i}).", src, confidence=0.6,
                                     evidence=src, namespace=ns)
        if i % query_every == query_every - 1:
            store.query(rng.choice(QUERIES), top_k=5, namespace=ns)
    return store


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def answers(store: MemoryStore) -> list:
    return [[(m.memory_id, s) for m, s in store.query_scored(q, top_k=10, namespace=ns, bump=False)]
            for q in QUERIES for ns in ("default", "bob")]


def run(n: int, dim: int, seed: int, show: bool) -> dict:
    store, t_build = timed(lambda: build(n, dim, seed, show))
    # (no dir=: tempfile's default honours a usable TMPDIR and falls back to /tmp when it is not, where an
    # explicit dir=$TMPDIR crashed after the minutes-long build)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "store.sqlite"
        _, t_save = timed(lambda: save_store(store, path))
        size = path.stat().st_size
        loaded, t_load = timed(lambda: load_store(path, embedder=HashingEmbedder(dim=dim)))
        exact = answers(loaded) == answers(store)
        del loaded
        # where the time goes: each stage of save and load, timed on its own (with the same pause of the
        # garbage collector that save_store / load_store use)
        with persistence._no_gc():
            exported, t_export = timed(store._export_state)
            rows, t_encode = timed(lambda: persistence._rows(exported))
            exported = None
            stage = Path(tmp) / "stage.sqlite"
            _, t_write = timed(lambda: persistence._write_sqlite(stage, rows))
            rows = None
            state, t_read = timed(lambda: persistence._read_state(stage))
            _, t_from = timed(lambda: MemoryStore._from_state(state, HashingEmbedder(dim=dim)))
            state = None

        ref_path = Path(tmp) / "state.pickle"

        def ref_save():
            with persistence._no_gc(), open(ref_path, "wb") as fh:
                pickle.dump(store._export_state(), fh, protocol=5)

        def ref_load():
            with persistence._no_gc(), open(ref_path, "rb") as fh:
                return MemoryStore._from_state(pickle.load(fh), HashingEmbedder(dim=dim))

        _, t_ref_save = timed(ref_save)
        ref_size = ref_path.stat().st_size
        _, t_ref_load = timed(ref_load)
    return {
        "n": n, "live": len(store), "build_s": t_build, "save_s": t_save, "load_s": t_load,
        "size": size, "exact": exact, "ref_save_s": t_ref_save, "ref_load_s": t_ref_load,
        "ref_size": ref_size, "export_s": t_export, "encode_s": t_encode, "write_s": t_write,
        "read_s": t_read, "from_state_s": t_from,
    }


def table(rows: list[dict]) -> str:
    head = ("| episodes written | records (every version) | save s | load s | file MB | bytes/record | exact answers "
            "| pickle save s | pickle load s | pickle MB | save / pickle | load / pickle | size / pickle |")
    sep = "|" + "|".join("---" for _ in range(13)) + "|"
    lines = [head, sep]
    for r in rows:
        lines.append(
            f"| {r['n']:,} | {r['live']:,} | {r['save_s']:.2f} | {r['load_s']:.2f} | {r['size'] / 1e6:.1f} "
            f"| {r['size'] / max(r['live'], 1):,.0f} | {'yes' if r['exact'] else 'NO'} "
            f"| {r['ref_save_s']:.2f} | {r['ref_load_s']:.2f} | {r['ref_size'] / 1e6:.1f} "
            f"| {r['save_s'] / r['ref_save_s']:.2f}x | {r['load_s'] / r['ref_load_s']:.2f}x "
            f"| {r['size'] / r['ref_size']:.2f}x |")
    lines += ["", "Where the time goes (s), each stage timed on its own: the store's `_export_state()` and "
              "`_from_state()` (world/memory.py), JSON + CRC encoding, the SQLite write (one transaction), "
              "the SQLite read with all checks and decoding (world/persistence.py). save also fsyncs and renames; "
              "the pickle reference does not fsync.", "",
              "| episodes written | _export_state | encode | SQLite write | SQLite read + checks | _from_state |",
              "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['n']:,} | {r['export_s']:.2f} | {r['encode_s']:.2f} | {r['write_s']:.2f} "
                     f"| {r['read_s']:.2f} | {r['from_state_s']:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[100_000], help="store sizes (default 100000)")
    parser.add_argument("--quick", action="store_true", help="N = 1,000 only (smoke test)")
    parser.add_argument("--dim", type=int, default=384, help="hashing embedder dimension (default 384)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    if any(n < 1 for n in args.n):
        parser.error(f"--n: sizes must be >= 1, got {args.n}")
    if args.dim < 8:
        parser.error(f"--dim: the hashing embedder's dimension must be >= 8, got {args.dim}")
    sizes = [1_000] if args.quick else args.n
    if any(n < 1 for n in sizes):
        parser.error(f"--n: sizes must be >= 1, got {sizes}")
    rows = [run(n, args.dim, args.seed, not args.no_progress) for n in sizes]
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    builds = ", ".join(f"{r['build_s']:.1f} s" for r in rows)
    print(f"memgym persistence benchmark: SQLite store file vs pickle of the same state; hashing dim {args.dim}; "
          f"build time {builds}; peak RSS {peak_mb:,.0f} MB")
    print(table(rows))
    return 0 if all(r["exact"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
