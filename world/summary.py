"""Rolling summaries: a short-term window of recent turns kept verbatim, older turns folded into a
running summary that lives in the store as a retrievable semantic memory.

The idea is seed 002's ``ConversationMemory`` (keep the last turns verbatim, fold the overflow into
a summary). What changed, because the seed got it wrong for a memory store:

* the summarizer is a protocol with the previous summary and the new turns as separate arguments
  (``summarize(previous_summary, turns) -> str``), not one pre-rendered prompt string, so a
  deterministic extractive summarizer and an LLM one are interchangeable;
* the default summarizer is deterministic and extractive, and every summary is held to a character
  budget (the seed's summary could grow without bound);
* the summary is a semantic memory (``tier="inference"``, confidence < 0.8, ``evidence`` = the ids of
  every turn it folded, one version chain under its key) instead of a private string, so it is
  retrieved, explained and versioned like any other memory;
* the summary remembers which turns went into which fold, so when a turn is erased (the right to be
  forgotten) the summary is rebuilt from the remaining turns and no erased word survives in it;
* its state exports to / imports from JSON, so a saved store keeps its summaries;
* bad arguments and a summarizer that returns something other than ``str`` raise a clear error,
  and a failing summarizer (or a failing write of the summary memory) leaves the window and the
  summary unchanged.

Usage::

    store = MemoryStore()
    rolling = summaries(store, "alice", max_turns=6, keep_recent=4)   # get-or-create, one per namespace
    rolling.add_turn("Alice moved to Lisbon in May.", step=3)          # written as an episode
    rolling.text          # the running summary ("" until the first fold)
    rolling.window        # the verbatim turns, oldest first
    rolling.build_messages("where does Alice live?")                  # summary + window + query

``RollingSummary(store, namespace, ...)`` works too, and either accepts a namespaced view
(``summaries(store.namespace("alice"))``). One instance per namespace lives in
``store.extras["summaries"]``; the store exports their state under ``state["extra"]["summaries"]``
and, through ``MemoryStore.register_extra``, ``_from_state`` / ``load_store`` re-attach them.
Full description: docs/lifecycle.md.
"""

from __future__ import annotations

import inspect
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from world.cues import extract_cues
from world.dedup import signature
from world.memory import _check_step, _check_unicode, _int_at_least, _is_finite_number, _legacy_source

__all__ = [
    "Summarizer",
    "ExtractiveSummarizer",
    "LLMSummarizer",
    "RollingSummary",
    "SummaryRebuildError",
    "Turn",
    "summaries",
    "all_summaries",
    "export_summaries",
    "restore_summaries",
    "SummaryRegistry",
    "SUMMARY_KEY_PREFIX",
    "SUMMARY_HEADER",
]

#: Key of a namespace's summary memory is ``SUMMARY_KEY_PREFIX + namespace``.
SUMMARY_KEY_PREFIX = "summary/"
#: First line of every summary memory's content (the running text follows on the next lines). It says
#: what the memory is to whoever reads it, and keeps the store's dedup from matching the summary
#: against a memory that merely contains the same sentences.
SUMMARY_HEADER = "Summary of earlier turns:"
#: Version of the JSON state written by ``RollingSummary.export_state``.
STATE_VERSION = 1
#: Name under which the rolling summaries are attached to a store (``store.extras[EXTRA_NAME]``) and
#: under which their state is exported (``store._export_state()["extra"][EXTRA_NAME]``).
EXTRA_NAME = "summaries"

_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
_SPACES = re.compile(r"\s+")


# --------------------------------------------------------------------------------------------- #
# Summarizers                                                                                   #
# --------------------------------------------------------------------------------------------- #


@runtime_checkable
class Summarizer(Protocol):
    """Folds new turns into a running summary. Must be deterministic for seeded runs."""

    def summarize(self, previous_summary: str, turns: Sequence[str]) -> str: ...


def split_sentences(text: str) -> list[str]:
    """Split on sentence-final punctuation followed by space, and on newlines; drop empty parts."""
    return [s.strip() for s in _SENTENCE_SPLIT.split(text or "") if s.strip()]


def _clip(text: str, max_chars: int) -> str:
    """Cut ``text`` to at most ``max_chars`` characters, at a word boundary when there is one."""
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars]
    space = cut.rfind(" ")
    return (cut[:space] if space > 0 else cut).rstrip()


def _default_scorer():
    from world.importance import ImportanceScorer

    return ImportanceScorer()


def _is_default_scorer(scorer: Any) -> bool:
    """Whether ``scorer`` scores as the default one (an ``ImportanceScorer`` of default settings),
    which is what a loaded store rebuilds."""
    from world.importance import ImportanceScorer

    return type(scorer) is ImportanceScorer and vars(scorer) == vars(_default_scorer())


def _scorer_name(scorer: Any) -> str:
    """What a saved config calls a scorer it cannot hold: a function's name, else its class's."""
    name = getattr(scorer, "__qualname__", None)
    return name if isinstance(name, str) else type(scorer).__qualname__


def _score(scorer: Any, text: str) -> float:
    if hasattr(scorer, "score"):
        return float(scorer.score(text))
    return float(scorer(text))


class ExtractiveSummarizer:
    """Deterministic extractive summarizer: keeps the most important sentences within a budget.

    The candidates are the sentences of the previous summary followed by the sentences of the new
    turns, in order; exact repeats (case and whitespace folded) keep their first occurrence. Each is
    scored by the importance scorer (``world.importance.ImportanceScorer`` unless one is given) and
    picked greedily by score, ties going to the later sentence (newer information wins), skipping any
    that would overflow ``max_chars``; a sentence longer than the budget is clipped at a word
    boundary. The kept sentences are returned in their original order, one per line, so the result
    never exceeds ``max_chars`` and re-splits into the same sentences.

    ``config()`` (what a saved store keeps) holds ``max_chars``, and the scorer's name under
    ``"scorer"`` when it is not the default: a scorer is code, which a store file cannot hold, so a
    loaded store folds with the default one in its place and warns (see ``RollingSummary.from_state``).
    """

    name = "extractive"

    def __init__(self, max_chars: int = 800, scorer: Any = None) -> None:
        # (numpy ints too, as the store takes them; kept as an int: the saved config is plain JSON)
        self.max_chars = _int_at_least("ExtractiveSummarizer: max_chars", max_chars, 1)
        self.scorer = scorer if scorer is not None else _default_scorer()

    def summarize(self, previous_summary: str, turns: Sequence[str]) -> str:
        candidates: list[str] = []
        seen: set[str] = set()
        for text in [previous_summary, *turns]:
            for sentence in split_sentences(text):
                sentence = _clip(sentence, self.max_chars)
                norm = _SPACES.sub(" ", sentence.casefold())
                if norm in seen:
                    continue
                seen.add(norm)
                candidates.append(sentence)
        scores = [_score(self.scorer, s) for s in candidates]
        order = sorted(range(len(candidates)), key=lambda i: (-scores[i], -i))
        chosen: list[int] = []
        used = 0
        for i in order:
            cost = len(candidates[i]) + (1 if chosen else 0)  # one "\n" between sentences
            if used + cost <= self.max_chars:
                chosen.append(i)
                used += cost
        return "\n".join(candidates[i] for i in sorted(chosen))

    def config(self) -> dict:
        config = {"name": self.name, "max_chars": self.max_chars}
        if not _is_default_scorer(self.scorer):
            # (only named: a loaded store cannot rebuild it, and must not fold with the default one
            # silently, which picks other sentences)
            config["scorer"] = _scorer_name(self.scorer)
        return config


class LLMSummarizer:
    """Adapter for a language model: ``complete(prompt) -> str`` is any callable (an API client, a
    local model). The prompt carries the previous summary and the new turns; the answer is stripped
    and clipped to ``max_chars``. Determinism is the callable's business (use temperature 0)."""

    name = "llm"

    def __init__(self, complete: Callable[[str], str], max_chars: int = 800,
                 instruction: str = "Update the summary of the conversation so far with the new turns. "
                                    "Keep names, facts, dates and changes; drop chit-chat.") -> None:
        if not callable(complete):
            raise TypeError(f"LLMSummarizer: complete must be callable, got {type(complete).__name__}")
        max_chars = _int_at_least("LLMSummarizer: max_chars", max_chars, 1)
        self.complete = complete
        self.max_chars = max_chars
        self.instruction = instruction

    def prompt(self, previous_summary: str, turns: Sequence[str]) -> str:
        parts = [self.instruction, f"At most {self.max_chars} characters."]
        if previous_summary:
            parts.append(f"Previous summary:\n{previous_summary}")
        parts.append("New turns:\n" + "\n".join(f"- {t}" for t in turns))
        return "\n\n".join(parts)

    def summarize(self, previous_summary: str, turns: Sequence[str]) -> str:
        out = self.complete(self.prompt(previous_summary, turns))
        if not isinstance(out, str):
            raise TypeError(f"LLMSummarizer: the completion function returned {type(out).__name__}, expected str")
        return _clip(out.strip(), self.max_chars)

    def config(self) -> dict:
        return {"name": self.name, "max_chars": self.max_chars}


def _summarizer_config(summarizer: Any) -> dict:
    if hasattr(summarizer, "config"):
        return dict(summarizer.config())
    return {"name": type(summarizer).__name__}


def _check_summarizer(name: str, summarizer: Any) -> dict:
    """``summarizer``'s config, once checked; a TypeError naming ``name`` (and what is allowed) for a
    class (its ``summarize`` is a plain function, which passed the check: the first fold failed), an
    object without ``summarize``, or a ``config()`` that raises or returns what a store file cannot
    hold. Called before a summary is registered or given the summarizer: a registered summary cannot
    be taken back, and its config is saved with the store, so every later save failed."""
    if isinstance(summarizer, type):
        cls = summarizer.__qualname__
        raise TypeError(f"{name} must be an instance, not the class {cls}: pass {cls}()")
    if not callable(getattr(summarizer, "summarize", None)):
        raise TypeError(f"{name} must have summarize(previous_summary, turns), got {type(summarizer).__name__}")
    from world.persistence import _dumps

    try:
        config = _summarizer_config(summarizer)
        _dumps(config).encode("utf-8")  # (as the save writes it)
    except Exception as exc:  # noqa: BLE001 - whatever config() raises, the summarizer cannot be saved
        raise TypeError(f"{name}: its config() must return a dict JSON can hold (a store saves it), "
                        f"got {type(exc).__name__}: {exc}") from exc
    return config


def _summarizer_from_config(config: dict) -> Summarizer | None:
    """The summarizer a saved config describes, or None when it cannot be rebuilt from it (an LLM
    one, an extractive one with a scorer of its own, any other kind)."""
    if config.get("name") == ExtractiveSummarizer.name and "scorer" not in config:
        return ExtractiveSummarizer(max_chars=int(config.get("max_chars", 800)))
    return None


def _stand_in_for(config: dict) -> ExtractiveSummarizer:
    """The extractive summarizer that folds for one a saved config cannot rebuild: with the saved
    budget when that was an extractive one (only its scorer is lost), the default otherwise."""
    if config.get("name") == ExtractiveSummarizer.name:
        return ExtractiveSummarizer(max_chars=int(config.get("max_chars", 800)))
    return ExtractiveSummarizer()


def _described(config: dict) -> str:
    """A saved summarizer config as the stand-in's warning names it."""
    scorer = config.get("scorer")
    return f"{config.get('name')!r}" + (f" with scorer {scorer!r}" if scorer is not None else "")


# --------------------------------------------------------------------------------------------- #
# Rolling summary                                                                               #
# --------------------------------------------------------------------------------------------- #


@dataclass(frozen=True)
class Turn:
    """One verbatim turn: the memory it was written as, its text, the step it happened at, and the
    memory's key and cues (so that erasing a key, or a subject the memory matched only through a cue
    the caller gave, also reaches turns whose memory already left the store). ``cues`` is None for a
    turn saved before cues were kept (its text's extracted cues stand in for them)."""

    memory_id: str
    text: str
    step: int
    key: str | None = None
    cues: tuple[str, ...] | None = None

    def to_json(self) -> list:
        row = [self.memory_id, self.text, self.step, self.key]
        return row if self.cues is None else [*row, list(self.cues)]

    @classmethod
    def from_json(cls, row: Sequence) -> Turn:
        memory_id, text, step, *rest = row
        key = rest[0] if rest else None
        cues = rest[1] if len(rest) > 1 else None  # (absent in files saved before cues were kept)
        return cls(str(memory_id), str(text), int(step), None if key is None else str(key),
                   None if cues is None else tuple(str(c) for c in cues))

    @classmethod
    def of(cls, record: Any, text: str, step: int) -> Turn:
        """The turn for a stored memory: its id, key and cues (as the store keeps them)."""
        cues = getattr(record, "cues", None)
        return cls(record.memory_id, text, step, getattr(record, "key", None),
                   None if cues is None else tuple(cues))


class SummaryRebuildError(RuntimeError):
    """The summarizer (or the summary's write) failed while a rolling summary was rebuilt after an
    erasure. The summary keeps no erased content all the same: its text was cleared and it is rebuilt
    from the remaining turns at the next fold (or by ``rebuild()``). ``namespace`` names it."""

    def __init__(self, namespace: str, cause: BaseException) -> None:
        self.namespace = namespace
        super().__init__(f"rolling summary of namespace {namespace!r}: rebuilding it after the erasure failed "
                         f"({type(cause).__name__}: {cause}); its text was cleared and it will be rebuilt from "
                         f"the remaining turns at the next fold (or by rebuild())")


def _note(report: Any, namespace: str, entry: dict) -> None:
    """Record in the erasure report what happened to the namespace's summary (ids and counts only)."""
    extra = getattr(report, "extra", None)
    if isinstance(extra, dict):
        extra.setdefault("summaries", {})[namespace] = entry


def _erased_ids(report: Any) -> set[str]:
    """Every memory id an ``ErasureReport`` says was removed, whatever the kind, and the ids of
    versions that had already left the store which it took out of their keys' histories (``gone``)."""
    ids: set[str] = set()
    for attr in ("episodic", "semantic", "gone"):
        value = getattr(report, attr, None)
        if isinstance(value, list | tuple | set | frozenset):
            ids.update(v for v in value if isinstance(v, str))
    return ids


def _words(text: str) -> str:
    return " " + " ".join(signature(text).words) + " "


class _Erased:
    """Which turns an erasure takes away from a namespace's summary: the removed memories, the
    versions that had already left the store which the erasure took out of their keys' histories (a
    turn written before its memory got its key, ``Turn.key`` None, is reached by its id), turns of a
    key whose chain was removed in this namespace, plus (for an erasure aimed at this namespace) turns
    of the key asked for and turns mentioning an erased subject by the store's subject rule (its
    words, or one of its cues), even when their memory had already been forgotten or swept: the
    summary is derived from them and must not keep what they said."""

    def __init__(self, report: Any, namespace: str, default_namespace: str) -> None:
        self.ids = _erased_ids(report)
        target = getattr(report, "target", None) or {}
        ns = target.get("namespace")
        here = ns == "*" or (ns if ns is not None else default_namespace) == namespace
        if isinstance(target.get("memory_id"), str) and (ns is None or ns == "*" or ns == namespace):
            # the id asked for, even when its memory had already been forgotten or swept (the store
            # then removes nothing, but the turn written as that memory must go); an erasure scoped to
            # another namespace leaves this one alone (without a namespace the id is sought everywhere)
            self.ids.add(target["memory_id"])
        # the chains removed in this namespace, those whose versions had all left the store included
        # (the report's bare `keys` hold no namespace: a chain of that key erased in another namespace
        # must not take this namespace's turns with it)
        chains = getattr(report, "chains", None)
        if chains is not None:
            keys = {k for ns_, k in chains if ns_ == namespace}
        elif namespace in (getattr(report, "namespaces", None) or ()):
            keys = set(getattr(report, "keys", None) or ())  # (a report without (namespace, key) pairs)
        else:
            keys = set()
        if here and target.get("key") is not None:
            keys.add(target["key"])
        self.keys = keys
        subject = target.get("subject") if here else None
        self.subject = subject.lower() if isinstance(subject, str) and subject.strip() else None
        self.subject_words = _words(subject) if self.subject is not None else ""

    def __bool__(self) -> bool:
        return bool(self.ids or self.keys or self.subject)

    def __call__(self, turn: Turn) -> bool:
        if turn.memory_id in self.ids or (turn.key is not None and turn.key in self.keys):
            return True
        if self.subject is None:
            return False
        if turn.key is not None and (turn.key.lower() == self.subject or turn.key.lower().startswith(self.subject + "/")):
            return True
        # the store's cue rule (a caller's cues are kept as given: compared case-folded), and the cues
        # extracted from the text (what the store gives a memory written without cues; all a turn
        # saved before cues were kept has)
        if turn.cues is not None and any(c.lower() == self.subject for c in turn.cues):
            return True
        if self.subject in extract_cues(turn.text):
            return True
        return self.subject_words.strip() != "" and self.subject_words in _words(turn.text)


class RollingSummary:
    """Seed 002's window + running summary, as a part of a ``MemoryStore`` namespace.

    Every turn is written to the store as an episodic memory (``add_turn``) or taken from one
    already written (``add_memory``). When the window holds more than ``max_turns`` turns, all but
    the ``keep_recent`` newest are folded: ``text = summarizer.summarize(text, folded_texts)`` and
    the summary memory is (re)written with ``write_semantic(key="summary/<namespace>",
    tier="inference", confidence=confidence, evidence=<ids of every turn folded so far>,
    derived_from=<those still live>)``, which supersedes the previous version.

    Erasure: the instance registers an erase hook on the store. When an erasure removes a turn it
    folded or holds in its window, that turn's text is dropped from its state, the summary is
    recomputed fold by fold from the remaining turns (same folds, same order, each without its erased
    turns: the fold boundaries are kept rather than replayed), summary versions that still carry the
    erased turn in their evidence are removed, and the rebuilt summary is written as the new version.
    Erasing the summary memory itself forgets the folded history (it is not rebuilt). ``forget`` and
    decay sweeps do not change the summary: compressing turns that leave the store is its purpose.
    """

    def __init__(self, store: Any, namespace: str | None = None, *, max_turns: int = 6,
                 keep_recent: int = 4, summarizer: Summarizer | None = None, confidence: float = 0.6,
                 source: str | None = None, register: bool = True) -> None:
        # numpy numbers too, as the store takes them (they were refused, an in-range confidence as "must
        # be in [0, 0.8)"); kept as Python numbers: the saved state is plain JSON, and summaries()
        # compares them
        max_turns = _int_at_least("RollingSummary: max_turns", max_turns, 1)
        keep_recent = _int_at_least("RollingSummary: keep_recent", keep_recent, 0)
        if keep_recent > max_turns:
            raise ValueError(f"RollingSummary: keep_recent ({keep_recent}) must be <= max_turns ({max_turns})")
        if not (_is_finite_number(confidence) and 0.0 <= confidence < 0.8):
            raise ValueError(f"RollingSummary: confidence must be a number in [0, 0.8) (a summary is an "
                             f"inference), got {confidence!r}")
        if summarizer is None:
            summarizer = ExtractiveSummarizer()
        config = _check_summarizer("RollingSummary: summarizer", summarizer)
        store, namespace = _unwrap(store, namespace)
        # checked as the store checks what it keeps, before anything is registered: a namespace or
        # source without a UTF-8 form (a lone surrogate) made every later save fail, and a registered
        # summary cannot be taken back
        if source is not None and not isinstance(source, str):
            raise ValueError(f"RollingSummary: source must be a string or None, got {source!r}")
        for name, value in (("namespace", namespace), ("source", source)):
            if isinstance(value, str) and not value.isascii():
                _check_unicode(f"RollingSummary: {name}", value)
        self.store = store
        self.namespace = namespace
        self.max_turns = max_turns
        self.keep_recent = keep_recent
        self.summarizer = summarizer
        self.confidence = float(confidence)
        self.key = SUMMARY_KEY_PREFIX + self.namespace
        self.source = source if source is not None else f"summarizer:{config.get('name', type(summarizer).__name__)}"
        self.text = ""
        self._memory_id: str | None = None
        self._window: list[Turn] = []
        self._folds: list[list[Turn]] = []
        self._versions: list[str] = []  # ids of every summary memory written, oldest first
        # True after a rebuild failed during an erasure: text is "" and the next fold (or rebuild())
        # first recomputes it from the remaining folds
        self._rebuild_pending = False
        if register:
            registry = _registry(store)
            if self.namespace in registry:
                raise ValueError(f"RollingSummary: namespace {self.namespace!r} already has a rolling summary; "
                                 f"use summaries(store, {self.namespace!r}) to get it")
            registry[self.namespace] = self
        store.add_erase_hook(self._on_erase)

    # -- reading ------------------------------------------------------------------------------ #

    @property
    def window(self) -> list[Turn]:
        """The verbatim turns, oldest first."""
        return list(self._window)

    @property
    def folded(self) -> list[Turn]:
        """Every turn folded into the summary so far, oldest first."""
        return [t for fold in self._folds for t in fold]

    @property
    def memory_id(self) -> str | None:
        """Id of the live summary memory; None before the first fold or once it was forgotten,
        swept or erased (the next fold writes a new one)."""
        mid = self._memory_id
        return mid if mid is not None and self.store.get(mid) is not None else None

    @property
    def memory(self):
        """The live summary memory (its content is ``SUMMARY_HEADER`` + newline + ``text``), or None."""
        mid = self.memory_id
        return self.store.get(mid) if mid is not None else None

    def build_messages(self, new_query: str | None = None) -> list[tuple[str, str]]:
        """(role, text) pairs: the summary as a system message, the window, then the query."""
        messages: list[tuple[str, str]] = []
        if self.text:
            messages.append(("system", f"Summary of the earlier conversation:\n{self.text}"))
        messages.extend(("turn", t.text) for t in self._window)
        if new_query is not None:
            messages.append(("user", new_query))
        return messages

    # -- writing ------------------------------------------------------------------------------ #

    def _step(self, step: object, method: str) -> int:
        """``step`` by the store's own check (int() made 4.9 step 4 and accepted "5"), or the store's
        clock for None; called first, before anything changes."""
        return self.store.current_step if step is None else _check_step(step, f"RollingSummary.{method}: step")

    def add_turn(self, text: str, step: int | None = None, **write_kwargs: Any):
        """Write ``text`` as an episode in this namespace, add it to the window, fold if needed.
        ``write_kwargs`` go to ``write_episode``; a ``namespace`` other than this summary's is a
        ValueError (nothing is written).

        Returns the record ``write_episode`` returned (the existing one on a duplicate)."""
        if not isinstance(text, str):
            raise TypeError(f"RollingSummary.add_turn: text must be str, got {type(text).__name__}")
        step = self._step(step, "add_turn")
        # a turn of another namespace would be written there yet enter this window, and every later
        # fold would then cite it across namespaces (the store refuses that): refused like add_memory
        namespace = write_kwargs.pop("namespace", None)
        if namespace is not None and namespace != self.namespace:
            raise ValueError(f"RollingSummary.add_turn: namespace={namespace!r}, this summary serves "
                             f"{self.namespace!r} (allowed: {self.namespace!r} or None)")
        record = self.store.write_episode(step, text, namespace=self.namespace, **write_kwargs)
        self._push(Turn.of(record, text, step))
        return record

    def add_memory(self, memory_id: str, step: int | None = None) -> None:
        """Add an already stored memory of this namespace as the next turn."""
        step = self._step(step, "add_memory")
        record = self.store.get(memory_id)
        if record is None:
            raise KeyError(f"RollingSummary.add_memory: no live memory {memory_id!r}")
        ns = getattr(record, "namespace", self.namespace)
        if ns != self.namespace:
            raise ValueError(f"RollingSummary.add_memory: {memory_id!r} is in namespace {ns!r}, "
                             f"this summary serves {self.namespace!r}")
        self._push(Turn.of(record, record.content, step))

    @property
    def rebuild_pending(self) -> bool:
        """True when a rebuild after an erasure failed: the text is empty until the next fold (or
        ``rebuild()``) recomputes it from the remaining turns."""
        return self.__dict__.get("_rebuild_pending", False)

    def _base_text(self) -> str:
        """The summary the next fold starts from: the text, or, after a failed rebuild, the text
        recomputed fold by fold from the remaining turns (may raise: nothing has changed then)."""
        if not self.rebuild_pending:
            return self.text
        text = ""
        for fold in self._folds:
            text = self._summarize(text, fold)
        return text

    def rebuild(self, step: int | None = None) -> bool:
        """Retry a rebuild that failed during an erasure (see ``rebuild_pending``) now, and write the
        summary. Returns False if none was pending. A summarizer or write error propagates, nothing
        changes (the summary stays empty and pending)."""
        step = self._step(step, "rebuild")
        if not self.rebuild_pending:
            return False
        text = self._base_text()
        self._write(step, text, self._folds)
        self.text = text
        self._rebuild_pending = False
        return True

    def _push(self, turn: Turn) -> None:
        window = [*self._window, turn]
        if len(window) > self.max_turns:
            cut = len(window) - self.keep_recent
            fold, keep = window[:cut], window[cut:]
            new_text = self._summarize(self._base_text(), fold)  # may raise: nothing has changed yet
            folds = [*self._folds, fold]
            self._write(turn.step, new_text, folds)  # may raise too: the state is set only after it
            self._window = keep
            self._folds = folds
            self.text = new_text
            self._rebuild_pending = False
        else:
            self._window = window

    def fold_now(self, step: int | None = None) -> bool:
        """Fold every turn of the window except the ``keep_recent`` newest, whatever its length.

        Returns True if anything was folded."""
        step = self._step(step, "fold_now")
        cut = len(self._window) - self.keep_recent
        if cut <= 0:
            return False
        fold = self._window[:cut]
        new_text = self._summarize(self._base_text(), fold)
        folds = [*self._folds, fold]
        self._write(step, new_text, folds)
        self._window = self._window[cut:]
        self._folds = folds
        self.text = new_text
        self._rebuild_pending = False
        return True

    def _stand_in_config(self) -> dict | None:
        """The saved config of the summarizer the extractive default stands in for (None when the
        summary runs with a summarizer it was given)."""
        stand_in = self.__dict__.get("_stand_in")
        return stand_in[1] if stand_in is not None and self.summarizer is stand_in[0] else None

    def _summarize(self, previous: str, turns: list[Turn]) -> str:
        config = self._stand_in_config()
        if config is not None:
            warnings.warn(
                f"rolling summary of namespace {self.namespace!r}: its summarizer {_described(config)} "
                f"could not be saved with the store, so it is folding with ExtractiveSummarizer; pass "
                f"load_store(..., summarizers={{{self.namespace!r}: <summarizer>}}) to keep using it",
                UserWarning, stacklevel=4)
            self._stand_in = None  # once; from here on the summary is the extractive one's
        out = self.summarizer.summarize(previous, [t.text for t in turns])
        if not isinstance(out, str):
            raise TypeError(f"RollingSummary: {type(self.summarizer).__name__}.summarize returned "
                            f"{type(out).__name__}, expected str")
        out = out.strip()
        if not out and previous.strip():
            # (emptying a summary would leave the store's previous version active while this object
            # reports none; with no previous text, "" just means nothing worth keeping yet)
            raise ValueError(f"RollingSummary: {type(self.summarizer).__name__}.summarize returned an empty "
                             f"summary for a non-empty previous one; nothing was folded")
        return out

    def _write(self, step: int, text: str, folds: list[list[Turn]]) -> None:
        """Write ``text`` as the newest version of the summary memory, its evidence the turns of
        ``folds``. Callers set their state (text, window, folds) only once this returned: a write
        that fails (the store refuses it, the embedder raises) leaves the summary as it was."""
        if not text:
            self._memory_id = None
            return
        evidence = list(dict.fromkeys(t.memory_id for fold in folds for t in fold))
        live = [m for m in evidence if self.store.get(m) is not None]
        max_cues = getattr(self.store, "max_cues", 8)
        # turns may come at earlier steps than the last fold (their steps are the caller's), and a
        # rebuild after an erasure writes at the store's clock; the store refuses a version that
        # starts before the end of the key's remaining history (the active version's start, or, once
        # the active version was forgotten, swept or erased, the end of the versions left), so the
        # summary's version is written at the latest of these
        for rec in self.store.versions(self.key, namespace=self.namespace):
            step = max(step, rec.written_at)
            if rec.superseded_at is not None:
                step = max(step, rec.superseded_at)
        record = self.store.write_semantic(
            step, f"{SUMMARY_HEADER}\n{text}", live, key=self.key, tier="inference",
            confidence=self.confidence, source=self.source, evidence=evidence, namespace=self.namespace,
            cues=extract_cues(text, max_cues))
        if record.key != self.key:
            # The store's dedup matched another memory (one that contains this very text): the summary
            # has no memory of its own this time; the next fold writes one.
            self._memory_id = None
            return
        last = getattr(self.store, "last_write", None)
        if getattr(last, "status", None) == "duplicate" and callable(getattr(self.store, "add_evidence", None)):
            # the fold left the text as it was, so the store kept the active version (a duplicate under
            # the key); its evidence must still name every turn folded so far (the erasure cascade
            # follows it, and docs/lifecycle.md promises it)
            self.store.add_evidence(record.memory_id, evidence, live)
        self._memory_id = record.memory_id
        if record.memory_id not in self._versions:
            self._versions.append(record.memory_id)

    # -- erasure ------------------------------------------------------------------------------ #

    def _on_erase(self, report: Any) -> None:
        gone = _Erased(report, self.namespace, _default_namespace(self.store))
        if not gone:
            return
        turn_hit = any(gone(t) for t in [*self.folded, *self._window])
        summary_hit = any(v in gone.ids for v in self._versions)
        self._window = [t for t in self._window if not gone(t)]
        self._versions = [v for v in self._versions if v not in gone.ids]
        if self._memory_id in gone.ids:
            self._memory_id = None
        if not turn_hit:
            if summary_hit:
                # The summary itself was the target: forget the history it was built from too,
                # so that it is not rebuilt behind the user's back.
                self._folds = []
                self.text = ""
                self._drop_stale_versions(None)
                _note(report, self.namespace, {"rebuilt": None, "history_forgotten": True})
            return
        dropped = [t.memory_id for fold in self._folds for t in fold if gone(t)]
        if not dropped and not summary_hit:
            return  # only window turns went; the summary never saw them
        folds = [[t for t in fold if not gone(t)] for fold in self._folds]
        self._folds = [f for f in folds if f]
        self._drop_stale_versions(set(dropped) | gone.ids)
        # whatever happens next, the text must not keep erased content: it is cleared before the
        # rebuild, which sets it again only if it succeeds
        self.text = ""
        self._rebuild_pending = True
        try:
            text = self._base_text()
            self._write(self.store.current_step, text, self._folds)
            self.text = text
            self._rebuild_pending = False
        except Exception as exc:
            # the summarizer (or the write) failed: keep the summary empty and rebuild it from the
            # remaining turns at the next fold; the store runs the other hooks, then raises
            self.text = ""
            self._rebuild_pending = True
            _note(report, self.namespace, {"rebuilt": None, "turns_dropped": len(dropped),
                                           "folds": len(self._folds), "rebuild_failed": type(exc).__name__})
            raise SummaryRebuildError(self.namespace, exc) from exc
        _note(report, self.namespace, {"rebuilt": self.memory_id, "turns_dropped": len(dropped),
                                       "folds": len(self._folds)})

    def _drop_stale_versions(self, erased: set[str] | None) -> None:
        """Forget summary versions still in the store whose evidence names an erased turn (all of
        them when ``erased`` is None). The store's own cascade normally removed them already."""
        keep = []
        for mid in self._versions:
            record = self.store.get(mid)
            if record is None:
                continue
            evidence = set(getattr(record, "evidence", None) or ())
            if erased is None or evidence & erased:
                self.store.forget(mid)
            else:
                keep.append(mid)
        self._versions = keep
        if self._memory_id is not None and self._memory_id not in keep:
            self._memory_id = None

    # -- state -------------------------------------------------------------------------------- #

    def export_state(self) -> dict:
        """JSON-able state (what persistence stores under ``state["extra"]["summaries"]``)."""
        return {
            "version": STATE_VERSION,
            "namespace": self.namespace,
            "max_turns": self.max_turns,
            "keep_recent": self.keep_recent,
            "confidence": self.confidence,
            "source": self.source,
            # (until it folds, a stand-in keeps the saved summarizer's config: a save loses nothing)
            "summarizer": self._stand_in_config() or _summarizer_config(self.summarizer),
            "text": self.text,
            "memory_id": self._memory_id,
            "versions": list(self._versions),
            "window": [t.to_json() for t in self._window],
            "folds": [[t.to_json() for t in fold] for fold in self._folds],
            **({"rebuild_pending": True} if self.rebuild_pending else {}),
        }

    @classmethod
    def from_state(cls, store: Any, state: dict, summarizer: Summarizer | None = None,
                   register: bool = True) -> RollingSummary:
        """Rebuild from ``export_state()``. An extractive summarizer with the default scorer is
        recreated from its config; any other kind (an LLM one, an extractive one with a scorer of its
        own) must be passed as ``summarizer``: otherwise an ``ExtractiveSummarizer`` (with the saved
        ``max_chars`` for an extractive one) stands in and its first fold warns.
        A ``source`` that is a list (a tuple the previous release saved) becomes its items joined by "/"."""
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            version = state.get("version") if isinstance(state, dict) else type(state).__name__
            raise ValueError(f"RollingSummary.from_state: state version {version!r}, expected {STATE_VERSION}")
        stand_in = None
        if summarizer is None:
            config = state.get("summarizer", {})
            summarizer = _summarizer_from_config(config)
            if summarizer is None:  # (an LLM client, a scorer, cannot be saved) the first fold warns, see _summarize
                summarizer = _stand_in_for(config)
                stand_in = (summarizer, dict(config))
        # a source the previous release kept (a tuple, saved as a list) is migrated as the store
        # migrates records' sources ("bot/v1"); a new summary still refuses one that is not a string
        obj = cls(store, state["namespace"], max_turns=int(state["max_turns"]),
                  keep_recent=int(state["keep_recent"]), summarizer=summarizer,
                  confidence=float(state["confidence"]), source=_legacy_source(state["source"]),
                  register=register)
        obj.text = str(state["text"])
        obj._memory_id = state["memory_id"]
        obj._versions = [str(v) for v in state["versions"]]
        obj._window = [Turn.from_json(r) for r in state["window"]]
        obj._folds = [[Turn.from_json(r) for r in fold] for fold in state["folds"]]
        obj._stand_in = stand_in
        obj._rebuild_pending = bool(state.get("rebuild_pending", False))
        return obj

    def __repr__(self) -> str:
        return (f"RollingSummary(namespace={self.namespace!r}, window={len(self._window)}, "
                f"folded={sum(len(f) for f in self._folds)}, chars={len(self.text)})")


# --------------------------------------------------------------------------------------------- #
# Registry on the store (one rolling summary per namespace)                                     #
# --------------------------------------------------------------------------------------------- #


def _unwrap(store: Any, namespace: str | None) -> tuple[Any, str]:
    """(store, namespace) for a MemoryStore or a namespaced view of one (``store.namespace("alice")``)."""
    view_name = getattr(store, "name", None)
    inner = getattr(store, "store", None)
    if isinstance(view_name, str) and inner is not None and hasattr(inner, "extras"):
        if namespace is not None and namespace != view_name:
            raise ValueError(f"namespace {namespace!r} given for a view of namespace {view_name!r}")
        return inner, view_name
    namespace = namespace if namespace is not None else _default_namespace(store)
    if not isinstance(namespace, str) or not namespace or namespace == "*":
        raise ValueError(f"namespace must be a non-empty string other than '*', got {namespace!r}")
    return store, namespace


def _default_namespace(store: Any) -> str:
    for attr in ("default_namespace", "namespace_name", "_namespace"):
        value = getattr(store, attr, None)
        if isinstance(value, str):
            return value
    return "default"


class SummaryRegistry(dict):
    """namespace -> RollingSummary, attached to a store as ``store.extras["summaries"]``.

    The store exports ``to_state()`` under ``state["extra"]["summaries"]`` (``_export_state``), so a
    saved store keeps its rolling summaries, and a snapshot (pickle / deepcopy) carries them along."""

    def to_state(self) -> dict:
        # creation order, which is the order their erase hooks run in (an erasure that rebuilds two
        # summaries gives their new versions ids in that order): a restored store must keep it
        return {ns: self[ns].export_state() for ns in self}


def _registry(store: Any, create: bool = True) -> SummaryRegistry | None:
    """The store's registry; a store rebuilt from a state (``_from_state``) gets its summaries back
    here, from ``store.extra_state["summaries"]``, the first time it is asked. With create=False, a
    store without summaries (attached or pending) gets None and is left untouched."""
    extras = store.extras
    registry = extras.get(EXTRA_NAME)
    if registry is None:
        if not create and EXTRA_NAME not in getattr(store, "extra_state", {}):
            return None
        registry = extras[EXTRA_NAME] = SummaryRegistry()
        pending = getattr(store, "extra_state", {}).pop(EXTRA_NAME, None)
        if pending:
            for ns in pending:  # in the saved (creation) order: the erase hooks run in it
                RollingSummary.from_state(store, pending[ns])
    return registry


def summaries(store: Any, namespace: str | None = None, **kwargs: Any) -> RollingSummary:
    """The rolling summary of ``namespace`` on ``store``, created with ``kwargs`` on first use. For an
    existing one, an argument that differs from its own (a different ``summarizer`` object included;
    the same object or None is fine, as is ``source=None``) is a ValueError naming it."""
    store, ns = _unwrap(store, namespace)
    registry = _registry(store)
    if ns not in registry:
        RollingSummary(store, ns, **kwargs)
    elif kwargs:
        existing = registry[ns]
        allowed = [p for p in inspect.signature(RollingSummary).parameters if p not in ("store", "namespace")]
        for name, value in kwargs.items():
            if name not in allowed:
                raise TypeError(f"summaries: unknown argument {name!r}; allowed: {', '.join(allowed)}")
            if name == "summarizer":
                # (was ignored silently; the same object, or None, asks for nothing new)
                if isinstance(value, type):  # (a class: said so, not "another object")
                    _check_summarizer("summaries: summarizer", value)
                if value is not None and value is not existing.summarizer:
                    raise ValueError(
                        f"summaries: namespace {ns!r} already has a rolling summary with summarizer="
                        f"{type(existing.summarizer).__name__}, asked for {type(value).__name__} (another object); "
                        f"to replace it: restore_summaries(store, summarizers={{{ns!r}: summarizer}})")
            elif name == "source" and value is None:
                continue  # (None means "the default", as for summarizer: it asks for nothing new)
            elif getattr(existing, name, value) != value:
                raise ValueError(f"summaries: namespace {ns!r} already has a rolling summary with "
                                 f"{name}={getattr(existing, name)!r}, asked for {value!r}")
    return registry[ns]


def all_summaries(store: Any) -> dict[str, RollingSummary]:
    """Every rolling summary attached to ``store`` (namespace -> RollingSummary), namespaces sorted."""
    registry = _registry(store, create=False) or {}
    return {ns: registry[ns] for ns in sorted(registry)}


def export_summaries(store: Any) -> dict:
    """``{namespace: state}`` of every rolling summary attached to ``store``, in creation order."""
    registry = _registry(store, create=False)
    return registry.to_state() if registry is not None else {}


def restore_summaries(store: Any, states: dict | None = None, summarizers: dict | None = None) -> None:
    """Attach rolling summaries to a store rebuilt from a state: from ``states`` (an
    ``export_summaries`` dict) or, when None, from ``store.extra_state["summaries"]``. ``summarizers``
    maps a namespace to the summarizer to keep using (an LLM one cannot be saved)."""
    if summarizers is not None and not isinstance(summarizers, Mapping):
        raise ValueError(f"summarizers must be a dict of namespace -> summarizer (an object with summarize()), "
                         f"got {type(summarizers).__name__}")
    # restores pending state and registers the erase hooks; a store without summaries stays as it is
    registry = _registry(store, create=bool(states or summarizers))
    if registry is None:
        return
    for ns in states or {}:  # (in the given order: export_summaries gives the creation order)
        if ns in registry:
            raise ValueError(f"restore_summaries: namespace {ns!r} already has a rolling summary")
        RollingSummary.from_state(store, states[ns])
    for ns, summarizer in (summarizers or {}).items():
        if ns not in registry:
            raise KeyError(f"restore_summaries: no rolling summary in namespace {ns!r} to give a summarizer")
        _check_summarizer(f"restore_summaries: summarizer for {ns!r}", summarizer)
        registry[ns].summarizer = summarizer


def _restore_extra(store: Any, state: Any) -> None:
    """``MemoryStore._from_state`` hook: attach the rolling summaries (and their erase hooks) at once."""
    restore_summaries(store)


def _register() -> None:
    from world.memory import MemoryStore

    MemoryStore.register_extra(EXTRA_NAME, _restore_extra)


_register()
