"""What a database URL (``KILN_DATABASE_URL``) is, for the settings and the store alike."""

from __future__ import annotations

from pathlib import Path

from sandbox import redacted_url

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
DEFAULT_POOL_SIZE = 10


def is_postgres_url(location: str | Path) -> bool:
    """Whether ``location`` names a Postgres database (rather than a SQLite file)."""
    return isinstance(location, str) and location.startswith(POSTGRES_SCHEMES)


# The one rule that hides a URL's password (also a ``?password=`` query), Redis' and Postgres'.
redacted = redacted_url
