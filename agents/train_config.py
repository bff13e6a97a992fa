"""The YAML schema of `memgym train`: a validated, typed record of one training recipe.

A recipe names the environment (an id from `envs` plus keyword overrides for the env), the algorithm
and its hyper-parameters, how many environments run in parallel, how long to train, how often to
evaluate on held-out seeds, and which baselines give the reference level on the learning curve. A
`quick:` section holds overrides merged on top for `--quick` runs (the form the tests use).

Every error names the offending key (dotted path) and the allowed values, and nothing is silently
dropped: an unknown key is an error, not a warning.

Seeds (see docs/train.md):
- training episodes draw their world seeds from `[0, TRAIN_SEED_LIMIT)` (9,000 seeds);
- validation seeds (the evaluation callback and the learning curve) are `[9_000, 10_000)`;
- test seeds are the benchmark's held-out `EVAL_SEEDS`, from 10,000 on (agents.bench, DESIGN.md).
The three sets are disjoint, and the run folder records all of them.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from world.yaml_keys import DuplicateKeyError, safe_load_unique

ALGORITHMS = ("maskable_ppo", "ppo", "a2c", "dqn")
POLICIES = ("MultiInputPolicy", "MlpPolicy")
ACTIVATIONS = ("tanh", "relu", "elu", "leaky_relu", "gelu")
SHAPINGS = ("none", "storage_potential", "storage_potential_discounted")

TRAIN_SEED_LIMIT = 9_000  # training world seeds are in [0, TRAIN_SEED_LIMIT)
VALIDATION_SEED_START = 9_000  # validation seeds are in [9_000, 10_000)
TEST_SEED_START = 10_000  # the benchmark's held-out seeds (agents.bench.EVAL_SEEDS)

DEFAULT_BASELINES = (
    "random",
    "oracle",
    "abstain",  # the do-nothing floor (stores nothing, answers "unknown")
    "write_all",
    "fifo",
    "importance",
    "versioned",
    "mem0",
    "generative_agents",
    "actr_rehearsal",
)


class TrainConfigError(ValueError):
    """A training config is invalid; the message names the key and the allowed values."""


@dataclasses.dataclass
class EvalSettings:
    """Periodic evaluation during training (validation seeds) and the final test (benchmark seeds)."""

    freq: int = 10_000  # environment steps between two evaluations (summed over the envs)
    episodes: int = 10  # validation episodes per evaluation: seeds seed_start .. seed_start+episodes-1
    seed_start: int = VALIDATION_SEED_START
    deterministic: bool = True
    test_episodes: int = 30  # final evaluation through agents.bench.evaluate on EVAL_SEEDS
    baselines: tuple[str, ...] = DEFAULT_BASELINES  # agents whose level the curve and the summary show

    @property
    def seeds(self) -> list[int]:
        return list(range(self.seed_start, self.seed_start + self.episodes))


@dataclasses.dataclass
class PretrainSettings:
    """Optional warm start: behaviour cloning of a baseline agent before RL (`pretrain:` in the YAML).

    The agent plays `episodes` training-seed episodes; the policy is fitted to its actions
    (cross-entropy through the action masks) and the value head to the discounted returns
    (`gamma` of the algorithm), for `epochs` passes in minibatches of `batch_size`.
    """

    agent: str | None = None  # e.g. versioned; None = no warm start
    episodes: int = 100
    epochs: int = 10
    batch_size: int = 256
    learning_rate: float = 1e-3
    temperature: float = 1.0  # >1 softens the cloned policy (logits / T): same greedy actions, room to explore
    improve: str = "none"  # none | rollout: relabel statement steps by branched rollouts (agents/improve.py)
    improve_ops: tuple[str, ...] = ("NOOP",)  # the alternatives each statement step is branched on
    improve_inputs: tuple[str, ...] = ("event", "event_kind")  # observation keys the gain model reads
    improve_rounds: int = 1  # policy-iteration rounds; round r + 1's demonstrations are played by round r's policy
    margin: float = 0.02  # an alternative replaces the agent's op where its predicted mean gain exceeds this
    workers: int = 1  # processes that play the demonstrations (spawned; same result as one)


@dataclasses.dataclass
class TrainConfig:
    """One training recipe. Build with `TrainConfig.from_yaml(path, quick=...)` or `from_dict`."""

    env_id: str
    env_overrides: dict[str, Any] = dataclasses.field(default_factory=dict)
    algo: str = "maskable_ppo"
    policy: str = "MultiInputPolicy"
    hyperparams: dict[str, Any] = dataclasses.field(default_factory=dict)
    policy_kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    n_envs: int = 2
    total_steps: int = 100_000
    checkpoint_freq: int = 20_000  # environment steps between checkpoints
    eval: EvalSettings = dataclasses.field(default_factory=EvalSettings)
    pretrain: PretrainSettings = dataclasses.field(default_factory=PretrainSettings)
    shaping: str = "none"  # training-only reward shaping: none | storage_potential | storage_potential_discounted
    # (see agents.train.StorageShaping)
    progress_bar: bool = True
    device: str = "cpu"
    name: str = ""
    #: the default quick form merged by --quick into a recipe without a quick: section (for the note saying
    #: so); not part of the recipe: neither compared nor written
    default_quick: dict[str, Any] | None = dataclasses.field(default=None, compare=False, repr=False)

    # ----------------------------------------------------------------------------- loading
    @classmethod
    def from_yaml(cls, path: str | Path, *, quick: bool = False) -> TrainConfig:
        path = Path(path)
        if not path.exists():
            # (the shipped recipes are files of the source tree, not of the installed package: an
            # installed copy run elsewhere does not find configs/train/ relative to its folder)
            raise TrainConfigError(f"training config not found: {path} (the shipped recipes, e.g. "
                                   "configs/train/life_easy.yaml, are in memgym's source tree: run from a "
                                   "checkout, or give the path of a copy)")
        if path.is_dir():
            raise TrainConfigError(f"training config {path} is a directory: give the recipe's YAML file, e.g. "
                                   "configs/train/life_easy.yaml")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise TrainConfigError(f"{path}: not a UTF-8 text file ({err}); a recipe is YAML text") from None
        except OSError as err:
            raise TrainConfigError(f"training config {path} cannot be read ({err.strerror or err})") from None
        data = load_yaml(text, path)
        if not isinstance(data, Mapping):
            raise TrainConfigError(f"{path}: the top level must be a mapping, got {type(data).__name__}")
        data = dict(data)
        data.setdefault("name", path.stem)
        try:
            return cls.from_dict(data, quick=quick)
        except TrainConfigError as err:
            raise TrainConfigError(f"{path}: {err}") from None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, quick: bool = False) -> TrainConfig:
        """Validate a recipe. The `quick:` section is always checked (its keys, and the recipe with it
        merged on top), whether or not `quick` asks for that recipe; an error caused by it names the
        key inside it (`quick.total_steps`)."""
        data = copy.deepcopy(dict(data))
        quick_section = data.pop("quick", None)
        if quick_section is not None and not isinstance(quick_section, Mapping):
            raise TrainConfigError(f"key 'quick' must be a mapping of overrides, got {quick_section!r}")
        quick_section = dict(quick_section or {})
        _check_quick_keys(quick_section)
        cfg = cls._build(data)
        if quick_section or quick:
            # (no quick: section: --quick trained the full total_steps, in runs/<name>_quick_s<seed>, silently)
            default = None if quick_section else default_quick_section(cfg)
            merged = _deep_merge(data, default or quick_section)
            if "n_envs" not in quick_section:  # --quick runs in-process (DummyVecEnv) unless told otherwise
                merged["n_envs"] = 1
            try:
                quick_cfg = cls._build(merged)
            except TrainConfigError as err:
                raise TrainConfigError(f"the default quick form (--quick; the recipe has no quick: section): {err}"
                                       if default else _blame_quick(str(err), quick_section)) from None
            if quick:
                quick_cfg.default_quick = default
                return quick_cfg
        return cfg

    @classmethod
    def _build(cls, data: dict[str, Any]) -> TrainConfig:
        _check_keys(data, _TOP_KEYS, "")
        env = data.get("env")
        if isinstance(env, str):
            env = {"id": env}
        if not isinstance(env, Mapping):
            raise TrainConfigError("key 'env' is required: a mapping with 'id' (e.g. MemGym/Life-Easy-v0) "
                                   "and optional 'overrides'")
        _check_keys(env, ("id", "overrides"), "env.")
        env_id = env.get("id")
        if not isinstance(env_id, str) or not env_id:
            raise TrainConfigError(f"key 'env.id' must be an env id string such as MemGym/Life-Easy-v0, got {env_id!r}")
        overrides = _mapping(env.get("overrides", {}) or {}, "env.overrides")
        check_env(env_id, overrides)

        algo = data.get("algo", "maskable_ppo")
        if algo not in ALGORITHMS:
            raise TrainConfigError(f"key 'algo' must be one of {', '.join(ALGORITHMS)}; got {algo!r}")
        policy = data.get("policy", "MultiInputPolicy")
        if policy not in POLICIES:
            raise TrainConfigError(f"key 'policy' must be one of {', '.join(POLICIES)}; got {policy!r}")
        hyper = _mapping(data.get("hyperparams", {}) or {}, "hyperparams")
        for bad in ("env", "policy", "policy_kwargs", "seed", "tensorboard_log", "verbose", "device"):
            if bad in hyper:
                raise TrainConfigError(f"key 'hyperparams.{bad}' is set by the pipeline, not the config; remove it")
        policy_kwargs = _mapping(data.get("policy_kwargs", {}) or {}, "policy_kwargs")
        act = policy_kwargs.get("activation_fn")
        if act is not None and act not in ACTIVATIONS:
            raise TrainConfigError(f"key 'policy_kwargs.activation_fn' must be one of {', '.join(ACTIVATIONS)}; "
                                   f"got {act!r}")
        net_arch = policy_kwargs.get("net_arch")
        if net_arch is not None and not _valid_net_arch(net_arch, algo):
            form = ("a list of positive ints (DQN's Q-network takes no mapping)" if algo == "dqn" else
                    "a list of positive ints or a mapping {pi: [...], vf: [...]}")
            raise TrainConfigError(f"key 'policy_kwargs.net_arch' must be {form}; got {net_arch!r}")
        _check_values(hyper, HYPERPARAM_VALUES, "hyperparams")
        _check_values(policy_kwargs, POLICY_KWARG_VALUES, "policy_kwargs")
        device = data.get("device", "cpu")
        if not isinstance(device, str) or not re.fullmatch(r"cpu|auto|mps|cuda(:\d+)?", device):
            raise TrainConfigError(f"key 'device' must be one of cpu, cuda, cuda:N, mps, auto; got {device!r}")

        ev = _mapping(data.get("eval", {}) or {}, "eval")
        _check_keys(ev, tuple(f.name for f in dataclasses.fields(EvalSettings)), "eval.")
        baselines = ev.get("baselines", DEFAULT_BASELINES)
        if not isinstance(baselines, list | tuple) or not all(isinstance(b, str) for b in baselines):
            raise TrainConfigError(f"key 'eval.baselines' must be a list of agent names; got {baselines!r}")
        # stripped as the agents read them (" abstain" builds `abstain` but was not the floor for FLOORS)
        baselines = [b.strip() for b in baselines]
        check_agent_names(baselines, "key 'eval.baselines'")
        eval_settings = EvalSettings(
            freq=_int(ev.get("freq", 10_000), "eval.freq", minimum=1),
            episodes=_int(ev.get("episodes", 10), "eval.episodes", minimum=1),
            seed_start=_int(ev.get("seed_start", VALIDATION_SEED_START), "eval.seed_start", minimum=0),
            deterministic=_bool(ev.get("deterministic", True), "eval.deterministic"),
            test_episodes=_int(ev.get("test_episodes", 30), "eval.test_episodes", minimum=1),
            baselines=tuple(baselines),
        )
        lo, hi = eval_settings.seed_start, eval_settings.seed_start + eval_settings.episodes
        if lo < TRAIN_SEED_LIMIT:
            raise TrainConfigError(f"key 'eval.seed_start' must be >= {TRAIN_SEED_LIMIT} so that validation seeds "
                                   f"stay disjoint from the training seeds [0, {TRAIN_SEED_LIMIT}); got {lo}")
        if lo < TEST_SEED_START < hi or (lo >= TEST_SEED_START):
            raise TrainConfigError(f"key 'eval.seed_start'/'eval.episodes': validation seeds [{lo}, {hi}) must stay "
                                   f"below the benchmark's test seeds (from {TEST_SEED_START})")

        pre = _mapping(data.get("pretrain", {}) or {}, "pretrain")
        _check_keys(pre, tuple(f.name for f in dataclasses.fields(PretrainSettings)), "pretrain.")
        pre_agent = pre.get("agent")
        if pre_agent is not None and (not isinstance(pre_agent, str) or not pre_agent or pre_agent.startswith("sb3:")
                                      or pre_agent == "oracle"):
            raise TrainConfigError("key 'pretrain.agent' must be the name of a non-privileged baseline agent "
                                   f"(e.g. versioned) or null; got {pre_agent!r}")
        if pre_agent is not None and not pre_agent.startswith("memsys:"):
            check_agent_names([pre_agent], "key 'pretrain.agent'", privileged=False)
        if pre_agent is not None and algo == "dqn":
            raise TrainConfigError("key 'pretrain' (imitation warm start) needs an actor-critic algorithm "
                                   "(maskable_ppo, ppo, a2c), not dqn")
        improve = _choice(pre.get("improve", "none"), "pretrain.improve", IMPROVE_METHODS)
        if improve == "rollout" and pre_agent is not None and pre_agent.startswith("memsys:"):
            raise TrainConfigError(rollout_refusal(pre_agent))
        lr = _unit(pre.get("learning_rate", 1e-3), "pretrain.learning_rate")
        pretrain = PretrainSettings(
            agent=pre_agent,
            episodes=_int(pre.get("episodes", 100), "pretrain.episodes", minimum=1),
            epochs=_int(pre.get("epochs", 10), "pretrain.epochs", minimum=0),
            batch_size=_int(pre.get("batch_size", 256), "pretrain.batch_size", minimum=1),
            learning_rate=float(lr),
            temperature=_positive(pre.get("temperature", 1.0), "pretrain.temperature"),
            improve=improve,
            improve_ops=_names(pre.get("improve_ops", ["NOOP"]), "pretrain.improve_ops", IMPROVE_OPS, upper=True),
            improve_inputs=_names(pre.get("improve_inputs", ["event", "event_kind"]), "pretrain.improve_inputs",
                                  OBSERVATION_KEYS),
            improve_rounds=_int(pre.get("improve_rounds", 1), "pretrain.improve_rounds", minimum=1),
            margin=_number(pre.get("margin", 0.02), "pretrain.margin"),
            workers=_int(pre.get("workers", 1), "pretrain.workers", minimum=1),
        )

        cfg = cls(
            env_id=env_id,
            env_overrides=dict(overrides),
            algo=algo,
            policy=policy,
            hyperparams=dict(hyper),
            policy_kwargs=dict(policy_kwargs),
            n_envs=_int(data.get("n_envs", 2), "n_envs", minimum=1),
            total_steps=_int(data.get("total_steps", 100_000), "total_steps", minimum=1),
            checkpoint_freq=_int(data.get("checkpoint_freq", 20_000), "checkpoint_freq", minimum=1),
            eval=eval_settings,
            pretrain=pretrain,
            shaping=_choice(data.get("shaping", "none"), "shaping", SHAPINGS),
            progress_bar=_bool(data.get("progress_bar", True), "progress_bar"),
            device=device,
            name=str(data.get("name", "") or ""),
        )
        cfg.check_hyperparams()
        return cfg

    def check_hyperparams(self) -> None:
        """Names of `hyperparams` must be constructor arguments of the chosen algorithm, names of
        `policy_kwargs` arguments of its policy that a recipe can give (no Python classes)."""
        allowed = _algo_arguments(self.algo)
        if allowed is None:  # SB3 not installed: checked again when the model is built
            return
        for key in self.hyperparams:
            if key not in allowed:
                raise TrainConfigError(f"key 'hyperparams.{key}' is not an argument of {self.algo}; allowed: "
                                       f"{', '.join(sorted(allowed))}")
        allowed_pk = _policy_arguments(self.algo, self.policy)
        for key in self.policy_kwargs:
            if key not in allowed_pk:
                raise TrainConfigError(f"key 'policy_kwargs.{key}' is not an argument of {self.algo}'s {self.policy} "
                                       f"that a recipe can set; allowed: {', '.join(sorted(allowed_pk))}")

    # ----------------------------------------------------------------------------- output
    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "env": {"id": self.env_id, "overrides": dict(self.env_overrides)},
            "algo": self.algo,
            "policy": self.policy,
            "hyperparams": dict(self.hyperparams),
            "policy_kwargs": copy.deepcopy(self.policy_kwargs),
            "n_envs": self.n_envs,
            "total_steps": self.total_steps,
            "checkpoint_freq": self.checkpoint_freq,
            "eval": {
                "freq": self.eval.freq,
                "episodes": self.eval.episodes,
                "seed_start": self.eval.seed_start,
                "deterministic": self.eval.deterministic,
                "test_episodes": self.eval.test_episodes,
                "baselines": list(self.eval.baselines),
            },
            "pretrain": {**dataclasses.asdict(self.pretrain), "improve_ops": list(self.pretrain.improve_ops),
                         "improve_inputs": list(self.pretrain.improve_inputs)},
            "shaping": self.shaping,
            "progress_bar": self.progress_bar,
            "device": self.device,
        }

    def replace(self, **changes: Any) -> TrainConfig:
        """A copy with top-level fields changed, validated again (e.g. `n_envs`, `total_steps`)."""
        data = self.to_dict()
        for key, value in changes.items():
            if key not in _TOP_KEYS:
                raise TrainConfigError(f"unknown key {key!r}; allowed: {', '.join(_TOP_KEYS)}")
            data[key] = value
        return TrainConfig.from_dict(data)


_TOP_KEYS = ("name", "env", "algo", "policy", "hyperparams", "policy_kwargs", "n_envs", "total_steps",
             "checkpoint_freq", "eval", "pretrain", "shaping", "progress_bar", "device")


def load_yaml(text: str, source: str | Path) -> Any:
    """`yaml.safe_load(text)`, refusing a key given twice in one mapping (:mod:`world.yaml_keys`: PyYAML
    keeps the last value and drops the other without a word; a recipe's second `hyperparams:` erased the
    first's keys). Errors are TrainConfigErrors naming `source` (the file): invalid YAML, or the key given
    twice (dotted path) with both line numbers."""
    try:
        return safe_load_unique(text, source)
    except DuplicateKeyError as err:
        raise TrainConfigError(str(err)) from err
    except yaml.YAMLError as err:
        raise TrainConfigError(f"{source}: not valid YAML: {err}") from err


def _deep_merge(base: dict, extra: Mapping) -> dict:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _deep_merge(dict(out[key]), value)
        else:
            out[key] = copy.deepcopy(value)
    return out


_SECTION_KEYS = {
    "env": ("id", "overrides"),
    "eval": tuple(f.name for f in dataclasses.fields(EvalSettings)),
    "pretrain": tuple(f.name for f in dataclasses.fields(PretrainSettings)),
}


#: the default quick form's limits (a recipe without a quick: section, run with --quick): what the shipped
#: recipe's quick: section sets, each taken only where it shortens the recipe
DEFAULT_QUICK = {"total_steps": 2048, "checkpoint_freq": 1024,
                 "eval": {"freq": 1024, "episodes": 2, "test_episodes": 2},
                 "pretrain": {"episodes": 2, "epochs": 2, "workers": 1}}


def default_quick_section(cfg: TrainConfig) -> dict[str, Any]:
    """The quick section --quick merges into a recipe that has none: `DEFAULT_QUICK`'s values where they are
    smaller than the recipe's, so that --quick is "a few thousand steps" for any recipe (plus one rollout:
    training stops at the end of the rollout that reaches total_steps) and never lengthens one. The warm
    start's limits only when the recipe has one."""
    def smaller(limits: Mapping[str, int], current: Any) -> dict[str, int]:
        return {k: min(v, getattr(current, k)) for k, v in limits.items()}

    out: dict[str, Any] = {"total_steps": min(DEFAULT_QUICK["total_steps"], cfg.total_steps),
                           "checkpoint_freq": min(DEFAULT_QUICK["checkpoint_freq"], cfg.checkpoint_freq),
                           "eval": smaller(DEFAULT_QUICK["eval"], cfg.eval)}
    if cfg.pretrain.agent is not None:
        out["pretrain"] = smaller(DEFAULT_QUICK["pretrain"], cfg.pretrain)
    return out


def _check_quick_keys(quick: Mapping) -> None:
    """Unknown keys of the `quick:` section, named `quick.<key>` (and `quick.eval.<key>`, ...)."""
    _check_keys(quick, _TOP_KEYS, "quick.")
    for section, allowed in _SECTION_KEYS.items():
        value = quick.get(section)
        if isinstance(value, Mapping):
            _check_keys(value, allowed, f"quick.{section}.")


def _blame_quick(message: str, quick: Mapping) -> str:
    """An error of the recipe with `quick:` merged, where the full recipe is valid: the culprit is in the
    quick section, so `key 'total_steps'` becomes `key 'quick.total_steps'` (when the quick section sets it)."""

    def sets(path: str) -> bool:
        node: Any = quick
        for part in path.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return False
            node = node[part]
        return True

    blamed = re.sub(r"key '([A-Za-z0-9_.]+)'",
                    lambda m: f"key 'quick.{m.group(1)}'" if sets(m.group(1)) else m.group(0), message)
    if blamed == message:
        blamed = f"the recipe with its 'quick' section merged (--quick): {message}"
    return blamed


def check_env(env_id: str, overrides: Mapping[str, Any], *, id_label: str = "key 'env.id'",
              override_label: str = "key 'env.overrides.{}'", overrides_label: str = "key 'env.overrides'") -> None:
    """The env id is registered and its overrides are valid WorldConfig fields and values.

    Checked as the env will apply them (`WorldConfig.replace` over the id's preset): unknown fields
    first, then all overrides together, and if that fails each alone, so that the error names the
    override that is wrong (`env.overrides.horizon`) with the allowed keys or values.
    `id_label`, `override_label` (a format string taking the field) and `overrides_label` are how errors
    name the inputs: config keys by default, command-line options for `memgym train --headline`.
    """
    if env_id.startswith("MemGym/"):
        import envs

        try:
            family, difficulty = envs.parse_env_id(env_id)
        except ValueError as err:
            raise TrainConfigError(f"{id_label}: {err}") from None
    else:  # another package's id: it must at least be registered with Gymnasium
        import gymnasium as gym

        import envs  # noqa: F401 - registers the MemGym ids the error lists

        try:
            gym.spec(env_id)
        except gym.error.Error as err:
            known = ", ".join(sorted(k for k in gym.registry if k.startswith("MemGym/")))
            raise TrainConfigError(f"{id_label}: unknown env id {env_id!r} ({err}); "
                                   f"registered MemGym ids: {known}") from None
        return  # its keyword arguments are its own: gym.make checks them
    from agents.bench import LABEL_FIELDS
    from world import WorldConfig
    from world.config import ConfigError

    base = WorldConfig.preset(family, difficulty)
    fields = [f.name for f in dataclasses.fields(WorldConfig)]
    # (family / difficulty are fields, but they choose the world rather than set it: refused below, so
    # not offered as allowed, as memgym bench --set lists them)
    allowed = [f for f in fields if f not in LABEL_FIELDS]
    for name in overrides:
        if name not in fields:
            raise TrainConfigError(f"{override_label.format(name)}: unknown WorldConfig field {name!r}; allowed: "
                                   f"{', '.join(allowed)}")
    try:
        base.replace(**dict(overrides))
    except (ConfigError, TypeError, ValueError) as err:
        for name, value in overrides.items():  # name the override that is wrong on its own, if one is
            try:
                base.replace(**{name: value})
            except (ConfigError, TypeError, ValueError) as one:
                raise TrainConfigError(f"{override_label.format(name)} is invalid for {env_id}: {one}") from None
        raise TrainConfigError(f"{overrides_label}: invalid together for {env_id}: {err}") from None


def rollout_refusal(agent: Any) -> str | None:
    """The error for `pretrain.improve: rollout` with a `pretrain.agent` that cannot be branched faithfully
    (agents.improve.branch_refusal: a `memsys:` system, or an agent not declaring `copyable = True`), or
    None when it can be."""
    from agents.improve import branch_refusal

    why = branch_refusal(agent)
    if why is None:
        return None
    return (f"key 'pretrain.improve': rollout replays every branch from a copy (copy.deepcopy) of key "
            f"'pretrain.agent', but {why}; use improve: none with this agent, or a baseline that can be copied "
            f"(e.g. versioned) with improve: rollout")


def check_agent_names(names: Any, label: str, *, privileged: bool = True) -> None:
    """Every name is a registered agent (agents.base), an ablated oracle (`oracle[-LINK]`), `sb3:PATH` or
    `memsys:MODULE:FACTORY`; with `privileged=False` only the non-privileged registered agents (no oracle,
    no model files). `label` names the input in the error (`key 'eval.baselines'`, `--baselines`)."""
    from agents.base import _REGISTRY, agent_names, parse_agent_spec

    known = agent_names()
    allowed = [n for n in known if privileged or not getattr(_REGISTRY[n][0], "privileged", False)]
    extra = ", oracle[-OP,...], sb3:PATH, memsys:MODULE:FACTORY" if privileged else ""  # (as bench lists them)
    for spec in names:
        if privileged and spec.startswith(("sb3:", "memsys:")) and spec.split(":", 1)[1]:
            continue
        try:
            name, _ = parse_agent_spec(spec)
        except ValueError as err:
            raise TrainConfigError(f"{label}: {err}") from None
        if name not in allowed:
            raise TrainConfigError(f"{label}: unknown agent {spec!r}; allowed: {', '.join(allowed)}{extra}")


def _check_keys(data: Mapping, allowed: tuple[str, ...], prefix: str) -> None:
    for key in data:
        if key not in allowed:
            raise TrainConfigError(f"unknown key '{prefix}{key}'; allowed: {', '.join(prefix + a for a in allowed)}")


def _mapping(value: Any, key: str) -> Mapping:
    if not isinstance(value, Mapping):
        raise TrainConfigError(f"key '{key}' must be a mapping, got {value!r}")
    for k in value:
        if not isinstance(k, str):
            raise TrainConfigError(f"key '{key}' must have string keys, got {k!r}")
    return value


def _int(value: Any, key: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or int(value) != value:
        raise TrainConfigError(f"key '{key}' must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise TrainConfigError(f"key '{key}' must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _unit(value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise TrainConfigError(f"key '{key}' must be a number in (0, 1), got {value!r}")
    return float(value)


IMPROVE_METHODS = ("none", "rollout")
#: operations a statement step may be branched on (untargeted: a branch needs no slot)
IMPROVE_OPS = ("NOOP", "WRITE")


#: keys of MemoryEnv's observation (a gain model may read any of them)
OBSERVATION_KEYS = ("event", "event_kind", "candidates", "candidate_mask", "store")


def _names(value: Any, key: str, allowed: tuple[str, ...], *, upper: bool = False) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list | tuple) or not value:
        raise TrainConfigError(f"key '{key}' must be a non-empty list of names from {list(allowed)}, got {value!r}")
    out = []
    for v in value:
        name = (v.upper() if upper else v) if isinstance(v, str) else v
        if name not in allowed:
            raise TrainConfigError(f"key '{key}': unknown name {v!r}; allowed: {', '.join(allowed)}")
        if name not in out:
            out.append(name)
    return tuple(out)


def _number(value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TrainConfigError(f"key '{key}' must be a finite number, got {value!r}")
    return float(value)


def _positive(value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise TrainConfigError(f"key '{key}' must be a finite number > 0, got {value!r}")
    return float(value)


def _choice(value: Any, key: str, allowed: tuple[str, ...]) -> str:
    if value is None:
        value = "none"
    if value not in allowed:
        raise TrainConfigError(f"key '{key}' must be one of {', '.join(allowed)}; got {value!r}")
    return value


def _bool(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise TrainConfigError(f"key '{key}' must be true or false, got {value!r}")
    return value


def _valid_net_arch(net_arch: Any, algo: str = "maskable_ppo") -> bool:
    def ints(x: Any) -> bool:
        return isinstance(x, list) and all(isinstance(i, int) and not isinstance(i, bool) and i > 0 for i in x)

    if isinstance(net_arch, Mapping):  # actor-critic algorithms only (SB3's DQN indexes a list)
        return algo != "dqn" and set(net_arch) <= {"pi", "vf"} and all(ints(v) for v in net_arch.values())
    return ints(net_arch)


def _number_in(lo: float, hi: float, *, lo_open: bool = False, hi_open: bool = False, none: bool = False):
    left, right = "(" if lo_open else "[", ")" if hi_open else "]"
    text = f"a number in {left}{lo:g}, {hi:g}{right}" if hi != math.inf else \
        (f"a number > {lo:g}" if lo_open else f"a number >= {lo:g}")

    def ok(v: Any) -> bool:
        if v is None:
            return none
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            return False
        return (lo < v if lo_open else lo <= v) and (v < hi if hi_open else v <= hi)

    return (text + (" or null" if none else ""), ok)


def _integer(minimum: int, *, also: tuple = ()):
    def ok(v: Any) -> bool:
        return v in also and not isinstance(v, bool) or \
            (isinstance(v, int) and not isinstance(v, bool) and v >= minimum)

    return (f"an integer >= {minimum}" + "".join(f" or {a}" for a in also), ok)


_BOOL = ("true or false", lambda v: isinstance(v, bool))
_MAPPING = ("a mapping of keyword arguments", lambda v: isinstance(v, Mapping) and all(isinstance(k, str) for k in v))


def _train_freq_ok(v: Any) -> bool:
    if isinstance(v, int) and not isinstance(v, bool):
        return v >= 1
    return (isinstance(v, list | tuple) and len(v) == 2 and isinstance(v[0], int) and not isinstance(v[0], bool)
            and v[0] >= 1 and v[1] in ("step", "episode"))


#: Allowed values of the algorithms' hyper-parameters a recipe sets (SB3's meaning). A value outside crashed
#: mid-run (n_steps -5, batch_size 0) or trained something meaningless (gamma 5); names not listed here are
#: checked by building the model once before the run starts (agents.train.check_recipe).
HYPERPARAM_VALUES: dict[str, tuple[str, Any]] = {
    "learning_rate": _number_in(0, math.inf, lo_open=True),
    "n_steps": _integer(1),
    "batch_size": _integer(1),
    "n_epochs": _integer(1),
    "gamma": _number_in(0, 1, lo_open=True),
    "gae_lambda": _number_in(0, 1),
    "clip_range": _number_in(0, math.inf, lo_open=True),
    "clip_range_vf": _number_in(0, math.inf, lo_open=True, none=True),
    "normalize_advantage": _BOOL,
    "ent_coef": _number_in(0, math.inf),
    "vf_coef": _number_in(0, math.inf),
    "max_grad_norm": _number_in(0, math.inf, lo_open=True),
    "use_sde": _BOOL,
    "sde_sample_freq": _integer(-1),
    "target_kl": _number_in(0, math.inf, lo_open=True, none=True),
    "stats_window_size": _integer(1),
    "rms_prop_eps": _number_in(0, math.inf, lo_open=True),
    "use_rms_prop": _BOOL,
    "buffer_size": _integer(1),
    "learning_starts": _integer(0),
    "tau": _number_in(0, 1, lo_open=True),
    "train_freq": ("an integer >= 1 or [n, step|episode]", _train_freq_ok),
    "gradient_steps": _integer(1, also=(-1,)),
    "optimize_memory_usage": _BOOL,
    "target_update_interval": _integer(1),
    "exploration_fraction": _number_in(0, 1),
    "exploration_initial_eps": _number_in(0, 1),
    "exploration_final_eps": _number_in(0, 1),
    "replay_buffer_kwargs": _MAPPING,
    "rollout_buffer_kwargs": _MAPPING,
}

#: policy_kwargs a recipe can set (the others of SB3's policies take Python classes, or are set by the
#: algorithm), with their allowed values (net_arch and activation_fn are checked above).
POLICY_KWARG_VALUES: dict[str, tuple[str, Any]] = {
    "net_arch": ("see above", lambda v: True),
    "activation_fn": ("see above", lambda v: True),
    "ortho_init": _BOOL,
    "log_std_init": ("a finite number", lambda v: not isinstance(v, bool) and isinstance(v, int | float)
                     and math.isfinite(v)),
    "share_features_extractor": _BOOL,
    "normalize_images": _BOOL,
    "optimizer_kwargs": _MAPPING,
    "features_extractor_kwargs": _MAPPING,
}


def _check_values(values: Mapping[str, Any], table: Mapping[str, tuple[str, Any]], section: str) -> None:
    for key, value in values.items():
        if key in table:
            text, ok = table[key]
            if not ok(value):
                hint = ""
                if isinstance(value, str):
                    try:
                        float(value)
                        hint = f" (YAML 1.1 reads {value} as text: write it with a dot, e.g. 3.0e-4, or as 0.0003)"
                    except ValueError:
                        pass
                raise TrainConfigError(f"key '{section}.{key}' must be {text}; got {value!r}{hint}")


def _policy_arguments(algo: str, policy: str) -> set[str]:
    """The `policy_kwargs` a recipe may set for `algo`'s `policy`: arguments of that policy class that are in
    POLICY_KWARG_VALUES."""
    import inspect

    policy_class = algorithm_class(algo).policy_aliases[policy]
    return set(inspect.signature(policy_class.__init__).parameters) & set(POLICY_KWARG_VALUES)


def _algo_arguments(algo: str) -> set[str] | None:
    import inspect

    try:
        cls = algorithm_class(algo)
    except ImportError:
        return None
    params = set(inspect.signature(cls.__init__).parameters) - {"self", "kwargs", "args"}
    return params - {"env", "policy", "policy_kwargs", "seed", "tensorboard_log", "verbose", "device",
                     "_init_setup_model"}


def algorithm_class(algo: str):
    """The SB3 class for an algorithm name (imports SB3 lazily)."""
    if algo == "maskable_ppo":
        from sb3_contrib import MaskablePPO

        return MaskablePPO
    if algo == "ppo":
        from stable_baselines3 import PPO

        return PPO
    if algo == "a2c":
        from stable_baselines3 import A2C

        return A2C
    if algo == "dqn":
        from stable_baselines3 import DQN

        return DQN
    raise TrainConfigError(f"key 'algo' must be one of {', '.join(ALGORITHMS)}; got {algo!r}")
