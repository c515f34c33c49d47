"""What each kiln npm proxy on the host says of its cache (for ``kiln doctor``'s host budget).

Every proxy (any instance's: they share the host's disk) is found by its role label and asked
over the address it listens on; a proxy that does not answer (an image from before the cache
bound) is reported with no figures rather than failing the look.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import docker
import httpx

from sandbox.containers.npm_proxy import LISTEN_ENV, PROXY_ROLE, PROXY_ROLE_LABEL, cache_url
from sandbox.docker_boundary import call

TIMEOUT_SECONDS = 3.0


@dataclass(frozen=True, slots=True)
class ProxyCache:
    """One proxy's cache: its container's name, bytes used and bound (``None``: no answer)."""

    name: str
    used: int | None
    bound: int | None


async def proxy_caches(client: docker.DockerClient) -> list[ProxyCache]:
    """Every kiln npm proxy on the host with its cache use; ``SandboxError`` if Docker fails."""
    found = await call(
        client.containers.list,
        filters={"label": f"{PROXY_ROLE_LABEL}={PROXY_ROLE}"},
        ignore_removed=True,  # a container removed between the list and its inspect is gone
    )
    async with httpx.AsyncClient(timeout=TIMEOUT_SECONDS) as http:
        return [await _ask(http, container) for container in found]


async def _ask(http: httpx.AsyncClient, container: Any) -> ProxyCache:
    env = _environment(container.attrs)
    listen = (env.get(LISTEN_ENV) or "").split()
    if not listen:
        return ProxyCache(container.name, None, None)
    host, _, port = listen[0].rpartition(":")
    try:
        answer = (await http.get(cache_url(host, int(port)))).json()
        return ProxyCache(container.name, int(answer["bytes"]), int(answer["bound"]))
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return ProxyCache(container.name, None, None)


def _environment(attrs: Mapping[str, Any]) -> dict[str, str]:
    pairs = (item.partition("=") for item in (attrs.get("Config") or {}).get("Env") or [])
    return {name: value for name, _, value in pairs}
