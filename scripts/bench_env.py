#!/usr/bin/env python
"""Steps per second of every registered MemGym env, with CartPole-v1 measured in the same run.

Uses gymnasium's ``benchmark_step`` (random actions, resets on truncation) on ``gym.make(id)`` for
every id and ``benchmark_vector_step`` on ``SyncVectorEnv`` x 8, plus ``MemGym/Life-Easy-v0`` with
the real sentence-transformers embedder (all-MiniLM-L6-v2, loaded offline) after a pass that warms its
embedding cache. Prints a Markdown table with the ratio to CartPole and the issue's targets.

    python scripts/bench_env.py            # every id, 2 s each
    python scripts/bench_env.py --quick    # Life-Easy, Life-Hard, vector x 8; 0.3 s each; no MiniLM
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import gymnasium as gym  # noqa: E402
from gymnasium.utils.performance import benchmark_step  # noqa: E402

try:  # gymnasium >= 1.3; RLlib pins 1.2.2, which the project supports too
    from gymnasium.utils.performance import benchmark_vector_step  # noqa: E402
except ImportError:  # pragma: no cover - exercised with gymnasium < 1.3
    import numpy as _np

    def benchmark_vector_step(env, target_duration: float = 5, seed: int | None = None) -> float:
        """Steps per second of a vector env (gymnasium 1.3's ``benchmark_vector_step`` for the
        default next-step autoreset: the step that resets a finished sub-env is not counted)."""
        env.action_space.seed(seed)
        env.reset(seed=seed)
        env.step(env.action_space.sample())  # warm-up outside the timing, as gymnasium's does
        env.reset(seed=seed)
        steps, done = 0, _np.zeros(env.num_envs, dtype=bool)
        start = time.time()
        while True:
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            steps += env.num_envs - int(_np.count_nonzero(done))
            done = _np.logical_or(terminated, truncated)
            elapsed = time.time() - start
            if elapsed >= target_duration:
                return steps / elapsed

import envs  # noqa: E402

TARGETS = {"MemGym/Life-Easy-v0": 10_000.0, "MemGym/Life-Hard-v0": 3_000.0}
SEED = 0
SPLIT_SEED = 1  # (--split: episodes the table did not play)


def _fmt(x: float) -> str:
    return f"{x:,.0f}"


def _vector(id_: str, n: int, duration: float) -> float:
    vec = gym.vector.SyncVectorEnv([lambda: gym.make(id_) for _ in range(n)])
    try:
        return benchmark_vector_step(vec, target_duration=duration, seed=SEED)
    finally:
        vec.close()


def _minilm(duration: float, episodes: int) -> tuple[float, float, float, int]:
    """(steps/s with MiniLM and a warm cache, model load seconds, warm-up seconds, texts the measured
    pass embedded: 0 unless it played more episodes than were warmed).

    Warm-up: the first ``episodes`` episodes that ``benchmark_step`` will play (reset(seed=SEED), then
    unseeded resets; an episode's script depends on the seed only) are reset once each: a reset embeds
    its script in batches into the worlds' shared perception cache (``World._prefetch``), so the
    measured pass finds every event text there. A FORGET does not drop script texts from that cache
    (``world.sim._StoreEmbedder``), so no measured step runs the model unless its episode was not
    warmed.
    """
    t0 = time.perf_counter()
    env = gym.make("MemGym/Life-Easy-v0", embedder="minilm")
    env.reset(seed=SEED)
    load = time.perf_counter() - t0
    t1 = time.perf_counter()
    for _ in range(episodes):
        env.reset()
    warm = time.perf_counter() - t1
    from world.sim import shared_embedder

    cache = shared_embedder("minilm", 384)  # (the worlds' perception cache: its misses ran the model)
    misses = cache.misses
    rate = benchmark_step(env, target_duration=duration, seed=SEED)
    env.close()
    return rate, load, warm, cache.misses - misses


def _split(id_: str, steps: int) -> dict[str, float]:
    """CPU microseconds per step (uniform random actions, as benchmark_step) spent in the world's
    reset / apply / advance / candidates + event embedding / event cues + signature + version key,
    and in the env around them (episodes of SPLIT_SEED). Nested calls count once, in the outermost timed part (the cues an UPDATE extracts
    count in world.apply, those the observation needs first in their own row)."""
    import numpy as np

    from world import World

    env = gym.make(id_).unwrapped
    parts = {"reset": "world.reset (script, its texts analysed)", "apply": "world.apply", "advance": "world.advance",
             "candidates": "world.candidates+embed", "event_vector": "world.candidates+embed",
             "event_cues": "world.event cues+signature+key", "event_signature": "world.event cues+signature+key",
             "event_key": "world.event cues+signature+key",
             # (the observation reads the event's cues and key through this one call)
             "_event_analysis": "world.event cues+signature+key"}
    parts = {name: label for name, label in parts.items() if hasattr(World, name)}
    spent = dict.fromkeys(parts.values(), 0.0)
    originals = {name: getattr(World, name) for name in parts}
    depth = [0]

    def timed(name, label):
        fn = originals[name]

        def wrapper(self, *a, **kw):
            if depth[0]:
                return fn(self, *a, **kw)
            depth[0] += 1
            t = time.process_time()
            try:
                return fn(self, *a, **kw)
            finally:
                spent[label] += time.process_time() - t
                depth[0] -= 1
        return wrapper

    for name, label in parts.items():
        setattr(World, name, timed(name, label))
    try:
        # another seed than the table's: the same episodes again would find their texts in the worlds'
        # process-wide script-text memo, which a fresh process (or new episodes) would not
        rng = np.random.default_rng(SPLIT_SEED)
        env.reset(seed=SPLIT_SEED)
        t0 = time.process_time()
        for _ in range(steps):
            _, _, _, truncated, _ = env.step(np.array([rng.integers(7), rng.integers(env.K)]))
            if truncated:
                env.reset()
        total = time.process_time() - t0
    finally:
        for name, fn in originals.items():
            setattr(World, name, fn)
    out = {k: v / steps * 1e6 for k, v in spent.items()}
    out["env (observation, masks, info)"] = total / steps * 1e6 - sum(out.values())
    out["total"] = total / steps * 1e6
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a few ids, short runs, no MiniLM (used by tests)")
    ap.add_argument("--duration", type=float, default=None, help="seconds per measurement (default 2, quick 0.3)")
    ap.add_argument("--ids", default=None, help="comma-separated env ids (default: all registered)")
    ap.add_argument("--num-envs", type=int, default=8, help="SyncVectorEnv size")
    ap.add_argument("--no-minilm", action="store_true", help="skip the sentence-transformers row")
    ap.add_argument("--torch-threads", type=int, default=1,
                    help="torch intra-op threads for MiniLM (default 1: on a busy 2-core machine 2 threads "
                         "oversubscribe and one encode takes ~1 s instead of ~45 ms)")
    ap.add_argument("--minilm-episodes", type=int, default=None,
                    help="episodes whose texts are embedded before the MiniLM measurement (default 75 per "
                         "second of --duration: more than a pass plays at up to 7,500 steps/s, so that no "
                         "measured reset embeds a fresh script; the footer says if one did)")
    ap.add_argument("--split", action="store_true",
                    help="also print where a step's CPU time goes (world vs env) for Life-Easy and Life-Hard")
    args = ap.parse_args(argv)
    # (checked before the first measurement: a NaN duration never ended benchmark_step's loop)
    if args.duration is not None and not (math.isfinite(args.duration) and args.duration > 0):
        ap.error(f"--duration must be a number of seconds > 0, got {args.duration!r}")
    if args.num_envs < 1:
        ap.error(f"--num-envs must be >= 1, got {args.num_envs}")
    if args.torch_threads < 1:
        ap.error(f"--torch-threads must be >= 1, got {args.torch_threads}")
    if args.minilm_episodes is not None and args.minilm_episodes < 1:
        ap.error(f"--minilm-episodes must be >= 1, got {args.minilm_episodes}")

    duration = args.duration if args.duration is not None else (0.3 if args.quick else 2.0)
    if args.ids:
        ids = [i.strip() for i in args.ids.split(",") if i.strip()]
        if not ids:
            ap.error(f"--ids: no env id in {args.ids!r}; registered ids: {', '.join(envs.registered_ids())}")
        for i in ids:
            try:
                envs.parse_env_id(i)
            except ValueError as exc:
                ap.error(f"--ids: {exc}")
    elif args.quick:
        ids = ["MemGym/Life-Easy-v0", "MemGym/Life-Hard-v0"]
    else:
        ids = envs.registered_ids()
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is in the train extra
        def tqdm(it, **_kw):
            return it

    rows: list[tuple[str, float, str]] = []
    cart = gym.make("CartPole-v1")
    cart_rate = benchmark_step(cart, target_duration=duration, seed=SEED)
    cart.close()
    rows.append(("CartPole-v1 (reference)", cart_rate, ""))
    for id_ in tqdm(ids, desc="bench_env", unit="env", file=sys.stderr):
        env = gym.make(id_)
        rate = benchmark_step(env, target_duration=duration, seed=SEED)
        env.close()
        rows.append((id_, rate, _fmt(TARGETS[id_]) if id_ in TARGETS else ""))
    n = args.num_envs
    cart_vec = _vector("CartPole-v1", n, duration)
    rows.append((f"CartPole-v1 SyncVectorEnv x {n} (reference)", cart_vec, ""))
    vec_rate = _vector("MemGym/Life-Easy-v0", n, duration)
    rows.append((f"MemGym/Life-Easy-v0 SyncVectorEnv x {n}", vec_rate, ""))
    easy = dict((r[0], r[1]) for r in rows).get("MemGym/Life-Easy-v0")
    splits = None
    if args.split:
        # (before the MiniLM row: with torch loaded the heap holds ~450k more objects, and a full garbage
        # collection, ~0.3 s then, falling inside a 6,000-step split landed on whichever part ran)
        steps = 600 if args.quick else 6000
        splits = {i: _split(i, steps) for i in ("MemGym/Life-Easy-v0", "MemGym/Life-Hard-v0")}
    load = warm = None
    if not (args.quick or args.no_minilm):
        import torch

        torch.set_num_threads(args.torch_threads)
        if args.minilm_episodes is None:
            args.minilm_episodes = max(1, math.ceil(75 * duration))
        rate, load, warm, fresh = _minilm(duration, args.minilm_episodes)
        target = f"{_fmt(0.5 * easy)} (50% hashing)" if easy else ""
        rows.append(("MemGym/Life-Easy-v0 minilm, warm cache", rate, target))

    print(f"\nbench_env: {duration:g} s per row, gymnasium {gym.__version__}, seed {SEED}\n")
    print("| env | steps/s | x CartPole | target steps/s | meets target |")
    print("|---|---:|---:|---:|:---:|")
    for name, rate, target in rows:
        ref = cart_vec if "SyncVectorEnv" in name else cart_rate
        ratio = f"1/{ref / rate:.1f}" if rate < ref else f"{rate / ref:.2f}"
        met = ""
        if target:
            met = "yes" if rate >= float(target.split()[0].replace(",", "")) else "NO"
        print(f"| {name} | {_fmt(rate)} | {ratio} | {target} | {met} |")
    if splits:
        print(f"\nCPU us per step by part ({steps} random steps incl. resets, process time):\n")
        print("| part | " + " | ".join(splits) + " |")
        print("|---|" + "---:|" * len(splits))
        for part in next(iter(splits.values())):
            print(f"| {part} | " + " | ".join(f"{splits[i][part]:.1f}" for i in splits) + " |")
    if load is not None:
        print(f"\nMiniLM: model load + first reset {load:.1f} s; cache warm-up ({args.minilm_episodes} episodes) "
              f"{warm:.1f} s; texts embedded during the measured pass: {fresh}"
              + (" (it played episodes the warm-up did not: raise --minilm-episodes)" if fresh else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
