"""``kiln doctor``'s database check: the store's database answers, its version, whether its
migrations are current, and the connection pool's bound (Postgres)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from app.cli.doctor_result import CheckResult
from app.config import database_settings
from app.errors import ConfigError
from app.store import StoreError, StoreStatus, inspect_database
from sandbox import EnvReader

NAME = "database"


def check_database(env: Mapping[str, str], data_dir: Path) -> CheckResult:
    """``KILN_DATABASE_URL``'s Postgres, or the SQLite file in ``data_dir``, inspected."""
    try:
        url, pool = database_settings(EnvReader(env, ConfigError))
    except ConfigError as exc:
        return CheckResult(NAME, False, str(exc), "fix KILN_DATABASE_URL / KILN_DATABASE_POOL")
    sqlite_file = data_dir / "kiln.db"
    if url is None and not sqlite_file.exists():
        return CheckResult(NAME, True, f"SQLite {sqlite_file}: made by kiln serve at its start")
    try:
        status = inspect_database(url or sqlite_file, pool)
    except StoreError as exc:
        hint = "start the database, or fix KILN_DATABASE_URL (unset: SQLite in the data dir)"
        return CheckResult(NAME, False, str(exc), hint)
    return judged(status)


def judged(status: StoreStatus) -> CheckResult:
    """The check's result for an inspected database."""
    pool = f", pool of {status.pool_size}" if status.pool_size is not None else ""
    found = f"{status.server_version} at {status.location}{pool}"
    pending = status.migrations - status.schema_version
    if pending < 0:
        hint = "a newer kiln migrated this database: run that version (or a newer one) here"
        detail = f"{found}: schema {status.schema_version}, this kiln knows {status.migrations}"
        return CheckResult(NAME, False, detail, hint)
    if pending > 0:
        return CheckResult(
            NAME, True, f"{found}: migrations pending ({pending}): applied at the next start"
        )
    return CheckResult(NAME, True, f"{found}: schema {status.schema_version} is current")
