"""Developer sessions: ``nox -s tests lint typecheck``; ``nox -s bench``, ``nox -s docs`` and
``nox -s interop`` (end to end against the aimock server; needs Node.js and npm)."""

from __future__ import annotations

import shutil
from pathlib import Path

import nox

nox.options.default_venv_backend = "venv"
nox.options.sessions = ["tests", "lint", "typecheck"]
nox.options.reuse_existing_virtualenvs = True

PYPROJECT = nox.project.load_toml("pyproject.toml")


def _install(session: nox.Session, *groups: str) -> None:
    session.install("-U", "pip")
    session.install("-e", ".")
    for group in groups:
        session.install(*nox.project.dependency_groups(PYPROJECT, group))


@nox.session
def tests(session: nox.Session) -> None:
    """Run the test suite."""
    _install(session, "test")
    session.run("pytest", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check."""
    session.install(*nox.project.dependency_groups(PYPROJECT, "lint"))
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict over the package and the tests."""
    _install(session, "typecheck")
    session.run("mypy")


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation with warnings as errors."""
    _install(session, "docs")
    session.run("sphinx-build", "-W", "-b", "html", "docs", "docs/_build/html")


@nox.session
def bench(session: nox.Session) -> None:
    """Run the benchmark scenarios S1-S4 and the sessions' S2S and S4S; one JSON line each."""
    _install(session, "bench")
    session.run("python", "-m", "bench", *session.posargs)


AIMOCK = "@copilotkit/aimock@1.43.0"
"""The mock server ``nox -s interop`` runs (pinned: its fixture format and fault modes)."""


@nox.session
def interop(session: nox.Session) -> None:
    """The three HTTP APIs end to end against aimock on 127.0.0.1 (not part of ``tests``).

    Installs the npm package into nox's cache directory (once), then runs
    ``tests/interop/aimock_e2e.py`` (exact answers and fault modes) and
    ``tests/interop/local_server_e2e.py`` (the shape checks meant for a real local server
    such as llama.cpp's ``llama-server``), which start the server themselves.
    """
    if shutil.which("node") is None or shutil.which("npm") is None:
        session.error("nox -s interop needs Node.js and npm on PATH")
    _install(session, "test")
    prefix = Path(session.cache_dir) / "aimock"
    cli = prefix / "node_modules" / "@copilotkit" / "aimock" / "dist" / "cli.js"
    if not cli.exists():
        prefix.mkdir(parents=True, exist_ok=True)
        session.run(
            "npm",
            "install",
            "--prefix",
            str(prefix),
            "--no-audit",
            "--no-fund",
            "--no-save",
            AIMOCK,
            external=True,
        )
    session.run(
        "pytest",
        "tests/interop/aimock_e2e.py",
        "tests/interop/local_server_e2e.py",
        "tests/testing/test_cassette_aimock.py",
        *session.posargs,
        env={"TRIO_AGENT_AIMOCK": str(cli)},
    )
