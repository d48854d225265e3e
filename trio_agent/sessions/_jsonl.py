"""``jsonl:DIR`` — one pi session file per session, in pi's layout.

A session is ``DIR/<time>_<id>.jsonl`` (``<time>`` is the creation time with ``:`` and
``.`` replaced by ``-``, as pi names its files): the header line, then one line per entry
in append order, each line ``JSON + "\\n"``. Files written by pi's coding agent 1.6.0 open
here, and files written here open in pi.

Atomic batches: a batch is written with one ``write()`` of all its lines at the end of
the file, under an exclusive ``flock`` of ``DIR/.<id>.lock`` that also covers the claim
and id checks, so writers in several processes never interleave. A failed write (a full
disk) is cut back to the previous end of the file before the error is raised. A write cut
short by a machine crash can leave a torn last line: loading leaves it out and says so
(:attr:`Session.dropped`), and the next append removes it first. Committed means handed to
the operating system: it survives the process being killed; there is no ``fsync`` (a
power loss can lose the latest batches, never tear an earlier one).

An append that finds the session's lock free (a non-blocking ``flock``) is written on
the calling thread (:meth:`JsonlBackend.try_append_entries`); every other operation runs
in a worker thread.

Claims are ``DIR/.<id>.claim`` (JSON ``{"holder", "token", "expiresAt"}``), read and
written under the same lock. pi ignores both dot files.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
from ._entries import decode_header
from ._errors import (
    SessionExistsError,
    SessionFormatError,
    SessionNotFoundError,
    SessionStoreError,
)
from ._store import SessionStore

__all__ = ["JsonlBackend", "JsonlStore"]

_SAFE_ID = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")


def _file_name(session_id: str) -> str:
    """The session id as part of a file name: as is when it is a safe name (pi's rule, and
    ``create()``'s), else a digest, so an id read from a header never names a path."""
    if _SAFE_ID.fullmatch(session_id):
        return session_id
    return "id-" + hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _store_error(action: str, path: Path, exc: OSError) -> SessionStoreError:
    error = SessionStoreError(f"cannot {action} {path}: {exc.strerror or exc}")
    error.__cause__ = exc
    return error


def _parse(path: Path, data: bytes) -> tuple[list[tuple[int, JsonObject]], int, tuple[str, ...]]:
    """The JSON objects of a file with their line numbers, the length of the part that
    ends with a complete line, and what was dropped (a torn last line)."""
    objects: list[tuple[int, JsonObject]] = []
    dropped: tuple[str, ...] = ()
    complete = data.rfind(b"\n") + 1
    lines = data.split(b"\n")
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except ValueError as exc:
            if number == len(lines) and not data.endswith(b"\n"):
                dropped = (
                    f"{path}:{number}: an incomplete last line of {len(raw)} bytes (a write "
                    "cut short) was left out",
                )
                break
            raise SessionFormatError(f"{path}:{number}: not a JSON line ({exc})") from None
        if not isinstance(value, dict):
            raise SessionFormatError(f"{path}:{number}: a line must be a JSON object")
        objects.append((number, value))
    else:
        complete = len(data)
    return objects, complete, dropped


class _Held(Exception):
    """Someone else holds the lock (another process, or this store's worker thread): a
    lock taken without waiting."""


class JsonlBackend(SessionBackend):
    """Sessions as pi's JSONL files in one directory (see the module docstring)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self._paths: dict[str, Path] = {}
        # path -> (inode, size, ids): the ids of a file this process last saw at that size.
        self._ids: dict[Path, tuple[int, int, set[str]]] = {}
        self._mutex = threading.Lock()
        self._ready = False

    # --- files and locks ---------------------------------------------------------------------

    def _ensure_directory(self) -> None:
        if not self._ready:
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise _store_error("create the directory", self.directory, exc) from None
            self._ready = True

    @contextlib.contextmanager
    def _locked(self, name: str, *, wait: bool = True) -> Iterator[None]:
        """Hold the session's lock file; with ``wait=False``, :class:`_Held` when someone
        else holds it."""
        self._ensure_directory()
        path = self.directory / f".{_file_name(name)}.lock"
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise _store_error("lock", path, exc) from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise _Held from None
            yield
        finally:
            os.close(fd)

    def _find(self, session_id: str) -> Path | None:
        with self._mutex:
            known = self._paths.get(session_id)
        if known is not None and known.exists():
            return known
        if not self.directory.is_dir():
            return None
        found: Path | None = None
        if _SAFE_ID.fullmatch(session_id):
            candidates = sorted(self.directory.glob(f"*_{session_id}.jsonl"))
            found = candidates[0] if candidates else None
        if found is None:
            # A file pi or a person named otherwise: find it by its header.
            for path in sorted(self.directory.glob("*.jsonl")):
                header = self._read_header(path)
                if header is not None and header.get("id") == session_id:
                    found = path
                    break
        if found is not None:
            with self._mutex:
                self._paths[session_id] = found
        return found

    def _path(self, session_id: str) -> Path:
        path = self._find(session_id)
        if path is None:
            raise SessionNotFoundError(session_id)
        return path

    @staticmethod
    def _read_header(path: Path) -> JsonObject | None:
        try:
            with path.open("rb") as file:
                for line in file:
                    if line.strip():
                        value = json.loads(line)
                        return value if isinstance(value, dict) else None
        except (OSError, ValueError):
            return None
        return None

    def _claim_path(self, session_id: str) -> Path:
        return self.directory / f".{_file_name(session_id)}.claim"

    def _read_claim(self, session_id: str) -> Claim | None:
        try:
            data = json.loads(self._claim_path(session_id).read_bytes())
            return Claim(
                holder=str(data["holder"]),
                token=str(data["token"]),
                expires_at=float(data["expiresAt"]),
            )
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _write_claim(self, session_id: str, claim: Claim) -> None:
        path = self._claim_path(session_id)
        tmp = path.with_suffix(".claim.tmp")
        text = json.dumps(
            {"holder": claim.holder, "token": claim.token, "expiresAt": claim.expires_at}
        )
        try:
            tmp.write_text(text)
            os.replace(tmp, path)
        except OSError as exc:
            raise _store_error("write the claim", path, exc) from None

    # --- reading -----------------------------------------------------------------------------

    def _load(self, path: Path) -> tuple[LoadedSession, int]:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise SessionNotFoundError(path.stem.rpartition("_")[2]) from None
        except OSError as exc:
            raise _store_error("read", path, exc) from None
        objects, complete, dropped = _parse(path, data)
        if not objects:
            raise SessionFormatError(f"{path}:1: the file has no session header")
        number, header = objects[0]
        decode_header(header, f"{path}:{number}")
        for number, entry in objects[1:]:
            if not isinstance(entry.get("id"), str):
                raise SessionFormatError(f"{path}:{number}: the entry has no id")
        loaded = LoadedSession(
            header=header, entries=[entry for _, entry in objects[1:]], dropped=dropped
        )
        return loaded, complete

    def _load_sync(self, session_id: str) -> LoadedSession:
        return self._load(self._path(session_id))[0]

    def _ids_of(self, path: Path) -> tuple[set[str], int]:
        """The entry ids of a file and the length of its complete lines (cached)."""
        stat = path.stat()
        with self._mutex:
            cached = self._ids.get(path)
        if cached is not None and cached[0] == stat.st_ino and cached[1] == stat.st_size:
            return cached[2], stat.st_size
        loaded, complete = self._load(path)
        return {entry["id"] for entry in loaded.entries}, complete

    # --- writing -----------------------------------------------------------------------------

    def _create_sync(self, header: JsonObject, entries: list[JsonObject]) -> None:
        session_id = header["id"]
        check_batch_ids(session_id, entries, lambda _: False)
        text = "".join(dump_json(item) + "\n" for item in [header, *entries]).encode()
        with self._locked(session_id):
            if self._find(session_id) is not None:
                raise SessionExistsError(session_id)
            stamp = str(header.get("timestamp", "")).replace(":", "-").replace(".", "-")
            path = self.directory / f"{stamp}_{session_id}.jsonl"
            tmp = self.directory / f".{_file_name(session_id)}.jsonl.tmp"
            try:
                tmp.write_bytes(text)
                os.link(tmp, path)
            except OSError as exc:
                raise _store_error("create", path, exc) from None
            finally:
                with contextlib.suppress(OSError):
                    tmp.unlink()
            with self._mutex:
                self._paths[session_id] = path
                self._ids[path] = (
                    path.stat().st_ino,
                    len(text),
                    {entry["id"] for entry in entries},
                )

    def _append_sync(
        self,
        session_id: str,
        entries: list[JsonObject],
        claim_token: str | None,
        now: float,
        wait: bool = True,
    ) -> None:
        text = "".join(dump_json(entry) + "\n" for entry in entries).encode()
        with self._locked(session_id, wait=wait):
            path = self._path(session_id)
            check_append_claim(session_id, self._read_claim(session_id), claim_token, now)
            try:
                ids, complete = self._ids_of(path)
            except OSError as exc:
                raise _store_error("read", path, exc) from None
            check_batch_ids(session_id, entries, ids.__contains__)
            try:
                fd = os.open(path, os.O_WRONLY)
            except OSError as exc:
                raise _store_error("open", path, exc) from None
            try:
                size = os.fstat(fd).st_size
                if size != complete:  # a torn last line: never committed, removed first
                    os.ftruncate(fd, complete)
                os.lseek(fd, complete, os.SEEK_SET)
                try:
                    view = memoryview(text)
                    while view:
                        written = os.write(fd, view)
                        view = view[written:]
                except OSError as exc:
                    with contextlib.suppress(OSError):
                        os.ftruncate(fd, complete)
                    raise _store_error("append to", path, exc) from None
                inode = os.fstat(fd).st_ino
            except OSError as exc:
                raise _store_error("append to", path, exc) from None
            finally:
                os.close(fd)
            new_ids = ids | {entry["id"] for entry in entries}
            with self._mutex:
                self._ids[path] = (inode, complete + len(text), new_ids)

    def _delete_sync(self, session_id: str) -> None:
        with self._locked(session_id):
            path = self._path(session_id)
            try:
                path.unlink()
            except OSError as exc:
                raise _store_error("delete", path, exc) from None
            with contextlib.suppress(OSError):
                self._claim_path(session_id).unlink()
            with self._mutex:
                self._paths.pop(session_id, None)
                self._ids.pop(path, None)

    def _acquire_sync(
        self, session_id: str, holder: str, token: str, now: float, expires_at: float
    ) -> None:
        with self._locked(session_id):
            self._path(session_id)
            check_acquire(session_id, self._read_claim(session_id), token, now)
            self._write_claim(session_id, Claim(holder=holder, token=token, expires_at=expires_at))

    def _renew_sync(
        self, session_id: str, holder: str, token: str, now: float, expires_at: float
    ) -> None:
        with self._locked(session_id):
            check_renew(session_id, self._read_claim(session_id), token, holder, now)
            self._write_claim(session_id, Claim(holder=holder, token=token, expires_at=expires_at))

    def _release_sync(self, session_id: str, token: str) -> None:
        with self._locked(session_id):
            claim = self._read_claim(session_id)
            if claim is not None and claim.token == token:
                with contextlib.suppress(OSError):
                    self._claim_path(session_id).unlink()

    def _list_sync(self) -> list[JsonObject]:
        if not self.directory.is_dir():
            return []
        headers = []
        for path in sorted(self.directory.glob("*.jsonl")):
            header = self._read_header(path)
            if header is not None and header.get("type") == "session":
                headers.append(header)
        return headers

    # --- the interface -------------------------------------------------------------------------

    def _guarded(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)``, with a full or read-only disk as :class:`SessionStoreError`."""
        try:
            return fn(*args)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EDQUOT):
                raise _store_error("write", self.directory, exc) from None
            raise

    async def _run(self, fn: Any, *args: Any) -> Any:
        # Not abandoned on cancel: the call finishes (or undoes its write) first.
        return await trio.to_thread.run_sync(self._guarded, fn, *args)

    async def create_session(self, header: JsonObject, entries: list[JsonObject]) -> None:
        await self._run(self._create_sync, header, entries)

    async def load_session(self, session_id: str) -> LoadedSession:
        loaded: LoadedSession = await self._run(self._load_sync, session_id)
        return loaded

    async def append_entries(
        self, session_id: str, entries: list[JsonObject], *, claim_token: str | None, now: float
    ) -> None:
        await self._run(self._append_sync, session_id, entries, claim_token, now)

    def try_append_entries(
        self, session_id: str, entries: list[JsonObject], *, claim_token: str | None, now: float
    ) -> bool:
        """Append on the calling thread unless someone else holds the session's lock
        (another process, or this store's worker thread): a write to the page cache, as
        in the worker thread (no ``fsync`` either way)."""
        try:
            self._guarded(self._append_sync, session_id, entries, claim_token, now, False)
        except _Held:
            return False
        return True

    async def list_sessions(self) -> list[JsonObject]:
        headers: list[JsonObject] = await self._run(self._list_sync)
        return headers

    async def delete_session(self, session_id: str) -> None:
        await self._run(self._delete_sync, session_id)

    async def acquire_claim(
        self, session_id: str, *, holder: str, token: str, now: float, expires_at: float
    ) -> None:
        await self._run(self._acquire_sync, session_id, holder, token, now, expires_at)

    async def renew_claim(
        self, session_id: str, *, holder: str, token: str, now: float, expires_at: float
    ) -> None:
        await self._run(self._renew_sync, session_id, holder, token, now, expires_at)

    async def release_claim(self, session_id: str, *, token: str) -> None:
        await self._run(self._release_sync, session_id, token)

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


class JsonlStore(SessionStore):
    """Sessions as pi's JSONL files in ``directory`` (``open_store("jsonl:DIR")``)."""

    def __init__(self, directory: str | os.PathLike[str], **options: Any) -> None:
        super().__init__(JsonlBackend(directory), **options)
