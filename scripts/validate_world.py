#!/usr/bin/env python
"""Validity of the task families: does each family need the operation it was built for?

Plays, for each family at ``easy`` and ``medium`` over N seeds (default 20): the privileged
oracle, the oracle with one operation removed at a time (and UPDATE+FORGET together), write-
everything (WRITE every statement, QUERY every question) and uniform random (over valid ops and
candidate targets). Prints mean accuracy with 95% confidence intervals (normal approximation,
mean +- 1.96 sd / sqrt(n)) and checks the targets of issue 4:

- the oracle reaches >= 0.9 accuracy on every family at easy;
- removing the family's operation(s) costs the oracle >= 0.2 accuracy on that family;
- write-everything is clearly below the oracle (>= 0.1 and CIs apart) on update, consolidation,
  erasure and life.

Usage: ``python scripts/validate_world.py [--seeds 20] [--difficulties easy,medium] [--quick]
[--check]`` (``--check`` exits 1 when a target fails; ``--quick`` = 3 seeds, easy only).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents.cli import _int_at_least  # noqa: E402  (the CLI's bounded int type)
from world import FAMILIES, Op, World, WorldConfig  # noqa: E402
from world.oracle import Oracle  # noqa: E402

#: the operation(s) each family exists for (None: no single operation)
FAMILY_OPS: dict[str, tuple[str, ...] | None] = {
    "recall": ("WRITE",),
    "update": ("UPDATE", "FORGET"),
    "temporal": ("UPDATE",),
    "multi_hop": ("LINK",),
    "consolidation": ("REFLECT",),
    "abstention": None,
    "erasure": ("FORGET",),
    "noise": None,
    "life": None,
}
WRITE_ALL_BELOW = ("update", "consolidation", "erasure", "life")
ABLATIONS: list[tuple[str, ...]] = [("WRITE",), ("UPDATE",), ("LINK",), ("REFLECT",), ("QUERY",), ("FORGET",),
                                    ("UPDATE", "FORGET")]
POLICIES = ["oracle"] + ["-" + "/".join(a) for a in ABLATIONS] + ["write_all", "random", "noop", "abstain"]
#: policies whose mean return is printed (reward defaults: good management must beat them all)
RETURN_POLICIES = ["oracle", "write_all", "random", "noop", "abstain"]


class WriteAll:
    """WRITE every statement, QUERY every question, nothing else."""

    def act(self, world: World):
        k = world.event.kind
        return (Op.WRITE, None) if k == "statement" else (Op.QUERY, None) if k == "question" else (Op.NOOP, None)


class Noop:
    """Never stores, never answers: every question is abstained."""

    def act(self, world: World):
        return Op.NOOP, None


class Abstain:
    """Never stores, QUERYs every question: the empty store answers "unknown" (issue 4's "always
    answer unknown"; the ``abstain`` baseline of agents/)."""

    def act(self, world: World):
        return (Op.QUERY, None) if world.event.kind == "question" else (Op.NOOP, None)


class RandomPolicy:
    """Uniform over the ops valid for some target, target uniform over the candidates."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def act(self, world: World):
        ops = np.flatnonzero(world.op_mask())
        op = Op(int(ops[self.rng.integers(len(ops))]))
        cands = world.candidates()
        target = cands[int(self.rng.integers(len(cands)))] if cands else None
        return op, target


def make_policy(name: str, seed: int):
    if name == "oracle":
        return Oracle()
    if name == "write_all":
        return WriteAll()
    if name == "random":
        return RandomPolicy(seed + 7919)
    if name == "noop":
        return Noop()
    if name == "abstain":
        return Abstain()
    return Oracle(disabled_ops=name[1:].split("/"))


def play(config: WorldConfig, seed: int, policy) -> dict:
    world = World(config, seed=seed)
    while not world.done:
        op, target = policy.act(world)
        world.apply(op, target)
        world.advance()
    return world.metrics()


def ci(values: list[float]) -> tuple[float, float]:
    a = np.asarray(values, dtype=float)
    if len(a) < 2:
        return float(a.mean()), 0.0
    return float(a.mean()), 1.96 * float(a.std(ddof=1)) / math.sqrt(len(a))


def run(families, difficulties, seeds, progress=True) -> tuple[dict, dict]:
    results: dict[tuple[str, str, str], list[float]] = {}
    returns: dict[tuple[str, str, str], list[float]] = {}
    jobs = [(f, d) for d in difficulties for f in families]
    total = len(jobs) * len(POLICIES) * len(seeds)
    bar = None
    if progress:
        try:
            from tqdm import tqdm

            bar = tqdm(total=total, desc="episodes", unit="ep", leave=False)
        except ImportError:  # pragma: no cover - tqdm is in the train extra
            bar = None
    for fam, diff in jobs:
        cfg = WorldConfig.preset(fam, diff)
        for pol in POLICIES:
            accs, rets = [], []
            for s in seeds:
                m = play(cfg, s, make_policy(pol, s))
                # (None: an episode without questions; NaN, as the bench writes it)
                accs.append(math.nan if m["accuracy"] is None else m["accuracy"])
                rets.append(m["return"])
                if bar is not None:
                    bar.update()
            results[(fam, diff, pol)] = accs
            returns[(fam, diff, pol)] = rets
    if bar is not None:
        bar.close()
    return results, returns


def table(results, families, difficulties, policies=POLICIES, digits=2) -> str:
    head = ["family", "diff"] + list(policies)
    rows = []
    for d in difficulties:
        for f in families:
            row = [f, d]
            for p in policies:
                m, h = ci(results[(f, d, p)])
                row.append(f"{m:.{digits}f}±{h:.{digits}f}")
            rows.append(row)
    widths = [max(len(str(r[i])) for r in [head] + rows) for i in range(len(head))]
    fmt = lambda r: "| " + " | ".join(str(x).ljust(w) for x, w in zip(r, widths)) + " |"  # noqa: E731
    lines = [fmt(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += [fmt(r) for r in rows]
    return "\n".join(lines)


def check(results, families, difficulties) -> list[tuple[str, bool, str]]:
    out = []
    if "easy" in difficulties:
        for f in families:
            m, _ = ci(results[(f, "easy", "oracle")])
            out.append((f"oracle >= 0.9 on {f}/easy", m >= 0.9, f"{m:.3f}"))
    for d in difficulties:
        for f in families:
            ops = FAMILY_OPS[f]
            if ops is None:
                continue
            o, _ = ci(results[(f, d, "oracle")])
            a, _ = ci(results[(f, d, "-" + "/".join(ops))])
            out.append((f"-{'/'.join(ops)} costs >= 0.2 on {f}/{d}", o - a >= 0.2, f"{o:.3f} -> {a:.3f} ({o - a:+.3f})"))
        for f in WRITE_ALL_BELOW:
            if f not in families:
                continue
            o, oh = ci(results[(f, d, "oracle")])
            w, wh = ci(results[(f, d, "write_all")])
            ok = o - w >= 0.1 and o - oh > w + wh
            out.append((f"write_all clearly below oracle on {f}/{d}", ok, f"{o:.3f} vs {w:.3f}"))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=_int_at_least(1, "seed count", high=10_000), default=20,
                    help="seeds per cell, 1 to 10,000 (default 20; seeds 0..N-1, below the evaluation seeds)")
    ap.add_argument("--difficulties", default="easy,medium", help="comma list (default easy,medium)")
    ap.add_argument("--families", default=",".join(FAMILIES), help="comma list (default: all)")
    ap.add_argument("--quick", action="store_true", help="3 seeds, easy only (for tests)")
    ap.add_argument("--check", action="store_true", help="exit 1 if a target fails")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    # a name given twice runs once (as in memgym bench): it played every episode twice and counted its targets twice
    fams = list(dict.fromkeys(f.strip() for f in args.families.split(",") if f.strip()))
    diffs = list(dict.fromkeys(d.strip() for d in args.difficulties.split(",") if d.strip()))
    if not fams:
        ap.error(f"--families is empty; choose from {list(FAMILIES)}")
    if not diffs:
        ap.error("--difficulties is empty; choose from ['easy', 'medium', 'hard']")
    for f in fams:
        if f not in FAMILIES:
            ap.error(f"unknown family {f!r}; choose from {list(FAMILIES)}")
    for d in diffs:
        if d not in ("easy", "medium", "hard"):
            ap.error(f"unknown difficulty {d!r}; choose from ['easy', 'medium', 'hard']")
    n_seeds = args.seeds
    if args.quick:
        n_seeds, diffs = 3, ["easy"]
    seeds = list(range(n_seeds))
    t0 = time.perf_counter()
    results, returns = run(fams, diffs, seeds, progress=not args.no_progress)
    dt = time.perf_counter() - t0
    print(f"mean accuracy ± 95% CI over {n_seeds} seeds (seeds 0..{n_seeds - 1}); "
          f"-X = oracle without operation X")
    print(table(results, fams, diffs))
    print(f"\nmean episode return ± 95% CI (default reward weights), {n_seeds} seeds")
    print(table(returns, fams, diffs, RETURN_POLICIES, digits=1))
    checks = check(results, fams, diffs)
    for d in diffs:
        for f in fams:
            o, _ = ci(returns[(f, d, "oracle")])
            worst = max(ci(returns[(f, d, p)])[0] for p in RETURN_POLICIES[1:])
            checks.append((f"oracle return above write_all/random/noop/abstain on {f}/{d}", o > worst, f"{o:.1f} vs {worst:.1f}"))
    print()
    for name, ok, detail in checks:
        print(f"[{'PASS' if ok else 'FAIL'}] {name}: {detail}")
    n_fail = sum(not ok for _, ok, _ in checks)
    print(f"\n{len(checks) - n_fail}/{len(checks)} targets hold; {dt:.1f} s")
    return 1 if (args.check and n_fail) else 0


if __name__ == "__main__":
    sys.exit(main())
