"""What a swarm node kept of sandboxes kiln no longer knows: the leftovers of a node lost and back.

A node whose engine died (or was cut off) while it held sandboxes comes back with what kiln could
not remove while it was away: the workspace volumes (and quota subvolumes) of sandboxes kiln
destroyed meanwhile (their chats moved on to other nodes), and render browsers whose sandbox is
gone. The swarm removes the tasks of removed services itself; the reaper removes the rest on
each pass, node by node (:func:`sweep_node`):

- a workspace volume of the instance whose sandbox the registry does not know (one still in
  use, by a task container the swarm is removing, is waited for a few seconds, then left to the
  next pass), with its subvolume;
- a render browser of the instance whose sandbox container (the namespace it joined) is gone.

The node's volumes are listed before the registry is read (``known`` is called after): a record
is written before its sandbox's volume, so a sandbox being made meanwhile is never an orphan.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import docker

from sandbox.cluster.placement import remove_workspace_volume
from sandbox.containers.labels import (
    INSTANCE_LABEL,
    RENDER_ROLE,
    ROLE_LABEL,
    SHARED,
    instance_filter,
)
from sandbox.docker_boundary import call
from sandbox.errors import SandboxNotFound
from sandbox.settings import LABEL

Known = Callable[[], Awaitable[set[str]]]
RemoveSubvolume = Callable[[str], Awaitable[bool]]
NAMESPACE_PREFIX = "container:"
IN_USE_WAIT_SECONDS = 15.0


async def sweep_node(
    engine: docker.DockerClient,
    instance: str,
    known: Known,
    remove_subvolume: RemoveSubvolume | None = None,
) -> list[str]:
    """Remove what ``engine``'s node kept of ``instance``'s sandboxes unknown to ``known()``
    (module docstring); what was removed, as ``"volume NAME"``, ``"disk NAME"``,
    ``"container NAME"``."""
    volumes = await call(engine.volumes.list, filters=instance_filter(instance))
    ids = await known()
    removed: list[str] = []
    for volume in volumes:
        sandbox_id = (volume.attrs.get("Labels") or {}).get(LABEL, "")
        if sandbox_id in ("", SHARED) or sandbox_id in ids or not await _removed(engine, volume):
            continue
        removed.append(f"volume {volume.name}")
        if remove_subvolume is not None and await remove_subvolume(volume.name):
            removed.append(f"disk {volume.name}")
    return removed + await _sweep_browsers(engine, instance)


async def _removed(engine: docker.DockerClient, volume: Any) -> bool:
    """Whether the volume was removed, once its task's container is gone (the swarm removes it
    a moment after its service, which may just have been removed); one still in use after
    :data:`IN_USE_WAIT_SECONDS` is left to the next pass."""
    try:
        return await remove_workspace_volume(engine, volume.name, within=IN_USE_WAIT_SECONDS)
    except TimeoutError:
        return False


async def _sweep_browsers(engine: docker.DockerClient, instance: str) -> list[str]:
    """The instance's render browsers whose sandbox container is gone."""
    wanted = {"label": [f"{INSTANCE_LABEL}={instance}", f"{ROLE_LABEL}={RENDER_ROLE}"]}
    browsers = await call(engine.containers.list, all=True, filters=wanted, ignore_removed=True)
    removed = []
    for browser in browsers:
        mode = str(browser.attrs.get("HostConfig", {}).get("NetworkMode", ""))
        if mode.startswith(NAMESPACE_PREFIX) and not await _exists(
            engine, mode.removeprefix(NAMESPACE_PREFIX)
        ):
            try:
                await call(browser.remove, force=True)
            except SandboxNotFound:
                continue  # its check removed it meanwhile
            removed.append(f"container {browser.name}")
    return removed


async def _exists(engine: docker.DockerClient, container: str) -> bool:
    try:
        await call(engine.containers.get, container)
    except SandboxNotFound:
        return False
    return True
