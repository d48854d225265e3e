"""``trio-agent serve`` is handed to trio_agent.web; the top-level help lists it."""

from __future__ import annotations

import pytest

from trio_agent._cli import main


def test_serve_is_listed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "serve     serve a chat page on http://127.0.0.1:8321/" in capsys.readouterr().out


def test_serve_parses_its_own_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: trio-agent serve")
    assert "--on-disconnect {abort,continue}" in out


def test_a_bad_serve_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--bogus"]) == 2
    assert "trio-agent serve: error: unrecognized arguments: --bogus" in capsys.readouterr().err
