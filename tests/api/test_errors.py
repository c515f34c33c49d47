"""JSON errors: statuses for kiln's exceptions, no traceback ever, request ids in the log."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.api.errors import EXCEPTION_HANDLERS, RequestContext, status_for
from app.errors import (
    AdmissionRefused,
    AuthError,
    ConfigError,
    KilnError,
    ModelRefused,
)
from app.logs import JsonFormatter
from app.runs.errors import QueueUnavailable, RunFinished, RunNotFound
from app.store import StoreConflict, StoreError
from parser.errors import UnsafePathError
from sandbox.errors import CommandRefused, SandboxError, SandboxUnavailable
from tests.api.conftest import Api
from tests.api.harness import serving

SECRET_DETAIL = "/var/lib/docker/secret-internal-path"


@pytest.mark.parametrize(
    ("exc", "status"),
    [
        pytest.param(AdmissionRefused("busy", "global"), 429, id="admission"),
        pytest.param(ModelRefused("m"), 400, id="model"),
        pytest.param(ConfigError("c"), 400, id="config"),
        pytest.param(AuthError("a"), 502, id="provider"),
        pytest.param(RunNotFound("r"), 404, id="run-not-found"),
        pytest.param(RunFinished("r"), 409, id="run-finished"),
        pytest.param(QueueUnavailable("q"), 503, id="queue"),
        pytest.param(StoreConflict("s"), 409, id="store-conflict"),
        pytest.param(StoreError("s"), 503, id="store"),
        pytest.param(UnsafePathError("p"), 400, id="path"),
        pytest.param(CommandRefused("c"), 400, id="command"),
        pytest.param(SandboxUnavailable("s"), 503, id="sandbox"),
        pytest.param(KilnError("k"), 500, id="kiln-base"),
        pytest.param(RuntimeError("r"), 500, id="other"),
    ],
)
def test_status_for(exc: Exception, status: int) -> None:
    assert status_for(exc) == status


async def _raise(request: Request) -> Response:
    kind = request.path_params["kind"]
    if kind == "sandbox":
        raise SandboxError(f"docker: exec failed in {SECRET_DETAIL}")
    if kind == "kiln":
        raise KilnError(f"bug near {SECRET_DETAIL}")
    if kind == "admission":
        raise AdmissionRefused("too many runs in chat 'c' (1)", "chat")
    raise RuntimeError(f"unexpected, see {SECRET_DETAIL}")


@pytest.fixture
async def failing() -> AsyncIterator[httpx.AsyncClient]:
    app = Starlette(
        routes=[Route("/boom/{kind}", _raise)], exception_handlers=dict(EXCEPTION_HANDLERS)
    )
    async with serving(RequestContext(app)) as url, httpx.AsyncClient(base_url=url) as client:
        yield client


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("kind", "status", "code"),
    [
        pytest.param("crash", 500, "internal_error", id="unexpected"),
        pytest.param("sandbox", 503, "sandbox_error", id="sandbox"),
        pytest.param("kiln", 500, "internal_error", id="kiln-base"),
    ],
)
async def test_failures_name_the_request_not_the_internals(
    failing: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
    kind: str,
    status: int,
    code: str,
) -> None:
    with caplog.at_level(logging.WARNING):
        response = await failing.get(f"/boom/{kind}")
    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] == code
    request_id = response.headers["x-request-id"]
    assert request_id in error["message"]
    assert SECRET_DETAIL not in response.text
    assert "Traceback" not in response.text
    logged = [r for r in caplog.records if SECRET_DETAIL in (r.exc_text or r.getMessage())]
    assert logged, "the detail must reach the server's log"
    assert any(r.exc_info for r in logged)


@pytest.mark.anyio
async def test_the_traceback_is_logged_with_the_request_id(
    failing: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR):
        response = await failing.get("/boom/crash")
    record = next(r for r in caplog.records if r.exc_info)
    line = json.loads(JsonFormatter().format(record))
    assert line["request_id"] == response.headers["x-request-id"]
    assert "RuntimeError: unexpected" in line["exc"]


@pytest.mark.anyio
async def test_admission_errors_carry_their_limit(failing: httpx.AsyncClient) -> None:
    response = await failing.get("/boom/admission")
    assert response.status_code == 429
    assert response.json()["error"]["limit"] == "chat"


@pytest.mark.anyio
async def test_unknown_routes_and_methods_are_json(api: Api) -> None:
    missing = await api.alice.client.get("/api/nothing-here")
    wrong = await api.alice.client.delete("/api/chats")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"
    assert wrong.status_code == 405
    assert wrong.json()["error"]["code"] == "method_not_allowed"
    assert "x-request-id" in missing.headers
