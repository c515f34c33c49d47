"""One user's 1 GB workspace stalls nobody (issue 29), through HTTP with real Docker and workers.

Alice's sandbox is filled with 1 GB (``fallocate``: at once). While Bob runs the full demo
(the shared todo recording: files, an install, a build) and polls ``/healthz``, Alice runs her
chat (its version is refused in words naming the gigabyte), cancels it, and fires 20 restores
of version 1 at once. Bob's run completes and every ``/healthz`` answers 200 (its p95 is
printed: a measure, not an assertion); Alice's cancel ends her run; her 20 restores all answer
in turn and the last leaves her workspace holding version 1 exactly.
"""

from __future__ import annotations

import secrets
import statistics
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from app.projects.workspace_io import SANDBOX_USER, read_workspace
from sandbox import call
from tests.api.harness import Person, SseFrame, add_person, sse_frames
from tests.api.stack import SLOW_PREFIX, LiveService
from tests.end_to_end import EndToEnd
from tests.projects.test_restore_end_to_end import run_to_end

pytestmark = [pytest.mark.anyio, pytest.mark.docker, pytest.mark.slow, pytest.mark.npm]

SECRET = "huge-workspace-secret-0123456789"
FOOTER = "export default function Footer() {\n  return <footer>kiln</footer>;\n}\n"
SANDBOX = '<edward_sandbox project="todo-app" base="vite-react">'
PROSE = "\n".join(f"Line {n}: more about the footer and its styles." for n in range(600))
RECORDINGS = {
    "footer": f'<Response>\nA footer.\n\n{SANDBOX}\n<file path="src/Footer.jsx">\n{FOOTER}'
    "</file>\n</edward_sandbox>\n</Response>\n<edward_done />\n",
    # Writes a file, then talks for seconds: cancelled while it talks.
    f"{SLOW_PREFIX}talk": f'<Response>\nAgain.\n\n{SANDBOX}\n<file path="src/Talk.jsx">\n'
    f"{FOOTER}</file>\n</edward_sandbox>\n{PROSE}\n</Response>\n<edward_done />\n",
}
RESTORES = 20
HEALTH_EVERY_SECONDS = 0.1
END_TO_END = EndToEnd("huge", 10, SECRET, RECORDINGS, workers=2)  # Alice's and Bob's runs at once


async def fill(live: LiveService, sandbox_id: str) -> None:
    """Put 1 GB into the sandbox's workspace, as an app (or its user) could."""
    container = await live.stack.manager.container_for(sandbox_id)
    argv = ["fallocate", "-l", "1G", "/workspace/huge.bin"]
    code, output = await call(container.exec_run, argv, user=SANDBOX_USER)
    assert code == 0, output


async def run_and_cancel(alice: Person, chat_id: str) -> tuple[dict[str, Any], float, list[Any]]:
    """Alice's run, cancelled once its file is written: the run, the cancel's seconds to the
    run's end, its events."""
    body = {"content": "again", "model": f"{SLOW_PREFIX}talk"}
    posted = await alice.client.post(f"/api/chats/{chat_id}/messages", json=body)
    assert posted.status_code == 202, posted.text
    run_id = posted.json()["run_id"]
    frames: list[SseFrame] = []
    asked = None
    with anyio.fail_after(300):
        async with alice.client.stream("GET", f"/api/runs/{run_id}/events") as response:
            async for frame in sse_frames(response):
                frames.append(frame)
                if asked is None and frame.data and frame.data.get("type") == "file_written":
                    cancelled = await alice.client.post(f"/api/runs/{run_id}/cancel")
                    assert cancelled.status_code == 202, cancelled.text
                    asked = time.monotonic()
    assert asked is not None, "the run wrote no file"
    took = time.monotonic() - asked
    run = (await alice.client.get(f"/api/runs/{run_id}")).json()
    return run, took, [frame.data for frame in frames if frame.data]


async def restore_all(alice: Person, chat_id: str) -> list[int]:
    """``RESTORES`` restores of version 1 at once; their statuses."""
    statuses: list[int] = []

    async def one() -> None:
        answer = await alice.client.post(f"/api/chats/{chat_id}/versions/1/restore", timeout=300)
        statuses.append(answer.status_code)

    async with anyio.create_task_group() as tasks:
        for _ in range(RESTORES):
            tasks.start_soon(one)
    return statuses


async def poll_health(bob: Person, latencies: list[float], statuses: list[int]) -> None:
    """``/healthz`` as Bob's browser would see it, until cancelled."""
    while True:
        start = time.monotonic()
        answer = await bob.client.get("/healthz")
        latencies.append(time.monotonic() - start)
        statuses.append(answer.status_code)
        await anyio.sleep(HEALTH_EVERY_SECONDS)


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) > 1 else values[0]


async def test_one_users_huge_workspace_stalls_nobody(live: LiveService, tmp_path: Path) -> None:
    alice = add_person(live.stack.store, f"alice-{secrets.token_hex(3)}", live.url)
    bob = add_person(live.stack.store, f"bob-{secrets.token_hex(3)}", live.url)
    chat = (await alice.client.post("/api/chats", json={"title": "huge"})).json()["chat"]
    first, _ = await run_to_end(alice, chat["id"], "footer")
    await fill(live, first["sandbox_id"])
    bob_chat = (await bob.client.post("/api/chats", json={"title": "todos"})).json()["chat"]
    latencies: list[float] = []
    health: list[int] = []
    outcome: dict[str, Any] = {}

    async def bobs_run() -> None:
        outcome["bob"], _ = await run_to_end(bob, bob_chat["id"], "todo")

    async def alices_abuse() -> None:
        outcome["alice"] = await run_and_cancel(alice, chat["id"])
        outcome["restores"] = await restore_all(alice, chat["id"])

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(poll_health, bob, latencies, health)
        async with anyio.create_task_group() as users:
            users.start_soon(bobs_run)
            users.start_soon(alices_abuse)
        tasks.cancel_scope.cancel()

    run, cancel_seconds, events = outcome["alice"]
    print(
        f"\n/healthz during the abuse: {len(latencies)} answers, p95 {p95(latencies) * 1000:.0f}"
        f" ms, max {max(latencies) * 1000:.0f} ms; the cancel ended the run in"
        f" {cancel_seconds:.2f} s"
    )
    assert outcome["bob"]["status"] == "completed"
    assert set(health) == {200}
    assert run["status"] == "cancelled"
    refusals = [
        e for e in events if e.get("type") == "error" and e.get("code") == "project_too_large"
    ]
    assert refusals, events
    assert "'huge.bin' (1073741824 bytes)" in refusals[0]["message"]
    assert outcome["restores"] == [201] * RESTORES
    container = await live.stack.manager.container_for(first["sandbox_id"])
    after = await read_workspace(container)
    assert after.files == live.stack.projects.files(chat["id"], 1)
    await alice.client.aclose()
    await bob.client.aclose()
