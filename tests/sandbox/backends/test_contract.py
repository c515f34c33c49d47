"""The sandbox backend contract, run against every backend (today the single Docker engine,
for real): create from a template with its limits, streamed exec with its exit code, files in
and out as archives, the preview address reaching the dev port, park and revive keeping the
workspace, destroy, list by labels, capacity, the npm registry address, and the hardening seen
from inside the sandbox.

One sandbox per backend is made for the module (the tests that keep it); park/revive/destroy
make their own. A further backend is one more name in :data:`BACKEND_FIXTURES` and a fixture of
that name giving an opened backend (and removing what it made)."""

from __future__ import annotations

import io
import secrets
import tarfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path

import httpx
import pytest

from sandbox.backends.choice import open_backend
from sandbox.backends.contract import (
    NetworkPolicy,
    PreviewAddress,
    Resources,
    SandboxBackend,
    SandboxClaim,
    SandboxStatus,
    sandbox_template,
)
from sandbox.containers.hardening import object_labels
from sandbox.containers.labels import CHAT_LABEL, INSTANCE_LABEL, volume_name
from sandbox.env_settings import size_bytes
from sandbox.images.templates import WORKSPACE, get_template
from sandbox.settings import SandboxSettings
from tests.sandbox.docker_support import TestInstances, sandbox_files_tar, settings_for

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

TEMPLATE = "vanilla"  # the lightest dev server
# The backends under test, by the fixture that opens each (a swarm one is one more name).
BACKEND_FIXTURES = [pytest.param("docker_backend", id="docker")]
EXEC_TIMEOUT = 30.0
OUTPUT_CAP = 64 * 1024
# How long a connection that must fail may try: a dropped packet is not answered at all.
REACH_SECONDS = 2
# The sandbox's memory, pids and CPU limits as its cgroup says: v2 files, else v1's.
CGROUP_LIMITS = """cd /sys/fs/cgroup
cat memory.max 2>/dev/null || cat memory/memory.limit_in_bytes
cat pids.max 2>/dev/null || cat pids/pids.max
cat cpu.max 2>/dev/null || echo "$(cat cpu/cpu.cfs_quota_us) $(cat cpu/cpu.cfs_period_us)"
"""


@dataclass(frozen=True)
class Opened:
    """A backend under test and the settings of its instance."""

    backend: SandboxBackend
    settings: SandboxSettings


@pytest.fixture(scope="module")
async def docker_backend(instances: TestInstances) -> AsyncIterator[Opened]:
    """The Docker backend, opened as ``kiln serve`` opens it (``KILN_SANDBOX_BACKEND=docker``),
    on an instance of its own; its network and npm proxy removed after."""
    settings = replace(settings_for(instances.new("contract"), "redis://unused"), backend="docker")
    backend = await open_backend(settings)
    try:
        yield Opened(backend, settings)
        await backend.release_shared()
    finally:
        await backend.aclose()


@pytest.fixture(scope="module", params=BACKEND_FIXTURES)
def opened(request: pytest.FixtureRequest) -> Opened:
    """Each backend under test in turn."""
    found: Opened = request.getfixturevalue(request.param)
    return found


def new_claim(opened: Opened, chat: str) -> SandboxClaim:
    """A claim of a fresh vanilla sandbox of ``chat`` on the backend's instance."""
    settings, sandbox_id = opened.settings, secrets.token_hex(6)
    labels = object_labels(settings, TEMPLATE, sandbox_id, created=time.time(), chat=chat)
    return SandboxClaim(
        sandbox_id,
        sandbox_template(settings, TEMPLATE),
        volume_name(sandbox_id),
        settings.network,
        labels,
    )


@dataclass(frozen=True)
class Made:
    """The module's sandbox on one backend."""

    opened: Opened
    claim: SandboxClaim
    status: SandboxStatus

    @property
    def backend(self) -> SandboxBackend:
        return self.opened.backend


@pytest.fixture(scope="module")
async def made(opened: Opened) -> AsyncIterator[Made]:
    """One sandbox created from the template (the npm registry made ready first)."""
    await opened.backend.npm_registry()
    claim = new_claim(opened, f"contract-{secrets.token_hex(3)}")
    try:
        yield Made(opened, claim, await opened.backend.create(claim))
    finally:
        await opened.backend.destroy(claim)


async def run(made: Made, argv: list[str]) -> tuple[int, list[str]]:
    """Exit code and streamed lines of ``argv`` in the module's sandbox."""
    lines: list[str] = []

    async def sink(line: str) -> None:
        lines.append(line)

    result = await made.backend.exec(
        made.status, argv, timeout=EXEC_TIMEOUT, output_cap=OUTPUT_CAP, on_output=sink
    )
    return result.exit_code, lines


async def test_create_gives_a_running_sandbox_with_an_address(made: Made) -> None:
    status = await made.backend.status(made.status.workload)
    assert status is not None
    assert status.running
    assert status.sandbox_id == made.claim.sandbox_id
    assert made.status.address


async def test_exec_streams_lines_as_they_come_and_returns_the_exit_code(made: Made) -> None:
    assert await run(made, ["sh", "-c", "echo one; echo two; echo three; exit 3"]) == (
        3,
        ["one", "two", "three"],
    )
    assert await run(made, ["sh", "-c", "echo oops >&2"]) == (0, ["oops"])


async def test_files_go_in_and_come_out_as_archives(made: Made) -> None:
    text = f"hello {secrets.token_hex(4)}\n"
    await made.backend.put_archive(made.status, WORKSPACE, sandbox_files_tar({"in.txt": text}))
    assert await run(made, ["cat", f"{WORKSPACE}/in.txt"]) == (0, [text.strip()])
    data = await made.backend.get_archive(made.status, f"{WORKSPACE}/in.txt")
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        member = archive.extractfile("in.txt")
        assert member is not None
        assert member.read().decode() == text


async def test_the_preview_address_reaches_the_dev_port(made: Made) -> None:
    port = made.claim.template.dev_port
    await made.backend.wait_port(made.status, port, made.opened.settings.dev_ready_timeout_seconds)
    # Any host and port (a node's relay on a swarm) that serves the dev server.
    address = await made.backend.preview_address(made.status, port)
    async with httpx.AsyncClient(timeout=10.0) as http:
        response = await http.get(address.url + "/")
    assert response.status_code == 200


async def test_sandboxes_are_listed_by_their_labels(made: Made) -> None:
    chat = made.claim.labels[CHAT_LABEL]
    instance = made.opened.settings.instance
    found = await made.backend.list_by_labels({INSTANCE_LABEL: instance, CHAT_LABEL: chat})
    assert [s.workload for s in found] == [made.status.workload]
    assert await made.backend.list_by_labels({CHAT_LABEL: f"{chat}-none"}) == []


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        pytest.param(["id", "-u"], "1000", id="not-root"),
        pytest.param(["sh", "-c", "grep ^CapEff /proc/self/status"], "0" * 16, id="no-caps"),
        pytest.param(["sh", "-c", "grep ^NoNewPrivs /proc/self/status"], "1", id="no-new-privs"),
    ],
)
async def test_hardening_is_visible_inside(made: Made, argv: list[str], expected: str) -> None:
    code, lines = await run(made, argv)
    assert code == 0
    assert lines[-1].split()[-1] == expected


async def test_the_root_is_read_only_where_the_workspace_has_a_quota(made: Made) -> None:
    code, lines = await run(made, ["sh", "-c", "awk '$2 == \"/\" {print $4}' /proc/mounts"])
    assert code == 0
    read_only = lines[-1].split(",")[0] == "ro"
    assert read_only == (made.claim.template.resources.disk is not None)


async def test_the_templates_limits_hold_inside(made: Made) -> None:
    resources = made.claim.template.resources
    code, lines = await run(made, ["sh", "-c", CGROUP_LIMITS])
    assert code == 0
    memory, pids, cpu = lines
    assert int(memory) == size_bytes(resources.memory)
    assert int(pids) == resources.pids
    quota, period = (int(part) for part in cpu.split())
    assert quota / period == pytest.approx(resources.cpus)


async def test_the_npm_registry_is_an_address_a_sandbox_reaches(made: Made) -> None:
    url = await made.backend.npm_registry()
    assert url.startswith("http://")
    # Any answer of the proxy will do (no package asked: nothing leaves the host). This is also
    # the probe of the unreachability tests telling a reachable address apart.
    assert (await run(made, unreachable(url)))[0] == 1


def unreachable(url: str) -> list[str]:
    """argv exiting 0 when ``url`` cannot be fetched within :data:`REACH_SECONDS`, else 1."""
    script = (
        f"fetch({url!r}, {{signal: AbortSignal.timeout({REACH_SECONDS * 1000:.0f})}})"
        ".then(() => process.exit(1), () => process.exit(0))"
    )
    return ["node", "-e", script]


async def test_the_internet_is_not_reachable(made: Made) -> None:
    assert (await run(made, unreachable("http://1.1.1.1/")))[0] == 0


async def test_capacity_names_the_room_of_each_node(made: Made) -> None:
    nodes = await made.backend.capacity()
    assert nodes
    assert all(isinstance(node.headroom, int) for node in nodes)


async def test_the_disk_quota_is_known_where_the_template_has_one(made: Made) -> None:
    used_up = await made.backend.quota_used_up(made.claim)
    assert (used_up is None) == (made.claim.template.resources.disk is None)
    assert not used_up


async def test_park_keeps_the_workspace_revive_brings_it_back_destroy_removes_all(
    opened: Opened, made: Made
) -> None:
    backend = opened.backend
    claim = new_claim(opened, f"contract-park-{secrets.token_hex(3)}")
    port, ready = made.claim.template.dev_port, opened.settings.dev_ready_timeout_seconds
    await backend.wait_port(made.status, port, ready)  # serving: a refusal would prove nothing
    peer = await backend.preview_address(made.status, port)
    try:
        first = await backend.create(claim)
        # Another sandbox's dev server, which kiln reaches (the preview test), this one cannot.
        reach = await backend.exec(
            first, unreachable(peer.url), timeout=EXEC_TIMEOUT, output_cap=OUTPUT_CAP
        )
        assert reach.exit_code == 0
        await backend.put_archive(first, WORKSPACE, sandbox_files_tar({"kept.txt": "kept\n"}))
        assert await backend.park(claim)
        assert await backend.status(first.workload) is None
        assert not await backend.park(claim)  # nothing runs: nothing to park
        revived = await backend.revive(claim)
        assert revived.workload != first.workload
        result = await backend.exec(
            revived, ["cat", f"{WORKSPACE}/kept.txt"], timeout=EXEC_TIMEOUT, output_cap=OUTPUT_CAP
        )
        assert (result.exit_code, result.output) == (0, "kept")
    finally:
        await backend.destroy(claim)
    assert await backend.list_by_labels({CHAT_LABEL: claim.labels[CHAT_LABEL]}) == []
    await backend.destroy(claim)  # idempotent


@pytest.mark.parametrize(
    ("disk_root", "disk"),
    [pytest.param(None, None, id="no-quota"), pytest.param("/q", "3g", id="quota")],
)
def test_a_template_has_the_instances_limits_and_the_one_network_policy(
    disk_root: str | None, disk: str | None
) -> None:
    settings = SandboxSettings(
        mem_limit="512m",
        nano_cpus=1_500_000_000,
        pids_limit=64,
        disk_quota="3g",
        disk_root=None if disk_root is None else Path(disk_root),
    )
    template = sandbox_template(settings, "vite-react")
    assert (template.name, template.image, template.dev_port) == (
        "vite-react",
        get_template("vite-react").image,
        5173,
    )
    assert template.resources == Resources(cpus=1.5, memory="512m", pids=64, disk=disk)
    assert template.network == NetworkPolicy(
        internet=False, peers=False, egress=("npm-proxy",), ingress_ports=(5173,)
    )
    assert PreviewAddress("10.0.0.2", 5173).url == "http://10.0.0.2:5173"
