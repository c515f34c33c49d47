"""The preview relay's port map: one block of ports per dev port, one port per bridge address
(the relay serving real previews on real nodes: tests/cluster/test_swarm_contract.py)."""

from __future__ import annotations

import pytest

from sandbox.cluster.preview_relay import dev_ports, relay_argv, relay_port
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
