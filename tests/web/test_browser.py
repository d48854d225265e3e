"""The chat page of ``trio-agent serve`` in a real browser: Playwright for Python driving
Debian's Chromium (``apt-get install chromium``; Playwright's own browser download is not
used). A streamed answer with thinking, a tool call and its result, stop, steering while
the agent works, the session list and a reload that resumes the session.

Outside CI (``CI`` unset) these tests skip when Playwright or Chromium is missing; under
``CI=true`` they fail instead.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import shutil
import threading
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
import trio

from trio_agent import Agent, AgentInitialState, LlmContext, Model, StreamOptions
from trio_agent._demo import DEMO_SYSTEM_PROMPT, DEMO_TOOLS, demo_response
from trio_agent.models import FauxProvider, FauxState, faux_thinking
from trio_agent.sessions import MemoryStore
from trio_agent.web import StoreSessions, serve

CHROMIUM = os.environ.get("TRIO_AGENT_CHROMIUM", "/usr/bin/chromium")

try:
    from playwright.sync_api import Browser, Page, expect, sync_playwright
except ImportError:  # pragma: no cover - depends on the installation
    sync_playwright = None  # type: ignore[assignment]  # checked by _require_browser


def _require_browser() -> None:
    missing = []
    if sync_playwright is None:
        missing.append("Playwright for Python (pip install playwright; no 'playwright install')")
    if shutil.which(CHROMIUM) is None:
        missing.append(f"Chromium at {CHROMIUM} (apt-get install -y chromium)")
    if missing:
        message = "browser tests need " + " and ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def _thinking_demo(
    context: LlmContext, options: StreamOptions, state: FauxState, model: Model
) -> Any:
    """The demo model, thinking aloud first when asked to think."""
    message = demo_response(context, options, state, model)
    last = context.messages[-1]
    if last.role == "user" and "think" in str(last.content):
        return message.__class__(
            **{
                **_fields(message),
                "content": [faux_thinking("Hmm, let me think."), *message.content],
            }
        )
    return message


def _fields(message: Any) -> dict[str, Any]:
    import attrs

    return {field.name: getattr(message, field.name) for field in attrs.fields(type(message))}


def _factory(tokens_per_second: float) -> Any:
    def make(session_id: str) -> Agent:
        provider = FauxProvider(models=["demo"], tokens_per_second=tokens_per_second)

        def stream_fn(model: Model, context: LlmContext, options: StreamOptions) -> Any:
            provider.append_responses([_thinking_demo])
            return provider.stream_fn(model, context, options)

        return Agent(
            AgentInitialState(
                system_prompt=DEMO_SYSTEM_PROMPT,
                model=provider.get_model(),
                tools=list(DEMO_TOOLS),
            ),
            stream_fn=stream_fn,
        )

    return make


@contextlib.contextmanager
def _server(tokens_per_second: float) -> Iterator[str]:
    """``serve()`` on 127.0.0.1 in a thread of its own (Playwright's sync API runs an
    asyncio loop in the test's thread, so Trio gets another)."""
    ready: queue.Queue[tuple[str, trio.lowlevel.TrioToken, trio.CancelScope]] = queue.Queue()

    async def main() -> None:
        # The sessions live in a trio_agent.sessions store, as with ``serve --store``.
        async with MemoryStore() as store, trio.open_nursery() as nursery:
            urls = await nursery.start(
                partial(serve, _factory(tokens_per_second), port=0, sessions=StoreSessions(store))
            )
            ready.put((urls[0], trio.lowlevel.current_trio_token(), nursery.cancel_scope))

    thread = threading.Thread(target=trio.run, args=(main,), daemon=True)
    thread.start()
    url, token, scope = ready.get(timeout=30)
    try:
        yield url
    finally:
        trio.from_thread.run_sync(scope.cancel, trio_token=token)
        thread.join(timeout=30)
        assert not thread.is_alive()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    _require_browser()
    args = ["--disable-background-networking"]
    if os.geteuid() == 0:
        args.append("--no-sandbox")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=args)
        yield launched
        launched.close()


@pytest.fixture
def tab(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A page of a fresh server; the demo model's pace (tokens per second) is the
    fixture's parameter, slower for the tests that act while an answer streams."""
    pace: float = getattr(request, "param", 40)
    with _server(tokens_per_second=pace) as url:
        context = browser.new_context()
        page = context.new_page()
        page.goto(url + "/")
        yield page
        context.close()


def _send(page: Page, text: str) -> None:
    page.fill("#prompt", text)
    page.press("#prompt", "Enter")


@pytest.mark.parametrize("tab", [12], indirect=True)
def test_streamed_answer_with_thinking(tab: Page) -> None:
    _send(tab, "please think, then say hello")
    expect(tab.locator("#status")).to_have_text("working…")
    answer = tab.locator(".message.assistant").last
    expect(answer).to_contain_text("You said")
    partial_length = len(answer.text_content() or "")
    expect(tab.locator("#status")).to_have_text("idle", timeout=20_000)
    final = answer.text_content() or ""
    assert partial_length < len(final)  # it streamed in
    assert "offline demo model" in final
    expect(tab.locator(".thinking")).to_have_text("Hmm, let me think.")
    expect(tab.locator(".message.user")).to_have_text("please think, then say hello")


def test_tool_call_and_result(tab: Page) -> None:
    _send(tab, "What is the weather in Paris?")
    expect(tab.locator(".tool-call .name")).to_have_text("get_weather")
    expect(tab.locator(".tool-call .args")).to_have_text('{"city":"Paris"}')
    expect(tab.locator(".tool-call .result")).to_contain_text("partly cloudy", timeout=20_000)
    expect(tab.locator("#status")).to_have_text("idle", timeout=20_000)
    expect(tab.locator(".message.assistant").last).to_contain_text(
        "The weather in Paris: partly cloudy"
    )


@pytest.mark.parametrize("tab", [12], indirect=True)
def test_stop_button(tab: Page) -> None:
    _send(tab, "tell me everything you know")
    answer = tab.locator(".message.assistant").last
    expect(answer).to_contain_text("You said")
    tab.click("#stop")
    expect(tab.locator("#status")).to_have_text("idle")
    expect(tab.locator(".notice")).to_have_text("stopped")
    stopped = answer.text_content() or ""
    assert "to talk to a real model." not in stopped  # cut short
    tab.reload()
    expect(tab.locator(".notice")).to_have_text("stopped")
    expect(tab.locator("#stop")).to_be_disabled()


@pytest.mark.parametrize("tab", [12], indirect=True)
def test_typing_while_the_agent_works_steers_it(tab: Page) -> None:
    _send(tab, "tell me a long story")
    expect(tab.locator(".message.assistant").last).to_contain_text("You said")
    expect(tab.locator("#send")).to_have_text("Steer")
    _send(tab, "What is 6 * 7?")
    expect(tab.locator(".message.user")).to_have_count(2, timeout=20_000)
    expect(tab.locator(".tool-call .name")).to_have_text("calculate")
    expect(tab.locator("#status")).to_have_text("idle", timeout=20_000)
    expect(tab.locator(".message.assistant").last).to_contain_text("6 * 7 = 42")
    # One run: the first answer was not cut short by the steering message.
    expect(tab.locator(".message.assistant").first).to_contain_text("offline demo model")


def test_reload_resumes_the_session_and_the_session_list(tab: Page) -> None:
    _send(tab, "What is 2 + 3?")
    expect(tab.locator("#status")).to_have_text("idle", timeout=20_000)
    expect(tab.locator(".message.assistant").last).to_contain_text("2 + 3 = 5")
    assert re.fullmatch(r"#s=[\w.-]+", tab.evaluate("location.hash"))
    first_session = tab.evaluate("location.hash")

    tab.reload()
    expect(tab.locator(".message.user")).to_have_text("What is 2 + 3?")
    expect(tab.locator(".tool-call .result")).to_have_text("5")
    expect(tab.locator(".message.assistant").last).to_contain_text("2 + 3 = 5")
    expect(tab.locator("#sessions li")).to_have_text(["What is 2 + 3?"])
    # The resumed session goes on where it was.
    _send(tab, "What is 10 * 10?")
    expect(tab.locator("#status")).to_have_text("idle", timeout=20_000)
    expect(tab.locator(".message.user")).to_have_count(2)
    assert tab.evaluate("location.hash") == first_session

    tab.click("#new-session")
    expect(tab.locator(".message")).to_have_count(0)
    _send(tab, "hello again")
    expect(tab.locator("#status")).to_have_text("idle", timeout=20_000)
    expect(tab.locator("#sessions li")).to_have_count(2)
    tab.locator("#sessions li", has_text="What is 2 + 3?").click()
    expect(tab.locator(".message.user")).to_have_count(2)
    assert tab.evaluate("location.hash") == first_session
