"""kiln's front of the npm proxy (images/npm-proxy/front.js) and the host rule around it, on the
real engine: a sandbox reaches its own instance's proxy and no other's, listings are closed, the
lock an install writes names the public registry, and the cache stays under its bound."""

from __future__ import annotations

import json
from dataclasses import replace

import anyio
import docker
import httpx
import pytest

from sandbox.containers.npm_proxy import (
    STORAGE_PATH,
    cache_url,
    ensure_proxy,
    proxy_container_name,
    registry_url,
)
from sandbox.docker_boundary import call
from sandbox.lifecycle.manager import Sandbox, SandboxManager
from sandbox.settings import SandboxSettings
from tests.sandbox.containers.test_npm_proxy import (
    CONNECT_TO,
    VERSION,
    _exec,
    _install,
    _node,
    _sandbox,
)

pytestmark = pytest.mark.anyio
# GET each path under argv 1 (the registry URL): prints "<path> <status>" a line.
GET_EACH = """
const registry = process.argv[1];
(async () => {
  for (const path of process.argv.slice(2)) {
    const r = await fetch(registry + path);
    console.log(path, r.status);
  }
})();
"""
LISTINGS = ("-/all", "-/all/since?startkey=0", "-/v1/search?text=react", "-/whoami", "-/ping")
CACHE_BOUND = 20 * 1024 * 1024
# About 47 MB of packuments and tarballs as Verdaccio stores them (over twice the bound), no
# package alone over it (typescript's folder is the largest: 17 MB).
BIG_FETCHES = (
    "typescript",
    "@types%2fnode",
    "aws-sdk",
    "react-dom",
    "typescript/-/typescript-5.6.3.tgz",
)


def _gateway(registry: str) -> str:
    return registry.split("//")[1].split(":")[0]


@pytest.mark.docker
async def test_a_sandbox_reaches_its_own_instances_proxy_and_not_another_ones(
    manager: SandboxManager,
    sandboxes: list[Sandbox],
    own_instance: SandboxSettings,
    docker_client: docker.DockerClient,
) -> None:
    other = _gateway(await ensure_proxy(docker_client, own_instance))
    sandbox = await _sandbox(manager, sandboxes)
    own = _gateway(str(manager.settings.sandbox_registry))
    port = str(manager.settings.npm_proxy_port)
    assert own != other
    assert await _node(docker_client, sandbox.container_id, CONNECT_TO, own, port) == "connected"
    answer = await _node(docker_client, sandbox.container_id, CONNECT_TO, other, port)
    assert answer.startswith("error"), answer


@pytest.mark.docker
@pytest.mark.npm
async def test_listings_are_closed_and_the_lock_names_the_public_registry(
    manager: SandboxManager,
    sandboxes: list[Sandbox],
    docker_client: docker.DockerClient,
) -> None:
    sandbox = await _sandbox(manager, sandboxes)
    await _install(manager, sandbox)
    registry = str(manager.settings.sandbox_registry)
    statuses = await _node(docker_client, sandbox.container_id, GET_EACH, registry, *LISTINGS)
    assert [line.rsplit(" ", 1)[1] for line in statuses.splitlines()] == ["403"] * len(LISTINGS)
    code, text = await _exec(docker_client, sandbox.container_id, ["cat", "package-lock.json"])
    assert code == 0, text
    package = json.loads(text)["packages"]["node_modules/zustand"]
    assert package["version"] == VERSION.split("@")[1]
    assert package["resolved"] == "https://registry.npmjs.org/zustand/-/zustand-5.0.0.tgz"
    assert _gateway(registry) not in text


async def _storage_bytes(client: docker.DockerClient, instance: str) -> int:
    proxy = await call(client.containers.get, proxy_container_name(instance))
    # stdout alone: the front may evict while du walks, and du's complaint about a file gone
    # under it goes to stderr (merged, "du:" was read as the size).
    result = await call(proxy.exec_run, ["du", "-sb", STORAGE_PATH], stdout=True, stderr=False)
    return int(result.output.split()[0])


@pytest.mark.docker
@pytest.mark.npm
async def test_the_cache_stays_under_its_bound_after_fetching_twice_as_much(
    own_instance: SandboxSettings, docker_client: docker.DockerClient
) -> None:
    bounded = replace(own_instance, npm_proxy_cache=f"{CACHE_BOUND}b")
    registry = await ensure_proxy(docker_client, bounded)
    gateway = _gateway(registry)
    async with httpx.AsyncClient(timeout=120) as client:
        for path in BIG_FETCHES:
            answer = await client.get(registry + path)
            assert answer.status_code == 200, (path, answer.text[:200])
        # The front counts a package again a moment after its response (Verdaccio is still
        # writing it then) and evicts then: the cache comes under the bound within seconds.
        with anyio.fail_after(60):
            while await _storage_bytes(docker_client, bounded.instance) > CACHE_BOUND:
                await anyio.sleep(0.5)
        cache = (await client.get(cache_url(gateway, bounded.npm_proxy_port))).json()
    assert (cache["bound"], cache["bytes"] <= CACHE_BOUND) == (CACHE_BOUND, True)
    assert cache["bytes"] + cache["evicted"] >= 2 * CACHE_BOUND  # fetched twice the bound
    assert registry == registry_url(gateway, bounded.npm_proxy_port)
