"""Warming a dev server's module graph once a turn's files are final, before any page loads it.

Vite pre-bundles the dependencies it finds when the dev server starts. A package installed while
it runs (a run's ``<edward_install>``, a restore's install: the supervisor keeps the server
running for an added package, issue 24) is found only when a page first imports it; Vite then
bundles the dependencies again, React with them, and reloads every open page. The page that
found it may throw first with a stale React (``Cannot read properties of null (reading
'useCallback')``), which the person's preview shows and reports, and which costs the render
check a reload. Asking the dev server for the app's modules the way a page would, from
``index.html`` down its imports, makes it find those packages with no page open: a request for a
dependency being bundled returns once the bundling is done, and the page's real first load then
meets one consistent set of dependencies and the transforms already cached.
"""

from __future__ import annotations

import logging
import re

import anyio
import httpx

from sandbox.preview.source_map import FetchModule, dev_server_modules

# Vite rewrites every import of a served module to a path on the dev server: "/src/App.jsx",
# "/node_modules/.vite/deps/react.js?v=ab12cd34". Static (`from "..."`, `import "..."`) and
# dynamic (`import("...")`) imports; the page's entry points are `<script src="...">`.
IMPORTED = re.compile(r"""(?:\bfrom|\bimport)\s*\(?\s*["'](/[^"'\s]+)["']""")
SCRIPT_SOURCE = re.compile(r"""<script\b[^>]*\bsrc\s*=\s*["'](/[^"'\s]+)["']""", re.IGNORECASE)
# The app's own modules are read for their imports; anything else (a bundled dependency, Vite's
# client) is only requested: that is what waits for a bundling to end.
WALKED = ("/src/",)
MAX_MODULES = 400
WARMUP_SECONDS = 20.0
# Requests at a time, as a browser loading the page makes them (6 per host over HTTP/1.1):
# the walk takes a fraction of the time one at a time took, and Vite's first crawl does not
# see it idle between two modules (it would bundle before the walk found every dependency).
PARALLEL_REQUESTS = 6

log = logging.getLogger(__name__)


async def warm_module_graph(
    fetch: FetchModule,
    max_modules: int = MAX_MODULES,
    parallel: int = PARALLEL_REQUESTS,
) -> int:
    """Request ``/`` and every module it reaches (same origin, each once, at most
    ``max_modules``, ``parallel`` at a time, import level by import level); how many were
    requested. A failed request is skipped: warming only saves time."""
    level = list(dict.fromkeys(SCRIPT_SOURCE.findall(await fetch("/") or "")))
    seen = set(level)
    limiter = anyio.CapacityLimiter(parallel)
    requested = 0
    while level and requested < max_modules:
        level = level[: max_modules - requested]
        requested += len(level)
        found = await _imports_of(fetch, level, limiter)
        level = [path for path in dict.fromkeys(found) if path not in seen]
        seen.update(level)
    return requested


async def _imports_of(
    fetch: FetchModule, paths: list[str], limiter: anyio.CapacityLimiter
) -> list[str]:
    """Request ``paths`` at once (within ``limiter``); the imports of the app's own modules."""
    found: list[str] = []

    async def walk(path: str) -> None:
        async with limiter:
            text = await fetch(path)
        if text is not None and path.startswith(WALKED):
            found.extend(IMPORTED.findall(text))

    async with anyio.create_task_group() as tasks:
        for path in paths:
            tasks.start_soon(walk, path)
    return found


async def warm_dev_server(base_url: str, limit_seconds: float = WARMUP_SECONDS) -> int:
    """:func:`warm_module_graph` on the dev server at ``base_url`` (reachable from here), within
    ``limit_seconds``; how many modules were requested (0 when the limit cut it short)."""
    async with httpx.AsyncClient() as client:
        with anyio.move_on_after(limit_seconds):
            return await warm_module_graph(dev_server_modules(client, base_url))
    log.warning("the module warm-up of %s was cut after %g s", base_url, limit_seconds)
    return 0
