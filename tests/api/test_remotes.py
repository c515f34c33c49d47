"""app/api/remotes.py end to end: a served kiln (real git, Redis, Docker sandboxes) pushes a
chat's versions to a real git smart-HTTP server (git http-backend, basic auth with a token)
and imports that repository into a new chat whose sandbox runs it.

Alice's chat has three versions of a Vite + React app (the vite-react template's own files,
with her App.jsx). She sets the remote with a token and pushes: ``git clone`` of it has one
commit per version with the same files; a fourth version pushes as a fast-forward. A wrong
token is refused in words that never hold it; a ``file://`` URL is refused. Importing the
repository makes a chat whose version 1 is the pushed files and whose preview serves them.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from app.projects.store import VersionInfo
from app.projects.workspace_io import read_workspace
from tests.api.harness import Person, add_person
from tests.api.stack import LiveService
from tests.end_to_end import EndToEnd
from tests.projects.git_http import (
    GitServer,
    cloned_versions,
    git,
    git_server,
    sha256s,
)

pytestmark = [pytest.mark.anyio, pytest.mark.docker, pytest.mark.slow]

SECRET = "remotes-end-to-end-secret-012345"
END_TO_END = EndToEnd("remotes", 5, SECRET)
TOKEN = "glpat-remotes-test-token-0123456789"
TEMPLATE = Path(__file__).resolve().parents[2] / "images" / "vite-react" / "workspace"


def app_source(words: str) -> bytes:
    return f"export default function App() {{\n  return <h1>{words}</h1>;\n}}\n".encode()


def template_files() -> dict[str, bytes]:
    return {
        str(path.relative_to(TEMPLATE)): path.read_bytes()
        for path in TEMPLATE.rglob("*")
        if path.is_file()
    }


@dataclass
class Scene:
    live: LiveService
    alice: Person
    bob: Person
    chat_id: str
    server: GitServer
    url: str


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GitServer]:
    root = tmp_path_factory.mktemp("served")
    with git_server(root, token=TOKEN) as server:
        server.bare("app")
        yield server


@pytest.fixture(scope="module")
async def scene(live: LiveService, served: GitServer) -> AsyncIterator[Scene]:
    alice = add_person(live.stack.store, f"alice-{secrets.token_hex(3)}", live.url)
    bob = add_person(live.stack.store, f"bob-{secrets.token_hex(3)}", live.url)
    made = await alice.client.post("/api/chats", json={"title": "mine"})
    chat_id = made.json()["chat"]["id"]
    for number, words in enumerate(("Hello one", "Hello two", "Hello three"), 1):
        files = {**template_files(), "src/App.jsx": app_source(words)}
        if number == 3:
            files["notes/readme.txt"] = b"third\n"
        live.stack.projects.commit(chat_id, files, VersionInfo(turn=number))
    yield Scene(live, alice, bob, chat_id, served, served.url("app"))
    await alice.client.aclose()
    await bob.client.aclose()


async def put_remote(who: Person, chat_id: str, body: dict[str, Any]) -> httpx.Response:
    return await who.client.put(f"/api/chats/{chat_id}/remote", json=body)


async def test_push_clone_fast_forward_and_refusals(scene: Scene, tmp_path: Path) -> None:
    alice, chat = scene.alice, scene.chat_id
    put = await put_remote(alice, chat, {"url": scene.url, "token": TOKEN})
    assert put.status_code == 200, put.text
    assert put.json()["remote"] == {
        "url": scene.url, "branch": "main", "has_token": True, "last_push": None,
    }  # fmt: skip
    assert TOKEN not in put.text
    pushed = await alice.client.post(f"/api/chats/{chat}/push")
    assert pushed.status_code == 200, pushed.text
    assert pushed.json()["push"]["outcome"] == "pushed"
    assert pushed.json()["push"]["version"] == 3
    store = scene.live.stack.projects
    expected = [sha256s(store.files(chat, number)) for number in (1, 2, 3)]
    assert cloned_versions(scene.url, tmp_path / "first", token=TOKEN) == expected

    store.commit(chat, {**store.files(chat, 3), "src/App.jsx": app_source("Hello four")},
                 VersionInfo(turn=4))  # fmt: skip
    again = await alice.client.post(f"/api/chats/{chat}/push")
    assert again.json()["push"]["outcome"] == "pushed", again.text
    remote_repo = scene.server.root / "app.git"
    git(remote_repo, "merge-base", "--is-ancestor", pushed.json()["push"]["commit"],
        again.json()["push"]["commit"])  # fmt: skip
    assert len(cloned_versions(scene.url, tmp_path / "second", token=TOKEN)) == 4

    await put_remote(alice, chat, {"url": scene.url, "token": "wrong-token-value"})
    refused = await alice.client.post(f"/api/chats/{chat}/push")
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "remote_auth_failed"
    assert "wrong-token-value" not in refused.text
    shown = (await alice.client.get(f"/api/chats/{chat}/remote")).json()["remote"]
    assert shown["last_push"]["ok"] is False
    assert shown["last_push"]["code"] == "remote_auth_failed"

    local = await put_remote(alice, chat, {"url": "file:///etc"})
    assert local.status_code == 422
    assert local.json()["error"]["code"] == "remote_url_refused"
    assert (await scene.bob.client.post(f"/api/chats/{chat}/push")).status_code == 404
    await put_remote(alice, chat, {"url": scene.url, "token": TOKEN})


async def test_import_gives_version_1_and_a_working_preview(scene: Scene) -> None:
    await ensure_pushed(scene)
    answer = await scene.alice.client.post(
        "/api/chats/import", json={"url": scene.url, "token": TOKEN}
    )
    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert TOKEN not in answer.text
    assert body["template"] == "vite-react"
    assert body["chat"]["title"] == "app"
    assert body["preview"] == {"ok": True, "errors": []}
    new_chat, sandbox_id = body["chat"]["id"], body["sandbox_id"]
    store = scene.live.stack.projects
    assert store.files(new_chat, 1) == store.files(scene.chat_id, "latest")
    manager = scene.live.stack.manager
    container = await manager.container_for(sandbox_id)
    in_sandbox = (await read_workspace(container)).files
    assert sha256s(in_sandbox) == sha256s(store.files(new_chat, 1))
    state = await preview_state(scene.alice, sandbox_id)
    assert state == "ready"
    dev_url = (await manager.get(sandbox_id)).dev_url
    async with httpx.AsyncClient(timeout=30, trust_env=False) as client:
        served = await client.get(f"{dev_url}/src/App.jsx")
    assert "Hello four" in served.text


async def ensure_pushed(scene: Scene) -> None:
    """The import reads what the push test pushed (run alone, this pushes it)."""
    shown = (await scene.alice.client.get(f"/api/chats/{scene.chat_id}/remote")).json()
    if shown["remote"] is None or not (shown["remote"]["last_push"] or {}).get("ok"):
        await put_remote(scene.alice, scene.chat_id, {"url": scene.url, "token": TOKEN})
        pushed = await scene.alice.client.post(f"/api/chats/{scene.chat_id}/push")
        assert pushed.status_code == 200, pushed.text


async def preview_state(who: Person, sandbox_id: str) -> str:
    """The preview's state once ready or failing (polled under a deadline)."""
    state = ""
    with anyio.move_on_after(120):
        while state != "ready":
            answer = await who.client.get(f"/api/sandboxes/{sandbox_id}/preview")
            state = answer.json().get("state", "")
            if state == "failing":
                break
            await anyio.sleep(0.5)
    return state


async def test_a_refused_import_leaves_no_chat(scene: Scene) -> None:
    before = (await scene.alice.client.get("/api/chats")).json()["chats"]
    answer = await scene.alice.client.post(
        "/api/chats/import", json={"url": scene.server.url("absent"), "token": TOKEN}
    )
    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "remote_not_found"
    assert (await scene.alice.client.get("/api/chats")).json()["chats"] == before
