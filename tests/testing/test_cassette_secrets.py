"""No key or token reaches a cassette: headers, query strings, request and response bodies
are redacted when recording (with trio_agent's redaction rules)."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

# The provider tests' scripted loopback server (tests/models/sse_server.py), shared.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))

from sse_server import ScriptedResponse, SseServer, sse_response, start_sse_server
from test_cassette import KEY, _completions_frame, make_model, stream_once
from test_provider_agent_e2e import ANTHROPIC, COMPLETIONS

from trio_agent import Model, StreamOptions
from trio_agent.testing import CassetteTransport, load_cassette, redact_request

HEADER_TOKEN = "tok-header-9f8e7d6c5b4a39281706"
QUERY_KEY = "qk-0a1b2c3d4e5f60718293a4b5"
ENV_KEY = "sk-env-5f4e3d2c1b0a99887766"
BODY_KEY = "bk-77aa88bb99cc00dd11ee22ff"
SECRETS = [KEY, HEADER_TOKEN, QUERY_KEY, ENV_KEY, BODY_KEY]


@pytest.fixture
async def sse_server(nursery: trio.Nursery) -> SseServer:
    """A running loopback server (stopped with the test's nursery)."""
    return await start_sse_server(nursery)


def forms(secret: str) -> list[str]:
    """The spellings a secret could take in a cassette file."""
    return [
        secret,
        json.dumps(secret)[1:-1],
        secret[: len(secret) // 2 + 4],  # a long prefix (a cut)
        base64.b64encode(secret.encode()).decode()[:16],
    ]


def assert_no_secret(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    for secret in SECRETS:
        for form in forms(secret):
            assert form not in text, (secret, form)
    assert "[REDACTED]" in text


async def test_no_secret_reaches_a_cassette(
    sse_server: SseServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    path = tmp_path / "secrets.json"
    echo = f'{{"error": {{"message": "Invalid key {KEY} (token {HEADER_TOKEN})"}}}}'.encode()
    cut = echo.index(KEY.encode()) + 10  # the key straddles two chunks
    sse_server.enqueue(
        # Completions: bearer key, a token header, secrets in the body, an echoing server.
        ScriptedResponse(
            status=401,
            headers={"content-type": "application/json", "set-cookie": f"session={KEY}"},
            chunks=[echo[:cut], echo[cut:]],
        ),
        # Anthropic: x-api-key.
        sse_response([_completions_frame("hi")]),
    )

    def payload(body: dict[str, Any], model: Model) -> dict[str, Any]:
        return {**body, "metadata": {"note": f"env {ENV_KEY}", "api_key": BODY_KEY}}

    completions = make_model(COMPLETIONS, sse_server.base_url)
    options = StreamOptions(
        api_key=KEY, headers={"X-Custom-Token": HEADER_TOKEN}, on_payload=payload
    )
    events = await stream_once(CassetteTransport(path), completions, options)
    assert events[-1].type == "error"
    anthropic = make_model(ANTHROPIC, sse_server.base_url)
    await stream_once(CassetteTransport(path, mode="new_episodes"), anthropic)
    # The server did receive them (so they were there to be redacted).
    first, second = sse_server.requests
    assert first.headers["authorization"] == f"Bearer {KEY}"
    assert first.headers["x-custom-token"] == HEADER_TOKEN
    assert second.headers["x-api-key"] == KEY

    # A URL with credentials, through the transport as any httpx request.
    sse_server.enqueue(sse_response([b"data: {}\n\n"]))
    async with httpx.AsyncClient(transport=CassetteTransport(path, mode="new_episodes")) as client:
        url = f"http://user:{HEADER_TOKEN}@127.0.0.1:{sse_server.port}/v1/x?key={QUERY_KEY}&a=1"
        reply = await client.get(url)
        assert reply.status_code == 200

    assert_no_secret(path)
    interactions = load_cassette(path)
    assert len(interactions) == 3
    request = interactions[0].request
    headers = {name.lower(): value for name, value in request.headers}
    assert headers["authorization"] == headers["x-custom-token"] == "[REDACTED]"
    body = json.loads(request.body)
    assert body["metadata"] == {"note": "env [REDACTED]", "api_key": "[REDACTED]"}
    response = interactions[0].response
    assert response is not None
    assert b"".join(c.data for c in response.chunks) == (
        b'{"error": {"message": "Invalid key [REDACTED] (token [REDACTED])"}}'
    )
    assert {n.lower(): v for n, v in response.headers}["set-cookie"] == "[REDACTED]"
    assert interactions[2].request.url == (
        f"http://[REDACTED]@127.0.0.1:{sse_server.port}/v1/x?key=[REDACTED]&a=1"
    )

    # Replaying matches the redacted recording with the real keys in the requests.
    replayed = await stream_once(CassetteTransport(path, mode="none"), completions, options)
    assert replayed[-1].type == "error"
    assert replayed[-1].error.error_message == (
        '401: {"message":"Invalid key [REDACTED] (token [REDACTED])"}'
    )


def test_redact_request_is_the_recorded_form() -> None:
    request = httpx.Request(
        "POST",
        f"https://api.example/v1?api_key={QUERY_KEY}",
        headers={"Authorization": f"Bearer {KEY}", "Accept": "text/event-stream"},
        content=json.dumps({"model": "m", "echo": KEY, "token": BODY_KEY}).encode(),
    )
    recorded = redact_request(request, secrets=[BODY_KEY])
    assert recorded.method == "POST"
    assert recorded.url == "https://api.example/v1?api_key=[REDACTED]"
    assert ("Authorization", "[REDACTED]") in recorded.headers
    assert ("Accept", "text/event-stream") in recorded.headers
    assert json.loads(recorded.body) == {"model": "m", "echo": "[REDACTED]", "token": "[REDACTED]"}
