"""A chat's public link: ``/api/chats/{id}/publication`` and publishing a version.

- ``POST   .../versions/{v}/publish``: start publishing version ``{v}`` (a number or ``latest``)
  as a background job (:mod:`app.publish.jobs`) -> ``202 {job}`` at once; 409
  ``publish_in_progress`` while the chat has one running, 429 ``publish_rate_limited`` with
  ``Retry-After`` past ``KILN_PUBLISH_PER_HOUR``;
- ``GET    .../publish-job``: ``{job}``, the chat's newest (``null``: none yet); ``job`` is
  ``{id, version, stage, active, code, message, created, updated}``, ``stage`` one of
  ``queued building storing live failed`` (``code`` and ``message`` say why it failed);
- ``GET    .../publish-job/events``: that job as server-sent events (``event: publish_job``),
  one each time it changes, until it has ended;
- ``GET    .../publication``: ``{publication}``; ``{"publication": null}`` for a chat never
  published (a page asks on every chat it opens: no error for the usual case);
- ``DELETE .../publication``: unpublish -> ``{publication}`` (``published: false``); the link
  answers 404 from then on; 404 ``not_published`` when it serves nothing.

``publication`` is ``{slug, url, published, version, manifest, updated}``: ``url`` is the
app's own origin (:mod:`app.api.published_apps`), the same for the chat whatever it serves.
Another user's chat is a 404, as everywhere.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from app.api.auth import require_user
from app.api.errors import ApiError, error_response
from app.api.ownership import owned_chat
from app.api.published_apps import app_url
from app.api.services import services
from app.api.sse import EventStreamResponse
from app.api.versions import project_failure, version_ref
from app.projects.errors import ProjectError
from app.publish.errors import (
    NotPublished,
    PublishBuildFailed,
    PublishBusy,
    PublishError,
    PublishRateLimited,
    PublishTimeout,
    PublishTooLarge,
    PublishUnsupported,
)
from app.publish.jobs import PublishJobs
from app.publish.publisher import Publisher
from app.store.publications import Publication
from app.store.publish_jobs import PublishJob

Lifespan = Callable[[Starlette], AbstractAsyncContextManager[None]]
JOB_EVENT = "publish_job"

# Status per failure, most specific first (a PublishError not listed: the server's trouble).
STATUSES: tuple[tuple[type[PublishError], int], ...] = (
    (NotPublished, 404),
    (PublishUnsupported, 422),
    (PublishBuildFailed, 422),
    (PublishTooLarge, 413),
    (PublishTimeout, 504),
    (PublishBusy, 409),
    (PublishRateLimited, 429),
)


def publisher(request: Request) -> Publisher:
    """The app's publisher (its publish jobs')."""
    return publish_jobs(request).publisher


def publish_jobs(request: Request) -> PublishJobs:
    """The app's publish jobs (:func:`app.api.app.build_app` hangs them on the state)."""
    found: PublishJobs | None = getattr(request.app.state, "publish_jobs", None)
    if found is None:
        raise ApiError(503, "publish_unavailable", "this server does not publish apps")
    return found


def with_publish_jobs(lifespan: Lifespan | None, jobs: PublishJobs) -> Lifespan:
    """``lifespan`` with ``jobs`` running beside it (their task group is the server's: a
    stopping server ends its jobs as interrupted)."""

    @asynccontextmanager
    async def running(app: Starlette) -> AsyncIterator[None]:
        async with anyio.create_task_group() as tasks:
            await tasks.start(jobs.run)
            try:
                if lifespan is None:
                    yield
                else:
                    async with lifespan(app):
                        yield
            finally:
                tasks.cancel_scope.cancel()

    return running


def publish_failure(exc: PublishError) -> ApiError:
    """The API's answer to a publish that failed, in words with its stable code."""
    status = next((status for kind, status in STATUSES if isinstance(exc, kind)), 503)
    return ApiError(status, exc.code, str(exc))


def publication_body(request: Request, publication: Publication) -> dict[str, Any]:
    """``{publication}`` with the app's URL on the request's scheme and the public port."""
    found = publisher(request)
    settings = services(request).settings
    domain = found.settings.domain(settings.public_host)
    scheme = "https" if request.url.scheme == "https" else "http"
    url = app_url(publication.slug, domain, settings.public_port, scheme)
    return {"publication": {**publication.to_dict(), "url": url}}


async def publish_version(request: Request) -> Response:
    """``POST /api/chats/{id}/versions/{v}/publish`` -> ``202 {job}``, the build under way."""
    user = await require_user(request)
    chat = await owned_chat(services(request).store, user.id, request.path_params["chat_id"])
    ref, jobs = version_ref(request), publish_jobs(request)
    try:
        job = await jobs.submit(chat.id, ref, owner=user.id)
    except ProjectError as exc:
        raise project_failure(exc) from exc
    except PublishRateLimited as exc:
        headers = {"Retry-After": str(exc.retry_after)}
        return error_response(429, exc.code, str(exc), headers, retry_after=exc.retry_after)
    except PublishError as exc:
        raise publish_failure(exc) from exc
    location = f"/api/chats/{chat.id}/publish-job"
    return JSONResponse({"job": job.to_dict()}, 202, headers={"Location": location})


async def show_publish_job(request: Request) -> Response:
    """``GET /api/chats/{id}/publish-job`` -> ``{job}`` (null: never published)."""
    user = await require_user(request)
    chat = await owned_chat(services(request).store, user.id, request.path_params["chat_id"])
    job = await publish_jobs(request).latest(chat.id)
    return JSONResponse({"job": job.to_dict() if job else None})


async def job_events(
    jobs: PublishJobs, job: PublishJob | None
) -> AsyncIterator[tuple[int | str, dict[str, Any]]]:
    """The job as SSE events, one per change, until it has ended (none without a job)."""
    if job is None:
        return
    async for seen in jobs.follow(job.chat_id, job.id):
        yield f"{seen.id}-{seen.stage}", {"type": JOB_EVENT, "job": seen.to_dict()}


class PublishJobEvents:
    """``GET /api/chats/{id}/publish-job/events``: an ASGI endpoint (the answer is a stream)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the caller, then stream the chat's newest job."""
        request = Request(scope, receive)
        user = await require_user(request)
        found = services(request)
        chat = await owned_chat(found.store, user.id, request.path_params["chat_id"])
        jobs = publish_jobs(request)
        job = await jobs.latest(chat.id)
        with found.streams.held(user.id):
            events = job_events(jobs, job)
            response = EventStreamResponse(
                events, found.settings.sse_ping_interval, until=found.stopping
            )
            await response(scope, receive, send)


async def show_publication(request: Request) -> Response:
    """``GET /api/chats/{id}/publication`` -> ``{publication}`` (null: never published)."""
    user = await require_user(request)
    chat = await owned_chat(services(request).store, user.id, request.path_params["chat_id"])
    try:
        publication = await publisher(request).state(chat.id)
    except NotPublished:
        return JSONResponse({"publication": None})
    except PublishError as exc:
        raise publish_failure(exc) from exc
    return JSONResponse(publication_body(request, publication))


async def unpublish(request: Request) -> Response:
    """``DELETE /api/chats/{id}/publication`` -> ``{publication}``, no longer published."""
    user = await require_user(request)
    chat = await owned_chat(services(request).store, user.id, request.path_params["chat_id"])
    try:
        publication = await publisher(request).unpublish(chat.id)
    except PublishError as exc:
        raise publish_failure(exc) from exc
    return JSONResponse(publication_body(request, publication))


ROUTES = [
    Route("/api/chats/{chat_id}/versions/{version}/publish", publish_version, methods=["POST"]),
    Route("/api/chats/{chat_id}/publish-job", show_publish_job, methods=["GET"]),
    Route("/api/chats/{chat_id}/publish-job/events", PublishJobEvents(), methods=["GET"]),
    Route("/api/chats/{chat_id}/publication", show_publication, methods=["GET"]),
    Route("/api/chats/{chat_id}/publication", unpublish, methods=["DELETE"]),
]
