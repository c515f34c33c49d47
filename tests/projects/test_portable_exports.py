"""The "Done means" of issue 21 item 3 and issue 24 item 2, end to end with the demo app.

1. The exported zip of the demo app (the replay provider's todo answer through the normal run
   path) carries no private address in its lock, and ``npm ci && npm run build`` pass on it in a
   fresh container of the template image that cannot reach kiln's npm proxy but reaches the
   public registry as the host does; the lock is valid for another platform too.
2. A version whose lock still names the old gateway (as versions recorded before the fix did)
   is restored into a new sandbox after parking removed the network and it was made again on
   another subnet: the restore's install finishes and the lock is public.

The fresh container sits on a network of its own (not internal: the registry is reached through
Docker's NAT, as the host reaches it) whose bridge is named ``kiln…``, so the host firewall
treats it as it treats a sandbox bridge: a connection to another bridge's gateway (kiln's proxy
included) is dropped. The test proves that before it installs.
"""

from __future__ import annotations

import io
import ipaddress
import re
import secrets
import zipfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import docker
import pytest

from app.projects.lock_urls import is_private_origin
from app.projects.store import VersionInfo
from sandbox.containers.hardening import CA_BUNDLE_PATH
from sandbox.containers.networks import BRIDGE_NAME_OPTION
from sandbox.settings import SandboxSettings
from tests.api.harness import Person, add_person
from tests.api.stack import LiveService
from tests.projects.test_restore_end_to_end import (
    END_TO_END,  # noqa: F401 (the same served kiln and recordings)
    as_tar,
    project_files,
    run_to_end,
)
from tests.sandbox.docker_support import CA_BUNDLE

pytestmark = [pytest.mark.anyio, pytest.mark.docker, pytest.mark.slow, pytest.mark.npm]

ORIGIN = re.compile(rb'"resolved"\s*:\s*"(https?://[^/"\s]+)/')


def resolved_origins(lock: bytes) -> set[str]:
    """Every origin a lock's ``resolved`` fields name."""
    return {origin.decode() for origin in ORIGIN.findall(lock)}


def gateway(client: docker.DockerClient, network: str) -> str:
    """The gateway address of ``network`` (where kiln's npm proxy listens for it)."""
    config = client.networks.get(network).attrs["IPAM"]["Config"][0]
    return str(config["Gateway"])


@dataclass
class TodoChat:
    """Alice's chat after the demo todo app was built in it (its lock names zustand)."""

    alice: Person
    chat_id: str


@pytest.fixture(scope="module")
async def todo_chat(live: LiveService) -> AsyncIterator[TodoChat]:
    """One run, the demo app: all these tests need is a chat whose latest version has a lock
    (test_restore_end_to_end's three-run story would cost two more runs and a restore)."""
    alice = add_person(live.stack.store, f"alice-{secrets.token_hex(3)}", live.url)
    chat = await alice.client.post("/api/chats", json={"title": "todos"})
    chat_id = chat.json()["chat"]["id"]
    run, _ = await run_to_end(alice, chat_id, "todo")
    assert run["status"] == "completed", run
    yield TodoChat(alice, chat_id)
    await alice.client.aclose()


@pytest.fixture
def outside_network(instance: str) -> Iterator[str]:
    """A network of this test's own with a ``kiln…`` bridge and an uplink; removed after."""
    client = docker.from_env()
    name = f"{instance}-outside"
    options = {BRIDGE_NAME_OPTION: f"kilnzt{secrets.token_hex(3)}"}
    network = client.networks.create(name, driver="bridge", options=options)
    try:
        yield name
    finally:
        network.remove()
        client.close()


def run_outside(network: str, files: dict[str, bytes], script: str, name: str) -> tuple[int, str]:
    """``script`` in a fresh vite-react container on ``network`` with ``files`` unpacked in
    /tmp/app, the host's CA bundle and no registry setting but npm's default (the public one);
    the exit code and the output's tail. Blocking; the container is removed after."""
    client = docker.from_env()
    environment = {
        "npm_config_cache": "/tmp/npm-cache",
        "NODE_EXTRA_CA_CERTS": CA_BUNDLE_PATH,
        "npm_config_cafile": CA_BUNDLE_PATH,
        "npm_config_update_notifier": "false",
    }
    container = client.containers.create(
        "kiln/sandbox-vite-react",
        ["sleep", "infinity"],
        name=name,
        user="1000:1000",
        environment=environment,
        volumes={str(CA_BUNDLE.resolve()): {"bind": CA_BUNDLE_PATH, "mode": "ro"}},
        network=network,
    )
    try:
        container.start()
        container.exec_run(["mkdir", "-p", "/tmp/app"])
        assert container.put_archive("/tmp", as_tar(files, "app"))
        result = container.exec_run(["sh", "-c", script], workdir="/tmp/app")
        return result.exit_code, result.output.decode(errors="replace")[-4000:]
    finally:
        container.remove(force=True)
        client.close()


def probe(url: str) -> str:
    """A node one-liner printing ``reached`` or ``failed`` for a GET of ``url`` (5 s)."""
    return (
        "node -e \"fetch('" + url + "', {signal: AbortSignal.timeout(5000)})"
        ".then(() => console.log('reached'), () => console.log('failed'))\""
    )


async def test_the_zip_builds_where_kilns_proxy_cannot_be_reached(
    todo_chat: TodoChat,
    live: LiveService,
    outside_network: str,
) -> None:
    answer = await todo_chat.alice.client.get(
        f"/api/chats/{todo_chat.chat_id}/versions/latest/archive"
    )
    assert answer.status_code == 200, answer.text
    with zipfile.ZipFile(io.BytesIO(answer.content)) as archive:
        files = {n: archive.read(n) for n in archive.namelist() if not n.endswith("/")}
    origins = resolved_origins(files["package-lock.json"])
    assert b"zustand" in files["package-lock.json"]
    assert origins == {"https://registry.npmjs.org"}, origins
    settings: SandboxSettings = live.stack.manager.settings
    client = docker.from_env()
    try:
        proxy = f"http://{gateway(client, settings.network)}:{settings.npm_proxy_port}/zustand"
    finally:
        client.close()
    script = " && ".join(
        [
            probe(proxy),
            probe("https://registry.npmjs.org/zustand"),
            "npm ci --no-audit --no-fund",
            "npm run build",
            "mkdir /tmp/other && cp package.json package-lock.json /tmp/other && cd /tmp/other",
            "npm ci --os=darwin --cpu=arm64 --dry-run --no-audit --no-fund",
        ]
    )
    name = f"{settings.instance}-outside-build"
    code, output = await anyio.to_thread.run_sync(run_outside, outside_network, files, script, name)
    assert code == 0, output
    reached = [line for line in output.splitlines() if line in {"reached", "failed"}]
    assert reached == ["failed", "reached"], output  # proxy unreachable, registry reachable
    assert "built in" in output
    assert "@rollup/rollup-darwin-arm64" in output, output


def private_lock(lock: bytes, origin: str) -> bytes:
    """``lock`` with its public registry replaced by ``origin`` (as locks were written)."""
    return lock.replace(b"https://registry.npmjs.org/", origin.encode() + b"/")


async def test_a_restore_on_a_network_made_again_on_another_subnet_installs(
    todo_chat: TodoChat,
    live: LiveService,
) -> None:
    manager, projects = live.stack.manager, live.stack.projects
    settings: SandboxSettings = manager.settings
    client = docker.from_env()
    try:
        old = client.networks.get(settings.network).attrs["IPAM"]["Config"][0]
        latest = project_files(live, todo_chat.chat_id, "latest")
        private = f"http://{old['Gateway']}:{settings.npm_proxy_port}"
        files = {**latest, "package-lock.json": private_lock(latest["package-lock.json"], private)}
        note = VersionInfo(note="a lock written before issue 24")
        await anyio.to_thread.run_sync(projects.commit, todo_chat.chat_id, files, note)
        report = await manager.park()
        assert settings.network in report.networks_removed, report
        # Docker would hand the freed subnet out again: hold it so the network moves.
        holder = client.networks.create(
            f"{settings.instance}-old-subnet",
            driver="bridge",
            internal=True,
            ipam=docker.types.IPAMConfig(
                pool_configs=[docker.types.IPAMPool(subnet=old["Subnet"])]
            ),
        )
        try:
            for record in await manager.list():
                await manager.destroy(record.id)
            run, events = await run_to_end(todo_chat.alice, todo_chat.chat_id, "readme")
        finally:
            holder.remove()
        new = client.networks.get(settings.network).attrs["IPAM"]["Config"][0]
    finally:
        client.close()
    assert ipaddress.ip_network(new["Subnet"]) != ipaddress.ip_network(old["Subnet"])
    restores: list[dict[str, Any]] = [e for e in events if e.get("type") == "restore"]
    assert [e["phase"] for e in restores] == ["started", "done"], restores
    assert restores[1]["installed"] is True, restores
    container = await manager.container_for(run["sandbox_id"])
    result = await anyio.to_thread.run_sync(
        lambda: container.exec_run(["cat", "/workspace/package-lock.json"])
    )
    origins = resolved_origins(result.output)
    assert origins == {"https://registry.npmjs.org"}, origins
    assert not any(is_private_origin(origin) for origin in origins)
    recorded = project_files(live, todo_chat.chat_id, "latest")["package-lock.json"]
    assert resolved_origins(recorded) == {"https://registry.npmjs.org"}
