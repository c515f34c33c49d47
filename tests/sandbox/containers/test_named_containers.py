"""kiln's named helper containers on the real engine: started once, adopted while their
configuration and image build stay, started anew when either changed or the helper stopped,
the loser of a start race adopting the winner's, a missing image named in words."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from typing import Any

import anyio
import docker
import pytest

from sandbox.containers.labels import shared_labels
from sandbox.containers.named_containers import (
    configured_as,
    ensure_named_container,
    named_container,
    remove_named_container,
)
from sandbox.docker_boundary import call
from sandbox.errors import ImageMissing
from sandbox.images.builder import PROXY_IMAGE

pytestmark = [pytest.mark.anyio, pytest.mark.docker]
CONFIG = "kiln.test-helper.config"


@pytest.fixture
def name(docker_client: docker.DockerClient) -> Iterator[str]:
    """A helper's name; whatever the test left of it is removed."""
    named = f"kiln-test-helper-{secrets.token_hex(4)}"
    yield named
    with contextlib.suppress(docker.errors.NotFound):
        docker_client.containers.get(named).remove(force=True)


def helper(name: str, digest: str, image: str = PROXY_IMAGE) -> dict[str, Any]:
    """A sleeping helper with no network, configured as ``digest``."""
    return {
        "image": image,
        "entrypoint": ["sleep", "infinity"],
        "command": [],
        "name": name,
        "detach": True,
        "network_mode": "none",
        "user": "1000:1000",
        "cap_drop": ["ALL"],
        "labels": {**shared_labels("test-helpers"), CONFIG: digest},
    }


async def test_a_helper_is_started_once_then_adopted(
    docker_client: docker.DockerClient, name: str
) -> None:
    first, started = await ensure_named_container(docker_client, helper(name, "a"), CONFIG, "here")
    assert started
    again, started_again = await ensure_named_container(
        docker_client, helper(name, "a"), CONFIG, "here"
    )
    assert (again.id, started_again) == (first.id, False)
    assert configured_as(again, CONFIG, "a")
    assert not configured_as(again, CONFIG, "b")


@pytest.mark.parametrize(
    "change", [pytest.param("config", id="config"), pytest.param("stopped", id="stopped")]
)
async def test_a_helper_of_another_configuration_or_stopped_is_started_anew(
    docker_client: docker.DockerClient, name: str, change: str
) -> None:
    first, _ = await ensure_named_container(docker_client, helper(name, "a"), CONFIG, "here")
    if change == "stopped":
        await call(first.stop, timeout=0)
    digest = "b" if change == "config" else "a"
    second, started = await ensure_named_container(
        docker_client, helper(name, digest), CONFIG, "here"
    )
    assert started
    assert second.id != first.id
    await call(second.reload)
    assert configured_as(second, CONFIG, digest)


async def test_a_helper_of_another_image_build_is_started_anew(
    docker_client: docker.DockerClient, name: str
) -> None:
    image = f"kiln/test-helper:{name.rsplit('-', 1)[1]}"
    docker_client.images.get(PROXY_IMAGE).tag(image)
    try:
        first, _ = await ensure_named_container(
            docker_client, helper(name, "a", image), CONFIG, "here"
        )
        rebuilt = await call(first.commit, repository=image.split(":")[0], tag=image.split(":")[1])
        second, started = await ensure_named_container(
            docker_client, helper(name, "a", image), CONFIG, "here"
        )
        assert started
        assert second.attrs["Image"] == rebuilt.id != first.attrs["Image"]
    finally:
        await remove_named_container(docker_client, name)
        docker_client.images.remove(image, force=True)


async def test_two_starts_at_once_end_with_one_helper(
    docker_client: docker.DockerClient, name: str
) -> None:
    found: list[tuple[str, bool]] = []

    async def ensure() -> None:
        container, started = await ensure_named_container(
            docker_client, helper(name, "a"), CONFIG, "here"
        )
        found.append((container.id, started))

    async with anyio.create_task_group() as group:
        group.start_soon(ensure)
        group.start_soon(ensure)
    assert len({container for container, _started in found}) == 1, found
    assert any(started for _container, started in found)


async def test_a_missing_image_is_named_with_where_it_is_missing(
    docker_client: docker.DockerClient, name: str
) -> None:
    missing = "kiln/no-such-helper-image:never-built"
    with pytest.raises(ImageMissing, match=f"node 'n1' has no image {missing!r}"):
        await ensure_named_container(docker_client, helper(name, "a", missing), CONFIG, "node 'n1'")
    assert await named_container(docker_client, name) is None


async def test_removing_a_helper_says_whether_there_was_one(
    docker_client: docker.DockerClient, name: str
) -> None:
    await ensure_named_container(docker_client, helper(name, "a"), CONFIG, "here")
    assert await remove_named_container(docker_client, name)
    assert not await remove_named_container(docker_client, name)
