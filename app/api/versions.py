"""A chat's project versions: ``/api/chats/{id}/versions`` and what each version offers.

- ``GET  .../versions``: every version, oldest first (number, created, run, turn, summary,
  files changed);
- ``GET  .../versions/{v}/diff``: the version's unified diff against its parent, per file;
- ``POST .../versions/{v}/restore``: the version becomes the newest (recorded as a new one:
  history only grows) and is written into the chat's sandbox if it has one, with ``npm install``
  (through the install queue) when ``package.json`` changed (``installed``: true/false, or null
  when none was needed); a chat without a sandbox gets it on its next run; refused (409
  ``run_active``) while a run of the chat is queued or running;
- ``GET  .../versions/{v}/archive``: a zip of the version's files.

``{v}`` is a version number or ``latest``. Another user's chat is a 404, as everywhere.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.api.auth import require_user
from app.api.errors import ApiError
from app.api.ownership import owned_chat
from app.api.ports import StorePort
from app.api.services import in_thread, services
from app.projects.errors import ProjectError, ProjectTooLarge, VersionNotFound
from app.projects.lock_urls import public_archive
from app.projects.store import ProjectStore, VersionRef, parse_version_ref
from app.projects.sync import ProjectAccess
from app.store import ACTIVE_STATUSES
from sandbox import SandboxError

ARCHIVE_TYPE = "application/zip"


def access(request: Request) -> ProjectAccess:
    """The app's projects (:func:`app.api.app.build_app` hangs them on the state)."""
    found: ProjectAccess | None = getattr(request.app.state, "projects", None)
    if found is None:
        raise ApiError(503, "projects_unavailable", "this server keeps no projects")
    return found


def projects(request: Request) -> ProjectStore:
    """The app's project store."""
    return access(request).store


def version_ref(request: Request) -> VersionRef:
    """``{v}``: a number, or ``latest``; anything else is no version at all (404)."""
    given = str(request.path_params["version"])
    ref = parse_version_ref(given)
    if ref is None:
        raise ApiError(404, "version_not_found", f"no version {given!r}")
    return ref


def project_failure(exc: ProjectError | SandboxError) -> ApiError:
    """The API's answer to a project that cannot be read or written."""
    if isinstance(exc, VersionNotFound):
        return ApiError(404, exc.code, str(exc))
    if isinstance(exc, ProjectTooLarge):
        return ApiError(413, exc.code, str(exc))
    return ApiError(503, "project_unavailable", "the chat's project cannot be reached now")


async def list_versions(request: Request) -> Response:
    """``GET /api/chats/{id}/versions`` -> ``{versions}``."""
    chat = await _owned(request)
    try:
        versions = await in_thread(projects(request).versions, chat)
    except ProjectError as exc:
        raise project_failure(exc) from exc
    return JSONResponse({"versions": [version.to_dict() for version in versions]})


async def version_diff(request: Request) -> Response:
    """``GET /api/chats/{id}/versions/{v}/diff`` -> ``{version, files: [{path, status, diff}]}``."""
    chat, ref, store = await _owned(request), version_ref(request), projects(request)
    try:
        version = await in_thread(store.version, chat, ref)
        diffs = await in_thread(store.diff, chat, version.number)
    except ProjectError as exc:
        raise project_failure(exc) from exc
    files = [diff.to_dict() for diff in diffs]
    return JSONResponse({"version": version.to_dict(), "files": files})


async def restore_version(request: Request) -> Response:
    """``POST /api/chats/{id}/versions/{v}/restore`` -> ``201 {version, restored, sandbox_id}``."""
    user = await require_user(request)
    found = services(request)
    chat = await owned_chat(found.store, user.id, request.path_params["chat_id"])
    ref = version_ref(request)
    await refuse_while_running(found.store, chat.id)
    sandbox_id = await live_sandbox(request, chat.sandbox_id)
    try:
        source, version, installed = await access(request).sync(chat.id).restore(sandbox_id, ref)
    except (ProjectError, SandboxError) as exc:
        raise project_failure(exc) from exc
    body = {
        "version": version.to_dict(),
        "restored": source.number,
        "sandbox_id": sandbox_id,
        "installed": installed,
    }
    return JSONResponse(body, 201)


async def version_archive(request: Request) -> Response:
    """``GET /api/chats/{id}/versions/{v}/archive`` -> the version's files as a zip."""
    chat, ref, store = await _owned(request), version_ref(request), projects(request)
    try:
        version = await in_thread(store.version, chat, ref)
        data = await in_thread(store.archive, chat, version.number)
        data = await in_thread(public_archive, data)  # older versions' locks: kiln's address
    except ProjectError as exc:
        raise project_failure(exc) from exc
    name = f"{chat}-v{version.number}.zip"
    headers = {"content-disposition": f'attachment; filename="{name}"'}
    return Response(data, media_type=ARCHIVE_TYPE, headers=headers)


async def _owned(request: Request) -> str:
    """The id of the request's chat, if the user owns it (404 otherwise)."""
    user = await require_user(request)
    chat = await owned_chat(services(request).store, user.id, request.path_params["chat_id"])
    return chat.id


async def refuse_while_running(store: StorePort, chat_id: str) -> None:
    """409 ``run_active`` while a run of the chat is queued or running: the run writes into
    the same sandbox and records versions, one writer at a time."""
    runs = await in_thread(store.list_runs, chat_id)
    if any(run.status in ACTIVE_STATUSES for run in runs):
        raise ApiError(
            409, "run_active", f"chat {chat_id!r} has a run in progress: wait or cancel it"
        )


async def live_sandbox(request: Request, sandbox_id: str | None) -> str | None:
    """The chat's sandbox if it still exists (a removed one is restored on the next run)."""
    if sandbox_id is None:
        return None
    try:
        await services(request).sandboxes.get(sandbox_id)
    except SandboxError:
        return None
    return sandbox_id


ROUTES = [
    Route("/api/chats/{chat_id}/versions", list_versions, methods=["GET"]),
    Route("/api/chats/{chat_id}/versions/{version}/diff", version_diff, methods=["GET"]),
    Route("/api/chats/{chat_id}/versions/{version}/restore", restore_version, methods=["POST"]),
    Route("/api/chats/{chat_id}/versions/{version}/archive", version_archive, methods=["GET"]),
]
