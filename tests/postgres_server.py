"""A private Postgres server for the tests (like the Redis fixture: own data dir, own port).

The binaries are found from ``pg_config --bindir`` or ``/usr/lib/postgresql/<n>/bin`` (Debian
keeps them off PATH). ``initdb`` refuses to run as root, and the tests run as root in CI: then
the server runs as the ``postgres`` user (Debian's package makes it) in a folder it owns. The
server trades durability for speed (no fsync): it is thrown away at the end of the session.
Each test gets a fresh, empty schema (:meth:`PostgresServer.fresh_url`), which is what a fresh
database gives a test, in milliseconds instead of a ``CREATE DATABASE``.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import psycopg

from tests.servers import free_port

START_SECONDS = 60.0
START_ATTEMPTS = 5
DATABASE = "kiln"
ROLE = "kiln"
INITDB_FLAGS = ("--no-sync", "--encoding=UTF8", "--locale=C")
CREATEDB = ("-U", ROLE, DATABASE)
SERVER_SETTINGS = (
    "fsync=off",
    "synchronous_commit=off",
    "full_page_writes=off",
    "max_connections=200",
)


class PostgresMissing(RuntimeError):
    """Postgres is not installed (the tests fail, never skip)."""


def binaries() -> Path:
    """The folder of ``initdb`` and ``postgres``."""
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        found = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        candidates.append(Path(found.stdout.strip()))
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "postgres").is_file():
            return folder
    raise PostgresMissing(
        "Postgres is not installed (no initdb in pg_config --bindir or /usr/lib/postgresql/*/bin);"
        " the store's tests need the real thing: apt-get install postgresql"
    )


class PostgresServer:
    """A running throw-away server; :meth:`stop` removes it with its data."""

    def __init__(self) -> None:
        """Make a cluster (initdb) in a new private folder; :meth:`start` runs it."""
        self.bin = binaries()
        self.folder = Path(tempfile.mkdtemp(prefix="kiln-postgres-"))
        self.log = self.folder / "server.log"
        self.user = _unprivileged_user()
        if self.user is not None:
            os.chown(self.folder, self.user.pw_uid, self.user.pw_gid)
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self._schemas = itertools.count(1)
        data = self.folder / "data"
        self._run(
            [str(self.bin / "initdb"), "-D", str(data), "-U", ROLE, "--auth=trust", *INITDB_FLAGS]
        )

    @property
    def url(self) -> str:
        """The test database's URL."""
        return f"postgresql://{ROLE}@127.0.0.1:{self.port}/{DATABASE}"

    def start(self) -> None:
        """Run the server on a free port (retried when another process took the port)."""
        for _ in range(START_ATTEMPTS):
            self.port = free_port()
            self.log.write_text("")
            if self._start_once():
                self._run(
                    [str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), *CREATEDB]
                )
                return
            if "already in use" not in self.log.read_text():
                raise RuntimeError(f"postgres exited at start: {self.log.read_text()!r}")
        raise RuntimeError(f"postgres found no free port in {START_ATTEMPTS} attempts")

    def _start_once(self) -> bool:
        argv = [str(self.bin / "postgres"), "-D", str(self.folder / "data"), "-p", str(self.port)]
        argv += ["-h", "127.0.0.1", "-k", str(self.folder)]
        for setting in SERVER_SETTINGS:
            argv += ["-c", setting]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, user=self._user_id()
            )
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline and self.process.poll() is None:
            with contextlib.suppress(psycopg.OperationalError):
                psycopg.connect(
                    f"postgresql://{ROLE}@127.0.0.1:{self.port}/postgres", connect_timeout=2
                ).close()
                return True
            time.sleep(0.05)  # polling under the deadline above
        if self.process.poll() is None:
            self.stop()
            raise RuntimeError(
                f"postgres did not answer on port {self.port}: {self.log.read_text()!r}"
            )
        return False

    @contextlib.contextmanager
    def fresh_url(self) -> Iterator[str]:
        """The URL of a new, empty schema (searched first by every connection), dropped after."""
        schema = f"test_{os.getpid()}_{next(self._schemas)}"
        with psycopg.connect(self.url, autocommit=True) as admin:
            admin.execute(f"CREATE SCHEMA {schema}")
        try:
            yield f"{self.url}?options={quote(f'-csearch_path={schema}')}"
        finally:
            with psycopg.connect(self.url, autocommit=True) as admin:
                admin.execute(f"DROP SCHEMA {schema} CASCADE")

    def stop(self) -> None:
        """Stop the server and remove its folder."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # "fast" shutdown: ends open sessions
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _user_id(self) -> int | None:
        return None if self.user is None else self.user.pw_uid

    def _run(self, argv: list[str]) -> None:
        done = subprocess.run(
            argv, capture_output=True, text=True, check=False, user=self._user_id()
        )
        if done.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed: {done.stdout}{done.stderr}")


def _unprivileged_user() -> pwd.struct_passwd | None:
    """The user the server runs as when the tests run as root (``postgres``); None otherwise."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        raise PostgresMissing("the tests run as root and there is no 'postgres' user") from None
