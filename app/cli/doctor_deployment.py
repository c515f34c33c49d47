"""``kiln doctor``'s deployment check: on a shared database, whether this host's settings agree
with the deployment's record (:mod:`app.service.deployment`), changing nothing."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import redis
import redis.exceptions

from app.cli.doctor_result import CheckResult
from app.config import SECRET_FILE, database_settings
from app.database_url import redacted
from app.errors import ConfigError
from app.service.deployment import (
    ID,
    REDIS_MARKER,
    HostSettings,
    project_store_marker,
    projects_mismatch,
    record_mismatch,
    redis_mismatch,
)
from app.store import StoreError, inspect_deployment
from sandbox import EnvReader, SandboxSettings

NAME = "deployment"
HINT = "give this host the deployment's setting named above (every host shares them)"


def check_deployment_settings(env: Mapping[str, str], data_dir: Path) -> CheckResult:
    """This host against the record in ``KILN_DATABASE_URL``'s database (SQLite: one host,
    nothing to agree on)."""
    read = EnvReader(env, ConfigError)
    try:
        url, pool = database_settings(read)
    except ConfigError as exc:
        return CheckResult(NAME, False, str(exc), "fix KILN_DATABASE_URL")
    if url is None:
        return CheckResult(NAME, True, "one host: the store is the SQLite file in the data dir")
    try:
        record = inspect_deployment(url, pool)
    except StoreError as exc:
        return CheckResult(NAME, False, str(exc), "start the database, or fix KILN_DATABASE_URL")
    if ID not in record:
        return CheckResult(NAME, True, "no host started on this database yet: this one may")
    host = _host(read, data_dir, url)
    if host is None:
        return CheckResult(NAME, True, f"{record[ID]!r}: no secret key here yet to compare")
    mismatch = record_mismatch(record, host.proposed(), host) or _marker_mismatch(record[ID], host)
    if mismatch is not None:
        return CheckResult(NAME, False, f"{mismatch} [{mismatch.code}]", HINT)
    return CheckResult(
        NAME, True, f"{record[ID]!r}: secret key, instance, Redis and project store agree"
    )


def _host(read: EnvReader, data_dir: Path, url: str) -> HostSettings | None:
    """This host's settings as ``kiln serve`` would read them (None: no secret key yet)."""
    secret = read.raw("KILN_SECRET_KEY")
    if not secret and (data_dir / SECRET_FILE).is_file():
        secret = (data_dir / SECRET_FILE).read_text().strip()
    if not secret:
        return None
    environment = {**read.env, "KILN_DATA_DIR": str(data_dir)}
    instance = SandboxSettings.from_env(environment).instance
    redis_url = read.raw("REDIS_URL") or ""
    return HostSettings(secret, instance, data_dir / "projects", redacted(url), redis_url)


def _marker_mismatch(deployment: str, host: HostSettings) -> ConfigError | None:
    """The refusal a start would meet at Redis's or the project store's marker, or None."""
    if host.redis_url:
        client = redis.Redis.from_url(host.redis_url, socket_connect_timeout=3, socket_timeout=3)
        try:
            found = client.get(REDIS_MARKER)
        except (redis.exceptions.RedisError, ValueError) as exc:
            return ConfigError(f"REDIS_URL does not answer: {exc}")
        finally:
            client.close()
        mismatch = redis_mismatch(found, deployment, host)
        if mismatch is not None:
            return mismatch
    return projects_mismatch(project_store_marker(host.projects_dir), deployment, host.projects_dir)
