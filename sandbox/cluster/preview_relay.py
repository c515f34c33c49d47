"""The preview on any node: a relay per node from kiln to a sandbox's dev port on that node.

A sandbox's dev server listens on its address on its node's bridge, which only that node reaches
(:mod:`sandbox.cluster.networks`). kiln's preview proxy dials a host and a port
(:class:`~sandbox.backends.contract.PreviewAddress`), so each node runs one relay container of
the instance on its **host network** (like its npm proxy, :mod:`sandbox.cluster.node_proxy`),
listening on the node's own address (the swarm's ``Status.Addr``, which kiln's hosts reach):

- one listening port per (dev port, bridge address): ``base + k * size + i`` forwards to the
  ``i``-th address of the nodes' common sandbox subnet (of ``size`` addresses) on the ``k``-th
  dev port of kiln's templates (:func:`relay_port`). The map is fixed arithmetic, so the relay
  needs no state, no control channel and no update when sandboxes come and go: a port forwards
  to whichever sandbox holds that address on that node now (a TCP splice, so Vite's HTTP and
  its HMR WebSocket pass unchanged and the preview proxy's rewriting stays as it is);
- it refuses connections from the sandbox subnet: a sandbox reaches its node's addresses (the
  gateway for the npm proxy), and must not reach another sandbox's dev server through the relay.
  Anything else is the node firewall's to keep out (``docs/cluster.md``: the relay's port range
  open to kiln's hosts only).

A port an outgoing connection of the node already holds cannot be listened on: the relay says
so on its stderr and tries that port again every second, and warns at start when its ports lie
among the node's ephemeral ports (``net.ipv4.ip_local_port_range``, 32768-60999 on Linux) and
are not reserved (``net.ipv4.ip_local_reserved_ports``); kiln's default first port is below
them. A relay that does not listen in time is refused with what it said.

The relay runs ``node`` of kiln's npm proxy image (already on every node), as uid 1000 with no
capabilities; a relay of another configuration is replaced. Chosen over the alternatives in
``docs/cluster.md`` (the ingress routing mesh needs IPVS; host-mode publishing cannot carry an
``--internal`` network; an exec tunnel per browser connection costs an exec each).
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Sequence
from typing import Any

import anyio
import docker

from sandbox.containers.labels import ROLE_LABEL, shared_labels
from sandbox.containers.named_containers import ensure_named_container, remove_named_container
from sandbox.docker_boundary import call
from sandbox.errors import SandboxUnavailable
from sandbox.images.builder import PROXY_IMAGE
from sandbox.images.templates import TEMPLATES

RELAY_ROLE = "preview-relay"
CONFIG_LABEL = "kiln.relay.config"
# argv: listen host, first port, subnet's first address (as a number), subnet size, dev ports.
RELAY_SCRIPT = r"""
const net = require('net');
const fs = require('fs');
const [host, base, first, size, ...ports] = process.argv.slice(1).map((v, i) => i ? +v : v);
const num = (a) => a.replace(/^::ffff:/, '').split('.').reduce((n, o) => n * 256 + +o, 0);
const ip = (n) => [24, 16, 8, 0].map((s) => Math.floor(n / 2 ** s) % 256).join('.');
const inSubnet = (a) => { const n = num(a); return n >= first && n < first + size; };
const sysctl = (name) => {
  try { return fs.readFileSync('/proc/sys/net/ipv4/' + name, 'utf8').trim(); } catch { return ''; }
};
const warnEphemeral = (last) => {
  const [low, high] = sysctl('ip_local_port_range').split(/\s+/).map(Number);
  const reserved = sysctl('ip_local_reserved_ports').split(',').filter(Boolean)
    .map((r) => r.split('-').map(Number));
  let exposed = 0;
  for (let p = Math.max(base, low); p <= Math.min(last, high); p++) {
    if (!reserved.some(([a, b = a]) => p >= a && p <= b)) exposed++;
  }
  if (exposed) console.error(`kiln-relay: ${exposed} of its ports ${base}..${last} are among ` +
    `the node's ephemeral ports ${low}..${high} (net.ipv4.ip_local_port_range), where an ` +
    `outgoing connection can hold one: a KILN_SWARM_RELAY_PORT below ${low}, or the ports ` +
    `in net.ipv4.ip_local_reserved_ports`);
};
let pending = ports.length * (size - 2);
const listening = () => { if (--pending === 0) console.log('kiln-relay: listening'); };
const listen = (server, port, tried) => {
  const retry = (err) => {
    if (!tried) console.error(`kiln-relay: cannot listen on ${host}:${port} (${err.code}), ` +
      'trying again every second');
    setTimeout(() => listen(server, port, true), 1000);
  };
  server.once('error', retry);
  server.listen(port, host, () => { server.off('error', retry); listening(); });
};
warnEphemeral(base + ports.length * size - 1);
ports.forEach((port, k) => {
  for (let i = 1; i < size - 1; i++) {
    const target = ip(first + i);
    listen(net.createServer((client) => {
      if (inSubnet(client.remoteAddress || '0.0.0.0')) return client.destroy();
      const upstream = net.connect(port, target);
      client.pipe(upstream); upstream.pipe(client);
      upstream.on('error', () => client.destroy()); client.on('error', () => upstream.destroy());
    }), base + k * size + i, false);
  }
});
"""
# What the relay prints once every port listens (hundreds of them: a second or more on a loaded
# node), and how long kiln waits for it before a preview address is handed out.
READY_LINE = b"kiln-relay: listening"
READY_SECONDS = 60.0
READY_POLL_SECONDS = 0.1
READY_TAIL_LINES = 3
# Relay ports are Linux ports: the highest one must stay below 65536.
MAX_PORT = 65535


def relay_container_name(instance: str) -> str:
    """The relay container's name on every node."""
    return f"kiln-relay-{instance}"


def dev_ports() -> list[int]:
    """kiln's templates' dev ports, in a fixed order (each has a block of relay ports)."""
    return sorted({template.dev_port for template in TEMPLATES.values()})


def relay_port(base: int, subnet: str, address: str, port: int) -> int:
    """The relay port on a node forwarding to ``address:port`` on its bridge (module
    docstring); :class:`SandboxUnavailable` for a port no template has or an address off
    ``subnet``."""
    network = ipaddress.ip_network(subnet)
    index = int(ipaddress.ip_address(address)) - int(network.network_address)
    ports = dev_ports()
    if port not in ports or not 0 < index < network.num_addresses - 1:
        raise SandboxUnavailable(
            f"no preview relay for {address}:{port} (dev ports {ports!r}, subnet {subnet!r})"
        )
    return base + ports.index(port) * network.num_addresses + index


def check_port_range(base: int, subnet: str) -> None:
    """``ValueError`` in words when the relay's ports for ``subnet`` would pass 65535."""
    last = base + len(dev_ports()) * ipaddress.ip_network(subnet).num_addresses - 1
    if last > MAX_PORT:
        raise ValueError(
            f"preview relay ports {base}..{last} for subnet {subnet!r} pass {MAX_PORT}: "
            "a lower first port or a smaller subnet"
        )


def relay_argv(host: str, base: int, subnet: str) -> list[str]:
    """The relay's command line (module docstring)."""
    network = ipaddress.ip_network(subnet)
    numbers = [int(network.network_address), network.num_addresses, *dev_ports()]
    return ["node", "-e", RELAY_SCRIPT, host, str(base), *map(str, numbers)]


def relay_run_kwargs(instance: str, argv: Sequence[str]) -> dict[str, Any]:
    """``containers.run`` arguments of the relay on a node's host network."""
    digest = hashlib.sha256("\0".join(argv).encode()).hexdigest()
    return {
        "image": PROXY_IMAGE,
        "entrypoint": list(argv),
        "command": [],
        "name": relay_container_name(instance),
        "detach": True,
        "network_mode": "host",
        "user": "1000:1000",
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "read_only": True,
        "init": True,
        "mem_limit": "128m",
        "restart_policy": {"Name": "unless-stopped"},
        "labels": {**shared_labels(instance), ROLE_LABEL: RELAY_ROLE, CONFIG_LABEL: digest},
    }


async def ensure_preview_relay(
    node: docker.DockerClient, instance: str, host: str, base: int, subnet: str
) -> bool:
    """The instance's relay on the node engine ``node``, listening on ``host`` (the node's
    address), started or adopted, once every port of it listens (a sandbox's preview address
    would be refused before); whether it was started now."""
    kwargs = relay_run_kwargs(instance, relay_argv(host, base, subnet))
    where = f"node engine {node.api.base_url!r}"
    relay, started = await ensure_named_container(node, kwargs, CONFIG_LABEL, where)
    await _wait_listening(relay)  # one adopted may have been started by another process now
    return started


async def _wait_listening(relay: Any) -> None:
    """Poll the relay's output until it says every port listens; ``SandboxUnavailable``
    after :data:`READY_SECONDS`."""
    with anyio.move_on_after(READY_SECONDS):
        while READY_LINE not in await call(relay.logs, stdout=True, stderr=False):
            await anyio.sleep(READY_POLL_SECONDS)
        return
    said = await call(relay.logs, stdout=False, stderr=True, tail=READY_TAIL_LINES)
    why = "; ".join(line for line in said.decode(errors="replace").splitlines() if line.strip())
    raise SandboxUnavailable(
        f"the preview relay {relay.name!r} did not listen within {READY_SECONDS:g} s"
        + (f": {why}" if why else "")
    )


async def remove_preview_relay(node: docker.DockerClient, instance: str) -> bool:
    """Remove the instance's relay from the node; ``False`` if it had none."""
    return await remove_named_container(node, relay_container_name(instance))
