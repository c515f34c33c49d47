"""Projects end to end through HTTP: real git, Redis, Docker sandboxes and workers.

Alice builds the todo app (the shared recording: files, an install of zustand, a build), her
sandbox's container and volume are then removed by hand, and a follow-up run adds a footer: its
new sandbox must hold the latest version byte for byte with zustand installed, the user told
("restore" events) before the run's files arrive, and its dev server, never started over for an
install that only added zustand (kiln issue 24), serves the restored store with zustand. A
third run edits the README; restoring version 1 then gives version 1's files, as a new
version. Bob reaches none of it.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import secrets
import tarfile
import zipfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
import docker
import httpx
import pytest

from app.projects.store import VersionInfo
from app.projects.workspace_io import read_workspace
from sandbox import call
from sandbox.containers.hardening import CA_BUNDLE_PATH, sandbox_environment
from sandbox.settings import SandboxSettings
from tests.api.harness import Person, SseFrame, add_person, sse_frames
from tests.api.stack import LiveService
from tests.end_to_end import EndToEnd
from tests.sandbox.docker_support import (
    CA_BUNDLE,
)

pytestmark = [pytest.mark.anyio, pytest.mark.docker, pytest.mark.slow, pytest.mark.npm]

SECRET = "projects-end-to-end-secret-0123"
FOOTER = "export default function Footer() {\n  return <footer>Made with kiln</footer>;\n}\n"
README = "# Todos\n\nA todo app, now with a footer.\n"
RECORDINGS = {
    "footer": f'<Response>\nA footer.\n\n<edward_sandbox project="todo-app" base="vite-react">\n'
    f'<file path="src/Footer.jsx">\n{FOOTER}</file>\n</edward_sandbox>\n</Response>\n'
    "<edward_done />\n",
    "readme": f'<Response>\nA new README.\n\n<edward_sandbox project="todo-app" base="vite-react">'
    f'\n<file path="README.md">\n{README}</file>\n</edward_sandbox>\n</Response>\n'
    "<edward_done />\n",
}
END_TO_END = EndToEnd("projects", 11, SECRET, RECORDINGS)


async def run_to_end(who: Person, chat_id: str, model: str) -> tuple[dict[str, Any], list[Any]]:
    """Post a message, follow its events to ``run_finished``; the run and the events' data."""
    posted = await who.client.post(
        f"/api/chats/{chat_id}/messages", json={"content": "make it", "model": model}
    )
    assert posted.status_code == 202, posted.text
    run_id = posted.json()["run_id"]
    frames: list[SseFrame] = []
    with anyio.fail_after(300):
        async with who.client.stream("GET", f"/api/runs/{run_id}/events") as response:
            async for frame in sse_frames(response):
                if frame.comment is None:
                    frames.append(frame)
    run = (await who.client.get(f"/api/runs/{run_id}")).json()
    events = [frame.data for frame in frames if frame.data]
    assert run["status"] == "completed", "\n".join(map(repr, [run, *events]))
    return run, events


async def versions(who: Person, chat_id: str) -> list[dict[str, Any]]:
    answer = await who.client.get(f"/api/chats/{chat_id}/versions")
    assert answer.status_code == 200, answer.text
    found: list[dict[str, Any]] = answer.json()["versions"]
    return found


@dataclass
class Story:
    """What happened to Alice's chat (see the module docstring)."""

    alice: Person
    chat_id: str
    runs: list[dict[str, Any]]
    events: list[list[dict[str, Any]]]
    before_removal: list[dict[str, Any]]  # the versions after the first run
    after_footer: list[dict[str, Any]]
    sandbox_after_footer: dict[str, bytes]
    zustand_installed: bool
    restored_serves_zustand: bool  # the restored sandbox's dev server serves store.js's import
    restored_supervisor_log: str  # what its dev-server supervisor said


async def remove_by_hand(live: LiveService, sandbox_id: str) -> None:
    """What an operator or a crash does: the container and its volume are gone."""
    sandbox = await live.stack.manager.get(sandbox_id)
    client = live.stack.manager.client
    container = await call(client.containers.get, sandbox.container_id)
    await call(container.remove, force=True)
    volume = await call(client.volumes.get, sandbox.volume)
    await call(volume.remove, force=True)


async def serves_zustand(live: LiveService, sandbox_id: str) -> bool:
    """Whether the sandbox's dev server serves the demo's store with Vite's pre-bundled zustand
    (polled: Vite pre-bundles a newly imported package when it is first asked for)."""
    base = (await live.stack.manager.get(sandbox_id)).dev_url
    async with httpx.AsyncClient(timeout=10, trust_env=False) as client:
        with anyio.move_on_after(90):
            while True:
                try:
                    store = await client.get(f"{base}/src/store.js")
                    found = re.search(r"/node_modules/\.vite/deps/zustand\.js[^\"']*", store.text)
                    if found and (await client.get(f"{base}{found[0]}")).status_code == 200:
                        return True
                except httpx.HTTPError:
                    pass
                await anyio.sleep(0.2)
    return False


async def supervisor_log(live: LiveService, sandbox_id: str) -> str:
    container = await live.stack.manager.container_for(sandbox_id)
    logs: bytes = await call(container.logs)
    return logs.decode(errors="replace")


async def installed(live: LiveService, sandbox_id: str, package: str) -> bool:
    container = await live.stack.manager.container_for(sandbox_id)
    path = f"/workspace/node_modules/{package}/package.json"
    result = await call(container.exec_run, ["test", "-f", path])
    return bool(result.exit_code == 0)


@pytest.fixture(scope="module")
async def story(live: LiveService) -> AsyncIterator[Story]:
    alice = add_person(live.stack.store, f"alice-{secrets.token_hex(3)}", live.url)
    chat = await alice.client.post("/api/chats", json={"title": "todos"})
    chat_id = chat.json()["chat"]["id"]
    first, first_events = await run_to_end(alice, chat_id, "todo")
    before = await versions(alice, chat_id)
    await remove_by_hand(live, first["sandbox_id"])
    second, second_events = await run_to_end(alice, chat_id, "footer")
    after = await versions(alice, chat_id)
    container = await live.stack.manager.container_for(second["sandbox_id"])
    in_sandbox = (await read_workspace(container)).files
    zustand = await installed(live, second["sandbox_id"], "zustand")
    served = await serves_zustand(live, second["sandbox_id"])
    said = await supervisor_log(live, second["sandbox_id"])
    third, third_events = await run_to_end(alice, chat_id, "readme")
    runs, events = [first, second, third], [first_events, second_events, third_events]
    yield Story(alice, chat_id, runs, events, before, after, in_sandbox, zustand, served, said)
    await alice.client.aclose()


def project_files(live: LiveService, chat_id: str, version: int | str) -> dict[str, bytes]:
    return live.stack.projects.files(chat_id, version)


async def test_every_run_completed_and_recorded_versions(story: Story) -> None:
    assert [run["status"] for run in story.runs] == ["completed"] * 3
    assert story.before_removal, "the first run recorded no version"
    first = story.before_removal[0]
    assert (first["version"], first["run"], first["turn"]) == (1, story.runs[0]["id"], 1)
    paths = {change["path"] for change in first["files"]}
    assert {"src/App.jsx", "src/store.js", "package.json"} <= paths
    assert not any(path.startswith(("node_modules/", "dist/")) for path in paths)
    recorded = [event for event in story.events[0] if event.get("type") == "version"]
    assert [event["version"] for event in recorded] == [v["version"] for v in story.before_removal]


async def test_a_removed_sandbox_is_restored_byte_for_byte(story: Story, live: LiveService) -> None:
    latest_before = story.before_removal[-1]["version"]
    restored = project_files(live, story.chat_id, latest_before)
    for path, content in restored.items():
        assert story.sandbox_after_footer.get(path) == content, path
    footer_version = story.after_footer[-1]["version"]
    assert story.sandbox_after_footer == project_files(live, story.chat_id, footer_version)
    assert story.sandbox_after_footer["src/Footer.jsx"] == FOOTER.encode()
    assert story.zustand_installed
    assert b"zustand" in restored["package.json"]


async def test_the_restored_dev_server_kept_running_and_serves_the_new_package(
    story: Story,
) -> None:
    assert "none changed or removed: the dev server keeps running" in story.restored_supervisor_log
    assert "restarting the dev server" not in story.restored_supervisor_log
    assert story.restored_supervisor_log.count("ready in") == 1
    assert story.restored_serves_zustand


async def test_the_user_sees_the_restore_before_the_runs_files(story: Story) -> None:
    kinds = [event.get("type") for event in story.events[1]]
    restores = [event for event in story.events[1] if event.get("type") == "restore"]
    assert [event["phase"] for event in restores] == ["started", "done"]
    assert restores[0]["version"] == story.before_removal[-1]["version"]
    assert restores[1]["installed"] is True
    assert kinds.index("restore") < kinds.index("file_written")
    assert not [event for event in story.events[2] if event.get("type") == "restore"]


async def test_versions_are_listed_in_order_with_their_summaries(story: Story) -> None:
    listed = await versions(story.alice, story.chat_id)
    assert [v["version"] for v in listed] == list(range(1, len(listed) + 1))
    footer = next(v for v in listed if v["run"] == story.runs[1]["id"])
    assert footer["summary"] == "1 added, 0 changed, 0 removed"
    assert footer["files"] == [{"path": "src/Footer.jsx", "status": "A"}]
    readme = next(v for v in listed if v["run"] == story.runs[2]["id"])
    assert readme["summary"] == "0 added, 1 changed, 0 removed"


async def test_the_diff_of_a_turn_shows_exactly_its_changes(story: Story) -> None:
    listed = await versions(story.alice, story.chat_id)
    readme = next(v for v in listed if v["run"] == story.runs[2]["id"])
    answer = await story.alice.client.get(
        f"/api/chats/{story.chat_id}/versions/{readme['version']}/diff"
    )
    assert answer.status_code == 200
    files = answer.json()["files"]
    assert [(f["path"], f["status"]) for f in files] == [("README.md", "M")]
    lines = files[0]["diff"].splitlines()
    assert [line for line in lines if line.startswith("+")][1:] == [
        "+A todo app, now with a footer."
    ]
    removed = [line for line in lines if line.startswith("-")][1:]  # after "--- a/README.md"
    assert removed[0].startswith("-A small todo app")
    assert removed[-1] == "-Run `npm install` and `npm run dev`."


async def test_restoring_version_1_makes_a_new_version(story: Story, live: LiveService) -> None:
    before = await versions(story.alice, story.chat_id)
    answer = await story.alice.client.post(f"/api/chats/{story.chat_id}/versions/1/restore")
    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert body["restored"] == 1
    assert body["version"]["version"] == len(before) + 1
    assert body["sandbox_id"] == story.runs[2]["sandbox_id"]
    first = project_files(live, story.chat_id, 1)
    assert project_files(live, story.chat_id, "latest") == first
    container = await live.stack.manager.container_for(story.runs[2]["sandbox_id"])
    assert (await read_workspace(container)).files == first
    assert len(await versions(story.alice, story.chat_id)) == len(before) + 1


async def test_the_zip_unpacks_to_the_same_files(story: Story, live: LiveService) -> None:
    answer = await story.alice.client.get(f"/api/chats/{story.chat_id}/versions/latest/archive")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(answer.content)) as archive:
        unpacked = {
            name: archive.read(name) for name in archive.namelist() if not name.endswith("/")
        }
    assert unpacked == project_files(live, story.chat_id, "latest")


@pytest.mark.parametrize(
    ("method", "suffix"),
    [
        pytest.param("GET", "", id="list"),
        pytest.param("GET", "/1/diff", id="diff"),
        pytest.param("POST", "/1/restore", id="restore"),
        pytest.param("GET", "/latest/archive", id="archive"),
    ],
)
async def test_another_user_gets_404(
    story: Story, live: LiveService, method: str, suffix: str
) -> None:
    bob = add_person(live.stack.store, f"bob-{secrets.token_hex(3)}", live.url)
    async with bob.client:
        answer = await bob.client.request(method, f"/api/chats/{story.chat_id}/versions{suffix}")
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "not_found"


async def test_a_cancelled_run_still_records_what_it_wrote(live: LiveService) -> None:
    carol = add_person(live.stack.store, f"carol-{secrets.token_hex(3)}", live.url)
    async with carol.client:
        chat = await carol.client.post("/api/chats", json={"title": "slow"})
        chat_id = chat.json()["chat"]["id"]
        posted = await carol.client.post(
            f"/api/chats/{chat_id}/messages", json={"content": "make it", "model": "slow-todo"}
        )
        run_id = posted.json()["run_id"]
        written: list[str] = []
        with anyio.fail_after(300):
            async with carol.client.stream("GET", f"/api/runs/{run_id}/events") as response:
                async for frame in sse_frames(response):
                    if frame.event == "file_written" and frame.data:
                        written.append(frame.data["path"])
                        if len(written) == 1:
                            await carol.client.post(f"/api/runs/{run_id}/cancel")
        run = (await carol.client.get(f"/api/runs/{run_id}")).json()
        listed = await versions(carol, chat_id)
    assert run["status"] == "cancelled"
    assert [(v["run"], v["note"]) for v in listed] == [(run_id, "cancelled")]
    recorded = project_files(live, chat_id, 1)
    assert set(written) <= set(recorded)
    assert await sandbox_state(live, run["sandbox_id"]) == "idle"  # released, not left in use


async def sandbox_state(live: LiveService, sandbox_id: str) -> str:
    """The sandbox's state once it is no longer in use (polled: a release follows the run's
    end closely), or "in_use" after the deadline."""
    with anyio.move_on_after(30):
        while (state := await sandbox_record_state(live, sandbox_id)) == "in_use":
            await anyio.sleep(0.1)
    return str(state)


async def sandbox_record_state(live: LiveService, sandbox_id: str) -> str:
    record = await live.stack.manager.registry.get(sandbox_id)
    assert record is not None, f"sandbox {sandbox_id!r} is gone"
    return str(record.state)


async def test_the_files_tab_does_not_list_the_version_marker(
    story: Story, live: LiveService
) -> None:
    paths = [item.path for item in await live.stack.manager.list_files(story.runs[2]["sandbox_id"])]
    container = await live.stack.manager.container_for(story.runs[2]["sandbox_id"])
    assert (await read_workspace(container)).marker, "the sandbox holds no version marker"
    assert "README.md" in paths
    assert not [path for path in paths if path.startswith(".kiln")]


def without_zustand(package_json: bytes) -> bytes:
    """``package.json`` with the zustand dependency dropped."""
    manifest = json.loads(package_json)
    del manifest["dependencies"]["zustand"]
    return json.dumps(manifest, indent=2).encode() + b"\n"


async def networks(live: LiveService, sandbox_id: str) -> set[str]:
    container = await live.stack.manager.container_for(sandbox_id)
    await call(container.reload)
    return set(container.attrs["NetworkSettings"]["Networks"])


async def test_an_api_restore_that_changes_package_json_installs(
    story: Story, live: LiveService
) -> None:
    sandbox_id, projects = story.runs[2]["sandbox_id"], live.stack.projects
    latest = project_files(live, story.chat_id, "latest")
    slim = {**latest, "package.json": without_zustand(latest["package.json"])}
    note = VersionInfo(note="zustand dropped by hand")
    dropped = await anyio.to_thread.run_sync(projects.commit, story.chat_id, slim, note)
    assert dropped is not None
    url = f"/api/chats/{story.chat_id}/versions"
    answer = await story.alice.client.post(f"{url}/{dropped.number}/restore", timeout=300)
    assert (answer.status_code, answer.json()["installed"]) == (201, True), answer.text
    assert not await installed(live, sandbox_id, "zustand")  # npm install pruned it
    back = await story.alice.client.post(f"{url}/{dropped.number - 1}/restore", timeout=300)
    assert (back.status_code, back.json()["installed"]) == (201, True), back.text
    assert await installed(live, sandbox_id, "zustand")
    # Installed through the npm proxy: the sandbox never left its internal network.
    assert await networks(live, sandbox_id) == {live.stack.manager.settings.network}
    same = await story.alice.client.post(f"{url}/{dropped.number - 1}/restore", timeout=300)
    assert (same.status_code, same.json()["installed"]) == (201, None), same.text


def as_tar(files: dict[str, bytes], folder: str) -> bytes:
    """``files`` under ``folder``, owned by the sandbox user, as a tar archive."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as archive:
        for path, content in files.items():
            entry = tarfile.TarInfo(f"{folder}/{path}")
            entry.size, entry.mode, entry.uid, entry.gid = len(content), 0o644, 1000, 1000
            archive.addfile(entry, io.BytesIO(content))
    return data.getvalue()


def digests(files: dict[str, bytes]) -> dict[str, str]:
    return {path: hashlib.sha256(content).hexdigest() for path, content in files.items()}


def build_in_fresh_container(settings: SandboxSettings, files: dict[str, bytes]) -> tuple[int, str]:
    """``npm install && npm run build`` on ``files`` in a plain container of the vite-react
    image (on the sandbox network, with the npm proxy and CA bundle installs have); the exit code
    and the output's tail. Blocking; the container is removed whatever happens."""
    client = docker.from_env()
    environment = {**sandbox_environment(settings), "npm_config_cache": "/tmp/npm-cache"}
    ca = {str(CA_BUNDLE.resolve()): {"bind": CA_BUNDLE_PATH, "mode": "ro"}}
    # Not labelled as kiln's: the reaper removes a labelled container it has no record of.
    container = client.containers.create(
        "kiln/sandbox-vite-react",
        ["sleep", "infinity"],
        name=f"{settings.instance}-archive-build",
        user="1000:1000",
        environment=environment,
        volumes=ca,
        network=settings.network,
    )
    try:
        container.start()
        container.exec_run(["mkdir", "-p", "/tmp/unpacked"])
        assert container.put_archive("/tmp", as_tar(files, "unpacked"))
        script = "npm install --no-audit --no-fund && npm run build"
        result = container.exec_run(["sh", "-c", script], workdir="/tmp/unpacked")
        return result.exit_code, result.output.decode(errors="replace")[-3000:]
    finally:
        container.remove(force=True)
        client.close()


async def test_the_latest_archive_builds_in_a_fresh_container(
    story: Story, live: LiveService
) -> None:
    answer = await story.alice.client.get(f"/api/chats/{story.chat_id}/versions/latest/archive")
    assert answer.status_code == 200
    with zipfile.ZipFile(io.BytesIO(answer.content)) as archive:
        unpacked = {n: archive.read(n) for n in archive.namelist() if not n.endswith("/")}
    assert digests(unpacked) == digests(project_files(live, story.chat_id, "latest"))
    settings = live.stack.manager.settings
    exit_code, output = await anyio.to_thread.run_sync(build_in_fresh_container, settings, unpacked)
    assert exit_code == 0, output
    assert "built in" in output
