"""``POST /__kiln/preview-errors`` through a real proxy into a real Redis: attribution, caps,
dedup, rate limits, refusals in words; the service stays responsive under a flood."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import pytest
import redis.asyncio
from starlette.applications import Starlette
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from sandbox.preview.error_ingest import (
    MAX_BATCH,
    MAX_BODY_BYTES,
    REQUEST_BURST,
    PreviewErrorIngest,
)
from sandbox.preview.error_reports import MAX_MESSAGE
from sandbox.preview.error_stream import ErrorStreamSettings, PreviewErrorStream
from sandbox.preview.proxy import PreviewProxy
from tests.api.harness import serving

pytestmark = pytest.mark.anyio
DEADLINE_SECONDS = 60.0
PATH = "/__kiln/preview-errors"


async def healthz(request: Request) -> Response:
    return JSONResponse({"ok": True})


@dataclass
class Served:
    url: str
    redis: redis.asyncio.Redis
    stream: PreviewErrorStream

    def page(self, sandbox_id: str) -> httpx.AsyncClient:
        """A page of ``sandbox_id``'s preview (its Host), talking to the proxy."""
        headers = {"host": f"{sandbox_id}.preview.localhost:8000"}
        return httpx.AsyncClient(base_url=self.url, headers=headers, trust_env=False, timeout=30)

    async def stored(self, sandbox_id: str) -> list[dict[str, Any]]:
        return [error for _, error in await self.stream.read(sandbox_id, count=10_000)]


def ids() -> tuple[str, str]:
    token = uuid.uuid4().hex[:8]
    return f"a{token}", f"b{token}"


@pytest.fixture
async def served(redis_url: str) -> AsyncIterator[Served]:
    """A proxy with the reporter on; sandbox ids starting with ``a`` or ``b`` exist, owned by
    whoever sends ``x-owner: <id>`` (a stand-in for the preview session)."""
    client = redis.asyncio.Redis.from_url(redis_url)
    stream = PreviewErrorStream(client, ErrorStreamSettings(per_second=20.0, burst=200))
    inner = Starlette(routes=[Route("/healthz", healthz)])

    async def resolve(sandbox_id: str) -> str | None:
        return "http://127.0.0.1:1" if sandbox_id[0] in "ab" else None

    async def authorize(connection: HTTPConnection, sandbox_id: str) -> bool:
        return connection.headers.get("x-owner") == sandbox_id

    proxy = PreviewProxy(
        resolve,
        public_host="localhost",
        authorize=authorize,
        app=inner,
        reports=PreviewErrorIngest(stream),
    )
    try:
        async with serving(proxy) as url:
            yield Served(url, client, stream)
    finally:
        await proxy.aclose()
        await client.aclose()


def report(message: str = "boom", **fields: Any) -> dict[str, Any]:
    return {"kind": "uncaught", "message": message, "url": "http://x/", **fields}


async def test_reports_land_in_the_hosts_sandbox_only_as_text(served: Served) -> None:
    mine, other = ids()
    forged = report(
        "<script>alert(1)</script>",
        sandbox=other,
        sandbox_id=other,
        source={"file": f"http://{other}.preview.localhost:8000/src/App.jsx", "line": 3},
    )
    async with served.page(mine) as page:
        response = await page.post(
            PATH, json={"reports": [forged], "sandbox": other}, headers={"x-owner": mine}
        )
    assert response.status_code == 202, response.text
    assert response.json() == {"stored": 1}
    stored = await served.stored(mine)
    assert stored == [
        {
            "kind": "uncaught",
            "message": "<script>alert(1)</script>",
            "stack": "",
            "source": None,
            "url": "http://x/",
            "count": 1,
        }
    ]
    assert await served.stored(other) == []


async def test_someone_elses_preview_session_is_refused(served: Served) -> None:
    mine, other = ids()
    async with served.page(other) as page:
        response = await page.post(PATH, json=[report()], headers={"x-owner": mine})
    assert response.status_code == 403
    assert await served.stored(other) == []


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        pytest.param(b"not json", 400, "invalid_preview_report", id="not-json"),
        pytest.param(b'{"reports": 3}', 400, "invalid_preview_report", id="not-a-list"),
        pytest.param(
            b"[" + b'"x",' * (MAX_BODY_BYTES // 4) + b'"x"]',
            413,
            "preview_report_too_large",
            id="too-large",
        ),
    ],
)
async def test_bad_bodies_are_refused_in_words(
    served: Served, body: bytes, status: int, code: str
) -> None:
    mine, _ = ids()
    async with served.page(mine) as page:
        response = await page.post(PATH, content=body, headers={"x-owner": mine})
    assert response.status_code == status
    assert response.json()["error"]["code"] == code


async def test_only_post(served: Served) -> None:
    mine, _ = ids()
    async with served.page(mine) as page:
        response = await page.get(PATH, headers={"x-owner": mine})
    assert response.status_code == 405


async def test_identical_reports_are_merged_and_junk_dropped(served: Served) -> None:
    mine, _ = ids()
    batch = [report("same")] * 60 + [{"kind": "nope"}, "junk", None] + [report("other")]
    async with served.page(mine) as page:
        first = await page.post(PATH, json=batch, headers={"x-owner": mine})
        again = await page.post(PATH, json=[report("same")], headers={"x-owner": mine})
    assert first.json() == {"stored": 2}
    assert again.json() == {"stored": 0}  # within the dedup window: counted, not stored again
    assert [(e["message"], e["count"]) for e in await served.stored(mine)] == [
        ("same", 60),
        ("other", 1),
    ]


async def test_megabyte_messages_are_capped(served: Served) -> None:
    mine, _ = ids()
    huge = report("y" * 1_000_000)
    async with served.page(mine) as page:
        response = await page.post(
            PATH,
            content=json.dumps([huge])[: MAX_BODY_BYTES - 10] + '"}]',
            headers={"x-owner": mine},
        )
    assert response.status_code == 202, response.text
    (stored,) = await served.stored(mine)
    assert len(stored["message"]) == MAX_MESSAGE


async def test_a_flood_is_capped_and_the_service_stays_responsive(served: Served) -> None:
    """A page sending ~10,000 distinct errors a second: most requests are refused (429), at
    most the burst and the rate's share are stored, and /healthz answers all along."""
    mine, _ = ids()
    statuses: list[int] = []
    health: list[int] = []
    retry_after: list[str | None] = []

    async def flood(page: httpx.AsyncClient, worker: int) -> None:
        for n in range(20):
            batch = [report(f"error {worker}-{n}-{i}") for i in range(MAX_BATCH)]
            response = await page.post(PATH, json=batch, headers={"x-owner": mine})
            statuses.append(response.status_code)
            if response.status_code == 429:
                retry_after.append(response.headers.get("retry-after"))

    async with (
        served.page(mine) as page,
        httpx.AsyncClient(base_url=served.url, trust_env=False) as api,
    ):
        with anyio.fail_after(DEADLINE_SECONDS):
            async with anyio.create_task_group() as tasks:
                for worker in range(5):
                    tasks.start_soon(flood, page, worker)
                for _ in range(5):
                    health.append((await api.get("/healthz")).status_code)
    assert health == [200] * 5
    assert statuses.count(202) >= REQUEST_BURST
    assert 429 in statuses
    assert set(retry_after) == {"2"}  # the reporter script waits, then sends again
    stored = await served.stored(mine)
    # 200 burst + 20/s over the flood's few seconds (generous bound, still far below 10,000).
    assert 0 < len(stored) <= 200 + 20 * DEADLINE_SECONDS
    assert set(statuses) <= {202, 429}
