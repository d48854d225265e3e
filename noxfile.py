"""Developer sessions: ``nox -s tests lint typecheck``; ``nox -s bench`` and ``nox -s docs``."""

from __future__ import annotations

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
    """Run the benchmark scenarios S1-S4; one JSON line each."""
    _install(session, "bench")
    session.run("python", "-m", "bench", *session.posargs)
