"""A real ``kiln serve`` for the browser tests: a subprocess on a loopback port with a fresh data
directory, the session's private Redis, and an extra recording for slow runs.

``kiln serve`` prints the one-time login URL on its stdout; :func:`start_kiln` waits for it
(every line goes to ``serve.log`` in the data directory's parent, for the post-mortem).
It runs as its own kiln instance (``KILN_INSTANCE``): a stopped service keeps its released
sandboxes for reuse by design, so :meth:`KilnService.stop` sweeps every Docker object of that
instance afterwards.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import docker

from tests.app.kiln_process import kiln_script
from tests.sandbox.docker_support import sweep
from tests.servers import loopback_socket

LOGIN_URL = re.compile(r"(http://\S+/login\?token=[A-Za-z0-9_-]+)")
START_LIMIT_SECONDS = 120.0
STOP_LIMIT_SECONDS = 60.0
SLOW_RECORDING = "slow-thinking"
SEARCH_RECORDING = "search-then-answer"
SEARCH_QUERY = "Intl.RelativeTimeFormat examples"
LOOK_RECORDING = "look-at-this"  # a plain answer, no files: no sandbox (test_composer_images)
FOOTER_RECORDING = "add-footer"  # a follow-up to the demo: one new file (tests/web/test_versions)
FOOTER = "export default function Footer() {\n  return <footer>Made with kiln</footer>;\n}\n"
RETITLE_RECORDING = "retitle"  # a follow-up to the demo: the page's title (tests/web/test_publish)
RETITLED = "Todos, published"
# Where the Makefile and CI point tiktoken (it cannot download its encodings here).
TIKTOKEN_CACHE = Path(__file__).resolve().parents[3] / "shared" / "tiktoken-cache"


def slow_recording() -> str:
    """An answer that thinks for a long while (about a minute at the replay's pace) first."""
    steps = "\n".join(
        f"Step {n}: weigh the layout, the state and the styles once more." for n in range(400)
    )
    return (
        f"<Thinking>\n{steps}\n</Thinking>\n<Response>\nNothing to build after all.\n</Response>\n"
    )


def search_recording() -> str:
    """Two turns as JSONL: a web search only (so the loop continues), then a plain answer."""
    first = (
        "<Thinking>Check the docs first.</Thinking>\n<Response>\nLet me look that up.\n"
        f'<edward_web_search query="{SEARCH_QUERY}" max_results="3">\n</Response>\n'
    )
    second = "<Response>\nIntl.RelativeTimeFormat is built into every browser.\n</Response>\n"
    turns = [{"turn": 1, "text": first}, {"turn": 2, "text": second}]
    return "".join(json.dumps(turn) + "\n" for turn in turns)


def footer_recording() -> str:
    """A change to the demo app: it adds ``src/Footer.jsx``."""
    return (
        '<Response>\nA footer.\n<edward_sandbox project="todo-app" base="vite-react">\n'
        f'<file path="src/Footer.jsx">\n{FOOTER}</file>\n</edward_sandbox>\n</Response>\n'
        "<edward_done />\n"
    )


def retitle_recording() -> str:
    """A change to the demo app: its ``index.html`` gets the title :data:`RETITLED`."""
    page = Path(__file__).resolve().parents[2] / "images/vite-react/workspace/index.html"
    text = page.read_text().replace("<title>kiln app</title>", f"<title>{RETITLED}</title>")
    return (
        '<Response>\nA new title.\n<edward_sandbox project="todo-app" base="vite-react">\n'
        f'<file path="index.html">\n{text}</file>\n</edward_sandbox>\n</Response>\n'
        "<edward_done />\n"
    )


@dataclass
class KilnService:
    """A running ``kiln serve`` and what the tests need of it."""

    process: subprocess.Popen[str]
    instance: str
    redis_url: str
    port: int
    login_url: str
    log: Path
    pump: threading.Thread
    lines: list[str] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        """The UI's URL, as the login link names it (``http://kiln.localhost:<port>``)."""
        return self.login_url.split("/login?", 1)[0]

    def stop(self) -> None:
        """SIGTERM, then wait (kill if it hangs)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_LIMIT_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.pump.join(STOP_LIMIT_SECONDS)
        if self.process.stdout is not None:
            self.process.stdout.close()
        client = docker.from_env()
        try:
            sweep(client, self.instance, self.redis_url)
        finally:
            client.close()


def _pump(
    process: subprocess.Popen[str], log: Path, lines: list[str], found: threading.Event
) -> None:
    """Copy the server's output to ``log`` and ``lines``; set ``found`` on the login URL."""
    assert process.stdout is not None
    with log.open("a") as sink:
        for line in process.stdout:
            sink.write(line)
            sink.flush()
            lines.append(line)
            if LOGIN_URL.search(line):
                found.set()


def start_kiln(folder: Path, redis_url: str) -> KilnService:
    """Start ``kiln serve`` with a fresh data dir under ``folder``; return once it printed its
    login link."""
    recordings = folder / "recordings"
    recordings.mkdir()
    (recordings / f"{SLOW_RECORDING}.txt").write_text(slow_recording())
    (recordings / f"{SEARCH_RECORDING}.jsonl").write_text(search_recording())
    (recordings / f"{FOOTER_RECORDING}.txt").write_text(footer_recording())
    (recordings / f"{LOOK_RECORDING}.txt").write_text("<Response>\nA fine picture.\n</Response>\n")
    (recordings / f"{RETITLE_RECORDING}.txt").write_text(retitle_recording())
    sock = loopback_socket()
    port = sock.getsockname()[1]
    sock.close()  # kiln binds it itself; the race with another process is negligible on loopback
    instance = f"test-web-{secrets.token_hex(4)}"
    env = {
        **os.environ,
        "KILN_INSTANCE": instance,
        "REDIS_URL": redis_url,
        "KILN_RECORDINGS_DIR": str(recordings),
        "KILN_PUBLIC_HOST": "kiln.localhost",
        "TIKTOKEN_CACHE_DIR": os.environ.get("TIKTOKEN_CACHE_DIR", str(TIKTOKEN_CACHE)),
        "PYTHONUNBUFFERED": "1",
    }
    argv = [str(kiln_script()), "serve", "--data-dir", str(folder / "data"), "--host", "127.0.0.1"]
    argv += ["--port", str(port)]
    process = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    log, lines, found = folder / "serve.log", list[str](), threading.Event()
    pump = threading.Thread(target=_pump, args=(process, log, lines, found), daemon=True)
    pump.start()
    deadline = time.monotonic() + START_LIMIT_SECONDS
    while not found.wait(0.2):
        if process.poll() is not None or time.monotonic() > deadline:
            KilnService(process, instance, redis_url, port, "", log, pump, lines).stop()
            raise RuntimeError(f"kiln serve did not print a login URL: {''.join(lines)[-4000:]!r}")
    url = next(m.group(1) for line in lines if (m := LOGIN_URL.search(line)))
    return KilnService(process, instance, redis_url, port, url, log, pump, lines)
