"""Cancels keep files whole (kiln issue 21): real Redis, Docker sandboxes, git projects, HTTP.

The demo answer (app/demos/todo-app.txt, replayed paced) is cancelled at ten moments spread
over its files. Each time, checked against the streamed events: every file the run's
``rollback`` event keeps is, in the sandbox and in the version the cancel recorded, exactly
what was streamed for it; every file it rolls back (the one still being written) is what it
was before the run (the template's file, or absent); no file is half written, and nothing
unfinished is left at its place.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import anyio
import pytest

from app.postgen.template_workspace import read_template_workspace
from app.projects.workspace_io import read_workspace
from parser import StreamParser
from parser.events import FileContent
from tests.api.harness import Person, add_person, sse_frames
from tests.api.stack import LiveService
from tests.end_to_end import EndToEnd

pytestmark = [pytest.mark.anyio, pytest.mark.docker, pytest.mark.slow, pytest.mark.npm]

# others: sandbox 0, api 3, end-to-end 4, runs 7, web 9, projects 11, 12, 13, 14
SECRET = "cancel-end-to-end-secret-0123456"
DEMO = Path(__file__).resolve().parents[2] / "app" / "demos" / "todo-app.txt"
MOMENTS = [0.05 + 0.1 * index for index in range(10)]  # shares of the answer's file text
END_TO_END = EndToEnd("cancel", 15, SECRET, {"slow-demo": DEMO.read_text()})


def demo_file_chars() -> int:
    """How many characters of file bodies the demo answer streams."""
    parser = StreamParser()
    events = [*parser.feed(DEMO.read_text()), *parser.close()]
    return sum(len(event.content) for event in events if isinstance(event, FileContent))


async def cancelled_at(who: Person, chat_id: str, chars: int) -> tuple[dict[str, Any], list[Any]]:
    """Post the demo, cancel it once ``chars`` characters of files streamed; the run and the
    events' data."""
    message = {"content": "make a todo app", "model": "slow-demo"}
    posted = await who.client.post(f"/api/chats/{chat_id}/messages", json=message)
    assert posted.status_code == 202, posted.text
    run_id = posted.json()["run_id"]
    events: list[Any] = []
    streamed, asked = 0, False
    with anyio.fail_after(300):
        async with who.client.stream("GET", f"/api/runs/{run_id}/events") as response:
            async for frame in sse_frames(response):
                if frame.comment is not None or not frame.data:
                    continue
                events.append(frame.data)
                if frame.event == "file_content":
                    streamed += len(frame.data["content"])
                if streamed >= chars and not asked:
                    asked = True
                    await who.client.post(f"/api/runs/{run_id}/cancel")
    run = (await who.client.get(f"/api/runs/{run_id}")).json()
    return run, events


def streamed_files(events: list[Any]) -> dict[str, str]:
    """Each file's text as its events streamed it (the last start of a path wins)."""
    files: dict[str, list[str]] = {}
    for event in events:
        if event["type"] == "file_start":
            files[event["path"]] = []
        elif event["type"] == "file_content":
            files[event["path"]].append(event["content"])
    return {path: "".join(parts) for path, parts in files.items()}


@pytest.mark.parametrize("moment", MOMENTS, ids=[f"{m:.0%}" for m in MOMENTS])
async def test_a_cancel_keeps_finished_files_whole_and_rolls_back_the_one_being_written(
    live: LiveService, moment: float
) -> None:
    person = add_person(live.stack.store, f"cancel-{secrets.token_hex(3)}", live.url)
    async with person.client:
        chat = await person.client.post("/api/chats", json={"title": "cancel"})
        chat_id = chat.json()["chat"]["id"]
        run, events = await cancelled_at(person, chat_id, int(demo_file_chars() * moment))
    trace = "\n".join(map(repr, [run, *events]))
    assert run["status"] == "cancelled", trace
    [rollback] = [event for event in events if event["type"] == "rollback"]
    streamed = streamed_files(events)
    kept, rolled_back = rollback["kept"], rollback["rolled_back"]
    assert set(kept) | set(rolled_back) == set(streamed), trace
    assert len(rolled_back) <= 1, trace  # at most the file being written when the cancel came
    container = await live.stack.manager.container_for(run["sandbox_id"])
    in_sandbox = (await read_workspace(container)).files
    versions = live.stack.projects.versions(chat_id)
    recorded = live.stack.projects.files(chat_id, "latest") if versions else in_sandbox
    assert bool(versions) == bool(kept), trace  # a cancel records what it kept, if anything
    before = read_template_workspace("vite-react")
    for files in (in_sandbox, recorded):
        for path in kept:
            assert files[path].decode() == streamed[path], path
        for path in rolled_back:
            was = before.get(path)
            assert (files[path].decode() if path in files else None) == was, path
