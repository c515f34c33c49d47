"""Helpers shared by the Docker tests (sandbox and CLI): test settings, leftovers, sweeping.

Sweeping and leftover checks use plain Docker SDK and redis-py calls, never kiln's own code,
so the final check of a session does not trust what it checks. :func:`manager_on` is the one
exception: a test's own manager is cleaned up after it by kiln's ``sweep_instance``, and the
session's final sweep then checks that nothing of its instance is left.
"""

from __future__ import annotations

import contextlib
import io
import secrets
import shutil
import subprocess
import tarfile
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio
import docker
import redis

from sandbox.backends.docker_engine import DockerBackend
from sandbox.containers.disk_quota import SUBVOLUME_INODE
from sandbox.containers.npm_proxy import proxy_volume_name, remove_proxy
from sandbox.containers.provisioning import remove_volume
from sandbox.disk_mounts import DEFAULT_DISK_ROOT, usable_root
from sandbox.lifecycle.instance_claim import claim_volume_name
from sandbox.lifecycle.manager import SandboxManager
from sandbox.lifecycle.reaper import sweep_instance
from sandbox.lifecycle.registry import SandboxRegistry
from sandbox.settings import LABEL, SandboxSettings

CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
POOL_TEMPLATE = "vanilla"  # the lightest dev server: the warm pool of the session serves it
# Sandboxes of the tests get disk quotas as in production wherever setup made the btrfs root.
DISK_ROOT = DEFAULT_DISK_ROOT if usable_root(DEFAULT_DISK_ROOT) else None


@dataclass
class TestInstances:
    """The kiln instances this session created; all are swept and checked at the end."""

    __test__ = False  # not a test class despite its name

    main: str
    extra: list[str] = field(default_factory=list)

    def new(self, suffix: str) -> str:
        """A further instance name, registered for the final sweep."""
        name = f"{self.main}-{suffix}-{secrets.token_hex(2)}"
        self.extra.append(name)
        return name

    @property
    def all(self) -> list[str]:
        """Every instance of the session."""
        return [self.main, *self.extra]


def settings_for(instance: str, redis_url: str, **overrides: object) -> SandboxSettings:
    """Test settings for ``instance``: own npm cache, the host CA bundle."""
    base = SandboxSettings(
        redis_url=redis_url,
        instance=instance,
        ca_bundle=CA_BUNDLE,
        warm_pool_size=0,
        warm_pool_templates=(POOL_TEMPLATE,),
        mem_limit="768m",
        pids_limit=256,
        dev_ready_timeout_seconds=90.0,
        install_timeout_seconds=180.0,
        command_timeout_seconds=60.0,
        disk_root=DISK_ROOT,
    )
    return replace(base, **overrides)  # type: ignore[arg-type]


def leftovers(client: docker.DockerClient, instance: str) -> list[str]:
    """Names of every Docker object still labelled with ``instance``."""
    filters = {"label": [LABEL, f"kiln.instance={instance}"]}
    return (
        [
            f"container {c.name}"
            for c in client.containers.list(all=True, filters=filters, ignore_removed=True)
        ]
        + [f"network {n.name}" for n in client.networks.list(filters=filters)]
        + [f"volume {v.name}" for v in client.volumes.list(filters=filters)]
        + [f"subvolume {name}" for name in disk_leftovers(instance)]
    )


def leftovers_but_claim(client: docker.DockerClient, instance: str) -> list[str]:
    """:func:`leftovers` but the instance's claim, which a server keeps on purpose (an explicit
    instance is its data dir's: ``sandbox.lifecycle.instance_claim``); swept all the same."""
    claim = f"volume {claim_volume_name(instance)}"
    return [item for item in leftovers(client, instance) if item != claim]


def disk_leftovers(instance: str) -> list[str]:
    """The quota subvolumes ``instance`` still has (none without a disk root)."""
    folder = DISK_ROOT / instance if DISK_ROOT is not None else None
    return sorted(p.name for p in folder.iterdir()) if folder and folder.is_dir() else []


def sweep_disk(instance: str) -> None:
    """Delete ``instance``'s quota subvolumes with the btrfs program itself."""
    if DISK_ROOT is None or not (DISK_ROOT / instance).is_dir():
        return
    program = shutil.which("btrfs") or shutil.which("btrfs", path="/usr/sbin:/usr/bin:/sbin:/bin")
    for name in disk_leftovers(instance):
        folder = DISK_ROOT / instance / name
        if folder.stat().st_ino != SUBVOLUME_INODE:  # a plain folder
            shutil.rmtree(folder)
            continue
        argv = [str(program), "subvolume", "delete", str(folder)]
        subprocess.run(argv, check=True, capture_output=True)
    (DISK_ROOT / instance).rmdir()


def sweep(client: docker.DockerClient, instance: str, redis_url: str) -> None:
    """Remove every object of ``instance`` and its registry keys, without kiln's code."""
    filters = {"label": [LABEL, f"kiln.instance={instance}"]}
    # Each may be going already (kiln's own clean-up finishing as the test ends): gone is swept.
    for container in client.containers.list(all=True, filters=filters, ignore_removed=True):
        with contextlib.suppress(docker.errors.NotFound):
            container.remove(force=True)
    for network in client.networks.list(filters=filters):
        with contextlib.suppress(docker.errors.NotFound):
            network.remove()
    for volume in client.volumes.list(filters=filters):
        with contextlib.suppress(docker.errors.NotFound):
            volume.remove(force=True)
    sweep_disk(instance)
    store = redis.Redis.from_url(redis_url)
    try:
        keys = list(store.scan_iter(match=f"kiln:registry:{instance}:*"))
        if keys:
            store.delete(*keys)
    finally:
        store.close()


@contextlib.contextmanager
def swept_instance(prefix: str, redis_url: str) -> Iterator[str]:
    """A fresh instance name ``<prefix>-<hex>`` for a test; everything of it is swept after."""
    name = f"{prefix}-{secrets.token_hex(3)}"
    try:
        yield name
    finally:
        client = docker.from_env()
        try:
            sweep(client, name, redis_url)
        finally:
            client.close()


async def remove_npm_proxy(client: docker.DockerClient, instance: str) -> None:
    """Remove ``instance``'s npm proxy and its cache (kept in production, not by tests)."""
    await remove_proxy(client, instance)
    await remove_volume(client, proxy_volume_name(instance))


@contextlib.asynccontextmanager
async def manager_on(
    settings: SandboxSettings, *, clock: Callable[[], float] | None = None
) -> AsyncIterator[SandboxManager]:
    """A manager of the test's own on ``settings`` (an instance of its own: ``instances.new``),
    swept with ``sweep_instance`` and closed after, however the test ends.

    Opened with ``SandboxManager.open``; with a ``clock``, made directly on it (``open`` takes
    none) with a client and registry of its own."""
    if clock is None:
        manager = await SandboxManager.open(settings)
    else:
        registry = SandboxRegistry.from_url(settings.redis_url, settings.instance)
        backend = DockerBackend(docker.from_env(), settings)
        manager = SandboxManager(backend, registry, settings, clock=clock)
    try:
        yield manager
    finally:
        await sweep_instance(manager.client, settings.instance, manager.registry, manager.disk)
        await manager.aclose()


@contextlib.contextmanager
def bare_sandbox_container(image: str = "kiln/sandbox-vanilla") -> Iterator[Any]:
    """A container of a sandbox image (its user, its ``/workspace``) that only sleeps: no
    network, no manager; removed after."""
    client = docker.from_env()
    name = f"test-bare-{secrets.token_hex(3)}"
    created = client.containers.run(
        image,
        ["sleep", "infinity"],
        entrypoint=[],
        name=name,
        detach=True,
        labels={LABEL: name},
        network_mode="none",
        init=True,  # reaps what a test kills, as a sandbox's supervisor does
    )
    try:
        yield created
    finally:
        created.remove(force=True)
        client.close()


async def wait_until_gone(container: Any, words: str, limit: float = 5.0) -> None:
    """Wait (at most ``limit`` seconds) until no process of ``container`` has ``words`` in its
    command line."""
    with anyio.fail_after(limit):
        while any(words in " ".join(row[7:]) for row in container.top()["Processes"]):
            await anyio.sleep(0.1)


def sandbox_files_tar(files: dict[str, str]) -> bytes:
    """A tar of text ``files`` (``path -> text``) owned by the sandbox user, for
    ``put_archive`` into a sandbox's workspace."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.uid, info.gid, info.mode = len(data), 1000, 1000, 0o644
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
