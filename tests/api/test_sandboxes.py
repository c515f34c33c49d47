"""Workspace files through HTTP, read from a real container as the manager reads them.

The container is a plain one of the vanilla template image (sleeping, no network), handed to
the API by the fake manager: what is under test is the listing, the reading and the ownership
rules, not provisioning (``test_end_to_end.py`` covers the real manager).
"""

from __future__ import annotations

import io
import secrets
import tarfile
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

import docker
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from app.api.preview_seal import LOGIN, PreviewSeal
from sandbox.images.templates import get_template
from tests.api.conftest import SECRET, Api
from tests.servers import UvicornThread

TEST_LABEL = "kiln.test.api"
BIG_FILE_BYTES = 2 * 1024 * 1024 + 1
FILES = {
    "index.html": "<h1>hi</h1>",
    "src/main.js": "console.log('ünïcode')\n",
    "src/with space.txt": "spaced",
    "node_modules/dep/index.js": "nope",
    "src/node_modules/inner.js": "nope",
    "dist/bundle.js": "nope",
    ".git/HEAD": "ref: refs/heads/main",
    "big.bin": "x" * BIG_FILE_BYTES,
}

# Symlinks a generated app can leave in its workspace: to files outside it (one only root can
# read), and to a folder outside it (so that the link is a middle part of the path).
LINKS = {
    "link-to-passwd": "/etc/passwd",
    "link-to-shadow": "/etc/shadow",
    "etc": "/etc",
    "src/up": "..",
}


def workspace_tar(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for path, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(path)
            info.size, info.uid, info.gid, info.mode = len(data), 1000, 1000, 0o644
            archive.addfile(info, io.BytesIO(data))
        for name, target in LINKS.items():
            link = tarfile.TarInfo(name)
            link.type, link.linkname = tarfile.SYMTYPE, target
            archive.addfile(link)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def container() -> Iterator[Any]:
    """A sleeping container of the vanilla image with :data:`FILES` in its workspace."""
    client = docker.from_env()
    created = client.containers.run(
        get_template("vanilla").image,
        ["sleep", "infinity"],
        entrypoint=[],
        detach=True,
        network_mode="none",
        labels={TEST_LABEL: secrets.token_hex(4)},
    )
    try:
        created.put_archive("/workspace", workspace_tar(FILES))
        yield created
    finally:
        created.remove(force=True)
        client.close()


@pytest.fixture
def sandbox_id(api: Api, container: Any) -> str:
    """A sandbox of one of alice's chats, backed by the container."""
    chat = api.store.create_chat(api.alice.user.id, "with files")
    api.sandboxes.add("abc123", chat.id)
    api.sandboxes.containers["abc123"] = container
    return "abc123"


@pytest.mark.anyio
async def test_listing_leaves_out_dependencies_builds_and_git(api: Api, sandbox_id: str) -> None:
    response = await api.alice.client.get(f"/api/sandboxes/{sandbox_id}/files")
    assert response.status_code == 200
    files = {item["path"]: item["size"] for item in response.json()["files"]}
    assert files["index.html"] == len(FILES["index.html"])
    assert files["src/main.js"] == len(FILES["src/main.js"].encode())
    assert "src/with space.txt" in files
    assert "package.json" in files  # the template's own files are part of the workspace
    assert not any(
        part in ("node_modules", "dist", ".git") for path in files for part in path.split("/")
    )
    assert "link-to-passwd" not in files
    assert list(files) == sorted(files)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("path", "text"),
    [
        pytest.param("src/main.js", FILES["src/main.js"], id="utf-8"),
        pytest.param("src/with%20space.txt", "spaced", id="space"),
        pytest.param("./src/../index.html", FILES["index.html"], id="normalized"),
    ],
)
async def test_reading_a_file(api: Api, sandbox_id: str, path: str, text: str) -> None:
    response = await api.alice.client.get(f"/api/sandboxes/{sandbox_id}/files/{path}")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    assert response.text == text


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("path", "status", "code"),
    [
        pytest.param("missing.js", 404, "not_found", id="absent"),
        pytest.param("src", 404, "not_found", id="folder"),
        pytest.param("link-to-passwd", 404, "not_found", id="symlink"),
        pytest.param("link-to-shadow", 404, "not_found", id="symlink-to-shadow"),
        pytest.param("etc/shadow", 404, "not_found", id="through-a-folder-link-to-shadow"),
        pytest.param("etc/passwd", 404, "not_found", id="through-a-folder-link-outside"),
        pytest.param("src/up/index.html", 404, "not_found", id="through-a-link-inside"),
        pytest.param("big.bin", 413, "file_too_large", id="too-large"),
        pytest.param("..%2F..%2Fetc%2Fpasswd", 400, "invalid_path", id="escape"),
    ],
)
async def test_reading_refusals(
    api: Api, sandbox_id: str, path: str, status: int, code: str
) -> None:
    response = await api.alice.client.get(f"/api/sandboxes/{sandbox_id}/files/{path}")
    assert response.status_code == status
    assert response.json()["error"]["code"] == code


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("method", "suffix"),
    [
        pytest.param("GET", "/files", id="list"),
        pytest.param("GET", "/files/index.html", id="read"),
        pytest.param("POST", "/preview-login", id="preview-login"),
        pytest.param("GET", "/preview", id="preview-state"),
    ],
)
async def test_another_users_sandbox_is_404(
    api: Api, sandbox_id: str, method: str, suffix: str
) -> None:
    bob = await api.bob.client.request(method, f"/api/sandboxes/{sandbox_id}{suffix}")
    unknown = await api.alice.client.request(method, f"/api/sandboxes/fff999{suffix}")
    anonymous = await api.anonymous.request(method, f"/api/sandboxes/{sandbox_id}{suffix}")
    assert (bob.status_code, unknown.status_code, anonymous.status_code) == (404, 404, 401)
    assert bob.json() == {"error": {"code": "not_found", "message": f"no sandbox {sandbox_id!r}"}}


@pytest.mark.anyio
async def test_the_chats_sandbox_id_also_proves_ownership(api: Api, container: Any) -> None:
    chat = api.store.create_chat(api.alice.user.id, "bound in the store only")
    api.sandboxes.add("def456", chat="")
    api.sandboxes.containers["def456"] = container
    before = await api.alice.client.get("/api/sandboxes/def456/files")
    api.store.set_chat_sandbox(chat.id, "def456")
    after = await api.alice.client.get("/api/sandboxes/def456/files")
    by_bob = await api.bob.client.get("/api/sandboxes/def456/files")
    assert (before.status_code, after.status_code, by_bob.status_code) == (404, 200, 404)


@pytest.mark.anyio
async def test_preview_login_gives_a_one_time_link_on_the_preview_host(
    api: Api, sandbox_id: str
) -> None:
    response = await api.alice.client.post(f"/api/sandboxes/{sandbox_id}/preview-login")
    assert response.status_code == 200
    url = response.json()["url"]
    prefix = f"http://{sandbox_id}.preview.localhost:8000/__kiln/login?token="
    assert url.startswith(prefix)
    sealed = unquote(url.removeprefix(prefix))
    assert api.store.consume_login_token(sealed) is None  # no login token in the clear
    token = PreviewSeal(SECRET).open(LOGIN, sandbox_id, sealed)
    assert token is not None
    assert api.store.consume_login_token(token) is not None


@pytest.mark.anyio
async def test_the_preview_state_comes_from_the_dev_server(api: Api) -> None:
    chat = api.store.create_chat(api.alice.user.id, "previewed")
    api.sandboxes.add("up1", chat.id, ip="127.0.0.1", port=1)  # nothing listens on port 1
    starting = await api.alice.client.get("/api/sandboxes/up1/preview")
    app = Starlette(routes=[Route("/", lambda request: PlainTextResponse("app"))])
    with UvicornThread(app) as dev_server:
        api.sandboxes.add("up1", chat.id, ip="127.0.0.1", port=dev_server.port)
        ready = await api.alice.client.get("/api/sandboxes/up1/preview")
    assert starting.status_code == ready.status_code == 200
    assert starting.json()["state"] == "starting"
    assert starting.json()["code"] == "preview_starting"
    assert ready.json() == {
        "state": "ready",
        "code": "preview_ready",
        "message": "the dev server of sandbox 'up1' is up",
    }
    assert ready.headers["cache-control"] == "no-store"
