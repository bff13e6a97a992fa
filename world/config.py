"""World configuration: a validated dataclass, presets per family x difficulty, YAML round trip.

Every field is checked on construction (and on :meth:`WorldConfig.replace`): an unknown key, a
wrong type or an out-of-range value raises :class:`ConfigError` naming the key and what is allowed.
``WorldConfig.preset(family, difficulty)`` is the single source of the shipped presets; the YAML
files in ``configs/world/`` are written from it (``python -m world --write configs/world``)
and a test checks that they agree.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import numbers
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

FAMILIES: tuple[str, ...] = (
    "recall",
    "update",
    "temporal",
    "multi_hop",
    "consolidation",
    "abstention",
    "erasure",
    "noise",
    "life",
)
DIFFICULTIES: tuple[str, ...] = ("easy", "medium", "hard", "endless")
EMBEDDERS: tuple[str, ...] = ("hashing", "minilm")

#: Families whose threads the ``life`` family mixes (weights are relative).
MIX_FAMILIES: tuple[str, ...] = FAMILIES[:-1]

#: Reward weights. Verdict weights are paid once per question; costs are per unit.
DEFAULT_REWARDS: dict[str, float] = {
    "correct": 1.0,
    "wrong": -0.25,
    "stale": -0.25,
    "hallucinated": -0.5,
    "abstained": 0.0,
    "leaked": -2.0,
    "write": -0.02,  # per memory-creating op (WRITE, UPDATE, LINK, REFLECT), duplicates included
    "storage": -0.001,  # per live memory per event
    "query": -0.01,  # per QUERY
    "invalid": -0.05,  # per invalid operation (a no-op)
}


class _FromPreset:
    """The default of the WorldConfig fields a preset sets: the value of the preset that the config's
    ``family`` and ``difficulty`` name (see :class:`WorldConfig`)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<from preset>"


FROM_PRESET: Any = _FromPreset()


class ConfigError(ValueError):
    """A config value is unknown, of the wrong type or out of range (the message names the key)."""


# name -> (type(s), lower, upper, allowed values or None); None bound = unbounded.
_INT = (int,)
_FLOAT = (int, float)


@dataclass(frozen=True)
class _Spec:
    types: tuple
    lo: float | None = None
    hi: float | None = None
    choices: tuple | None = None
    optional: bool = False

    def describe(self) -> str:
        if self.choices is not None:
            return f"one of {list(self.choices)}"
        kind = "an integer" if self.types == _INT else ("a number" if self.types == _FLOAT else "a mapping")
        lo = "-inf" if self.lo is None else self.lo
        hi = "inf" if self.hi is None else self.hi
        rng = f" in [{lo}, {hi}]" if self.types in (_INT, _FLOAT) else ""
        return kind + rng + (" or null" if self.optional else "")


_SPECS: dict[str, _Spec] = {
    "family": _Spec((str,), choices=FAMILIES),
    "difficulty": _Spec((str,), choices=DIFFICULTIES),
    "horizon": _Spec(_INT, 10, 1_000_000, optional=True),
    "sessions": _Spec(_INT, 1, 1000),
    "session_gap": _Spec(_INT, 0, 100_000),
    "session_len": _Spec(_INT, 10, 1_000_000),
    "n_entities": _Spec(_INT, 2, 400),
    "capacity": _Spec(_INT, 1, 100_000),
    "top_k": _Spec(_INT, 1, 100),
    "n_candidates": _Spec(_INT, 1, 64),
    "n_recent": _Spec(_INT, 0, 64),
    "sweep_every": _Spec(_INT, 1, 100_000),
    "forget_threshold": _Spec(_FLOAT, -50.0, 10.0),
    "decay": _Spec(_FLOAT, 0.05, 0.95),
    "embedder": _Spec((str,), choices=EMBEDDERS),
    "embed_dim": _Spec(_INT, 8, 4096),
    "thread_rate": _Spec(_FLOAT, 0.01, 1.0),
    "delay_min": _Spec(_INT, 1, 100_000),
    "delay_max": _Spec(_INT, 1, 100_000),
    "noise_ratio": _Spec(_FLOAT, 0.0, 1.0),
    "repeat_ratio": _Spec(_FLOAT, 0.0, 1.0),
    "max_hops": _Spec(_INT, 2, 3),
    "max_changes": _Spec(_INT, 1, 5),
    "episodes": _Spec(_INT, 3, 12),
    "chunk": _Spec(_INT, 20, 100_000),
    "level_up": _Spec(_FLOAT, 0.0, 1.0),
    "mix": _Spec((dict,)),
    "rewards": _Spec((dict,)),
}


@dataclass(frozen=True)
class WorldConfig:
    """Everything that, together with a seed, determines a world's event stream and its rewards.

    A field not given takes the value of the preset that ``family`` and ``difficulty`` name (default
    ``recall`` / ``easy``): ``WorldConfig(family=f, difficulty=d, **fields)`` is
    ``WorldConfig.preset(f, d).replace(**fields)``, as :meth:`from_dict` and a YAML file have it, so
    the name never labels settings of another preset (``WorldConfig()`` is the recall-easy preset).
    ``n_candidates``, ``n_recent``, ``decay``, ``embedder``, ``embed_dim``, ``level_up`` and
    ``rewards`` have the same default in every preset.

    Fields (ranges are enforced):

    - ``family`` / ``difficulty``: task family (:data:`FAMILIES`) and preset level (:data:`DIFFICULTIES`).
    - ``horizon``: events per episode; ``None`` = endless (only with difficulty ``endless``).
    - ``sessions``, ``session_gap``: a fixed-horizon episode is cut into sessions of
      ``ceil(horizon / sessions)`` events (event ``i`` is in session ``i // ceil(horizon / sessions)``),
      the last one taking the rest: ``sessions`` equal sessions when ``horizon`` is a multiple of
      ``sessions`` (life-hard: 6 x 100), else a shorter last one (life-easy: 34, 34, 32; life-medium:
      63, 63, 63, 61) or fewer sessions than asked (horizon 12, sessions 5: 4 of 3). Between two
      sessions the clock jumps ``session_gap`` steps (decay happens, nothing is said).
      ``session_len`` is the session length of endless worlds (with or without a horizon; they
      ignore ``sessions``); fixed-horizon worlds ignore it.
    - ``n_entities``: people drawn for the episode (companies and places are drawn as needed).
    - ``capacity``: max live memories; creating ops beyond it are invalid.
    - ``top_k``: retrieval depth of QUERY and the reader. ``n_candidates`` (K): candidate targets
      shown to agents, of which up to ``n_recent`` are the most recently written memories.
    - ``sweep_every``, ``forget_threshold``, ``decay``: ACT-R sweep period (steps), threshold, and d.
    - ``embedder``, ``embed_dim``: ``"hashing"`` (dimension ``embed_dim``) or ``"minilm"`` (384).
    - ``thread_rate``: expected new task threads per event; the rest of the timeline is filler.
    - ``delay_min`` / ``delay_max``: events between a fact and its question (uniform).
    - ``repeat_ratio``, ``noise_ratio``: each filler slot is a repeat of an earlier fact (verbatim or
      paraphrased) with probability ``repeat_ratio`` (once a fact can be repeated), else chit-chat
      with probability ``noise_ratio`` (+0.05 per endless level), else a distractor fact. So
      chit-chat is ``(1 - repeat_ratio) * noise_ratio`` of the filler and distractors
      ``(1 - repeat_ratio) * (1 - noise_ratio)``.
    - ``max_hops`` (multi-hop chains, 2-3), ``max_changes`` (changes per updated attribute),
      ``episodes`` (habit episodes per consolidation cluster).
    - ``chunk``, ``level_up``: endless worlds generate ``chunk`` events at a time and raise the level
      when the accuracy on the last chunk reaches ``level_up``.
    - ``mix``: family -> weight of threads. ``life`` mixes several (it needs a mix); another family
      runs only its own threads, so its mix may name only itself (``{family: w}`` or empty): a mix of
      other families would run their threads under this family's name.
    - ``rewards``: weights of the reward terms (keys of :data:`DEFAULT_REWARDS`).
    """

    family: str = "recall"
    difficulty: str = "easy"
    # (FROM_PRESET: the value of the preset family and difficulty name, filled in by __post_init__)
    horizon: int | None = FROM_PRESET
    sessions: int = FROM_PRESET
    session_gap: int = FROM_PRESET
    session_len: int = FROM_PRESET
    n_entities: int = FROM_PRESET
    capacity: int = FROM_PRESET
    top_k: int = FROM_PRESET
    n_candidates: int = 8
    n_recent: int = 3
    sweep_every: int = FROM_PRESET
    forget_threshold: float = FROM_PRESET
    decay: float = 0.5
    embedder: str = "hashing"
    embed_dim: int = 64
    thread_rate: float = FROM_PRESET
    delay_min: int = FROM_PRESET
    delay_max: int = FROM_PRESET
    noise_ratio: float = FROM_PRESET
    repeat_ratio: float = FROM_PRESET
    max_hops: int = FROM_PRESET
    max_changes: int = FROM_PRESET
    episodes: int = FROM_PRESET
    chunk: int = FROM_PRESET
    level_up: float = 0.8
    mix: dict = FROM_PRESET
    rewards: dict = field(default_factory=lambda: dict(DEFAULT_REWARDS))

    def __post_init__(self) -> None:
        unset = [f.name for f in dataclasses.fields(self) if getattr(self, f.name) is FROM_PRESET]
        if unset:
            # a field not given is the named preset's: WorldConfig(family="temporal", difficulty="hard") ran a
            # 100-event world with easy-like settings under the name temporal-hard (from_dict / YAML built on
            # the preset; only the constructor took the names as free labels)
            _check("family", self.family)
            _check("difficulty", self.difficulty)
            preset = preset_dict(self.family, self.difficulty)
            for name in unset:
                object.__setattr__(self, name, preset[name])
        for f in dataclasses.fields(self):
            value = _plain(getattr(self, f.name))
            _check(f.name, value)
            if _SPECS[f.name].types == _FLOAT:
                # a number field holds a float whatever the spelling (-2 from a YAML file or --set, -2.0):
                # to_yaml writes one text for one world (the tables' weights are floats already)
                value = float(value)
            object.__setattr__(self, f.name, value)
        if self.delay_max < self.delay_min:
            raise ConfigError(f"delay_max ({self.delay_max}) must be >= delay_min ({self.delay_min})")
        if self.horizon is None and self.difficulty != "endless":
            raise ConfigError("horizon: null (endless) is only allowed with difficulty 'endless'")
        if self.n_recent > self.n_candidates:
            raise ConfigError(f"n_recent ({self.n_recent}) must be <= n_candidates ({self.n_candidates})")
        for k, v in self.mix.items():
            if k not in MIX_FAMILIES:
                raise ConfigError(f"mix: unknown family {k!r}; allowed keys {list(MIX_FAMILIES)}")
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0 <= v <= 100):
                raise ConfigError(f"mix.{k}: must be a number in [0, 100], got {v!r}")
        if self.mix and sum(self.mix.values()) <= 0:
            raise ConfigError("mix: weights must not all be zero")
        if self.family != "life" and set(self.mix) - {self.family}:
            # the generator draws threads from mix whatever the family: another family's threads would
            # run under this family's name (recall-easy playing erasure threads)
            raise ConfigError(f"mix: only the life family mixes families; {self.family} allows "
                              f"{{'{self.family}': <weight>}} or no mix, got {self.mix!r} (a mix of families: "
                              f"WorldConfig.preset('life', ...) with mix=...)")
        if self.family == "life" and not self.mix:  # the other families use their own threads
            raise ConfigError(f"mix: the life family draws its threads from mix, which is empty; give weights "
                              f"for some of {list(MIX_FAMILIES)} (or use WorldConfig.preset('life', ...))")
        full = dict(DEFAULT_REWARDS)
        for k, v in self.rewards.items():
            if k not in DEFAULT_REWARDS:
                raise ConfigError(f"rewards: unknown key {k!r}; allowed keys {list(DEFAULT_REWARDS)}")
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (-100 <= v <= 100):
                raise ConfigError(f"rewards.{k}: must be a number in [-100, 100], got {v!r}")
            full[k] = float(v)
        # frozen dataclass: fill missing reward keys with their defaults; both tables read-only (a weight
        # written into cfg.rewards went round every check above, NaN included, and changed the hash)
        object.__setattr__(self, "rewards", FrozenTable(full))
        object.__setattr__(self, "mix", FrozenTable({k: float(v) for k, v in self.mix.items()}))

    # ------------------------------------------------------------------ construction
    @classmethod
    def preset(cls, family: str, difficulty: str = "easy") -> WorldConfig:
        """The shipped preset for ``family`` at ``difficulty`` (see :func:`preset_dict`)."""
        return cls(**preset_dict(family, difficulty))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WorldConfig:
        """Build from a mapping. If it names ``family`` and ``difficulty`` (or ``preset:
        family-difficulty``) the preset is the base and the other keys override it."""
        if not isinstance(data, dict):
            raise ConfigError(f"config must be a mapping of field -> value, got {type(data).__name__}")
        data = dict(data)
        name = data.pop("preset", None)
        if name is not None:
            fam, _, diff = str(name).rpartition("-")
            if not fam or name not in preset_names():
                raise ConfigError(f"preset: expected FAMILY-DIFFICULTY, one of {preset_names()}, got {name!r}")
            for key, value in (("family", fam), ("difficulty", diff)):
                if key in data and data[key] != value:
                    # two worlds named at once: which one was meant cannot be told
                    raise ConfigError(f"{key}: {data[key]!r} contradicts preset: {name!r} (a preset names its family "
                                      f"and difficulty); give one of them")
                data[key] = value
        _check_keys(data)
        fam = data.get("family", "recall")
        diff = data.get("difficulty", "easy")
        _check("family", fam)
        _check("difficulty", diff)
        base = preset_dict(fam, diff)
        base.update(data)
        return cls(**base)

    @classmethod
    def from_yaml(cls, path: str | Path, defaults: dict[str, Any] | None = None) -> WorldConfig:
        """Load a YAML file (a mapping; see :meth:`from_dict`). Errors are :class:`ConfigError` naming the
        file and the key (or what is wrong with the file: missing, a folder, unreadable, not UTF-8 text,
        not valid YAML).
        ``defaults``: fields taken when the file does not give them nor a ``preset`` (an env id's
        family and difficulty, so that a file of a few fields goes over the id's preset)."""
        import yaml

        from world.yaml_keys import DuplicateKeyError, safe_load_unique

        path = Path(path)
        try:
            data = safe_load_unique(path.read_text(encoding="utf-8"), path)
        except FileNotFoundError:
            raise ConfigError(f"{path}: no such config file") from None
        # (a folder, a binary or Latin-1 file raised a raw IsADirectoryError / UnicodeDecodeError that, for
        # the latter, named no file: config="configs" is an easy slip for a file in it)
        except IsADirectoryError:
            raise ConfigError(f"{path}: is a folder, not a config file; give a world YAML file") from None
        except OSError as exc:
            raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc})") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at position "
                              f"{exc.start}); give a world YAML file") from None
        except DuplicateKeyError as exc:
            raise ConfigError(str(exc)) from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML ({exc})") from None
        if data is None:
            data = {}
        if defaults and isinstance(data, dict) and "preset" not in data:
            data = {**defaults, **data}
        try:
            return cls.from_dict(data)
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}") from None

    def replace(self, **overrides: Any) -> WorldConfig:
        """A copy with ``overrides`` applied (validated like the constructor). A ``rewards`` table changes
        the weights it names and keeps this config's others (``mix`` is replaced whole).

        ``family`` and ``difficulty`` may only be given their current values: they name the preset
        (horizon, capacity, mix, ...), and changing them here would relabel this world without changing
        it (``gym.make("MemGym/Update-Easy-v0", family="erasure")`` ran update episodes reported as
        erasure). Another world is ``WorldConfig.preset(family, difficulty)``."""
        _check_keys(overrides)
        for key in ("family", "difficulty"):
            if key in overrides and overrides[key] != getattr(self, key):
                family = overrides.get("family", self.family)
                difficulty = overrides.get("difficulty", self.difficulty)
                raise ConfigError(
                    f"{key}={overrides[key]!r}: {key} names the world's preset, it is not a setting of it "
                    f"(replace would relabel the {self.name} world without changing it); build that world "
                    f"with WorldConfig.preset({family!r}, {difficulty!r}) (an env: its own id, "
                    f"MemoryEnv('{family}-{difficulty}') or reset(options={{'{key}': {overrides[key]!r}}}))")
        rewards = overrides.get("rewards")
        if isinstance(rewards, dict):
            # a partial table changes those weights of this config and keeps its others (the constructor
            # fills a missing weight with its default: a file's weights vanished under one override)
            overrides = {**overrides, "rewards": {**self.rewards, **rewards}}
        return dataclasses.replace(self, **overrides)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON/YAML-able dict of new containers (changing it leaves the config as it is);
        ``WorldConfig(**cfg.to_dict()) == cfg``."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def to_yaml(self, path: str | Path | None = None) -> str:
        import yaml

        text = yaml.safe_dump(self.to_dict(), sort_keys=False)
        if path is not None:
            Path(path).write_text(text)
        return text

    @property
    def name(self) -> str:
        return f"{self.family}-{self.difficulty}"

    @property
    def endless(self) -> bool:
        """The adaptive world of difficulty ``endless``: its script is generated window by window, the
        level rising with the agent's accuracy. A ``horizon`` on it ends the episode there without
        changing the script (the first N events are those of the same world without a horizon)."""
        return self.difficulty == "endless"

    def __setstate__(self, state: dict) -> None:
        # (a config pickled before the tables were read-only held plain dicts: they are wrapped on load)
        for name, value in state.items():
            if name in ("rewards", "mix") and isinstance(value, dict) and not isinstance(value, FrozenTable):
                value = FrozenTable(value)
            elif (name in _SPECS and _SPECS[name].types == _FLOAT and isinstance(value, int)
                  and not isinstance(value, bool)):
                value = float(value)  # (pickled before number fields were floats: -2 stays -2.0 in to_yaml)
            object.__setattr__(self, name, value)

    def __hash__(self) -> int:
        # (dict fields make the default hash fail.) Of the values, not of their repr: numbers that are ==
        # with another repr (2 and 2.0, -0.0 and 0.0) hash alike, as equal objects must
        return hash(tuple((f.name, _hashable(getattr(self, f.name))) for f in dataclasses.fields(self)))


class FrozenTable(dict):
    """A read-only dict: a frozen :class:`WorldConfig`'s ``rewards`` and ``mix``. Reading is a dict's;
    any change raises ``TypeError`` (a new weight is ``cfg.replace(rewards={...})``, checked like the
    constructor's). ``dict(table)`` / ``cfg.to_dict()`` give changeable copies; it pickles and copies."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("a WorldConfig is frozen: its rewards and mix cannot be changed in place; "
                        "use cfg.replace(rewards={...}) or cfg.replace(mix={...}), checked like the constructor")

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _refuse

    def copy(self) -> dict:
        return dict(self)

    def __reduce__(self):
        return (FrozenTable, (dict(self),))


def _represent_table(dumper: Any, table: FrozenTable) -> Any:
    return dumper.represent_dict(dict(table))


try:  # (YAML dumps a table as the mapping it is: PyYAML's safe dumper represents exact dicts only)
    import yaml as _yaml
except ImportError:  # pragma: no cover - PyYAML is a dependency
    _yaml = None
else:
    for _dumper in (_yaml.SafeDumper, _yaml.Dumper):
        _yaml.add_representer(FrozenTable, _represent_table, Dumper=_dumper)


def _hashable(value: Any) -> Any:
    """A field value as a hashable one of the same equality: a table as the frozenset of its items."""
    return frozenset(value.items()) if isinstance(value, dict) else value


def _check_keys(data: dict, unlisted: Iterable[str] = ()) -> None:
    """Refuse a key that is no WorldConfig field, listing the allowed ones (but ``unlisted``: fields the
    caller refuses anyway, such as family / difficulty among benchmark overrides)."""
    fields = [f.name for f in dataclasses.fields(WorldConfig)]
    for k in data:
        if k not in fields:
            allowed = [f for f in fields if f not in unlisted]
            raise ConfigError(f"unknown config key {k!r}; allowed keys: {allowed}")


def _plain(value: Any) -> Any:
    """A numpy number as the Python int or float it stands for (``np.int64(10)`` from a sweep over
    ``np.arange`` is 10); a dict as a new dict of plain values (so that ``to_dict`` hands out copies:
    the config's own ``mix`` and ``rewards`` are part of a frozen, hashed value); anything else as it
    is (bools, numpy's too, stay refused by the checks)."""
    if type(value) in (int, float, bool, str):  # (the common case first)
        return value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)):
        return float(value)
    return value


def _check(name: str, value: Any) -> None:
    spec = _SPECS[name]
    if value is None:
        if spec.optional:
            return
        raise ConfigError(f"{name}: must be {spec.describe()}, got None")
    ok_type = isinstance(value, spec.types) and not isinstance(value, bool)
    if not ok_type:
        raise ConfigError(f"{name}: must be {spec.describe()}, got {type(value).__name__} {value!r}")
    if spec.choices is not None and value not in spec.choices:
        raise ConfigError(f"{name}: must be {spec.describe()}, got {value!r}")
    # (written so that NaN fails: every comparison with it is False; inf is no number of a world either)
    if (spec.lo is not None and not value >= spec.lo) or (spec.hi is not None and not value <= spec.hi) \
            or (isinstance(value, float) and not math.isfinite(value)):
        raise ConfigError(f"{name}: must be {spec.describe()}, got {value!r}")


# ---------------------------------------------------------------------- presets
#: Values of the preset-set fields that most presets share (a difficulty or family below overrides them).
_COMMON: dict[str, Any] = dict(sessions=1, session_gap=0, session_len=120, chunk=100)

_DIFFICULTY: dict[str, dict[str, Any]] = {
    "easy": dict(
        horizon=100, n_entities=10, capacity=40, top_k=5, delay_min=4, delay_max=20,
        noise_ratio=0.6, repeat_ratio=0.15, thread_rate=0.12, max_hops=2, max_changes=1,
        episodes=4, sweep_every=10, forget_threshold=-1.5,
    ),
    "medium": dict(
        horizon=250, n_entities=18, capacity=60, top_k=5, delay_min=8, delay_max=50,
        noise_ratio=0.6, repeat_ratio=0.25, thread_rate=0.11, max_hops=3, max_changes=2,
        episodes=5, sweep_every=10, forget_threshold=-1.8,
    ),
    "hard": dict(
        horizon=600, n_entities=30, capacity=80, top_k=4, delay_min=15, delay_max=150,
        noise_ratio=0.65, repeat_ratio=0.3, thread_rate=0.1, max_hops=3, max_changes=3,
        episodes=6, sweep_every=10, forget_threshold=-1.8,
    ),
    "endless": dict(
        horizon=None, n_entities=12, capacity=60, top_k=5, delay_min=4, delay_max=20,
        noise_ratio=0.6, repeat_ratio=0.2, thread_rate=0.12, max_hops=2, max_changes=1,
        episodes=4, sweep_every=10, forget_threshold=-1.5, chunk=100, session_len=150,
        session_gap=30,
    ),
}

_LIFE_MIX = {f: 1.0 for f in MIX_FAMILIES if f != "noise"}

# Per-family adjustments on top of the difficulty level.
_FAMILY: dict[str, dict[str, Any]] = {
    "recall": {},
    "update": {},
    "temporal": {},
    "multi_hop": {},
    "consolidation": {},
    "abstention": {},
    "erasure": {},
    # heavy chit-chat and repeats: 0.6 * 0.95 = 57% of the filler is chit-chat and 40% repeats
    # (recall: 45-51% and 15-30%), 3% distractor facts
    "noise": {"noise_ratio": 0.95, "repeat_ratio": 0.4, "thread_rate": 0.1},
    "life": {"mix": _LIFE_MIX},
}


def preset_dict(family: str, difficulty: str = "easy") -> dict[str, Any]:
    """The preset as a plain dict (validated names; values are checked by :class:`WorldConfig`): every
    field whose :class:`WorldConfig` default is :data:`FROM_PRESET`, with ``family`` and ``difficulty``."""
    _check("family", family)
    _check("difficulty", difficulty)
    d: dict[str, Any] = {"family": family, "difficulty": difficulty, **_COMMON}
    d.update(_DIFFICULTY[difficulty])
    d.update(_FAMILY[family])
    if family == "life" and difficulty != "endless":
        d["sessions"] = {"easy": 3, "medium": 4, "hard": 6}[difficulty]
        d["session_gap"] = {"easy": 20, "medium": 40, "hard": 80}[difficulty]
    d.setdefault("mix", {family: 1.0} if family != "life" else _LIFE_MIX)
    d["mix"] = dict(d["mix"])
    return d


def preset_names() -> list[str]:
    """``family-difficulty`` names that have a shipped YAML (every family x easy/medium/hard, and
    ``life-endless``)."""
    names = [f"{f}-{d}" for f in FAMILIES for d in DIFFICULTIES if d != "endless"]
    names.append("life-endless")
    return names


def write_preset_yamls(directory: str | Path) -> list[Path]:
    """Write one YAML per preset name into ``directory``; returns the paths."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for name in preset_names():
        fam, _, diff = name.rpartition("-")
        path = directory / f"{name}.yaml"
        header = f"# memgym world preset {name} (written by `python -m world --write`)\n"
        path.write_text(header + WorldConfig.preset(fam, diff).to_yaml())
        out.append(path)
    return out


def _main(argv: list[str] | None = None, prog: str | None = None) -> None:
    parser = argparse.ArgumentParser(prog=prog, description="Write or show memgym world presets.")
    parser.add_argument("--write", metavar="DIR", help="write one YAML per preset into DIR")
    parser.add_argument("--show", metavar="FAMILY-DIFFICULTY", help="print one preset as YAML")
    args = parser.parse_args(argv)
    # (with neither option, or an empty one, it printed nothing, wrote nothing and exited 0)
    if args.write is None and args.show is None:
        parser.error("give --write DIR or --show FAMILY-DIFFICULTY (or both)")
    if args.write is not None and not args.write.strip():
        parser.error("--write: expected a folder, got an empty name")
    if args.show is not None and args.show not in preset_names():
        parser.error(f"--show: expected FAMILY-DIFFICULTY, one of {', '.join(preset_names())}; got {args.show!r}")
    if args.write is not None:
        try:
            paths = write_preset_yamls(args.write)
        except OSError as exc:
            parser.error(f"--write {args.write!r}: {exc.strerror or exc}")
        for p in paths:
            print(p)
    if args.show is not None:
        fam, _, diff = args.show.rpartition("-")
        print(WorldConfig.preset(fam, diff).to_yaml(), end="")


if __name__ == "__main__":
    _main()
