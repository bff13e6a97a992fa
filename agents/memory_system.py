"""Score an external memory library on memgym's worlds through a three-method adapter.

The ``MemorySystem`` protocol is what a memory library (Mem0, Zep, Letta, your own) needs to offer::

    class MemorySystem(Protocol):
        def add(self, text: str, metadata: dict) -> AddResult: ...
        def search(self, query: str, k: int) -> list[dict]: ...      # [{"id", "text", "score"}, ...]
        def delete(self, id: str) -> bool: ...    # False (or 0): not deleted; True / None / a report: deleted
        # optional: def reset(self) -> None, or reset(self, seed) (called at the start of every episode,
        #           with the episode's seed given to a parameter named `seed`; without reset() the
        #           adapter builds a fresh system for every episode: the factory is called again)

``add`` returns what the library decided for the new text, in Mem0's shape: a list of
``{"id": ..., "event": "ADD" | "UPDATE" | "DELETE" | "NONE"}`` (or ``{"results": [...]}``, as
``mem0.Memory.add`` returns, or one such dict), or simply the new id as a ``str`` (an ADD) or
``None`` (nothing stored). ``search`` returns a list of hits ``{"id": ..., "text": ..., "score": ...}``
(only ``"id"`` is required), best first, or ``{"results": [...]}`` (``mem0.Memory.search``). Ids
are strings or integers (``int``, numpy integers; not ``bool``), passed to ``delete`` as ``str``. Any other return value (``True``, ``5``, a tuple, ``None`` from ``search``, a
hit without ``"id"``) is a :class:`MemorySystemError` (a ``ValueError``) naming the method, the value
and the accepted shapes: a tuple such as ``("m1", "UPDATE")`` is refused rather than guessed at.

:class:`MemorySystemAgent` drives a world with it: every statement goes to ``add`` and the
library's decision becomes the world operation (ADD -> WRITE, UPDATE -> UPDATE of the mirrored
memory, DELETE -> FORGET, NONE -> NOOP); an erasure request is ``search`` + ``delete`` of the best
hit (-> FORGET); a question is passed to ``search`` and answered with QUERY. The world thus mirrors
what the library keeps, and its fixed reader grades the answers: the score measures the library's
memory *management* (what it stores, updates and deletes) on the same worlds and seeds as every
other agent. One operation per event: a DELETE that comes with an ADD is carried out at the next
event where the library stores nothing; a target must be among the env's K candidates, otherwise
UPDATE falls back to WRITE and FORGET waits. The world merges a repeated text into the memory that
already holds it, so two library ids can be mirrored by one world memory (a library that replaces a
repeat by a new id, say): a DELETE of one of them FORGETs that memory only when no other live library
id maps to it or to another version of its chain (a FORGET erases the whole chain), otherwise it drops
only that id's mirror (the library still holds the text); and an UPDATE of such a shared memory is
written as a new memory, so that the other id's text is not marked outdated.

What the library sees and what counts: ``add(text, metadata)`` gets each statement's text with
``metadata = {"step": ..., "session": ..., "kind": "statement"}`` (questions and requests never reach
``add``); a question's ``search`` uses ``k`` (5 by default) and its hits are only checked for their
shape: the world's fixed reader answers from its own retrieval over the mirror, so a library's
ranking does not change its score, and the world stores the event's own text (a library's rewritten
or merged memory text is never what is graded). When one ``add`` reports several decisions, one is
mirrored: an UPDATE of a mirrored memory that is among the candidates, else an ADD, else an UPDATE of
a memory the world does not hold (written as new); DELETEs wait for a free event. The mirror lives
under the world's rules: a WRITE beyond capacity is refused and ACT-R sweeps drop decayed memories,
and the library is not told. A system that draws random numbers must seed itself from
``reset(seed)`` for an episode to stay a pure function of its seed.

:class:`TinyMemorySystem` is a small reference implementation (bag of words, Mem0-like ADD /
UPDATE / NONE decisions) used by the tests and as a template; ``memgym bench --agents tiny_memory``
runs it, and ``--agents memsys:package.module:factory`` runs any importable factory.
"""

from __future__ import annotations

import copy
import importlib
import os
import re
import sys
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from agents.base import FORGET, NOOP, QUERY, UPDATE, WRITE, BaseAgent, register_agent


@runtime_checkable
class MemorySystem(Protocol):
    def add(self, text: str, metadata: dict) -> Any: ...

    def search(self, query: str, k: int) -> list[dict] | dict: ...

    def delete(self, id: str) -> bool: ...


class MemorySystemError(ValueError):
    """A :class:`MemorySystem` returned a value of a shape the adapter does not accept (a user error:
    ``memgym bench`` reports it as ``memgym bench: error: ...`` naming the agent, world and seed)."""


_EVENTS = ("ADD", "UPDATE", "DELETE", "NONE")
ADD_SHAPES = ("a list of {'id': ..., 'event': 'ADD' | 'UPDATE' | 'DELETE' | 'NONE'} dicts (Mem0's shape; a "
              "missing 'event' means ADD), {'results': [that list]} (what mem0.Memory.add returns), one such "
              "dict, the new id as a str (an ADD), or None (nothing stored)")
SEARCH_SHAPES = ("a list of hits {'id': ..., 'text': ..., 'score': ...} (only 'id' is required), best first, or "
                 "{'results': [that list]} (what mem0.Memory.search returns); [] when nothing matches")


def _show(value: Any, n: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= n else text[: n - 3] + "..."


def _id(value: Any, method: str, item: Any, shapes: str) -> str:
    """An id as the ``str`` that ``delete`` gets: a non-empty str, or any integer (numpy's too, as FAISS-style
    libraries return them) as ``str(int(value))``; a bool is no id (True would read as "1")."""
    import numbers

    if isinstance(value, str) and value:
        return value
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return str(int(value))
    raise MemorySystemError(f"MemorySystem.{method} returned an item whose 'id' is {_show(value)} (an id is a "
                            f"non-empty str or an integer: int or a numpy integer, not a bool), in {_show(item)}; "
                            f"allowed: {shapes}")


def _events(result: Any) -> list[tuple[str, str]]:
    """Normalise what ``MemorySystem.add`` returned to [(id, EVENT)]; MemorySystemError for any other shape."""
    def bad(why: str) -> MemorySystemError:
        return MemorySystemError(f"MemorySystem.add returned {_show(result)}: {why}; allowed: {ADD_SHAPES}")

    if result is None:
        return []
    if isinstance(result, str):
        return [(_id(result, "add", result, ADD_SHAPES), "ADD")]
    items = result
    if isinstance(result, dict):
        if "results" in result:
            items = result["results"]
            if not isinstance(items, list):
                raise bad(f"its 'results' is a {type(items).__name__}, not a list")
        elif "id" in result:
            items = [result]
        else:
            raise bad("a dict with neither 'id' nor 'results'")
    elif isinstance(result, tuple):
        raise bad("a tuple is ambiguous (one (id, event) pair, or several ids?); return a list of "
                  "{'id', 'event'} dicts")
    elif not isinstance(result, list):
        raise bad(f"type {type(result).__name__} is none of these shapes")
    out = []
    for item in items:
        if isinstance(item, str):
            out.append((_id(item, "add", item, ADD_SHAPES), "ADD"))
            continue
        if not isinstance(item, dict):
            raise bad(f"an item {_show(item)} is a {type(item).__name__}, not an {{'id', 'event'}} dict or an id")
        if "id" not in item:
            raise bad(f"an item {_show(item)} has no 'id'")
        event = item.get("event", "ADD")
        if not isinstance(event, str) or event.upper() not in _EVENTS:
            raise bad(f"an item's 'event' is {_show(event)}, not one of {', '.join(_EVENTS)}")
        out.append((_id(item["id"], "add", item, ADD_SHAPES), event.upper()))
    return out


def _hits(result: Any) -> list[str]:
    """The ids of what ``MemorySystem.search`` returned, best first; MemorySystemError for any other shape."""
    def bad(why: str) -> MemorySystemError:
        return MemorySystemError(f"MemorySystem.search returned {_show(result)}: {why}; allowed: {SEARCH_SHAPES}")

    items = result
    if isinstance(result, dict):
        if "results" not in result:
            raise bad("a dict without 'results'")
        items = result["results"]
        if not isinstance(items, list):
            raise bad(f"its 'results' is a {type(items).__name__}, not a list")
    elif not isinstance(result, list):
        raise bad(f"type {type(result).__name__} is not a list of hits")
    ids = []
    for hit in items:
        if not isinstance(hit, dict):
            raise bad(f"a hit {_show(hit)} is a {type(hit).__name__}, not a dict with an 'id'")
        if "id" not in hit:
            raise bad(f"a hit {_show(hit)} has no 'id' (the id that delete() takes)")
        ids.append(_id(hit["id"], "search", hit, SEARCH_SHAPES))
    return ids


class MemorySystemAgent(BaseAgent):
    """Mirror a :class:`MemorySystem`'s decisions as world operations (see the module docstring)."""

    name = "memory_system"
    # A copy of the agent copies a client, not a server's memories: improve's rollout branches (which copy
    # the agent) would run on, and write into, the library's end-of-episode state. Not declared copyable.
    copyable = False

    def __init__(self, system: MemorySystem, k: int = 5, name: str | None = None,
                 factory: Callable[[], MemorySystem] | None = None) -> None:
        super().__init__()
        if isinstance(system, type):  # (its unbound methods are callable: it passed the check below, then
            # the first episode failed on reset() missing 'self')
            raise TypeError(f"got the class {system.__name__}, not an instance: pass {system.__name__}()")
        missing = [m for m in ("add", "search", "delete") if not callable(getattr(system, m, None))]
        if missing:
            raise TypeError(f"{type(system).__name__} is not a MemorySystem: missing method(s) {missing}")
        self.system = system
        self.k = k
        if name:
            self.name = name
        # A system without reset() is rebuilt for every episode after the first: memories must not
        # leak from one episode into the next (an episode is a pure function of its seed).
        self._factory = factory
        self._template: MemorySystem | None = None
        if not callable(getattr(system, "reset", None)) and factory is None:
            try:
                self._template = copy.deepcopy(system)
            except Exception as exc:  # noqa: BLE001 - whatever deepcopy trips on
                raise TypeError(f"{type(system).__name__} has no reset() and cannot be copied ({exc!r}): give "
                                "it a reset() or pass factory= (a callable building a fresh system)") from exc
        self._fresh = True  # the system has not played an episode yet
        self._to_world: dict[str, str] = {}   # system id -> world memory id
        # world memory id -> the live system ids mirrored by it: the world merges a repeated text into the
        # memory that holds it (info["memory_id"] is then the old id), so two system ids can share one
        self._by_world: dict[str, set[str]] = {}
        self._pending: str | None = None       # system id waiting for the world id of the last write
        self._deletes: list[str] = []          # system deletions not yet mirrored

    def reset(self, seed: int | None) -> None:
        super().reset(seed)
        if callable(getattr(self.system, "reset", None)):
            how = _seed_parameter(self.system.reset)  # (a system drawing random numbers seeds itself per episode)
            if how == "keyword":
                self.system.reset(seed=seed)
            elif how == "positional":
                self.system.reset(seed)
            else:
                self.system.reset()
        elif not self._fresh:  # no reset(): a fresh system from the factory (or the pristine copy)
            self.system = self._factory() if self._factory is not None else copy.deepcopy(self._template)
        self._fresh = False
        self._to_world, self._by_world, self._pending, self._deletes = {}, {}, None, []

    def _map(self, system_id: str, world_id: str) -> None:
        self._unmap(system_id)
        self._to_world[system_id] = world_id
        self._by_world.setdefault(world_id, set()).add(system_id)

    def _unmap(self, system_id: str) -> None:
        wid = self._to_world.pop(system_id, None)
        if wid is not None:
            sharing = self._by_world.get(wid, set())
            sharing.discard(system_id)
            if not sharing:
                self._by_world.pop(wid, None)

    def _slot(self, system_id: str) -> int | None:
        wid = self._to_world.get(system_id)
        return None if wid is None else self.view.slot_of(wid)

    def act(self, observation: Any, info: dict) -> Any:
        # the world id created by our previous WRITE/UPDATE arrives in this step's info
        if self._pending is not None:
            if info.get("memory_id"):
                self._map(self._pending, info["memory_id"])
            self._pending = None
        return super().act(observation, info)

    def decide(self, observation: Any, info: dict) -> tuple[int, int]:
        if self.view is None:
            raise RuntimeError("MemorySystemAgent needs attach(view) (agents.bench does it every episode)")
        ev = self.view.event
        if ev.kind == "question":
            _hits(self.system.search(ev.text, self.k))  # checked: the world's reader answers from the mirror
            return QUERY, 0
        if ev.kind == "request":
            for sid in _hits(self.system.search(ev.text, 1))[:1]:  # the best hit only, even if k is ignored
                if _deleted(self.system.delete(sid)):
                    self._deletes.append(sid)
            return self._flush_delete()
        events = _events(self.system.add(ev.text, {"step": ev.step, "session": ev.session, "kind": ev.kind}))
        for sid, e in events:
            if e == "DELETE":
                self._deletes.append(sid)
            elif sid in self._deletes:  # stored again (a content-hash id, a recycled slot): not deleted
                self._deletes.remove(sid)
        # one world operation per event, and the world stores this event's text: an UPDATE of a mirrored
        # memory the env offers as a target first, then an ADD, then an UPDATE of a memory the world
        # does not hold (written as new); the other decisions of the same add() are not mirrored
        fallback = None
        for sid, e in events:
            if e == "UPDATE":
                slot = self._slot(sid)
                # a world memory another live id mirrors is not superseded (the library keeps that
                # id's text as it is): the new text is written as a memory of its own
                shared = len(self._by_world.get(self._to_world.get(sid, ""), ())) > 1
                if slot is not None and not shared and self.view.valid(UPDATE, slot):
                    self._pending = sid
                    return UPDATE, slot
                fallback = fallback or sid
        for sid, e in events:
            if e == "ADD":
                self._pending = sid
                return WRITE, 0
        if fallback is not None:
            self._pending = fallback
            return WRITE, 0
        return self._flush_delete()

    def _shared_chain(self, system_id: str) -> bool:
        """Whether a FORGET of ``system_id``'s world memory would erase a memory another live system id
        mirrors: the memory itself or another version of its chain (the world's FORGET is a hard
        erasure of the whole chain; a repeat merged into a superseded version maps there too)."""
        wid = self._to_world[system_id]
        return any(other != system_id for w in self.view.chain(wid) for other in self._by_world.get(w, ()))

    def _flush_delete(self) -> tuple[int, int]:
        for sid in list(self._deletes):
            if sid not in self._to_world:  # never mirrored: nothing to erase in the world
                self._deletes.remove(sid)
                continue
            if self.view.get(self._to_world[sid]) is None:  # swept or erased already
                self._deletes.remove(sid)  # (else the queue grows with every such id on long runs)
                self._unmap(sid)
                continue
            if self._shared_chain(sid):  # another live system id mirrors that memory or its version chain
                self._deletes.remove(sid)  # (a FORGET erases the whole chain): the system still holds that
                self._unmap(sid)           # text, so the world keeps it too and only this mirror goes
                continue
            slot = self._slot(sid)
            if slot is not None and self.view.valid(FORGET, slot):
                self._deletes.remove(sid)
                self._unmap(sid)
                return FORGET, slot
        return NOOP, 0


def _seed_parameter(method: Callable) -> str | None:
    """How ``reset`` takes the episode's seed, by its signature: only a parameter named ``seed`` gets it
    ("keyword"; "positional" when it is positional-only; Gymnasium's ``reset(*, seed=None)`` included).
    Anything else (``reset(self)``, ``reset(self, hard=False)``, ``reset(*args, **kw)`` of a proxy, no
    signature) is called without arguments: a seed passed to another parameter would change what it
    means (``hard=10001``) or reach an inner ``reset()`` that takes none."""
    import inspect

    try:
        sig = inspect.signature(method)
    except (TypeError, ValueError):
        return None
    seed = sig.parameters.get("seed")
    if seed is None or seed.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
        return None
    return "positional" if seed.kind is inspect.Parameter.POSITIONAL_ONLY else "keyword"


def _deleted(result: Any) -> bool:
    """What ``delete`` returned, read as "deleted": False or 0 (numpy's too) = not deleted; True, None
    (many clients return nothing) or a report (a dict, ...) = deleted."""
    import numbers

    if result is None:
        return True
    if isinstance(result, (bool, numbers.Number)) or type(result).__module__ == "numpy":
        try:
            return bool(result)
        except (TypeError, ValueError):  # (an array: ambiguous; a report of some kind)
            return True
    return True


_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("a an the of to in on at is are was were be been and or but my your his her their its it "
                  "i you he she we they that this for with by as from".split())


class TinyMemorySystem:
    """Reference MemorySystem: bag-of-words memories with Mem0-like decisions.

    ``add``: an identical text (normalised) -> NONE; a text sharing a capitalised word (the subject)
    and at least ``update_overlap`` of its content words with a stored memory -> UPDATE of that
    memory (text replaced); otherwise ADD. ``search`` ranks by the number of shared content words.
    Ids are counters (``m1``, ``m2``, ...), so runs are deterministic.
    """

    def __init__(self, update_overlap: float = 0.5) -> None:
        self.update_overlap = update_overlap
        self.reset()

    def reset(self) -> None:
        self.memories: dict[str, str] = {}
        self._n = 0

    @staticmethod
    def _words(text: str) -> set[str]:
        return {w for w in _WORD.findall(text.lower()) if w not in _STOP}

    @staticmethod
    def _subjects(text: str) -> set[str]:
        return {w.lower() for w in re.findall(r"\b[A-Z][a-z]+", text)}

    def add(self, text: str, metadata: dict) -> list[dict]:
        norm = " ".join(text.lower().split())
        words, subj = self._words(text), self._subjects(text)
        best, best_ov = None, 0.0
        for mid, old in self.memories.items():
            if " ".join(old.lower().split()) == norm:
                return [{"id": mid, "event": "NONE"}]
            if subj & self._subjects(old) and words:
                ov = len(words & self._words(old)) / len(words)
                if ov >= self.update_overlap and ov > best_ov:
                    best, best_ov = mid, ov
        if best is not None:
            self.memories[best] = text
            return [{"id": best, "event": "UPDATE"}]
        self._n += 1
        mid = f"m{self._n}"
        self.memories[mid] = text
        return [{"id": mid, "event": "ADD"}]

    def search(self, query: str, k: int) -> list[dict]:
        q = self._words(query)
        scored = [(len(q & self._words(t)), mid, t) for mid, t in self.memories.items()]
        scored = [s for s in scored if s[0] > 0]
        scored.sort(key=lambda s: (-s[0], s[1]))
        return [{"id": mid, "text": t, "score": float(n)} for n, mid, t in scored[:k]]

    def delete(self, id: str) -> bool:
        return self.memories.pop(id, None) is not None


@register_agent("tiny_memory", "the reference MemorySystem (bag of words, Mem0-like) through the adapter")
def tiny_memory_agent(**kwargs: Any) -> MemorySystemAgent:
    agent = MemorySystemAgent(TinyMemorySystem(**kwargs), name="tiny_memory")
    # its memories are a dict in this process: a deep copy branches faithfully (an arbitrary system,
    # e.g. a client of a memory server, is not declared copyable: MemorySystemAgent.copyable is False)
    agent.copyable = True
    return agent


def _import_user_module(spec: str, mod_name: str) -> Any:
    """Import the module of a ``memsys:`` spec with the current folder on ``sys.path``.

    ``python -m agents.cli`` has the current folder on ``sys.path`` but the ``memgym`` console script
    has its ``bin/`` folder there instead; like uvicorn and pytest, the current folder is put first on
    ``sys.path`` (once) so that ``memsys:mypkg.adapter:make_system`` imports ``./mypkg/adapter.py``
    either way. Bench workers build their agents through here too, so they import it the same way.
    """
    cwd = os.getcwd()
    on_path = {os.path.realpath(p or os.curdir) for p in sys.path}
    if os.path.realpath(cwd) not in on_path:
        sys.path.insert(0, cwd)
        importlib.invalidate_caches()
    try:
        return importlib.import_module(mod_name)
    except ModuleNotFoundError as exc:
        if exc.name and (mod_name == exc.name or mod_name.startswith(exc.name + ".")):
            raise ValueError(f"agent {spec!r}: cannot import module {mod_name!r} ({exc}); it must be importable "
                             f"from the current folder ({cwd}) or PYTHONPATH") from exc
        raise ValueError(f"agent {spec!r}: importing module {mod_name!r} failed: {exc} (a module it imports "
                         "is missing)") from exc
    except Exception as exc:  # noqa: BLE001 - the user's module may raise anything while it is imported
        raise ValueError(f"agent {spec!r}: importing module {mod_name!r} raised {exc!r}") from exc


def memory_system_agent(spec: str, **kwargs: Any) -> MemorySystemAgent:
    """``memsys:package.module:factory`` -> MemorySystemAgent(factory(**kwargs))."""
    target = spec.split(":", 1)[1]
    if ":" not in target:
        raise ValueError(f"agent {spec!r}: expected memsys:package.module:factory")
    mod_name, attr = target.split(":", 1)
    module = _import_user_module(spec, mod_name)
    try:
        factory = getattr(module, attr)
    except AttributeError:
        raise ValueError(f"agent {spec!r}: module {mod_name} ({getattr(module, '__file__', '?')}) has no "
                         f"attribute {attr!r}") from None
    if not callable(factory):
        raise ValueError(f"agent {spec!r}: {mod_name}:{attr} is a {type(factory).__name__}, not a factory "
                         "(a callable returning a MemorySystem)")

    def build() -> Any:
        try:
            system = factory(**kwargs)
        except Exception as exc:  # noqa: BLE001 - the user's factory may raise anything
            raise ValueError(f"agent {spec!r}: the factory {mod_name}:{attr}() raised {exc!r}") from exc
        if isinstance(system, type):  # a class's add/search/delete are callable functions: checked first
            raise ValueError(f"agent {spec!r}: {mod_name}:{attr}() returned the class {system.__name__}, not an "
                             f"instance: return {system.__name__}() (a MemorySystem object)")
        missing = [m for m in ("add", "search", "delete") if not callable(getattr(system, m, None))]
        if missing:
            raise ValueError(f"agent {spec!r}: {mod_name}:{attr}() returned a {type(system).__name__}, not a "
                             f"MemorySystem: missing method(s) {missing} (a MemorySystem has add, search, "
                             "delete and optionally reset)")
        return system

    return MemorySystemAgent(build(), name=spec, factory=build)
