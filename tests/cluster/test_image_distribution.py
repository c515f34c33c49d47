"""sandbox.cluster.image_distribution on real swarm nodes: an image of kiln's engine reaches every
node that lacks it or holds another build, streamed, in parallel, ID-checked, and a node that has
it is skipped. The images are small ones this module makes on the host engine (a few chunks of
random bytes each, removed after), so the module costs seconds, not a sandbox image's load."""

from __future__ import annotations

import io
import secrets
import tarfile
from collections.abc import Iterator
from contextlib import closing, suppress

import docker
import docker.errors
import pytest

from sandbox.cluster.image_distribution import (
    CHUNK_BYTES,
    copy_image,
    ensure_images_on_nodes,
    swarm_node_engines,
)
from sandbox.errors import ImageMissing, SandboxUnavailable
from tests.cluster.nodes import Cluster, Node

pytestmark = pytest.mark.anyio
REPOSITORY = "kiln-test/distribution"


def made_image(client: docker.DockerClient, tag: str, size: int) -> str:
    """Import a one-file image of ``size`` random bytes as ``REPOSITORY:tag``; its ID."""
    data, payload = io.BytesIO(), secrets.token_bytes(size)
    with tarfile.open(fileobj=data, mode="w") as tar:
        member = tarfile.TarInfo("payload")
        member.size = len(payload)
        tar.addfile(member, io.BytesIO(payload))
    client.api.import_image_from_data(data.getvalue(), repository=REPOSITORY, tag=tag)
    return str(client.images.get(f"{REPOSITORY}:{tag}").id)


def remove_from(node: Node, image: str) -> None:
    """Remove ``image`` from ``node`` (gone already is fine)."""
    with closing(node.client()) as client, suppress(docker.errors.ImageNotFound):
        client.images.remove(image, force=True)


def image_on(node: Node, image: str) -> str | None:
    """The ID of ``image`` on ``node``; ``None``: it has none."""
    with closing(node.client()) as client:
        try:
            return str(client.images.get(image).id)
        except docker.errors.ImageNotFound:
            return None


@pytest.fixture(scope="module")
def host() -> Iterator[docker.DockerClient]:
    """kiln's own engine (the host's)."""
    client = docker.from_env()
    yield client
    client.close()


@pytest.fixture(scope="module")
def images(host: docker.DockerClient, swarm_nodes: Cluster) -> Iterator[dict[str, str]]:
    """Two images of this module on the host engine (``image -> ID``), several chunks each;
    removed from the host and every node after."""
    tag = secrets.token_hex(4)
    made = {
        f"{REPOSITORY}:{tag}-a": made_image(host, f"{tag}-a", 3 * CHUNK_BYTES),
        f"{REPOSITORY}:{tag}-b": made_image(host, f"{tag}-b", CHUNK_BYTES // 2),
    }
    yield made
    for image in made:
        host.images.remove(image, force=True)
        for node in swarm_nodes.nodes:
            remove_from(node, image)


@pytest.fixture(scope="module")
def manager(swarm_nodes: Cluster) -> Iterator[docker.DockerClient]:
    """A client of the swarm manager's engine."""
    client = swarm_nodes.manager.client()
    yield client
    client.close()


def node_id(swarm_nodes: Cluster, manager: docker.DockerClient, node: Node) -> str:
    """The swarm node ID of ``node`` (told by its address)."""
    for swarm_node in manager.nodes.list():
        if swarm_node.attrs["Status"]["Addr"] == node.address:
            return str(swarm_node.id)
    raise AssertionError(f"{node.name} is not in the swarm")


async def test_images_reach_every_node_once_with_the_hosts_ids(
    host: docker.DockerClient,
    manager: docker.DockerClient,
    images: dict[str, str],
    swarm_nodes: Cluster,
) -> None:
    every_node = sorted(node_id(swarm_nodes, manager, n) for n in swarm_nodes.nodes)
    copied = await ensure_images_on_nodes(host, manager, list(images))
    assert {image: sorted(nodes) for image, nodes in copied.items()} == dict.fromkeys(
        images, every_node
    )
    for node in swarm_nodes.nodes:
        assert {image: image_on(node, image) for image in images} == images
    # Idempotent: nodes that have the host's build are skipped.
    assert await ensure_images_on_nodes(host, manager, list(images)) == {}


async def test_only_nodes_lacking_an_image_or_holding_another_build_get_it(
    host: docker.DockerClient,
    manager: docker.DockerClient,
    images: dict[str, str],
    swarm_nodes: Cluster,
) -> None:
    image = next(iter(images))
    await ensure_images_on_nodes(host, manager, [image])
    lacking, other_build, *_ = swarm_nodes.nodes
    remove_from(lacking, image)
    with closing(other_build.client()) as client:
        other_id = made_image(client, image.rsplit(":", 1)[1], 1024)  # same name, another build
    assert other_id != images[image]
    copied = await ensure_images_on_nodes(host, manager, [image])
    expected = sorted(node_id(swarm_nodes, manager, n) for n in (lacking, other_build))
    assert sorted(copied[image]) == expected
    assert {image_on(node, image) for node in swarm_nodes.nodes} == {images[image]}


async def test_a_node_ending_with_another_id_is_an_error_in_words(
    host: docker.DockerClient, manager: docker.DockerClient, images: dict[str, str]
) -> None:
    image = next(iter(images))
    targets = (await swarm_node_engines(manager))[:1]
    with pytest.raises(SandboxUnavailable, match="after loading, not kiln's build 'sha256:0'"):
        await copy_image(host, image, "sha256:0", targets)


async def test_an_image_kilns_engine_lacks_is_named(
    host: docker.DockerClient, manager: docker.DockerClient
) -> None:
    missing = f"{REPOSITORY}:absent-{secrets.token_hex(4)}"
    with pytest.raises(ImageMissing, match=f"no image '{missing}'.*kiln images build"):
        await ensure_images_on_nodes(host, manager, [missing])
