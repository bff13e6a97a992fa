"""Saving a ``MemoryStore`` to one SQLite file and loading it back, exactly.

File format (``FORMAT_VERSION`` 1), one SQLite database written by the standard library's sqlite3:

* ``PRAGMA application_id`` = 0x4D454D47 ("MEMG") marks a memgym store, ``PRAGMA user_version`` holds
  the format version (also in ``meta.format_version``);
* ``meta(name, value)``: JSON values: ``format_version``, ``state_schema`` (the store's
  ``_export_state()["schema"]``), ``meta`` (clock, counters, store config), ``extra`` (attached
  components: rolling summaries), ``dim`` (embedding width), ``counts`` (rows per table) and
  ``crc32`` (per-table CRC-32 of the stored bytes, so that a flipped byte inside a row, which SQLite
  itself would not notice, is caught);
* ``records(seq, id, kind, namespace, key, data)``: one JSON document per record, in export order;
* ``edges(seq, src, dst, rel, weight)``: typed links and derived-from edges (cue edges are rebuilt);
* ``actr(seq, id, data)``: ACT-R history per memory (JSON);
* ``embeddings(seq, id, vec)``: one little-endian float32 blob per row.

Saving: the whole state goes into a temporary file in the target's directory, in a single
transaction, journal in memory (no WAL, no -journal file next to the store), ``secure_delete`` on,
then the file is fsynced and renamed over the target (``os.replace``, atomic on POSIX and Windows;
a target that is a symbolic link is followed, so the file it points to is the one replaced).
A crash leaves either the old file or the new one, never a mix; the bytes of a saved file hold only
what the store held at that moment (an erased memory is gone from every file saved after the erase).

Loading reads and checks everything before it builds the store: a missing file, a file that is not
SQLite, a SQLite file that is not a memgym store, another format version, a truncated file, a row
whose checksum does not match or a state the store rejects all raise ``StoreFileError`` naming the
path and the problem; the caller never gets a half-loaded store.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import sqlite3
import tempfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from world.embedding import check_embedder_config

__all__ = ["StoreFileError", "save_store", "load_store", "FORMAT_VERSION", "APPLICATION_ID"]

FORMAT_VERSION = 1
APPLICATION_ID = 0x4D454D47  # "MEMG"
_SQLITE_MAGIC = b"SQLite format 3\x00"
_TABLES = ("records", "edges", "actr", "embeddings")
#: How long (seconds) a load waits for another connection's lock on the file (SQLite's busy timeout;
#: sqlite3's default) before it fails with a StoreFileError saying the file is locked.
BUSY_TIMEOUT = 5.0

_SCHEMA = """
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE records (seq INTEGER PRIMARY KEY, id TEXT NOT NULL, kind TEXT NOT NULL,
                      namespace TEXT, key TEXT, data TEXT NOT NULL);
CREATE TABLE edges (seq INTEGER PRIMARY KEY, src TEXT NOT NULL, dst TEXT NOT NULL, rel TEXT NOT NULL,
                    weight);
CREATE TABLE actr (seq INTEGER PRIMARY KEY, id TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE embeddings (seq INTEGER PRIMARY KEY, id TEXT NOT NULL, vec BLOB NOT NULL);
"""


class StoreFileError(Exception):
    """A store file cannot be written or read. ``path`` and ``problem`` say which and why."""

    def __init__(self, path: str | os.PathLike, problem: str) -> None:
        self.path = os.fspath(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


# --------------------------------------------------------------------------------------------- #
# helpers                                                                                       #
# --------------------------------------------------------------------------------------------- #


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, set | frozenset):
        return sorted(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON-serialisable")


def _dumps(obj: Any) -> str:
    return json.dumps(obj, default=_json_default, ensure_ascii=False, separators=(",", ":"))


def _edge_weight(weight: Any) -> int | float:
    if isinstance(weight, bool | np.bool_):
        return int(weight)
    if isinstance(weight, int | np.integer):
        return int(weight)
    return float(weight)


def _text_crc(rows: Any, blob: bytes = b"") -> int:
    """CRC-32 of one table: its rows' text cells joined by US (0x1f), rows by RS (0x1e), then its
    blobs. A cell of another type than str only comes from a corrupted row: TypeError."""
    text = "\x1e".join("\x1f".join(cells) for cells in rows)
    return zlib.crc32(blob, zlib.crc32(text.encode("utf-8", "surrogatepass")))


@contextlib.contextmanager
def _no_gc():
    """Pause the cyclic garbage collector during bulk (de)serialisation: the hundreds of thousands of
    small containers created would trigger many full collections for nothing (3x slower loads)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _export(store: Any) -> dict:
    """The store's state; attached components (rolling summaries) are in its "extra"."""
    return store._export_state()


# --------------------------------------------------------------------------------------------- #
# save                                                                                          #
# --------------------------------------------------------------------------------------------- #


def save_store(store: Any, path: str | os.PathLike) -> Path:
    """Write ``store`` to ``path`` atomically (temp file in the same directory, then rename).

    Returns the path written. Raises ``StoreFileError`` if the directory does not exist or the state
    cannot be written; an existing file at ``path`` is then left as it was."""
    path = Path(path)
    # a symbolic link is followed: the file it points to is replaced (replacing the link itself would
    # leave the old bytes, erased memories included, in the file it pointed to)
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise StoreFileError(path, f"cannot save: directory {os.fspath(directory)!r} does not exist")
    if target.is_dir():
        raise StoreFileError(path, "cannot save: the path is a directory")
    try:
        with _no_gc():
            state = _export(store)
            rows = _rows(state)
    except (TypeError, ValueError, KeyError) as exc:
        raise StoreFileError(path, f"cannot save: the store state is not serialisable ({exc})") from exc

    # (a short fixed prefix: the target's own name may be as long as the file system allows)
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=".memgym-", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise StoreFileError(path, f"cannot save: no temporary file can be made in {os.fspath(directory)!r} "
                                   f"({exc.strerror or exc})") from exc
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        _write_sqlite(tmp, rows)
        if target.exists():
            os.chmod(tmp, target.stat().st_mode & 0o777)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, sqlite3.Error | OSError):
            raise StoreFileError(path, f"cannot save: {exc}") from exc
        if isinstance(exc, UnicodeError):
            # SQLite stores text as UTF-8: a string with a lone surrogate (the store refuses one in a
            # write, but a record's fields can be set afterwards) is found only when it is bound
            raise StoreFileError(path, f"cannot save: {_unencodable(state)} holds a string with no UTF-8 form "
                                       f"(a lone surrogate, half of a UTF-16 pair); nothing was written") from exc
        raise
    _fsync_dir(directory)
    return path


def _has_unencodable(value: Any) -> bool:
    """True if ``value`` (a JSON-like tree) holds a string, as a value or a key, with no UTF-8 form."""
    if isinstance(value, str):
        if value.isascii():
            return False
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_has_unencodable(k) or _has_unencodable(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_has_unencodable(v) for v in value)
    return False


def _unencodable(state: dict) -> str:
    """Where the exported state holds a string with no UTF-8 form: "record 'ep_000001', field
    'source'", or the part of the state (only called once a save failed on one)."""
    for rec in state.get("records", ()):
        for name, value in rec.items():
            if _has_unencodable(value):
                return f"record {rec.get('memory_id')!r}, field {name!r}"
    for name, value in (state.get("extra") or {}).items():
        if _has_unencodable(value):
            return f"the state of {name!r} (state['extra'][{name!r}])"
    for part in ("meta", "edges", "actr", "embedding_ids"):
        if _has_unencodable(state.get(part)):
            return f"the store's {part}"
    return "the store state"


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # e.g. Windows: directories cannot be opened
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _rows(state: dict) -> dict:
    """Everything that goes into the file, serialised, with per-table CRCs and counts."""
    records = []
    for seq, rec in enumerate(state["records"]):
        data = _dumps(rec)
        rid, kind = str(rec["memory_id"]), str(rec["kind"])
        ns, key = rec.get("namespace"), rec.get("key")
        records.append((seq, rid, kind, None if ns is None else str(ns), None if key is None else str(key), data))
    edges = [(seq, str(src), str(dst), str(rel), _edge_weight(w))
             for seq, (src, dst, rel, w) in enumerate(state["edges"])]
    actr = [(seq, str(mid), _dumps(entry)) for seq, (mid, entry) in enumerate(state["actr"].items())]
    ids = [str(i) for i in state["embedding_ids"]]
    matrix = np.asarray(state["embeddings"])
    if matrix.ndim != 2 or matrix.shape[0] != len(ids):
        raise ValueError(f"embeddings has shape {matrix.shape}, expected ({len(ids)}, d)")
    matrix = np.ascontiguousarray(matrix, dtype="<f4")
    embeddings = [(seq, mid, row.tobytes()) for seq, (mid, row) in enumerate(zip(ids, matrix))]
    crc32 = {
        "records": _text_crc((r[1], r[2], r[5]) for r in records),
        "edges": _text_crc((e[1], e[2], e[3], repr(e[4])) for e in edges),
        "actr": _text_crc((a[1], a[2]) for a in actr),
        "embeddings": _text_crc([ids], matrix.tobytes()),
    }
    meta = {
        "format_version": FORMAT_VERSION,
        "state_schema": state["schema"],
        "meta": state["meta"],
        "extra": state.get("extra") or {},
        "dim": int(matrix.shape[1]),
        "counts": {"records": len(records), "edges": len(edges), "actr": len(actr), "embeddings": len(embeddings)},
    }
    meta_rows = [(k, _dumps(v)) for k, v in meta.items()]
    crc32["meta"] = _text_crc(meta_rows)
    meta_rows.append(("crc32", _dumps(crc32)))
    return {"meta": meta_rows, "records": records, "edges": edges, "actr": actr, "embeddings": embeddings}


def _write_sqlite(tmp: Path, rows: dict) -> None:
    conn = sqlite3.connect(os.fspath(tmp), isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=MEMORY")  # no WAL, no -journal file beside the store
        conn.execute("PRAGMA synchronous=OFF")  # we fsync once, after the commit, before the rename
        # explicitly, whatever the SQLite build's default: freed pages are overwritten
        conn.execute("PRAGMA secure_delete=ON")
        if conn.execute("PRAGMA secure_delete").fetchone()[0] != 1:
            raise sqlite3.OperationalError("this SQLite build cannot turn secure_delete on")
        conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version={FORMAT_VERSION}")
        conn.execute("BEGIN")
        for statement in _SCHEMA.strip().split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.executemany("INSERT INTO meta VALUES (?, ?)", rows["meta"])
        conn.executemany("INSERT INTO records VALUES (?, ?, ?, ?, ?, ?)", rows["records"])
        conn.executemany("INSERT INTO edges VALUES (?, ?, ?, ?, ?)", rows["edges"])
        conn.executemany("INSERT INTO actr VALUES (?, ?, ?)", rows["actr"])
        conn.executemany("INSERT INTO embeddings VALUES (?, ?, ?)", rows["embeddings"])
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    finally:
        conn.close()


# --------------------------------------------------------------------------------------------- #
# load                                                                                          #
# --------------------------------------------------------------------------------------------- #


def load_store(path: str | os.PathLike, embedder: Any = None, *, summarizers: dict | None = None):
    """Load a store saved by ``save_store``. ``embedder`` embeds texts written after the load (it
    should be the one the store was built with; stored vectors are used as they are).
    ``summarizers`` maps a namespace to the summarizer its rolling summary should keep using, for
    summarizers that cannot be saved (an LLM client); extractive ones are restored from the file.

    Raises ``StoreFileError`` (naming the path and the problem) for anything but a valid store file."""
    from world.memory import MemoryStore
    from world.summary import restore_summaries

    path = Path(path)
    with _no_gc():
        state = _read_state(path)
    _check_embedder(path, state["meta"], embedder)
    try:
        with _no_gc():
            store = MemoryStore._from_state(state, embedder)
        restore_summaries(store)
    except StoreFileError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure here means the file's contents are inconsistent
        raise StoreFileError(path, f"inconsistent store contents: {type(exc).__name__}: {exc}") from exc
    if summarizers:
        restore_summaries(store, None, summarizers)
    return store


def _check_embedder(path: Path, meta: Any, embedder: Any) -> None:
    """The caller's embedder must match the file's: a clear ValueError now, not a wrong dimension at
    the first query."""
    if not isinstance(meta, dict):
        raise StoreFileError(path, "corrupted store: meta is not an object")
    name, dim = meta.get("embedder"), meta.get("dim")
    if embedder is None:
        if dim and not str(name).startswith("hashing-"):
            raise ValueError(f"{os.fspath(path)}: embedder: the store was built with {name!r}; "
                             f"pass that embedder, load_store(path, embedder=...)")
        return
    have = getattr(embedder, "dim", None)
    if dim and isinstance(have, int) and have != dim:
        raise ValueError(f"{os.fspath(path)}: embedder: the store holds {dim}-d embeddings ({name!r}), "
                         f"the embedder given makes {have}-d ones")
    try:  # another model of the same width, or a hashing embedder of other settings (bigram_weight)
        check_embedder_config(meta.get("embedder_config"), embedder, saved_name=name)
    except ValueError as exc:
        raise ValueError(f"{os.fspath(path)}: {exc}") from None


def _check_header(path: Path) -> None:
    if not path.exists():
        raise StoreFileError(path, "no such file")
    if path.is_dir():
        raise StoreFileError(path, "is a directory, not a store file")
    size = path.stat().st_size
    with open(path, "rb") as fh:
        header = fh.read(100)
    if not header.startswith(_SQLITE_MAGIC):
        if size == 0:
            raise StoreFileError(path, "empty file, not a memgym store")
        if _SQLITE_MAGIC.startswith(header):
            raise StoreFileError(path, f"truncated: {size} bytes, shorter than a SQLite header")
        raise StoreFileError(path, "not a SQLite database (bad header), so not a memgym store")
    if len(header) < 100:
        raise StoreFileError(path, f"truncated: {size} bytes, shorter than the 100-byte SQLite header")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    n_pages = int.from_bytes(header[28:32], "big")
    change_counter = header[24:28]
    valid_for = header[92:96]
    if page_size < 512 or page_size & (page_size - 1):
        raise StoreFileError(path, f"corrupted SQLite header (page size {page_size})")
    if n_pages and change_counter == valid_for and size < n_pages * page_size:
        raise StoreFileError(path, f"truncated: the header says {n_pages * page_size} bytes, the file has {size}")
    if size % page_size:
        raise StoreFileError(path, f"truncated or corrupted: size {size} is not a multiple of the page size "
                                   f"{page_size}")


def _read_state(path: Path) -> dict:
    _check_header(path)
    uri = Path(os.path.abspath(path)).as_uri() + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT)
    except sqlite3.Error as exc:
        raise StoreFileError(path, f"cannot open as SQLite: {exc}") from exc
    try:
        return _read(conn, path)
    except StoreFileError:
        raise
    except sqlite3.OperationalError as exc:
        if _locked(exc):
            # (a lock is an OperationalError, so a DatabaseError: it was reported as a corrupted file,
            # and a user may delete a good one because of it)
            raise StoreFileError(path, f"locked by another process or connection (waited {BUSY_TIMEOUT:g} s: "
                                       f"{exc}); retry once it is released") from exc
        raise StoreFileError(path, f"corrupted SQLite file: {exc}") from exc
    except sqlite3.DatabaseError as exc:
        raise StoreFileError(path, f"corrupted SQLite file: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - whatever a corrupted row makes fail, the file is bad
        raise StoreFileError(path, f"corrupted store contents: {type(exc).__name__}: {exc}") from exc
    finally:
        conn.close()


def _locked(exc: sqlite3.OperationalError) -> bool:
    """Whether SQLite failed because another connection holds a lock (SQLITE_BUSY / SQLITE_LOCKED,
    extended codes included), not because the file is bad."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)  # (a Python without sqlite_errorcode)


def _read(conn: sqlite3.Connection, path: Path) -> dict:
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    if app_id != APPLICATION_ID:
        raise StoreFileError(path, f"a SQLite database but not a memgym store (application_id {app_id:#x}, "
                                   f"expected {APPLICATION_ID:#x})")
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version != FORMAT_VERSION:
        raise StoreFileError(path, f"store file format version {version}; this memgym reads version "
                                   f"{FORMAT_VERSION} only")
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    missing = [t for t in ("meta", *_TABLES) if t not in tables]
    if missing:
        raise StoreFileError(path, f"corrupted store: missing table(s) {', '.join(missing)}")
    meta_rows = conn.execute("SELECT name, value FROM meta ORDER BY rowid").fetchall()
    meta = {name: json.loads(value) for name, value in meta_rows}
    need = ("format_version", "state_schema", "meta", "extra", "dim", "counts", "crc32")
    absent = [k for k in need if k not in meta]
    if absent:
        raise StoreFileError(path, f"corrupted store: meta lacks {', '.join(absent)}")
    if meta["format_version"] != FORMAT_VERSION:
        raise StoreFileError(path, f"store file format version {meta['format_version']}; this memgym reads "
                                   f"version {FORMAT_VERSION} only")
    crc32 = meta["crc32"]
    if not isinstance(crc32, dict) or _text_crc((n, v) for n, v in meta_rows if n != "crc32") != crc32.get("meta"):
        raise StoreFileError(path, "corrupted store: checksum mismatch in table meta")

    def check(table: str, n_rows: int, crc: int) -> None:
        if n_rows != meta["counts"].get(table):
            raise StoreFileError(path, f"corrupted store: table {table} has {n_rows} rows, "
                                       f"the file says {meta['counts'].get(table)}")
        if crc != crc32.get(table):
            raise StoreFileError(path, f"corrupted store: checksum mismatch in table {table}")

    # every table: checksum first, then one JSON parse for all its rows
    rows = conn.execute("SELECT id, kind, data FROM records ORDER BY seq").fetchall()
    check("records", len(rows), _text_crc(rows))
    records = json.loads("[" + ",".join(r[2] for r in rows) + "]")
    edges = [list(r) for r in conn.execute("SELECT src, dst, rel, weight FROM edges ORDER BY seq")]
    check("edges", len(edges), _text_crc((s, d, r, repr(w)) for s, d, r, w in edges))
    rows = conn.execute("SELECT id, data FROM actr ORDER BY seq").fetchall()
    check("actr", len(rows), _text_crc(rows))
    actr = dict(zip((r[0] for r in rows), json.loads("[" + ",".join(r[1] for r in rows) + "]")))
    dim = int(meta["dim"])
    rows = conn.execute("SELECT id, vec FROM embeddings ORDER BY seq").fetchall()
    for mid, blob in rows:
        if not isinstance(blob, bytes) or len(blob) != 4 * dim:
            size = len(blob) if isinstance(blob, bytes) else type(blob).__name__
            raise StoreFileError(path, f"corrupted store: embedding of {mid!r} is {size}, expected {4 * dim} bytes")
    ids = [r[0] for r in rows]
    data = b"".join(r[1] for r in rows)
    check("embeddings", len(ids), _text_crc([ids], data))
    if len(actr) != meta["counts"]["actr"] or len(records) != meta["counts"]["records"]:
        raise StoreFileError(path, "corrupted store: row count does not match the parsed contents")
    matrix = np.frombuffer(data, dtype="<f4").reshape(len(ids), dim).astype(np.float32)
    return {
        "schema": meta["state_schema"],
        "meta": meta["meta"],
        "records": records,
        "edges": edges,
        "actr": actr,
        "embedding_ids": ids,
        "embeddings": matrix,
        "extra": meta["extra"],
    }
