"""Stopping a real ``kiln serve`` at chosen moments of the demo run, and what a stop leaves.

Shared by tests/app/test_clean_stop.py (a few moments) and bench/stops.py (twenty): one data
directory and instance for the whole sequence, one server per stop. Each server first shows
the chats the earlier ones made (listed, readable, the last one's sandbox files served on its
kept volume), then sends the demo message in a new chat, follows the run's events until the
moment (an event type, then a delay), and is stopped by SIGTERM (a supervisor) or SIGINT to
its process group (Ctrl+C in a terminal). What is measured: how long the process took to exit
and with which code, whether its event stream ended, which of its descendant processes are
left, and which Docker objects of the instance remain (containers and networks must not:
parking removes them; volumes stay on purpose).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import docker
import httpx

from tests.app.kiln_process import LOGIN_LINK, KilnProcess, hello_recordings, kiln_env
from tests.sandbox.docker_support import leftovers
from tests.servers import free_port
from tests.waiting import wait_until

STOP_LIMIT_SECONDS = 15.0  # KILN_STOP_LIMIT's default: the documented bound of a stop
EXIT_MARGIN_SECONDS = 5.0  # the interpreter's own teardown after the bound, on a loaded host
MOMENT_LIMIT_SECONDS = 300.0  # a demo run reaches any of its events within this, under load
GONE_LIMIT_SECONDS = 10.0
POSTED = "posted"  # the moment's anchor right after the message was accepted
DEMO_REQUEST = "make me a todo app"
ENDED = ("completed", "failed", "cancelled")


@dataclass(frozen=True)
class Moment:
    """Stop ``delay`` s after the run's first event of type ``anchor`` (or after posting)."""

    anchor: str
    delay: float = 0.0

    def __str__(self) -> str:
        return f"{self.anchor}+{self.delay:g}s"


@dataclass
class ChatMade:
    """A chat one server of the sequence made, and its run."""

    chat_id: str
    run_id: str
    sandbox_id: str | None = None


@dataclass
class Stopped:
    """What one stop did."""

    moment: Moment
    signum: signal.Signals
    reached: str  # the last event the run had sent when the signal went
    seconds: float  # signal to exit
    code: int
    stream_seconds: float  # signal to the end of the run's event stream
    processes_left: list[str] = field(default_factory=list)
    objects_left: list[str] = field(default_factory=list)  # containers and networks


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (children of each of its threads, recursively)."""
    found: set[int] = set()
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return found
    for task in tasks:
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in map(int, children):
            found |= {child} | descendants(child)
    return found


def running(pid: int) -> str | None:
    """``pid``'s command line while it runs (a zombie or a gone process is ``None``)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    state = stat.rsplit(")", 1)[1].split()[0]
    return None if state in ("Z", "X") else command.replace(b"\0", b" ").decode(errors="replace")


class RunFollower:
    """Follows one run's event stream in a thread; tells when an event type arrived."""

    def __init__(self, client: httpx.Client, run_id: str) -> None:
        self.events: list[dict[str, object]] = []
        self.ended = threading.Event()
        self.ended_at = 0.0
        self._arrived = threading.Condition()
        self._thread = threading.Thread(target=self._follow, args=(client, run_id), daemon=True)
        self._thread.start()

    def _follow(self, client: httpx.Client, run_id: str) -> None:
        try:
            with client.stream("GET", f"/api/runs/{run_id}/events", timeout=None) as response:
                for line in response.iter_lines():
                    if line.startswith("data: "):
                        with self._arrived:
                            self.events.append(json.loads(line.removeprefix("data: ")))
                            self._arrived.notify_all()
        except httpx.HTTPError:
            pass  # the server went away mid-stream: ended all the same
        finally:
            self.ended_at = time.monotonic()
            self.ended.set()
            with self._arrived:
                self._arrived.notify_all()

    def last(self) -> str:
        """The type of the last event so far."""
        with self._arrived:
            return str(self.events[-1]["type"]) if self.events else POSTED

    def wait_for(self, event_type: str) -> dict[str, object]:
        """The first event of ``event_type``, once it arrived."""
        deadline = time.monotonic() + MOMENT_LIMIT_SECONDS
        with self._arrived:
            while True:
                found = next((e for e in self.events if e["type"] == event_type), None)
                if found is not None:
                    return found
                left = deadline - time.monotonic()
                if left <= 0 or self.ended.is_set():
                    seen = [e["type"] for e in self.events]
                    raise AssertionError(f"the run sent no {event_type!r}; it sent {seen}")
                self._arrived.wait(left)


class StopSequence:
    """One data directory and instance; a server per stop (see the module docstring)."""

    def __init__(self, folder: Path, instance: str, **env: str) -> None:
        """Servers keep their data in ``folder/data`` and their logs in ``folder``."""
        self.folder, self.instance = folder, instance
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        # A restarted server resumes the interrupted run after KILN_RUN_CLAIM_IDLE.
        self.env = kiln_env(
            instance, hello_recordings(folder / "rec"), KILN_RUN_CLAIM_IDLE="2", **env
        )
        self.args = ["serve", "--port", str(self.port), "--data-dir", str(folder / "data")]
        self.args.append("--no-build")
        self.chats: list[ChatMade] = []

    def start(self, name: str) -> tuple[KilnProcess, httpx.Client]:
        """A server of the sequence, and a client signed in to it."""
        served = KilnProcess(self.args, self.env, self.folder / f"{name}.log", own_group=True)
        link = served.wait_for(LOGIN_LINK)
        client = httpx.Client(base_url=self.base, timeout=60, trust_env=False)
        response = client.get(f"/login{link.split('/login', 1)[1]}")
        assert response.status_code == 303, response.text
        return served, client

    def check_chats_served(self, client: httpx.Client) -> None:
        """Every chat made so far is listed and readable; the last one's sandbox files are
        served (its container revived on the kept volume)."""
        listed = client.get("/api/chats")
        assert listed.status_code == 200, listed.text
        assert {c["id"] for c in listed.json()["chats"]} >= {c.chat_id for c in self.chats}
        for chat in self.chats:
            detail = client.get(f"/api/chats/{chat.chat_id}")
            assert detail.status_code == 200, detail.text
            contents = [m["content"] for m in detail.json()["messages"]]
            assert DEMO_REQUEST in contents, contents
        last = self.chats[-1] if self.chats else None
        if last is not None and last.sandbox_id is not None:
            files = client.get(f"/api/sandboxes/{last.sandbox_id}/files")
            assert files.status_code == 200, files.text

    def cancel_earlier(self, client: httpx.Client) -> None:
        """Cancel the runs earlier stops interrupted (each would resume, load the host and hold
        one of the user's active runs) and wait until they ended."""
        for chat in self.chats:
            cancelled = client.post(f"/api/runs/{chat.run_id}/cancel")
            assert cancelled.status_code in (202, 409), cancelled.text

        def all_ended() -> bool:
            runs = [client.get(f"/api/runs/{chat.run_id}").json() for chat in self.chats]
            return all(run["status"] in ENDED for run in runs)

        wait_until(all_ended, "the interrupted runs to end", MOMENT_LIMIT_SECONDS, 0.5)

    def post_demo(self, client: httpx.Client) -> RunFollower:
        """A new chat with the demo message; a follower of its run."""
        created = client.post("/api/chats", json={"title": "todo"})
        assert created.status_code == 201, created.text
        chat_id = created.json()["chat"]["id"]
        posted = client.post(f"/api/chats/{chat_id}/messages", json={"content": DEMO_REQUEST})
        assert posted.status_code == 202, posted.text
        run_id = posted.json()["run_id"]
        self.chats.append(ChatMade(chat_id, run_id))
        return RunFollower(client, run_id)

    def stop_at(self, name: str, moment: Moment, signum: signal.Signals) -> Stopped:
        """Start a server, check the earlier chats, run the demo to ``moment``, stop it with
        ``signum``; what the stop did."""
        served, client = self.start(name)
        try:
            self.check_chats_served(client)
            self.cancel_earlier(client)
            follower = self.post_demo(client)
            if moment.anchor != POSTED:
                follower.wait_for(moment.anchor)
            time.sleep(moment.delay)  # the moment itself, not a wait for a condition
            ready = next((e for e in follower.events if e["type"] == "sandbox_ready"), None)
            if ready is not None:
                self.chats[-1].sandbox_id = str(ready["sandbox_id"])
            return self._stop(served, follower, moment, signum)
        finally:
            client.close()
            served.__exit__(None, None, None)

    def _stop(
        self, served: KilnProcess, follower: RunFollower, moment: Moment, signum: signal.Signals
    ) -> Stopped:
        below = descendants(served.process.pid)
        reached = follower.last()
        started = time.monotonic()
        if signum == signal.SIGINT:
            os.killpg(served.process.pid, signum)  # a terminal's Ctrl+C reaches the group
        else:
            served.process.send_signal(signum)
        try:
            code = served.process.wait(STOP_LIMIT_SECONDS + EXIT_MARGIN_SECONDS)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"kiln did not exit on {signum.name}: {served.tail()}") from None
        seconds = time.monotonic() - started
        left: list[str] = []
        try:
            wait_until(lambda: not any(running(p) for p in below), "children", GONE_LIMIT_SECONDS)
        except TimeoutError:
            left = [c for p in below if (c := running(p)) is not None]
        return Stopped(
            moment,
            signum,
            reached,
            seconds,
            code,
            follower.ended_at - started if follower.ended.wait(GONE_LIMIT_SECONDS) else -1.0,
            left,
            self.objects_left(),
        )

    def objects_left(self) -> list[str]:
        """The instance's containers and networks (parking removes them all)."""
        client = docker.from_env()
        try:
            found = leftovers(client, self.instance)
        finally:
            client.close()
        return [item for item in found if not item.startswith(("volume", "subvolume"))]

    def finish_last(self) -> str:
        """Start a server that resumes the last interrupted run; its final status."""
        served, client = self.start("last")
        try:
            self.check_chats_served(client)
            run_id = self.chats[-1].run_id

            def ended() -> bool:
                status = client.get(f"/api/runs/{run_id}").json()["status"]
                return status in ENDED

            wait_until(ended, f"run {run_id} to end after the restart", MOMENT_LIMIT_SECONDS, 1.0)
            return str(client.get(f"/api/runs/{run_id}").json()["status"])
        finally:
            client.close()
            served.__exit__(None, None, None)
