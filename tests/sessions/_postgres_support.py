"""The PostgreSQL test server: its URL from the environment, and throwaway schemas.

The tests read ``TRIO_AGENT_TEST_POSTGRES_URL``; without it they skip (under CI, where
``CI=true``, they fail instead). ``tests/sessions/start_postgres.sh`` starts Debian's
PostgreSQL 15 and creates the role and database of that URL.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator

import pytest

URL_VARIABLE = "TRIO_AGENT_TEST_POSTGRES_URL"
HOW_TO_START = (
    f"set {URL_VARIABLE} to a PostgreSQL URL to run the PostgreSQL session tests, e.g. "
    "`sudo tests/sessions/start_postgres.sh` (Debian's PostgreSQL 15, role and database "
    f"trio_agent) then `export {URL_VARIABLE}="
    "postgresql://trio_agent:trio_agent@127.0.0.1:5432/trio_agent_test`"
)


def postgres_url() -> str:
    """The test server's URL; skips the test (fails it under CI) when it is not set."""
    url = os.environ.get(URL_VARIABLE, "")
    if not url:
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail(f"CI=true and {URL_VARIABLE} is not set: {HOW_TO_START}", pytrace=False)
        pytest.skip(HOW_TO_START)
    try:
        import psycopg  # noqa: F401
    except ImportError:
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            raise
        pytest.skip("psycopg is not installed: pip install -e '.[postgres]'")
    return url


def new_schema_name() -> str:
    return f"test_{secrets.token_hex(6)}"


def drop_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@contextlib.contextmanager
def throwaway_schemas(url: str) -> Iterator[list[str]]:
    """A list to put schema names in; each is dropped at the end."""
    schemas: list[str] = []
    try:
        yield schemas
    finally:
        for schema in schemas:
            drop_schema(url, schema)
