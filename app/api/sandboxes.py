"""A sandbox's workspace: ``GET /api/sandboxes/{id}/files`` and ``.../files/{path}``.

The listing leaves out ``node_modules``, ``dist``, ``.git`` and ``.next``; a file comes back as
``text/plain; charset=utf-8``. Only the owner of the sandbox's chat gets an answer; for anyone
else the sandbox does not exist (404), and so does a path that is no regular file or goes
through a symlink. Both are the sandbox manager's (``list_files``, ``read_file``: as the
sandbox user, see :mod:`sandbox.execution.workspace_files`); nothing here talks to Docker.

``GET /api/sandboxes/{id}/preview`` says whether the preview is ready, from one short request
to the dev server (the UI's preview state comes from it, never from its frame loading).
``POST /api/sandboxes/{id}/preview-login`` gives the owner a one-time link that signs the
browser in on the sandbox's preview host (see :mod:`app.api.preview_access`): a cookie set
for the UI's host is never sent to ``<id>.preview.<host>``. The link's token is sealed to that
sandbox (:mod:`app.api.preview_seal`): it does not sign in the UI.
"""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from app.api.auth import require_user
from app.api.errors import ApiError, not_found
from app.api.ownership import owned_sandbox
from app.api.preview_access import PREVIEW_LOGIN_PATH
from app.api.preview_seal import LOGIN
from app.api.services import PREVIEW_LOGIN_TTL_SECONDS, in_thread, services
from parser.errors import UnsafePathError
from parser.paths import normalize_file_path
from sandbox import FileTooLarge, SandboxNotFound, preview_url, probe_preview


async def list_files(request: Request) -> Response:
    """``GET /api/sandboxes/{id}/files`` -> ``{files: [{path, size}]}``."""
    user = await require_user(request)
    found = services(request)
    sandbox = await owned_sandbox(found.store, found.sandboxes, user.id, request.path_params["id"])
    try:
        files = await found.sandboxes.list_files(sandbox.id)
    except SandboxNotFound as exc:
        raise not_found("sandbox", sandbox.id) from exc
    return JSONResponse({"files": [{"path": item.path, "size": item.size} for item in files]})


async def read_file(request: Request) -> Response:
    """``GET /api/sandboxes/{id}/files/{path}`` -> the file as UTF-8 text."""
    user = await require_user(request)
    found = services(request)
    sandbox = await owned_sandbox(found.store, found.sandboxes, user.id, request.path_params["id"])
    raw_path = request.path_params["path"]
    try:
        path = normalize_file_path(raw_path)
    except UnsafePathError as exc:
        raise ApiError(400, "invalid_path", str(exc)) from exc
    try:
        text = await found.sandboxes.read_file(sandbox.id, path)
    except SandboxNotFound as exc:
        raise not_found("sandbox", sandbox.id) from exc
    except FileTooLarge as exc:
        raise ApiError(413, exc.code, str(exc)) from exc
    if text is None:
        raise not_found("file", path)
    return PlainTextResponse(text, headers={"cache-control": "no-store"})


async def preview_login(request: Request) -> Response:
    """``POST /api/sandboxes/{id}/preview-login`` -> ``{url}``: a one-time sign-in link."""
    user = await require_user(request)
    found = services(request)
    sandbox = await owned_sandbox(found.store, found.sandboxes, user.id, request.path_params["id"])
    token = await in_thread(found.store.create_token, user.id, "login", PREVIEW_LOGIN_TTL_SECONDS)
    token = found.seal.seal(LOGIN, sandbox.id, token)  # signs in this preview, nothing else
    settings = found.settings
    base = preview_url(sandbox.id, settings.public_host, settings.public_port)
    return JSONResponse({"url": f"{base}{PREVIEW_LOGIN_PATH[1:]}?{urlencode({'token': token})}"})


async def preview_state(request: Request) -> Response:
    """``GET /api/sandboxes/{id}/preview`` -> ``{state, code, message}``: is the preview ready
    (``ready``, ``starting``, ``failing``; see :mod:`sandbox.preview.readiness`)? A sandbox
    that is gone is a 404, as for anyone else's."""
    user = await require_user(request)
    found = services(request)
    sandbox = await owned_sandbox(found.store, found.sandboxes, user.id, request.path_params["id"])
    readiness = await probe_preview(sandbox.dev_url, sandbox.id)
    return JSONResponse(readiness.to_dict(), headers={"cache-control": "no-store"})


ROUTES = [
    Route("/api/sandboxes/{id}/files", list_files, methods=["GET"]),
    Route("/api/sandboxes/{id}/files/{path:path}", read_file, methods=["GET"]),
    Route("/api/sandboxes/{id}/preview-login", preview_login, methods=["POST"]),
    Route("/api/sandboxes/{id}/preview", preview_state, methods=["GET"]),
]
