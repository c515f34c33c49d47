"""kiln's npm proxy on every swarm node: a sandbox reaches only its own node's proxy.

The single-engine design carried over node by node (:mod:`sandbox.containers.npm_proxy`: the
same container, image, settings, cache volume and replacement rules): the instance's proxy runs on
each node's **host network**, started through that node's engine, and listens only on the
gateway of the node's sandbox bridge. The swarm network is internal (:mod:`sandbox.cluster.
networks`): a sandbox has no route off its node, so the proxy on its own bridge's gateway is the
only one it can reach, and what it installs lands in its node's cache only. Every node's bridge
has the same subnet (``subnet`` of :func:`~sandbox.cluster.networks.ensure_isolated_network`),
so the registry address a sandbox gets in its environment (:func:`node_registry_url`) is the same
wherever the swarm places it.

A node brings its bridge up only while a sandbox of the network runs there, and the proxy can
listen only on an address that exists: so kiln ensures a node's proxy right after the swarm
placed a sandbox there (:func:`ensure_node_proxy`; a running proxy is adopted at the cost of two
inspects). Its listening socket stays when the bridge goes with the node's last sandbox and
serves again when it comes back. kiln cannot connect to a node's gateway from its own host, so
readiness is probed from inside the proxy container, which shares the node's network.

The proxy's upstream is reached from the node: the node needs a route to the registry, or the
host proxy variables (``HTTP(S)_PROXY``, kiln's ``proxy_env``), which stay in the proxy
container as on a single engine.
"""

from __future__ import annotations

import anyio
import docker

from sandbox.cluster.networks import subnet_gateway
from sandbox.containers.npm_proxy import (
    READY_POLL_SECONDS,
    READY_TIMEOUT_SECONDS,
    ensure_proxy_container,
    proxy_container_name,
    registry_url,
)
from sandbox.docker_boundary import call
from sandbox.errors import SandboxError, SandboxUnavailable
from sandbox.settings import SandboxSettings

# Connects to argv[1]:argv[2]; exit 0 once it accepts (run by the proxy image's node).
CONNECT_PROBE = (
    "const s=require('net').connect(+process.argv[2],process.argv[1]);"
    "s.setTimeout(2000,()=>process.exit(3));s.on('connect',()=>process.exit(0));"
    "s.on('error',()=>process.exit(2))"
)


def node_registry_url(subnet: str, port: int) -> str:
    """The registry URL of every node's proxy: the gateway of the nodes' common ``subnet``."""
    return registry_url(subnet_gateway(subnet), port)


async def ensure_node_proxy(node: docker.DockerClient, settings: SandboxSettings) -> str:
    """Start the instance's proxy on the node engine ``node``, or adopt the running one, once a
    sandbox runs there (module docstring); the registry URL that node's sandboxes use."""
    addresses, started = await ensure_proxy_container(node, settings)
    if started:
        await wait_listening_on_node(node, settings.instance, addresses[0], settings.npm_proxy_port)
    return registry_url(addresses[0], settings.npm_proxy_port)


async def wait_listening_on_node(
    node: docker.DockerClient, instance: str, host: str, port: int
) -> None:
    """Return once the node's proxy accepts connections on ``host:port``, probed from inside
    the proxy's container; :class:`SandboxUnavailable` after ``READY_TIMEOUT_SECONDS``."""
    container = await call(node.containers.get, proxy_container_name(instance))
    last = "no answer"
    with anyio.move_on_after(READY_TIMEOUT_SECONDS):
        while True:
            try:
                probe = ["node", "-e", CONNECT_PROBE, host, str(port)]
                result = await call(container.exec_run, probe)
                if result.exit_code == 0:
                    return
                last = f"probe exit {result.exit_code}"
            except SandboxError as exc:  # restarting: the exec is refused until it runs
                last = str(exc)
            await anyio.sleep(READY_POLL_SECONDS)
    raise SandboxUnavailable(
        f"the npm registry proxy of node engine {node.api.base_url!r} did not listen on "
        f"{host}:{port} in time ({last})"
    )
