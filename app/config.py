"""The settings of ``kiln serve`` and ``kiln worker``, read from the environment.

- ``KILN_DATA_DIR``: the database and the secret file (default ``~/.local/share/kiln``), kept
  private to kiln's OS user (:mod:`app.data_dir`);
- ``KILN_DATABASE_URL``: ``postgresql://user:password@host:port/database`` puts the store on
  Postgres (hosts share it); unset, it is the SQLite file ``<data dir>/kiln.db``;
- ``KILN_DATABASE_POOL`` (10, 1 to 1000): Postgres connections one process holds at most;
- ``KILN_SECRET_KEY``: encrypts stored provider keys (below; default: generated);
- ``REDIS_URL``: Redis (unset: ``kiln serve`` starts an embedded one); its password in the URL
  or in the file ``KILN_REDIS_PASSWORD_FILE`` (:mod:`sandbox.redis_url`: one rule for every
  client; the URL is never printed with it);
- ``KILN_HOST`` / ``KILN_PORT``: where the API listens (``127.0.0.1`` / 8000);
- ``KILN_PUBLIC_HOST``: the host name browsers use: the UI is there, previews at
  ``<id>.preview.<it>`` (``kiln.localhost``: the same *site*, see docs/architecture.md);
- ``KILN_MAX_ACTIVE_RUNS`` (200), ``KILN_MAX_ACTIVE_RUNS_PER_USER`` (2),
  ``KILN_MAX_ACTIVE_RUNS_PER_CHAT`` (1): limits of active (queued or running) runs;
- ``KILN_USER_REQUESTS_PER_MINUTE`` (30): messages one user may send per minute;
- ``KILN_MAX_EVENT_STREAMS_PER_USER`` (20): live event streams one user may hold open per
  process (429 beyond it);
- ``KILN_RUN_CLAIM_IDLE`` (30 s): a run whose worker went silent this long is reclaimed;
- ``KILN_QUEUED_TIMEOUT`` (600 s) / ``KILN_RUN_DEADLINE`` (1800 s): longer waits in the queue,
  or longer runs, are failed by the stale-run reaper;
- ``KILN_WORKER_CONCURRENCY`` (4): runs one worker process executes at once;
- ``KILN_EVENT_BATCH_MS`` (100) / ``KILN_EVENT_BATCH_BYTES`` (16384): content events are stored
  in batches, at least this often or once this many bytes are pending;
- ``KILN_STOP_LIMIT`` (15 s, 5 to 600): ``kiln serve`` is gone this long after the first
  SIGINT/SIGTERM at the latest (:mod:`app.service.stop_deadline`);
- ``KILN_PROJECT_MAX_BYTES`` (52428800 bytes, 50 MiB): the cap on one version of a chat's
  project (its source files);
- ``KILN_PROJECTS_DIR`` (``<data dir>/projects``): where the chats' projects are kept; hosts
  of one deployment point it at one shared volume (docs/architecture.md "Projects on several
  hosts").
- ``KILN_PUBLISHED_DIR`` (``<data dir>/published``): where published apps' builds are kept;
  hosts of one deployment point it at the shared volume too, so a link made through one host
  is served by every host.

**The secret key.** ``KILN_SECRET_KEY`` (any string of at least 16 characters) is the root of
the Fernet key that encrypts users' provider keys at rest. When it is unset, a random key is
generated once and kept in ``<data dir>/secret.key`` (mode 0600); later starts read it back.
Losing that file (or changing the variable) makes the stored provider keys unreadable: users
then have to enter them again. Back it up with the database, and keep it out of logs: it never
appears in this object's ``repr``.

A malformed value raises :class:`~app.errors.ConfigError` naming the variable and the value
(read by :class:`sandbox.EnvReader`, the one reader of kiln's settings: ranges, no ``inf``).
The ``openai-compatible`` provider's settings (:mod:`app.providers.compatible_settings`) are
checked here too, so a bad one stops ``kiln serve``/``kiln worker`` at start rather than
failing every request that resolves a provider.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from app.data_dir import private_folder
from app.database_url import DEFAULT_POOL_SIZE, is_postgres_url, redacted
from app.errors import ConfigError
from app.providers.compatible_settings import CompatibleSettings
from sandbox import EnvReader, data_dir_from_env, redis_url_from_env

SECRET_FILE = "secret.key"
MIN_SECRET_LENGTH = 16


@dataclass(frozen=True)
class ServiceSettings:
    """Everything the service (API, workers, store, admission) is tuned with."""

    data_dir: Path
    secret_key: str = field(repr=False)
    redis_url: str | None = field(default=None, repr=False)  # may hold a password
    database_url: str | None = field(default=None, repr=False)  # may hold a password
    database_pool: int = DEFAULT_POOL_SIZE
    host: str = "127.0.0.1"
    port: int = 8000
    public_host: str = "kiln.localhost"
    max_active_runs: int = 200
    max_active_runs_per_user: int = 2
    max_active_runs_per_chat: int = 1
    user_requests_per_minute: int = 30
    run_claim_idle_seconds: float = 30.0
    queued_timeout_seconds: float = 600.0
    run_deadline_seconds: float = 1800.0
    worker_concurrency: int = 4
    event_batch_seconds: float = 0.1
    event_batch_bytes: int = 16384
    project_max_bytes: int = 50 * 2**20
    max_event_streams_per_user: int = 20
    stop_limit_seconds: float = 15.0
    projects_root: Path | None = None  # KILN_PROJECTS_DIR; unset: in the data dir
    published_root: Path | None = None  # KILN_PUBLISHED_DIR; unset: in the data dir

    @property
    def database_path(self) -> Path:
        """The SQLite file (the store's database when ``KILN_DATABASE_URL`` is unset)."""
        return self.data_dir / "kiln.db"

    @property
    def database_location(self) -> Path | str:
        """The store's database: the Postgres URL, or the SQLite file."""
        return self.database_url or self.database_path

    @property
    def projects_dir(self) -> Path:
        """Where the chats' projects (one git repository each) are kept."""
        return self.projects_root or self.data_dir / "projects"

    @property
    def published_dir(self) -> Path:
        """Where published apps' builds are kept (app.publish.storage)."""
        return self.published_root or self.data_dir / "published"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ServiceSettings:
        """Settings from the environment (table in the module docstring); creates the data
        directory, or makes the one there private (0700: :func:`app.data_dir.private_folder`),
        and, when ``KILN_SECRET_KEY`` is unset, the secret file."""
        read = EnvReader(env, ConfigError)
        CompatibleSettings.from_env(read.env)  # checked now; read again where it is used
        data_dir = data_dir_from_env(read.env)
        try:
            private_folder(data_dir)
        except OSError as exc:
            raise ConfigError(f"cannot make the data directory {str(data_dir)!r}: {exc}") from exc
        database_url, database_pool = database_settings(read)
        return cls(
            data_dir=data_dir,
            secret_key=_secret_key(read, data_dir),
            redis_url=redis_url_from_env(read),
            database_url=database_url,
            database_pool=database_pool,
            host=read.text("KILN_HOST", cls.host),
            port=read.integer("KILN_PORT", cls.port, low=1, high=65535),
            public_host=read.text("KILN_PUBLIC_HOST", cls.public_host),
            max_active_runs=_count(read, "KILN_MAX_ACTIVE_RUNS", cls.max_active_runs),
            max_active_runs_per_user=_count(
                read, "KILN_MAX_ACTIVE_RUNS_PER_USER", cls.max_active_runs_per_user
            ),
            max_active_runs_per_chat=_count(
                read, "KILN_MAX_ACTIVE_RUNS_PER_CHAT", cls.max_active_runs_per_chat
            ),
            user_requests_per_minute=_count(
                read, "KILN_USER_REQUESTS_PER_MINUTE", cls.user_requests_per_minute
            ),
            run_claim_idle_seconds=read.number("KILN_RUN_CLAIM_IDLE", cls.run_claim_idle_seconds),
            queued_timeout_seconds=read.number("KILN_QUEUED_TIMEOUT", cls.queued_timeout_seconds),
            run_deadline_seconds=read.number("KILN_RUN_DEADLINE", cls.run_deadline_seconds),
            worker_concurrency=_count(read, "KILN_WORKER_CONCURRENCY", cls.worker_concurrency),
            event_batch_seconds=read.number("KILN_EVENT_BATCH_MS", 100.0) / 1000.0,
            event_batch_bytes=_count(read, "KILN_EVENT_BATCH_BYTES", cls.event_batch_bytes),
            project_max_bytes=read.integer(
                "KILN_PROJECT_MAX_BYTES", cls.project_max_bytes, low=1024, high=2**40
            ),
            max_event_streams_per_user=_count(
                read, "KILN_MAX_EVENT_STREAMS_PER_USER", cls.max_event_streams_per_user
            ),
            stop_limit_seconds=read.number(
                "KILN_STOP_LIMIT", cls.stop_limit_seconds, low=5.0, high=600.0, low_open=False
            ),
            projects_root=read.optional_path("KILN_PROJECTS_DIR"),
            published_root=read.optional_path("KILN_PUBLISHED_DIR"),
        )


def database_settings(read: EnvReader) -> tuple[str | None, int]:
    """``KILN_DATABASE_URL`` (a Postgres URL, or None: SQLite in the data dir) and
    ``KILN_DATABASE_POOL`` (also read by ``kiln doctor``)."""
    pool = read.integer("KILN_DATABASE_POOL", DEFAULT_POOL_SIZE, low=1, high=1000)
    url = read.raw("KILN_DATABASE_URL")
    if url is None or is_postgres_url(url.strip()):
        return (None if url is None else url.strip()), pool
    raise ConfigError(
        f"KILN_DATABASE_URL={redacted(url)!r} must be a postgresql:// URL"
        " (or unset: the SQLite file in the data dir)"
    )


def _count(read: EnvReader, name: str, default: int) -> int:
    """A limit or a size: a whole number from 1 up to a billion."""
    return read.integer(name, default, low=1, high=10**9)


def _secret_key(read: EnvReader, data_dir: Path) -> str:
    """``KILN_SECRET_KEY``, or the key kept in the data directory (generated the first time)."""
    given = read.raw("KILN_SECRET_KEY")
    if given:
        if len(given) < MIN_SECRET_LENGTH:
            # The value itself is a secret: name the variable, never echo it.
            raise ConfigError(
                f"KILN_SECRET_KEY must be at least {MIN_SECRET_LENGTH} characters, got {len(given)}"
            )
        return given
    return load_or_create_secret(data_dir / SECRET_FILE)


def load_or_create_secret(path: Path) -> str:
    """The secret kept in ``path``; created with mode 0600 when absent.

    The file is written under a temporary name and hard-linked into place, so two processes
    starting at once agree on one secret and nobody ever reads a half-written file.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "w") as handle:
                handle.write(secrets.token_urlsafe(32) + "\n")
            try:
                os.link(temporary, path)
            except FileExistsError:
                pass  # another process won the race: its secret is the one
            finally:
                temporary.unlink()
        return _read_secret(path)
    except OSError as exc:
        raise ConfigError(f"cannot keep the secret key in {str(path)!r}: {exc}") from exc


def _read_secret(path: Path) -> str:
    secret = path.read_text().strip()
    if len(secret) < MIN_SECRET_LENGTH:
        raise ConfigError(
            f"the secret key file {str(path)!r} holds fewer than {MIN_SECRET_LENGTH} characters; "
            "remove it to generate a new one (stored provider keys are then lost)"
        )
    return secret
