"""kiln's npm registry proxy: the only thing a sandbox can reach, and the only way npm gets out.

One long-lived Verdaccio container per kiln **instance** (image ``kiln/npm-proxy``, built by
``kiln images build`` from ``images/npm-proxy``). Per instance, not per host, because it listens
on the gateway address of its instance's sandbox bridge, and its lifetime follows that bridge
(parking removes both; ``kiln sandbox sweep`` removes everything of an instance).

Topology. The proxy runs on the **host network** and listens only on the gateway address(es) of
the instance's internal sandbox network. Docker gives that address to the bridge on the host. A
sandbox (on an ``internal`` network: Docker forwards nothing off the bridge, though the sandbox
has a default route via the gateway) reaches host addresses only through the host's INPUT chain,
which ``scripts/setup.sh`` opens for the proxy's port on the address of the bridge the packet
came in on only (``INPUT -i kiln+ -p tcp --dport <port> -m addrtype --dst-type LOCAL
--limit-iface-in -j ACCEPT``, before the SYN drop that keeps sandboxes off every other host port).
So a sandbox reaches its own instance's proxy and not another instance's, whose gateway is a
host address too. The internet, the LAN and link-local addresses stay out of reach, during
installs too: sandboxes never join another network.

What sandboxes talk to is kiln's front (``images/npm-proxy/front.js``), with Verdaccio behind it
on a unix socket in the container:

- only installs' requests pass (GET/HEAD of a packument or a tarball); listings (``/-/all``,
  ``/-/v1/search``), user, token and write endpoints answer 403 in words;
- packuments announce the upstream's tarball URLs, so the ``resolved`` fields npm writes into
  ``package-lock.json`` are public (``https://registry.npmjs.org/...``), never the gateway's
  private address; npm in the sandbox fetches them through the proxy anyway
  (``--replace-registry-host=always``, :mod:`sandbox.execution.install_queue`);
- the cache is bounded (``KILN_NPM_PROXY_CACHE``): past the bound the least recently used
  packages are removed down to 80 % of it; the front answers its use to the host only
  (:func:`cache_url`, shown by ``kiln doctor``).

Upstream. The proxy's single uplink is the configured registry (``KILN_NPM_REGISTRY``, else
npmjs), reached with the host's ``HTTP(S)_PROXY`` variables and the configured CA bundle: those
credentials live in this container only. Publishing, unpublishing and adding users are refused
for everyone, so what a sandbox can write to the shared cache is nothing; the cache is the
proxy's named volume. npm in the sandbox still checks every tarball against the packument's
``integrity``, which Verdaccio passes through from upstream.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import anyio
import docker

from sandbox.containers.hardening import CA_BUNDLE_PATH, DEFAULT_NPM_REGISTRY
from sandbox.containers.labels import ROLE_LABEL, shared_labels
from sandbox.containers.named_containers import named_container
from sandbox.docker_boundary import call
from sandbox.env_settings import size_bytes
from sandbox.errors import ImageMissing, SandboxError, SandboxNotFound, SandboxUnavailable
from sandbox.images.builder import PROXY_IMAGE
from sandbox.settings import SandboxSettings

PROXY_ROLE_LABEL = ROLE_LABEL
PROXY_ROLE = "npm-proxy"
# A digest of the environment the proxy was started with: a changed setting (a proxy variable
# added or dropped too) replaces the container. A digest, as the values may hold credentials.
CONFIG_LABEL = "kiln.npm-proxy.config"
STORAGE_PATH = "/verdaccio/storage"
LISTEN_ENV = "KILN_PROXY_LISTEN"
UPSTREAM_ENV = "KILN_PROXY_UPSTREAM"
CACHE_ENV = "KILN_PROXY_CACHE_BYTES"
READY_TIMEOUT_SECONDS = 30.0
_MISSING = f"the npm registry proxy image {PROXY_IMAGE!r} is missing: run `kiln images build`"
READY_POLL_SECONDS = 0.2


def proxy_container_name(instance: str) -> str:
    """The proxy container of ``instance`` (one per instance: see the module docstring)."""
    return f"kiln-npm-proxy-{instance}"


def proxy_volume_name(instance: str) -> str:
    """The named volume holding the proxy's cache (survives the container)."""
    return f"kiln-npm-proxy-{instance}"


def gateways(network_attrs: dict[str, Any]) -> list[str]:
    """The IPv4 gateway addresses of a Docker network (from ``network.attrs``)."""
    configs = (network_attrs.get("IPAM") or {}).get("Config") or []
    return [str(c["Gateway"]) for c in configs if c.get("Gateway") and ":" not in c["Gateway"]]


def registry_url(gateway: str, port: int) -> str:
    """The registry URL sandboxes use: the proxy on their bridge's gateway."""
    return f"http://{gateway}:{port}/"


def cache_url(gateway: str, port: int) -> str:
    """Where the front answers its cache use (to requests from the host only)."""
    return f"http://{gateway}:{port}/-/kiln/cache"


def listen_addresses(addresses: list[str], port: int) -> str:
    """The proxy's listen setting: every gateway address with the port, space-separated."""
    return " ".join(f"{address}:{port}" for address in addresses)


def proxy_environment(settings: SandboxSettings, listen: str) -> dict[str, str]:
    """The proxy container's environment: where to listen, the upstream and how to reach it."""
    env = {
        LISTEN_ENV: listen,
        UPSTREAM_ENV: settings.npm_registry or DEFAULT_NPM_REGISTRY,
        CACHE_ENV: str(size_bytes(settings.npm_proxy_cache)),
        **settings.proxy_env,  # host proxies (maybe with credentials): for the proxy only
    }
    if settings.ca_bundle is not None:
        env["NODE_EXTRA_CA_CERTS"] = CA_BUNDLE_PATH
    return env


def config_digest(environment: dict[str, str]) -> str:
    """A digest of the proxy's environment (labelled on its container)."""
    return hashlib.sha256(json.dumps(environment, sort_keys=True).encode()).hexdigest()


def proxy_run_kwargs(settings: SandboxSettings, listen: str) -> dict[str, Any]:
    """Keyword arguments for ``client.containers.run`` that start the instance's proxy."""
    environment = proxy_environment(settings, listen)
    volumes = {proxy_volume_name(settings.instance): {"bind": STORAGE_PATH, "mode": "rw"}}
    if settings.ca_bundle is not None:
        volumes[str(Path(settings.ca_bundle).resolve())] = {"bind": CA_BUNDLE_PATH, "mode": "ro"}
    return {
        "image": PROXY_IMAGE,
        "name": proxy_container_name(settings.instance),
        "detach": True,
        "network_mode": "host",
        "user": "1000:1000",
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "init": True,
        "mem_limit": "512m",
        "restart_policy": {"Name": "unless-stopped"},
        "labels": {
            **shared_labels(settings.instance),
            PROXY_ROLE_LABEL: PROXY_ROLE,
            CONFIG_LABEL: config_digest(environment),
        },
        "environment": environment,
        "volumes": volumes,
    }


async def ensure_proxy(client: docker.DockerClient, settings: SandboxSettings) -> str:
    """Start the instance's proxy, or adopt the running one; the registry URL sandboxes use.

    The sandbox network must exist. A proxy that is stopped, runs an image older than the
    current ``kiln/npm-proxy``, listens elsewhere (the network was made again with another
    subnet) or has another host proxy or CA bundle is replaced; its
    cache volume stays, unless the upstream registry changed (what one registry served is not
    another's to serve).
    """
    addresses, started = await ensure_proxy_container(client, settings)
    if started:
        await wait_listening(addresses[0], settings.npm_proxy_port, READY_TIMEOUT_SECONDS)
    return registry_url(addresses[0], settings.npm_proxy_port)


async def ensure_proxy_container(
    client: docker.DockerClient, settings: SandboxSettings
) -> tuple[list[str], bool]:
    """The proxy container of :func:`ensure_proxy`, started or adopted on ``client``'s engine,
    without waiting for it to listen (a swarm node's proxy is not reachable from kiln's host:
    :mod:`sandbox.cluster.node_proxy` waits on the node); the gateway addresses it listens on,
    and whether it was started now."""
    network = await call(client.networks.get, settings.network)
    addresses = gateways(network.attrs)
    if not addresses:
        raise SandboxUnavailable(f"network {settings.network!r} has no IPv4 gateway")
    listen = listen_addresses(addresses, settings.npm_proxy_port)
    current = await _current(client, settings.instance)
    wanted = proxy_environment(settings, listen)
    if current is not None and _serves(current, wanted, await _image_id(client)):
        return addresses, False
    if current is not None:
        other_upstream = f"{UPSTREAM_ENV}={wanted[UPSTREAM_ENV]}" not in _env(current)
        await remove_proxy(client, settings.instance, with_cache=other_upstream)
    await _run(client, settings, listen)
    return addresses, True


async def wait_listening(host: str, port: int, timeout: float) -> None:
    """Return once ``host:port`` accepts a connection; ``SandboxUnavailable`` after ``timeout``."""
    with anyio.move_on_after(timeout):
        while True:
            try:
                stream = await anyio.connect_tcp(host, port)
            except OSError:
                await anyio.sleep(READY_POLL_SECONDS)
                continue
            await stream.aclose()
            return
    raise SandboxUnavailable(f"the npm registry proxy did not listen on {host}:{port} in time")


async def remove_proxy(
    client: docker.DockerClient, instance: str, *, with_cache: bool = False
) -> bool:
    """Remove the instance's proxy container, and its cache volume if ``with_cache``;
    ``False`` if there was no container."""
    current = await _current(client, instance)
    if current is not None:
        await call(current.remove, force=True)
    if with_cache:
        try:
            volume = await call(client.volumes.get, proxy_volume_name(instance))
            await call(volume.remove, force=True)
        except SandboxNotFound:
            pass
    return current is not None


async def _current(client: docker.DockerClient, instance: str) -> Any:
    return await named_container(client, proxy_container_name(instance))


def _env(container: Any) -> set[str]:
    return set(container.attrs.get("Config", {}).get("Env") or [])


def _serves(container: Any, wanted: dict[str, str], image_id: str) -> bool:
    """Whether ``container`` runs the current image with the ``wanted`` environment."""
    labels = container.attrs.get("Config", {}).get("Labels") or {}
    current = container.attrs.get("Image") == image_id and container.status == "running"
    return current and labels.get(CONFIG_LABEL) == config_digest(wanted)


async def _image_id(client: docker.DockerClient) -> str:
    try:
        return str((await call(client.images.get, PROXY_IMAGE)).id)
    except SandboxNotFound as exc:
        raise ImageMissing(_MISSING) from exc


async def _run(client: docker.DockerClient, settings: SandboxSettings, listen: str) -> None:
    kwargs = proxy_run_kwargs(settings, listen)
    # Made here, not by `run`, so it carries the labels that let a sweep find it.
    volume = proxy_volume_name(settings.instance)
    await call(client.volumes.create, name=volume, labels=shared_labels(settings.instance))
    try:
        await call(client.containers.run, **kwargs)
    except SandboxNotFound as exc:
        raise ImageMissing(_MISSING) from exc
    except SandboxError as exc:
        if "Conflict" not in str(exc):  # another process of the instance started it just now
            raise
