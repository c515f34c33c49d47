"""kiln's long-lived helper containers, one per engine and instance and known by name: the npm
proxy (:mod:`sandbox.containers.npm_proxy`), and on a swarm node the preview relay
(:mod:`sandbox.cluster.preview_relay`) and the disk keeper (:mod:`sandbox.cluster.node_disk`).

Several kiln processes (API hosts, workers) share an engine, so a helper is adopted when one
runs with the wanted configuration (a digest in a label of the helper's own) and the engine's
current build of its image; otherwise the old one is removed and a new one started. Two
processes starting the same helper at once meet a name conflict: the loser adopts the winner's,
and a helper made but not started yet (``created``) is another process's start, waited for.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import docker

from sandbox.docker_boundary import call
from sandbox.errors import ImageMissing, SandboxError, SandboxNotFound

# How long a start by another process (a helper ``created``, or a name conflict) is waited for.
START_SECONDS = 10.0
POLL_SECONDS = 0.2


async def named_container(engine: docker.DockerClient, name: str) -> Any:
    """The container called ``name`` on ``engine``; ``None`` when there is none."""
    try:
        return await call(engine.containers.get, name)
    except SandboxNotFound:
        return None


async def remove_named_container(engine: docker.DockerClient, name: str) -> bool:
    """Remove the container called ``name``; ``False`` if there was none."""
    current = await named_container(engine, name)
    if current is None:
        return False
    await call(current.remove, force=True)
    return True


def configured_as(container: Any, config_label: str, digest: str) -> bool:
    """Whether ``container`` runs with the configuration ``digest`` (its ``config_label``)."""
    labels = container.attrs.get("Config", {}).get("Labels") or {}
    return bool(container.status == "running" and labels.get(config_label) == digest)


async def ensure_named_container(
    engine: docker.DockerClient, run_kwargs: dict[str, Any], config_label: str, where: str
) -> tuple[Any, bool]:
    """The helper ``run_kwargs`` describe (its ``name``, ``image`` and ``config_label`` among
    them) running on ``engine``, adopted or started (module docstring); whether it was started
    now. ``ImageMissing`` names the image and ``where`` (the engine, in words)."""
    image, name = run_kwargs["image"], run_kwargs["name"]
    try:
        image_id = (await call(engine.images.get, image)).id
    except SandboxNotFound as exc:
        raise ImageMissing(f"{where} has no image {image!r}") from exc
    digest = run_kwargs["labels"][config_label]
    deadline = time.monotonic() + START_SECONDS
    while True:
        waiting = time.monotonic() < deadline
        current = await named_container(engine, name)
        if current is not None and current.status == "created" and waiting:
            await anyio.sleep(POLL_SECONDS)  # another process is starting it: adopt it after
            continue
        if current is not None:
            if configured_as(current, config_label, digest) and current.attrs["Image"] == image_id:
                return current, False
            await call(current.remove, force=True)
        try:
            return await call(engine.containers.run, **run_kwargs), True
        except SandboxNotFound as exc:  # the image went between the inspect and the run
            raise ImageMissing(f"{where} has no image {image!r}") from exc
        except SandboxError as exc:
            if "Conflict" not in str(exc) or not waiting:
                raise
            await anyio.sleep(POLL_SECONDS)  # another process's, made just now: adopted next
