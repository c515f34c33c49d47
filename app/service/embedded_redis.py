"""The embedded Redis of ``kiln serve``: a private ``redis-server`` kept alive while kiln runs.

With no ``REDIS_URL``, ``kiln serve`` starts ``redis-server`` on a unix socket (mode 0700, so
only this OS user can connect; no TCP port at all) with its files in ``<data dir>/redis``:
append-only persistence, so queued runs and their event channels survive a restart.
:meth:`EmbeddedRedis.supervise` restarts it if it dies; leaving the context stops it. It runs in
a process group of its own, so a Ctrl+C in kiln's terminal reaches kiln, which stops it last.

The URL in use is also written to ``<data dir>/redis/url`` so that ``kiln worker`` on the same
data directory finds it. A unix socket path has a limit of about 100 bytes; when the data
directory is too deep, the socket goes into a private temporary folder instead.

A redis-server left behind by a ``kiln serve`` that was killed is asked to shut down (it saves
its data) before a fresh one starts on the same files.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

import anyio
import anyio.abc
import redis
import redis.exceptions

from app.data_dir import PRIVATE_UMASK, private_folder, write_private_text
from app.errors import ConfigError

log = logging.getLogger(__name__)
MAX_SOCKET_PATH = 100  # sun_path is 108 bytes on Linux, including the NUL
START_LIMIT_SECONDS = 20.0
RESTART_PAUSE_SECONDS = 1.0
URL_FILE = "url"


def redis_folder(data_dir: Path) -> Path:
    """Where the embedded Redis keeps its files."""
    return data_dir / "redis"


def recorded_url(data_dir: Path) -> str | None:
    """The URL a ``kiln serve`` on ``data_dir`` wrote for its embedded Redis, if any."""
    path = redis_folder(data_dir) / URL_FILE
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


class EmbeddedRedis:
    """A supervised ``redis-server`` on a private unix socket (see the module docstring)."""

    def __init__(self, data_dir: Path, binary: str | None = None) -> None:
        """Prepare (not start) a server with its files under ``data_dir``."""
        found = binary or shutil.which("redis-server")
        if found is None:
            raise ConfigError(
                "redis-server is not installed and REDIS_URL is not set: install Redis "
                "(apt-get install redis-server) or point REDIS_URL at one"
            )
        self.binary = found
        self.folder = redis_folder(data_dir)
        self.socket_path = self._socket_path()
        self.url = f"unix://{self.socket_path}?db=0"
        self._process: anyio.abc.Process | None = None
        self._stopping = False
        self.restarts = 0

    def stopping(self) -> bool:
        """Whether the context is ending (the supervisor must not restart the server)."""
        return self._stopping

    def _socket_path(self) -> Path:
        path = self.folder / "redis.sock"
        if len(str(path)) <= MAX_SOCKET_PATH:
            return path
        return Path(tempfile.mkdtemp(prefix="kiln-redis-")) / "redis.sock"

    def argv(self) -> list[str]:
        """The ``redis-server`` command line."""
        return [
            self.binary,
            "--port", "0",
            "--unixsocket", str(self.socket_path),
            "--unixsocketperm", "700",
            "--dir", str(self.folder),
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--save", "",
            "--logfile", str(self.folder / "redis.log"),
        ]  # fmt: skip

    async def __aenter__(self) -> EmbeddedRedis:
        """Start the server and wait until it answers."""
        await anyio.to_thread.run_sync(self._prepare)
        await self._start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop the server (it writes its append-only file first)."""
        self._stopping = True
        with anyio.CancelScope(shield=True):
            await self._stop()

    def _prepare(self) -> None:
        private_folder(self.folder)
        shutdown_leftover(self.url)
        write_private_text(self.folder / URL_FILE, self.url + "\n")

    async def _start(self) -> None:
        # A session (process group) of its own: a terminal's Ctrl+C signals kiln's whole group,
        # and Redis must outlive kiln's shutdown, which still writes to it; kiln stops it last.
        self._process = await anyio.open_process(
            self.argv(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            umask=PRIVATE_UMASK,  # its append-only files and log: 0600
        )
        await anyio.to_thread.run_sync(self._wait_for_ping)
        log.info("embedded redis up", extra={"redis_url": self.url})

    def _wait_for_ping(self) -> None:
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + START_LIMIT_SECONDS
        try:
            while time.monotonic() < deadline:
                if self._process is not None and self._process.returncode is not None:
                    break
                with contextlib.suppress(redis.exceptions.ConnectionError):
                    if client.ping():
                        return
                time.sleep(0.05)
        finally:
            client.close()
        raise ConfigError(f"redis-server did not start; see {str(self.folder / 'redis.log')!r}")

    async def supervise(self) -> None:
        """Restart the server whenever it exits, until the context ends. Run as a task."""
        while not self.stopping():
            assert self._process is not None
            code = await self._process.wait()
            if self.stopping():
                return
            self.restarts += 1
            log.warning("embedded redis exited (%s); restarting", code)
            await anyio.sleep(RESTART_PAUSE_SECONDS)
            await self._start()

    def terminate(self) -> None:
        """SIGTERM the server now, from any thread (a stop past its deadline, about to end
        kiln at once): it saves its append-only file and exits by itself."""
        self._stopping = True
        process = self._process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGTERM)

    async def _stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.returncode is not None:
            return
        process.terminate()  # SIGTERM: redis-server flushes its AOF and exits
        with anyio.move_on_after(10):
            await process.wait()
            return
        process.kill()
        await process.wait()


def shutdown_leftover(url: str) -> None:
    """Ask a redis-server still listening on ``url`` (a killed kiln's) to shut down."""
    client = redis.Redis.from_url(url, socket_connect_timeout=1)
    try:
        client.shutdown(nosave=False)
    except redis.exceptions.ConnectionError:
        pass  # nobody there, or it went away while shutting down: both mean "gone"
    except redis.exceptions.ResponseError as exc:
        raise ConfigError(f"a Redis on {url!r} refused to shut down: {exc}") from exc
    finally:
        client.close()
