"""A chat's public link: ``/api/chats/{id}/publication`` and publishing a version.

- ``POST   .../versions/{v}/publish``: build version ``{v}`` (a number or ``latest``) in a
  sandbox of its own and move the chat's link to it -> ``201 {publication}``; answers when the
  build is stored and the link moved (tens of seconds for a Vite app);
- ``GET    .../publication``: ``{publication}``; ``{"publication": null}`` for a chat never
  published (a page asks on every chat it opens: no error for the usual case);
- ``DELETE .../publication``: unpublish -> ``{publication}`` (``published: false``); the link
  answers 404 from then on; 404 ``not_published`` when it serves nothing.

``publication`` is ``{slug, url, published, version, manifest, updated}``: ``url`` is the
app's own origin (:mod:`app.api.published_apps`), the same for the chat whatever it serves.
Another user's chat is a 404, as everywhere.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.api.auth import require_user
from app.api.errors import ApiError
from app.api.ownership import owned_chat
from app.api.published_apps import app_url
from app.api.services import services
from app.api.versions import project_failure, version_ref
from app.projects.errors import ProjectError
from app.publish.errors import (
    NotPublished,
    PublishBuildFailed,
    PublishError,
    PublishTimeout,
    PublishTooLarge,
    PublishUnsupported,
)
from app.publish.publisher import Publisher
from app.store.publications import Publication

# Status per failure, most specific first (a PublishError not listed: the server's trouble).
STATUSES: tuple[tuple[type[PublishError], int], ...] = (
    (NotPublished, 404),
    (PublishUnsupported, 422),
    (PublishBuildFailed, 422),
    (PublishTooLarge, 413),
    (PublishTimeout, 504),
)


def publisher(request: Request) -> Publisher:
    """The app's publisher (:func:`app.api.app.build_app` hangs it on the state)."""
    found: Publisher | None = getattr(request.app.state, "publisher", None)
    if found is None:
        raise ApiError(503, "publish_unavailable", "this server does not publish apps")
    return found


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
    """``POST /api/chats/{id}/versions/{v}/publish`` -> ``201 {publication}``."""
    user = await require_user(request)
    chat = await owned_chat(services(request).store, user.id, request.path_params["chat_id"])
    ref, found = version_ref(request), publisher(request)
    try:
        publication = await found.publish(chat.id, ref, owner=user.id)
    except ProjectError as exc:
        raise project_failure(exc) from exc
    except PublishError as exc:
        raise publish_failure(exc) from exc
    return JSONResponse(publication_body(request, publication), 201)


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
    Route("/api/chats/{chat_id}/publication", show_publication, methods=["GET"]),
    Route("/api/chats/{chat_id}/publication", unpublish, methods=["DELETE"]),
]
