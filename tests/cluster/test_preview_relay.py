"""The preview relay's port map: one block of ports per dev port, one port per bridge address
(the relay serving real previews on real nodes: tests/cluster/test_swarm_contract.py)."""

from __future__ import annotations

import random
import secrets
from collections.abc import Iterator

import anyio
import docker
import pytest

from sandbox.cluster.preview_relay import (
    dev_ports,
    ensure_preview_relay,
    relay_argv,
    relay_port,
    remove_preview_relay,
)
from sandbox.errors import SandboxUnavailable

SUBNET = "10.214.0.0/24"


def test_each_address_and_dev_port_has_its_own_relay_port() -> None:
    ports = dev_ports()
    assert ports == sorted(set(ports))
    assert 5173 in ports
    seen = {
        relay_port(42000, SUBNET, f"10.214.0.{i}", port) for i in range(1, 255) for port in ports
    }
    assert len(seen) == 254 * len(ports)
    assert min(seen) == 42001
    assert max(seen) == 42000 + 256 * len(ports) - 2


@pytest.mark.parametrize(
    ("address", "port"),
    [
        pytest.param("10.214.0.0", 5173, id="the-network-address"),
        pytest.param("10.214.0.255", 5173, id="the-broadcast-address"),
        pytest.param("10.215.0.3", 5173, id="off-the-subnet"),
        pytest.param("10.214.0.3", 22, id="no-templates-port"),
    ],
)
def test_what_no_relay_port_serves_is_refused_in_words(address: str, port: int) -> None:
    with pytest.raises(SandboxUnavailable, match=f"no preview relay for {address}:{port}"):
        relay_port(42000, SUBNET, address, port)


def test_the_relay_is_told_its_address_ports_and_subnet() -> None:
    argv = relay_argv("198.18.0.10", 42000, SUBNET)
    assert argv[:2] == ["node", "-e"]
    assert argv[3:] == ["198.18.0.10", "42000", str(10 << 24 | 214 << 16), "256"] + [
        str(port) for port in dev_ports()
    ]


@pytest.fixture
def docker_client() -> Iterator[docker.DockerClient]:
    client = docker.from_env()
    yield client
    client.close()


@pytest.mark.docker
@pytest.mark.anyio
async def test_a_relay_handed_out_listens_on_every_port(docker_client: docker.DockerClient) -> None:
    """The relay is ready once started: every port accepts (before, a preview address handed
    out as the relay booted was refused: CI's swarm contract test)."""
    instance = f"kiln-test-relay-{secrets.token_hex(3)}"
    subnet, base = "10.214.0.0/28", random.randrange(20_000, 30_000)  # below ephemeral ports
    try:
        assert await ensure_preview_relay(docker_client, instance, "127.0.0.1", base, subnet)
        for port in dev_ports():
            last = relay_port(base, subnet, "10.214.0.14", port)
            stream = await anyio.connect_tcp("127.0.0.1", last)  # refused: not ready
            await stream.aclose()
        assert not await ensure_preview_relay(docker_client, instance, "127.0.0.1", base, subnet)
    finally:
        await remove_preview_relay(docker_client, instance)
