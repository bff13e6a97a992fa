"""The benchmark: run agents on task families over held-out seeds, and the statistics of the result.

Statistics (docs/bench.md has the long form):

- 95% bootstrap confidence intervals: percentile bootstrap of the mean, 2,000 resamples, seeded
  (``bootstrap_ci``), so that the same episodes give the same interval on every machine.
- Normalised score per family: ``(R - R_random) / (R_oracle - R_random)`` of the mean episode
  return, 0 = the uniform random agent, 1 = the privileged oracle (``normalised_score``).
- Aggregate over families: the interquartile mean (IQM, mean of the middle 50% of the pooled
  per-episode normalised scores, ``scipy.stats.trim_mean(x, 0.25)``) with a stratified bootstrap
  CI (episodes resampled within each family), as recommended by Agarwal et al. (2021),
  "Deep RL at the Edge of the Statistical Precipice" (rliable).

Evaluation seeds are ``EVAL_SEEDS = range(10_000, 10_000 + N)``; training uses seeds ``< 10_000``
(docs/DESIGN.md), so no benchmark episode was ever seen in training.

Reproducibility: every episode is a pure function of (agent, family, difficulty, overrides, seed);
rows are sorted by (agent, family, difficulty, seed) before anything is aggregated or written, and
wall-clock timings go to ``timings.json``, never to ``results.json``. ``results.json`` is therefore
byte-identical whatever ``--workers`` is.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from agents.base import (
    N_OPS,
    OP_NAMES,
    Agent,
    AgentView,
    canonical_agent_spec,
    make_agent,
    validate_agent_specs,
)

EVAL_SEED_BASE = 10_000
VERDICTS = ("correct", "wrong", "stale", "hallucinated", "leaked", "abstained")
HEURISTICS = ("write_all", "fifo", "importance", "versioned", "mem0", "generative_agents", "actr_rehearsal")
#: the do-nothing floor (stores nothing, answers "unknown"): a policy is worth its costs above it
FLOORS = ("abstain",)
BASELINES = ("random", *FLOORS, *HEURISTICS, "oracle")
REFERENCE_AGENTS = ("random", "oracle")
ABLATION_OPS = ("WRITE", "UPDATE", "LINK", "REFLECT", "QUERY", "FORGET")
SCHEMA_VERSION = 1


def eval_seeds(n: int, start: int = EVAL_SEED_BASE) -> list[int]:
    """The documented held-out evaluation seeds: ``start, start+1, ..., start+n-1`` (start >= 10,000)."""
    if n < 1:
        raise ValueError(f"seeds must be >= 1, got {n}")
    if start < EVAL_SEED_BASE:
        raise ValueError(f"evaluation seeds start at {EVAL_SEED_BASE} (training seeds are below it), got {start}")
    return list(range(start, start + n))


EVAL_SEEDS = range(EVAL_SEED_BASE, EVAL_SEED_BASE + 1000)

_SEEDS_ALLOWED = (f"a number of seeds >= 1 (the evaluation seeds {EVAL_SEED_BASE}, {EVAL_SEED_BASE + 1}, ...) or a "
                  f"non-empty list of evaluation seeds, integers >= {EVAL_SEED_BASE} (the seeds below are training "
                  "seeds, and no benchmark episode may have been seen in training)")


def _check_seeds(seeds: Any) -> list[int]:
    """``run_bench``'s ``seeds`` as the list of seeds to play: a count ``n`` -> ``eval_seeds(n)``; a list of
    evaluation seeds (integers >= ``EVAL_SEED_BASE``, numpy's too; duplicates play once) as given.

    Checked before anything runs (ValueError naming ``seeds``): an empty list died in the report after
    the run, a negative seed in the first episode, and a training seed would break the promise above."""
    import numbers

    if isinstance(seeds, numbers.Integral) and not isinstance(seeds, bool):
        return eval_seeds(int(seeds))
    if isinstance(seeds, (str, bytes, bool)) or not isinstance(seeds, Iterable):
        raise ValueError(f"seeds must be {_SEEDS_ALLOWED}, got {seeds!r}")
    values = list(seeds)
    if not values:
        raise ValueError(f"seeds: an empty list; give {_SEEDS_ALLOWED}")
    for i, s in enumerate(values):
        if isinstance(s, bool) or not isinstance(s, numbers.Integral) or s < EVAL_SEED_BASE:
            raise ValueError(f"seeds[{i}] is {s!r}; seeds must be {_SEEDS_ALLOWED}")
    return list(dict.fromkeys(int(s) for s in values))


@dataclass(frozen=True)
class Suite:
    """A named benchmark configuration."""

    name: str
    families: tuple[str, ...]
    difficulties: tuple[str, ...]
    seeds: int
    agents: tuple[str, ...] = BASELINES
    overrides: dict = field(default_factory=dict)
    description: str = ""


def _all_families() -> tuple[str, ...]:
    from world import FAMILIES

    return tuple(FAMILIES)


def suites() -> dict[str, Suite]:
    """quick (the demo and tests, < 60 s on 2 cores), default (the leaderboard), full (every difficulty)."""
    fams = _all_families()
    return {
        "quick": Suite(
            "quick",
            ("recall", "update", "multi_hop", "erasure", "life"),
            ("easy",),
            seeds=5,
            description="5 families x easy x 5 seeds, every baseline; the demo and the tests (< 60 s on 2 cores)",
        ),
        "default": Suite(
            "default",
            fams,
            ("easy",),
            seeds=20,
            description="every family x easy x 20 seeds, every baseline; the leaderboard",
        ),
        "full": Suite(
            "full",
            fams,
            ("easy", "medium", "hard"),
            seeds=30,
            description="every family x easy/medium/hard x 30 seeds, every baseline",
        ),
    }


# ---------------------------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------------------------


def bootstrap_ci(values: Sequence[float], n: int = 2000, seed: int = 0, stat: Callable | None = None,
                 level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap CI of ``stat`` (default: mean) with ``n`` seeded resamples.

    One value gives a zero-width interval; no values give (nan, nan).
    """
    x = np.asarray(list(values), dtype=float)
    if x.size == 0:
        return (math.nan, math.nan)
    if x.size == 1 or np.all(x == x[0]):
        v = float(x[0]) if stat is None else float(stat(x[None, :])[0])
        return (v, v)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(n, x.size))
    samples = x[idx]
    stats = samples.mean(axis=1) if stat is None else np.asarray(stat(samples), dtype=float)
    a = (1.0 - level) / 2.0
    lo, hi = np.quantile(stats, [a, 1.0 - a])
    return (float(lo), float(hi))


def iqm(values: Sequence[float] | np.ndarray, axis: int = -1) -> float | np.ndarray:
    """Interquartile mean: the mean after cutting ``int(0.25 n)`` values from each end (trim_mean 0.25)."""
    x = np.sort(np.asarray(values, dtype=float), axis=axis)
    n = x.shape[axis]
    if n == 0:
        return math.nan
    cut = int(0.25 * n)
    kept = np.take(x, range(cut, n - cut), axis=axis)
    out = kept.mean(axis=axis)
    return float(out) if np.ndim(out) == 0 else out


def normalised_score(value: float, random: float, oracle: float) -> float:
    """``(value - random) / (oracle - random)``: 0 = random, 1 = oracle; nan if they coincide."""
    span = oracle - random
    if not np.isfinite(span) or abs(span) < 1e-9:
        return math.nan
    return float((value - random) / span)


def stratified_iqm_ci(groups: Sequence[Sequence[float]], n: int = 2000, seed: int = 0,
                      level: float = 0.95) -> tuple[float, float, float]:
    """IQM of the pooled groups and its stratified bootstrap CI (resampling within each group)."""
    groups = [np.asarray(g, dtype=float) for g in groups if len(g)]
    if not groups:
        return (math.nan, math.nan, math.nan)
    pooled = np.concatenate(groups)
    point = iqm(pooled)
    rng = np.random.default_rng(seed)
    parts = [g[rng.integers(0, g.size, size=(n, g.size))] for g in groups]
    stats = iqm(np.concatenate(parts, axis=1), axis=1)
    a = (1.0 - level) / 2.0
    lo, hi = np.quantile(stats, [a, 1.0 - a])
    return (float(point), float(lo), float(hi))


# ---------------------------------------------------------------------------------------------
# Running episodes
# ---------------------------------------------------------------------------------------------


def env_id_for(family: str, difficulty: str) -> str:
    import envs

    return envs.env_id(family, difficulty)


def _check_names(families: Iterable[str], difficulties: Iterable[str]) -> None:
    from world import DIFFICULTIES, FAMILIES

    for f in families:
        if f not in FAMILIES:
            raise ValueError(f"unknown family {f!r}; valid families: {', '.join(FAMILIES)}")
    for d in difficulties:
        if d not in DIFFICULTIES:
            raise ValueError(f"unknown difficulty {d!r}; valid difficulties: {', '.join(DIFFICULTIES)}")


def _has_env(family: str, difficulty: str) -> bool:
    try:
        env_id_for(family, difficulty)
    except ValueError:
        return False
    return True


def _check_pairs(families: Sequence[str], difficulties: Sequence[str]) -> None:
    """Every family x difficulty of a run must have an env (only life has ``endless``): the rows carry its
    env id, so a pair without one played its episodes and then failed. ValueError naming the pairs
    without an env and the valid pairs at the requested difficulties."""
    from world import FAMILIES

    bad = [f"{f}/{d}" for f in families for d in difficulties if not _has_env(f, d)]
    if bad:
        valid = [f"{f}/{d}" for f in FAMILIES for d in difficulties if _has_env(f, d)]
        raise ValueError(f"no env for the family/difficulty pair(s) {', '.join(bad)}; valid pairs at these "
                         f"difficulties: {', '.join(valid)} (memgym info lists every env)")


#: WorldConfig fields that a benchmark override may not set: they choose the world, and the rows would
#: carry the requested label for another world.
LABEL_FIELDS = {"family": "--families", "difficulty": "--difficulties"}


def check_overrides(overrides: dict) -> None:
    """Refuse ``family`` / ``difficulty`` among the overrides (ValueError naming the field and the option)."""
    for key, option in LABEL_FIELDS.items():
        if key in overrides:
            raise ValueError(f"--set {key}={overrides[key]!r}: the {key} is not a setting of the world but the "
                             f"world itself; choose it with {option} (overrides apply to every env of the run "
                             "and would run another world under the requested label)")


#: the shape of a Gymnasium env id (``MemGym/Life-Easy-v0``, ``envs:MemGym/Life-Easy-v0``): a path with
#: folders that has another shape names a file
_ENV_ID_SHAPE = re.compile(r"(?:[\w.]+:)?[\w.-]+/[\w.-]+-v\d+")


def _squash(text: str) -> str:
    """``"MemGym/Life-Easy-v0"``, ``"Life-Easy-v0"``, ``"lifeeasy"`` -> ``"lifeeasy"``: an env id's letters."""
    key = "".join(ch for ch in text.lower() if ch.isalnum())
    key = key.removeprefix("envs").removeprefix("memgym")
    return key[:-2] if key.endswith("v0") else key


def near_env_ids(text: str) -> list[str]:
    """The registered env ids ``text`` may have meant (its letters those of one, else up to 3 close ones);
    empty when none is close."""
    import difflib

    import envs

    by_key = {_squash(i): i for i in envs.registered_ids()}
    key = _squash(text)
    if key in by_key:
        return [by_key[key]]
    return [by_key[k] for k in difflib.get_close_matches(key, list(by_key), n=3, cutoff=0.75)]


def names_a_config_file(text: str) -> bool:
    """Does ``text`` name a world YAML file rather than an env id or a family: an existing file, a name
    ending in ``.yaml`` / ``.yml``, or a path with folders (``/``) that is neither shaped like an env id
    (``Namespace/Name-vN``) nor a near miss of a registered one (``MemGym/Life-Easy``: its error says
    which id it may mean)? Such a target that is not a file is "no such config file", never an
    "unknown env id"."""
    if os.path.isfile(text) or text.lower().endswith((".yaml", ".yml")):
        return True
    separators = {"/", os.sep, os.altsep} - {None}
    if not any(sep in text for sep in separators) or _ENV_ID_SHAPE.fullmatch(text):
        return False
    return not near_env_ids(text)


def _check_config_file(path: str) -> None:
    """ConfigError ``<path>: no such config file`` (the words of ``WorldConfig.from_yaml``), with the
    nearest YAML file of its folder as a hint, or ``<path>: is a folder``."""
    import difflib

    from world.config import ConfigError

    if os.path.isfile(path):
        return
    if os.path.isdir(path):
        raise ConfigError(f"{path}: is a folder, not a config file; give a world YAML file")
    folder = os.path.dirname(path) or "."
    try:
        names = sorted(n for n in os.listdir(folder) if n.lower().endswith((".yaml", ".yml")))
    except OSError:
        names = []
    near = difflib.get_close_matches(os.path.basename(path), names, n=1, cutoff=0.75)
    hint = f" (did you mean {os.path.join(os.path.dirname(path), near[0])!r}?)" if near else ""
    raise ConfigError(f"{path}: no such config file{hint}")


def make_env(target: Any, difficulty: str | None = None, overrides: dict | None = None) -> Any:
    """A bare ``MemoryEnv`` (no checker wrappers) from an env id, a family name, a config or a dict.

    ``difficulty`` chooses the preset of a family name (default easy). Any other target already fixes its
    difficulty: a ``difficulty`` that differs is a ValueError naming both (it was dropped, and the rows
    said the target's difficulty under a caller who asked for another)."""
    import envs
    from world.config import _check_keys

    overrides = dict(overrides or {})
    # (only WorldConfig fields: a key such as preset= would reach MemoryEnv's own parameters and name
    # another world than the target)
    _check_keys(overrides, LABEL_FIELDS)  # (family / difficulty: not listed as settings, refused as such)
    if difficulty is not None:
        _check_names([], [difficulty])
    if isinstance(target, dict) and "id" in target:  # {"id": env id, "overrides": {...}} (training pipeline)
        unknown = set(target) - {"id", "overrides"}
        if unknown:
            raise ValueError(f"env spec dict: unknown key(s) {sorted(unknown)}; allowed: 'id', 'overrides'")
        return make_env(target["id"], difficulty, {**dict(target.get("overrides") or {}), **overrides})
    from world import FAMILIES

    if isinstance(target, (str, os.PathLike)) and names_a_config_file(os.fspath(target)):  # a world YAML file
        _check_config_file(os.fspath(target))
        env = envs.MemoryEnv(config=os.fspath(target), **overrides)
    elif isinstance(target, str) and "/" in target:
        family, fixed = envs.parse_env_id(target)  # ValueError naming the registered ids
        _check_fixed_difficulty(target, family, fixed, difficulty)  # (before the env is built)
        return envs.MemoryEnv(config=f"{family}-{fixed}", **overrides)
    elif isinstance(target, str) and target in FAMILIES:
        _check_names([target], [difficulty or "easy"])
        return envs.MemoryEnv(config=f"{target}-{difficulty or 'easy'}", **overrides)
    else:
        env = envs.MemoryEnv(config=target, **overrides)
    try:
        _check_fixed_difficulty(target, env.unwrapped.config.family, env.unwrapped.config.difficulty, difficulty)
    except ValueError:
        env.close()
        raise
    return env


def _check_fixed_difficulty(target: Any, family: str, fixed: str, difficulty: str | None) -> None:
    """Refuse a ``difficulty`` that contradicts the one ``target`` (an env id, a config) fixes."""
    if difficulty is None or difficulty == fixed:
        return
    what = os.fspath(target) if isinstance(target, (str, os.PathLike)) else f"the {type(target).__name__} given"
    try:
        other = f" or the env id {env_id_for(family, difficulty)}"
    except ValueError:  # (no env of that pair: only life has endless)
        other = ""
    raise ValueError(f"difficulty={difficulty!r} contradicts {what}, whose difficulty is {fixed!r}: difficulty "
                     f"chooses the preset of a family name only; give the family name {family!r} with "
                     f"difficulty={difficulty!r}{other}")


def _finite_env(env: Any) -> Any:
    """Refuse endless worlds without a horizon: an episode would never end."""
    cfg = env.unwrapped.config
    if cfg.horizon is None:
        raise ValueError(f"{cfg.family}-{cfg.difficulty} is endless (horizon: null): give a horizon to evaluate "
                         "it, e.g. --set horizon=800")
    return env


def _question_of(info: dict) -> dict | None:
    q = info.get("question")
    return q if isinstance(q, dict) and q.get("verdict") else None


def _action_list(action: Any) -> list[int]:
    """``[op, slot]`` of an action as plain ints; ``[]`` for an ``InvalidAction`` (it has neither)."""
    from envs.memory_env import InvalidAction

    if isinstance(action, InvalidAction):
        return []
    return [int(x) for x in np.asarray(action).reshape(-1)]


def _op_index(outcome_op: Any, action: Any, invalid: bool = False) -> int:
    """The operation that took effect, for the ``ops`` columns: NOOP for an invalid action (the env turned
    it into a penalised no-op: it did nothing), else the operation the env applied (``info["outcome_op"]``
    names the one attempted), else the action's op."""
    if invalid:
        return OP_NAMES.index("NOOP")
    if isinstance(outcome_op, str) and outcome_op in OP_NAMES:
        return OP_NAMES.index(outcome_op)
    if outcome_op is not None and not isinstance(outcome_op, str):
        i = int(outcome_op)
    else:
        i = int(np.asarray(action).reshape(-1)[0])
    return i if 0 <= i < N_OPS else 0


def run_episode(agent: Agent, env: Any, seed: int, *, trace: Callable[[dict], None] | None = None) -> tuple[dict, dict]:
    """Play one episode; return (row, timing). ``trace`` receives one dict per step (for replay)."""
    base = env.unwrapped
    agent.reset(seed)
    t0 = time.perf_counter()
    obs, info = env.reset(seed=seed)
    view = None
    if getattr(agent, "privileged", False):
        agent.attach_world(base.world)
    if hasattr(agent, "attach"):
        view = AgentView(base)
        agent.attach(view)
    total = 0.0
    events = 0
    verdicts = dict.fromkeys(VERDICTS, 0)
    ops = dict.fromkeys(OP_NAMES, 0)
    invalid = 0
    live_sum = 0
    evidence: list[float] = []
    final_metrics: dict = {}
    while True:
        if view is not None:
            view.refresh()
        action = agent.act(obs, info)
        if trace is not None:
            ids = list(info.get("candidate_ids", []))
            a = _action_list(action)
            before = {"index": events, "step": int(base.world.event.step), "kind": base.world.event.kind,
                      "text": base.world.event.text,
                      "target_id": ids[a[1]] if len(a) > 1 and 0 <= a[1] < len(ids) else None}
        obs, reward, terminated, truncated, info = env.step(action)
        events += 1
        total += float(reward)
        was_invalid = bool(info.get("invalid_action"))
        op = _op_index(info.get("outcome_op"), action, was_invalid)
        ops[OP_NAMES[op]] += 1
        invalid += was_invalid
        q = _question_of(info)
        if q is not None:
            verdicts[q["verdict"]] = verdicts.get(q["verdict"], 0) + 1
            if q.get("evidence_recall") is not None:
                evidence.append(float(q["evidence_recall"]))
        live = len(base.world.store)
        live_sum += live
        if trace is not None:
            trace({**before, "action": _action_list(action), "op": OP_NAMES[op],
                   "attempted": OP_NAMES[_op_index(info.get("outcome_op"), action)],
                   "reward": float(reward), "invalid": was_invalid,
                   "question": q, "live": live, "info": info})
        if terminated or truncated:
            final_metrics = info.get("metrics") or {}
            break
    wall = time.perf_counter() - t0
    n_q = sum(verdicts.values())
    row = {
        "return": total,
        "events": events,
        "questions": n_q,
        "verdicts": verdicts,
        "accuracy": verdicts["correct"] / n_q if n_q else math.nan,
        "stale_rate": verdicts["stale"] / n_q if n_q else math.nan,
        "hallucination_rate": verdicts["hallucinated"] / n_q if n_q else math.nan,
        "leak_rate": verdicts["leaked"] / n_q if n_q else math.nan,
        "evidence_recall": float(np.mean(evidence)) if evidence else math.nan,
        # the world's count (each event's store before the next event's sweep, where storage is charged);
        # counting after env.step would see the next event's sweep already done
        "live_memories_mean": float(final_metrics.get("mean_live_memories", live_sum / events if events else 0.0)),
        "live_memories_final": len(base.world.store),
        "ops": ops,
        "ops_per_event": (events - ops["NOOP"]) / events if events else 0.0,
        "invalid_actions": invalid,
        # (None kept, as JSON null: evidence_recall is None when no question had evidence)
        "world_metrics": {k: v for k, v in sorted(final_metrics.items())
                          if v is None or isinstance(v, (int, float, str, bool))},
    }
    timing = {"wall_s": wall, "steps_per_s": events / wall if wall > 0 else math.nan}
    return row, timing


class EpisodeError(RuntimeError):
    """An episode raised; the message names the agent, env and seed and carries the traceback."""


class AgentFailedError(ValueError):
    """Agents raised during the run (a user's memory system or model, usually). The other agents'
    results were kept: ``payload`` holds them (written to ``out_dir`` when one was given, with the
    tracebacks in ``errors.txt``); ``failures`` lists one dict per failed agent (agent, family,
    difficulty, seed, error, traceback)."""

    def __init__(self, failures: list[dict], payload: dict, out_dir: str | os.PathLike | None,
                 write_error: str | None = None) -> None:
        self.failures, self.payload = failures, payload
        lines = [f"agent {f['agent']!r} failed on {f['family']}/{f['difficulty']}, seed {f['seed']}: {f['error']}"
                 for f in failures]
        kept = payload["agents"]
        if write_error is not None:  # the outputs could not be written where asked: say where they went
            where = f"; the other agents' results ({', '.join(kept)}) were not written: {write_error}"
        elif out_dir is not None:
            where = (f"; the other agents' results ({', '.join(kept)}) were written to {out_dir}, the traceback"
                     f"{'s' if len(failures) > 1 else ''} to {Path(out_dir) / ERRORS_FILE}")
        else:
            where = "; the other agents' results are in this error's payload"
        super().__init__("; ".join(lines) + where)


def _errors_text(failures: list[dict]) -> str:
    return "".join(f"agent {f['agent']!r} on {f['family']}/{f['difficulty']}, seed {f['seed']}: {f['error']}\n"
                   f"{f['traceback']}\n" for f in failures)


ERRORS_FILE = "errors.txt"


def _task(args: tuple, started: Callable[[int], None] | None = None) -> tuple[list[tuple[dict, dict]], dict | None]:
    """Worker entry: one (agent, family, difficulty, overrides) group over a chunk of seeds. Returns the
    episodes played and, when an episode raised, what failed (the group stops there; the run goes on
    with the other groups, so one failing agent loses no other agent's results).

    ``started(seed)`` (with ``--episode-timeout``) is called as each episode after the group's first
    begins: the main process times every episode, and the first one's clock starts when the group is
    handed out (building the agent and the env count to it)."""
    import traceback

    spec, family, difficulty, overrides, seeds = args
    out = []
    seed = seeds[0] if seeds else None
    try:
        agent = make_agent(spec)
        env = _finite_env(make_env(family, difficulty, overrides))
        env_id = env_id_for(family, difficulty)  # (before the first episode: run_bench checked the pair)
        for i, seed in enumerate(seeds):
            if started is not None and i:
                started(seed)
            row, timing = run_episode(agent, env, seed)
            key = {"agent": spec, "family": family, "difficulty": difficulty, "seed": int(seed)}
            out.append(({**key, "env_id": env_id, **row}, {**key, **timing}))
        env.close()
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - the user's code raises anything (SystemExit too: it killed
        # a pool worker, and the run then waited for that worker forever); named, reported once, kept
        msg = str(exc) if isinstance(exc, ValueError) else repr(exc)  # (MemorySystemError, SB3ModelError: messages)
        msg = " ".join(msg.split())  # one line (errors.txt keeps the whole traceback)
        return out, {"agent": spec, "family": family, "difficulty": difficulty, "seed": seed,
                     "error": msg, "traceback": traceback.format_exc()}
    return out, None


def _sort_key(row: dict) -> tuple:
    return (row["agent"], row["family"], row["difficulty"], row["seed"])


def evaluate(agent_spec: str | Agent, env_id_or_config: Any, seeds: Iterable[int], *, difficulty: str | None = None,
             overrides: dict | None = None) -> list[dict]:
    """Play ``agent_spec`` on one env over ``seeds`` in this process; one results.json row per episode.

    ``env_id_or_config`` is an env id (``MemGym/Life-Easy-v0``), a family name (with ``difficulty``,
    default easy), a ``WorldConfig`` or a config dict. Used by ``memgym bench`` and the training
    pipeline's final evaluation, so a trained agent is scored by the same code path.
    """
    env = _finite_env(make_env(env_id_or_config, difficulty, overrides))
    cfg = env.unwrapped.world.config
    env_id = env_id_for(cfg.family, cfg.difficulty)  # before any episode: a world without an env id (recall-endless)
    agent = make_agent(agent_spec)
    label = canonical_agent_spec(agent_spec) if isinstance(agent_spec, str) else getattr(agent, "name",
                                                                                        type(agent).__name__)
    rows = []
    for seed in seeds:
        row, timing = run_episode(agent, env, int(seed))
        rows.append({"agent": label, "family": cfg.family, "difficulty": cfg.difficulty, "seed": int(seed),
                     "env_id": env_id, **row, "timing": timing})
    env.close()
    return rows


# ---------------------------------------------------------------------------------------------
# Aggregation
# ---------------------------------------------------------------------------------------------


def _finite(xs: Iterable[float]) -> list[float]:
    return [float(x) for x in xs if x is not None and np.isfinite(x)]


def _ci_entry(values: Iterable[float], seed: int = 0) -> dict:
    v = _finite(values)
    if not v:
        return {"mean": math.nan, "lo": math.nan, "hi": math.nan, "n": 0}
    lo, hi = bootstrap_ci(v, seed=seed)
    return {"mean": float(np.mean(v)), "lo": lo, "hi": hi, "n": len(v)}


def _pooled_rate(rows: list[dict], verdict: str) -> float:
    n = sum(r["questions"] for r in rows)
    return sum(r["verdicts"][verdict] for r in rows) / n if n else math.nan


def _group_stats(rows: list[dict]) -> dict:
    return {
        "episodes": len(rows),
        "return": _ci_entry(r["return"] for r in rows),
        "accuracy": _ci_entry(r["accuracy"] for r in rows),
        "stale_rate": _pooled_rate(rows, "stale"),
        "hallucination_rate": _pooled_rate(rows, "hallucinated"),
        "leak_rate": _pooled_rate(rows, "leaked"),
        "live_memories": float(np.mean([r["live_memories_mean"] for r in rows])),
        "ops_per_event": float(np.mean([r["ops_per_event"] for r in rows])),
        "evidence_recall": float(np.mean(_finite(r["evidence_recall"] for r in rows))) if _finite(
            r["evidence_recall"] for r in rows) else math.nan,
    }


def _task_order(task: tuple[str, str]) -> tuple:
    """Families and difficulties in the world's order (recall, update, ...; easy, medium, ...)."""
    from world import DIFFICULTIES, FAMILIES

    f, d = task
    return (FAMILIES.index(f) if f in FAMILIES else len(FAMILIES), f,
            DIFFICULTIES.index(d) if d in DIFFICULTIES else len(DIFFICULTIES), d)


def summarise(rows: list[dict]) -> dict:
    """Per agent: per task (family/difficulty) and overall statistics, and the normalised scores."""
    rows = sorted(rows, key=_sort_key)
    agents = list(dict.fromkeys(r["agent"] for r in rows))
    tasks = sorted({(r["family"], r["difficulty"]) for r in rows}, key=_task_order)
    by: dict[tuple, list[dict]] = {}
    for r in rows:
        by.setdefault((r["agent"], r["family"], r["difficulty"]), []).append(r)

    def task_name(f: str, d: str) -> str:
        return f if len({t[1] for t in tasks}) == 1 else f"{f}/{d}"

    refs: dict[tuple, tuple[float, float]] = {}
    for f, d in tasks:
        rnd = by.get(("random", f, d))
        orc = by.get(("oracle", f, d))
        if rnd and orc:
            refs[(f, d)] = (float(np.mean([r["return"] for r in rnd])), float(np.mean([r["return"] for r in orc])))

    out: dict[str, Any] = {"tasks": [task_name(f, d) for f, d in tasks], "agents": {}}
    for a in agents:
        per_task = {}
        norm_groups = []
        norm_per_task = {}
        for f, d in tasks:
            rs = by.get((a, f, d), [])
            if not rs:
                continue
            per_task[task_name(f, d)] = _group_stats(rs)
            if (f, d) in refs:
                rr, ro = refs[(f, d)]
                scores = [normalised_score(r["return"], rr, ro) for r in rs]
                if all(np.isfinite(scores)):
                    norm_groups.append(scores)
                    norm_per_task[task_name(f, d)] = float(np.mean(scores))
                else:
                    norm_per_task[task_name(f, d)] = math.nan
        all_rows = [r for r in rows if r["agent"] == a]
        point, lo, hi = stratified_iqm_ci(norm_groups)
        out["agents"][a] = {
            "overall": _group_stats(all_rows),
            "tasks": per_task,
            "normalised": {"per_task": norm_per_task, "iqm": point, "lo": lo, "hi": hi},
        }
    return out


def ablation_table(summary: dict) -> dict:
    """Oracle's normalised score (per task and IQM) with each operation removed in turn."""
    table = {}
    for op in ("none", *ABLATION_OPS):
        label = "oracle" if op == "none" else f"oracle[-{op}]"
        ag = summary["agents"].get(label)
        if ag is not None:
            table[op] = ag["normalised"]
    return table


# ---------------------------------------------------------------------------------------------
# The benchmark run
# ---------------------------------------------------------------------------------------------


def _progress(total: int, desc: str, enabled: bool):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm

        return tqdm(total=total, desc=desc, unit="ep", file=sys.stderr, dynamic_ncols=True)
    except ImportError:  # the train extra brings tqdm; without it, a plain counter
        class _Plain:
            def __init__(self) -> None:
                self.n = 0

            def update(self, k: int) -> None:
                self.n += k
                if self.n == total or self.n % max(1, total // 10) == 0:
                    print(f"{desc}: {self.n}/{total} episodes", file=sys.stderr)

            def close(self) -> None:
                pass

        return _Plain()


def _pool_context():
    import multiprocessing as mp

    # fork starts workers in milliseconds (the quick suite must stay < 60 s with start-up, and a worker
    # that died is replaced at once); _run_in_pool starts no helper threads that a fork could copy mid-work.
    methods = mp.get_all_start_methods()
    return mp.get_context("fork" if "fork" in methods and sys.platform.startswith("linux") else "spawn")


def run_tasks(tasks: list[tuple], workers: int, progress: bool = True, desc: str = "bench",
              failures: list | None = None, *, episode_timeout: float | None = None,
              rows: list | None = None, timings: list | None = None) -> tuple[list, list]:
    """Play every task; returns (rows, timings). A task whose episode raised adds what failed to
    ``failures`` (when given; else the first failure is raised as an :class:`EpisodeError`).

    ``rows`` / ``timings``: lists to add the finished episodes to as they come in (so that a caller still
    has them after a Ctrl-C). ``episode_timeout``: see ``_run_in_pool``; with one set, the episodes are
    played in worker processes even with one worker, as no episode can be stopped safely in this
    process (an agent stuck in native code ignores any signal handler or exception sent to it)."""
    total = sum(len(t[-1]) for t in tasks)
    bar = _progress(total, desc, progress)
    rows = [] if rows is None else rows
    timings = [] if timings is None else timings

    def take(result) -> None:
        chunk, failed = result
        for row, timing in chunk:
            rows.append(row)
            timings.append(timing)
        if bar is not None:
            bar.update(len(chunk))
        if failed is not None:
            if failures is None:
                raise EpisodeError(f"agent {failed['agent']!r} on {failed['family']}/{failed['difficulty']}, seed "
                                   f"{failed['seed']}: {failed['error']}\n{failed['traceback']}")
            failures.append(failed)

    try:
        if episode_timeout is None and (workers <= 1 or len(tasks) <= 1):
            for t in tasks:
                take(_task(t))
        else:
            _run_in_pool(tasks, workers, take, episode_timeout)
    finally:
        if bar is not None:
            bar.close()
    return rows, timings


def _die_with_parent(parent_pid: int | None) -> None:
    """Linux: have the kernel kill this worker when the process that started it dies (a kill or the OOM
    killer of the main process alone: the worker went on with its task, up to five episodes, holding
    the caller's stdout open); elsewhere nothing."""
    if parent_pid is None or not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - no prctl: the pipe's EOF still ends it, later
        return
    if os.getppid() != parent_pid:  # (the parent died before the request took effect)
        os._exit(1)


def _agent_name(spec: Any) -> Any:
    """The registry name of an agent spec: ``oracle[-LINK]`` -> ``oracle``; ``sb3:`` / ``memsys:`` specs, and
    one that does not parse, as given."""
    from agents.base import parse_agent_spec

    try:
        return parse_agent_spec(spec)[0] if isinstance(spec, str) else spec
    except ValueError:
        return spec


def _registrations_for_workers(specs: Iterable[Any]) -> dict[str, bytes]:
    """The agents registered at run time in this process (``agents.base.runtime_registrations``: a user's
    ``register_agent`` in ``__main__``, a notebook, a test), pickled for worker processes that start
    afresh (spawn) and import only memgym's own agents. One of the run's agents (``specs``) whose
    registration does not pickle is a ValueError naming it and why; any other is left out (no task of
    the run asks for it)."""
    import pickle

    from agents.base import runtime_registrations

    needed = {_agent_name(s) for s in specs}
    out = {}
    for name, entry in runtime_registrations().items():
        try:
            out[name] = pickle.dumps(entry)
        except Exception as exc:  # noqa: BLE001 - pickling raises PicklingError, AttributeError, TypeError, ...
            if name in needed:
                raise ValueError(
                    f"agent {name!r} is registered in this process (agents.base.register_agent), but the "
                    "benchmark's worker processes start afresh here (spawn, not fork) and its factory cannot be "
                    f"sent to them: it does not pickle ({type(exc).__name__}: {exc}); define it at the top level "
                    "of a module (not inside a function, not a lambda), or play with one worker (--workers 1)"
                ) from None
    return out


def _register_in_worker(registrations: dict[str, bytes]) -> dict[str, tuple[str, str]]:
    """Register the main process's run-time agents (``_registrations_for_workers``) in this worker, after
    memgym's own (which would replace a name registered again otherwise). Returns, per agent whose
    registration does not load here (its module cannot be imported in a fresh process: a class of a
    script run with ``python -c`` or from stdin), the reason and its traceback."""
    import pickle
    import traceback

    from agents.base import _load_builtin, register_agent

    if not registrations:  # (a forked worker: it has the main process's registry)
        return {}
    _load_builtin()
    unloadable = {}
    for name, blob in registrations.items():
        try:
            factory, summary = pickle.loads(blob)
        except Exception as exc:  # noqa: BLE001 - unpickling imports the factory's module: anything
            unloadable[name] = (repr(exc), traceback.format_exc())
            continue
        register_agent(name, summary)(factory)
    return unloadable


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    """Block SIGINT in this thread (``signal.pthread_sigmask``, where it exists) and restore the mask
    after: a process started meanwhile is born with SIGINT blocked (the mask is inherited through fork
    and exec); here a Ctrl-C waits, then raises KeyboardInterrupt as usual."""
    import signal

    if not hasattr(signal, "pthread_sigmask"):  # (Windows: no signal masks)
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class _Started(NamedTuple):
    """A worker's word that the next episode of its task (``seed``) began: sent with an episode timeout
    only, so that the main process times each episode and knows which one ran too long."""

    seed: int


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Ignore SIGINT (a Ctrl-C is dropped, not held back) and restore its handler after; a no-op outside the
    main thread, where Python handles no signal (Ctrl-C interrupts the main thread)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler if old is None else old)  # (None: set outside Python)


def _worker_loop(conn: Any, inherited: Sequence[Any] = (), parent_pid: int | None = None,
                 registrations: dict[str, bytes] | None = None, report_starts: bool = False) -> None:
    """A worker process: play the tasks the main process sends on ``conn`` (``(index, task)``) one at a
    time and answer each with its result; ``None`` or a closed pipe ends it. ``inherited``: the main
    process's ends of the pipes, its own and the other workers', which a forked worker holds copies of;
    closed first, so that the main process's death (a kill, the OOM killer) closes this worker's pipe
    (a worker holding them never saw EOF and outlived the run, holding the caller's stdout open).
    ``registrations``: the main process's agents registered at run time (``_registrations_for_workers``),
    which a spawned worker registers again before its first task; the tasks of one that does not load
    here fail with the reason. ``report_starts`` (an episode timeout is set): send ``_Started(seed)`` as
    each episode after a task's first begins."""
    import signal

    # Ctrl-C reaches the whole process group: the main process stops the run and terminates the workers;
    # a worker that also raised KeyboardInterrupt only printed a traceback on the way out. This process
    # was born with SIGINT blocked (_sigint_blocked), so that a Ctrl-C while it started (a spawned worker
    # starts an interpreter and imports first) waited; ignored, then unblocked, such a one is dropped, and
    # the agent's own subprocesses are born with SIGINT unblocked
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    for end in inherited:
        end.close()
    _die_with_parent(parent_pid)
    unloadable = _register_in_worker(registrations or {})

    def started(seed: int) -> None:
        conn.send(_Started(int(seed)))

    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):  # the main process is gone
            return
        if job is None:
            return
        index, task = job
        try:
            name = _agent_name(task[0])
            if name in unloadable:
                why, tb = unloadable[name]
                result = ([], _failure(task, f"agent {name!r} is registered in the main process "
                                             "(agents.base.register_agent), but its registration could not be "
                                             f"loaded in this worker process, which started afresh (spawn): {why}",
                                       tb))
            else:  # (without a timeout, the plain call: such a run sends what it always sent)
                result = _task(task, started=started) if report_starts else _task(task)
        except KeyboardInterrupt:  # (SIGINT is ignored here: the agent raised it) that task fails, as in-process
            import traceback

            tb = traceback.format_exc()
            result = ([], _failure(task, "it raised KeyboardInterrupt", tb))
        try:
            conn.send(result)
        except OSError:  # the main process is gone
            return
        except Exception as exc:  # noqa: BLE001 - a result that does not pickle: that task fails, the worker goes on
            conn.send(([], _failure(task, f"its results could not be sent to the main process: {exc!r}",
                                    f"{exc!r}\n")))


def _failure(task: tuple, error: str, traceback: str) -> dict:
    spec, family, difficulty, _, seeds = task
    return {"agent": spec, "family": family, "difficulty": difficulty, "seed": seeds[0] if seeds else None,
            "error": error, "traceback": traceback}


def _died(task: tuple, exitcodes: Sequence[int | None]) -> dict:
    """The failure of a task whose worker died twice, in two workers (``exitcodes``: theirs, in order)."""
    from agents.report import number_ranges

    codes = ", then ".join(str(c) for c in exitcodes) if len(set(exitcodes)) > 1 else str(exitcodes[0])
    # (a group of an explicit seed list may be unordered or have gaps: its seeds as runs, not first..last)
    return _failure(task, f"its worker process died (exit code {codes}) twice while playing seeds "
                          f"{number_ranges(task[-1])} (played again in a fresh worker, it died again): os._exit() "
                          "or a crash in native code; there is no traceback",
                    "(the process ended without a Python exception)\n")


def _timed_out(task: tuple, seed: int, timeout: float) -> dict:
    """The failure of a task one of whose episodes (``seed``) ran longer than ``timeout`` seconds."""
    _, family, difficulty, _, _ = task
    return {**_failure(task, f"episode seed {seed} on {env_id_for(family, difficulty)} exceeded --episode-timeout "
                             f"{timeout:g} s (its worker process was stopped; a timed-out episode is not played "
                             "again)",
                       "(no traceback: the worker process was stopped while the episode ran)\n"),
            "seed": seed}


def _run_in_pool(tasks: list[tuple], workers: int, take: Callable, episode_timeout: float | None = None) -> None:
    """Play ``tasks`` in ``workers`` processes, handing each result to ``take``.

    Each worker owns a pipe and is sent one task at a time, so the main process always knows which
    task each worker holds. A worker that dies without a Python exception (``os._exit``, a segfault in
    a library, the OOM killer) closes its pipe and fires its process sentinel, which no death can slip
    past however fast it comes: a new worker takes its place and plays that task again from its first
    seed (a task's episodes are sent together when it ends, so none counts twice, and each is a pure
    function of its seed: a kill from outside costs nothing). A task whose second worker dies too (a
    deterministic crash) is reported as a failure of its agent (``_died``), and the other tasks go on.
    (``multiprocessing.Pool`` replaced a dead worker but never answered for its task, and telling
    which task a short-lived replacement had held raced with the pool's own reaping of it: the run
    waited forever.) Results arrive in completion order; ``run_bench`` sorts them, so the output does
    not depend on the number of workers, nor on a worker's death.

    ``episode_timeout`` (seconds): each worker's current episode is timed here, in the main process
    (the workers report when each episode of a task begins, ``_Started``; the first begins when the task
    is sent). A worker whose episode runs longer is terminated, then killed, and replaced; its task is
    its agent's failure (``_timed_out``) and is not played again: a hang is no accident of the worker."""
    from multiprocessing.connection import wait

    ctx = _pool_context()
    # a forked worker has this process's agent registry; a spawned one (macOS) imports memgym afresh and
    # is sent the agents registered here at run time
    registrations = None if ctx.get_start_method() == "fork" else _registrations_for_workers(t[0] for t in tasks)
    todo = list(range(len(tasks)))[::-1]  # (popped from the end: tasks start in the order given)
    running: dict[Any, tuple[Any, int | None]] = {}  # main end of a worker's pipe -> (its Process, its task)
    deaths: dict[int, list[int | None]] = {}  # task -> exit codes of the workers that died playing it
    clock: dict[Any, tuple[float, int]] = {}  # with a timeout: a busy worker -> (its episode's deadline, seed)

    def start_clock(conn: Any, seed: int) -> None:
        if episode_timeout is not None:
            clock[conn] = (time.monotonic() + episode_timeout, seed)

    def start() -> Any:
        here, there = ctx.Pipe(duplex=True)
        # (a forked worker inherits every pipe end open here; a spawned one only what it is given)
        inherited = [here, *running] if ctx.get_start_method() == "fork" else []
        proc = ctx.Process(target=_worker_loop, args=(there, inherited, os.getpid(), registrations,
                                                      episode_timeout is not None), daemon=True)
        with _sigint_blocked():  # (the worker inherits the mask: see _worker_loop)
            proc.start()
            there.close()  # (only the worker holds that end now: its death closes the pipe)
            running[here] = (proc, None)  # (before a Ctrl-C held back meanwhile: the finally below ends it)
        return here

    def retire(conn: Any, wait: float = 5.0) -> Any:
        proc, _ = running.pop(conn)
        clock.pop(conn, None)
        conn.close()
        # a worker that does not end (an agent's library ignoring SIGTERM, or keeping a thread alive at
        # exit) must not hold the run: asked, then terminated, then killed
        proc.join(wait)
        if proc.is_alive():
            proc.terminate()
            proc.join(min(wait, 2.0))
        if proc.is_alive():
            proc.kill()
            proc.join()
        return proc

    def give(conn: Any) -> None:
        """The next task to this idle worker, or let it go when none is left."""
        while todo:
            index = todo.pop()
            try:
                conn.send((index, tasks[index]))
            except OSError:  # it died idle (killed from outside): the task goes to a new worker
                todo.append(index)
                retire(conn)
                conn = start()
                continue
            running[conn] = (running[conn][0], index)
            start_clock(conn, tasks[index][-1][0])  # (the first episode's clock: building the agent counts to it)
            return
        try:
            conn.send(None)
        except OSError:
            pass
        retire(conn)

    def stop_overdue() -> None:
        """Terminate (then kill) and replace each worker whose episode is past its deadline; its task fails."""
        now = time.monotonic()
        for conn, (deadline, seed) in list(clock.items()):
            if deadline > now or conn not in running or conn.poll():  # (a word or an answer came in time: read it)
                continue
            proc, index = running[conn]
            proc.terminate()
            retire(conn, wait=0.5)
            take(([], _timed_out(tasks[index], seed, episode_timeout)))
            if todo:
                give(start())

    try:
        for _ in range(min(workers, len(tasks))):
            start()
        for conn in list(running):
            give(conn)
        while running:
            sentinels = {proc.sentinel: conn for conn, (proc, _) in running.items()}
            left = max(0.0, min(d for d, _ in clock.values()) - time.monotonic()) if clock else None
            for conn in dict.fromkeys(sentinels.get(r, r) for r in wait([*running, *sentinels], left)):
                if conn not in running:  # (retired earlier in this round)
                    continue
                proc, index = running[conn]
                unreadable = None
                try:
                    result = conn.recv() if conn.poll() else None  # (an answer sent before dying still counts)
                except (EOFError, OSError):  # its pipe closed: it is gone
                    result = None
                except Exception as exc:  # noqa: BLE001 - an answer that does not load here (or cut short by a death)
                    result, unreadable = None, exc
                if isinstance(result, _Started):  # the next episode of its task began: its clock starts
                    start_clock(conn, result.seed)
                    continue
                if result is not None:
                    running[conn] = (proc, None)
                    clock.pop(conn, None)
                    take(result)
                    give(conn)
                    continue
                if unreadable is not None and proc.is_alive():
                    proc.terminate()  # (its answer is lost: the worker goes with it, a new one takes its place)
                else:
                    unreadable = None  # (a dead worker's answer cut short: it died)
                retire(conn)  # no answer and ready: its pipe closed or its sentinel fired, it is gone
                if index is not None and unreadable is not None:
                    take(([], _failure(tasks[index], f"its results could not be read in the main process: "
                                                     f"{unreadable!r}", f"{unreadable!r}\n")))
                elif index is not None:
                    codes = deaths.setdefault(index, [])
                    codes.append(proc.exitcode)
                    if len(codes) < 2:  # (a kill from outside, the OOM killer: once more, next, in a new worker)
                        todo.append(index)
                    else:  # (it dies wherever it is played)
                        take(([], _died(tasks[index], codes)))
                if todo:
                    give(start())
            stop_overdue()
    finally:  # done, or an error in take() / Ctrl-C: no worker outlives the run
        for conn, (proc, _) in list(running.items()):
            proc.terminate()
            retire(conn, wait=0.5)


def build_tasks(agents: Sequence[str], families: Sequence[str], difficulties: Sequence[str], seeds: Sequence[int],
                overrides: dict, chunk: int = 5) -> list[tuple]:
    tasks = []
    for a in agents:
        for f in families:
            for d in difficulties:
                for i in range(0, len(seeds), chunk):
                    tasks.append((a, f, d, dict(overrides), list(seeds[i:i + chunk])))
    # Long groups first keeps both workers busy to the end (oracle/heuristics cost more than random).
    return tasks


def check_episode_timeout(value: Any) -> float | None:
    """``run_bench``'s ``episode_timeout`` as seconds: None (no limit) or a finite number > 0; anything else
    is a ValueError naming the option, before anything runs."""
    import numbers

    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"episode_timeout (--episode-timeout) must be a finite number of seconds > 0, or None for "
                         f"no limit; got {value!r}")
    return float(value)


def _failed_agents(failures: list[dict]) -> tuple[list[str], list[dict]]:
    """The agents that failed, in order, and the first failure of each (by family, difficulty, seed)."""
    failures = sorted(failures, key=lambda f: (f["agent"], f["family"], f["difficulty"], f["seed"] or 0))
    failed = list(dict.fromkeys(f["agent"] for f in failures))
    return failed, [next(f for f in failures if f["agent"] == a) for a in failed]


def _numbered(rows: list[dict]) -> list[dict]:
    """``rows`` sorted by (agent, family, difficulty, seed) and numbered: the ``episode`` field."""
    rows = sorted(rows, key=_sort_key)
    for i, r in enumerate(rows):
        r["episode"] = i
    return rows


class BenchInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped ``run_bench`` while it played the episodes. ``payload`` holds the episodes finished
    by then (``partial_payload``: the content of results.partial.json); ``path`` is where it was written
    (None without an ``out_dir``, or when the write failed: ``write_error`` says why). A KeyboardInterrupt,
    so that code catching Ctrl-C still does."""

    def __init__(self, payload: dict, path: Path | None, write_error: str | None = None) -> None:
        self.payload, self.path, self.write_error = payload, path, write_error
        n = len(payload["episodes"])
        played = f"{n} finished episode{'' if n == 1 else 's'}"
        if path is not None:
            msg = (f"the {played} were written to {path} (an incomplete run: no results.json or leaderboard was "
                   "written)")
        elif write_error is not None:
            msg = f"the {played} could not be written: {write_error}"
        else:
            msg = f"the {played} are in this exception's payload"
        super().__init__(msg)


def partial_payload(head: dict, rows: list[dict], failures: list[dict]) -> dict:
    """The content of results.partial.json: the run's settings (``head``, as in results.json), the finished
    episodes (rows of the results.json schema; a failed agent's left out, as there), ``"incomplete":
    true`` and what the run did not finish: ``unfinished`` (agent, family, difficulty and the seeds not
    played, per task), ``unfinished_agents`` and ``failed`` (each failed agent's first failure). No
    ``summary``: statistics of part of a run would read as the run's (``memgym plot`` refuses the file)."""
    failed, first = _failed_agents(failures)
    rows = _numbered([r for r in rows if r["agent"] not in failed])
    played = {(r["agent"], r["family"], r["difficulty"], r["seed"]) for r in rows}
    unfinished = []
    for a in head["agents"]:
        if a in failed:
            continue
        for f in head["families"]:
            for d in head["difficulties"]:
                seeds = [s for s in head["seeds"] if (a, f, d, s) not in played]
                if seeds:
                    unfinished.append({"agent": a, "family": f, "difficulty": d, "seeds": seeds})
    return {**head, "incomplete": True, "episodes": rows, "unfinished": unfinished,
            "unfinished_agents": list(dict.fromkeys(u["agent"] for u in unfinished)), "failed": first}


def _write_partial(payload: dict, out_dir: str | os.PathLike | None) -> tuple[Path | None, str | None]:
    """Write ``payload`` to ``out_dir/results.partial.json`` (replacing an earlier one; nothing else in the
    folder changes); (its path, None), or (None, why it could not be written). A second Ctrl-C meanwhile
    is ignored (the run is stopping already, and the write takes moments): it would lose the file, or the
    line that names it."""
    from agents import report

    if out_dir is None:
        return None, None
    with _sigint_ignored():
        try:
            return report.write_partial(payload, out_dir), None
        except Exception as exc:  # noqa: BLE001 - a full disk, odd data: said in the one line, never a traceback
            return None, f"cannot write {Path(out_dir) / report.RESULTS_PARTIAL}: {report._reason(exc)}"


def run_bench(suite: str | Suite = "default", agents: Sequence[str] | None = None,
              families: Sequence[str] | None = None, seeds: int | Sequence[int] | None = None,
              workers: int | None = None, out_dir: str | os.PathLike | None = None, ablate: bool = False, *,
              difficulties: Sequence[str] | None = None, overrides: dict | None = None, progress: bool = True,
              plot: bool = True, episode_timeout: float | None = None) -> dict:
    """Run a suite and write results.json, results.csv, leaderboard.md, leaderboard.png, timings.json.

    ``agents`` defaults to the suite's agents (every baseline); ``random`` and ``oracle`` are always
    added because the normalised score needs them. ``families`` defaults to the suite's families that
    have every one of ``difficulties`` (``difficulties=["endless"]``: life, the only endless env); a
    family x difficulty pair without an env is a ValueError before any episode. ``seeds`` is a number of
    evaluation seeds (``eval_seeds(n)``) or a non-empty list of them, integers >= ``EVAL_SEED_BASE``
    (a training seed below it is refused, see the module docstring; duplicates play once). ``ablate=True`` adds the oracle with each
    operation removed in turn (``oracle[-OP]``) and writes ``ablation.md``; when ``agents`` is not
    given an ablation run plays only random, oracle and the ablated oracles.
    ``episode_timeout`` (seconds, a finite number > 0; None: no limit): an episode that runs longer fails
    its agent as an exception would (``run_tasks``); it is a property of the machine, like ``workers``,
    and is written to timings.json, never to results.json.
    Returns the results payload (the content of results.json).

    Ctrl-C while the episodes are played raises :class:`BenchInterrupted` (a KeyboardInterrupt) after
    writing the episodes finished so far to ``out_dir/results.partial.json`` (``partial_payload``);
    results.json and the reports are not written, so an earlier complete run in ``out_dir`` stays as it was.
    """
    from agents import report

    all_suites = suites()
    if isinstance(suite, str):
        if suite not in all_suites:
            raise ValueError(f"unknown suite {suite!r}; valid suites: {', '.join(all_suites)}")
        suite = all_suites[suite]
    if agents is None:
        agents = list(REFERENCE_AGENTS) if ablate else list(suite.agents)
    # a name given twice would count the same episodes twice (and narrow every CI): keep the first, after
    # spelling each one way (oracle[-LINK,-LINK], oracle[ -LINK] and oracle[-LINK] are one agent)
    agents = list(dict.fromkeys(canonical_agent_spec(a) for a in agents))
    for ref in REFERENCE_AGENTS:
        if ref not in agents:
            agents.append(ref)
    if ablate:
        agents += [f"oracle[-{op}]" for op in ABLATION_OPS if f"oracle[-{op}]" not in agents]
    # (the same for difficulties and families: a name given twice runs once)
    difficulties = list(dict.fromkeys(difficulties or suite.difficulties))
    if families:
        families = list(dict.fromkeys(families))
    else:  # the suite's families that have every difficulty asked for: `--difficulties endless` alone is
        # how docs/world.md evaluates the endless world (only life has one), not every family at a
        # difficulty most of them lack; none at all: the suite's, refused below with the valid pairs
        families = [f for f in suite.families if all(_has_env(f, d) for d in difficulties)] or list(suite.families)
    _check_names(families, difficulties)
    _check_pairs(families, difficulties)
    if seeds is None:
        seeds = suite.seeds
    seed_list = _check_seeds(seeds)
    overrides = {**suite.overrides, **(overrides or {})}
    check_overrides(overrides)
    if workers is None:
        workers = os.cpu_count() or 1
    if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    workers = int(workers)
    episode_timeout = check_episode_timeout(episode_timeout)

    for d in difficulties:
        if d == "endless" and overrides.get("horizon") is None:
            raise ValueError("difficulty 'endless' never ends: give a horizon, e.g. --set horizon=800")
    # Everything is checked here, in this process, before the first episode: the envs (overrides), every
    # agent (a memsys: factory is called, an sb3: model loaded and checked against each env) and the
    # output folder, so that a mistake costs no run and loses no result.
    envs = [_finite_env(make_env(f, d, overrides)) for f in families for d in difficulties]
    try:
        validate_agent_specs(agents, envs)
    finally:
        for env in envs:
            env.close()
    if (workers > 1 or episode_timeout is not None) and _pool_context().get_start_method() != "fork":
        _registrations_for_workers(agents)  # (spawned workers get them pickled)
    if out_dir is not None:
        report.prepare_out_dir(out_dir, (*report.OUTPUT_FILES, ERRORS_FILE))
    tasks = build_tasks(agents, families, difficulties, seed_list, overrides)
    head = {"schema": SCHEMA_VERSION, "memgym_version": _version(), "suite": suite.name, "agents": agents,
            "families": families, "difficulties": difficulties, "seeds": seed_list, "overrides": overrides,
            "ablate": bool(ablate)}
    t0 = time.perf_counter()
    failures: list[dict] = []
    rows: list[dict] = []
    timings: list[dict] = []
    try:
        run_tasks(tasks, workers, progress=progress, desc=f"memgym bench ({suite.name})", failures=failures,
                  episode_timeout=episode_timeout, rows=rows, timings=timings)
    except KeyboardInterrupt as exc:  # Ctrl-C: the finished episodes are kept, apart from the results
        partial = partial_payload(head, rows, failures)
        path, write_error = _write_partial(partial, out_dir)
        raise BenchInterrupted(partial, path, write_error) from exc
    elapsed = time.perf_counter() - t0
    failed, failures = _failed_agents(failures)
    if any(a in REFERENCE_AGENTS for a in failed):  # no normalised score without them: our bug, not the user's
        first = next(f for f in failures if f["agent"] in REFERENCE_AGENTS)
        raise EpisodeError(f"agent {first['agent']!r} on {first['family']}/{first['difficulty']}, seed "
                           f"{first['seed']}: {first['error']}\n{first['traceback']}")
    if failed:  # a failed agent's other episodes would be a partial, misleading row: it is left out whole
        agents = [a for a in agents if a not in failed]
        timings = [t for t in timings if t["agent"] not in failed]
    rows = _numbered([r for r in rows if r["agent"] not in failed])
    timings.sort(key=_sort_key)
    summary = summarise(rows)
    payload = {
        **head,
        "agents": agents,
        "summary": summary,
        "ablation": ablation_table(summary) if ablate else None,
        "episodes": rows,
    }
    # (the timeout, like the workers, is a setting of the machine: results.json does not depend on it)
    timing_payload = {"workers": workers, "episode_timeout": episode_timeout, "wall_s": elapsed,
                      "episodes": len(rows), "steps": int(sum(r["events"] for r in rows)), "per_episode": timings}
    # a write failure (report.OutputWriteError) names the file and where results.json was saved instead
    try:
        written = report.write_all(payload, out_dir, timings=timing_payload, plot=plot) if out_dir is not None else {}
    except report.OutputWriteError as exc:
        if not failures:
            raise
        if exc.saved is not None:  # the tracebacks go where the results went
            (exc.saved / ERRORS_FILE).write_text(_errors_text(failures))
        raise AgentFailedError(failures, payload, out_dir, write_error=str(exc)) from None
    payload["_timings"] = timing_payload  # not written to results.json
    payload["_written"] = written  # (the files really written: no PNG without matplotlib)
    if out_dir is not None:
        errors = Path(out_dir) / ERRORS_FILE
        if failures:
            errors.write_text(_errors_text(failures))
        elif errors.is_file():  # an earlier run's: it does not belong to these results
            errors.unlink()
    if failures:
        raise AgentFailedError(failures, payload, out_dir)
    return payload


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("memgym")
    except Exception:
        return "unknown"
