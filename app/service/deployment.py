"""One deployment, several hosts: the settings every host must agree on, checked at start.

A deployment that shares its store (``KILN_DATABASE_URL``: Postgres) runs any number of ``kiln
serve --no-worker`` and ``kiln worker`` processes on any hosts; any of them serves any chat
only if they agree on what the chats' data is read and written with. The database holds the
record (:mod:`app.store.deployment`), written by the first host to start:

========== ======================== =====================================================
name       setting                  why it must agree
========== ======================== =====================================================
id         ``KILN_DATABASE_URL``    the deployment's identity; Redis and the project store
                                    carry it as a marker, the instance claim is keyed by it
secret_key ``KILN_SECRET_KEY``      a fingerprint (HKDF of the key, never the key): stored
                                    provider keys, app variables and sealed preview links
                                    open only with the same key
instance   ``KILN_INSTANCE``        sandboxes are recorded and reaped by instance: hosts on
                                    two instances would not find each other's sandboxes
========== ======================== =====================================================

``REDIS_URL``: the Redis database holds ``kiln:deployment`` = the id (set if absent); another
deployment's id there means two deployments would share one run queue. ``<data dir>/projects``
(the project store): its ``.kiln-deployment`` file holds the id the same way. A host whose
settings differ stops in words naming the setting (never a secret's value), code
``deployment_mismatch``. A Redis or a project folder that carries no marker yet is taken as the
deployment's (a Redis restarted without persistence looks the same as a new one).

The embedded store (SQLite in the data dir) is one host's by construction: nothing is checked,
and the instance claim stays keyed by the data directory.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import anyio.to_thread
import redis.asyncio
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from app.config import ServiceSettings
from app.database_url import redacted
from app.errors import ConfigError, DeploymentMismatch
from app.store import Store
from sandbox import claim_instance, wrap_redis_errors

ID, SECRET_KEY, INSTANCE = "id", "secret_key", "instance"
REDIS_MARKER = "kiln:deployment"
PROJECTS_MARKER = ".kiln-deployment"
_FINGERPRINT_PURPOSE = b"kiln deployment: secret key fingerprint"
# What each recorded name is set by, and what a host with another value would break.
RECORDED_SETTINGS: Mapping[str, tuple[str, str]] = {
    SECRET_KEY: (
        "KILN_SECRET_KEY",
        "stored provider keys, app variables and preview links made by the other hosts would "
        "not open here",
    ),
    INSTANCE: (
        "KILN_INSTANCE",
        "the hosts would not find each other's sandboxes (each instance reaps its own)",
    ),
}


def secret_fingerprint(secret_key: str) -> str:
    """A fingerprint of the secret key that tells keys apart and gives nothing of the key:
    HKDF-SHA256 with a purpose of its own (the encryption key uses another)."""
    derived = HKDF(
        algorithm=hashes.SHA256(), length=16, salt=None, info=_FINGERPRINT_PURPOSE
    ).derive(secret_key.encode())
    return derived.hex()


@dataclass(frozen=True)
class HostSettings:
    """This host's side of the deployment's settings."""

    secret_key: str = field(repr=False)
    instance: str
    projects_dir: Path
    database: str  # the URL without its password, for the words
    redis_url: str = field(repr=False)

    def proposed(self) -> dict[str, str]:
        """The record this host writes if it is the first."""
        return {
            ID: secrets.token_hex(8),
            SECRET_KEY: secret_fingerprint(self.secret_key),
            INSTANCE: self.instance,
        }


async def check_deployment(store: Store, client: redis.asyncio.Redis, host: HostSettings) -> str:
    """The deployment's id once ``host`` agrees with it (the record written first if this host
    is the first); :class:`DeploymentMismatch` naming the setting that differs."""
    proposed = host.proposed()
    record = await anyio.to_thread.run_sync(store.deployment_record, proposed)
    mismatch = record_mismatch(record, proposed, host)
    if mismatch is not None:
        raise mismatch
    deployment = record[ID]
    await _check_redis(client, deployment, host)
    await anyio.to_thread.run_sync(_check_projects, host.projects_dir, deployment)
    return deployment


def record_mismatch(
    record: Mapping[str, str], mine: Mapping[str, str], host: HostSettings
) -> DeploymentMismatch | None:
    """The refusal for the first recorded setting ``mine`` disagrees with, or None."""
    for name, (setting, breaks) in RECORDED_SETTINGS.items():
        theirs = record.get(name)
        if theirs is None or theirs == mine[name]:
            continue
        shown = "" if name == SECRET_KEY else f" ({mine[name]!r}, the deployment's {theirs!r})"
        return DeploymentMismatch(
            f"{setting} differs from the one the deployment's first host started with{shown}, "
            f"as recorded in the database {host.database!r}: {breaks}. Give every host of "
            f"the deployment the same {setting}"
        )
    return None


async def _check_redis(client: redis.asyncio.Redis, deployment: str, host: HostSettings) -> None:
    with wrap_redis_errors("checking Redis's deployment marker"):
        await client.set(REDIS_MARKER, deployment, nx=True)
        found = await client.get(REDIS_MARKER)
    mismatch = redis_mismatch(found, deployment, host)
    if mismatch is not None:
        raise mismatch


def redis_mismatch(found: object, deployment: str, host: HostSettings) -> DeploymentMismatch | None:
    """The refusal when Redis's marker (``found``, as read) names another deployment."""
    if found is None:
        return None
    theirs = found.decode() if isinstance(found, bytes) else str(found)
    if theirs == deployment:
        return None
    return DeploymentMismatch(
        f"REDIS_URL {redacted(host.redis_url)!r} holds the run queue of another deployment "
        f"({theirs!r}), not of the database {host.database!r} ({deployment!r}): two "
        "deployments would take each other's runs. Give every host of the deployment the "
        "same KILN_DATABASE_URL and REDIS_URL (another deployment: another Redis database)"
    )


def _check_projects(projects_dir: Path, deployment: str) -> None:
    found = project_store_marker(projects_dir, write=deployment)
    mismatch = projects_mismatch(found, deployment, projects_dir)
    if mismatch is not None:
        raise mismatch


def projects_mismatch(
    theirs: str | None, deployment: str, projects_dir: Path
) -> DeploymentMismatch | None:
    """The refusal when the project store's marker names another deployment."""
    if theirs is None or theirs == deployment:
        return None
    return DeploymentMismatch(
        f"the project store {str(projects_dir)!r} holds another deployment's projects "
        f"({theirs!r}), not those of this database ({deployment!r}): versions would be "
        "written where the other hosts never look. Give every host the deployment's shared "
        "project folder"
    )


def project_store_marker(projects_dir: Path, *, write: str | None = None) -> str | None:
    """The deployment id the project store carries; ``write`` is put there first when it
    carries none (made under a temporary name and linked into place: one writer wins)."""
    marker = projects_dir / PROJECTS_MARKER
    try:
        if write is not None and not marker.exists():
            projects_dir.mkdir(parents=True, exist_ok=True)
            temporary = projects_dir / f".{PROJECTS_MARKER}.{secrets.token_hex(4)}"
            temporary.write_text(write + "\n")
            try:
                os.link(temporary, marker)
            except FileExistsError:
                pass  # another host won: its id is the one
            finally:
                temporary.unlink()
        with contextlib.suppress(FileNotFoundError):
            return marker.read_text().strip()
    except OSError as exc:
        raise ConfigError(f"cannot read the project store {str(projects_dir)!r}: {exc}") from exc
    return None


async def join_deployment(
    settings: ServiceSettings, store: Store, client: redis.asyncio.Redis, instance: str
) -> str | None:
    """What ``kiln serve`` and ``kiln worker`` do at start before opening a sandbox manager:
    on a shared database, check this host against its deployment and claim the instance for
    the deployment; on the embedded store, claim it for the data directory. The deployment's
    id (None on the embedded store)."""
    deployment = None
    if settings.database_url is not None:
        host = HostSettings(
            settings.secret_key,
            instance,
            settings.projects_dir,
            redacted(settings.database_url),
            settings.redis_url or "",
        )
        deployment = await check_deployment(store, client, host)
    await claim_instance(instance, settings.data_dir, deployment)
    return deployment
