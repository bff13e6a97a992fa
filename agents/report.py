"""Writers for the benchmark's output: results.json, results.csv, leaderboard.md, leaderboard.png.

``results.json`` is deterministic (sorted keys, sorted rows, NaN written as null, no timings);
``timings.json`` holds the wall-clock fields. matplotlib is imported lazily, only to draw.
"""

from __future__ import annotations

import csv
import json
import math
import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

RESULTS = "results.json"
TIMINGS = "timings.json"
CSV = "results.csv"
LEADERBOARD_MD = "leaderboard.md"
LEADERBOARD_PNG = "leaderboard.png"
ABLATION_MD = "ablation.md"
#: The finished episodes of a run stopped by Ctrl-C (``write_partial``), written instead of every file above.
RESULTS_PARTIAL = "results.partial.json"
#: Every file a run may write; a finished run removes those an earlier run left in the folder and it does
#: not write itself (an old ablation.md or leaderboard.png, or an interrupted run's results.partial.json,
#: next to new results would contradict them).
OUTPUT_FILES = (RESULTS, CSV, LEADERBOARD_MD, TIMINGS, ABLATION_MD, LEADERBOARD_PNG, RESULTS_PARTIAL)

CSV_FIELDS = (
    "episode", "agent", "family", "difficulty", "env_id", "seed", "return", "events", "questions",
    "correct", "wrong", "stale", "hallucinated", "leaked", "abstained", "accuracy", "stale_rate",
    "hallucination_rate", "leak_rate", "evidence_recall", "live_memories_mean", "live_memories_final",
    "ops_per_event", "invalid_actions", "NOOP", "WRITE", "UPDATE", "LINK", "REFLECT", "QUERY", "FORGET",
    "steps_per_s",
)


#: What every entry of results.json's ``episodes`` must hold (replay re-runs an episode from these).
EPISODE_KEYS = ("episode", "agent", "family", "difficulty", "env_id", "seed", "return")


class ResultsFileError(ValueError):
    """A results.json that cannot be read (missing, not JSON, wrong schema)."""


class OutputDirError(ValueError):
    """An output folder that cannot be created or written; ``path`` and ``reason`` say which and why."""

    def __init__(self, path: str | os.PathLike, reason: str) -> None:
        self.path, self.reason = str(path), reason
        super().__init__(f"output folder {self.path}: {reason}")


class OutputWriteError(OSError):
    """Writing an output file failed after the work was done. ``path`` and ``reason`` say which file and why,
    ``saved`` where the results were written instead (None if nowhere), ``payload`` holds them."""

    def __init__(self, path: str | os.PathLike, reason: str, saved: Path | None, note: str, payload: dict) -> None:
        self.path, self.reason, self.saved, self.payload = str(path), reason, saved, payload
        where = (f"the results were saved to {saved / RESULTS} instead (`memgym plot {saved}` draws the "
                 "leaderboard from it)" if saved is not None else
                 "the results could not be saved elsewhere either (a full disk?)")
        super().__init__(f"cannot write {self.path}: {reason}; {note}; {where}")


def prepare_out_dir(path: str | os.PathLike, files: Sequence[str] = ()) -> Path:
    """Create ``path`` (with its parents) and check that a file can be written in it, before any work is
    done whose results would go there; OutputDirError names the path and the reason otherwise.

    ``files`` are the names that will be written there (``OUTPUT_FILES`` for a bench run): one that exists
    must be a regular file (a folder of that name would fail the writing after the run)."""
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise OutputDirError(path, "a file of that name exists (give a folder)") from None
    except NotADirectoryError:
        raise OutputDirError(path, "a part of the path is a file, not a folder") from None
    except OSError as exc:
        raise OutputDirError(path, f"cannot create the folder ({exc.strerror or exc})") from None
    if not out.is_dir():  # e.g. a dangling symlink
        raise OutputDirError(path, "is not a folder")
    try:
        fd, probe = tempfile.mkstemp(prefix=".memgym-write-check-", dir=out)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise OutputDirError(path, f"the folder is not writable ({exc.strerror or exc})") from None
    for name in files:
        target = out / name
        if target.exists() and not target.is_file():
            kind = "a folder" if target.is_dir() else "not a regular file"
            raise OutputDirError(path, f"{target} is {kind}, but the output file {name} must be written "
                                       "there: remove or rename it, or choose another folder")
    return out


def _clean(obj: Any) -> Any:
    """NaN/inf -> None (strict JSON), tuples -> lists, recursively."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return _clean(obj.item())
    return obj


def dumps(payload: dict) -> str:
    return json.dumps(_clean({k: v for k, v in payload.items() if not k.startswith("_")}), sort_keys=True,
                      indent=1, allow_nan=False) + "\n"


def _shown(value: Any) -> str:
    """A value as it reads in the JSON file (``"abc"``, ``null``, ``[1]``), cut short."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_number(x: Any) -> bool:
    """An int or float (not a bool) that a float can hold: JSON reads any integer literal as an int, and one
    beyond ~1.8e308 (``10**400``) raised OverflowError in the tables and the figure."""
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return False
    try:
        float(x)
    except OverflowError:
        return False
    return True


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


#: The per-question rates and means of a summary group that the tables print.
GROUP_RATES = ("stale_rate", "hallucination_rate", "leak_rate", "live_memories", "ops_per_event")


class _Schema:
    """Type checks of a results.json; the first problem is a ResultsFileError naming the file and the field."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, where: str, expected: str, value: Any) -> None:
        raise ResultsFileError(f"{self.path}: {where} must be {expected}, got {_shown(value)}")

    def obj(self, where: str, value: Any, keys: Sequence[str] = ()) -> dict:
        if not isinstance(value, dict):
            self.fail(where, "an object" + (f" with the keys {list(keys)}" if keys else ""), value)
        gone = [k for k in keys if k not in value]
        if gone:
            raise ResultsFileError(f"{self.path}: {where} lacks the key(s) {gone}; it needs {list(keys)}")
        return value

    def text(self, where: str, value: Any) -> None:
        if not isinstance(value, str) or not value:
            self.fail(where, "a non-empty string", value)

    def texts(self, where: str, value: Any) -> None:
        if not isinstance(value, list) or not value:
            self.fail(where, "a non-empty list of strings", value)
        for i, v in enumerate(value):
            self.text(f"{where}[{i}]", v)

    def number_or_null(self, where: str, value: Any) -> None:  # NaN is written as null
        if value is not None and not _is_number(value):
            self.fail(where, "a number or null" + (" within a float's range (about ±1.8e308)" if _is_int(value)
                                                   else ""), value)

    def ci(self, where: str, value: Any) -> None:  # {"mean", "lo", "hi"} of a statistic
        self.obj(where, value, ("mean", "lo", "hi"))
        for k in ("mean", "lo", "hi"):
            self.number_or_null(f"{where}.{k}", value[k])

    def group(self, where: str, value: Any) -> None:  # the statistics of an agent overall or on one task
        self.obj(where, value, ("return", "accuracy", *GROUP_RATES))
        for k in ("return", "accuracy"):
            self.ci(f"{where}.{k}", value[k])
        for k in GROUP_RATES:
            self.number_or_null(f"{where}.{k}", value[k])

    def normalised(self, where: str, value: Any) -> None:  # an agent's normalised score (or an ablation row)
        self.obj(where, value, ("per_task", "iqm", "lo", "hi"))
        for k in ("iqm", "lo", "hi"):
            self.number_or_null(f"{where}.{k}", value[k])
        for task, v in self.obj(f"{where}.per_task", value["per_task"]).items():
            self.number_or_null(f"{where}.per_task[{_shown(task)}]", v)


def write_partial(payload: dict, out_dir: str | os.PathLike) -> Path:
    """Write an interrupted run's finished episodes (``agents.bench.partial_payload``) to
    ``out_dir/results.partial.json``, under a temporary name first and then renamed over an earlier one:
    the file is whole or absent. Nothing else in the folder is touched, so that an earlier complete
    run's results.json and leaderboard stay as they were."""
    out = Path(out_dir)
    target, tmp = out / RESULTS_PARTIAL, out / f".{RESULTS_PARTIAL}.memgym-{os.getpid()}.tmp"
    try:
        out.mkdir(parents=True, exist_ok=True)
        tmp.write_text(dumps(payload))
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)  # (gone after the rename)
    return target


def load_results(path: str | os.PathLike, *, partial: bool = False) -> dict:
    """Read a results.json (a file or the folder holding it) with a clear error if it is not one.

    Every field that ``memgym replay`` and ``memgym plot`` read is checked, with its type, before anything
    is replayed or written: a ResultsFileError names the file, the field (``episodes[3].seed``) and what
    it must be. ``summary.agents`` and ``summary.tasks`` must not be empty (the tables and the figure
    are drawn from them). An interrupted run's results.partial.json (``"incomplete": true``, no summary)
    is accepted only with ``partial=True`` (replay: its episodes are whole episodes), and refused with a
    ResultsFileError saying so otherwise (plot: there is no summary to draw)."""
    p = Path(path)
    if p.is_dir():
        p = p / RESULTS
    if not p.exists():
        hint = ""
        if p.name == RESULTS and (p.parent / RESULTS_PARTIAL).is_file():
            hint = (f" ({p.parent / RESULTS_PARTIAL} holds the finished episodes of an interrupted run: memgym "
                    "replay reads it when given its path)")
        raise ResultsFileError(f"results file not found: {p}{hint}")
    try:
        data = json.loads(p.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ResultsFileError(f"{p} is not valid JSON ({exc})") from exc
    except OSError as exc:
        raise ResultsFileError(f"cannot read {p}: {exc.strerror or exc}") from exc
    incomplete = isinstance(data, dict) and data.get("incomplete") is True
    if incomplete and not partial:
        raise ResultsFileError(f"{p} holds the finished episodes of an interrupted memgym bench run (\"incomplete\": "
                               "true), without a summary: there is no leaderboard to draw from part of a run; run "
                               "the benchmark to the end for a results.json (memgym replay can replay its episodes)")
    needed = ("schema", "episodes") if incomplete else ("schema", "episodes", "summary")
    missing = [k for k in needed if not isinstance(data, dict) or k not in data]
    if missing:
        raise ResultsFileError(f"{p} is not a memgym results.json: missing field(s) {missing}")
    if not isinstance(data["episodes"], list):
        raise ResultsFileError(f"{p}: 'episodes' must be a list of episode entries, got "
                               f"{type(data['episodes']).__name__}")
    check = _Schema(p)
    seen: dict[int, int] = {}
    for i, row in enumerate(data["episodes"]):
        if not isinstance(row, dict):
            raise ResultsFileError(f"{p}: episodes[{i}] must be an object with the keys {list(EPISODE_KEYS)}, got "
                                   f"{type(row).__name__}")
        gone = [k for k in EPISODE_KEYS if k not in row]
        if gone:
            raise ResultsFileError(f"{p}: episodes[{i}] lacks the key(s) {gone}; every episode entry needs "
                                   f"{list(EPISODE_KEYS)}")
        for k in ("episode", "seed"):
            if not _is_int(row[k]) or row[k] < 0:
                check.fail(f"episodes[{i}].{k}", "an integer >= 0", row[k])
        if row["episode"] in seen:
            raise ResultsFileError(f"{p}: episodes[{i}].episode is {row['episode']}, as is "
                                   f"episodes[{seen[row['episode']]}].episode; episode numbers must be unique")
        seen[row["episode"]] = i
        for k in ("agent", "family", "difficulty", "env_id"):
            check.text(f"episodes[{i}].{k}", row[k])
        if not _is_number(row["return"]) or not math.isfinite(row["return"]):
            check.fail(f"episodes[{i}].return", "a finite number", row["return"])
    if not incomplete:
        _check_summary(check, data)
    _check_run(p, check, data)
    return data


def _check_summary(check: _Schema, data: dict) -> None:
    """``load_results``: the summary of a complete run, which the tables and the figure are drawn from."""
    p = check.path
    summary = data["summary"]
    gone = [k for k in ("agents", "tasks") if not isinstance(summary, dict) or k not in summary]
    if gone:
        raise ResultsFileError(f"{p}: 'summary' lacks the key(s) {gone}")
    if not isinstance(summary["tasks"], list):
        check.fail("summary.tasks", "a list of strings", summary["tasks"])
    for i, t in enumerate(summary["tasks"]):
        check.text(f"summary.tasks[{i}]", t)
    # a bench run has at least random and oracle on one task: empty tables gave a leaderboard.md of empty
    # tables and then a TypeError in the figure, after leaderboard.md had been rewritten
    if not check.obj("summary.agents", summary["agents"]):
        check.fail("summary.agents", "a non-empty object (one entry per agent)", summary["agents"])
    if not summary["tasks"]:
        check.fail("summary.tasks", "a non-empty list of strings (the run's tasks)", summary["tasks"])
    for name, entry in summary["agents"].items():
        where = f"summary.agents[{_shown(name)}]"
        check.obj(where, entry, ("overall", "tasks", "normalised"))
        check.group(f"{where}.overall", entry["overall"])
        for task, group in check.obj(f"{where}.tasks", entry["tasks"]).items():
            check.group(f"{where}.tasks[{_shown(task)}]", group)
        check.normalised(f"{where}.normalised", entry["normalised"])


def _check_run(p: Path, check: _Schema, data: dict) -> None:
    """``load_results``: the run's settings (the header of leaderboard.md, the figure's title, replay's world)."""
    gone = [k for k in ("suite", "families", "difficulties", "seeds") if k not in data]
    if gone:
        raise ResultsFileError(f"{p} is not a memgym results.json: missing field(s) {gone}")
    check.text("suite", data["suite"])
    check.texts("families", data["families"])
    check.texts("difficulties", data["difficulties"])
    if not isinstance(data["seeds"], list) or not data["seeds"] or not all(
            _is_int(s) and s >= 0 for s in data["seeds"]):
        check.fail("seeds", "a non-empty list of integers >= 0", data["seeds"])
    if data.get("overrides") is not None:
        check.obj("overrides", data["overrides"])  # WorldConfig fields: {"horizon": 40, ...}
    if data.get("ablation") is not None:
        for op, entry in check.obj("ablation", data["ablation"]).items():
            check.normalised(f"ablation[{_shown(op)}]", entry)


# ---------------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------------


def number_ranges(values: Iterable[int], most: int = 12) -> str:
    """Integers as their sorted runs of consecutive numbers: ``[5, 0, 1, 2, 7, 8]`` -> ``"0..2, 5, 7..8"``,
    ``[]`` -> ``""`` (duplicates count once). With more than ``most`` runs the middle ones are elided:
    the first ``most - 1``, ``...``, the last."""
    nums = sorted(set(values))
    runs: list[str] = []
    start = 0
    for i in range(1, len(nums) + 1):
        if i == len(nums) or nums[i] != nums[i - 1] + 1:
            runs.append(str(nums[start]) if start == i - 1 else f"{nums[start]}..{nums[i - 1]}")
            start = i
    if len(runs) > most:
        runs = [*runs[:most - 1], "...", runs[-1]]
    return ", ".join(runs)


def _f(x: Any, nd: int = 2) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{round(x, nd) + 0.0:.{nd}f}"  # + 0.0: no "-0.00"


def _ci(e: dict | None, nd: int = 2) -> str:
    mean = (e or {}).get("mean")
    if mean is None or not math.isfinite(mean):
        return "n/a"
    return f"{_f(e['mean'], nd)} [{_f(e['lo'], nd)}, {_f(e['hi'], nd)}]"


def _md_cell(value: Any) -> str:
    """A table cell's text: ``|`` escaped, the only character that ends a cell in GFM."""
    return str(value).replace("|", "\\|")


def _md_table(header: list[str], rows: list[list[str]], align: list[str] | None = None) -> str:
    """A GFM table, its columns padded to one width. A ``|`` in a cell is written ``\\|`` (an agent
    ``sb3:runs/a|b/model.zip`` would otherwise add a cell to its rows)."""
    align = align or ["l"] + ["r"] * (len(header) - 1)
    header = [_md_cell(c) for c in header]
    rows = [[_md_cell(c) for c in r] for r in rows]
    widths = [max(len(c) for c in col) for col in zip(header, *rows)]
    def line(cells: list[str]) -> str:
        out = []
        for c, w, a in zip(cells, widths, align):
            out.append(c.ljust(w) if a == "l" else c.rjust(w))
        return "| " + " | ".join(out) + " |"
    sep = "|" + "|".join((":" + "-" * (w + 1)) if a == "l" else ("-" * (w + 1) + ":") for w, a in zip(widths, align)) + "|"
    return "\n".join([line(header), sep, *[line(r) for r in rows]])


def _ranked_agents(summary: dict) -> list[str]:
    ags = summary["agents"]
    def key(a: str) -> tuple:
        v = ags[a]["normalised"]["iqm"]
        v = v if v is not None and math.isfinite(v) else -math.inf
        return (-v, a)
    return sorted(ags, key=key)


def leaderboard_table(payload: dict) -> str:
    """Overall table: one row per agent, ranked by the IQM normalised score."""
    s = payload["summary"]
    rows = []
    for rank, a in enumerate(_ranked_agents(s), 1):
        ag = s["agents"][a]
        o, n = ag["overall"], ag["normalised"]
        norm = "n/a" if n["iqm"] is None or not math.isfinite(n["iqm"]) else \
            f"{_f(n['iqm'])} [{_f(n['lo'])}, {_f(n['hi'])}]"
        rows.append([str(rank), a, norm, _ci(o["return"]), _ci(o["accuracy"]), _f(o["stale_rate"]),
                     _f(o["hallucination_rate"]), _f(o["leak_rate"]), _f(o["live_memories"], 1),
                     _f(o["ops_per_event"])])
    header = ["#", "agent", "norm. score IQM [95% CI]", "return [95% CI]", "accuracy [95% CI]", "stale",
              "halluc.", "leak", "live mem", "ops/event"]
    return _md_table(header, rows, ["r", "l"] + ["r"] * 8)


def per_task_table(payload: dict, metric: str = "normalised") -> str:
    """Agents x tasks: the normalised score (default) or the mean of ``accuracy`` / ``return``."""
    s = payload["summary"]
    tasks = s["tasks"]
    rows = []
    for a in _ranked_agents(s):
        ag = s["agents"][a]
        if metric == "normalised":
            cells = [_f(ag["normalised"]["per_task"].get(t)) for t in tasks]
            cells.append(_f(ag["normalised"]["iqm"]))
        else:
            cells = [_f((ag["tasks"].get(t) or {}).get(metric, {}).get("mean")) for t in tasks]
            cells.append(_f(ag["overall"][metric]["mean"]))
        rows.append([a, *cells])
    last = "IQM" if metric == "normalised" else "all"
    return _md_table(["agent", *tasks, last], rows)


def per_task_detail(payload: dict) -> str:
    """One row per (family, agent): every statistic with its CI (the long table of leaderboard.md)."""
    s = payload["summary"]
    rows = []
    for t in s["tasks"]:
        for a in _ranked_agents(s):
            g = s["agents"][a]["tasks"].get(t)
            if g is None:
                continue
            rows.append([t, a, _f(s["agents"][a]["normalised"]["per_task"].get(t)), _ci(g["return"]),
                         _ci(g["accuracy"]), _f(g["stale_rate"]), _f(g["hallucination_rate"]), _f(g["leak_rate"]),
                         _f(g["live_memories"], 1), _f(g["ops_per_event"])])
    header = ["family", "agent", "norm.", "return [95% CI]", "accuracy [95% CI]", "stale", "halluc.", "leak",
              "live mem", "ops/event"]
    return _md_table(header, rows, ["l", "l"] + ["r"] * 8)


def _ablation_order(abl: dict) -> list[str]:
    """The ablation's rows in the documented order: (none), -WRITE, ..., -FORGET, then any other key.

    Not the dict's order: results.json is written with sorted keys, so a table read back from it would
    come out alphabetical (-FORGET first, the full oracle last)."""
    from agents.bench import ABLATION_OPS

    known = [op for op in ("none", *ABLATION_OPS) if op in abl]
    return known + sorted(op for op in abl if op not in known)


def ablation_md(payload: dict) -> str:
    abl = payload.get("ablation") or {}
    tasks = payload["summary"]["tasks"]
    rows = []
    for op in _ablation_order(abl):
        n = abl[op]
        name = "(none: full oracle)" if op == "none" else f"-{op}"
        iqm = "n/a" if n["iqm"] is None or not math.isfinite(n["iqm"]) else \
            f"{_f(n['iqm'])} [{_f(n['lo'])}, {_f(n['hi'])}]"
        rows.append([name, *[_f(n["per_task"].get(t)) for t in tasks], iqm])
    return _md_table(["op removed", *tasks, "IQM [95% CI]"], rows)


def overrides_text(payload: dict) -> str:
    """The run's world overrides (``--set``) as one line, or "" without any: returns and scores of
    another world must not read as the presets' (reward weights, horizon, capacity, ...)."""
    overrides = payload.get("overrides") or {}
    if not overrides:
        return ""
    items = "; ".join(f"{k}={json.dumps(v, sort_keys=True)}" for k, v in sorted(overrides.items()))
    return f"World overrides (not the presets): {items}."


def leaderboard_md(payload: dict) -> str:
    seeds = payload["seeds"]
    # the seeds played, as runs (an explicit list may be unordered or have gaps: 10000, 10005, 10010 is not
    # the range 10000..10010); the count of distinct seeds is the number of episodes per family and agent
    seed_txt = number_ranges(seeds)
    over = overrides_text(payload)
    head = (f"# memgym leaderboard (suite `{payload['suite']}`)\n\n"
            f"Families: {', '.join(payload['families'])}; difficulty: {', '.join(payload['difficulties'])}; "
            f"evaluation seeds {seed_txt} ({len(set(seeds))} per family); memgym {payload.get('memgym_version')}.\n"
            + (f"{over}\n" if over else "") +
            "Normalised score: 0 = random, 1 = oracle (mean episode return per family), aggregated with the "
            "interquartile mean over all episodes; 95% stratified bootstrap CIs. Rates are per question.\n")
    parts = [head, "## Overall\n", leaderboard_table(payload), "",
             "## Normalised score per family\n", per_task_table(payload, "normalised"), "",
             "## Accuracy per family\n", per_task_table(payload, "accuracy"), "",
             "## Mean return per family\n", per_task_table(payload, "return"), "",
             "## Every family in detail\n", per_task_detail(payload), ""]
    if payload.get("ablation"):
        parts += ["## Ablation: the oracle's normalised score with one operation removed\n", ablation_md(payload), ""]
    return "\n".join(parts)


# ---------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------


def write_csv(payload: dict, path: Path, timings: dict | None = None) -> None:
    speed = {}
    for t in (timings or {}).get("per_episode", []):
        speed[(t["agent"], t["family"], t["difficulty"], t["seed"])] = t["steps_per_s"]
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=CSV_FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in payload["episodes"]:
            flat = {**r, **r["verdicts"], **r["ops"]}
            flat["steps_per_s"] = speed.get((r["agent"], r["family"], r["difficulty"], r["seed"]), "")
            w.writerow({k: ("" if isinstance(v, float) and not math.isfinite(v) else v) for k, v in flat.items()})


#: The figure formats ``plot_leaderboard`` writes, by the file's extension (matplotlib's Agg backend and
#: Pillow, a matplotlib dependency, draw them all; pgf needs LaTeX, raw / rgba are headerless pixel dumps).
PLOT_FORMATS = ("png", "pdf", "svg", "svgz", "eps", "ps", "jpg", "jpeg", "tif", "tiff", "webp")


def plot_format(path: str | os.PathLike) -> str:
    """The figure format of ``path``: its extension (one of ``PLOT_FORMATS``, any case), PNG without one.

    ValueError names the extension and the allowed ones (matplotlib would fail only after the drawing, and
    would write ``name.png`` for a path without an extension)."""
    suffix = Path(path).suffix
    if not suffix:
        return "png"
    fmt = suffix[1:].lower()
    if fmt not in PLOT_FORMATS:
        raise ValueError(f"unsupported figure format {suffix!r}; the file must end in "
                         f"{', '.join('.' + f for f in PLOT_FORMATS)} (no extension: PNG)")
    return fmt


def plot_leaderboard(payload: dict, path: str | os.PathLike, *, fmt: str | None = None) -> bool:
    """Two panels: IQM normalised score with CI per agent, and a heatmap agent x family. False if no matplotlib.

    Written to exactly ``path``, in ``fmt`` (default: ``plot_format(path)``). Every text (agent and family
    names, the suite) is drawn literally: ``$`` is not mathtext and no text goes through LaTeX."""
    fmt = fmt or plot_format(path)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install 'memgym[plot]'): leaderboard.png skipped", file=sys.stderr)
        return False
    import numpy as np

    s = payload["summary"]
    agents = _ranked_agents(s)
    tasks = s["tasks"]
    vals = np.array([[s["agents"][a]["normalised"]["per_task"].get(t) if s["agents"][a]["normalised"]["per_task"].get(t)
                      is not None else np.nan for t in tasks] for a in agents], dtype=float)
    y = np.arange(len(agents))
    pts = np.array([s["agents"][a]["normalised"]["iqm"] if s["agents"][a]["normalised"]["iqm"] is not None else np.nan
                    for a in agents], dtype=float)
    lo = np.array([s["agents"][a]["normalised"]["lo"] if s["agents"][a]["normalised"]["lo"] is not None else np.nan
                   for a in agents], dtype=float)
    hi = np.array([s["agents"][a]["normalised"]["hi"] if s["agents"][a]["normalised"]["hi"] is not None else np.nan
                   for a in agents], dtype=float)
    colors = ["#4c72b0" if a not in ("random", "oracle") else "#999999" for a in agents]
    # Names are labels, not markup: matplotlib parses a text holding two '$' as mathtext (an sb3: agent
    # 'sb3:runs/$a_b$/model.zip' raised "Double subscript" after the whole run), and a matplotlibrc with
    # text.usetex would send every name through LaTeX. Text objects read these settings when they are
    # created, tick labels while the figure is drawn: everything happens inside the context.
    with matplotlib.rc_context({"text.parse_math": False, "text.usetex": False}):
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(7 + 0.7 * len(tasks), 0.45 * len(agents) + 2.2),
                                       gridspec_kw={"width_ratios": [1, max(1.2, 0.35 * len(tasks))]})
        try:  # a figure that fails to draw is not left open in pyplot's registry
            ax1.barh(y, np.nan_to_num(pts), color=colors, xerr=np.nan_to_num(np.vstack([pts - lo, hi - pts])),
                     capsize=3)
            ax1.set_yticks(y, agents)
            ax1.invert_yaxis()
            ax1.axvline(0, color="k", lw=0.8)
            ax1.axvline(1, color="k", lw=0.8, ls="--")
            ax1.set_xlabel("normalised score, IQM (0 = random, 1 = oracle)")
            ax1.set_title("overall (95% CI)")
            im = ax2.imshow(vals, cmap="viridis",
                            vmin=min(0.0, np.nanmin(vals) if np.isfinite(vals).any() else 0.0),
                            vmax=max(1.0, np.nanmax(vals) if np.isfinite(vals).any() else 1.0), aspect="auto")
            ax2.set_xticks(range(len(tasks)), tasks, rotation=35, ha="right")
            ax2.set_yticks(y, agents)
            for i in range(len(agents)):
                for j in range(len(tasks)):
                    if np.isfinite(vals[i, j]):
                        ax2.text(j, i, _f(float(vals[i, j])), ha="center", va="center", fontsize=7,
                                 color="white" if vals[i, j] < 0.5 else "black")
            ax2.set_title("normalised score per family")
            fig.colorbar(im, ax=ax2, fraction=0.03)
            fig.suptitle(f"memgym bench, suite {payload['suite']} ({len(payload['seeds'])} seeds)")
            fig.tight_layout()
            fig.savefig(path, dpi=110, format=fmt)
        finally:
            plt.close(fig)
    return True


def _reason(exc: BaseException) -> str:
    """Why a write failed, on one line: an OSError's strerror, else ``Type: message`` (matplotlib's parser
    errors span several lines)."""
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _save_elsewhere(payload: dict, timings: dict | None) -> Path | None:
    """After a failed write: results.json (and timings.json) in a new folder of the temp dir, else of the
    current one; None if neither can hold them."""
    try:
        text = dumps(payload)
    except (TypeError, ValueError):  # not serialisable: no folder can hold it
        return None
    for base in (tempfile.gettempdir(), os.getcwd()):
        try:
            folder = Path(tempfile.mkdtemp(prefix="memgym-bench-", dir=base))
            (folder / RESULTS).write_text(text)
            if timings is not None:
                (folder / TIMINGS).write_text(json.dumps(_clean(timings), sort_keys=True, indent=1) + "\n")
            return folder
        except OSError:
            continue
    return None


def _write_figure(payload: dict, out: Path) -> Path | None:
    """Draw ``out/leaderboard.png``, once the other files of the run are in place; its path, or None when it
    is not drawn: no matplotlib (said on stderr), or any failure of the drawing or the writing, which is a
    warning on stderr naming the file, never an error (the run's results are written already).

    An earlier run's figure is removed first: it would contradict the new results whether or not the new
    one can be drawn."""
    target = out / LEADERBOARD_PNG
    tmp = out / f".{LEADERBOARD_PNG}.memgym-{os.getpid()}.tmp"
    try:
        target.unlink(missing_ok=True)
        if not plot_leaderboard(payload, tmp, fmt="png"):
            return None
        os.replace(tmp, target)
        return target
    except Exception as exc:
        print(f"warning: cannot write {target}: {_reason(exc)}; the other files of the run were written, "
              "without the figure", file=sys.stderr)
        return None
    finally:
        try:
            tmp.unlink(missing_ok=True)  # (gone after the rename)
        except OSError:
            pass


def write_all(payload: dict, out_dir: str | os.PathLike, *, timings: dict | None = None, plot: bool = True) -> dict:
    """Write every output file into ``out_dir``; returns {name: path} of the files written.

    The folder then holds only files of this run: an ``OUTPUT_FILES`` entry that is not written (no
    ablation, no plot, no timings, a figure that could not be drawn) is removed if an earlier run left it
    there.

    results.json, results.csv, leaderboard.md, timings.json and ablation.md are each first written under a
    temporary name in the folder and then renamed over their targets, so that a failure of any of them (a
    full disk, a folder in the way, or any other exception) leaves the folder as it was; it raises
    OutputWriteError naming the file, after saving results.json elsewhere (``_save_elsewhere``): a
    finished benchmark is never lost. The figure (``plot``) is drawn last, after those are in place: a
    failure to draw or write it is a warning on stderr naming the file (``_write_figure``), and the
    returned dict has no ``"png"``."""
    out = Path(out_dir)
    staged: dict[str, tuple[Path, Path]] = {}  # key -> (temporary file, target), in the order written
    current, renaming = out, False

    def stage(key: str, name: str, write: Callable[[Path], Any]) -> None:
        nonlocal current
        current = out / name
        tmp = out / f".{name}.memgym-{os.getpid()}.tmp"  # created by open(): the usual permissions (umask)
        staged[key] = (tmp, current)
        write(tmp)

    try:
        out.mkdir(parents=True, exist_ok=True)
        # the results first, then the reports rendered from them
        stage("results", RESULTS, lambda t: t.write_text(dumps(payload)))
        stage("csv", CSV, lambda t: write_csv(payload, t, timings))
        stage("leaderboard", LEADERBOARD_MD, lambda t: t.write_text(leaderboard_md(payload)))
        if timings is not None:
            stage("timings", TIMINGS,
                  lambda t: t.write_text(json.dumps(_clean(timings), sort_keys=True, indent=1) + "\n"))
        if payload.get("ablation"):
            stage("ablation", ABLATION_MD, lambda t: t.write_text("# Ablation\n\n" + ablation_md(payload) + "\n"))
        for _, target in staged.values():  # what would fail a rename, before the first one
            if target.exists() and not target.is_file():
                current = target
                raise IsADirectoryError(21, "a folder (or another non-file) is in the way", str(target))
        # (with plot, an earlier figure is replaced or removed by _write_figure)
        keep = {t for _, t in staged.values()} | ({out / LEADERBOARD_PNG} if plot else set())
        stale = [out / name for name in OUTPUT_FILES if out / name not in keep]
        renaming = True
        # results.json last: until it is replaced, the folder's results.json still describes its other files
        for key in sorted(staged, key=lambda k: k == "results"):
            tmp, current = staged[key]
            os.replace(tmp, current)
        for current in stale:
            current.unlink(missing_ok=True)
    except BaseException as exc:
        for tmp, _ in staged.values():  # no temporary file is left behind, whatever went wrong
            try:
                tmp.unlink(missing_ok=True)
            except OSError:
                pass
        if not isinstance(exc, Exception):  # Ctrl-C, SystemExit: stop at once
            raise
        # any other failure (also a bug in a report, or odd data) must not lose the finished run
        note = (f"{out} may now hold old and new files side by side" if renaming else
                f"nothing in {out} was changed")
        saved = _save_elsewhere(payload, timings)
        raise OutputWriteError(current, _reason(exc), saved, note, payload) from exc
    written = {key: target for key, (_, target) in staged.items()}
    if plot:
        png = _write_figure(payload, out)
        if png is not None:
            written["png"] = png
    return written
