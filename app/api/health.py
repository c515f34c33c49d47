"""``GET /healthz`` (no auth): ``200 {ok: true, checks}`` or ``503`` naming the failing checks.

Each check is an async callable that raises when its dependency is unwell (store, redis,
docker); they run concurrently, each bounded by ``CHECK_TIMEOUT_SECONDS``. ``checks`` maps each
name to ``{ok: true}`` or ``{ok: false, error}``, where ``error`` is the exception's class and
message cut short: enough to act on, and nothing a stranger could not already guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.api.services import HealthCheck, services

CHECK_TIMEOUT_SECONDS = 3.0
MAX_ERROR_LENGTH = 200


async def run_checks(checks: Mapping[str, HealthCheck]) -> dict[str, dict[str, Any]]:
    """Every check's result, run concurrently."""
    results: dict[str, dict[str, Any]] = {}

    async def one(name: str, check: HealthCheck) -> None:
        try:
            with anyio.fail_after(CHECK_TIMEOUT_SECONDS):
                await check()
        except TimeoutError:
            results[name] = {"ok": False, "error": f"no answer in {CHECK_TIMEOUT_SECONDS:g}s"}
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"[:MAX_ERROR_LENGTH]
            results[name] = {"ok": False, "error": error}
        else:
            results[name] = {"ok": True}

    async with anyio.create_task_group() as tasks:
        for name, check in checks.items():
            tasks.start_soon(one, name, check)
    return {name: results[name] for name in checks}


async def healthz(request: Request) -> Response:
    """Run the health checks; 503 if any failed."""
    checks = await run_checks(services(request).health_checks)
    ok = all(result["ok"] for result in checks.values())
    return JSONResponse({"ok": ok, "checks": checks}, 200 if ok else 503)


ROUTES = [Route("/healthz", healthz, methods=["GET"])]
