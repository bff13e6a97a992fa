"""The world: a step clock, one memory store, a seeded script of events, a reader and a grader.

Lifecycle::

    world = World(WorldConfig.preset("life", "easy"), seed=0)
    ev = world.event                       # Event(index, step, text, kind, session)
    while not world.done:
        out = world.apply(Op.WRITE)        # at most once per event -> Outcome (reward terms, grading)
        world.advance()                    # clock to the next event: store.tick, sweep, next event

Operations (:class:`Op`): NOOP; WRITE (store the current event; never supersedes: the world gives
no key); UPDATE(target) (store the current event as the new version of the target's chain);
LINK(target) (store the current event with a typed edge to the target); REFLECT(target)
(consolidate the live, not superseded episodes about the target's subject and relation into a
semantic rule: the majority value); QUERY (retrieve with the event text: answers a question event, otherwise only
rehearses, bumping ACT-R activation of what it retrieves); FORGET(target) (hard erasure of the
target and its version chain). An op is an :class:`Op`, its int value (numpy's too) or its decimal
string; anything else (a float, a bool) is an unknown op. An invalid operation (unknown op or
target, full store, a second op on the same event, ...) is a no-op with ``Outcome.valid = False``
and the ``invalid`` reward term.

The world owns the hidden payloads: ``memory_id -> payload`` for every memory an operation made,
dropped when the memory is swept or erased. Only the reader, the grader and the privileged oracle
read them (:attr:`World.privileged`); agents get :meth:`World.view` (no payloads).
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
import reprlib
from collections import Counter, OrderedDict
from collections.abc import Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from enum import IntEnum
from operator import itemgetter

import numpy as np

from world.config import DEFAULT_REWARDS, WorldConfig
from world.cues import cue_of_token, cues_of_tokens, extract_cues
from world.dedup import TextSignature, signature, signature_of_tokens, words_of_token
from world.embedding import CachedEmbedder
from world.entities import HABITS, RELATIONS
from world.families import QUESTION, REQUEST, EventLog, ScriptEvent, ScriptGenerator, release_before
from world.grading import (
    FACT_KINDS,
    VERDICTS,
    DefaultReader,
    ParsedQuestion,
    Reader,
    ReaderAnswer,
    evidence_recall,
    grade,
    reveals,
)
from world.keys import subject_and_topic_of


class Op(IntEnum):
    NOOP = 0
    WRITE = 1
    UPDATE = 2
    LINK = 3
    REFLECT = 4
    QUERY = 5
    FORGET = 6


N_OPS = len(Op)
_OP_NAMES = tuple(op.name for op in Op)  # (Enum.name is a Python-level property: one lookup per step)
TARGETED_OPS = frozenset({Op.UPDATE, Op.LINK, Op.REFLECT, Op.FORGET})
CREATING_OPS = frozenset({Op.WRITE, Op.UPDATE, Op.LINK, Op.REFLECT})
EVENT_KINDS = ("statement", "question", "request")
REWARD_TERMS = ("answer", "leak", "write_cost", "storage_cost", "query_cost", "invalid")
LINK_RELATION = "references"
#: every reward term at 0.0, in REWARD_TERMS order: an Outcome's (and _Stats') starting terms are a copy
#: (one C call; dict.fromkeys through a partial cost about twice as much, on every apply)
_ZERO_TERMS = dict.fromkeys(REWARD_TERMS, 0.0)


@dataclass(frozen=True)
class Event:
    """What any agent may see of an event."""

    index: int
    step: int
    text: str
    kind: str
    session: int


@dataclass
class Outcome:
    """Result of :meth:`World.apply`. ``reward_terms`` are already weighted by ``config.rewards``."""

    op: Op
    target: str | None
    valid: bool = True
    invalid_reason: str | None = None
    memory_id: str | None = None
    duplicate: bool = False
    retrieved: list[str] = field(default_factory=list)
    question: dict | None = None
    reward_terms: dict[str, float] = field(default_factory=_ZERO_TERMS.copy)
    swept: list[str] = field(default_factory=list)
    #: at the horizon's last event: the erasure requests whose question the horizon cut off and whose
    #: value the store still holds (each charged the ``leak`` term), as {subject, relation, erased, event}
    request_leaks: list[dict] = field(default_factory=list)

    @property
    def reward(self) -> float:
        return float(sum(self.reward_terms.values()))


_SHARED_EMBEDDERS: dict[tuple[str, int], object] = {}

#: In-memory entries of a shared embedding cache (least recently used go first). A Life episode brings
#: ~60 distinct texts, so this holds the texts of several hundred episodes in about 90 MB (measured
#: with tracemalloc: ~1.9 KB per entry, 256-d hashing with its word cache or 384-d vectors). Eviction
#: changes no number: vectors are pure functions of the text.
SHARED_CACHE_ENTRIES = 50_000


#: Entries of the worlds' process-wide memo of their own script texts (see :func:`_script_text`). About
#: half of a Life episode's event texts recur in later episodes (chit-chat, repeated facts, questions of
#: one template): the memo holds their cues and dedup signatures (measured with tracemalloc: ~2.8 KB per
#: entry, so ~28 MB at most; 10,000 entries keep the texts of the last ~160 Life episodes). First in,
#: first out: an evicted text is computed again, to the same values.
SCRIPT_TEXT_ENTRIES = 10_000

# (an OrderedDict: evicting the oldest key of a plain dict scans the dead slots earlier evictions left at
# its front, measured ~9 us per insert once full, against ~1.5 us for popitem(last=False))
_SCRIPT_TEXTS: OrderedDict[str, list] = OrderedDict()


def _script_text(text: str) -> list:
    """The process-wide memo entry of a world's script text: ``[max_cues, cues, signature, key]``, the
    cues (a tuple, for that ``max_cues``), the :func:`world.dedup.signature` of the text and its
    version key ``(subject, topic, signature)`` (:func:`world.keys.subject_and_topic_of`), or None
    where not computed yet. All are pure functions of the text, so the memo changes no value; it
    holds only texts the worlds generated (the event texts of their scripts, which the perception cache
    holds as well), never a text a store or an agent brought in, so a hard erasure leaves nothing of
    its own here. Not part of a world's snapshots or pickles."""
    entry = _SCRIPT_TEXTS.get(text)
    if entry is None:
        entry = _SCRIPT_TEXTS[text] = [None, None, None, None]
        while len(_SCRIPT_TEXTS) > SCRIPT_TEXT_ENTRIES:
            _SCRIPT_TEXTS.popitem(last=False)
    return entry


#: Entries of the worlds' process-wide memo of the whitespace tokens of their script texts (see
#: :func:`_script_token`): a Life script's texts are a few thousand distinct tokens ("Alice's", "Velholm.",
#: names, values, template words); emptied when full, so bounded (a few MB at most)
SCRIPT_TOKEN_ENTRIES = 20_000

_SCRIPT_TOKENS: dict[str, tuple] = {}


def _script_token(token: str) -> tuple:
    """The memo entry of a whitespace token of a plain-ASCII script text: ``(cue_of_token(token),
    words_of_token(token))`` (:mod:`world.cues`, :mod:`world.dedup`), pure functions of the token. A text
    that misses the script-text memo is mostly tokens seen before (names, values and template words
    recur across episodes), so its cues and signature are put together from these. As
    :func:`_script_text`: script texts only, not in snapshots or pickles."""
    if len(_SCRIPT_TOKENS) >= SCRIPT_TOKEN_ENTRIES:
        _SCRIPT_TOKENS.clear()
    entry = _SCRIPT_TOKENS[token] = (cue_of_token(token), words_of_token(token))
    return entry


_CUE_OF, _WORDS_OF = itemgetter(0), itemgetter(1)


def _analysed(text: str, max_cues: int) -> list:
    """The memo entry of a script text (:func:`_script_text`) with its cues for ``max_cues``, its
    signature and its version key filled in (each computed only where missing). A plain-ASCII text
    without "::" (every text the worlds generate) is read token by token through :func:`_script_token`:
    the cues :func:`extract_cues` and the signature :func:`signature` give (tests compare them)."""
    entry = _SCRIPT_TEXTS.get(text)
    if entry is not None and entry[0] == max_cues and entry[3] is not None:
        return entry  # (the usual case: cues, signature and key were filled together)
    if entry is None:
        entry = _script_text(text)
    tokens = parts = None
    if text.isascii() and "::" not in text:
        tokens = text.split()
        parts = list(map(_SCRIPT_TOKENS.get, tokens))
        if None in parts:
            parts = [part or _script_token(token) for part, token in zip(parts, tokens)]
    if entry[1] is None or entry[0] != max_cues:
        if parts is None or type(max_cues) is not int or max_cues < 1:  # (extract_cues checks max_cues)
            entry[1] = tuple(extract_cues(text, max_cues))
        else:
            entry[1] = tuple(cues_of_tokens(map(_CUE_OF, parts), max_cues))
        entry[0] = max_cues
    sig = entry[2]
    if sig is None:
        sig = entry[2] = signature(text) if parts is None else signature_of_tokens(tokens, list(map(_WORDS_OF, parts)))
    if entry[3] is None:
        entry[3] = (*subject_and_topic_of(sig), sig)
    return entry


def shared_embedder(name: str, dim: int):
    """One cached embedder per (name, dim) per process: repeated texts are embedded once. It is the
    worlds' perception cache: the texts of their scripts (see :class:`_StoreEmbedder`)."""
    key = (name, dim if name == "hashing" else 384)
    emb = _SHARED_EMBEDDERS.get(key)
    if emb is None:
        from world.embedding import make_embedder

        emb = make_embedder(name, dim, max_entries=SHARED_CACHE_ENTRIES)
        emb._shared_key = key
        _SHARED_EMBEDDERS[key] = emb
    return emb


class _SharedEmbedderRef:
    """Stands for a process-wide shared embedder in a pickle (the cache is not copied into it; the
    unpickling process uses its own)."""

    def __init__(self, key: tuple[str, int]):
        self.key = key


def _embedder_to_pickle(emb):
    key = getattr(emb, "_shared_key", None)
    return _SharedEmbedderRef(key) if key is not None and _SHARED_EMBEDDERS.get(key) is emb else emb


def _embedder_from_pickle(obj):
    return shared_embedder(*obj.key) if isinstance(obj, _SharedEmbedderRef) else obj


def _same(obj):
    """Unpickles a :class:`_ReaderInState` as the reader it stood for."""
    return obj


class _ReaderInState:
    """Stands for the world's reader in the state ``World.__getstate__`` hands out. Copies pass it on
    (``copy.copy`` as it is, ``copy.deepcopy`` with a deep copy of the reader: the env's ``set_state``
    copies its world, and a reader need not pickle for that); a pickle first checks that the reader
    pickles, so that one holding a client, a lock or a lambda fails naming the reader: pickle's own
    error names only the object deep inside it that failed, not what to do about it."""

    __slots__ = ("reader",)

    def __init__(self, reader):
        self.reader = reader

    def __deepcopy__(self, memo):
        return _ReaderInState(copy.deepcopy(self.reader, memo))

    def __reduce_ex__(self, protocol):
        reader = self.reader
        if type(reader) is not DefaultReader:  # (known to pickle: spared the trial)
            try:
                pickle.dumps(reader, protocol)
            except Exception as exc:
                raise TypeError(
                    f"cannot pickle the world: its reader, a {type(reader).__name__}, does not pickle ({exc}); "
                    f"give the reader __getstate__ / __setstate__ that leave out what cannot be pickled (a client, "
                    f"a lock) and rebuild it on load, or build the env / World again where it is needed "
                    f"(reader=...)") from exc
        return _same, (reader,)  # (the outer pickler stores the reader itself: one copy, shared references kept)


class _StoreEmbedder:
    """The store's embedder inside a world: the world's perception cache, read only, plus entries of
    its own, which the store's hard erasure drops.

    Lookup order: the vector the world primed for its current event, the shared cache (the world's
    perception: the texts of its script, which ``World.event_vector`` and ``World._prefetch`` put
    there), this store's own entries; a text found nowhere is embedded by the shared cache's model
    and kept here (``encode_transient``: none of its words enters the model's word cache), never in
    the shared cache. So an erasure drops every text the store brought in that it reaches (by text, and
    by ``drop_matching`` the texts mentioning what went), while the texts of the worlds' scripts stay in the
    perception cache: the world generated them and holds them in its script anyway, and a text that
    recurs in a later episode is not embedded again (with MiniLM a forward pass per reset).
    """

    #: own entries kept at most (the oldest go first: an endless world queried with free text would
    #: otherwise grow them without end; a text that went is embedded again, to the same vector)
    OWN_ENTRIES = 4_096

    def __init__(self, shared):
        self.shared = shared
        self.name = getattr(shared, "name", type(shared).__name__)
        self.dim = getattr(shared, "dim", None)
        self.unit_norm = bool(getattr(shared, "unit_norm", False))
        # the last text and its vector: an event's text is embedded for the candidates, then again
        # by a WRITE / UPDATE / QUERY of that event (dropped on erasure like the own entries); it is
        # always a text the shared cache holds (the world's) or one of the own entries
        self._last: tuple[str, object] | None = None
        self._own: dict[str, np.ndarray] = {}

    def _model(self):
        return getattr(self.shared, "inner", self.shared)

    def _find(self, text: str):
        lookup = getattr(self.shared, "lookup", None)
        vec = lookup(text) if lookup is not None else None
        return vec if vec is not None else self._own.get(text)

    _private = False  # (class default: embedders pickled before it existed load with it)

    @contextmanager
    def private(self):
        """Within: a text is looked up in this store's own entries only, never in the shared cache (an
        agent's free text: how fast the shared cache answered told whether the world's script, future
        questions included, holds that text). The current event's vector (primed) still answers."""
        old = self._private
        self._private = True
        try:
            yield self
        finally:
            self._private = old

    def encode(self, text: str):
        last = self._last
        if last is not None and last[0] == text:
            return last[1]
        vec = self._own.get(text) if self._private else self._find(text)
        if vec is None:
            # the model is shared by every world of the process: a text the store brings in (a rule,
            # an agent's query) must leave none of its words in the model's own caches, where the
            # store's erasure could not reach them
            model = self._model()
            transient = getattr(model, "encode_transient", None)
            vec = np.asarray(transient(text) if callable(transient) else model.encode(text), dtype=np.float32)
            vec.setflags(write=False)
            own = self._own
            if len(own) >= self.OWN_ENTRIES:
                oldest = next(iter(own))
                del own[oldest]
                if last is not None and last[0] == oldest:
                    self._last = None
            own[text] = vec
        self._last = (text, vec)
        return vec

    def encode_batch(self, texts):
        """Rows of :meth:`encode` (the world batches its own texts into the shared cache; the few the
        store brings in go one by one)."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        return np.stack([self.encode(t) for t in texts]).astype(np.float32, copy=False)

    def prime(self, text: str, vec) -> None:
        """Make ``vec`` the answer for ``text`` (the world's precomputed vector of its current event)."""
        self._last = (text, vec)

    def drop(self, text: str) -> bool:
        """Forget ``text`` if this store brought it in (True then); a script text stays in the
        world's perception cache."""
        if self._last is not None and self._last[0] == text:
            self._last = None
        if self._own.pop(text, None) is None:
            return False
        model = self._model()
        if not callable(getattr(model, "encode_transient", None)):
            drop_words = getattr(model, "drop", None)  # a model that cached something of the text
            if callable(drop_words):
                drop_words(text)
        return True

    def drop_matching(self, predicate) -> int:
        """Forget every own entry whose text satisfies ``predicate`` (the store's erasure: texts, queries
        included, that quote erased content, name an erased subject or hold a word only the erased
        memories had); returns how many went. The world's script texts stay (as in :meth:`drop`)."""
        gone = [t for t in self._own if predicate(t)]
        for t in gone:
            self.drop(t)
        return len(gone)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["shared"] = _embedder_to_pickle(self.shared)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.shared = _embedder_from_pickle(self.shared)
        self.__dict__.setdefault("_own", {})


def _private(store):
    """The store embedder's :meth:`_StoreEmbedder.private` mode, or nothing for another embedder."""
    private = getattr(getattr(store, "embedder", None), "private", None)
    return private() if private is not None else nullcontext()


def _event(se: ScriptEvent) -> Event:
    """``Event(se.index, se.step, se.text, se.kind, se.session)`` without the frozen dataclass's
    ``__init__`` (one ``object.__setattr__`` per field): one of these is made per step."""
    ev = _new_event(Event)
    ev.__dict__.update(index=se.index, step=se.step, text=se.text, kind=se.kind, session=se.session)
    return ev


_new_event = object.__new__

#: The reason ``World.apply`` gives when it refuses a REFLECT whose target has no cluster (known only
#: after acting: the masks do not say it, see ``World.is_valid``).
NO_CLUSTER = ("REFLECT found nothing to consolidate: the target has no cluster (>= 2 live, not superseded "
              "episodes on one subject and relation)")

#: Payload kinds of the memories a REFLECT consolidates (and of the events whose rules it can write).
#: Not "ref": a referring statement's subject is its description ("That employer ..."), and two
#: of them with the same description are about different entities.
CLUSTER_KINDS = FACT_KINDS | {"episode"}


class World:
    """The simulation (see the module docstring). Usable without Gymnasium."""

    def __init__(self, config: WorldConfig | None = None, seed: int | None = None, *, embedder=None,
                 reader: Reader | None = None):
        seed = _check_seed(seed)
        if config is None:
            config = WorldConfig()
        if not isinstance(config, WorldConfig):
            raise TypeError(f"config must be a WorldConfig, got {type(config).__name__}")
        self.config = config
        self._embedder = embedder if embedder is not None else shared_embedder(config.embedder, config.embed_dim)
        if reader is not None:
            _check_reader(reader)
        self.reader: Reader = reader if reader is not None else DefaultReader()
        self._rng = np.random.default_rng(seed)
        self.seed = seed
        self.reset(seed)

    # ------------------------------------------------------------------ lifecycle
    def reset(self, seed: int | None = None) -> Event:
        """Start a new episode. With a seed the episode is a pure function of (config, seed);
        without one the world's generator continues (a fresh, different episode). ``seed``: None or an
        integer >= 0 (numpy integers too; not a bool); anything else is a ValueError naming it, raised
        before anything changes."""
        from world.memory import MemoryStore

        seed = _check_seed(seed)
        cfg = self.config
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.seed = seed  # None: this episode continues the previous generator (not replayable by seed)
        self._gen = ScriptGenerator(cfg, self._rng)
        if cfg.endless:
            self._gen.extend()
        self._script_vecs: list | None = None
        self._prefetch(0)
        self.store = MemoryStore(_StoreEmbedder(self._embedder), forget_threshold=cfg.forget_threshold,
                                 decay=cfg.decay)
        self._analyse_script(0)
        self._payloads: dict[str, dict] = {}
        self._by_key: dict[tuple, dict[str, None]] = {}  # (subject, relation) -> ids (insertion order)
        self._i = 0
        self._done = False
        self._applied = False
        self._graded = False
        self._swept_pending: list[str] = []
        self._version = 0  # bumps whenever the store changes (candidate cache key)
        self._cand_cache: tuple | None = None
        self._vec_cache: tuple | None = None
        self._cue_cache: tuple | None = None
        self._stats = _Stats()
        self._chunk_q = [0, 0]  # endless: questions, correct since the last extension
        se = self._gen.events[0]
        self._se = se
        self._event = _event(se)
        self.store.tick(se.step)
        return self._event

    @property
    def event(self) -> Event:
        return self._event

    @property
    def done(self) -> bool:
        return self._done

    @property
    def level(self) -> int:
        return self._gen.level

    def advance(self) -> Event | None:
        """Move the clock to the next event (store.tick; a sweep when a multiple of
        ``sweep_every`` is crossed). Returns the new event, or None at the horizon."""
        if self._done:
            return None
        if self._se.kind == QUESTION and not self._graded:
            self._grade_unanswered()
        st = self._stats
        if not self._applied:
            if self._last_event():
                out = Outcome(Op.NOOP, None)
                self._check_unasked_requests(out)
                st.add_terms(out.reward_terms)
            # storage is paid per live memory per event, whether or not an operation was applied
            # (apply charges it itself); a driver that skips apply on idle events pays the same
            st.terms["storage_cost"] += self.config.rewards["storage"] * len(self.store)
        store = self.store
        st.events += 1
        st.live_sum += len(store)
        nxt = self._i + 1
        cfg = self.config
        if cfg.horizon is not None and nxt >= cfg.horizon:
            self._done = True
            return None
        events = self._gen.events
        if nxt >= len(events):
            self._extend()
            events = self._gen.events
        self._i = nxt
        se = events[nxt]
        old = store.current_step
        step = se.step
        store.tick(step)
        every = cfg.sweep_every
        if step // every > old // every:
            swept = store.sweep_decayed()
            if swept:
                for mid in swept:
                    self._drop_payload(mid)
                self._swept_pending.extend(swept)
                st.swept += len(swept)
                self._version += 1
        self._se = se
        self._event = _event(se)
        self._applied = False
        self._graded = False
        return self._event

    def _extend(self) -> None:
        q, c = self._chunk_q
        level = self._gen.level
        if q >= 3 and c / q >= self.config.level_up:
            level += 1
        self._chunk_q = [0, 0]
        start = len(self._gen.events)
        released = self._gen._released
        self._gen.extend(level=level)
        vecs = self._script_vecs
        if vecs:  # the embeddings of events the script released go with them
            release_before(vecs, self._gen._released, released)
        self._prefetch(start)
        self._analyse_script(start)

    def _analyse_script(self, start: int) -> None:
        """Fill the script-text memo (:func:`_analysed`) for the script's texts from ``start`` on, which
        :meth:`event_cues`, :meth:`event_signature` and :meth:`event_key` then read (the env's features
        read all three every event): the same pure functions of the same texts, computed in one loop
        here rather than one text at a time inside busy steps (about half the cost per new text)."""
        max_cues = self.store.max_cues
        for e in self._gen.events[start:]:
            if e is not None:
                _analysed(e.text, max_cues)

    def _prefetch(self, start: int) -> None:
        """Embed the script's event texts from ``start`` on in one batch (through the shared cache), when
        the embedder is a model that batches (sentence-transformers): every text is known in advance,
        and one batched forward pass costs about what one or two single encodes do. The world keeps
        these vectors with its script (``event_vector`` uses them), so that a text dropped from the
        shared cache by an erasure is not embedded again, alone, when it recurs. A hashing embedder behind
        the shared cache computes the script's vectors in one Python batch (``CachedEmbedder.prepare``)
        and hands each out when its event asks: the shared cache takes them as it takes fresh ones, at
        the same moments, so its entries and counts are those of one-by-one embedding."""
        emb = self._embedder
        if not getattr(getattr(emb, "inner", emb), "prefers_batches", False):
            # a hashing model batches too, in Python (HashingEmbedder.prepare: ~5 us a text instead of ~8,
            # more in a busy step): it computes the script's vectors now and hands each out when its event
            # asks (the shared cache then takes it as it would a fresh one: same entries, same counts)
            if isinstance(emb, CachedEmbedder):
                emb.prepare([e.text for e in self._gen.events[start:] if e is not None])
            return
        encode_batch = getattr(emb, "encode_batch", None)
        if encode_batch is None:
            return
        texts = [e.text for e in self._gen.events[start:]]
        if self._script_vecs is None:
            self._script_vecs = EventLog() if self.config.endless else []
        if texts:
            # and the rules a REFLECT could write from these events (one per possible majority object)
            kinds = CLUSTER_KINDS
            rules = []
            for e in self._gen.events[start:]:
                p = e.payload
                if p and p.get("kind") in kinds and p.get("object") is not None:
                    try:
                        rules.append(_rule_text(p["subject"], p["relation"], p["object"]))
                    except (KeyError, AttributeError, IndexError, ValueError):
                        pass
            distinct = list(dict.fromkeys(texts + rules))
            # read-only (a view: the embedder's own array keeps its flags): event_vector() hands these
            # rows out (store.embed returns a unit row as it is), and a caller writing into one would
            # change every later event of that text
            vecs = np.asarray(encode_batch(distinct)).view()
            vecs.setflags(write=False)
            by_text = {t: vecs[j] for j, t in enumerate(distinct)}
            self._script_vecs.extend(by_text[t] for t in texts)

    # ------------------------------------------------------------------ validity
    def is_valid(self, op: int, target: str | None = None) -> tuple[bool, str | None]:
        """Whether ``apply(op, target)`` is admissible, and why not, from what an agent can see: the
        clock, the store's size and capacity, the target's liveness, version and kind (episodic or
        semantic). The env's action masks are these rules. A target is a memory id (a ``str``);
        anything else is refused with a reason naming its type and value.

        One rule reads hidden data and so is not part of it: REFLECT consolidates the target's
        *cluster* (the live, not superseded episodes stating its hidden subject and relation), and a target without
        one (a lone fact, chit-chat, a reference) is refused by ``apply`` as an invalid action, after
        the fact. Deciding it here would show agents, before they act, which memories share a hidden
        (subject, relation) and which are chit-chat. Privileged code asks
        ``world.privileged.can_reflect(target)``."""
        if type(op) is not Op:
            op_e = _as_op(op)
            if op_e is None:
                return False, _unknown_op(op)
            op = op_e
        if self._done:
            return False, "episode is over"
        if self._applied:
            return False, "an operation was already applied to this event"
        store = self.store
        if op in CREATING_OPS and len(store) >= self.config.capacity:
            return False, f"store is full (capacity {self.config.capacity}); forget something first"
        if op in TARGETED_OPS:
            if target is None:
                return False, f"{op.name} needs a target memory"
            if not isinstance(target, str):
                # (a list, e.g. world.candidates()[:1], raised "unhashable type" from inside the store)
                return False, (f"{op.name} target must be a memory id (a str such as one of world.candidates()), "
                               f"got {type(target).__name__} {target!r}")
            rec = store.get(target)
            if rec is None:
                return False, f"{op.name} target {target!r} is not a live memory"
            if op is Op.UPDATE and not rec.active:
                return False, f"UPDATE target {target!r} is a superseded version; update the newest one"
            if op is Op.REFLECT and target not in store.episodic:
                return False, "REFLECT target must be an episodic memory"
        return True, None

    def op_mask(self) -> np.ndarray:
        """Boolean (N_OPS,): ops that are valid for *some* target (targeted ops need a live memory)."""
        m = np.ones(N_OPS, dtype=bool)
        if self._done or self._applied:
            m[:] = False
            m[Op.NOOP] = not self._done
            return m
        full = len(self.store) >= self.config.capacity
        empty = len(self.store) == 0
        for op in CREATING_OPS:
            m[op] = not full
        for op in TARGETED_OPS:
            m[op] = m[op] and not empty
        if m[Op.REFLECT]:  # a target must be an episode (its cluster is hidden: see is_valid)
            m[Op.REFLECT] = len(self.store.episodic) > 0
        return m

    # ------------------------------------------------------------------ apply
    def apply(self, op: int, target: str | None = None, *, invalid_reason: str | None = None) -> Outcome:
        """Apply one operation to the current event (at most once per event).

        ``invalid_reason``: the caller already knows the action is invalid (a wrapper's malformed text
        command, a masked-out flat action); it is applied as an invalid action (nothing done, the
        ``invalid`` penalty) with this reason. A second operation on the event (or one after the end)
        books only that penalty, with or without a reason: the first booked the event's storage,
        grading and, on the last event, the cut-off erasure requests."""
        w = self.config.rewards
        op_e = op if type(op) is Op else _as_op(op)
        if op_e is None:  # (an unknown op: is_valid refuses it, and it is booked as a NOOP)
            op_e = Op.NOOP
        if invalid_reason is None:
            ok, reason = self.is_valid(op, target)
            # (on the converted op: is_valid accepts "4" for REFLECT, and so must this check)
            if ok and op_e is Op.REFLECT and not self._has_cluster(target):
                ok, reason = False, NO_CLUSTER
        else:
            ok, reason = False, str(invalid_reason)
        out = Outcome(op_e, target if op_e in TARGETED_OPS else None)
        st = self._stats
        if self._swept_pending:
            out.swept = self._swept_pending
            self._swept_pending = []
        if not ok:
            out.valid = False
            out.invalid_reason = reason
            out.reward_terms["invalid"] = w["invalid"]
            st.invalid += 1
            # a second op on the event (or one after the end) books only its penalty: the event's
            # storage, grading and cut-off erasure requests were booked by the first. Read from the
            # world's state, not from the reason: a caller's invalid_reason hides is_valid's
            if self._applied or self._done:
                st.add_terms(out.reward_terms)
                return out
        else:
            st.ops[_OP_NAMES[op_e]] += 1
            self._dispatch(op_e, target, out)
        self._applied = True
        failed = None
        if self._se.kind == QUESTION and not self._graded:
            try:
                self._grade(out)
            except Exception as exc:  # the reader's: raised below, once the operation is booked
                failed = exc
        if self._last_event():
            self._check_unasked_requests(out)
        out.reward_terms["storage_cost"] = w["storage"] * len(self.store)
        st.add_terms(out.reward_terms)
        if failed is not None:
            # the operation happened (the store was queried) and is counted; the question is not
            # graded, so advance() grades it as unanswered and a driver that goes on loses nothing
            raise failed
        return out

    def _dispatch(self, op: Op, target: str | None, out: Outcome) -> None:
        se, store, w = self._se, self.store, self.config.rewards
        if op is Op.NOOP:
            return
        if op is not Op.FORGET and op is not Op.REFLECT:
            # the world perceives its event first (as the env's observation does; cached per event):
            # the store then finds the text in the perception cache and keeps no copy of its own,
            # which an endless world driven without the env would otherwise accumulate
            self.event_vector()
        if op is Op.QUERY:
            recs = store.query(se.text, self.event_cues(), top_k=self.config.top_k)
            out.retrieved = [r.memory_id for r in recs]
            out.reward_terms["query_cost"] = w["query"]
            return
        if op is Op.FORGET:
            report = store.erase(memory_id=target)
            for mid in _removed_ids(report, target):
                self._drop_payload(mid)
            self._version += 1
            return
        # creating ops
        out.reward_terms["write_cost"] = w["write"]
        self._stats.writes += 1
        self._version += 1
        if op is Op.REFLECT:
            self._reflect(target, out)
            return
        if op is Op.UPDATE:
            rec = store.supersede(target, se.text, se.step, cues=self.event_cues(), sig=self.event_signature())
        else:
            rec = store.write_episode(se.step, se.text, self.event_cues(), sig=self.event_signature())
        report = getattr(store, "last_write", None)
        dup = report is not None and getattr(report, "status", "") == "duplicate"
        out.memory_id = rec.memory_id
        out.duplicate = dup
        if dup:
            self._stats.duplicates += 1
        else:
            self._add_payload(rec.memory_id, se.payload)
        if op is Op.LINK and rec.memory_id != target:
            store.link(rec.memory_id, target, LINK_RELATION)

    def _add_payload(self, mid: str, p: dict) -> None:
        self._payloads[mid] = p
        self._by_key.setdefault((p.get("subject"), p.get("relation")), {})[mid] = None

    def _drop_payload(self, mid: str) -> None:
        p = self._payloads.pop(mid, None)
        if p is not None:
            key = (p.get("subject"), p.get("relation"))
            ids = self._by_key.get(key)
            if ids is not None:
                ids.pop(mid, None)
                if not ids:
                    del self._by_key[key]

    def _has_cluster(self, target: str) -> bool:
        """Whether REFLECT on ``target`` has something to consolidate (>= 2 members)."""
        return len(self._cluster(target)) >= 2

    def _cluster(self, target: str) -> list[str]:
        """The live, active episodes of the target's (subject, relation) whose kind consolidates. Not a
        superseded version: its value is one the agent marked outdated (UPDATE), and counting it made
        "Jules's car is usually Renault." of a Renault updated to an Opel."""
        p = self._payloads.get(target)
        kinds = CLUSTER_KINDS
        if not p or p.get("kind") not in kinds:
            return []
        episodic = self.store.episodic
        ids = self._by_key.get((p.get("subject"), p.get("relation")), {})
        return [mid for mid in ids if mid in episodic and episodic[mid].active
                and self._payloads[mid].get("kind") in kinds]

    def _reflect(self, target: str, out: Outcome) -> None:
        cluster = self._cluster(target)
        ps = [self._payloads[m] for m in cluster]
        counts = Counter(p["object"] for p in ps)
        first = {}
        for p in sorted(ps, key=lambda p: p["event"]):
            first.setdefault(p["object"], p["event"])
        obj = max(counts, key=lambda o: (counts[o], -first[o]))
        subj, rel = ps[0]["subject"], ps[0]["relation"]
        text = _rule_text(subj, rel, obj)
        # consolidated knowledge is durable: rules get the maximal importance (slower sweep)
        rec = self.store.write_semantic(self._se.step, text, list(cluster), importance=1.0)
        out.memory_id = rec.memory_id
        report = getattr(self.store, "last_write", None)
        if report is not None and getattr(report, "status", "") == "duplicate":
            # the store kept the existing memory (the same rule made before): as for WRITE, it keeps
            # its payload (event, derived_events, last_use), which agrees with the store's derived_from
            out.duplicate = True
            self._stats.duplicates += 1
            return
        self._add_payload(rec.memory_id, {
            "kind": "rule", "family": ps[0].get("family"), "subject": subj, "relation": rel, "object": obj,
            "event": self._se.index, "step": self._se.step, "derived_events": sorted(p["event"] for p in ps),
            "last_use": max(p.get("last_use", -1) for p in ps),
        })

    # ------------------------------------------------------------------ grading
    def _grade(self, out: Outcome) -> None:
        """Grade the current question (once). A reader that fails or returns something other than a
        ReaderAnswer raises before anything is recorded: the question stays ungraded."""
        se, w = self._se, self.config.rewards
        qp = se.payload
        answer = None
        revealed: list[str] = []
        if qp.get("erased"):
            # hard deletion: the erased fact still held anywhere in the store (a copy, a repeat, a
            # superseded version kept by a soft delete) is reachable, hence leaked, whether or not
            # the agent asks (else skipping the question would hide the leak)
            revealed = self._held_values(qp["subject"], qp["relation"])
        if out.op is Op.QUERY and out.valid:
            pq = ParsedQuestion.from_payload(se.text, qp)
            ctx = _ReaderCtx(self)
            reader = self.reader
            _check_reader(reader)  # (a public attribute: it may have been replaced since __init__)
            ans = _check_answer(reader, reader.answer(pq, out.retrieved, ctx))
            answer = ans.answer
            recall = evidence_recall(qp, out.retrieved, self._payloads.get, chain=ctx.chain, used=ans.used)
        else:
            recall = 0.0 if qp.get("evidence") else None
        self._graded = True
        verdict = grade(qp, answer, revealed)
        out.question = {"family": qp["family"], "qtype": qp["qtype"], "verdict": verdict, "answer": answer,
                        "gold": qp["gold"], "evidence_recall": recall}
        if verdict == "leaked":
            out.reward_terms["leak"] = w["leaked"]
        else:
            out.reward_terms["answer"] = w[verdict]
        self._stats.record(qp["family"], verdict, recall)
        self._chunk_q[0] += 1
        self._chunk_q[1] += verdict == "correct"

    def _last_event(self) -> bool:
        h = self.config.horizon
        return h is not None and self._i == h - 1

    def _held_values(self, subject: str, relation: str) -> list:
        """The values that live memories about (subject, relation) hold: what an erasure checks."""
        return [self._payloads[m].get("object") for m in self._by_key.get((subject, relation), ())]

    def _check_unasked_requests(self, out: Outcome) -> None:
        """At the last event of a horizon: an erasure request whose erased question the horizon
        cut off is checked as that question would have been. Its value still held by a live memory
        about the erased subject and relation is a leak (the ``leak`` term, counted in
        ``metrics()["request_leaks"]``; not a question, so accuracy does not count it)."""
        # the events up to this one: an endless world cut by a horizon has generated past it (those
        # requests were never made, those questions never asked) and released its oldest events
        script = [e for e in self._gen.events[: self._i + 1] if e is not None]
        asked = {e.payload.get("thread") for e in script if e.kind == QUESTION and e.payload.get("qtype") == "erased"}
        for e in script:
            p = e.payload
            if e.kind != REQUEST or p.get("thread") in asked:
                continue
            if reveals([p["erases"]], self._held_values(p["subject"], p["relation"])):
                out.reward_terms["leak"] += self.config.rewards["leaked"]
                out.request_leaks.append({"subject": p["subject"], "relation": p["relation"],
                                          "erased": p["erases"], "event": e.index})
                self._stats.request_leaks += 1

    def _grade_unanswered(self) -> None:
        out = Outcome(Op.NOOP, None)
        self._grade(out)
        self._stats.add_terms(out.reward_terms)

    # ------------------------------------------------------------------ reading
    def candidates(self, k: int | None = None) -> list[str]:
        """Candidate targets for the current event: up to ``n_recent`` most recently written
        memories (newest first), then the active memories most similar to the event text
        (most similar first), deduplicated; at most ``k`` (default ``n_candidates``)."""
        k = self.config.n_candidates if k is None else k
        key = (self._i, self._version, k)
        cached = self._cand_cache
        if cached is not None and cached[0] == key:
            return list(cached[1])
        store = self.store
        out: list[str] = []
        n_live = len(store)
        if n_live:
            # most similar first, ties in write order (stable sort); store.similarities(vec) ranked
            # the whole ranking (it is one stable argsort anyway): a window of the top 2k + recent ran out
            # when superseded versions of a chain filled it, leaving slots empty while active memories
            # were left out
            ids, order = store._ranked(self.event_vector(), n_live)
            n_rec = min(self.config.n_recent, k)
            if n_rec > 0:
                # the n_rec newest, newest first: store.recent_ids(n_rec), read off the write-order ids
                out = ids[:-n_rec - 1:-1]
            room = k - len(out)
            if ids and room > 0:
                # (ids are distinct; the recent ones and superseded versions are not eligible)
                eligible = self._eligible(store, ids, n_rec)
                for j in order:
                    if eligible[j]:
                        out.append(ids[j])
                        room -= 1
                        if not room:
                            break
        if len(out) > k:
            out = out[:k]
        self._cand_cache = (key, tuple(out))
        return out

    _eligible_cache: tuple | None = None  # (store's ranked id list, n_recent, eligible flags)

    def _eligible(self, store, ids: list[str], n_rec: int) -> list[bool]:
        """Per position of ``ids`` (the store's default namespace in write order, as ``_ranked`` gives
        it): whether that memory may fill a similarity slot of :meth:`candidates`, i.e. it is active
        (not a superseded version) and not among the ``n_rec`` newest (those come first anyway). Kept
        while the store hands out the same id list: it makes a new one whenever its slots change
        (writes, removals, a superseded version), and the kept list holds ids only."""
        cached = self._eligible_cache
        if cached is not None and cached[0] is ids and cached[1] == n_rec:
            return cached[2]
        try:  # (the default namespace's active flags, in C)
            space = store._spaces[store.default_namespace]
            view_ids, slots = space.view()
            if view_ids is not ids:
                raise LookupError("not the store's view")
            eligible = space.active.take(slots).tolist()
        except (AttributeError, KeyError, LookupError):
            get = store._records.get
            eligible = [rec is not None and rec.superseded_at is None for rec in map(get, ids)]
        if n_rec > 0:
            cut = max(len(ids) - n_rec, 0)
            eligible[cut:] = [False] * (len(ids) - cut)
        self._eligible_cache = (ids, n_rec, eligible)
        return eligible

    def event_vector(self) -> np.ndarray:
        """Unit embedding of the current event text (computed once per event)."""
        cached = self._vec_cache
        if cached is not None and cached[0] == self._i:
            vec = cached[1]
            if vec.flags.writeable:  # (restored by a pickle or a snapshot copy: writable again)
                vec.setflags(write=False)
            return vec
        text = self._se.text
        script_vecs = self._script_vecs
        store = self.store
        prime = getattr(store.embedder, "prime", None)
        if prime is not None:
            # the world's perception of its own text (the shared cache keeps it; see _StoreEmbedder);
            # store.embed then normalises it as usual
            if script_vecs is not None and self._i < len(script_vecs):
                row = script_vecs[self._i]
                if row.flags.writeable:  # (a row restored by a pickle or a snapshot copy: writable again)
                    row.setflags(write=False)
            else:
                row = self._embedder.encode(text)
            prime(text, row)
        vec = store.embed(text)
        self._vec_cache = (self._i, vec)
        return vec

    def _event_analysis(self) -> tuple:
        """``(event index, cues, signature, version key)`` of the current event text: the script-text
        memo's values (:func:`_analysed`, for the store's ``max_cues``), read once per event and kept in
        ``_cue_cache`` (which ``reset`` clears and snapshots carry; one taken before it held all three
        held ``(index, cues)`` only and is read again)."""
        cached = self._cue_cache
        if cached is None or cached[0] != self._i or len(cached) != 4:
            entry = _analysed(self._se.text, self.store.max_cues)
            cached = self._cue_cache = (self._i, entry[1], entry[2], entry[3])
        return cached

    def event_cues(self) -> list[str]:
        """``extract_cues`` of the current event text with the store's ``max_cues`` (computed once per
        event; the store would compute exactly these for a write or query of the text). A new list
        each call."""
        return list(self._event_analysis()[1])

    def event_signature(self) -> TextSignature:
        """``world.dedup.signature`` of the current event text, computed once per event (shared by the
        store's write / update of the event and the env's candidate features)."""
        return self._event_analysis()[2]

    def event_key(self) -> tuple[frozenset, frozenset, TextSignature]:
        """(subject words, topic words, dedup signature) of the current event text: the version key
        :func:`world.keys.subject_and_topic_of` reads from :meth:`event_signature`, memoised with the
        script text (the env's candidate features read it every event; about half of an episode's
        texts recur in later episodes)."""
        return self._event_analysis()[3]

    def view(self) -> WorldView:
        return WorldView(self)

    @property
    def privileged(self) -> OracleAccess:
        return OracleAccess(self)

    def metrics(self) -> dict:
        """Episode metrics: a new dict of new containers on each call (callers may keep or change it)."""
        return self._stats.summary(self)

    # ------------------------------------------------------------------ snapshots
    _SKIP = ("config", "_embedder", "reader")

    def _memo(self, gen, script_vecs=None) -> dict:
        memo = {id(self._embedder): self._embedder}
        if not self.config.endless:
            # a fixed-horizon script is complete and never changes: snapshots share it (and its
            # embeddings, when the world keeps them)
            memo[id(gen)] = gen
            if script_vecs is not None:
                memo[id(script_vecs)] = script_vecs
        return memo

    def get_state(self) -> dict:
        """Deep snapshot of everything that changes (store, payloads, clock, RNG, stats; the
        script of an endless world). The embedder (a cache), the reader and a finished script are
        shared, not copied. Pickle-able."""
        state = {k: v for k, v in self.__dict__.items() if k not in self._SKIP}
        state = copy.deepcopy(state, self._memo(self._gen, getattr(self, "_script_vecs", None)))
        state["config"] = self.config  # (frozen: shared) set_state checks it
        return state

    def set_state(self, state: dict) -> None:
        """Restore a snapshot from :meth:`get_state` (the snapshot stays reusable).

        The snapshot is checked first: one that is not a world snapshot, that lacks its ``config``
        (which :meth:`get_state` records), or that was taken from a world with another config (its
        store could hold more memories than this capacity, its clock run past this horizon), raises
        ``ValueError`` naming what is missing or differs and changes nothing."""
        if not isinstance(state, dict) or not self._STATE_KEYS <= state.keys():
            have = sorted(state) if isinstance(state, dict) else type(state).__name__
            raise ValueError(f"set_state: not a World snapshot (World.get_state()); it needs the keys "
                             f"{sorted(self._STATE_KEYS | {'config'})}, got {have}")
        from world.memory import MemoryStore

        unknown = state.keys() - self._STATE_KEYS - self._CACHE_KEYS - {"config"}
        if unknown:
            raise ValueError(f"set_state: the snapshot has key(s) {sorted(unknown)} that no World snapshot has; "
                             f"allowed: {sorted(self._STATE_KEYS | self._CACHE_KEYS | {'config'})}")
        if "config" not in state:
            # not a cache: without it nothing shows that the store fits this capacity and the clock this
            # horizon, and taking this world's config for it would run another world's state under it
            raise ValueError("set_state: the snapshot has no 'config' (the WorldConfig it was taken under, which "
                             "World.get_state() records); a snapshot without it cannot be checked against this "
                             "world's config: take it again with get_state()")
        kinds = {"_gen": ScriptGenerator, "store": MemoryStore, "_payloads": dict, "_by_key": dict,
                 "_rng": np.random.Generator, "_stats": _Stats, "_swept_pending": list, "_se": ScriptEvent,
                 "_event": Event, "_done": bool, "_applied": bool, "_graded": bool}
        for key, kind in kinds.items():
            if not isinstance(state[key], kind):
                raise ValueError(f"set_state: state[{key!r}] must be a {kind.__name__}, got {type(state[key]).__name__}")
        i = state["_i"]
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)) or not 0 <= i < len(state["_gen"].events):
            raise ValueError(f"set_state: state['_i'] must be an event index in 0..{len(state['_gen'].events) - 1}, "
                             f"got {i!r}")
        se, ev = state["_se"], state["_event"]
        if se != state["_gen"].events[i] or (ev.index, ev.step, ev.text, ev.kind) != (se.index, se.step, se.text, se.kind):
            raise ValueError(f"set_state: state['_se'] and state['_event'] must be the script's event {i} "
                             f"(state['_gen'].events[state['_i']]); the parts come from different snapshots")
        version, chunk_q, vecs = state["_version"], state["_chunk_q"], state["_script_vecs"]
        if isinstance(version, (bool, np.bool_)) or not isinstance(version, (int, np.integer)) or version < 0:
            raise ValueError(f"set_state: state['_version'] must be an int >= 0, got {version!r}")
        if not (isinstance(chunk_q, list) and len(chunk_q) == 2 and all(
                isinstance(n, (int, np.integer)) and not isinstance(n, (bool, np.bool_)) for n in chunk_q)):
            raise ValueError(f"set_state: state['_chunk_q'] must be a list of 2 ints (questions, correct), got {chunk_q!r}")
        if vecs is not None and not isinstance(vecs, (list, EventLog)):
            raise ValueError(f"set_state: state['_script_vecs'] must be None, a list or an EventLog, "
                             f"got {type(vecs).__name__}")
        try:
            _check_seed(state["seed"])
        except ValueError as exc:
            raise ValueError(f"set_state: state['seed']: {exc}") from None
        for key in self._CACHE_KEYS & state.keys():
            if state[key] is not None and not isinstance(state[key], tuple):
                raise ValueError(f"set_state: state[{key!r}] must be None or a tuple (a cache), "
                                 f"got {type(state[key]).__name__}")
        cfg = state["config"]
        if cfg != self.config:
            if not isinstance(cfg, WorldConfig):
                raise ValueError(f"set_state: the snapshot's 'config' must be a WorldConfig, got {type(cfg).__name__}")
            diff = [f.name for f in dataclasses.fields(WorldConfig) if getattr(cfg, f.name) != getattr(self.config, f.name)]
            raise ValueError(f"set_state: the snapshot was taken from a world with another config (differs in "
                             f"{', '.join(diff)}: snapshot {', '.join(f'{n}={getattr(cfg, n)!r}' for n in diff[:4])}); "
                             f"restore it into World(snapshot['config'])")
        body = {k: v for k, v in state.items() if k != "config"}
        for key in self._CACHE_KEYS - state.keys():
            body[key] = None  # (a cache the snapshot lacks starts empty: never this world's entry)
        self.__dict__.update(copy.deepcopy(body, self._memo(body["_gen"], body.get("_script_vecs"))))

    #: what a snapshot holds: every key is required (a missing one would leave this world's value in
    #: place, a mix of two states), and the caches, which may be missing (they then start empty); its
    #: ``config`` is required too (checked on its own, to say why)
    _STATE_KEYS = frozenset({"_gen", "store", "_i", "_payloads", "_rng", "_stats", "seed", "_script_vecs", "_by_key",
                             "_done", "_applied", "_graded", "_swept_pending", "_version", "_chunk_q", "_se", "_event"})
    _CACHE_KEYS = frozenset({"_cand_cache", "_vec_cache", "_cue_cache", "_eligible_cache"})

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_embedder"] = _embedder_to_pickle(self._embedder)  # not the process-wide cache
        if "reader" in state:
            state["reader"] = _ReaderInState(state["reader"])  # (a reader that does not pickle: named)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._embedder = _embedder_from_pickle(self._embedder)
        reader = self.__dict__.get("reader")
        if isinstance(reader, _ReaderInState):  # (copy.copy and deepcopy hand the stand-in back)
            self.reader = reader.reader


def _check_seed(seed) -> int | None:
    """``seed`` as a Python int (or None); a ValueError naming it unless it is None or an integer >= 0.
    numpy said "expected non-negative integer" for -1 and a SeedSequence TypeError for 1.5, and took
    True (and lists) as seeds, which then stood in metrics()["seed"]."""
    if seed is None:
        return None
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, (bool, np.bool_)) and seed >= 0:
        return int(seed)
    raise ValueError(f"seed must be None or an integer >= 0 (numpy integers too; not a bool), got {seed!r}")


def _as_op(op) -> Op | None:
    """The :class:`Op` that ``op`` names, or None: an Op, an int (numpy's too) or its decimal string
    ("4"). Not a float nor a bool: ``Op(int(op))`` made 1.9 and True a WRITE and -0.5 a NOOP."""
    if isinstance(op, (bool, np.bool_)):
        return None
    if isinstance(op, str):
        try:
            op = int(op)
        except ValueError:
            return None
    elif not isinstance(op, (int, np.integer)):
        return None
    try:
        return Op(int(op))
    except ValueError:
        return None


def _unknown_op(op) -> str:
    return (f"unknown op {op!r}; ops are Op members or their int values "
            f"{', '.join(f'{o.value} ({o.name})' for o in Op)}")


def _rule_text(subj: str, rel: str, obj) -> str:
    """The text of the rule REFLECT writes for a cluster (subject, relation) whose majority object is obj."""
    if rel in HABITS:
        return HABITS[rel].rule.format(s=subj, o=obj)
    noun = RELATIONS[rel].noun if rel in RELATIONS else rel.replace("_", " ")
    who = "My" if subj == "user" else f"{subj}'s"
    return f"{who} {noun} is usually {obj}."


def _removed_ids(report, target: str) -> list[str]:
    for name in ("removed", "removed_ids", "memory_ids", "erased"):
        ids = getattr(report, name, None)
        if ids is not None and not isinstance(ids, (int, bool)):
            return list(ids)
    return [target]


_READER_PROTOCOL = ("the Reader protocol: an object with a method answer(question: ParsedQuestion, retrieved: "
                    "list[str], ctx) -> ReaderAnswer (world.grading)")


def _check_reader(reader) -> None:
    """TypeError naming ``reader`` unless it is a Reader (an instance with a callable ``answer``)."""
    if isinstance(reader, type) or not callable(getattr(reader, "answer", None)):
        what = f"the class {reader.__name__} (pass an instance)" if isinstance(reader, type) else (
            f"an instance of {type(reader).__name__}, which has no callable answer")
        raise TypeError(f"reader must follow {_READER_PROTOCOL}; got {what}")


def _check_answer(reader, ans) -> ReaderAnswer:
    """``ans`` if it is a ReaderAnswer with a str answer and a list of memory ids in ``used``; else a
    TypeError naming the reader's class and the value it returned."""
    name = f"{type(reader).__name__}.answer"
    if not isinstance(ans, ReaderAnswer):
        raise TypeError(f"reader {name} returned {reprlib.repr(ans)} ({type(ans).__name__}); a Reader must return "
                        f"ReaderAnswer(answer: str, used: list of memory ids), e.g. ReaderAnswer('unknown')")
    if not isinstance(ans.answer, str):
        raise TypeError(f"reader {name} returned ReaderAnswer.answer={reprlib.repr(ans.answer)} "
                        f"({type(ans.answer).__name__}); it must be a str ('unknown' to abstain)")
    used = ans.used
    if isinstance(used, str) or not isinstance(used, (list, tuple)) or not all(isinstance(m, str) for m in used):
        raise TypeError(f"reader {name} returned ReaderAnswer.used={reprlib.repr(used)}; it must be a list of "
                        f"memory ids (str)")
    return ans


class _ReaderCtx:
    """ReaderContext over a world (payloads, links, version chains)."""

    def __init__(self, world: World):
        self.world = world
        self.store = world.store

    def payload(self, memory_id: str) -> dict | None:
        return self.world._payloads.get(memory_id)

    def content(self, memory_id: str) -> str:
        rec = self.store.get(memory_id)
        return rec.content if rec is not None else ""

    def neighbours(self, memory_id: str) -> list[str]:
        return _neighbours(self.store, memory_id)

    def chain(self, memory_id: str) -> list[str]:
        return _chain(self.store, memory_id)


def _chain(store, memory_id: str) -> list[str]:
    """Ids of ``memory_id``'s version chain, oldest first; ``[memory_id]`` without versions or when gone."""
    rec = store.get(memory_id)
    if rec is None or rec.key is None:
        return [memory_id]
    return [v.memory_id for v in store.versions(rec.key)] or [memory_id]


def _neighbours(store, memory_id: str) -> list[str]:
    """Memories joined to ``memory_id`` by a typed link, either direction (store order)."""
    rec = store.get(memory_id)
    if rec is None:
        return []
    out = [x for x in (rec.links or []) if x in store]
    for other in list(store.episodic.values()) + list(store.semantic.values()):
        if memory_id in (other.links or ()) and other.memory_id not in out:
            out.append(other.memory_id)
    return out


# ---------------------------------------------------------------------- views
@dataclass(frozen=True)
class MemoryInfo:
    memory_id: str
    content: str
    kind: str  # episodic | semantic
    step: int
    active: bool
    importance: float
    links: int
    tier: str


class WorldView:
    """Read-only access for agents: the current event, the store's contents, retrieval without
    ACT-R bumps, candidates. No payloads."""

    def __init__(self, world: World):
        self._w = world

    @property
    def event(self) -> Event:
        return self._w.event

    @property
    def config(self) -> WorldConfig:
        return self._w.config

    @property
    def step(self) -> int:
        return self._w.store.current_step

    def __len__(self) -> int:
        return len(self._w.store)

    def __contains__(self, memory_id: str) -> bool:
        return memory_id in self._w.store

    def ids(self) -> list[str]:
        s = self._w.store
        return list(s.episodic) + list(s.semantic)

    def candidates(self, k: int | None = None) -> list[str]:
        return self._w.candidates(k)

    def recent(self, n: int) -> list[str]:
        return self._w.store.recent_ids(n)

    # (an agent's free text is embedded apart from the world's perception cache: see _private)
    def query(self, text: str, top_k: int | None = None) -> list[str]:
        """Retrieval as QUERY does it, without bumping activations."""
        k = self._w.config.top_k if top_k is None else top_k
        with _private(self._w.store):
            return [r.memory_id for r in self._w.store.query(text, top_k=k, bump=False)]

    def similarities(self, text: str, ids: Sequence[str] | None = None):
        s = self._w.store
        with _private(s):
            return s.similarities(s.embed(text), ids)

    def embed(self, text: str) -> np.ndarray:
        with _private(self._w.store):
            return self._w.store.embed(text)

    def activations(self, ids: Sequence[str]) -> np.ndarray:
        return self._w.store.activations(list(ids))

    def content(self, memory_id: str) -> str:
        rec = self._w.store.get(memory_id)
        if rec is None:
            raise KeyError(f"no live memory {memory_id!r}")
        return rec.content

    def get(self, memory_id: str) -> MemoryInfo | None:
        s = self._w.store
        rec = s.get(memory_id)
        if rec is None:
            return None
        semantic = memory_id in s.semantic
        return MemoryInfo(
            memory_id, rec.content, "semantic" if semantic else "episodic",
            int(getattr(rec, "created_step", None) if semantic else rec.step), bool(rec.active),
            float(rec.importance), int(s.link_count(memory_id)), str(rec.tier),
        )

    def chain(self, memory_id: str) -> list[str]:
        """Ids of ``memory_id``'s version chain, oldest first (``[memory_id]`` for a memory without
        versions or one that is gone). A FORGET of it erases the whole chain, and with it (the erasure
        cascade) every REFLECT rule derived from a version of it: this lists the versions only. The
        store's structure, no payload."""
        return _chain(self._w.store, memory_id)

    def stats(self) -> dict:
        return dict(self._w.store.stats())

    def is_valid(self, op: int, target: str | None = None) -> tuple[bool, str | None]:
        return self._w.is_valid(op, target)


class OracleAccess:
    """Privileged access (oracle, grader, analysis tools): payloads of events and memories and the
    whole script, future included."""

    def __init__(self, world: World):
        self._w = world

    def query(self, text: str, top_k: int | None = None) -> list[str]:
        """:meth:`WorldView.query` through the world's perception cache (a privileged policy may look up
        the script's texts, future ones included, at the cache's speed)."""
        k = self._w.config.top_k if top_k is None else top_k
        return [r.memory_id for r in self._w.store.query(text, top_k=k, bump=False)]

    @property
    def event_payload(self) -> dict:
        return self._w._se.payload

    @property
    def script(self) -> list[ScriptEvent | None]:
        """Every event by index. An endless world releases old events (None at their index; the
        newest ``chunk`` + ``world.families.ENDLESS_HISTORY`` events are always kept)."""
        return self._w._gen.events

    def future_payload(self, index: int) -> dict | None:
        """The payload of event ``index`` whether the script holds it yet or not: an endless world places
        a thread's later events (its question) before it generates the window that holds them, so the
        question of a statement in this window may still be pending. None: no such event (released,
        or a free slot)."""
        events = self._w._gen.events
        if 0 <= index < len(events):
            e = events[index]
            return None if e is None else e.payload
        pending = self._w._gen._pending.get(index)
        return None if pending is None else pending[2]

    @property
    def index(self) -> int:
        return self._w._i

    def payload(self, memory_id: str) -> dict | None:
        return self._w._payloads.get(memory_id)

    def can_reflect(self, memory_id: str) -> bool:
        """Whether ``apply(REFLECT, memory_id)`` would consolidate something now: admissible
        (``World.is_valid``) and with a hidden cluster of >= 2 live, not superseded episodes."""
        w = self._w
        return w.is_valid(Op.REFLECT, memory_id)[0] and w._has_cluster(memory_id)

    @property
    def payloads(self) -> dict[str, dict]:
        """A copy of ``memory_id -> payload`` (use :meth:`items` to iterate without copying)."""
        return dict(self._w._payloads)

    def items(self):
        return self._w._payloads.items()

    def find(self, subject: str | None = None, relation: str | None = None, *, event: int | None = None,
             kinds: frozenset | set | None = None) -> list[str]:
        """Live memory ids whose payload matches (oldest first)."""
        w = self._w
        if subject is not None and relation is not None:
            pool = list(w._by_key.get((subject, relation), ()))
        else:
            pool = list(w._payloads)
        out = []
        for mid in pool:
            p = w._payloads[mid]
            if event is not None and p.get("event") != event:
                continue
            if subject is not None and p.get("subject") != subject:
                continue
            if relation is not None and p.get("relation") != relation:
                continue
            if kinds is not None and p.get("kind") not in kinds:
                continue
            out.append(mid)
        return out

    def neighbours(self, memory_id: str) -> list[str]:
        return _neighbours(self._w.store, memory_id)

    def chain(self, memory_id: str) -> list[str]:
        return _chain(self._w.store, memory_id)


# ---------------------------------------------------------------------- statistics
class _Stats:
    request_leaks = 0  # (class default: stats pickled before the count existed go on counting from 0)

    def __init__(self) -> None:
        self.events = 0
        self.live_sum = 0
        self.verdicts: Counter = Counter()
        self.by_family: dict[str, Counter] = {}
        self.ops: Counter = Counter()
        self.invalid = 0
        self.writes = 0
        self.duplicates = 0
        self.swept = 0
        self.recall_sum = 0.0
        self.recall_n = 0
        self.request_leaks = 0  # erasure requests never asked about whose value stayed (horizon end)
        self.terms = dict.fromkeys(REWARD_TERMS, 0.0)

    def add_terms(self, terms: dict[str, float]) -> None:
        acc = self.terms
        for k, v in terms.items():
            if v:  # (adding a zero changes no sum: a sum starts at 0.0 and so is never -0.0)
                acc[k] += v

    def record(self, family: str, verdict: str, recall: float | None) -> None:
        self.verdicts[verdict] += 1
        counts = self.by_family.get(family)
        if counts is None:  # (setdefault's Counter() default was built on every question)
            counts = self.by_family[family] = Counter()
        counts[verdict] += 1
        if recall is not None:
            self.recall_sum += recall
            self.recall_n += 1

    def summary(self, world: World) -> dict:
        n = sum(self.verdicts.values())
        verdicts = {v: int(self.verdicts.get(v, 0)) for v in VERDICTS}
        fam = {}
        for f in sorted(self.by_family):
            c = self.by_family[f]
            nf = sum(c.values())
            fam[f] = {"questions": nf, "correct": int(c["correct"]), "accuracy": c["correct"] / nf if nf else 0.0}
        events = max(1, self.events)

        def rate(k: int) -> float | None:
            # None without questions, as evidence_recall (the bench's NaN): 0.0 read as all answers wrong
            return k / n if n else None

        return {
            "family": world.config.family,
            "difficulty": world.config.difficulty,
            "seed": world.seed,
            "events": self.events,
            "questions": n,
            "accuracy": rate(verdicts["correct"]),
            "verdicts": verdicts,
            "stale_rate": rate(verdicts["stale"]),
            "hallucination_rate": rate(verdicts["hallucinated"]),
            "leak_rate": rate(verdicts["leaked"]),
            # erasure requests whose question the horizon cut off, still held at the end (see
            # World._check_unasked_requests), and every leak charged (questions + those requests)
            "request_leaks": self.request_leaks,
            "leaks": verdicts["leaked"] + self.request_leaks,
            "by_family": fam,
            # None when no question had evidence (all unanswerable / erased), as the bench's NaN: not 0
            "evidence_recall": self.recall_sum / self.recall_n if self.recall_n else None,
            "ops": {o.name: int(self.ops.get(o.name, 0)) for o in Op},
            "invalid": self.invalid,
            "writes": self.writes,
            "duplicates": self.duplicates,
            "swept": self.swept,
            "live_memories": len(world.store),
            "mean_live_memories": self.live_sum / events,
            "reward_terms": {k: float(v) for k, v in self.terms.items()},
            "return": float(sum(self.terms.values())),
            "level": world.level,
        }


__all__ = [
    "Op", "N_OPS", "TARGETED_OPS", "CREATING_OPS", "EVENT_KINDS", "REWARD_TERMS", "Event", "Outcome", "World",
    "WorldView", "OracleAccess", "MemoryInfo", "DEFAULT_REWARDS", "shared_embedder", "NO_CLUSTER",
]
