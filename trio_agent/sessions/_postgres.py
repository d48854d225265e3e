"""``postgresql://…`` — sessions in PostgreSQL, for several worker processes over one database.

psycopg 3 (with ``psycopg-pool``) through its synchronous API: psycopg's async API runs on
asyncio only. Each operation is one transaction run in a worker thread on a connection
of the store's pool (the extra ``trio-agent[postgres]`` installs both packages; they are
imported when the first PostgreSQL store is built).

Schema. Four tables (``sessions``, ``entries``, ``claims``, ``queued``) and
``trio_agent_schema`` holding the schema version, in the schema named by ``schema=``
(``public`` by default), created on first use under a transaction-scoped advisory lock,
so that processes starting together create them once. A database whose schema version
is newer than this module knows is refused with :class:`SessionStoreError`.

Headers and entries are stored as ``text``, exactly as serialized: ``jsonb`` would
reorder keys and refuse a ``\\u0000`` in a tool's output, and the store only ever reads a
session whole.

Atomicity. ``append_entries`` locks the session's row (``SELECT … FOR UPDATE``), checks
the claim and the ids, inserts the batch and commits: claims and appends of one session
are serialized by that row lock, in this process and in every other.

Cancellation. A Trio task cancelled while its query runs asks the server to cancel the
query (``connection.cancel_safe()`` from another thread); the transaction rolls back, the
connection goes back to the pool in a clean state, and then ``trio.Cancelled`` is raised.
Until then the task waits, so a cancelled call never leaves half a batch, and a query
that finished before the cancel arrived keeps its result (a commit is a commit).

Failures. A psycopg error (a lost connection, a server that shut down, a full disk)
becomes :class:`SessionStoreError` with the driver's exception as its cause, after the
rollback; a broken connection is discarded by the pool, which opens a new one for the
next call. A connection lost during ``COMMIT`` leaves the batch committed whole or not
at all; the caller cannot tell which, and a retry of the same entries then either
succeeds or is refused as :class:`DuplicateEntryError`.

Queued messages. ``enqueue_message`` inserts a row and sends ``NOTIFY`` with the session
id on the schema's channel in the same transaction (delivered on commit). The store's
inboxes share one connection that ``LISTEN``\\s on it (see :class:`_Notifications` and
:mod:`trio_agent.sessions._inbox`).
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

import attrs
import outcome
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
from ._errors import SessionExistsError, SessionNotFoundError, SessionStoreError
from ._inbox import QueueBackend, QueueListener
from ._store import SessionStore

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

__all__ = ["SCHEMA_VERSION", "PostgresBackend", "PostgresStore"]

T = TypeVar("T")

SCHEMA_VERSION: Final = 1
"""The version of the tables this module creates and reads."""

EXTRA_HINT: Final = (
    "the PostgreSQL session store needs psycopg 3 and psycopg-pool: "
    "pip install 'trio-agent[postgres]'"
)

_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")

# One advisory lock key for creating the tables (any 64-bit number, fixed forever).
_SCHEMA_LOCK_KEY: Final = 0x7472696F5F616731  # "trio_ag1"


def _import_psycopg() -> tuple[Any, Any]:
    """``(psycopg, psycopg_pool)``, or an ImportError that names the extra."""
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:
        raise ImportError(EXTRA_HINT) from exc
    return psycopg, psycopg_pool


def _schema_sql(schema: str) -> str:
    return f"""
CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE IF NOT EXISTS {schema}.trio_agent_schema (
    version integer NOT NULL
);
CREATE TABLE IF NOT EXISTS {schema}.sessions (
    id text PRIMARY KEY,
    header text NOT NULL,
    next_seq integer NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS {schema}.entries (
    session_id text NOT NULL REFERENCES {schema}.sessions (id) ON DELETE CASCADE,
    seq integer NOT NULL,
    id text NOT NULL,
    body text NOT NULL,
    PRIMARY KEY (session_id, seq),
    UNIQUE (session_id, id)
);
CREATE TABLE IF NOT EXISTS {schema}.claims (
    session_id text PRIMARY KEY REFERENCES {schema}.sessions (id) ON DELETE CASCADE,
    holder text NOT NULL,
    token text NOT NULL,
    expires_at double precision NOT NULL
);
CREATE TABLE IF NOT EXISTS {schema}.queued (
    seq bigserial PRIMARY KEY,
    session_id text NOT NULL REFERENCES {schema}.sessions (id) ON DELETE CASCADE,
    id text NOT NULL,
    body text NOT NULL,
    UNIQUE (session_id, id)
)
"""


def channel_name(schema: str) -> str:
    """The ``NOTIFY`` channel of a schema's queued messages (the payload is the session
    id)."""
    return f"trio_agent_queued_{schema}".lower()[:63]


class _Call:
    """One operation in a worker thread, and how the Trio side cancels it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.connection: Any = None
        self.cancelled = False

    def cancel(self) -> None:
        """Called from a thread of its own when the waiting task is cancelled."""
        with self.lock:
            self.cancelled = True
            connection = self.connection
        if connection is not None:
            try:
                connection.cancel_safe(timeout=5.0)
            except Exception:
                # The query ends anyway (and rolls back if it was cancelled); a failed
                # cancel request only means the call runs to its end.
                pass


class _CancelledBeforeQuery(Exception):
    """The waiting task was cancelled before the call had a connection."""


class PostgresBackend(SessionBackend, QueueBackend):
    """Sessions in a PostgreSQL database (see the module docstring).

    Args:
        url: A libpq connection string or URL (``postgresql://user:pw@host:port/db``).
        schema: The PostgreSQL schema holding the tables (created if missing).
        min_size: Connections the pool keeps open.
        max_size: At most this many connections (and concurrent operations).
        connect_timeout: Seconds to wait for a connection from the pool before the
            operation fails with :class:`SessionStoreError`.
    """

    def __init__(
        self,
        url: str,
        *,
        schema: str = "public",
        min_size: int = 1,
        max_size: int = 8,
        connect_timeout: float = 30.0,
    ) -> None:
        self._psycopg, self._psycopg_pool = _import_psycopg()
        if not _SCHEMA_NAME.fullmatch(schema):
            raise ValueError(f"a PostgreSQL schema name must be a plain identifier, not {schema!r}")
        self.url = url
        self.schema = schema
        self.connect_timeout = connect_timeout
        self._connect_seconds = max(1, math.ceil(connect_timeout))  # libpq: whole seconds
        self._q = f'"{schema}"'
        self._pool_sizes = (min_size, max_size)
        self._pool: psycopg_pool.ConnectionPool[Any] | None = None
        self._limiter = trio.CapacityLimiter(max_size)
        self._opened = False
        self._closed = False
        self._open_lock = trio.Lock()
        self._notifications = _Notifications(self)

    def __repr__(self) -> str:
        return f"<PostgresBackend {self.where}>"

    @property
    def where(self) -> str:
        """The database and schema, for messages (no password)."""
        try:
            info = self._psycopg.conninfo.conninfo_to_dict(self.url)
        except Exception:
            return f"schema {self.schema}"
        host = info.get("host", "localhost")
        port = info.get("port", "5432")
        return f"postgresql://{host}:{port}/{info.get('dbname', '')} schema {self.schema}"

    # --- running a transaction in a thread ---------------------------------------------------

    def _failure(self, action: str, exc: BaseException) -> SessionStoreError:
        error = SessionStoreError(f"cannot {action} the session database {self.where}: {exc}")
        error.__cause__ = exc
        return error

    def _open_pool(self) -> None:
        """In a thread: create the tables (idempotent, versioned), then open the pool."""
        psycopg = self._psycopg
        try:
            # A connection of its own first: its error says why (refused, password, ...)
            # where the pool's would only say that it timed out.
            connection = psycopg.connect(self.url, connect_timeout=self._connect_seconds)
        except psycopg.Error as exc:
            raise self._failure("connect to", exc) from exc
        try:
            with connection.transaction():
                connection.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK_KEY,))
                connection.execute(_schema_sql(self._q))
                row = connection.execute(
                    f"SELECT max(version) FROM {self._q}.trio_agent_schema"
                ).fetchone()
                version = None if row is None else row[0]
                if version is None:
                    connection.execute(
                        f"INSERT INTO {self._q}.trio_agent_schema (version) VALUES (%s)",
                        (SCHEMA_VERSION,),
                    )
                elif version > SCHEMA_VERSION:
                    raise SessionStoreError(
                        f"the session database {self.where} has tables of schema version "
                        f"{version}; this trio_agent reads version {SCHEMA_VERSION}: "
                        "upgrade trio_agent"
                    )
        except psycopg.Error as exc:
            raise self._failure("set up", exc) from exc
        finally:
            connection.close()
        min_size, max_size = self._pool_sizes
        pool = self._psycopg_pool.ConnectionPool(
            self.url,
            min_size=min_size,
            max_size=max_size,
            open=False,
            timeout=self.connect_timeout,
            name=f"trio_agent.sessions:{self.schema}",
        )
        try:
            pool.open(wait=True, timeout=self.connect_timeout)
        except self._psycopg_pool.PoolTimeout as exc:
            pool.close()
            raise self._failure("connect to", exc) from exc
        self._pool = pool

    async def _ensure_open(self) -> None:
        if self._opened:
            return
        async with self._open_lock:
            if self._closed:
                raise SessionStoreError(f"the session store {self.where} is closed")
            if not self._opened:
                # Tried again by the next call if it fails (a new pool each time).
                await trio.to_thread.run_sync(self._open_pool)
                self._opened = True

    def _transaction(self, call: _Call, body: Callable[[Any], T]) -> T:
        """In a thread: run ``body(connection)`` in one transaction on a pooled connection."""
        psycopg = self._psycopg
        pool = self._pool
        assert pool is not None
        try:
            connection = pool.getconn()
        except self._psycopg_pool.PoolTimeout as exc:
            raise self._failure("connect to", exc) from exc
        try:
            with call.lock:
                if call.cancelled:
                    raise _CancelledBeforeQuery
                call.connection = connection
            try:
                with connection.transaction():
                    return body(connection)
            finally:
                with call.lock:
                    call.connection = None
        except psycopg.Error as exc:
            raise self._failure("use", exc) from exc
        finally:
            # A broken connection is discarded by the pool, a healthy one kept.
            pool.putconn(connection)

    async def _run(self, body: Callable[[Any], T]) -> T:
        """Run ``body`` in a thread; see "Cancellation" in the module docstring."""
        if self._closed:
            raise SessionStoreError(f"the session store {self.where} is closed")
        await self._ensure_open()
        async with self._limiter:
            call = _Call()
            task = trio.lowlevel.current_task()
            trio_token = trio.lowlevel.current_trio_token()

            def deliver(result: outcome.Outcome[T]) -> None:
                # Rescheduled with the outcome itself, unwrapped below.
                trio_token.run_sync_soon(trio.lowlevel.reschedule, task, outcome.Value(result))

            def abort(raise_cancel: Any) -> trio.lowlevel.Abort:
                # Not abandoned: the thread's transaction commits or rolls back first.
                trio.lowlevel.start_thread_soon(call.cancel, lambda _: None)
                return trio.lowlevel.Abort.FAILED

            trio.lowlevel.start_thread_soon(lambda: self._transaction(call, body), deliver)
            result: outcome.Outcome[T] = await trio.lowlevel.wait_task_rescheduled(abort)
            if call.cancelled:
                # The cancellation is still pending: raise it rather than the
                # QueryCanceled it caused (or rather than returning a result).
                await trio.lowlevel.checkpoint_if_cancelled()
            return result.unwrap()

    # --- the interface -------------------------------------------------------------------

    async def create_session(self, header: JsonObject, entries: list[JsonObject]) -> None:
        session_id = header["id"]
        check_batch_ids(session_id, entries, lambda _: False)
        header_text = dump_json(header)
        texts = [dump_json(entry) for entry in entries]
        ids = [entry["id"] for entry in entries]
        q = self._q

        def body(db: Any) -> None:
            row = db.execute(
                f"INSERT INTO {q}.sessions (id, header, next_seq) VALUES (%s, %s, %s) "
                "ON CONFLICT (id) DO NOTHING RETURNING 1",
                (session_id, header_text, len(texts)),
            ).fetchone()
            if row is None:
                raise SessionExistsError(session_id)
            if texts:
                self._insert(db, session_id, 0, ids, texts)

        await self._run(body)

    def _insert(self, db: Any, session_id: str, seq: int, ids: list[str], texts: list[str]) -> None:
        db.execute(
            f"INSERT INTO {self._q}.entries (session_id, seq, id, body) "
            "SELECT %s, %s + t.n - 1, t.id, t.body "
            "FROM unnest(%s::text[], %s::text[]) WITH ORDINALITY AS t(id, body, n)",
            (session_id, seq, ids, texts),
        )

    async def load_session(self, session_id: str) -> LoadedSession:
        q = self._q

        def body(db: Any) -> tuple[str, list[str]]:
            row = db.execute(f"SELECT header FROM {q}.sessions WHERE id = %s", (session_id,))
            found = row.fetchone()
            if found is None:
                raise SessionNotFoundError(session_id)
            texts = db.execute(
                f"SELECT body FROM {q}.entries WHERE session_id = %s ORDER BY seq", (session_id,)
            ).fetchall()
            return found[0], [text for (text,) in texts]

        header, texts = await self._run(body)
        return LoadedSession(header=json.loads(header), entries=[json.loads(t) for t in texts])

    def _lock_session(self, db: Any, session_id: str) -> tuple[int, Claim | None]:
        """Lock the session's row for this transaction; its next seq and its claim."""
        seq, claim, _ = self._lock_session_and_check(db, session_id, None)
        return seq, claim

    def _lock_session_and_check(
        self, db: Any, session_id: str, ids: list[str] | None
    ) -> tuple[int, Claim | None, set[str]]:
        """Lock the session's row for this transaction; its next seq, its claim, and
        which of ``ids`` are ids of its entries."""
        row = db.execute(
            f"SELECT next_seq FROM {self._q}.sessions WHERE id = %s FOR UPDATE", (session_id,)
        ).fetchone()
        if row is None:
            raise SessionNotFoundError(session_id)
        # A statement of its own, after the lock: under READ COMMITTED it sees the claim
        # that the transaction we waited for committed. (Joined into the locking
        # statement, the claim would be read from that statement's older snapshot, and
        # two writers that raced for the lock would both see no claim.)
        holder, token, expires_at, stored = db.execute(
            f"SELECT c.holder, c.token, c.expires_at, ARRAY(SELECT e.id FROM {self._q}.entries e "
            "WHERE e.session_id = %s AND e.id = ANY(%s)) "
            f"FROM (SELECT 1) AS one LEFT JOIN {self._q}.claims c ON c.session_id = %s",
            (session_id, ids or [], session_id),
        ).fetchone()
        claim = None if token is None else Claim(holder=holder, token=token, expires_at=expires_at)
        return int(row[0]), claim, set(stored)

    async def append_entries(
        self, session_id: str, entries: list[JsonObject], *, claim_token: str | None, now: float
    ) -> None:
        texts = [dump_json(entry) for entry in entries]  # may raise: before any change
        ids = [entry["id"] for entry in entries]
        q = self._q

        def body(db: Any) -> None:
            # Three statements besides BEGIN and COMMIT: a commit costs round trips.
            seq, claim, stored = self._lock_session_and_check(db, session_id, ids)
            check_append_claim(session_id, claim, claim_token, now)
            check_batch_ids(session_id, entries, stored.__contains__)
            db.execute(
                f"WITH inserted AS (INSERT INTO {q}.entries (session_id, seq, id, body) "
                "SELECT %s, %s + t.n - 1, t.id, t.body "
                "FROM unnest(%s::text[], %s::text[]) WITH ORDINALITY AS t(id, body, n)) "
                f"UPDATE {q}.sessions SET next_seq = %s WHERE id = %s",
                (session_id, seq, ids, texts, seq + len(texts), session_id),
            )

        await self._run(body)

    async def list_sessions(self) -> list[JsonObject]:
        def body(db: Any) -> list[str]:
            return [text for (text,) in db.execute(f"SELECT header FROM {self._q}.sessions")]

        return [json.loads(text) for text in await self._run(body)]

    async def delete_session(self, session_id: str) -> None:
        def body(db: Any) -> None:
            self._lock_session(db, session_id)
            # Entries, the claim and queued messages go with it (ON DELETE CASCADE).
            db.execute(f"DELETE FROM {self._q}.sessions WHERE id = %s", (session_id,))

        await self._run(body)

    async def acquire_claim(
        self, session_id: str, *, holder: str, token: str, now: float, expires_at: float
    ) -> None:
        def body(db: Any) -> None:
            _, claim = self._lock_session(db, session_id)
            check_acquire(session_id, claim, token, now)
            db.execute(
                f"INSERT INTO {self._q}.claims (session_id, holder, token, expires_at) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (session_id) DO UPDATE SET "
                "holder = EXCLUDED.holder, token = EXCLUDED.token, "
                "expires_at = EXCLUDED.expires_at",
                (session_id, holder, token, expires_at),
            )

        await self._run(body)

    async def renew_claim(
        self, session_id: str, *, holder: str, token: str, now: float, expires_at: float
    ) -> None:
        def body(db: Any) -> None:
            row = db.execute(
                f"SELECT holder, token, expires_at FROM {self._q}.claims "
                "WHERE session_id = %s FOR UPDATE",
                (session_id,),
            ).fetchone()
            claim = None if row is None else Claim(holder=row[0], token=row[1], expires_at=row[2])
            check_renew(session_id, claim, token, holder, now)
            db.execute(
                f"UPDATE {self._q}.claims SET expires_at = %s WHERE session_id = %s",
                (expires_at, session_id),
            )

        await self._run(body)

    async def release_claim(self, session_id: str, *, token: str) -> None:
        def body(db: Any) -> None:
            db.execute(
                f"DELETE FROM {self._q}.claims WHERE session_id = %s AND token = %s",
                (session_id, token),
            )

        await self._run(body)

    async def aclose(self) -> None:
        async with self._open_lock:
            self._closed = True
            pool, self._pool = self._pool, None
            self._opened = False
            if pool is not None:
                await trio.to_thread.run_sync(pool.close)
            else:
                await trio.lowlevel.checkpoint()

    # --- queued messages ---------------------------------------------------------------------

    async def enqueue_message(self, session_id: str, item: JsonObject) -> None:
        text = dump_json(item)
        channel = channel_name(self.schema)

        def body(db: Any) -> None:
            row = db.execute(
                f"SELECT 1 FROM {self._q}.sessions WHERE id = %s FOR SHARE", (session_id,)
            ).fetchone()
            if row is None:
                raise SessionNotFoundError(session_id)
            db.execute(
                f"INSERT INTO {self._q}.queued (session_id, id, body) VALUES (%s, %s, %s)",
                (session_id, item["id"], text),
            )
            # Sent when the transaction commits, so a listener never wakes before the row
            # is visible.
            db.execute("SELECT pg_notify(%s, %s)", (channel, session_id))

        await self._run(body)

    async def take_queued(
        self, session_id: str, *, claim_token: str, now: float
    ) -> list[JsonObject]:
        q = self._q

        def body(db: Any) -> list[str]:
            _, claim = self._lock_session(db, session_id)
            check_append_claim(session_id, claim, claim_token, now)
            # Delivered: its id is an entry of the session (committed by the agent).
            db.execute(
                f"DELETE FROM {q}.queued q USING {q}.entries e "
                "WHERE q.session_id = %s AND e.session_id = q.session_id AND e.id = q.id",
                (session_id,),
            )
            rows = db.execute(
                f"SELECT body FROM {q}.queued WHERE session_id = %s ORDER BY seq", (session_id,)
            ).fetchall()
            return [text for (text,) in rows]

        return [json.loads(text) for text in await self._run(body)]

    def queue_listener(self, session_id: str) -> QueueListener:
        return _PostgresListener(self._notifications, session_id)


@attrs.define(eq=False)
class _Waiter:
    notified: bool = False
    event: trio.Event = attrs.Factory(trio.Event)


class _Notifications:
    r"""The store's one listening connection, shared by all its inboxes.

    One connection per store, whatever the number of sessions it owns (PostgreSQL allows
    about a hundred connections by default): it ``LISTEN``\s on the schema's channel,
    whose payloads are session ids. There is no task of its own: whichever inbox is
    waiting reads the socket for all of them (Trio's ``wait_readable``, so a cancelled
    wait needs nothing from the server), wakes the inboxes whose session was notified,
    and when it stops reading (its own session was notified, or it was cancelled) wakes
    the others so that one of them reads next.
    """

    def __init__(self, backend: PostgresBackend) -> None:
        self._backend = backend
        self._lock = trio.Lock()
        self._users = 0
        self._connection: psycopg.Connection[Any] | None = None
        self._waiters: dict[str, set[_Waiter]] = {}
        self._reading = False

    def _connect(self) -> psycopg.Connection[Any]:
        backend = self._backend
        connection: psycopg.Connection[Any] = backend._psycopg.Connection.connect(
            backend.url, autocommit=True, connect_timeout=backend._connect_seconds
        )
        try:
            connection.execute(f'LISTEN "{channel_name(backend.schema)}"')
        except BaseException:
            connection.close()
            raise
        return connection

    async def acquire(self) -> None:
        async with self._lock:
            if self._connection is None or self._connection.closed:
                try:
                    self._connection = await trio.to_thread.run_sync(self._connect)
                except self._backend._psycopg.Error as exc:
                    raise self._backend._failure("listen on", exc) from exc
            self._users += 1

    async def release(self) -> None:
        with trio.CancelScope(shield=True):
            async with self._lock:
                self._users -= 1
                if self._users == 0 and self._connection is not None:
                    connection, self._connection = self._connection, None
                    await trio.to_thread.run_sync(connection.close)

    def _dispatch(self, pgconn: Any) -> None:
        while (notify := pgconn.notifies()) is not None:
            for waiter in self._waiters.get(notify.extra.decode(), ()):
                waiter.notified = True
                waiter.event.set()

    async def wait(self, session_id: str) -> None:
        waiter = _Waiter()
        self._waiters.setdefault(session_id, set()).add(waiter)
        try:
            while not waiter.notified:
                if self._reading:
                    await waiter.event.wait()
                    waiter.event = trio.Event()
                    continue
                await self._read_until(waiter)
        finally:
            waiters = self._waiters[session_id]
            waiters.discard(waiter)
            if not waiters:
                del self._waiters[session_id]
        await trio.lowlevel.checkpoint()

    async def _read_until(self, waiter: _Waiter) -> None:
        connection = self._connection
        if connection is None:
            raise RuntimeError("the listener is not open")
        psycopg = self._backend._psycopg
        pgconn = connection.pgconn
        self._reading = True
        try:
            # Notifications read while the connection was last used are buffered.
            self._dispatch(pgconn)
            while not waiter.notified:
                await trio.lowlevel.wait_readable(pgconn.socket)
                pgconn.consume_input()
                self._dispatch(pgconn)
        except psycopg.Error as exc:
            connection.close()  # the next acquire() connects again
            raise self._backend._failure("listen on", exc) from exc
        finally:
            self._reading = False
            # Someone else reads now.
            for waiters in self._waiters.values():
                for other in waiters:
                    other.event.set()


class _PostgresListener(QueueListener):
    """One inbox's use of the store's listening connection."""

    def __init__(self, notifications: _Notifications, session_id: str) -> None:
        self._notifications = notifications
        self._session_id = session_id

    async def __aenter__(self) -> QueueListener:
        await self._notifications.acquire()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._notifications.release()

    async def wait(self) -> None:
        await self._notifications.wait(self._session_id)


class PostgresStore(SessionStore):
    """Sessions in PostgreSQL (``open_store("postgresql://user:pw@host/db")``).

    Args:
        url: A libpq connection URL or string.
        schema: The PostgreSQL schema holding the tables (``public``; created if missing).
        min_size: Connections the pool keeps open.
        max_size: At most this many connections and concurrent operations.
        connect_timeout: Seconds to wait for a connection before failing.
        options: Passed to :class:`SessionStore` (``lease_seconds``, ``clock``, ``holder``).

    Raises:
        ImportError: psycopg or psycopg-pool is missing (install ``trio-agent[postgres]``).
    """

    def __init__(
        self,
        url: str,
        *,
        schema: str = "public",
        min_size: int = 1,
        max_size: int = 8,
        connect_timeout: float = 30.0,
        **options: Any,
    ) -> None:
        backend = PostgresBackend(
            url,
            schema=schema,
            min_size=min_size,
            max_size=max_size,
            connect_timeout=connect_timeout,
        )
        super().__init__(backend, **options)


def store_from_url(url: str, options: dict[str, Any]) -> SessionStore:
    """The factory of ``open_store("postgresql://…")`` (and ``postgres://``)."""
    return PostgresStore(url, **options)
