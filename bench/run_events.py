"""A run's event stream as the benches read it: ``(event name, data)`` pairs off the SSE of
``GET /api/runs/{id}/events`` (one reader for bench/e2e.py, bench/api_restore.py and
bench/render_check.py; bench/service.py times raw lines, so it reads its own)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx


async def run_events(
    api: httpx.AsyncClient, run_id: str
) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """Each event of run ``run_id`` as ``(name, data)``, until the stream ends (it ends after
    ``run_finished``; a caller may stop reading sooner)."""
    async with api.stream("GET", f"/api/runs/{run_id}/events") as response:
        response.raise_for_status()
        kind = ""
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                kind = line.removeprefix("event: ")
            elif line.startswith("data: "):
                yield kind, json.loads(line.removeprefix("data: "))
