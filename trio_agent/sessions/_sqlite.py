"""``sqlite:PATH`` — sessions in one SQLite database file (stdlib ``sqlite3``).

Every operation is one transaction run in ``trio.to_thread.run_sync`` on the store's
connection (a ``trio.Lock`` keeps this process's calls in turn, SQLite keeps processes
in turn), except appends that can commit at once: :meth:`SqliteBackend.try_append_entries`
makes those on the Trio thread, on a second connection that never waits. Writes use
``BEGIN IMMEDIATE`` (or are one statement), so the claim check, the id check and the
insert of a batch are one transaction that other writers wait for. The database is in
WAL mode with ``synchronous=NORMAL``: a committed transaction survives the process being
killed; a power loss can lose the latest ones, never tear one.

``database is locked`` never reaches a caller: SQLite waits up to
:data:`BUSY_TIMEOUT_MS` for another writer, and when it still reports the database busy
(or locked), the transaction is rolled back and tried again after a bounded exponential
backoff on Trio's clock, for at most :data:`LOCKED_GIVE_UP_SECONDS` in all; then a
:class:`SessionStoreError` says the database stayed locked. Other SQLite failures (a
full disk, a read-only file) are :class:`SessionStoreError` too, after the rollback.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable
from typing import Any, Final, TypeVar

import trio

from ._backend import (
    Claim,
    JsonObject,
    LoadedSession,
    SessionBackend,
    check_acquire,
    check_append_claim,
    check_batch_ids,
    check_renew,
    dump_json,
)
from ._errors import (
    DuplicateEntryError,
    SessionExistsError,
    SessionNotFoundError,
    SessionStoreError,
)
from ._inbox import QueueBackend
from ._store import SessionStore

__all__ = ["BUSY_TIMEOUT_MS", "LOCKED_GIVE_UP_SECONDS", "SqliteBackend", "SqliteStore"]

T = TypeVar("T")

BUSY_TIMEOUT_MS: Final = 5_000
"""How long SQLite itself waits for another connection's lock (``PRAGMA busy_timeout``) by
default (``SqliteStore(path, busy_timeout_ms=...)``, ``open_store(url, busy_timeout_ms=...)``)."""

LOCKED_GIVE_UP_SECONDS: Final = 120.0
"""How long a transaction is retried while the database stays busy before giving up."""

CHECKPOINT_COMMITS: Final = 1000
"""Commits between two checkpoints of the WAL by this store: the commit that reaches it
runs in the worker thread, which then checkpoints (the one step that waits for the disk
under ``synchronous=NORMAL``). Neither connection checkpoints on its own."""

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    header TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS entries (
    position INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    id TEXT NOT NULL,
    body TEXT NOT NULL,
    UNIQUE (session_id, id)
);
CREATE TABLE IF NOT EXISTS claims (
    session_id TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    token TEXT NOT NULL,
    expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS queued (
    position INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    id TEXT NOT NULL,
    body TEXT NOT NULL,
    UNIQUE (session_id, id)
);
"""

_INSERT_UNDER_CLAIM: Final = (
    "INSERT INTO entries (session_id, id, body) SELECT ?, ?, ? WHERE EXISTS "
    "(SELECT 1 FROM claims WHERE session_id = ? AND token = ? AND expires_at > ?)"
)

# Writers take turns, so ``position`` (the rowid: one more than the largest) grows in
# commit order, and a session's entries read back in append order. The UNIQUE index
# refuses a duplicate id inside the insert itself.

_BUSY_CODES: Final = frozenset({5, 6})  # SQLITE_BUSY, SQLITE_LOCKED (and extended codes)


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in _BUSY_CODES
    text = str(exc)
    return "locked" in text or "busy" in text


class _Busy(Exception):
    """The transaction found the database busy and was rolled back."""


class SqliteBackend(SessionBackend, QueueBackend):
    """Sessions in an SQLite file (see the module docstring)."""

    def __init__(
        self, path: str | os.PathLike[str], *, busy_timeout_ms: int = BUSY_TIMEOUT_MS
    ) -> None:
        self.path = os.fspath(path)
        self.busy_timeout_ms = busy_timeout_ms
        self._connection: sqlite3.Connection | None = None
        self._inline: sqlite3.Connection | None = None
        self._commits = 0  # since the last checkpoint
        self._lock = trio.Lock()

    # --- transactions ------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        connection = self._connection
        if connection is None:
            connection = sqlite3.connect(
                self.path,
                timeout=self.busy_timeout_ms / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
            try:
                connection.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_ms)}")
                mode = connection.execute("PRAGMA journal_mode=WAL").fetchone()
                if mode is None or str(mode[0]).lower() != "wal":
                    raise sqlite3.OperationalError("database is locked")
                connection.execute("PRAGMA synchronous=NORMAL")
                connection.execute("PRAGMA wal_autocheckpoint=0")
                connection.execute("BEGIN IMMEDIATE")
                try:
                    # executescript() would commit first: one statement at a time.
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            connection.execute(statement)
                    connection.execute("COMMIT")
                except BaseException:
                    if connection.in_transaction:
                        connection.execute("ROLLBACK")
                    raise
            except BaseException:
                connection.close()
                raise
            self._connection = connection
        if self._inline is None:
            inline = sqlite3.connect(
                self.path, timeout=0, isolation_level=None, check_same_thread=False
            )
            try:
                for pragma in ("busy_timeout=0", "synchronous=NORMAL", "wal_autocheckpoint=0"):
                    inline.execute(f"PRAGMA {pragma}")
            except BaseException:
                inline.close()
                raise
            self._inline = inline
        return connection

    def _transaction(self, write: bool, body: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``body`` in one transaction in this thread; ``_Busy`` if SQLite was busy."""
        try:
            connection = self._connect()
        except sqlite3.Error as exc:
            if _is_busy(exc):
                raise _Busy from exc
            raise self._failure("open", exc) from None
        return self._within(connection, write, body)

    def _within(
        self, connection: sqlite3.Connection, write: bool, body: Callable[[sqlite3.Connection], T]
    ) -> T:
        try:
            connection.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            result = body(connection)
            connection.execute("COMMIT")
            if write:
                self._committed(connection)
            return result
        except BaseException as exc:
            try:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            if isinstance(exc, sqlite3.Error):
                if _is_busy(exc):
                    raise _Busy from exc
                raise self._failure("write" if write else "read", exc) from None
            raise

    def _committed(self, connection: sqlite3.Connection) -> None:
        """Count a commit; in the worker thread, checkpoint every CHECKPOINT_COMMITS."""
        self._commits += 1
        if connection is self._connection and self._commits >= CHECKPOINT_COMMITS:
            self._commits = 0
            # PASSIVE: copies what no reader still needs, never waits for other
            # connections; what it leaves, the next checkpoint takes.
            connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def _failure(self, action: str, exc: sqlite3.Error) -> SessionStoreError:
        error = SessionStoreError(f"cannot {action} the session database {self.path}: {exc}")
        error.__cause__ = exc
        return error

    async def _run(self, write: bool, body: Callable[[sqlite3.Connection], T]) -> T:
        delay = 0.005
        waited = 0.0
        async with self._lock:
            while True:
                try:
                    # Not abandoned on cancel: the transaction commits or rolls back first.
                    return await trio.to_thread.run_sync(self._transaction, write, body)
                except _Busy as busy:
                    if waited >= LOCKED_GIVE_UP_SECONDS:
                        error = SessionStoreError(
                            f"the session database {self.path} stayed locked by other "
                            f"writers for {waited + self.busy_timeout_ms / 1000:.0f} s"
                        )
                        raise error from busy.__cause__
                await trio.sleep(delay)
                waited += delay
                delay = min(delay * 2, 1.0)

    # --- the interface -------------------------------------------------------------------------

    async def create_session(self, header: JsonObject, entries: list[JsonObject]) -> None:
        session_id = header["id"]
        check_batch_ids(session_id, entries, lambda _: False)
        header_text = dump_json(header)
        rows = [(session_id, e["id"], dump_json(e)) for e in entries]

        def body(db: sqlite3.Connection) -> None:
            try:
                db.execute(
                    "INSERT INTO sessions (id, header) VALUES (?, ?)",
                    (session_id, header_text),
                )
            except sqlite3.IntegrityError:
                raise SessionExistsError(session_id) from None
            db.executemany("INSERT INTO entries (session_id, id, body) VALUES (?, ?, ?)", rows)

        await self._run(True, body)

    async def load_session(self, session_id: str) -> LoadedSession:
        def body(db: sqlite3.Connection) -> LoadedSession:
            row = db.execute("SELECT header FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if row is None:
                raise SessionNotFoundError(session_id)

            entries = [
                json.loads(text)
                for (text,) in db.execute(
                    "SELECT body FROM entries WHERE session_id = ? ORDER BY position", (session_id,)
                )
            ]
            return LoadedSession(header=json.loads(row[0]), entries=entries)

        return await self._run(False, body)

    @staticmethod
    def _claim(db: sqlite3.Connection, session_id: str) -> Claim | None:
        row = db.execute(
            "SELECT holder, token, expires_at FROM claims WHERE session_id = ?", (session_id,)
        ).fetchone()
        return None if row is None else Claim(holder=row[0], token=row[1], expires_at=row[2])

    @staticmethod
    def _require(db: sqlite3.Connection, session_id: str) -> None:
        row = db.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if row is None:
            raise SessionNotFoundError(session_id)

    def _append(
        self, session_id: str, entries: list[JsonObject], claim_token: str | None, now: float
    ) -> Callable[[sqlite3.Connection], None]:
        check_batch_ids(session_id, entries, lambda _: False)  # repeated inside the batch
        rows = [(session_id, entry["id"], dump_json(entry)) for entry in entries]

        def body(db: sqlite3.Connection) -> None:
            # One query reads both whether the session exists and its claim.
            found = db.execute(
                "SELECT c.holder, c.token, c.expires_at FROM sessions AS s "
                "LEFT JOIN claims AS c ON c.session_id = s.id WHERE s.id = ?",
                (session_id,),
            ).fetchone()
            if found is None:
                raise SessionNotFoundError(session_id)
            claim = (
                None
                if found[0] is None
                else Claim(holder=found[0], token=found[1], expires_at=found[2])
            )
            check_append_claim(session_id, claim, claim_token, now)
            db.execute("SAVEPOINT batch")
            try:
                db.executemany("INSERT INTO entries (session_id, id, body) VALUES (?, ?, ?)", rows)
            except sqlite3.IntegrityError:
                db.execute("ROLLBACK TO batch")  # the rows inserted before the duplicate
                taken = {
                    entry_id
                    for (entry_id,) in db.execute(
                        "SELECT id FROM entries WHERE session_id = ? AND id IN "
                        f"({', '.join('?' * len(rows))})",
                        (session_id, *(row[1] for row in rows)),
                    )
                }
                check_batch_ids(session_id, entries, taken.__contains__)
                raise

        return body

    async def append_entries(
        self, session_id: str, entries: list[JsonObject], *, claim_token: str | None, now: float
    ) -> None:
        await self._run(True, self._append(session_id, entries, claim_token, now))

    def try_append_entries(
        self, session_id: str, entries: list[JsonObject], *, claim_token: str | None, now: float
    ) -> bool:
        """Commit on the calling thread when the database is free at once.

        A second connection, used only on the Trio thread, that never waits
        (``busy_timeout`` 0): a commit that finds another writer's lock (another
        process's, or this store's worker thread's) gives up at once (``False``), and
        the commit that reaches :data:`CHECKPOINT_COMMITS` goes through the worker
        thread, which then checkpoints the WAL (the only step that waits for the disk
        under ``synchronous=NORMAL``). ``False`` too before the first operation of the
        store, which opens the connections in the worker thread. (The count of commits
        is shared by both threads without a lock: an increment lost to a race moves a
        checkpoint by one commit.)
        """
        connection = self._inline
        if connection is None or self._commits + 1 >= CHECKPOINT_COMMITS:
            return False
        if len(entries) == 1 and claim_token is not None:
            # The common case, one entry under a claim, in one statement (which SQLite
            # commits on its own); when it inserts nothing, the full path says why.
            (entry,) = entries
            try:
                inserted = connection.execute(
                    _INSERT_UNDER_CLAIM,
                    (session_id, entry["id"], dump_json(entry), session_id, claim_token, now),
                ).rowcount
            except sqlite3.IntegrityError:
                raise DuplicateEntryError(session_id, entry["id"]) from None
            except sqlite3.Error as exc:
                if _is_busy(exc):
                    return False
                raise self._failure("write", exc) from None
            if inserted:
                self._commits += 1
                return True
        body = self._append(session_id, entries, claim_token, now)
        try:
            self._within(connection, True, body)
        except _Busy:
            return False
        return True

    async def list_sessions(self) -> list[JsonObject]:

        def body(db: sqlite3.Connection) -> list[JsonObject]:
            return [json.loads(text) for (text,) in db.execute("SELECT header FROM sessions")]

        return await self._run(False, body)

    async def delete_session(self, session_id: str) -> None:
        def body(db: sqlite3.Connection) -> None:
            self._require(db, session_id)
            for table, key in (
                ("entries", "session_id"),
                ("claims", "session_id"),
                ("queued", "session_id"),
            ):
                db.execute(f"DELETE FROM {table} WHERE {key} = ?", (session_id,))
            db.execute("DELETE FROM sessions WHERE id = ?", (session_id,))

        await self._run(True, body)

    async def acquire_claim(
        self, session_id: str, *, holder: str, token: str, now: float, expires_at: float
    ) -> None:
        def body(db: sqlite3.Connection) -> None:
            self._require(db, session_id)
            check_acquire(session_id, self._claim(db, session_id), token, now)
            db.execute(
                "INSERT OR REPLACE INTO claims (session_id, holder, token, expires_at) "
                "VALUES (?, ?, ?, ?)",
                (session_id, holder, token, expires_at),
            )

        await self._run(True, body)

    async def renew_claim(
        self, session_id: str, *, holder: str, token: str, now: float, expires_at: float
    ) -> None:
        def body(db: sqlite3.Connection) -> None:
            check_renew(session_id, self._claim(db, session_id), token, holder, now)
            db.execute(
                "UPDATE claims SET expires_at = ? WHERE session_id = ?", (expires_at, session_id)
            )

        await self._run(True, body)

    async def release_claim(self, session_id: str, *, token: str) -> None:
        def body(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM claims WHERE session_id = ? AND token = ?", (session_id, token))

        await self._run(True, body)

    async def aclose(self) -> None:
        async with self._lock:
            connections = [c for c in (self._connection, self._inline) if c is not None]
            self._connection = self._inline = None

            def close() -> None:
                for connection in connections:
                    connection.close()

            await trio.to_thread.run_sync(close)

    # --- queued messages (see _inbox.py; the owner's inbox polls) ----------------------------

    async def enqueue_message(self, session_id: str, item: JsonObject) -> None:
        text = dump_json(item)

        def body(db: sqlite3.Connection) -> None:
            self._require(db, session_id)
            db.execute(
                "INSERT INTO queued (session_id, id, body) VALUES (?, ?, ?)",
                (session_id, item["id"], text),
            )

        await self._run(True, body)

    async def take_queued(
        self, session_id: str, *, claim_token: str, now: float
    ) -> list[JsonObject]:
        def body(db: sqlite3.Connection) -> list[str]:
            self._require(db, session_id)
            check_append_claim(session_id, self._claim(db, session_id), claim_token, now)
            # Delivered: its id is an entry of the session.
            db.execute(
                "DELETE FROM queued WHERE session_id = ? AND id IN "
                "(SELECT id FROM entries WHERE session_id = ?)",
                (session_id, session_id),
            )
            rows = db.execute(
                "SELECT body FROM queued WHERE session_id = ? ORDER BY position", (session_id,)
            )
            return [text for (text,) in rows]

        return [json.loads(text) for text in await self._run(True, body)]


class SqliteStore(SessionStore):
    """Sessions in an SQLite database file (``open_store("sqlite:PATH")``)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        **options: Any,
    ) -> None:
        super().__init__(SqliteBackend(path, busy_timeout_ms=busy_timeout_ms), **options)
