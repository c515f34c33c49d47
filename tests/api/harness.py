"""Helpers of the API tests: uvicorn serving in the test's own event loop, users, fakes.

The server runs as a task of the test's event loop (not in a thread) so that the services it
uses (Redis clients, the sandbox manager) can be shared with the test's fixtures. API tests use
their own Redis database (``API_REDIS_DB``), emptied before each test, so that admission slots
and queues of one test never count in another, and the sandbox tests' keys are never touched.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
from starlette.types import ASGIApp

from app.service.http_server import KilnServer, server_config
from app.store import Store, User
from sandbox.docker_boundary import call
from sandbox.errors import SandboxNotFound
from sandbox.execution.workspace_files import WorkspaceFile, list_workspace, read_workspace_file
from sandbox.handle import Sandbox
from tests.servers import loopback_socket

API_REDIS_DB = 3


def api_redis_url(session_url: str) -> str:
    """The session Redis's URL with the API tests' own database."""
    return session_url.rsplit("/", 1)[0] + f"/{API_REDIS_DB}"


@contextlib.asynccontextmanager
async def serving(app: ASGIApp) -> AsyncIterator[str]:
    """Serve ``app`` with real uvicorn on a loopback port; yields ``http://127.0.0.1:<port>``."""
    sock = loopback_socket()
    config = server_config(app, "127.0.0.1", 0, access_log=False)
    config.log_level = "warning"
    server = KilnServer(config)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(server.serve, [sock])
        with anyio.fail_after(10):
            while not server.started:
                await anyio.sleep(0.01)
        try:
            yield f"http://127.0.0.1:{sock.getsockname()[1]}"
        finally:
            server.should_exit = True
    sock.close()


@dataclass
class Person:
    """A user with an API token and an HTTP client that sends it."""

    user: User
    token: str
    client: httpx.AsyncClient


def add_person(store: Store, name: str, base_url: str) -> Person:
    """A new user with an API token, and a client for ``base_url`` authenticated as them."""
    user = store.create_user(name)
    token = store.create_token(user.id, "api")
    headers = {"Authorization": f"Bearer {token}"}
    return Person(user, token, httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30))


@dataclass
class FakeSandboxes:
    """Stands in for the sandbox manager: known handles, and containers for them."""

    handles: dict[str, Sandbox] = field(default_factory=dict)
    containers: dict[str, Any] = field(default_factory=dict)
    destroyed: list[str] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)  # apply_app_env's sandboxes, in order

    def add(self, sandbox_id: str, chat: str, *, ip: str = "127.0.0.1", port: int = 1) -> Sandbox:
        """Record a sandbox serving ``chat``."""
        handle = Sandbox(sandbox_id, "vanilla", f"c-{sandbox_id}", "v", "n", ip, port, chat=chat)
        self.handles[sandbox_id] = handle
        return handle

    async def get(self, sandbox_id: str) -> Sandbox:
        """The handle, or ``SandboxNotFound`` as the manager says."""
        try:
            return self.handles[sandbox_id]
        except KeyError:
            raise SandboxNotFound(f"unknown sandbox {sandbox_id!r}") from None

    async def destroy(self, sandbox_id: str) -> None:
        """Forget the sandbox (removing an unknown one is no error, as with the manager)."""
        self.handles.pop(sandbox_id, None)
        self.destroyed.append(sandbox_id)

    async def list_files(self, sandbox_id: str) -> list[WorkspaceFile]:
        """The listing of the sandbox's (real) container, as the manager makes it."""
        return await call(list_workspace, await self.container_for(sandbox_id))

    async def read_file(self, sandbox_id: str, path: str) -> str | None:
        """A file of the sandbox's (real) container, read as the manager reads it."""
        return await call(read_workspace_file, await self.container_for(sandbox_id), path)

    async def apply_app_env(self, sandbox_id: str) -> bool:
        """Note the sandbox; whether it has a container (the manager writes only to one)."""
        await self.get(sandbox_id)
        self.applied.append(sandbox_id)
        return sandbox_id in self.containers

    async def container_for(self, sandbox_id: str) -> Any:
        """The container the test gave the sandbox."""
        await self.get(sandbox_id)
        try:
            return self.containers[sandbox_id]
        except KeyError:
            raise SandboxNotFound(f"no container for {sandbox_id!r}") from None


@dataclass
class SseFrame:
    """One server-sent event, or a comment (``comment`` set, the rest empty)."""

    id: int | None = None
    event: str | None = None
    data: dict[str, Any] | None = None
    comment: str | None = None


async def sse_frames(response: httpx.Response) -> AsyncIterator[SseFrame]:
    """Parse a ``text/event-stream`` body into frames as they arrive."""
    frame = SseFrame()
    async for line in response.aiter_lines():
        if line == "":
            if frame != SseFrame():
                yield frame
            frame = SseFrame()
        elif line.startswith(":"):
            yield SseFrame(comment=line[1:].strip())
        else:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "id":
                frame.id = int(value)
            elif name == "event":
                frame.event = value
            elif name == "data":
                frame.data = json.loads(value)
