"""What a database URL (``KILN_DATABASE_URL``) is, for the settings and the store alike."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
DEFAULT_POOL_SIZE = 10


def is_postgres_url(location: str | Path) -> bool:
    """Whether ``location`` names a Postgres database (rather than a SQLite file)."""
    return isinstance(location, str) and location.startswith(POSTGRES_SCHEMES)


def redacted(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for messages and ``kiln doctor``)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))
