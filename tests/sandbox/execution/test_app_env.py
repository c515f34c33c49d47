"""The app's environment in a sandbox: every command gets it, the project never holds it, the
sandbox user cannot rewrite it, a secret echoed by a command is redacted."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator

import pytest

from sandbox.docker_boundary import call
from sandbox.execution.app_env import (
    APP_ENV_JSON,
    APP_ENV_SHELL,
    REDACTED,
    AppEnvironment,
    Redaction,
    shell_file,
)
from sandbox.lifecycle.manager import Sandbox, SandboxManager
from tests.sandbox.docker_support import sandbox_files_tar

SECRET = "sk_live_0123456789abcdef"
AWKWARD = 'it\'s $HOME `id` "quoted"\nsecond line \\ end'
PRINT_ENV = (
    "console.log(JSON.stringify({mode: process.env.MODE, awkward: process.env.AWKWARD}));"
    "console.log('token=' + process.env.TOKEN)\n"
)
REWRITE = (
    f"for (const file of ['{APP_ENV_SHELL}', '{APP_ENV_JSON}', '{APP_ENV_SHELL}.new']) {{"
    "  try { require('fs').writeFileSync(file, 'MODE=evil\\n'); console.log('written') }"
    "  catch (error) { console.log(error.code) } }\n"
)


def test_the_shell_file_gives_every_value_back_as_it_was() -> None:
    values = {"MODE": "demo", "AWKWARD": AWKWARD, "EMPTY": ""}
    script = shell_file(values) + 'printf "%s|%s|%s" "$MODE" "$AWKWARD" "$EMPTY"'
    shown = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True)
    assert shown.stdout == f"demo|{AWKWARD}|"


@pytest.mark.parametrize(
    ("secrets", "line", "shown"),
    [
        pytest.param((SECRET,), f"key={SECRET}!", f"key={REDACTED}!", id="inside-a-line"),
        pytest.param(("abc",), "abcabc", "abcabc", id="too-short-to-redact"),
        pytest.param(("abcdef", "abcdefgh"), "abcdefgh", REDACTED, id="longest-first"),
    ],
)
def test_redaction(secrets: tuple[str, ...], line: str, shown: str) -> None:
    assert Redaction(secrets).text(line) == shown
    assert SECRET not in repr(Redaction((SECRET,)))


class Lines:
    """An output sink that keeps the lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    async def __call__(self, line: str) -> None:
        self.lines.append(line)


class ChatEnv:
    """The manager's ``app_env``: one chat's environment, which the test changes."""

    def __init__(self, chat: str, env: AppEnvironment) -> None:
        self.chat, self.env = chat, env

    async def __call__(self, chat: str) -> AppEnvironment:
        return self.env if chat == self.chat else AppEnvironment()


@pytest.fixture
async def chat_env(manager: SandboxManager) -> AsyncIterator[ChatEnv]:
    """The session manager's ``app_env`` for the test (none again afterwards)."""
    source = ChatEnv(
        "chat-app-env",
        AppEnvironment({"MODE": "demo", "AWKWARD": AWKWARD, "TOKEN": SECRET}, (SECRET,)),
    )
    manager.app_env = source
    try:
        yield source
    finally:
        manager.app_env = None


@pytest.fixture
async def sandbox(manager: SandboxManager, chat_env: ChatEnv) -> AsyncIterator[Sandbox]:
    """The chat's sandbox with two scripts, destroyed afterwards."""
    acquired = await manager.acquire(chat_env.chat, "owner-1", "vanilla")
    container = await manager.container_for(acquired.id)
    await call(
        container.put_archive,
        "/workspace",
        sandbox_files_tar({"env.js": PRINT_ENV, "rewrite.js": REWRITE}),
    )
    yield acquired
    await manager.destroy(acquired.id)


@pytest.mark.anyio
@pytest.mark.docker
async def test_a_command_sees_the_environment_and_its_output_hides_the_secret(
    manager: SandboxManager, sandbox: Sandbox
) -> None:
    sink = Lines()
    result = await manager.run_command(sandbox.id, ["node", "env.js"], sink)
    assert result.ok, result.output
    assert json.dumps({"mode": "demo", "awkward": AWKWARD}, separators=(",", ":")) in result.output
    assert f"token={REDACTED}" in sink.lines
    assert SECRET not in result.output
    assert SECRET not in "\n".join(sink.lines)


@pytest.mark.anyio
@pytest.mark.docker
async def test_the_environment_is_outside_the_project_and_not_the_apps_to_change(
    manager: SandboxManager, sandbox: Sandbox
) -> None:
    files = await manager.list_files(sandbox.id)
    assert not any("env" in item.path and item.path != "env.js" for item in files)
    refused = await manager.run_command(sandbox.id, ["node", "rewrite.js"])
    assert refused.output.split() == ["EACCES", "EACCES", "EACCES"]
    after = await manager.run_command(sandbox.id, ["node", "env.js"])
    assert '"mode":"demo"' in after.output


@pytest.mark.anyio
@pytest.mark.docker
async def test_a_change_and_a_new_container_both_get_the_current_environment(
    manager: SandboxManager, sandbox: Sandbox, chat_env: ChatEnv
) -> None:
    chat_env.env = AppEnvironment({"MODE": "changed"})
    assert await manager.apply_app_env(sandbox.id)
    changed = await manager.run_command(sandbox.id, ["node", "env.js"])
    assert '"mode":"changed"' in changed.output
    assert "token=undefined" in changed.output
    chat_env.env = AppEnvironment({"MODE": "revived"})
    container = await manager.container_for(sandbox.id)
    await call(container.remove, force=True)  # died: the next use starts a new container
    revived = await manager.run_command(sandbox.id, ["node", "env.js"])
    assert '"mode":"revived"' in revived.output
