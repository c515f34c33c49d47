"""The sandbox backend contract: what kiln needs of the place its sandboxes live.

The field shares one shape (OpenHands' runtime API, E2B's sandboxes, kubernetes-sigs'
agent-sandbox ``Sandbox`` / ``SandboxTemplate`` / ``SandboxWarmPool``): a sandbox is created from
a template with cpu, memory, disk and a network policy; commands run in it with streamed output;
files go in and come out as archives; each port has a preview address; a sandbox can be paused
and resumed (kiln parks it, keeping its workspace, and revives it); it is destroyed; sandboxes
are listed by labels. kiln also needs three things of the hosts behind a backend: capacity
(memory admission; per node on a cluster), the npm proxy address a sandbox installs through, and
the disk quota of a sandbox's workspace.

The names follow agent-sandbox where it has one: :class:`SandboxTemplate` (image, resources,
network policy: its ``podTemplate`` and ``networkPolicy``), :class:`SandboxClaim` (one sandbox of
a template, with labels; its ``sandboxTemplateRef``), :class:`SandboxStatus` (its status: the
workload, addresses and the node it runs on: ``podIPs``, ``nodeName``). Parking is its
``operatingMode: Suspended`` with the volume kept; the warm pool (``SandboxWarmPool``) stays
kiln's own (:mod:`sandbox.lifecycle.warm_pool`), since it grows by kiln's demand rules and
fills through :meth:`SandboxBackend.create` like any sandbox.

What each backend owns (engine clients, host cgroups, quotas, networks) stays behind it: the
manager and the provisioner (:mod:`sandbox.lifecycle`) speak only this contract. A backend's
failures are kiln's sandbox exceptions (:mod:`sandbox.errors`), wrapped at its own boundary.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from sandbox.containers.disk_quota import QuotaDisk
from sandbox.execution.app_env import Redaction
from sandbox.execution.exec_stream import ExecResult, OutputSink
from sandbox.images.templates import get_template
from sandbox.settings import SandboxSettings

__all__ = [
    "EngineBackend",
    "HostCapacity",
    "NetworkPolicy",
    "PreviewAddress",
    "Resources",
    "SandboxBackend",
    "SandboxClaim",
    "SandboxStatus",
    "SandboxTemplate",
    "sandbox_template",
]


@dataclass(frozen=True, slots=True)
class Resources:
    """What one sandbox may use: CPUs, memory (a Docker size, ``"1g"``), processes, and its
    workspace's disk quota (a size; ``None``: the backend has no quota)."""

    cpus: float
    memory: str
    pids: int
    disk: str | None


@dataclass(frozen=True, slots=True)
class NetworkPolicy:
    """Where a sandbox's traffic may go. kiln's one policy: no internet, no other sandbox, only
    the npm proxy (``egress``: the services it may reach, by role); the preview reaches the dev
    port from kiln's side (``ingress_ports``)."""

    internet: bool = False
    peers: bool = False
    egress: tuple[str, ...] = ("npm-proxy",)
    ingress_ports: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class SandboxTemplate:
    """What sandboxes of one kiln template are made from (agent-sandbox's ``SandboxTemplate``)."""

    name: str
    image: str
    dev_port: int
    resources: Resources
    network: NetworkPolicy


@dataclass(frozen=True, slots=True)
class SandboxClaim:
    """One sandbox to make, revive, park or remove: its id, template, the names of its
    workspace volume and network, and its labels (owner, chat, instance, created; the backend
    puts them on every object it makes, so :meth:`SandboxBackend.list_by_labels` finds them)."""

    sandbox_id: str
    template: SandboxTemplate
    volume: str
    network: str
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SandboxStatus:
    """A sandbox as it runs: its workload (a container id), the address kiln reaches its ports
    at, the node it runs on (``""`` on one engine), whether it runs, its labels."""

    sandbox_id: str
    workload: str
    address: str
    node: str = ""
    running: bool = True
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PreviewAddress:
    """Where kiln's preview proxy reaches one port of a sandbox."""

    host: str
    port: int

    @property
    def url(self) -> str:
        """``http://host:port``."""
        return f"http://{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class HostCapacity:
    """Room for more sandboxes on one node: the memory sandboxes may still take above the
    reserve (bytes), and the node's name (``""`` on one engine)."""

    headroom: int
    node: str = ""


@runtime_checkable
class SandboxBackend(Protocol):
    """The place sandboxes live (see the module docstring). Every method is async and never
    blocks the event loop; every failure is a :class:`~sandbox.errors.SandboxError`."""

    name: str

    async def ping(self) -> None:
        """Return when the backend answers; ``DockerUnavailable`` when it does not."""

    async def aclose(self) -> None:
        """Let go of the backend's connections."""

    async def create(self, claim: SandboxClaim) -> SandboxStatus:
        """Make and start the sandbox (workspace volume with its quota, the hardened workload
        on the claim's network, made ready by :meth:`npm_registry` first); ``ImageMissing``
        when the template's image is not there."""

    async def revive(self, claim: SandboxClaim) -> SandboxStatus:
        """A new workload on the sandbox's existing workspace (its old one died, vanished or
        was parked), on the instance's network (:meth:`npm_registry` first); its address may
        change."""

    async def park(self, claim: SandboxClaim) -> bool:
        """Remove the sandbox's workload, keep its workspace; ``False`` when none ran."""

    async def destroy(self, claim: SandboxClaim) -> None:
        """Remove the sandbox's workload, workspace and quota; idempotent."""

    async def status(self, workload: str) -> SandboxStatus | None:
        """The workload as it is now; ``None`` when it is gone."""

    async def list_by_labels(self, labels: Mapping[str, str]) -> list[SandboxStatus]:
        """Every sandbox workload carrying all of ``labels``, running or not."""

    async def exec(
        self,
        sandbox: SandboxStatus,
        argv: Sequence[str],
        *,
        timeout: float,
        output_cap: int,
        on_output: OutputSink | None = None,
        redaction: Redaction | None = None,
    ) -> ExecResult:
        """Run ``argv`` as the sandbox user in the workspace: output lines streamed to
        ``on_output`` as they come (``redaction`` applied: the chat's secrets), the exit code,
        time and memory verdicts in the result."""

    async def put_archive(self, sandbox: SandboxStatus, path: str, archive: bytes) -> None:
        """Unpack a tar ``archive`` at ``path`` in the sandbox."""

    async def get_archive(self, sandbox: SandboxStatus, path: str) -> bytes:
        """``path`` of the sandbox as a tar archive."""

    async def preview_address(self, sandbox: SandboxStatus, port: int) -> PreviewAddress:
        """Where kiln reaches ``port`` of the sandbox."""

    async def wait_port(self, sandbox: SandboxStatus, port: int, timeout: float) -> None:
        """Return once ``port`` accepts connections; ``SandboxUnavailable`` when the sandbox
        stops first or ``timeout`` seconds pass."""

    async def npm_registry(self) -> str:
        """The npm registry URL a sandbox installs through (kiln's npm proxy, made or adopted
        with the instance's sandbox network)."""

    async def release_shared(self) -> None:
        """Remove the instance's shared network and npm proxy when no sandbox uses them."""

    async def park_shared(self) -> tuple[bool, bool]:
        """kiln stopping: remove the instance's shared network and npm proxy when no sandbox
        uses them, the proxy's package cache kept; ``(network removed, proxy removed)``."""

    async def capacity(self) -> list[HostCapacity]:
        """Each node's room for more sandboxes (one entry on a single engine)."""

    async def quota_used_up(self, claim: SandboxClaim) -> bool | None:
        """Whether the sandbox's disk quota is (nearly) used up; ``None`` without a quota."""


def sandbox_template(settings: SandboxSettings, name: str) -> SandboxTemplate:
    """kiln's template ``name`` as the contract's template: its image and dev port, the
    instance's limits (``KILN_SANDBOX_CPUS``, ``_MEMORY``, ``_PIDS``, ``_DISK_QUOTA`` when a
    disk root is set) and kiln's one network policy (the npm proxy only)."""
    template = get_template(name)
    resources = Resources(
        cpus=settings.nano_cpus / 1_000_000_000,
        memory=settings.mem_limit,
        pids=settings.pids_limit,
        disk=settings.disk_quota if settings.disk_root is not None else None,
    )
    policy = NetworkPolicy(ingress_ports=(template.dev_port,))
    return SandboxTemplate(template.name, template.image, template.dev_port, resources, policy)


@runtime_checkable
class EngineBackend(SandboxBackend, Protocol):
    """A backend whose sandboxes are containers on Docker engines kiln reaches directly: what
    the modules that still speak docker-py need of it (docs/architecture.md, "Sandbox backends":
    the execution and write paths take a container from ``client``; the sweeps and tests read
    ``disk``). The Docker backend is one; a cluster backend gives its nodes' engines."""

    client: Any
    disk: QuotaDisk | None

    async def container(self, workload: str) -> Any:
        """The docker ``Container`` of a workload (the execution path's handle); ``None``
        when it is gone."""

    async def reap_elsewhere(self, known: Callable[[], Awaitable[set[str]]]) -> list[str]:
        """Remove what engines other than kiln's own hold of sandboxes ``known()`` does not
        name (a cluster's nodes, after one was lost and came back); what was removed. One
        engine: nothing (the reaper sweeps kiln's own engine by label)."""

    async def engine_beside(self, workload: str, image: str) -> Any:
        """The docker client of the engine ``workload`` runs on, for a helper container of
        ``image`` that joins its network namespace (the render check's browser), ``image``
        present there: a cluster copies it to that node from kiln's engine first.
        ``SandboxLost`` when the workload runs nowhere, ``ImageMissing`` when kiln's engine
        lacks the image."""
