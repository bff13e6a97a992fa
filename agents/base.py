"""The agent protocol and the registry of agents.

An agent maps what the Gymnasium env gives it to one action per event::

    agent.reset(seed)                        # once per episode, before the first act
    agent.attach(view)                       # optional: heuristic agents get a read-only view
    action = agent.act(observation, info)    # np.ndarray([op, slot]) for MultiDiscrete([7, K]),
                                             # or envs.memory_env.InvalidAction(reason)

``observation`` and ``info`` are exactly what ``MemoryEnv.reset`` / ``MemoryEnv.step`` return
(docs/DESIGN.md). An ``InvalidAction`` is an action the agent's own action space has but the env's
does not (a flat-action model's masked alias, ``envs.wrappers.unflatten_action``): the env plays it
as a penalised no-op. ``info["action_mask"]`` is the flat mask of length ``n_ops + K`` that sb3-contrib's
MaskablePPO reads: the first ``n_ops`` entries say which operations are allowed, the last ``K`` which
candidate slots hold a memory.

``attach(view)`` hands a heuristic agent an :class:`AgentView`: the current event's text and kind,
the candidate memories' ids and contents, and read-only store queries (similarity, ACT-R
activation, live count). It never exposes the hidden payloads of events or memories: those are for
the grader and the privileged oracle only (:mod:`agents.oracle`).

Agents are built by name through :func:`make_agent`; ``sb3:PATH`` loads a trained
Stable-Baselines3 model (:mod:`agents.sb3_agent`).
"""

from __future__ import annotations

import importlib
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

# Operation numbers of world.Op (docs/DESIGN.md). Kept here as plain ints so that agents can be
# imported, and their rules read, without building a world.
NOOP, WRITE, UPDATE, LINK, REFLECT, QUERY, FORGET = range(7)
N_OPS = 7
OP_NAMES = ("NOOP", "WRITE", "UPDATE", "LINK", "REFLECT", "QUERY", "FORGET")
TARGETED = frozenset({UPDATE, LINK, REFLECT, FORGET})
EVENT_KINDS = ("statement", "question", "request")


@runtime_checkable
class Agent(Protocol):
    """What the benchmark drives. ``name`` labels rows of results.json."""

    name: str

    def reset(self, seed: int | None) -> None: ...

    def act(self, observation: Any, info: dict) -> np.ndarray: ...


class BaseAgent:
    """Convenience base: seeded RNG, view bookkeeping and mask helpers.

    Subclasses implement :meth:`decide` returning ``(op, slot)``; :meth:`act` turns it into the
    env's action and falls back to NOOP when the choice is masked (a heuristic never sends an
    invalid action on purpose).
    """

    name = "base"
    #: True for agents that read hidden payloads (only the oracle); the bench attaches the world.
    privileged = False
    #: True declares that ``copy.deepcopy`` of the agent mid-episode gives an independent agent that plays
    #: on exactly as the original would (all its state is in-process Python objects). The rollout
    #: improvement of the warm start (``pretrain.improve: rollout``, :mod:`agents.improve`) branches
    #: by such copies and refuses an agent that does not declare it: a copy of a client of a memory
    #: server would share (and write into) the server's memories, or fail to copy at all.
    copyable = False

    def __init__(self) -> None:
        self.view: AgentView | None = None
        self.rng = np.random.default_rng(0)

    def reset(self, seed: int | None) -> None:
        self.rng = np.random.default_rng(seed)

    def attach(self, view: AgentView) -> None:
        self.view = view

    # -- helpers -----------------------------------------------------------------------------
    @staticmethod
    def masks(info: dict, n_slots: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Split ``info["action_mask"]`` into (op mask (7,), slot mask (K,)) booleans."""
        mask = np.asarray(info["action_mask"], dtype=bool)
        return mask[:N_OPS], mask[N_OPS:]

    def decide(self, observation: Any, info: dict) -> tuple[int, int]:
        raise NotImplementedError

    def act(self, observation: Any, info: dict) -> np.ndarray:
        op, slot = self.decide(observation, info)
        op_mask, slot_mask = self.masks(info)
        if not op_mask[op] or (op in TARGETED and not (0 <= slot < len(slot_mask) and slot_mask[slot])):
            op, slot = NOOP, 0
        elif self.view is not None and not self.view.valid(op, slot):
            op, slot = NOOP, 0
        if op not in TARGETED:
            slot = 0
        return np.array([op, max(slot, 0)], dtype=np.int64)


@dataclass(frozen=True)
class Candidate:
    """One filled candidate slot as a heuristic agent sees it: id, text and the observation's features."""

    slot: int
    memory_id: str
    text: str
    similarity: float      # cosine(event, memory)
    activation: float      # ACT-R base level squashed to (0, 1); 0.5 = at the forget threshold
    importance: float
    age: float             # steps since written (decoded from the log-scaled feature)
    semantic: bool         # a REFLECT rule
    recent: bool           # among the most recently written
    superseded: bool       # a newer version exists
    cue_overlap: float
    links: float


class AgentView:
    """Read-only window on the world for heuristic agents: no payloads, no bumping.

    Built by the bench from the env after every reset and step; it wraps what
    ``env.unwrapped.agent_view()`` returns (docs/DESIGN.md: the world's read-only ``WorldView`` plus
    the candidate ids) and adds the candidate slots decoded from the observation. Attributes it does
    not define fall through to the world's view.
    """

    def __init__(self, env: Any) -> None:
        self._env = env.unwrapped if hasattr(env, "unwrapped") else env
        self._world_view: Any = None
        self._candidate_ids: list[str | None] = []
        self._contents: list[str] = []
        self.refresh()

    def refresh(self) -> None:
        """Re-read the env's current view (the bench calls it before every ``act``)."""
        got = self._env.agent_view()
        if isinstance(got, tuple):
            got, ids = got
        else:
            ids = getattr(got, "candidate_ids", None)
        self._world_view = got
        self._candidate_ids = [i if i else None for i in (ids or [])]
        self._contents = list(getattr(got, "candidate_contents", ()) or ())

    # -- the current event ----------------------------------------------------------------------
    @property
    def event(self) -> Any:
        return self._world_view.event

    @property
    def text(self) -> str:
        return self.event.text

    @property
    def kind(self) -> str:
        return self.event.kind

    @property
    def capacity(self) -> int:
        return int(self._env.config.capacity)

    @property
    def n_live(self) -> int:
        """Live memories in the store (a count: no contents, no payloads)."""
        return len(self._env.world.store)

    # -- candidates ------------------------------------------------------------------------------
    @property
    def candidate_ids(self) -> list[str | None]:
        return list(self._candidate_ids)

    def slot_of(self, memory_id: str) -> int | None:
        try:
            return self._candidate_ids.index(memory_id)
        except ValueError:
            return None

    def valid(self, op: int, slot: int = 0) -> bool:
        """Would ``[op, slot]`` be a valid action now (the env's per-pair mask: visible rules; a REFLECT
        without a cluster passes it and is refused when made)?"""
        pairs = getattr(self._env, "action_mask_pairs", None)
        if pairs is None:
            return True
        return bool(pairs()[op, slot if op in TARGETED else 0])

    def pair_mask(self) -> np.ndarray:
        """(7, K) bool of valid ``[op, slot]`` pairs (``env.action_mask_pairs()``)."""
        return np.asarray(self._env.action_mask_pairs(), dtype=bool)

    def candidates(self, observation: dict) -> list[Candidate]:
        """The filled slots, decoded from ``observation["candidates"]`` (K x F, envs.features)."""
        from envs import features as F

        k = len(observation["candidate_mask"])
        feats = np.asarray(observation["candidates"], dtype=np.float64).reshape(k, -1)
        col = {name: i for i, name in enumerate(F.CANDIDATE_FEATURES)}
        log_cap = math.log1p(F.AGE_CAP)
        out = []
        for slot, mid in enumerate(self._candidate_ids):
            if mid is None or slot >= k or not observation["candidate_mask"][slot]:
                continue
            row = feats[slot]
            text = self._contents[slot] if slot < len(self._contents) else ""
            out.append(Candidate(
                slot=slot, memory_id=mid, text=text,
                similarity=float(row[col["similarity"]]), activation=float(row[col["activation"]]),
                importance=float(row[col["importance"]]),
                age=float(math.expm1(row[col["age"]] * log_cap)),
                semantic=bool(row[col["semantic"]] > 0.5), recent=bool(row[col["recent"]] > 0.5),
                superseded=bool(row[col["superseded"]] > 0.5), cue_overlap=float(row[col["cue_overlap"]]),
                links=float(row[col["links"]]),
            ))
        return out

    def __getattr__(self, name: str) -> Any:
        # Anything else the world's read-only view offers.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._world_view, name)


# ---------------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------------

_REGISTRY: dict[str, tuple[Callable[..., Agent], str]] = {}
#: memgym's own agent modules: importing them registers the built-in agents (in any process)
_BUILTIN_MODULES = ("agents.baselines", "agents.memory_system", "agents.oracle")
#: the names whose current entry was registered by code outside ``_BUILTIN_MODULES`` (a user's script,
#: its ``__main__``, a test): a spawned bench worker imports only memgym's modules, so it is sent these
_RUNTIME: set[str] = set()


def register_agent(name: str, summary: str = "") -> Callable:
    """Class decorator: ``@register_agent("fifo", "one-line rule")``. A name registered again is replaced.

    A registration made outside memgym's own agent modules (``runtime_registrations``) is sent to the
    benchmark's spawned worker processes, so its factory must pickle (a class or function defined at the
    top level of a module)."""
    # (who registers: memgym's agent modules, at import, or anyone else, at run time)
    caller = sys._getframe(1).f_globals.get("__name__")

    def deco(factory: Callable[..., Agent]) -> Callable[..., Agent]:
        doc = summary
        if not doc and factory.__doc__:
            doc = factory.__doc__.strip().splitlines()[0]
        _REGISTRY[name] = (factory, doc)
        if caller in _BUILTIN_MODULES:
            _RUNTIME.discard(name)
        else:
            _RUNTIME.add(name)
        return factory

    return deco


def _load_builtin() -> None:
    # Importing the modules runs their @register_agent decorators.
    for module in _BUILTIN_MODULES:
        importlib.import_module(module)


def runtime_registrations() -> dict[str, tuple[Callable[..., Agent], str]]:
    """The registry entries made at run time, outside memgym's own agent modules (``register_agent`` in a
    user's script or a test), as ``{name: (factory, summary)}`` in registry order: what a fresh process
    that imports memgym lacks."""
    _load_builtin()
    return {name: entry for name, entry in _REGISTRY.items() if name in _RUNTIME}


def agent_names() -> list[str]:
    """Registered agent names in registry order (``sb3:PATH`` is accepted on top of these)."""
    _load_builtin()
    return list(_REGISTRY)


def agent_summaries() -> dict[str, str]:
    _load_builtin()
    return {k: v[1] for k, v in _REGISTRY.items()}


#: Agents that accept ``[-OP,...]`` (the ablation: ``disabled_ops``).
ABLATABLE = ("oracle",)


def parse_agent_spec(spec: str) -> tuple[str, dict]:
    """``"oracle"`` -> ("oracle", {}); ``"oracle[-UPDATE,-FORGET]"`` -> ("oracle", {"disabled_ops": ...}).

    The bracket form is how ablated oracles are named in results (``oracle[-LINK]``), spelled as
    :func:`canonical_agent_spec` writes it; any spelling parses (results written before names were
    canonical still replay).
    """
    spec = spec.strip()
    if spec.startswith(("sb3:", "memsys:")):
        return spec, {}
    if "[" in spec and spec.endswith("]"):
        base, inner = spec[:-1].split("[", 1)
        base = base.strip()
        if base not in ABLATABLE:
            raise ValueError(f"agent spec {spec!r}: [-OP] brackets (an ablation) apply only to "
                             f"{', '.join(ABLATABLE)}, e.g. oracle[-LINK]; {base!r} takes none")
        ops = [t.strip().lstrip("-").upper() for t in inner.split(",") if t.strip()]
        bad = [o for o in ops if o not in OP_NAMES[1:]]
        if bad:
            raise ValueError(f"agent spec {spec!r}: unknown operation(s) {bad}; allowed: {list(OP_NAMES[1:])}")
        return base, {"disabled_ops": tuple(op for op in OP_NAMES[1:] if op in ops)}  # (each once, in order)
    return spec, {}


def canonical_agent_spec(spec: Any) -> Any:
    """The one spelling of an agent spec, the name its rows carry in results.json, the leaderboard and
    replay: spaces stripped; an ablated oracle's operations upper-case, each once, ``-`` prefixed and in
    the order of ``OP_NAMES`` (WRITE, UPDATE, LINK, REFLECT, QUERY, FORGET); no operation at all
    (``oracle[]``) is the plain name. ``oracle[-FORGET, -LINK,-LINK]`` -> ``oracle[-LINK,-FORGET]``.
    ``sb3:`` / ``memsys:`` specs lose only their outer spaces; a spec that does not parse, or is not a
    string, is returned as given (``validate_agent_specs`` reports it)."""
    if not isinstance(spec, str):
        return spec
    text = spec.strip()
    if text.startswith(("sb3:", "memsys:")):
        return text
    try:
        name, extra = parse_agent_spec(text)
    except ValueError:
        return text
    ops = extra.get("disabled_ops", ())  # (parse_agent_spec gives them each once, in OP_NAMES order)
    return f"{name}[{','.join('-' + op for op in ops)}]" if ops else name


def make_agent(spec: str | Agent, **kwargs: Any) -> Agent:
    """Build an agent from its name (``random``, ``write_all``, ..., ``oracle``, ``sb3:PATH``).

    Objects that already implement the protocol are returned unchanged; an unknown name raises
    ``ValueError`` listing the valid names.
    """
    if not isinstance(spec, str):
        if isinstance(spec, Agent):
            return spec
        raise TypeError(f"agent must be a name or an object with reset/act, got {type(spec).__name__}")
    if spec.startswith("sb3:"):
        from agents.sb3_agent import SB3Agent

        path = spec[4:]
        if not path:
            raise ValueError("agent 'sb3:PATH' needs a model path, e.g. sb3:runs/life/model.zip")
        return SB3Agent(path, **kwargs)
    if spec.startswith("memsys:"):
        from agents.memory_system import memory_system_agent

        return memory_system_agent(spec, **kwargs)
    name, extra = parse_agent_spec(spec)
    _load_builtin()
    if name not in _REGISTRY:
        raise ValueError(f"unknown agent {spec!r}; valid agents: {_valid_agents_text()}")
    agent = _REGISTRY[name][0](**{**extra, **kwargs})
    if extra:
        agent.name = canonical_agent_spec(spec)
    return agent


def _valid_agents_text() -> str:
    return ", ".join(agent_names() + ["oracle[-OP,...]", "sb3:PATH", "memsys:MODULE:FACTORY"])


def validate_agent_specs(specs: Sequence[str], envs: Sequence[Any] = ()) -> None:
    """Check every spec before any episode runs: raise ValueError naming the spec and the valid agents.

    Each agent is built once, in this process: a ``memsys:`` factory is called and its object checked
    for add/search/delete, an ``sb3:`` model is loaded and, for each env of ``envs`` (bare
    ``MemoryEnv``), checked against its observation and action spaces (``SB3Agent.check_env``).
    """
    names = agent_names()
    for spec in specs:
        if not isinstance(spec, str):
            raise ValueError(f"agent {spec!r}: expected a name (str); valid agents: {_valid_agents_text()}")
        try:
            if spec.startswith(("sb3:", "memsys:")):
                name = spec
            else:
                name, _ = parse_agent_spec(spec)
        except ValueError as exc:
            raise ValueError(f"{exc}; valid agents: {_valid_agents_text()}") from None
        if not spec.startswith(("sb3:", "memsys:")) and name not in names:
            raise ValueError(f"unknown agent {spec!r}; valid agents: {_valid_agents_text()}")
        try:
            agent = make_agent(spec)
            for env in envs:
                if callable(getattr(agent, "check_env", None)):
                    agent.check_env(env)
        except Exception as exc:  # noqa: BLE001 - a user's factory or model file may raise anything
            msg = str(exc) if repr(spec) in str(exc) else f"agent {spec!r} cannot be used: {exc}"
            raise ValueError(f"{msg}; valid agents: {_valid_agents_text()}") from exc
        del agent
