"""The vanilla and nextjs images' dev-server supervisor (images/shared/kiln-serve.mjs), on the
real engine through the manager: a chat's variable reaches the dev server's process (vanilla: a
server.js that answers with its own environment; nextjs: a route handler rendering
``process.env``, fetched through `next dev`); a change starts the dev server over with the new
value and a removed variable is gone from it; a dev server that dies comes back; a stop ends the
supervisor cleanly.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest

from sandbox.docker_boundary import call
from sandbox.execution.app_env import AppEnvironment
from sandbox.lifecycle.manager import Sandbox, SandboxManager

LIMIT_SECONDS = 120.0  # `next dev` compiles a route on its first request, on a loaded machine
SECRET = "sk_test_kiln-serve-secret"
# The server's process environment as JSON, and its pid (a new process after a restart).
VANILLA_SERVER = (
    "require('node:http').createServer((req, res) => res.end(JSON.stringify({pid: process.pid, "
    "greeting: process.env.GREETING, gone: process.env.GONE, token: process.env.TOKEN})))"
    ".listen(Number(process.env.PORT), '0.0.0.0')\n"
)
NEXT_ROUTE = (
    "export const dynamic = 'force-dynamic'\n"
    "export function GET() {\n"
    "  return Response.json({pid: process.pid, greeting: process.env.GREETING,\n"
    "    gone: process.env.GONE, token: process.env.TOKEN,\n"
    "    public: process.env.NEXT_PUBLIC_NAME})\n"
    "}\n"
)
# A client component showing Next's public variable, which `next dev` inlines into the page.
NEXT_PAGE = (
    "'use client'\n"
    "export default function Page() {\n"
    '  return <p id="public">public={process.env.NEXT_PUBLIC_NAME}</p>\n'
    "}\n"
)
# Where each template's app answers with its environment, and the files that make it do so.
APPS = {
    "vanilla": ("/", {"server.js": VANILLA_SERVER}),
    "nextjs": (
        "/kiln-env",
        {"app/kiln-env/route.js": NEXT_ROUTE, "app/kiln-public/page.jsx": NEXT_PAGE},
    ),
}
# SIGKILL to the supervisor's child (npm), as a crash would end it; not this shell, nor tini,
# whose command lines name the supervisor too.
KILL_DEV_SERVER = (
    'for p in /proc/[0-9]*; do case "$(tr "\\0" " " < $p/cmdline 2>/dev/null)" in '
    "node*kiln-serve.mjs*) s=${p#/proc/};; esac; done; "
    "for p in /proc/[0-9]*; do "
    '[ "$(sed -n "s/^PPid:\\s*//p" $p/status 2>/dev/null)" = "$s" ] && kill -9 ${p#/proc/}; '
    "done; true"
)
WRITE_FILE = 'mkdir -p "$(dirname "$FILE")" && printf "%s" "$BODY" > "$FILE"'


class ChatEnv:
    """The manager's ``app_env``: one chat's environment, which the test changes."""

    def __init__(self, chat: str, env: AppEnvironment) -> None:
        self.chat, self.env = chat, env

    async def __call__(self, chat: str) -> AppEnvironment:
        return self.env if chat == self.chat else AppEnvironment()


@pytest.fixture(params=[pytest.param("vanilla", id="vanilla"), pytest.param("nextjs", id="nextjs")])
async def served(
    request: pytest.FixtureRequest, manager: SandboxManager
) -> AsyncIterator[tuple[Sandbox, ChatEnv]]:
    """A chat's sandbox of the template whose app answers with its environment (given one
    variable and a secret), destroyed afterwards."""
    template = str(request.param)
    chat_env = ChatEnv(
        f"chat-serve-{template}",
        AppEnvironment({"GREETING": "hello", "GONE": "soon gone", "TOKEN": SECRET}, (SECRET,)),
    )
    manager.app_env = chat_env
    sandbox = await manager.acquire(chat_env.chat, "owner-1", template)
    try:
        container = await manager.container_for(sandbox.id)
        for path, body in APPS[template][1].items():
            written = await call(
                container.exec_run,
                ["sh", "-c", WRITE_FILE],
                workdir="/workspace",
                environment={"FILE": path, "BODY": body},
            )
            assert written.exit_code == 0, written.output
        yield sandbox, chat_env
    finally:
        manager.app_env = None
        await manager.destroy(sandbox.id)


async def _environment(sandbox: Sandbox) -> dict[str, Any]:
    """What the app answers with ({} while the dev server is not serving it)."""
    path = APPS[sandbox.template][0]
    try:
        async with httpx.AsyncClient(timeout=10.0, trust_env=False) as client:
            response = await client.get(f"{sandbox.dev_url}{path}")
        shown: dict[str, Any] = response.json() if response.status_code == 200 else {}
    except (httpx.TransportError, json.JSONDecodeError):
        return {}
    return shown


async def _until_served(
    sandbox: Sandbox, wanted: dict[str, Any], what: str, *, not_pid: int = 0
) -> dict[str, Any]:
    """Poll the app until its answer holds ``wanted`` (from another process than ``not_pid``);
    its answer."""
    deadline = time.monotonic() + LIMIT_SECONDS
    while True:
        shown = await _environment(sandbox)
        held = all(shown.get(key) == value for key, value in wanted.items())
        if shown and held and shown["pid"] != not_pid:
            return shown
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what} (last answer: {shown!r})")
        await anyio.sleep(0.2)


@pytest.mark.anyio
@pytest.mark.docker
async def test_the_dev_server_runs_with_the_chats_environment_and_starts_over_on_a_change(
    manager: SandboxManager, served: tuple[Sandbox, ChatEnv]
) -> None:
    sandbox, chat_env = served
    # The app file came after the dev server started: a rewrite of the environment (the same
    # values) starts it over, which serves the file.
    assert await manager.apply_app_env(sandbox.id)
    first = await _until_served(
        sandbox, {"greeting": "hello", "gone": "soon gone", "token": SECRET}, "the first values"
    )
    chat_env.env = AppEnvironment({"GREETING": "changed", "NEXT_PUBLIC_NAME": "kiln"})
    assert await manager.apply_app_env(sandbox.id)
    second = await _until_served(sandbox, {"greeting": "changed"}, "the changed value")
    assert "gone" not in second  # removed: gone from the new process
    assert "token" not in second
    assert second["pid"] != first["pid"]  # a new process: a running one keeps its environment
    if sandbox.template == "nextjs":
        assert second["public"] == "kiln"
        async with httpx.AsyncClient(timeout=LIMIT_SECONDS, trust_env=False) as client:
            page = await client.get(f"{sandbox.dev_url}/kiln-public")
        assert page.status_code == 200
        assert "public=<!-- -->kiln" in page.text or "public=kiln" in page.text


@pytest.mark.anyio
@pytest.mark.docker
async def test_a_dev_server_that_dies_comes_back_and_a_stop_ends_the_supervisor(
    manager: SandboxManager, served: tuple[Sandbox, ChatEnv]
) -> None:
    sandbox, _ = served
    assert await manager.apply_app_env(sandbox.id)
    shown = await _until_served(sandbox, {"greeting": "hello"}, "the app")
    container = await manager.container_for(sandbox.id)
    killed = await call(container.exec_run, ["sh", "-c", KILL_DEV_SERVER])
    assert killed.exit_code == 0, killed.output
    await _until_served(sandbox, {"greeting": "hello"}, "the app again", not_pid=shown["pid"])
    logs: bytes = await call(container.logs)
    assert b"the dev server exited" in logs
    await call(container.stop, timeout=10)
    await call(container.reload)
    assert container.attrs["State"]["ExitCode"] == 0
