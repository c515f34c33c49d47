"""The sandbox manager against the real Docker engine and Redis: hardening, reuse, pool, revival."""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator

import anyio
import docker
import httpx
import pytest

from sandbox.backends.contract import HostCapacity
from sandbox.containers.hardening import CA_BUNDLE_PATH, NPM_CACHE_DIR, object_labels
from sandbox.containers.labels import network_name, volume_name
from sandbox.containers.networks import BRIDGE_NAME_OPTION, bridge_interface
from sandbox.containers.provisioning import create_volume, start_container
from sandbox.docker_boundary import call
from sandbox.errors import SandboxCapacity, SandboxConfigError, SandboxError, SandboxNotFound
from sandbox.images.templates import get_template
from sandbox.lifecycle import manager as manager_module
from sandbox.lifecycle.manager import Sandbox, SandboxManager
from sandbox.lifecycle.pool_report import describe_pool, pool_key
from sandbox.lifecycle.registry import SandboxRecord
from sandbox.settings import LABEL, SandboxSettings
from tests.sandbox.docker_support import TestInstances, manager_on, settings_for
from tests.waiting import until

pytestmark = [pytest.mark.anyio, pytest.mark.docker]


async def _exec(client: docker.DockerClient, container_id: str, *argv: str) -> str:
    """Run a probe in the container as the sandbox user (the test's own tool, not the policy)."""
    container = await call(client.containers.get, container_id)
    result = await call(container.exec_run, list(argv), user="1000:1000")
    return str(result.output.decode().strip())


@pytest.fixture
async def cold(manager: SandboxManager) -> AsyncIterator[Sandbox]:
    """A freshly provisioned sandbox with an owner and chat in its labels."""
    sandbox = await manager.provision("vanilla", owner="owner-1", chat="chat-cold")
    yield sandbox
    await manager.destroy(sandbox.id)


async def test_a_live_sandbox_container_is_hardened(
    cold: Sandbox, docker_client: docker.DockerClient, sandbox_settings: SandboxSettings
) -> None:
    attrs = docker_client.containers.get(cold.container_id).attrs
    host, config = attrs["HostConfig"], attrs["Config"]
    assert config["User"] == "1000:1000"
    assert host["CapDrop"] == ["ALL"]
    assert not host["CapAdd"]
    assert host["SecurityOpt"] == ["no-new-privileges"]
    assert host["Privileged"] is False
    assert host["Init"] is True
    assert host["PidsLimit"] == sandbox_settings.pids_limit
    assert host["Memory"] == host["MemorySwap"] == 768 * 1024 * 1024
    assert host["NanoCpus"] == sandbox_settings.nano_cpus
    assert host["LogConfig"] == {
        "Type": "json-file",
        "Config": {"max-size": "10m", "max-file": "3"},
    }
    labels = config["Labels"]
    assert labels[LABEL] == cold.id
    assert labels["kiln.instance"] == sandbox_settings.instance
    assert (labels["kiln.owner"], labels["kiln.chat"]) == ("owner-1", "chat-cold")
    assert float(labels["kiln.expiry"]) > float(labels["kiln.created"])


async def test_the_processes_have_no_privileges(
    cold: Sandbox, docker_client: docker.DockerClient
) -> None:
    status = await _exec(docker_client, cold.container_id, "cat", "/proc/self/status")
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    assert fields["Uid"].split()[0] == "1000"
    assert fields["CapEff"].strip() == "0000000000000000"
    assert fields["CapBnd"].strip() == "0000000000000000"
    assert fields["NoNewPrivs"].strip() == "1"
    init = await _exec(docker_client, cold.container_id, "cat", "/proc/1/cmdline")
    assert "docker-init" in init or "tini" in init


async def test_mounts_are_the_workspace_volume_its_quota_folders_and_ca_only(
    cold: Sandbox, docker_client: docker.DockerClient, manager: SandboxManager
) -> None:
    mounts = {
        m["Destination"]: m for m in docker_client.containers.get(cold.container_id).attrs["Mounts"]
    }
    quota = {"/home/node", "/tmp", "/var/tmp"} if manager.disk else set()
    assert set(mounts) == {"/workspace", CA_BUNDLE_PATH} | quota
    assert (mounts["/workspace"]["Type"], mounts["/workspace"]["Name"]) == ("volume", cold.volume)
    if manager.disk:  # all it writes is on its own subvolume
        folder = manager.disk.folder(cold.volume)
        assert {mounts[target]["Source"] for target in quota} == {
            str(folder / name) for name in ("home", "tmp", "var-tmp")
        }
    assert mounts[CA_BUNDLE_PATH]["RW"] is False
    assert not any("docker.sock" in m.get("Source", "") for m in mounts.values())
    volume = docker_client.volumes.get(cold.volume)
    assert volume.attrs["Labels"][LABEL] == cold.id


async def test_what_one_sandbox_writes_to_its_npm_cache_no_other_sandbox_sees(
    manager: SandboxManager, cold: Sandbox, docker_client: docker.DockerClient
) -> None:
    """The cross-user cache poisoning: sandbox code rewrote packages another user installed."""
    other = await manager.provision("vanilla", owner="owner-2", chat="chat-other")
    try:
        poison = "require('fs').mkdirSync(process.argv[1] + '/_cacache', {recursive: true});" + (
            "require('fs').writeFileSync(process.argv[1] + '/_cacache/poisoned', 'x')"
        )
        await _exec(docker_client, cold.container_id, "node", "-e", poison, NPM_CACHE_DIR)
        assert await _exec(docker_client, cold.container_id, "ls", f"{NPM_CACHE_DIR}/_cacache")
        seen = await _exec(docker_client, other.container_id, "ls", "-A", NPM_CACHE_DIR)
        assert "_cacache" not in seen.split()
        for sandbox in (cold, other):  # nothing writable is mounted but the sandbox's own
            mounts = docker_client.containers.get(sandbox.container_id).attrs["Mounts"]
            writable = {m.get("Name") or m["Source"] for m in mounts if m["RW"]}
            assert sandbox.volume in writable
            own = f"{manager.disk.folder(sandbox.volume)}/" if manager.disk else sandbox.volume
            assert all(s.startswith(own) for s in writable - {sandbox.volume})
    finally:
        await manager.destroy(other.id)


async def test_the_container_sits_on_the_shared_internal_network_only(
    cold: Sandbox, docker_client: docker.DockerClient, sandbox_settings: SandboxSettings
) -> None:
    networks = docker_client.containers.get(cold.container_id).attrs["NetworkSettings"]["Networks"]
    assert cold.network == sandbox_settings.network
    assert list(networks) == [cold.network]
    network = docker_client.networks.get(cold.network)
    assert network.attrs["Internal"] is True
    assert network.attrs["Labels"][LABEL] == "shared"
    # A kiln<hash> bridge, so one host firewall rule (-i kiln+) covers every sandbox.
    assert network.attrs["Options"][BRIDGE_NAME_OPTION] == bridge_interface(cold.network)


async def test_the_host_reaches_the_dev_server_on_the_container_address(
    manager: SandboxManager, cold: Sandbox
) -> None:
    ready = await manager.wait_ready(cold.id)
    async with httpx.AsyncClient() as client:
        response = await client.get(f"{ready.dev_url}/")
    assert response.status_code == 200
    assert "<html" in response.text.lower()


async def test_a_chat_gets_the_same_sandbox_back_and_another_chat_its_own(
    manager: SandboxManager,
) -> None:
    first = await manager.acquire("chat-reuse", "owner-1", "vanilla")
    try:
        await manager.release(first.id)
        again = await manager.acquire("chat-reuse", "owner-1", "vanilla")
        other = await manager.acquire("chat-other", "owner-1", "vanilla")
        assert again.id == first.id
        assert other.id != first.id
        assert (again.owner, again.chat) == ("owner-1", "chat-reuse")
        await manager.destroy(other.id)
    finally:
        await manager.destroy(first.id)


async def test_a_warm_acquire_hands_out_a_running_dev_server_and_the_pool_refills(
    manager: SandboxManager,
) -> None:
    await _until_pool_has_one(manager)
    sandbox = await manager.acquire("chat-warm", "owner-1", "vanilla")
    try:
        record = await manager.registry.get(sandbox.id)
        assert record is not None
        assert record.state == "in_use"
        async with httpx.AsyncClient() as client:  # no wait_ready: it was started warm
            assert (await client.get(f"{sandbox.dev_url}/")).status_code == 200
        await _until_pool_has_one(manager)
    finally:
        await manager.destroy(sandbox.id)


async def _until_pool_has_one(manager: SandboxManager) -> None:
    def filled() -> bool:
        return manager.pool.available("vanilla") >= 1

    await until(filled, "a warm vanilla sandbox in the pool", 120, 0.2)


async def test_container_for_revives_a_dead_container_on_the_same_volume(
    manager: SandboxManager, cold: Sandbox, docker_client: docker.DockerClient
) -> None:
    await _exec(docker_client, cold.container_id, "mkdir", "/workspace/kept")
    docker_client.containers.get(cold.container_id).remove(force=True)
    container = await manager.container_for(cold.id)
    assert container.id != cold.container_id
    assert container.status == "running"
    assert (
        await _exec(docker_client, container.id, "ls", "-d", "/workspace/kept") == "/workspace/kept"
    )
    revived = await manager.wait_ready(cold.id)
    assert revived.container_id == container.id


async def test_a_sandbox_whose_objects_all_vanished_comes_back_labelled(
    manager: SandboxManager, cold: Sandbox, docker_client: docker.DockerClient
) -> None:
    docker_client.containers.get(cold.container_id).remove(force=True)
    docker_client.volumes.get(cold.volume).remove()
    container = await manager.container_for(cold.id)
    assert container.status == "running"
    assert docker_client.volumes.get(cold.volume).attrs["Labels"][LABEL] == cold.id
    assert container.labels["kiln.owner"] == "owner-1"
    assert set(container.attrs["NetworkSettings"]["Networks"]) == {cold.network}


async def _legacy_sandbox(manager: SandboxManager, docker_client: docker.DockerClient) -> Sandbox:
    """A sandbox as made before sandboxes shared a network: its own internal network."""
    sandbox_id = "legacy" + secrets.token_hex(3)
    record = SandboxRecord(
        id=sandbox_id,
        template="vanilla",
        volume=volume_name(sandbox_id),
        network=network_name(sandbox_id),
        created=time.time(),
        last_used=time.time(),
    )
    await manager.registry.save(record)
    labels = object_labels(manager.settings, "vanilla", sandbox_id, created=record.created)
    docker_client.networks.create(record.network, internal=True, labels=labels)
    await create_volume(docker_client, record.volume, labels)
    started = await start_container(
        docker_client,
        manager.settings,
        get_template("vanilla"),
        sandbox_id,
        volume=record.volume,
        network=record.network,
        labels=labels,
    )
    record = record.with_changes(container_id=started.container_id, ip=started.ip, state="idle")
    await manager.registry.save(record)
    return record.handle()


async def test_a_sandbox_with_its_own_network_keeps_working_and_destroy_removes_it(
    manager: SandboxManager, docker_client: docker.DockerClient
) -> None:
    legacy = await _legacy_sandbox(manager, docker_client)
    ready = await manager.wait_ready(legacy.id)
    async with httpx.AsyncClient() as client:
        assert (await client.get(f"{ready.dev_url}/")).status_code == 200
    assert (await manager.container_for(legacy.id)).id == legacy.container_id
    await manager.destroy(legacy.id)
    assert not docker_client.networks.list(filters={"name": legacy.network})
    assert not docker_client.containers.list(all=True, filters={"label": f"{LABEL}={legacy.id}"})


async def test_a_revived_sandbox_with_its_own_network_moves_to_the_shared_one(
    manager: SandboxManager, docker_client: docker.DockerClient
) -> None:
    legacy = await _legacy_sandbox(manager, docker_client)
    try:
        docker_client.containers.get(legacy.container_id).remove(force=True)
        container = await manager.container_for(legacy.id)
        moved = await manager.wait_ready(legacy.id)
        assert moved.network == manager.settings.network
        assert set(container.attrs["NetworkSettings"]["Networks"]) == {moved.network}
        assert not docker_client.networks.list(filters={"name": legacy.network})
        async with httpx.AsyncClient() as client:
            assert (await client.get(f"{moved.dev_url}/")).status_code == 200
    finally:
        await manager.destroy(legacy.id)


async def test_another_template_for_a_chat_replaces_its_sandbox(
    manager: SandboxManager, docker_client: docker.DockerClient
) -> None:
    vanilla = await manager.acquire("chat-switch", "owner-1", "vanilla")
    vite = await manager.acquire("chat-switch", "owner-1", "vite-react")
    try:
        assert vite.id != vanilla.id
        assert await manager.registry.get(vanilla.id) is None
        assert not docker_client.containers.list(
            all=True, filters={"label": f"{LABEL}={vanilla.id}"}
        )
        ready = await manager.wait_ready(vite.id)
        async with httpx.AsyncClient() as client:
            response = await client.get(f"{ready.dev_url}/")
        assert response.status_code == 200  # vite serves as uid 1000 from the volume
    finally:
        await manager.destroy(vite.id)


async def test_a_chat_of_another_owner_is_not_handed_out(manager: SandboxManager) -> None:
    sandbox = await manager.acquire("chat-owned", "owner-1", "vanilla")
    try:
        with pytest.raises(SandboxError, match="another owner"):
            await manager.acquire("chat-owned", "owner-2", "vanilla")
    finally:
        await manager.destroy(sandbox.id)


async def test_destroy_removes_container_network_volume_and_record(
    manager: SandboxManager, docker_client: docker.DockerClient
) -> None:
    sandbox = await manager.provision("vanilla")
    await manager.destroy(sandbox.id)
    selector = {"label": f"{LABEL}={sandbox.id}"}
    assert not docker_client.containers.list(all=True, filters=selector)
    assert not docker_client.networks.list(filters=selector)
    assert not docker_client.volumes.list(filters=selector)
    with pytest.raises(SandboxNotFound, match=sandbox.id):
        await manager.get(sandbox.id)
    await manager.destroy(sandbox.id)  # destroying twice is harmless


async def test_an_unknown_template_is_refused_before_anything_is_created(
    manager: SandboxManager,
) -> None:
    with pytest.raises(KeyError, match="'angular'"):
        await manager.acquire("chat-x", "owner-1", "angular")


@pytest.fixture
async def small_host(instances: TestInstances, redis_url: str) -> AsyncIterator[SandboxManager]:
    """A manager on an instance of its own that may hold one sandbox, warm one included."""
    settings = settings_for(instances.new("capacity"), redis_url, max_sandboxes=1, warm_pool_size=1)
    async with manager_on(settings) as opened:
        yield opened


async def test_past_the_limit_provisioning_is_refused_in_words_and_creates_nothing(
    small_host: SandboxManager, docker_client: docker.DockerClient
) -> None:
    kept = await small_host.provision("vanilla")
    with pytest.raises(SandboxCapacity, match=r"holds 1 sandboxes, the limit is 1") as refused:
        await small_host.provision("vanilla")
    assert refused.value.code == "sandbox_capacity"
    assert [record.id for record in await small_host.list()] == [kept.id]
    assert await small_host.capacity() == (1, 1)
    containers = docker_client.containers.list(
        all=True, filters={"label": f"kiln.instance={small_host.settings.instance}"}
    )
    sandboxes = [c.id for c in containers if c.labels.get(LABEL) != "shared"]  # npm proxy aside
    assert sandboxes == [kept.container_id]


@pytest.mark.parametrize(
    ("nodes", "room"),
    [
        pytest.param(
            [HostCapacity(2 * 2**30, "n1"), HostCapacity(5 * 2**30, "n2"), HostCapacity(0, "n3")],
            HostCapacity(5 * 2**30, "n2"),
            id="the-roomiest-node",
        ),
        pytest.param([], HostCapacity(0), id="no-node-no-room"),
    ],
)
async def test_the_memory_room_admission_reads_is_the_roomiest_nodes(
    manager: SandboxManager,
    monkeypatch: pytest.MonkeyPatch,
    nodes: list[HostCapacity],
    room: HostCapacity,
) -> None:
    """Admission asks the manager, not this host: on a swarm the nodes hold the sandboxes."""

    async def capacity() -> list[HostCapacity]:
        return nodes

    monkeypatch.setattr(manager.backend, "capacity", capacity)
    assert await manager.memory_room() == room


async def test_at_the_limit_an_acquire_gives_up_a_warm_sandbox_of_another_template(
    small_host: SandboxManager,
) -> None:
    async with small_host:
        with anyio.fail_after(120):
            while small_host.pool.available("vanilla") < 1:
                await anyio.sleep(0.2)
        warm = (await small_host.list())[0]
        sandbox = await small_host.acquire("chat-full", "owner-1", "vite-react")
        assert [record.id for record in await small_host.list()] == [sandbox.id]
        assert await small_host.registry.get(warm.id) is None


class MovableClock:
    """The manager's clock, moved by the test (no sleeping through the pool's window)."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


async def test_a_burst_grows_the_warm_pool_and_idle_time_shrinks_it(
    instances: TestInstances, redis_url: str
) -> None:
    settings = settings_for(instances.new("elastic"), redis_url, warm_pool_size=0, warm_pool_max=2)
    clock = MovableClock()
    async with manager_on(settings, clock=clock) as opened:
        async with opened:
            await _burst_then_idle(opened, clock)
        assert await opened.list() == []  # the pool's sandboxes are gone with it


async def _burst_then_idle(manager: SandboxManager, clock: MovableClock) -> None:
    instance = manager.settings.instance
    users = [await manager.acquire(f"chat-burst-{n}", "owner-1", "vanilla") for n in range(2)]
    with anyio.fail_after(180):  # two warm dev servers, started one after the other
        while manager.pool.available("vanilla") < 2:
            await anyio.sleep(0.2)
    assert manager.pool.targets["vanilla"].rule == "demand"
    shown = ["vanilla: 2 ready, target 2 (demand: 2 acquires in the last 600s)"]
    with anyio.fail_after(30):  # what kiln doctor shows, published after the pool's next look
        while describe_pool(await manager.registry.redis.hgetall(pool_key(instance))) != shown:
            await anyio.sleep(0.1)
    warm = {r.id for r in await manager.list() if r.state == "warm"}
    assert len(warm) == 2
    clock.now += manager.settings.warm_pool_window_seconds + 1  # every acquire left the window
    manager.pool.wake()
    with anyio.fail_after(60):
        while manager.pool.available("vanilla") > 0 or warm & {r.id for r in await manager.list()}:
            await anyio.sleep(0.2)
    assert manager.pool.targets["vanilla"].rule == "idle"
    assert sorted(r.id for r in await manager.list()) == sorted(u.id for u in users)
    for user in users:
        await manager.destroy(user.id)


async def test_a_users_new_chat_past_their_limit_gives_up_their_idle_sandbox(
    instances: TestInstances, redis_url: str
) -> None:
    """One sandbox per user: Ann's second chat takes the place of her idle first one, and
    Bob's sandbox is not touched."""
    settings = settings_for(instances.new("per-user"), redis_url, max_sandboxes_per_user=1)
    async with manager_on(settings) as manager:
        first = await manager.acquire("chat-a1", "ann", "vanilla")
        bobs = await manager.acquire("chat-b1", "bob", "vanilla")
        with pytest.raises(SandboxCapacity, match="KILN_MAX_SANDBOXES_PER_USER"):
            await manager.acquire("chat-a2", "ann", "vanilla")  # her first is still in use
        await manager.release(first.id)
        second = await manager.acquire("chat-a2", "ann", "vanilla")
        assert {r.id for r in await manager.list()} == {second.id, bobs.id}
        assert await manager.registry.chat_sandbox("chat-a1") is None


class EngineLessBackend:
    """A backend with the contract's name and close only: it reaches no Docker engine."""

    name = "engineless"

    def __init__(self) -> None:
        self.closed = False

    async def aclose(self) -> None:
        self.closed = True


async def test_a_backend_reaching_no_engine_is_refused_in_words_and_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    opened = EngineLessBackend()

    async def open_backend(settings: SandboxSettings) -> EngineLessBackend:
        return opened

    monkeypatch.setattr(manager_module, "open_backend", open_backend)
    with pytest.raises(SandboxConfigError, match=r"'engineless': this backend reaches no Docker"):
        await SandboxManager.open(SandboxSettings())
    assert opened.closed
