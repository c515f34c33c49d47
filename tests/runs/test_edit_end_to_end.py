"""Edit mode end to end: real Redis, Docker sandbox, git project store, workers and HTTP.

Alice builds the todo app (the shared recording), then asks for the heading to be renamed: the
second run is an edit (a ``context`` event, the project shown to the model) whose one
search/replace block changes one line of ``src/App.jsx`` in her sandbox; every other file of the
project stays byte for byte what the first run left.
"""

from __future__ import annotations

import secrets
from typing import Any

import anyio
import pytest

from app.projects.workspace_io import read_workspace
from tests.api.harness import Person, SseFrame, add_person, sse_frames
from tests.api.stack import LiveService
from tests.end_to_end import EndToEnd

pytestmark = [pytest.mark.anyio, pytest.mark.docker, pytest.mark.slow, pytest.mark.npm]

SECRET = "edits-end-to-end-secret-01234567"
OLD_LINE, NEW_LINE = "      <h1>Todos</h1>\n", "      <h1>My todos</h1>\n"
RENAME = (
    "<Response>\nRenamed.\n\n"
    '<edward_sandbox project="todo-app" base="vite-react">\n<edward_edit path="src/App.jsx">\n'
    f"<<<<<<< SEARCH\n{OLD_LINE}=======\n{NEW_LINE}>>>>>>> REPLACE\n</edward_edit>\n"
    "</edward_sandbox>\n</Response>\n<edward_done />\n"
)
END_TO_END = EndToEnd("edits", 12, SECRET, {"rename": RENAME})


async def run_to_end(
    who: Person, chat_id: str, model: str, **more: str
) -> tuple[dict[str, Any], list[Any]]:
    """Post a message (``more``: other fields, ``content`` or ``provider``), follow its events to
    ``run_finished``; the run and the events' data."""
    message = {"content": "rename the heading of App.jsx", "model": model, **more}
    posted = await who.client.post(f"/api/chats/{chat_id}/messages", json=message)
    assert posted.status_code == 202, posted.text
    frames: list[SseFrame] = []
    run_id = posted.json()["run_id"]
    with anyio.fail_after(300):
        async with who.client.stream("GET", f"/api/runs/{run_id}/events") as response:
            async for frame in sse_frames(response):
                if frame.comment is None:
                    frames.append(frame)
    run = (await who.client.get(f"/api/runs/{run_id}")).json()
    events = [frame.data for frame in frames if frame.data]
    assert run["status"] == "completed", "\n".join(map(repr, [run, *events]))
    return run, events


async def test_a_second_run_edits_the_first_runs_app_in_place(live: LiveService) -> None:
    alice = add_person(live.stack.store, f"alice-{secrets.token_hex(3)}", live.url)
    try:
        chat = await alice.client.post("/api/chats", json={"title": "todos"})
        chat_id = chat.json()["chat"]["id"]
        first, first_events = await run_to_end(alice, chat_id, "todo")
        assert not [e for e in first_events if e.get("type") == "context"]
        container = await live.stack.manager.container_for(first["sandbox_id"])
        before = (await read_workspace(container)).files
        second, events = await run_to_end(alice, chat_id, "rename")
        container = await live.stack.manager.container_for(second["sandbox_id"])
        after = (await read_workspace(container)).files
    finally:
        await alice.client.aclose()
    assert second["sandbox_id"] == first["sandbox_id"]
    app = before["src/App.jsx"].decode()
    assert after["src/App.jsx"].decode() == app.replace(OLD_LINE, NEW_LINE)
    untouched = {path: content for path, content in before.items() if path != "src/App.jsx"}
    assert {path: after.get(path) for path in untouched} == untouched
    context = next(e for e in events if e.get("type") == "context")
    assert context["mode"] == "edit"
    assert "src/App.jsx" in {item["path"] for item in context["included"]}
    assert [e["path"] for e in events if e.get("type") == "file_written"] == ["src/App.jsx"]
    assert not [e for e in events if e.get("type") == "error"]


async def test_a_replayed_follow_up_skips_the_install_and_says_nothing_changed(
    live: LiveService,
) -> None:
    """The demo's follow-up: the same answer again installs nothing and records no version."""
    bob = add_person(live.stack.store, f"bob-{secrets.token_hex(3)}", live.url)
    try:
        chat = await bob.client.post("/api/chats", json={"title": "todos"})
        chat_id = chat.json()["chat"]["id"]
        _first, first_events = await run_to_end(bob, chat_id, "todo", content="make a todo app")
        _again, events = await run_to_end(bob, chat_id, "todo", content="now make it blue")
    finally:
        await bob.client.aclose()
    first_install = next(e for e in first_events if e.get("type") == "install_finished")
    assert "already_installed" not in first_install
    assert (
        next(e for e in first_events if e.get("type") == "session_complete")["unchanged"] is False
    )
    install = next(e for e in events if e.get("type") == "install_finished")
    assert (install["packages"], install["exit_code"]) == (["zustand"], 0)
    assert install["already_installed"] is True
    said = [e["line"] for e in events if e.get("type") == "output"]
    assert any(line.startswith("already installed: zustand@") for line in said), said
    assert not [e for e in events if e.get("type") == "version"]
    assert next(e for e in events if e.get("type") == "session_complete")["unchanged"] is True
