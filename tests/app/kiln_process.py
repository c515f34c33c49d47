"""``kiln`` as a real process for the CLI tests: its stdout read line by line, stopped by signal.

Also where the tests find kiln's console script: beside the interpreter that runs them (the
venv's own ``bin/``), never on ``PATH``, where a stale ``kiln`` would silently test other code.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType

LINE_LIMIT_SECONDS = 60.0
STOP_LIMIT_SECONDS = 30.0
TIKTOKEN_CACHE = Path(__file__).resolve().parents[3] / "shared" / "tiktoken-cache"
SHARED_RECORDINGS = Path(__file__).resolve().parents[3] / "shared" / "recordings"
LOGIN_LINK = re.compile(r"http://\S+/login\?token=\S+")


def kiln_script() -> Path:
    """The ``kiln`` console script of the environment running the tests."""
    script = Path(sys.executable).parent / "kiln"
    assert script.is_file(), (
        f"no kiln console script at {str(script)!r}, beside the interpreter running the tests; "
        "install kiln into that environment (scripts/setup.sh, or pip install -e .)"
    )
    return script


def kiln_env(instance: str, recordings: Path, **extra: str) -> dict[str, str]:
    """An environment for a kiln process: its own instance, no keys, no Redis unless given."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "REDIS_URL"}
    env.update(
        KILN_INSTANCE=instance,
        KILN_WARM_POOL_SIZE="0",
        KILN_RECORDINGS_DIR=str(recordings),
        TIKTOKEN_CACHE_DIR=str(TIKTOKEN_CACHE),
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


def hello_recordings(folder: Path) -> Path:
    """A recordings folder with the conversational answer as ``hello`` (no sandbox needed)."""
    folder.mkdir(parents=True, exist_ok=True)
    text = (SHARED_RECORDINGS / "hello-conversational.txt").read_text()
    (folder / "hello.txt").write_text(text)
    return folder


class KilnProcess:
    """``python -m app <args>``; a context manager that stops it (SIGTERM) on exit."""

    def __init__(
        self, args: list[str], env: dict[str, str], log: Path, *, own_group: bool = False
    ) -> None:
        """Start the process; stderr goes to ``log``. ``own_group``: it leads a new process
        group, as a command started from a terminal does (Ctrl+C signals the whole group)."""
        self.log = log
        self._stderr = log.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "app", *args],
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            text=True,
            start_new_session=own_group,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.lines: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def wait_for(self, pattern: re.Pattern[str]) -> str:
        """The first stdout match of ``pattern`` (earlier lines are kept in ``lines``)."""
        deadline = time.monotonic() + LINE_LIMIT_SECONDS
        while time.monotonic() < deadline:
            try:
                line = self._lines.get(timeout=0.5)
            except queue.Empty:
                continue
            if line is None:
                break
            self.lines.append(line)
            found = pattern.search(line)
            if found:
                return found.group(0)
        raise AssertionError(f"no {pattern.pattern!r} in {self.lines!r}; log: {self.tail()}")

    def tail(self) -> str:
        """The end of the process's log."""
        return self.log.read_text(errors="replace")[-3000:]

    def stop(self) -> int:
        """SIGTERM, then wait; the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(STOP_LIMIT_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"kiln did not stop on SIGTERM; log: {self.tail()}") from None

    def __enter__(self) -> KilnProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self.stop()
        finally:
            self._stderr.close()
            if self.process.stdout is not None:
                self.process.stdout.close()
