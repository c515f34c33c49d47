"""The preview relay's port map: one block of ports per dev port, one port per bridge address
(the relay serving real previews on real nodes: tests/cluster/test_swarm_contract.py)."""

from __future__ import annotations

import random
import secrets
import socket
import struct
from pathlib import Path

import anyio
import docker
import pytest

from sandbox.cluster import preview_relay
from sandbox.cluster.preview_relay import (
    dev_ports,
    ensure_preview_relay,
    relay_argv,
    relay_container_name,
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


@pytest.mark.docker
@pytest.mark.anyio
async def test_a_port_an_outgoing_connection_holds_is_named_and_tried_again(
    docker_client: docker.DockerClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node's outgoing connection can hold a relay port (CI: at 42000, among Linux's
    ephemeral ports, a relay never listened). The refusal names the port; the relay keeps its
    other ports served and listens on that one once it is free (before, its process died on the
    first busy port, and the refusal said only that time ran out)."""
    monkeypatch.setattr(preview_relay, "READY_SECONDS", 3.0)
    instance = f"kiln-test-relay-{secrets.token_hex(3)}"
    subnet, base = "10.214.0.0/29", random.randrange(20_000, 30_000)
    held, other = (relay_port(base, subnet, f"10.214.0.{i}", dev_ports()[0]) for i in (3, 4))
    listener = socket.create_server(("127.0.0.1", 0))
    holder = socket.socket()
    holder.bind(("127.0.0.1", held))  # an outgoing connection from the relay's port
    holder.connect(listener.getsockname())
    try:
        busy = f"cannot listen on 127.0.0.1:{held} \\(EADDRINUSE\\)"
        with pytest.raises(SandboxUnavailable, match=f"did not listen within 3 s: .*{busy}"):
            await ensure_preview_relay(docker_client, instance, "127.0.0.1", base, subnet)
        stream = await anyio.connect_tcp("127.0.0.1", other)
        await stream.aclose()
        # Reset, not closed: a closed connection's TIME_WAIT would hold the port 60 s more.
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        holder.close()
        monkeypatch.setattr(preview_relay, "READY_SECONDS", 15.0)
        assert not await ensure_preview_relay(docker_client, instance, "127.0.0.1", base, subnet)
        stream = await anyio.connect_tcp("127.0.0.1", held)
        await stream.aclose()
    finally:
        holder.close()
        listener.close()
        await remove_preview_relay(docker_client, instance)


@pytest.mark.docker
@pytest.mark.anyio
async def test_ports_among_the_ephemeral_ones_are_warned_of(
    docker_client: docker.DockerClient,
) -> None:
    """Where an outgoing connection may take a relay port, the relay says so at start."""
    instance = f"kiln-test-relay-{secrets.token_hex(3)}"
    low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    inside, below = random.randrange(low, high - 100), random.randrange(20_000, low - 100)
    try:
        for base, warned in ((below, False), (inside, True)):
            await ensure_preview_relay(docker_client, instance, "127.0.0.1", base, "10.0.0.0/29")
            relay = docker_client.containers.get(relay_container_name(instance))
            said = relay.logs(stdout=False, stderr=True).decode()
            assert ("among the node's ephemeral ports" in said) is warned, said
    finally:
        await remove_preview_relay(docker_client, instance)
