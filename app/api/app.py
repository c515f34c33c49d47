"""The service's ASGI app: the HTTP API, the web UI and the preview proxy, in one.

From the outside in::

    RequestContext          request ids, JSON 500 for anything unhandled (app.api.errors)
    └── FramingHeaders      frame-ancestors: the UI unframeable, previews framed by the UI only
        └── PublishedApps   <slug>.apps.<public host>: published apps, no sign-in, no cookies
            └── CanonicalHost   a page on another host than the public one: sent there, in words
                └── PreviewGate     <id>.preview.<public host>: sign-in link, owner check
                    └── PreviewProxy  forwards preview hosts to the dev server
                        └── Starlette every other host: /api/..., /healthz, /login, the UI

The UI is the static folder ``app/web``: ``/`` serves its ``index.html`` and every file is
reachable both at ``/<name>`` and ``/static/<name>`` (a placeholder page stands in while the
folder has no ``index.html``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from app.api import (
    app_env,
    chats,
    health,
    keys,
    me,
    publications,
    remotes,
    runs,
    sandboxes,
    sessions,
    text_edits,
    versions,
)
from app.api import preview_errors as preview_error_api
from app.api.auth import login
from app.api.canonical_host import CanonicalHost
from app.api.errors import EXCEPTION_HANDLERS, RequestContext
from app.api.framing import FramingHeaders
from app.api.ports import RunServicePort, SandboxesPort, StorePort
from app.api.preview_access import (
    PRIVATE_COOKIES,
    PreviewGate,
    marked_authorize,
    sandbox_resolver,
)
from app.api.published_apps import PublishedApps
from app.api.services import ApiServices, ApiSettings, HealthCheck
from app.api.stream_limits import StreamLimits
from app.projects.sync import ProjectAccess
from app.publish.jobs import PublishJobs
from sandbox import HmrHold, PreviewErrorIngest, PreviewErrorStream, PreviewProxy

WEB_DIR = Path(__file__).resolve().parent.parent / "web"
PLACEHOLDER_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>kiln</title></head>
<body><main><h1>kiln</h1><p>The web UI is not installed; the API is at <code>/api</code>.</p>
</main></body></html>
"""


def ui_routes(web_dir: Path | None) -> list[BaseRoute]:
    """``/`` and the static files (or the placeholder page when there is no UI)."""
    index = web_dir / "index.html" if web_dir is not None else None
    if web_dir is None or index is None or not index.is_file():

        async def placeholder(request: Request) -> Response:
            return HTMLResponse(PLACEHOLDER_PAGE)

        return [Route("/", placeholder, methods=["GET"])]

    async def index_page(request: Request) -> Response:
        return FileResponse(index, headers={"cache-control": "no-cache"})

    files = StaticFiles(directory=web_dir)
    return [
        Route("/", index_page, methods=["GET"]),
        Mount("/static", files, name="static"),
        Mount("/", files, name="ui"),  # last: only what no API route matched
    ]


def build_app(
    store: StorePort,
    run_service: RunServicePort,
    sandbox_manager: SandboxesPort,
    *,
    settings: ApiSettings | None = None,
    health_checks: Mapping[str, HealthCheck] | None = None,
    web_dir: Path | None = WEB_DIR,
    lifespan: Callable[[Starlette], AbstractAsyncContextManager[None]] | None = None,
    projects: ProjectAccess | None = None,
    stopping: anyio.Event | None = None,
    preview_hold: Callable[[str], HmrHold] | None = None,
    preview_errors: PreviewErrorStream | None = None,
    publish_jobs: PublishJobs | None = None,
) -> ASGIApp:
    """The whole ASGI app (see the module docstring).

    ``lifespan`` (an async context manager factory taking the Starlette app) is run by the
    server at start-up and shutdown; ``kiln serve`` manages its services outside of it.
    ``projects`` serves the versions API (without it, those routes answer 503). Event
    streams end once ``stopping`` is set (the server is stopping). ``preview_hold`` holds a
    preview's hot updates while a run writes (:mod:`sandbox.preview.hmr_hold`). With
    ``preview_errors``, preview pages get the error reporter and what they report is kept
    there (``GET /api/sandboxes/{id}/preview-errors``, :mod:`app.api.preview_errors`).
    ``publish_jobs`` publish versions in the background (:mod:`app.api.publications`; they run
    beside ``lifespan``) and their builds are served at their own hosts
    (:mod:`app.api.published_apps`); without them those routes answer 503.
    """
    api_settings = settings or ApiSettings()
    found = ApiServices(
        store=store,
        runs=run_service,
        sandboxes=sandbox_manager,
        settings=api_settings,
        health_checks=dict(health_checks or {}),
        streams=StreamLimits(api_settings.max_event_streams_per_user),
        stopping=stopping,
    )
    routes: list[BaseRoute] = [
        *health.ROUTES,
        Route("/login", login, methods=["GET"]),
        *me.ROUTES,
        *sessions.ROUTES,
        *keys.ROUTES,
        *chats.ROUTES,
        *app_env.ROUTES,
        *runs.ROUTES,
        *sandboxes.ROUTES,
        *preview_error_api.ROUTES,
        *versions.ROUTES,
        *remotes.ROUTES,
        *text_edits.ROUTES,
        *publications.ROUTES,
        *ui_routes(web_dir),
    ]
    api = Starlette(
        routes=routes,
        exception_handlers=dict(EXCEPTION_HANDLERS),
        lifespan=publications.with_publish_jobs(lifespan, publish_jobs)
        if publish_jobs
        else lifespan,
    )
    api.state.services = found
    api.state.projects = projects
    api.state.preview_errors = preview_errors
    api.state.publish_jobs = publish_jobs
    proxy = PreviewProxy(
        sandbox_resolver(sandbox_manager),
        public_host=api_settings.public_host,
        authorize=marked_authorize,
        app=api,
        private_cookies=PRIVATE_COOKIES,
        hold=preview_hold,
        reports=PreviewErrorIngest(preview_errors) if preview_errors is not None else None,
    )
    gate: ASGIApp = CanonicalHost(PreviewGate(proxy, found), found.settings)
    if publish_jobs is not None:
        publisher = publish_jobs.publisher
        domain = publisher.settings.domain(api_settings.public_host)
        gate = PublishedApps(gate, publisher.rows, publisher.storage, domain)
    return RequestContext(FramingHeaders(gate, found.settings))
