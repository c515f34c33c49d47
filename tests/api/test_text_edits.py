"""``POST /api/chats/{id}/text-edits`` end to end: real git, Redis, Docker sandbox, Vite.

Alice builds the todo app (the shared recording), then edits its heading's text in place: the
file changes at that one line, a version "Edited text in src/App.jsx" is recorded, Vite serves
the new text, and no provider is asked for anything (the workers' provider factory counts every
run's provider). Text built from expressions and text the file no longer holds are refused with
their codes, nothing changed; a parked sandbox is revived for an edit; Bob reaches nothing.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import pytest

from app.runs.execution import ResolvedProvider
from app.store import Run
from tests.api.harness import Person, add_person
from tests.api.stack import LiveService, replay_factory
from tests.end_to_end import EndToEnd, serve_end_to_end
from tests.projects.test_restore_end_to_end import run_to_end, versions

pytestmark = [pytest.mark.anyio, pytest.mark.docker, pytest.mark.slow, pytest.mark.npm]

SECRET = "text-edits-end-to-end-secret-012"
END_TO_END = EndToEnd("text-edits", 6, SECRET)
APP = "src/App.jsx"


@pytest.fixture(scope="module")
def provider_runs() -> list[str]:
    """The runs a provider was made for (a text edit must add none)."""
    return []


@pytest.fixture(scope="module")
async def live(
    instance: str,
    redis_url: str,
    tmp_path_factory: pytest.TempPathFactory,
    provider_runs: list[str],
) -> AsyncIterator[LiveService]:
    """The module's kiln, its workers' providers counted."""
    root = tmp_path_factory.mktemp("text-edits")
    replay = replay_factory(root / "rec")

    def counted(run: Run, keys: Mapping[str, str]) -> ResolvedProvider:
        provider_runs.append(run.id)
        return replay(run, keys)

    async with serve_end_to_end(END_TO_END, instance, redis_url, root, providers=counted) as live:
        yield live


@dataclass
class Built:
    """Alice's todo app, built by one run."""

    alice: Person
    bob: Person
    chat_id: str
    sandbox_id: str


@pytest.fixture(scope="module")
async def built(live: LiveService) -> AsyncIterator[Built]:
    alice = add_person(live.stack.store, f"alice-{secrets.token_hex(3)}", live.url)
    bob = add_person(live.stack.store, f"bob-{secrets.token_hex(3)}", live.url)
    chat = await alice.client.post("/api/chats", json={"title": "todos"})
    chat_id = chat.json()["chat"]["id"]
    run, _ = await run_to_end(alice, chat_id, "todo")
    yield Built(alice, bob, chat_id, run["sandbox_id"])
    await alice.client.aclose()
    await bob.client.aclose()


async def app_source(live: LiveService, built: Built) -> str:
    text = await live.stack.manager.read_file(built.sandbox_id, APP)
    assert text is not None
    return text


def place(source: str, needle: str) -> tuple[int, int]:
    """(line from 1, column from 0) of ``needle`` in ``source``."""
    for number, line in enumerate(source.splitlines(), start=1):
        if needle in line:
            return number, line.index(needle)
    raise AssertionError(f"{needle!r} is not in the file")


# An edit of a parked sandbox starts its network, npm proxy and container first: on a loaded
# 2-core box that takes longer than the client's usual 30 s.
EDIT_SECONDS = 180.0


async def text_edit(who: Person, chat_id: str, **body: Any) -> httpx.Response:
    url = f"/api/chats/{chat_id}/text-edits"
    return await who.client.post(url, json=body, timeout=EDIT_SECONDS)


async def edit_app(built: Built, place: tuple[int, int], old: str, new: str) -> httpx.Response:
    """Alice retypes the text ``old`` of the element at ``place`` in ``src/App.jsx``."""
    line, column = place
    edit = {"file": APP, "line": line, "column": column, "old_text": old, "new_text": new}
    return await text_edit(built.alice, built.chat_id, **edit)


async def served_text(live: LiveService, sandbox_id: str, wanted: str) -> bool:
    """Whether Vite serves ``App.jsx`` with ``wanted`` in it (polled: its watcher is quick)."""
    async with httpx.AsyncClient(timeout=10, trust_env=False) as client:
        with anyio.move_on_after(60):
            while True:
                base = (await live.stack.manager.wait_ready(sandbox_id)).dev_url
                try:
                    if wanted in (await client.get(f"{base}/{APP}")).text:
                        return True
                except httpx.HTTPError:
                    pass
                await anyio.sleep(0.2)
    return False


async def test_the_heading_changes_at_its_line_with_a_version_and_no_model(
    live: LiveService, built: Built, provider_runs: list[str]
) -> None:
    before, runs_before = await app_source(live, built), list(provider_runs)
    listed = await versions(built.alice, built.chat_id)
    line, column = place(before, "<h1>")
    answer = await edit_app(built, (line, column), "Todos", "Our {shared} todos")
    assert answer.status_code == 201, answer.text
    version = answer.json()["version"]
    assert version["version"] == listed[-1]["version"] + 1
    assert version["note"] == "Edited text in src/App.jsx"
    assert version["files"] == [{"path": APP, "status": "M"}]
    after = await app_source(live, built)
    pairs = zip(before.splitlines(), after.splitlines(), strict=True)
    changed = [(old, new) for old, new in pairs if old != new]
    assert changed == [("      <h1>Todos</h1>", "      <h1>Our &#123;shared&#125; todos</h1>")]
    assert live.stack.projects.files(built.chat_id, "latest")[APP] == after.encode()
    assert provider_runs == runs_before  # no model was asked
    chat = (await built.alice.client.get(f"/api/chats/{built.chat_id}")).json()
    assert len(chat["runs"]) == 1
    assert await served_text(live, built.sandbox_id, "Our {shared} todos")


@pytest.mark.parametrize(
    ("needle", "old_text", "code"),
    [
        pytest.param("<span>", "3 open, 1 done", "text_edit_expression", id="expression"),
        pytest.param("<h1>", "Their todos", "text_edit_stale", id="changed-since"),
        pytest.param("<main", "Todos", "text_edit_expression", id="several-parts"),
    ],
)
async def test_text_that_is_not_one_plain_node_is_refused_and_nothing_changes(
    live: LiveService, built: Built, needle: str, old_text: str, code: str
) -> None:
    before = await app_source(live, built)
    listed = await versions(built.alice, built.chat_id)
    line, column = place(before, needle)
    answer = await edit_app(built, (line, column), old_text, "Something else")
    assert answer.status_code == 409, answer.text
    assert answer.json()["error"]["code"] == code
    assert f"{APP}:{line}" in answer.json()["error"]["message"]
    assert await app_source(live, built) == before
    assert await versions(built.alice, built.chat_id) == listed


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param({"line": 0}, "line", id="line-from-1"),
        pytest.param({"column": True}, "column", id="column-not-a-bool"),
        pytest.param({"file": "../etc/passwd"}, "file", id="file-outside"),
        pytest.param({"new_text": "  Todos "}, "new_text", id="the-same-text"),
        pytest.param({"colour": "red"}, "colour", id="unknown-field"),
    ],
)
async def test_a_malformed_edit_names_its_field(
    built: Built, body: dict[str, Any], field: str
) -> None:
    edit = {"file": APP, "line": 1, "column": 0, "old_text": "Todos", "new_text": "New"}
    answer = await text_edit(built.alice, built.chat_id, **{**edit, **body})
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["field"] == field


async def test_another_users_chat_is_not_found(built: Built) -> None:
    edit = {"file": APP, "line": 1, "column": 0, "old_text": "Todos", "new_text": "Mine"}
    answer = await text_edit(built.bob, built.chat_id, **edit)
    assert answer.status_code == 404


async def test_an_edit_waits_for_no_run_it_is_refused_while_one_is_active(built: Built) -> None:
    posted = await built.alice.client.post(
        f"/api/chats/{built.chat_id}/messages", json={"content": "talk", "model": "slow-long"}
    )
    assert posted.status_code == 202, posted.text
    run_id = posted.json()["run_id"]
    try:
        edit = {"file": APP, "line": 1, "column": 0, "old_text": "Todos", "new_text": "Mine"}
        answer = await text_edit(built.alice, built.chat_id, **edit)
        assert answer.status_code == 409, answer.text
        assert answer.json()["error"]["code"] == "run_active"
    finally:
        await built.alice.client.post(f"/api/runs/{run_id}/cancel")
        with anyio.fail_after(120):  # the edits after this one need the run over
            while await run_status(built.alice, run_id) in ("queued", "running"):
                await anyio.sleep(0.2)


async def run_status(who: Person, run_id: str) -> str:
    status: str = (await who.client.get(f"/api/runs/{run_id}")).json()["status"]
    return status


async def test_a_parked_sandbox_is_revived_for_the_edit(live: LiveService, built: Built) -> None:
    await live.stack.manager.park()
    assert not (await live.stack.manager.get(built.sandbox_id)).container_id
    before = await app_source_after_revival(live, built)
    line, column = place(before, '<p className="empty">')
    answer = await edit_app(built, (line, column), "Nothing here yet.", "Nothing to do.")
    assert answer.status_code == 201, answer.text
    assert '<p className="empty">Nothing to do.</p>' in await app_source(live, built)


async def app_source_after_revival(live: LiveService, built: Built) -> str:
    """The file as the project's latest version holds it (the sandbox is parked)."""
    return live.stack.projects.files(built.chat_id, "latest")[APP].decode()
