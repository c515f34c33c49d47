"""A node's leftovers swept (``sweep_node``), on a real engine (the host's: the sweep speaks to one
node's engine, whichever it is): the workspace volumes of sandboxes kiln does not know go (with
their subvolume), known ones, shared ones, another instance's and one still in use stay; a render
browser whose sandbox container is gone goes, one beside a live sandbox stays."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import docker
import pytest

from sandbox.cluster import node_sweep
from sandbox.cluster.node_sweep import sweep_node
from sandbox.containers.labels import INSTANCE_LABEL, SHARED, shared_labels
from sandbox.images.builder import PROXY_IMAGE
from sandbox.preview.render_check import RENDER_ROLE, RENDER_ROLE_LABEL
from sandbox.settings import LABEL

pytestmark = [pytest.mark.anyio, pytest.mark.docker]


@pytest.fixture
def instance(docker_client: docker.DockerClient) -> Iterator[str]:
    """An instance of the test's own; whatever is left of it is removed."""
    name = f"test-sweep-{secrets.token_hex(3)}"
    yield name
    for other in (name, f"{name}-other"):
        wanted = {"label": f"{INSTANCE_LABEL}={other}"}
        for container in docker_client.containers.list(all=True, filters=wanted):
            container.remove(force=True)
        for volume in docker_client.volumes.list(filters=wanted):
            volume.remove(force=True)


def volume(client: docker.DockerClient, instance: str, sandbox_id: str) -> str:
    """A workspace volume of ``sandbox_id``."""
    name = f"kiln-ws-{instance}-{sandbox_id}"
    client.volumes.create(name, labels={LABEL: sandbox_id, INSTANCE_LABEL: instance})
    return name


def sleeper(
    client: docker.DockerClient, instance: str, **kwargs: object
) -> docker.models.containers.Container:
    """A sleeping container of the instance (a sandbox, or a browser with ``network_mode``)."""
    return client.containers.run(
        PROXY_IMAGE,
        entrypoint=["sleep", "infinity"],
        command=[],
        detach=True,
        network_mode=kwargs.pop("network_mode", "none"),
        **kwargs,  # type: ignore[arg-type]
    )


async def test_only_what_no_known_sandbox_uses_is_swept(
    docker_client: docker.DockerClient, instance: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(node_sweep, "IN_USE_WAIT_SECONDS", 0.5)  # the holder stays: not waited
    unknown = volume(docker_client, instance, "gone")
    kept = {
        volume(docker_client, instance, "known"),
        volume(docker_client, instance, SHARED),
        volume(docker_client, f"{instance}-other", "gone"),
    }
    in_use = volume(docker_client, instance, "dying")
    holder = sleeper(
        docker_client,
        instance,
        volumes={in_use: {"bind": "/w", "mode": "rw"}},
        labels={INSTANCE_LABEL: instance},
    )
    subvolumes: list[str] = []

    async def remove_subvolume(name: str) -> bool:
        subvolumes.append(name)
        return True

    async def known() -> set[str]:
        return {"known"}

    removed = await sweep_node(docker_client, instance, known, remove_subvolume)
    assert removed == [f"volume {unknown}", f"disk {unknown}"]
    assert subvolumes == [unknown]
    left = {v.name for v in docker_client.volumes.list()}
    assert unknown not in left
    assert kept | {in_use} <= left
    holder.remove(force=True)  # its task's container gone: the next pass takes the volume
    assert await sweep_node(docker_client, instance, known) == [f"volume {in_use}"]


async def test_a_browser_whose_sandbox_is_gone_is_swept_one_beside_a_live_one_stays(
    docker_client: docker.DockerClient, instance: str
) -> None:
    browser_labels = {**shared_labels(instance), RENDER_ROLE_LABEL: RENDER_ROLE}
    live, lost = (sleeper(docker_client, instance, labels={INSTANCE_LABEL: instance}) for _ in "ab")
    beside_live = sleeper(
        docker_client, instance, network_mode=f"container:{live.id}", labels=browser_labels
    )
    beside_lost = sleeper(
        docker_client, instance, network_mode=f"container:{lost.id}", labels=browser_labels
    )
    lost.remove(force=True)

    async def known() -> set[str]:
        return set()

    removed = await sweep_node(docker_client, instance, known)
    assert removed == [f"container {beside_lost.name}"]
    left = {c.id for c in docker_client.containers.list(all=True)}
    assert beside_live.id in left
    assert beside_lost.id not in left
