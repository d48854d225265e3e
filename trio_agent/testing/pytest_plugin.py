"""A pytest plugin with fixtures for testing agents (opt-in).

Enable it with ``-p trio_agent.testing.pytest_plugin`` on the command line, or in a
``conftest.py``::

    pytest_plugins = ["trio_agent.testing.pytest_plugin"]

Fixtures (async ones need pytest-trio: ``trio_mode = true`` or ``@pytest.mark.trio``):

- ``faux_provider``: a :class:`~trio_agent.models.FauxProvider`; when the test passed,
  its teardown calls :meth:`~trio_agent.models.FauxProvider.assert_complete`, so
  scripted steps left over fail the test;
- ``faux_model``: that provider's model;
- ``event_recorder``: an :class:`~trio_agent.testing.EventRecorder`;
- ``agent_factory``: ``agent_factory(*, system_prompt="", tools=(), record=True,
  **options)`` makes an :class:`~trio_agent.Agent` on the faux provider, subscribed to
  ``event_recorder`` unless ``record=False``;
- ``cassette``: a :class:`~trio_agent.testing.CassetteTransport` for this test, at
  ``<test file folder>/cassettes/<test file name>/<test name>.json``, in the mode of
  ``--cassette-mode`` (default ``none``: replay only);
- ``cassette_client``: an ``httpx.AsyncClient`` over ``cassette`` (closed after the
  test, which writes what was recorded and raises an unmatched request's error);
  hand it to ``Models(http_client=...)``.

The marker ``@pytest.mark.cassette(name=None, mode=None, **options)`` changes the file
name (relative to the test file's ``cassettes/<test file name>/`` folder), the mode, or
passes :class:`~trio_agent.testing.CassetteTransport` options (``match_on``,
``secrets``, ``pace``).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from .. import Agent, AgentInitialState, AgentTool
from .._messages import Model
from ..models._faux import FauxProvider
from ._cassette import _MODES, CassetteTransport, RecordMode
from ._recorder import EventRecorder

__all__ = [
    "agent_factory",
    "cassette",
    "cassette_client",
    "event_recorder",
    "faux_model",
    "faux_provider",
]

_PASSED = pytest.StashKey[bool]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("trio_agent")
    group.addoption(
        "--cassette-mode",
        choices=_MODES,
        default="none",
        help="record mode of the trio_agent cassette fixture (default: none, replay only)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "cassette(name=None, mode=None, **options): the trio_agent cassette of this test",
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call":
        item.stash[_PASSED] = report.passed
    return report


@pytest.fixture
def faux_provider(request: pytest.FixtureRequest) -> Iterator[FauxProvider]:
    """A faux provider whose scripted steps must all be used by a passing test."""
    provider = FauxProvider()
    yield provider
    if request.node.stash.get(_PASSED, False):
        provider.assert_complete()


@pytest.fixture
def faux_model(faux_provider: FauxProvider) -> Model:
    """The faux provider's model."""
    return faux_provider.get_model()


@pytest.fixture
def event_recorder() -> EventRecorder:
    """An event recorder (``agent_factory`` subscribes it to the agents it makes)."""
    return EventRecorder()


@pytest.fixture
def agent_factory(
    faux_provider: FauxProvider, event_recorder: EventRecorder
) -> Callable[..., Agent]:
    """Makes agents on the faux provider: ``agent_factory(*, system_prompt="", tools=(),
    record=True, **options)``; ``options`` are the Agent's keyword options."""

    def make(
        *,
        system_prompt: str = "",
        tools: Sequence[AgentTool] = (),
        record: bool = True,
        **options: Any,
    ) -> Agent:
        options.setdefault("stream_fn", faux_provider.stream_fn)
        agent = Agent(
            AgentInitialState(
                system_prompt=system_prompt, model=faux_provider.get_model(), tools=list(tools)
            ),
            **options,
        )
        if record:
            agent.subscribe(event_recorder)
        return agent

    return make


def _cassette_name(node_name: str) -> str:
    return re.sub(r"[^\w.-]+", "_", node_name).strip("_") + ".json"


@pytest.fixture
def cassette(request: pytest.FixtureRequest) -> CassetteTransport:
    """The cassette transport of this test (see the module docstring for its file)."""
    marker = request.node.get_closest_marker("cassette")
    options: dict[str, Any] = dict(marker.kwargs) if marker is not None else {}
    name = options.pop("name", None) or _cassette_name(request.node.name)
    mode: RecordMode = options.pop("mode", None) or request.config.getoption("cassette_mode")
    test_file = Path(request.node.path)
    path = test_file.parent / "cassettes" / test_file.stem / name
    return CassetteTransport(path, mode=mode, **options)


@pytest.fixture
async def cassette_client(cassette: CassetteTransport) -> AsyncIterator[httpx.AsyncClient]:
    """An ``httpx.AsyncClient`` over this test's cassette."""
    async with httpx.AsyncClient(transport=cassette) as client:
        yield client
