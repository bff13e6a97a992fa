"""The Gymnasium environment: one :class:`world.World`, one event and one memory operation per step."""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from envs import features as F
from world import Op, World, WorldConfig
from world.config import ConfigError
from world.sim import Outcome, _check_reader

N_OPS = len(Op)
_OPS: tuple[Op, ...] = tuple(sorted(Op, key=int))
OP_NAMES: tuple[str, ...] = tuple(op.name for op in _OPS)
TARGETED = frozenset({Op.UPDATE, Op.LINK, Op.REFLECT, Op.FORGET})
_SUPERSEDED = F.CANDIDATE_FEATURES.index("superseded")
_SEMANTIC = F.CANDIDATE_FEATURES.index("semantic")
_FLOAT32 = np.dtype(np.float32)


def resolve_config(config: Any = None, preset: str | None = None, **overrides: Any) -> WorldConfig:
    """Turn the ``config`` argument of :class:`MemoryEnv` into a validated :class:`world.WorldConfig`.

    Accepts ``None`` (the ``life``/``easy`` preset), a ``WorldConfig``, a ``dict`` of fields (read as a
    YAML file is, :meth:`world.WorldConfig.from_dict`: the preset of its ``family`` (default ``life``)
    and ``difficulty`` (default ``easy``) with the other fields over it), a path to a YAML file, or a
    ``"family-difficulty"`` string such as ``"multi_hop-hard"``. ``overrides`` are applied last through
    ``WorldConfig.replace`` (validated).

    ``preset``: the ``"family-difficulty"`` world a registered id stands for (its ``gym.make`` kwargs).
    With it, ``config=None`` is that preset, a dict's fields go over it, and a config of another family
    or difficulty is refused (``ConfigError``): the id would name a world it does not run.
    """
    base = None
    if preset is not None:
        if not isinstance(preset, str) or "-" not in preset:
            raise ConfigError(f"preset must be a 'family-difficulty' string such as 'life-easy', got {preset!r}")
        family, _, difficulty = preset.rpartition("-")
        base = WorldConfig.preset(family, difficulty)
    if config is None:
        cfg = base if base is not None else WorldConfig.preset("life", "easy")
    elif isinstance(config, WorldConfig):
        cfg = config
    elif isinstance(config, dict):
        data = dict(config)
        if base is not None and "preset" not in data:
            data.setdefault("family", base.family)
            data.setdefault("difficulty", base.difficulty)
        if "family" not in data and "preset" not in data:
            data["family"] = "life"  # the env's default world, as for config=None
        cfg = WorldConfig.from_dict(data)  # the family's preset (difficulty "easy" unless given) + the rest
    elif isinstance(config, (str, os.PathLike)):
        text = os.fspath(config)
        if text.endswith((".yaml", ".yml")) or os.path.exists(text):
            # (a file of fields goes over the id's preset, as a dict does)
            # (without an id's preset, the env's default world life, as for a dict)
            cfg = WorldConfig.from_yaml(text, {"family": base.family, "difficulty": base.difficulty}
                                        if base is not None else {"family": "life"})
        else:
            family, sep, difficulty = text.rpartition("-")
            if not sep:
                raise ValueError(
                    f"config={text!r}: expected a YAML path or 'family-difficulty' (e.g. 'life-easy')"
                )
            cfg = WorldConfig.preset(family, difficulty)
    else:
        raise TypeError(
            "config must be None, a WorldConfig, a dict, a YAML path or 'family-difficulty', "
            f"got {type(config).__name__}"
        )
    if base is not None and (cfg.family, cfg.difficulty) != (base.family, base.difficulty):
        from envs import env_id

        try:
            hint = f"gym.make the id of that world ({env_id(cfg.family, cfg.difficulty)}) with your fields, or "
        except ValueError:  # a world without an id (an endless world other than life's)
            hint = ""
        raise ConfigError(
            f"config={config!r} gives the {cfg.family}-{cfg.difficulty} world, but this env id stands for "
            f"{preset!r} (its gym.make kwargs preset={preset!r}); {hint}build envs.MemoryEnv(config) directly"
        )
    if overrides:
        cfg = cfg.replace(**overrides)
    return cfg


@dataclass(frozen=True)
class InvalidAction:
    """An action a wrapper could not map to ``[op, slot]`` (a malformed text command, a masked-out flat
    alias). ``MemoryEnv.step(InvalidAction(reason))`` applies the invalid-action rule (nothing done,
    the ``invalid`` penalty, ``info["invalid_action"] = True``, ``info["invalid_reason"] = reason``)
    as a step of its own, so that it passes through every wrapper in between (time limits, episode
    statistics) like any other action.

    ``reason`` must be a non-empty string (``ValueError`` naming it otherwise): the step below takes a
    reason of ``None`` for "valid", so ``InvalidAction(None)`` would be a free, unflagged NOOP."""

    reason: str

    def __post_init__(self) -> None:
        if not isinstance(self.reason, str) or not self.reason:
            raise ValueError(f"InvalidAction: reason must be a non-empty string (why the wrapper could not map "
                             f"its action; it becomes info['invalid_reason']), got {self.reason!r}")


def embed_dim_of(config: WorldConfig) -> int:
    """Length of ``observation["event"]`` for a config (MiniLM vectors are 384-d)."""
    return 384 if config.embedder == "minilm" else int(config.embed_dim)


@dataclass(frozen=True)
class AgentView:
    """What a heuristic agent may see: the world's read-only view, the event and the candidates.

    Attribute lookups that are not fields fall through to the world's ``WorldView`` (so
    ``agent_view().query(...)`` is the view's query). Never carries hidden payloads.
    """

    view: Any
    event: Any
    candidate_ids: tuple[str, ...]
    candidate_contents: tuple[str, ...]

    def __getattr__(self, name: str) -> Any:  # only called for names that are not fields
        if name.startswith("_"):  # the view's private handle on the world stays private
            raise AttributeError(name)
        return getattr(object.__getattribute__(self, "view"), name)


class MemoryEnv(gym.Env[dict[str, np.ndarray], np.ndarray]):
    """
    ## Description

    A stream of conversation events (facts about people and things, changed facts, chit-chat,
    repeats, habits, requests to forget, questions) arrives one per step. The agent manages a long-term
    memory store (episodic + semantic memories, an associative graph, ACT-R decay with periodic
    sweeps) with one memory operation per event. Questions are answered by a fixed reader that
    retrieves from the store the agent built: good answers need the right memories, kept current,
    linked and consolidated, and a store lean enough to fit its capacity. Task families follow
    LongMemEval, LoCoMo and MemoryAgentBench (recall, update, temporal, multi-hop, consolidation,
    abstention, erasure, noise, and `life`, a mix of all).

    ## Action Space

    `MultiDiscrete([7, K])`: an operation and a target slot (one of the K candidate memories in the
    observation; ignored by NOOP, WRITE and QUERY).

    | Num | Operation | Target | Effect |
    |-----|-----------|--------|--------|
    | 0   | NOOP      | -      | nothing is stored |
    | 1   | WRITE     | -      | store the current event as an episode |
    | 2   | UPDATE    | slot   | store the event as the new version of the target's chain |
    | 3   | LINK      | slot   | store the event with a typed edge to the target |
    | 4   | REFLECT   | slot   | consolidate the target's cluster of episodes into a semantic rule |
    | 5   | QUERY     | -      | retrieve with the event as the query: answers a question, else rehearses |
    | 6   | FORGET    | slot   | hard-erase the target and its version chain |

    `env.action_masks()` (what sb3-contrib's MaskablePPO reads) and `info["action_mask"]` give a flat
    bool array of length 7 + K: entries 0-6 say which operations are valid for at least one target,
    entries 7.. which slots hold a memory (slot 0 stays allowed when there is none, so a masked
    sampler can always pick something; NOOP is always allowed). The two parts are independent, so a
    masked pair can still be invalid (e.g. REFLECT on a slot holding a semantic rule);
    `env.action_mask_pairs()` gives the (7, K) pair mask. Masks read only what an agent can
    see: REFLECT is allowed on any episode, and one whose target turns out to have no cluster
    (>= 2 live, not superseded episodes on its hidden subject and relation) is refused after the fact.
    An invalid action is never an error: it is a NOOP with the world's small `invalid` penalty and
    `info["invalid_action"] = True` (with `info["invalid_reason"]`).

    ## Observation Space

    A flat `Dict` (no nesting; SB3's `MultiInputPolicy` takes it as is):

    | Key              | Shape     | Type    | Min | Max | Content |
    |------------------|-----------|---------|-----|-----|---------|
    | `event`          | (d,)      | float32 | -1  | 1   | unit embedding of the event text (world's embedder; zeros after the last event) |
    | `event_kind`     | (3,)      | float32 | 0   | 1   | one-hot: statement, question, request |
    | `candidates`     | (K * F,)  | float32 | -1/0| 1   | K rows of F features, row-major: `obs["candidates"].reshape(K, F)` |
    | `candidate_mask` | (K,)      | int8    | 0   | 1   | 1 where a slot holds a memory (a 0/1 `Box`)   |
    | `store`          | (S,)      | float32 | 0   | 1   | store-level features |

    Candidate features (`envs.features.CANDIDATE_FEATURES`, F = 19): similarity to the event
    (cosine, the only column in [-1, 1]), ACT-R activation squashed to (0, 1) (0.5 = B at the forget
    threshold; a sweep drops a memory below 1 / (1 + e^importance)), importance, age (log-scaled), tier one-hot (fact, preference, inference), semantic,
    links, cue overlap with the event, recent, superseded, version-chain length, confidence, and
    from the visible texts (`world.keys`, `world.dedup`): same subject, same topic, same key (both),
    best key match, duplicate of the event by the store's dedup rules.
    Store features (`envs.features.STORE_FEATURES`, S = 8): fill ratio, episodic and semantic
    counts over capacity, mean squashed activation, steps to the next sweep, clock fraction,
    filled candidate slots, previous action invalid.

    Candidates are the world's (`World.candidates()`, the same list the oracle and the heuristic
    agents choose from): up to `config.n_recent` most recently written memories (newest first; a
    reference such as "that company" points at recent context, which similarity alone misses), then
    the active memories most similar to the event (most similar first), deduplicated, refreshed
    after every operation. `info["candidate_ids"]` lists their memory ids in slot order.

    ## Rewards

    The sum of the world's reward terms (`answer`, `leak`, `write_cost`, `storage_cost`,
    `query_cost`, `invalid`), each already weighted by `config.rewards`. `info["reward_terms"]`
    holds every weighted term; `info["question"]` the grading of a question step (family, verdict,
    evidence recall). A correct answer earns most; a leak of erased data costs more than a wrong
    answer; every write, every stored memory per step and every query costs a little.

    ## Starting State

    An empty store and the first event of a world generated from `np_random` (seeded by
    `reset(seed=...)`): the entities, their facts and the order of events are all procedural.

    ## Episode End

    1. Termination: never (`terminated` is always False).
    2. Truncation: after `config.horizon` events (a Python `bool`); `MemGym/Life-Endless-v0` never
       ends. The last step's `info["metrics"]` holds the world's episode metrics (accuracy, per-verdict
       counts, live memories, operations used; the per-question rates are None without questions).

    For shorter episodes override `horizon=N`. `gym.make(id, max_episode_steps=N)` adds Gymnasium's
    `TimeLimit`, which this env cannot see: it cuts the world after N steps from outside (below a
    fixed horizon: no end-of-episode checks, the clock stops at N / horizon; the first reset warns).
    The registered ids put `envs.wrappers.FinalMetrics` over it, so that the last step's
    `info["metrics"]` are there however the episode ends (for Life-Endless, a time limit is its end).

    ## Arguments

    ```python
    >>> import gymnasium as gym
    >>> import envs
    >>> env = gym.make("MemGym/Life-Easy-v0", render_mode="ansi", horizon=50)
    >>> obs, info = env.reset(seed=0)
    >>> obs, reward, terminated, truncated, info = env.step(env.action_space.sample())

    ```

    | Parameter     | Type                                  | Default          | Description |
    |---------------|---------------------------------------|------------------|-------------|
    | `config`      | `WorldConfig`, dict, YAML path, str    | `"life-easy"`    | the world: a config, its fields, a YAML file or `"family-difficulty"` |
    | `render_mode` | `None`, `"ansi"`, `"rgb_array"`, `"human"` | `None`      | `human` prints the ansi frame |
    | `preset`      | `"family-difficulty"` or `None`        | the id's         | set by registration (with `registered_as`, the same value): `config` fields go over it; a `config` or `preset` of another world is refused |
    | `reader`      | a `world.grading.Reader` instance or `None` | `DefaultReader()` | keyword only: grades the questions (an LLM reader, say); every world the env builds (reset options, `set_state` of another config) gets the current world's reader; not a Reader instance: `TypeError` naming `reader`; it is pickled with the env (one that does not pickle: `TypeError` naming its class at `pickle.dumps`) |
    | `**overrides` | WorldConfig fields                    |                  | e.g. `horizon=200`, `capacity=64`, `n_candidates=12`, `n_recent=3`, `embedder="minilm"` (validated) |

    `reset(options={"family": ..., "difficulty": ...})` switches the world to another preset
    (overrides kept) as long as the spaces stay the same.

    `env.unwrapped.world` is the `World`; `env.unwrapped.agent_view()` returns what heuristic
    agents may see; `get_state()` / `set_state(state)` snapshot and restore the whole env (world,
    store, RNG) for branching rollouts; the env pickles.

    ## Version History

    * v0: Initial version. (2026-11-30, before any release: the REFLECT mask no longer reads the
      hidden clusters, and `candidate_mask` is a 0/1 int8 `Box` instead of `MultiBinary`; models
      trained before that date do not load on it.)
    """

    metadata = {"render_modes": ["human", "ansi", "rgb_array"], "render_fps": 4}
    _mask_cache: dict | None = None  # (class default: envs pickled before the cache existed load with None)

    def __init__(self, config: Any = None, render_mode: str | None = None, preset: str | None = None,
                 registered_as: str | None = None, *, reader: Any = None, **overrides: Any) -> None:
        if registered_as is not None and preset != registered_as:
            # gym.make(id, preset=...) would run another world under the id's name
            raise ConfigError(f"preset={preset!r}: this env id stands for {registered_as!r}; the preset names the "
                              f"world, it is not one of its settings: gym.make that world's own id, or build "
                              f"envs.MemoryEnv(config={preset!r}) directly")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode={render_mode!r} is not supported; allowed: None, "
                + ", ".join(repr(m) for m in self.metadata["render_modes"])
            )
        if reader is not None:
            _check_reader(reader)  # (TypeError naming `reader`, before anything is built)
        self.render_mode = render_mode
        self.config = resolve_config(config, preset, **overrides)
        # (a family / difficulty given here equals the config's, or resolve_config refused it: it names
        # the world, so a reset(options=...) switch must not carry it over to the next preset)
        self._overrides = {k: v for k, v in overrides.items() if k not in ("family", "difficulty")}
        self.world = World(self.config, seed=0, reader=reader)  # reset() reseeds it from np_random
        self._setup_spaces()
        # per-step state
        self._ids: list[str] = []
        self._last_invalid = False
        self._last_outcome = None
        self._last_action: tuple[int, int] | None = None
        self._episode_return = 0.0
        self._steps = 0

    # ------------------------------------------------------------------ spaces
    def _setup_spaces(self) -> None:
        cfg = self.config
        self.K = int(cfg.n_candidates)
        self.n_ops = N_OPS
        self._features = F.FeatureBuilder(self.K, int(cfg.n_recent))
        dim = embed_dim_of(cfg)
        self.embed_dim = dim
        k = self.K
        action_space = spaces.MultiDiscrete([N_OPS, k])
        observation_space = spaces.Dict(
            {
                "event": spaces.Box(-1.0, 1.0, shape=(dim,), dtype=np.float32),
                "event_kind": spaces.Box(0.0, 1.0, shape=(len(F.EVENT_KINDS),), dtype=np.float32),
                "candidates": spaces.Box(np.tile(F.CANDIDATE_LOW, k), np.tile(F.CANDIDATE_HIGH, k),
                                         dtype=np.float32),
                # a Box, not MultiBinary: SB3's VecNormalize and VecFrameStack take Box (and Dict of Box) only
                "candidate_mask": spaces.Box(0, 1, shape=(k,), dtype=np.int8),
                "store": spaces.Box(F.STORE_LOW, F.STORE_HIGH, dtype=np.float32),
            }
        )
        # a config switch (reset options, set_state) keeps equal spaces as they are: a space carries its
        # own RNG, and a user's action_space.seed(...) must go on giving the same samples
        if getattr(self, "action_space", None) != action_space:
            self.action_space = action_space
        if getattr(self, "observation_space", None) != observation_space:
            self.observation_space = observation_space
        self._kinds = {name: np.eye(len(F.EVENT_KINDS), dtype=np.float32)[i] for i, name in enumerate(F.EVENT_KINDS)}
        self._mask = np.zeros(N_OPS + k, dtype=bool)
        self._mask_cache: dict = {}  # (op flags, filled slots) -> mask
        self._pair = np.zeros((N_OPS, k), dtype=bool)
        self._full: bool | None = None  # the store was full at the last observation (None: no event)
        self._pair_stale = True

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        # checked before anything changes; `is not None`, not truthiness: a falsy non-dict ([], 0, "") is
        # refused as a truthy one is, and {} asks for no switch
        cfg = self._options_config(options) if options is not None else None
        super().reset(seed=seed)
        if cfg is not None:
            self.config = cfg
            self.world = self._new_world(cfg)
            self._setup_spaces()  # (the same spaces: _options_config checked; n_recent may differ)
        world_seed = int(self.np_random.integers(0, 2**63 - 1))
        self.world.reset(world_seed)
        self._last_invalid = False
        self._last_outcome = None
        self._last_action = None
        self._episode_return = 0.0
        self._steps = 0
        obs = self._observe()
        info = {"action_mask": self._mask.copy(), "candidate_ids": list(self._ids)}
        if self.render_mode == "human":
            self.render()
        return obs, info

    def step(self, action: Any):
        if type(action) is InvalidAction:
            return self._step_with(Op.NOOP, None, 0, invalid_reason=action.reason)
        op_i, slot = self._parse_action(action)
        op = _OPS[op_i]
        target = None
        if op in TARGETED and slot < len(self._ids):
            target = self._ids[slot]
        return self._step_with(op, target, slot)

    def _step_with(self, op: Op, target: str | None, slot: int = 0, invalid_reason: str | None = None):
        """One env step applying ``op`` to memory ``target`` (a targeted op with ``target=None`` is
        invalid; so is any op given an ``invalid_reason``)."""
        op_i = int(op)
        world = self.world
        if invalid_reason is None:
            outcome = world.apply(op, target)
        else:
            outcome = world.apply(op, None, invalid_reason=invalid_reason)
        terms = outcome.reward_terms  # a fresh dict per outcome, already weighted by config.rewards
        reward = float(sum(terms.values()))
        invalid = not outcome.valid
        self._last_invalid = invalid
        self._last_outcome = outcome
        self._last_action = (op_i, slot)
        self._episode_return += reward
        self._steps += 1
        world.advance()
        truncated = bool(world.done)
        obs = self._observe()
        info: dict[str, Any] = {
            "action_mask": self._mask.copy(),
            "candidate_ids": list(self._ids),
            "invalid_action": invalid,
            "invalid_reason": outcome.invalid_reason,
            "reward_terms": terms,
            "outcome_op": OP_NAMES[op_i],
            "memory_id": outcome.memory_id,
        }
        if outcome.question is not None:
            info["question"] = dict(outcome.question)
        if truncated:
            info["metrics"] = self.world.metrics()  # built fresh on each call (no deep copy needed)
        if self.render_mode == "human":
            self.render()
        return obs, reward, False, truncated, info

    def action_masks(self) -> np.ndarray:
        """Flat bool mask of length ``7 + K`` (ops then slots), True = allowed; MaskablePPO reads this."""
        return self._mask.copy()

    def action_mask_pairs(self) -> np.ndarray:
        """(7, K) bool: ``[op, slot]`` admissible by the visible rules (``World.is_valid``; a REFLECT
        whose target has no cluster passes and is refused when taken). Untargeted ops (NOOP, WRITE,
        QUERY) are allowed on slot 0 only."""
        return self._pairs().copy()

    def render(self):
        if self.render_mode is None:
            gym.logger.warn(
                "You are calling render method without specifying any render mode. "
                f"Set render_mode at initialization, e.g. gym.make({self.spec.id if self.spec else 'ID'!r}, render_mode='ansi')"
            )
            return None
        from envs import render as R

        if self.render_mode == "rgb_array":
            return R.render_rgb(self)
        text = R.render_ansi(self)
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def close(self) -> None:
        pass

    # ------------------------------------------------------------------ extras
    def agent_view(self) -> AgentView:
        """The world's read-only view plus the current candidate ids and texts (no payloads)."""
        view = self.world.view()
        contents = []
        store = self.world.store
        for mid in self._ids:
            rec = store.get(mid)
            contents.append(rec.content if rec is not None else "")
        event = None if self.world.done else self.world.event  # (as the observation: no event after the last)
        return AgentView(view=view, event=event, candidate_ids=tuple(self._ids),
                         candidate_contents=tuple(contents))

    @property
    def candidate_ids(self) -> list[str]:
        return list(self._ids)

    def get_state(self) -> dict[str, Any]:
        """A deep, pickle-able snapshot of the whole env: world (store, clock, RNG, config), env RNG,
        counters."""
        return {
            "world": self.world.get_state(),
            "np_random": copy.deepcopy(self.np_random.bit_generator.state),
            "np_random_seed": self.np_random_seed,
            "env": {
                "ids": list(self._ids),
                "last_invalid": self._last_invalid,
                "last_action": self._last_action,
                "last_outcome": copy.deepcopy(self._last_outcome),
                "episode_return": self._episode_return,
                "steps": self._steps,
            },
        }

    def set_state(self, state: dict[str, Any]) -> dict[str, np.ndarray]:
        """Restore a snapshot from :meth:`get_state`; returns the observation at that point.

        The whole snapshot is checked before anything changes: a malformed one (its world part without
        the ``config`` it was taken under, among others) raises ``ValueError`` naming the part that is
        wrong and leaves the env as it was. A snapshot taken under another
        config (after ``reset(options=...)``, or from another env) switches this env to that config
        when the spaces stay the same, as reset options do; otherwise ``ValueError`` naming the
        fields that change the spaces."""
        if not isinstance(state, dict) or not {"world", "np_random", "env"} <= state.keys():
            have = sorted(state) if isinstance(state, dict) else type(state).__name__
            raise ValueError(f"set_state: not a MemoryEnv snapshot (env.get_state()); it needs the keys "
                             f"['env', 'np_random', 'world'], got {have}")
        env = state["env"]
        need = {"ids", "last_invalid", "last_action", "last_outcome", "episode_return", "steps"}
        if not isinstance(env, dict) or not need <= env.keys():
            have = sorted(env) if isinstance(env, dict) else type(env).__name__
            raise ValueError(f"set_state: state['env'] needs the keys {sorted(need)}, got {have}")
        rng = np.random.Generator(np.random.PCG64())
        try:
            rng.bit_generator.state = copy.deepcopy(state["np_random"])
        except (TypeError, ValueError, KeyError) as exc:
            raise ValueError(f"set_state: state['np_random'] must be a PCG64 bit-generator state ({exc})") from None
        ids, steps, episode_return = env["ids"], env["steps"], env["episode_return"]
        last_action = env["last_action"]
        problems = []
        if not isinstance(ids, (list, tuple)) or not all(isinstance(m, str) for m in ids):
            problems.append(f"'ids' must be a list of memory ids, got {ids!r}")
        if isinstance(steps, (bool, np.bool_)) or not isinstance(steps, (int, np.integer)) or steps < 0:
            problems.append(f"'steps' must be an int >= 0, got {steps!r}")
        if isinstance(episode_return, (bool, np.bool_)) or not isinstance(episode_return, (int, float, np.number)):
            problems.append(f"'episode_return' must be a number, got {episode_return!r}")
        if not isinstance(env["last_invalid"], (bool, np.bool_)):
            problems.append(f"'last_invalid' must be a bool, got {env['last_invalid']!r}")
        if last_action is not None and not (
                isinstance(last_action, (list, tuple)) and len(last_action) == 2
                and all(isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)) for x in last_action)
                and 0 <= last_action[0] < N_OPS and 0 <= last_action[1] < self.K):
            problems.append(f"'last_action' must be None or (op, slot) with op in 0..{N_OPS - 1} and slot in "
                            f"0..{self.K - 1}, got {last_action!r}")
        if env["last_outcome"] is not None and not isinstance(env["last_outcome"], Outcome):
            problems.append(f"'last_outcome' must be None or a world.sim.Outcome, got "
                            f"{type(env['last_outcome']).__name__}")
        if problems:
            raise ValueError("set_state: state['env']: " + "; ".join(problems))
        # gymnasium's np_random_seed: -1 (a generator whose seed is unknown) unless the snapshot says; left
        # None, the first read of the property would replace the restored generator by a fresh one
        rng_seed = state.get("np_random_seed", -1)
        if isinstance(rng_seed, (bool, np.bool_)) or not isinstance(rng_seed, (int, np.integer)) or rng_seed < -1:
            raise ValueError(f"set_state: state['np_random_seed'] must be an int >= -1 (-1: unknown), got {rng_seed!r}")
        episode_return, steps = float(episode_return), int(steps)
        world_state = state["world"]
        if not isinstance(world_state, dict) or not World._STATE_KEYS <= world_state.keys():
            cfg = self.config  # not a World snapshot at all: World.set_state below names the keys it needs
        elif "config" not in world_state:
            # (not a cache: this env's config taken for it ran another world's store and clock under this
            # capacity and horizon, which the clipped observation does not show)
            raise ValueError("set_state: state['world'] has no 'config' (the WorldConfig the snapshot was taken "
                             "under, which get_state() records); a snapshot without it cannot be checked against "
                             "this env's config: take it again with get_state()")
        else:
            cfg = world_state["config"]
        if cfg != self.config:
            if not isinstance(cfg, WorldConfig):
                raise ValueError(f"set_state: state['world']['config'] must be a WorldConfig, got {type(cfg).__name__}")
            self._check_spaces(cfg, "set_state: the snapshot's config")
            world = self._new_world(cfg)
        else:
            # restored into a shallow copy first (World.set_state replaces attributes, never mutates the
            # ones it replaces), so that a snapshot whose parts disagree changes nothing here
            world = copy.copy(self.world)
        world.set_state(world_state)  # checks the snapshot first; copies (the snapshot stays reusable)
        expected = [] if world.done else world.candidates()
        if list(ids) != expected:
            raise ValueError(f"set_state: state['env']['ids'] {list(ids)} are not the candidates of "
                             f"state['world'] ({expected}): the two parts come from different snapshots")
        # steps taken so far; after the last event the env still counts the (penalised no-op) steps an
        # agent sends past the end, so any number from there on belongs to a finished world
        done_steps = int(world._i) + (1 if world.done else 0)
        if steps != done_steps and not (world.done and steps > done_steps):
            raise ValueError(f"set_state: state['env']['steps'] is {steps} but state['world'] is at step "
                             f"{done_steps} of its episode: the two parts come from different snapshots")
        if cfg != self.config:
            self.config, self.world = cfg, world
            self._setup_spaces()
        else:  # the same World object (agents and views may hold it), now in the restored state
            self.world.__dict__.clear()
            self.world.__dict__.update(world.__dict__)
        self._np_random, self._np_random_seed = rng, int(rng_seed)
        self._last_invalid = bool(env["last_invalid"])
        self._last_action = env["last_action"]
        self._last_outcome = copy.deepcopy(env["last_outcome"])
        self._episode_return = episode_return
        self._steps = steps
        return self._observe()

    # ------------------------------------------------------------------ internals
    def _new_world(self, cfg: WorldConfig) -> World:
        """A world of ``cfg`` for a config switch (reset options, a snapshot of another config). It gets
        the current world's reader (the env's ``reader=``, or one a user set on ``env.unwrapped.world``):
        an evaluation with an LLM reader would otherwise go on with ``DefaultReader`` after the switch,
        graded by another reader without a word."""
        return World(cfg, seed=0, reader=self.world.reader)

    def _options_config(self, options: Any) -> WorldConfig | None:
        """The config that reset ``options`` ask for (None: the current one). Raises before anything
        changes: unknown keys, bad names, or a switch that would change the spaces."""
        if not isinstance(options, dict):
            raise ValueError(f"reset options must be a dict with keys 'family' and/or 'difficulty', "
                             f"got {type(options).__name__}")
        unknown = set(options) - {"family", "difficulty"}
        if unknown:
            raise ValueError(f"reset options: unknown key(s) {sorted(unknown)}; allowed: 'family', 'difficulty'")
        family = options.get("family", self.config.family)
        difficulty = options.get("difficulty", self.config.difficulty)
        if family == self.config.family and difficulty == self.config.difficulty:
            return None
        cfg = resolve_config(f"{family}-{difficulty}")  # (a bad name raises here, as it is)
        try:
            cfg = cfg.replace(**self._overrides) if self._overrides else cfg
        except ConfigError as exc:
            # the env's overrides go over the new preset, and one may not fit it (a life env's mix on
            # recall): say that the value came from the env, not from these options
            raise ConfigError(f"reset options family={family!r}, difficulty={difficulty!r}: this env's overrides "
                              f"{self._overrides!r} do not fit that world: {exc}; make a new env for it") from None
        self._check_spaces(cfg, f"reset options family={family!r}, difficulty={difficulty!r}")
        return cfg

    def _check_spaces(self, cfg: WorldConfig, what: str) -> None:
        """ValueError unless ``cfg`` gives this env's spaces (they depend on K and the embedding size)."""
        dim = embed_dim_of(cfg)
        if int(cfg.n_candidates) != self.K or dim != self.embed_dim:
            raise ValueError(
                f"{what} would change the spaces (n_candidates {self.K} -> {cfg.n_candidates}, event "
                f"embedding size {self.embed_dim} -> {dim}); make a new env instead"
            )

    def _parse_action(self, action: Any) -> tuple[int, int]:
        if type(action) is np.ndarray and action.shape == (2,) and action.dtype.kind in "iu":  # fast path
            op_i, slot = action.tolist()
            if 0 <= op_i < N_OPS and 0 <= slot < self.K:
                return op_i, slot
        try:
            arr = np.asarray(action).reshape(-1)
            if arr.shape != (2,) or not np.issubdtype(arr.dtype, np.number):
                raise ValueError
            op_i, slot = int(arr[0]), int(arr[1])
            if op_i != arr[0] or slot != arr[1]:
                raise ValueError
        except (ValueError, TypeError, OverflowError):  # (OverflowError: int(inf))
            raise ValueError(
                f"action must be [op, slot] with op in 0..{N_OPS - 1} ({', '.join(OP_NAMES)}) and slot in "
                f"0..{self.K - 1}, got {action!r}"
            ) from None
        if not (0 <= op_i < N_OPS and 0 <= slot < self.K):
            raise ValueError(
                f"action {[op_i, slot]} out of range: op must be in 0..{N_OPS - 1} ({', '.join(OP_NAMES)}), "
                f"slot in 0..{self.K - 1}"
            )
        return op_i, slot

    def _observe(self) -> dict[str, np.ndarray]:
        """Build the observation; every returned array is new (users keep them, e.g. in buffers)."""
        world = self.world
        event = None if world.done else world.event
        if event is None:
            ev = np.zeros(self.embed_dim, dtype=np.float32)
            kind = np.zeros(len(F.EVENT_KINDS), dtype=np.float32)
            vec = None
            text = None
        else:
            vector = getattr(world, "event_vector", None)  # (self._embed without its frame)
            vec = vector() if vector is not None else self._embed(event.text)
            # (a native float32 dtype is numpy's one instance: the identity test spares the comparison)
            if (vec.dtype is _FLOAT32 or vec.dtype == np.float32) and getattr(world.store.embedder, "unit_norm", False):
                ev = vec.copy()  # every |x_i| <= 1 already (unit_norm): the clip below would copy it
            else:
                ev = np.minimum(vec, 1.0, dtype=np.float32)  # a unit vector; the clip only guards rounding
                np.maximum(ev, -1.0, out=ev)
            kind = self._kinds[event.kind].copy()
            text = event.text
        fb = self._features
        index = event.index if event is not None else (self.config.horizon or self._steps)
        self._ids = fb.build(world, vec, text, index, self._last_invalid)
        self._compute_masks(event is not None)
        return {
            "event": ev,
            "event_kind": kind,
            "candidates": fb.candidates.flatten(),  # (a copy, row-major)
            "candidate_mask": fb.mask.copy(),
            "store": fb.store.copy(),
        }

    def _embed(self, text: str) -> np.ndarray:
        """The event's unit embedding, computed once per event by the world (``World.event_vector``,
        which its candidate selection uses too)."""
        vector = getattr(self.world, "event_vector", None)
        if vector is not None:
            return vector()
        store = self.world.store
        embedder = getattr(store, "embedder", None)
        if embedder is None:
            return store.embed(text)
        vec = np.asarray(embedder.encode(text), dtype=np.float32)
        return vec if vec.ndim == 1 and vec.shape[0] == self.embed_dim else store.embed(text)

    def _compute_masks(self, live: bool) -> None:
        """The flat mask (a shared read-only array), from what the features just counted (the rules of
        :func:`valid_rows`: the candidates are live memories); the (7, K) pair matrix is built only
        when asked for."""
        fb = self._features
        m = len(self._ids)
        if not live:
            self._full = None
            key = (None, m)
        else:
            world = self.world
            full = self._full = len(world.store) >= world.config.capacity
            key = (True, m) if full else (False, fb.n_current > 0, fb.n_episodes > 0, m)
        self._pair_stale = True
        cache = self._mask_cache
        if cache is None:  # (an env pickled before the cache existed)
            cache = self._mask_cache = {}
        mask = cache.get(key)
        if mask is None:  # a few dozen distinct masks per env: each built once
            k = self.K
            n = max(m, 1)
            slots = [True] * n + [False] * (k - n)
            some = m > 0
            if not live:
                flags = [True, False, False, False, False, False, False]
            elif full:  # no creating op: only FORGET targets
                flags = [True, False, False, False, False, True, some]
            else:  # NOOP, WRITE, UPDATE (a newest version), LINK, REFLECT (an episode), QUERY, FORGET
                flags = [True, True, key[1], some, key[2], True, some]
            mask = cache[key] = np.array(flags + slots, dtype=bool)
            mask.setflags(write=False)  # shared by every step with these flags: handed out as copies
        self._mask = mask

    def _valid_rows(self) -> tuple | None:
        """:func:`valid_rows` of the observed step, read from the observation's own numbers (the store
        was full or not, the candidates' superseded and semantic columns); None after the last event."""
        if "_full" not in self.__dict__:  # an env pickled before _full existed kept its rows
            return self.__dict__.get("_rows")
        full = self._full
        if full is None:
            return None
        m = len(self._ids)
        forget = [True] * m  # (candidates are live memories)
        if full:
            no = [False] * m
            return False, no, no, no, forget
        rows = self._features.candidates[:m]
        update = (rows[:, _SUPERSEDED] == 0.0).tolist()
        reflect = (rows[:, _SEMANTIC] == 0.0).tolist()
        return True, update, forget, reflect, forget

    def _pairs(self) -> np.ndarray:
        if self._pair_stale:
            self._pair_stale = False
            pairs_array(self._valid_rows(), self._pair)
        return self._pair




def valid_rows(world: World, ids: list[str], cache: dict | None = None) -> tuple:
    """``(write_ok, update, link, reflect, forget)`` for the current event: the per-slot lists say
    whether ``world.is_valid(op, ids[slot])`` holds (NOOP and QUERY are always valid).

    The same rules as ``World.is_valid`` (capacity for creating ops, a live target, UPDATE only on the
    newest version, REFLECT only on an episode), computed once per step instead of once per pair. A
    test compares this with ``World.is_valid`` pair by pair. Like ``is_valid`` it reads nothing
    hidden: whether a REFLECT target has a cluster is known only after the REFLECT (``World.apply``
    refuses one without a cluster as an invalid action). ``cache``: unused (kept for callers that
    pass one).
    """
    store = world.store
    full = len(store) >= world.config.capacity
    records = getattr(store, "_records", None)  # (store.get is records.get behind a method call)
    get = records.get if isinstance(records, dict) else store.get
    if full or not ids:
        no = [False] * len(ids)
        return not full, no, no, no, [get(mid) is not None for mid in ids]
    forget = []
    update = []
    episodic = store.episodic
    for mid in ids:
        rec = get(mid)
        forget.append(rec is not None)
        update.append(rec is not None and rec.superseded_at is None)
    reflect = [mid in episodic for mid in ids]
    return True, update, forget, reflect, forget


def pairs_array(rows: tuple | None, out: np.ndarray) -> np.ndarray:
    """Fill the (7, K) bool pair matrix from :func:`valid_rows` (None: the episode is over, only NOOP).
    Untargeted ops (NOOP, WRITE, QUERY) go on slot 0 only."""
    out.fill(False)
    out[Op.NOOP, 0] = True
    if rows is None:
        return out
    write_ok, update, link, reflect, forget = rows
    m = len(forget)
    out[Op.WRITE, 0] = write_ok
    out[Op.QUERY, 0] = True
    if m:
        out[Op.UPDATE, :m] = update
        out[Op.LINK, :m] = link
        out[Op.REFLECT, :m] = reflect
        out[Op.FORGET, :m] = forget
    return out


def valid_pairs(world: World, ids: list[str], out: np.ndarray, cache: dict | None = None) -> np.ndarray:
    """``out[op, slot] = world.is_valid(op, ids[slot])`` as a (7, K) bool matrix (see :func:`valid_rows`)."""
    return pairs_array(valid_rows(world, ids, cache), out)
