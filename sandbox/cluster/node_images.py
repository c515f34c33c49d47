"""Whether every swarm node has kiln's images, the same build as expected, before placement.

Nodes never pull sandbox images (their engines run with ``DOCKER_SERVICE_PREFER_OFFLINE_IMAGE=1``,
``docs/cluster.md``): images are loaded into each node, or pulled from a registry by digest. A
node whose image is missing or another build must not get sandboxes: :func:`nodes_lacking` names
them (for ``kiln doctor`` and for constraining placement), asked of each node's own engine (the
``kiln.engine`` label), since a manager does not know other nodes' images.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import closing

import docker
import docker.errors

from sandbox.cluster.service_spec import ENGINE_LABEL
from sandbox.docker_boundary import CLIENT_TIMEOUT_SECONDS, call


def _image_id(client: docker.DockerClient, image: str) -> str | None:
    try:
        return str(client.images.get(image).id)
    except docker.errors.ImageNotFound:
        return None


def image_ids(engine: str, images: Sequence[str]) -> dict[str, str | None]:
    """``image -> its ID`` on the engine at ``engine`` (``None``: it has none); blocking."""
    with closing(docker.DockerClient(base_url=engine, timeout=CLIENT_TIMEOUT_SECONDS)) as client:
        return {image: _image_id(client, image) for image in images}


def _lacking(engine: str, images: Mapping[str, str]) -> list[str]:
    """The images (of ``image -> expected ID``) the engine at ``engine`` lacks or has
    another build of, each with what it has."""
    found = image_ids(engine, list(images))
    return [
        f"{image} ({'missing' if found[image] is None else found[image]})"
        for image, expected in images.items()
        if found[image] != expected
    ]


async def nodes_lacking(
    manager: docker.DockerClient, images: Mapping[str, str]
) -> dict[str, list[str]]:
    """Swarm node ID -> the images it lacks or has another build of (nodes that have them
    all are left out; a node without the ``kiln.engine`` label lacks everything)."""
    lacking: dict[str, list[str]] = {}
    for node in await call(manager.nodes.list):
        engine = (node.attrs["Spec"].get("Labels") or {}).get(ENGINE_LABEL)
        missing = (
            await call(_lacking, engine, images)
            if engine
            else [f"{image} (no {ENGINE_LABEL} label)" for image in images]
        )
        if missing:
            lacking[str(node.id)] = missing
    return lacking
