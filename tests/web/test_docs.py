"""The complete web service of docs/web.md (and docs/zh/web.md) is under 40 lines, the same
in both languages, and works: run as written, its model's API answered by the faux
provider, it serves the chat page and streams a run over HTTP."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import trio

from trio_agent.models import FauxProvider, faux_assistant_message

from ._agui_grammar import check_agui_stream
from ._sse_client import open_sse

ROOT = Path(__file__).resolve().parents[2]
_PYTHON = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)


def _service(page: str) -> str:
    blocks = _PYTHON.findall((ROOT / page).read_text(encoding="utf-8"))
    service: str = blocks[0]
    return service


def test_the_service_is_short_and_the_same_in_chinese() -> None:
    english = _service("docs/web.md")
    assert len(english.splitlines()) < 40
    assert "trio.run(main)" in english
    assert _service("docs/zh/web.md") == english


async def test_the_service_runs() -> None:
    namespace: dict[str, Any] = {"__name__": "chat_service"}  # not "__main__": no trio.run
    exec(compile(_service("docs/web.md"), "docs/web.md", "exec"), namespace)
    provider = FauxProvider([faux_assistant_message("Hello from the service!")])
    namespace["models"].register_api(namespace["MODEL"].api, provider.stream_fn)
    async with trio.open_nursery() as nursery:
        (url,) = await nursery.start(namespace["main"], 0)
        async with httpx.AsyncClient(base_url=url) as http:
            assert "<textarea" in (await http.get("/")).text
            session_id = (await http.post("/api/sessions")).json()["id"]
            async with open_sse(url, f"/api/sessions/{session_id}/runs", {"prompt": "Hi"}) as sse:
                events = await sse.read_all()
            check_agui_stream(events)
            assert events[-1]["type"] == "RUN_FINISHED"
            transcript = (await http.get(f"/api/sessions/{session_id}")).json()
            assert transcript["messages"][-1]["content"] == "Hello from the service!"
        nursery.cancel_scope.cancel()
