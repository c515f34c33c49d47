"""``kiln doctor``'s npm cache check: what kiln's npm proxies keep on this host's disk.

Each instance's proxy bounds its cache (``KILN_NPM_PROXY_CACHE``; the front evicts the least
recently used packages past it, ``images/npm-proxy/front.js``) and answers its use to the host
at ``/-/kiln/cache`` on its gateway. The check asks every kiln proxy on the host (containers
labelled ``kiln.role=npm-proxy``, whatever their instance), and counts their bounds together
against the disk Docker keeps volumes on: the host budget. It fails when the bounds together are
more than that disk can still give (used caches plus free space), as the caches would then fill
the disk before they are evicted.
"""

from __future__ import annotations

import os
import shutil

import docker

from app.cli.doctor_result import CheckResult
from sandbox import (
    ProxyCache,
    SandboxError,
    SandboxSettings,
    call,
    proxy_caches,
    proxy_container_name,
)

MIB = 1024 * 1024
HINT = "lower KILN_NPM_PROXY_CACHE (each instance's proxy has its own cache) or free disk space"


def cache_result(own: str, caches: list[ProxyCache], disk_free: int | None) -> CheckResult:
    """The check's result from what the proxies answered and the free space (pure)."""
    mine = next((cache for cache in caches if cache.name == own), None)
    if mine is None or mine.used is None or mine.bound is None:
        return CheckResult("npm cache", False, f"the npm proxy {own!r} did not say its cache use")
    answered = [cache for cache in caches if cache.used is not None and cache.bound is not None]
    used = sum(cache.used or 0 for cache in answered)
    bounds = sum(cache.bound or 0 for cache in answered)
    detail = (
        f"this instance: {mine.used // MIB} MiB of {mine.bound // MIB} MiB; "
        f"{len(answered)} proxies on this host: {used // MIB} MiB used, "
        f"bounds {bounds // MIB} MiB in all"
    )
    detail += (
        f", {disk_free // MIB} MiB free on Docker's disk"
        if disk_free is not None
        else " (Docker's disk is not visible from here)"
    )
    silent = len(caches) - len(answered)
    if silent:
        detail += f" ({silent} more did not answer: a proxy image from before the bound)"
    if disk_free is not None and bounds > used + disk_free:
        return CheckResult("npm cache", False, detail + ": over what the disk can give", HINT)
    return CheckResult("npm cache", True, detail)


async def check_npm_cache(client: docker.DockerClient, settings: SandboxSettings) -> CheckResult:
    """Ask every kiln npm proxy on the host for its cache use, and judge the host budget."""
    try:
        caches = await proxy_caches(client)
        root = str((await call(client.info)).get("DockerRootDir") or "/var/lib/docker")
    except SandboxError as exc:
        return CheckResult("npm cache", False, f"not checked: {exc}")
    free = shutil.disk_usage(root).free if os.path.isdir(root) else None
    return cache_result(proxy_container_name(settings.instance), caches, free)
