"""Web load: N concurrent SSE clients (default 200) on loopback against ``trio-agent
serve``'s app and the offline demo model.

The server runs in a fresh interpreter (``python -m bench.web_load server PORT TPS``) so
its resident set is its own. Each client creates a session, starts a run (``POST
/api/sessions/{id}/runs``) and reads its AG-UI stream. Reported, as one JSON line:

- time to first event (``RUN_STARTED``) from sending the request: median and p99, ms;
- memory per open stream: the server's RSS with every stream open (all clients past
  their first event; the demo model is slowed so the runs last) minus its RSS after a
  warm-up, divided by the number of streams, KiB;
- after every client disconnects: the runs still going on (from ``GET /api/sessions``),
  the server's established TCP connections on its port (``/proc/net/tcp``), and its task
  count (from ``GET /debug/tasks``, which only this benchmark's server has).

Run: ``python -m bench.web_load [--clients 200]``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

import h11
import httpx
import trio

__all__ = ["main"]

_DATA = b"data: "


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def _established(port: int) -> int:
    """Established TCP connections whose local port is ``port`` (IPv4 loopback)."""
    count = 0
    with open("/proc/net/tcp") as table:
        next(table)
        for line in table:
            fields = line.split()
            local_port = int(fields[1].split(":")[1], 16)
            if local_port == port and fields[3] == "01":
                count += 1
    return count


# ---------------------------------------------------------------------------------------
# The server (a subprocess)


def _serve(port: int, tokens_per_second: float) -> None:
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from trio_agent.web import create_app, demo_factory, open_agent_host
    from trio_agent.web._serve import _config

    make = demo_factory(tokens_per_second=tokens_per_second)

    def count_tasks() -> int:
        def walk(task: trio.lowlevel.Task) -> int:
            return 1 + sum(
                walk(child) for nursery in task.child_nurseries for child in nursery.child_tasks
            )

        root = trio.lowlevel.current_root_task()
        assert root is not None
        return walk(root)

    def task_names() -> dict[str, int]:
        names: dict[str, int] = {}

        def walk(task: trio.lowlevel.Task) -> None:
            names[task.name] = names.get(task.name, 0) + 1
            for nursery in task.child_nurseries:
                for child in nursery.child_tasks:
                    walk(child)

        root = trio.lowlevel.current_root_task()
        assert root is not None
        walk(root)
        return names

    async def tasks(request: Request) -> JSONResponse:
        return JSONResponse({"tasks": count_tasks(), "names": task_names()})

    async def run() -> None:
        from hypercorn.trio import serve

        async with open_agent_host(make) as host:
            app = create_app(host, ui=False)
            app.router.routes.append(Route("/debug/tasks", tasks))
            config = _config("127.0.0.1", port)
            config.backlog = 1024
            async with trio.open_nursery() as nursery:
                await nursery.start(serve, app, config)
                print("ready", flush=True)

    trio.run(run)


# ---------------------------------------------------------------------------------------
# The clients


async def _first_event_and_hold(
    port: int,
    session_id: str,
    first_event_ms: list[float],
    opened: trio.Semaphore,
    release: trio.Event,
) -> None:
    """Start a run, wait for its first event, hold the stream open until ``release``,
    then disconnect."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        connection = h11.Connection(h11.CLIENT)
        body = json.dumps({"prompt": "tell me a long story"}).encode()
        request = h11.Request(
            method="POST",
            target=f"/api/sessions/{session_id}/runs",
            headers=[
                ("host", f"127.0.0.1:{port}"),
                ("content-type", "application/json"),
                ("content-length", str(len(body))),
            ],
        )
        started = time.perf_counter()
        await stream.send_all(
            (connection.send(request) or b"")
            + (connection.send(h11.Data(data=body)) or b"")
            + (connection.send(h11.EndOfMessage()) or b"")
        )
        received = b""
        while _DATA not in received:
            event = connection.next_event()
            if event is h11.NEED_DATA:
                connection.receive_data(await stream.receive_some(65536))
            elif isinstance(event, h11.Data):
                received += bytes(event.data)
            elif isinstance(event, h11.Response):
                if event.status_code != 200:
                    raise RuntimeError(f"status {event.status_code}")
            else:
                raise RuntimeError(f"unexpected {event!r}")
        first_event_ms.append((time.perf_counter() - started) * 1000)
        opened.release()
        await release.wait()
    # Leaving the block closes the connection: the server aborts the run.


async def _floor_request(port: int, path: str, times_ms: list[float]) -> None:
    """The floor: a plain ``GET`` (no run) on a new connection, to its response headers."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        connection = h11.Connection(h11.CLIENT)
        request = h11.Request(method="GET", target=path, headers=[("host", f"127.0.0.1:{port}")])
        started = time.perf_counter()
        await stream.send_all(
            (connection.send(request) or b"") + (connection.send(h11.EndOfMessage()) or b"")
        )
        while True:
            event = connection.next_event()
            if event is h11.NEED_DATA:
                connection.receive_data(await stream.receive_some(65536))
            elif isinstance(event, h11.Response):
                break
        times_ms.append((time.perf_counter() - started) * 1000)


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


async def _settled_tasks(base: str) -> int:
    """The server's task count once connections that are closing have closed: the lowest
    of several samples (each sample's own connection is one of the tasks)."""
    samples = []
    for _ in range(10):
        samples.append((await _get(base, "/debug/tasks"))["tasks"])
        await trio.sleep(0.1)
    return int(min(samples))


async def _get(base: str, path: str) -> Any:
    """One GET on a connection of its own, closed after it (so that the server's task
    count sees the same one measuring connection every time)."""
    async with httpx.AsyncClient(base_url=base, headers={"connection": "close"}) as http:
        return (await http.get(path)).json()


async def _measure(port: int, pid: int, clients: int) -> dict[str, Any]:
    base = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
        # Warm-up: one complete run, so imports and first-use costs are paid.
        warm = (await http.post("/api/sessions")).json()["id"]
        async with http.stream("POST", f"/api/sessions/{warm}/runs", json={"prompt": "hi"}) as r:
            await r.aread()
        session_ids = [(await http.post("/api/sessions")).json()["id"] for _ in range(clients)]
    baseline_tasks = await _settled_tasks(base)
    floor_ms: list[float] = []
    async with trio.open_nursery() as nursery:
        for session_id in session_ids:
            nursery.start_soon(_floor_request, port, f"/api/sessions/{session_id}", floor_ms)
    await trio.sleep(0.5)
    baseline_kib = _rss_kib(pid)

    first_event_ms: list[float] = []
    opened = trio.Semaphore(clients, max_value=clients)
    for _ in range(clients):
        opened.acquire_nowait()
    release = trio.Event()
    async with trio.open_nursery() as nursery:
        for session_id in session_ids:
            nursery.start_soon(
                _first_event_and_hold, port, session_id, first_event_ms, opened, release
            )
        for _ in range(clients):
            await opened.acquire()
        open_kib = _rss_kib(pid)
        open_connections = _established(port)
        sessions = (await _get(base, "/api/sessions"))["sessions"]
        running_while_open = sum(1 for s in sessions if s["running"])
        release.set()
    # Every client has disconnected; give the server a moment to notice.
    started = time.perf_counter()
    while True:
        sessions = (await _get(base, "/api/sessions"))["sessions"]
        running_after = sum(1 for s in sessions if s["running"])
        if not running_after or time.perf_counter() - started > 10:
            break
        await trio.sleep(0.05)
    settle_ms = (time.perf_counter() - started) * 1000
    # Hypercorn may keep a connection whose client has gone until its keep-alive
    # timeout (5 s by default): wait for the count to come back, up to 15 s.
    while True:
        left_tasks = (await _get(base, "/debug/tasks"))["tasks"]
        if left_tasks <= baseline_tasks or time.perf_counter() - started > 15:
            break
        await trio.sleep(0.1)
    tasks_settle_ms = (time.perf_counter() - started) * 1000
    await trio.sleep(0.2)
    return {
        "scenario": "web_load",
        "clients": clients,
        "first_event_ms_median": round(statistics.median(first_event_ms), 2),
        "first_event_ms_p99": round(_p99(first_event_ms), 2),
        "floor_plain_get_ms_median": round(statistics.median(floor_ms), 2),
        "floor_plain_get_ms_p99": round(_p99(floor_ms), 2),
        "kib_per_open_stream": round((open_kib - baseline_kib) / clients, 1),
        "server_rss_mib_baseline": round(baseline_kib / 1024, 1),
        "server_rss_mib_open": round(open_kib / 1024, 1),
        "runs_while_open": running_while_open,
        "connections_while_open": open_connections,
        "runs_left_after_disconnect": running_after,
        "ms_until_no_run_left": round(settle_ms, 1),
        "connections_left_after_disconnect": _established(port),
        "server_tasks_baseline": baseline_tasks,
        "server_tasks_after_disconnect": left_tasks,
        "ms_until_tasks_back_to_baseline": round(tasks_settle_ms, 1),
        "server_task_names_after_disconnect": (await _get(base, "/debug/tasks"))["names"]
        if left_tasks > baseline_tasks
        else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.web_load")
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument(
        "--tokens-per-second",
        type=float,
        default=5.0,
        help="pace of the demo model (slow, so that every stream is open at once)",
    )
    args = parser.parse_args(argv)
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.web_load", "server", str(port), str(args.tokens_per_second)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert server.stdout is not None
        if server.stdout.readline().strip() != "ready":
            raise RuntimeError("the server did not start")
        result = trio.run(_measure, port, server.pid, args.clients)
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "server":
        _serve(int(sys.argv[2]), float(sys.argv[3]))
    else:
        sys.exit(main())
