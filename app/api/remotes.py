"""A chat's project over git: its remote, pushes to it, and chats made from a repository.

- ``GET    /api/chats/{id}/remote`` -> ``{remote: {url, branch, has_token, last_push} | null}``;
- ``PUT    /api/chats/{id}/remote {url, branch?, token?}`` -> ``{remote}``: ``branch`` defaults
  to ``main``; ``token`` is stored encrypted and never returned (absent: the stored one is kept
  while the URL stays the same; ``""``: removed);
- ``DELETE /api/chats/{id}/remote`` -> 204: the remote and its token forgotten;
- ``POST   /api/chats/{id}/push`` -> ``{push: {ok, outcome, version, commit, at}, remote}``:
  every version, one commit each, as a fast-forward of the remote branch (never forced). A
  refusal is an error with a stable code (``remote_*``), and is kept as the remote's
  ``last_push`` too;
- ``POST   /api/chats/import {url, branch?, token?, title?}`` -> ``201 {chat, version,
  template, left_out, sandbox_id, preview}``: a chat whose version 1 is the repository's files
  (:mod:`app.projects.importing`), written into a new sandbox of the detected template with
  its dependencies installed (the restore path), so the preview runs; a refused import leaves
  no chat behind. The token (if any) is used for the clone only, never stored.

Status codes: ``remote_not_fast_forward`` 409, ``project_too_large`` 413, another refusal of
the URL, the token, the repository or the branch 422, ``remote_failed`` 502.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.api.auth import require_user
from app.api.bodies import optional_text, read_object, reject_unknown, required_text
from app.api.chats import chat_title
from app.api.errors import ApiError, not_found
from app.api.ownership import owned_chat
from app.api.ports import StorePort
from app.api.services import in_thread, services
from app.api.versions import access, project_failure
from app.api.views import chat_view
from app.projects.errors import (
    ProjectError,
    ProjectTooLarge,
    RemoteError,
    RemoteNotFastForward,
    VersionNotFound,
)
from app.projects.git_remote import (
    DEFAULT_BRANCH,
    MAX_URL_LENGTH,
    Remote,
    check_branch,
    check_url,
    push,
    repository_title,
)
from app.projects.importing import ImportResult, import_project
from app.projects.sync import ProjectAccess, ProjectSync
from sandbox import SandboxError

MAX_TOKEN_LENGTH = 1000
MAX_BRANCH_LENGTH = 100
REMOTE_FIELDS = frozenset({"url", "branch", "token"})
IMPORT_FIELDS = frozenset({"url", "branch", "token", "title"})


def remote_failure(exc: ProjectError) -> ApiError:
    """The API's answer to a push or an import that failed (the one mapping of these codes)."""
    if isinstance(exc, RemoteNotFastForward):
        return ApiError(409, exc.code, str(exc))
    if isinstance(exc, ProjectTooLarge):
        return ApiError(413, exc.code, str(exc))
    if isinstance(exc, RemoteError):
        status = 502 if type(exc) is RemoteError else 422
        return ApiError(status, exc.code, str(exc))
    return project_failure(exc)


def remote_of(body: dict[str, Any]) -> Remote:
    """The body's ``url``, ``branch`` and ``token``, checked (422 naming what is wrong)."""
    try:
        url = check_url(required_text(body, "url", MAX_URL_LENGTH))
        branch = optional_text(body, "branch", MAX_BRANCH_LENGTH)
        branch = check_branch(branch.strip()) if branch and branch.strip() else ""
    except RemoteError as exc:
        raise remote_failure(exc) from exc
    token = (optional_text(body, "token", MAX_TOKEN_LENGTH) or "").strip()
    return Remote(url, branch, token)


async def get_remote(request: Request) -> Response:
    """``GET /api/chats/{id}/remote``."""
    store, chat = await _owned(request)
    remote = await in_thread(store.chat_remote, chat)
    return JSONResponse({"remote": remote.to_dict() if remote else None})


async def put_remote(request: Request) -> Response:
    """``PUT /api/chats/{id}/remote {url, branch?, token?}``."""
    store, chat = await _owned(request)
    body = await read_object(request)
    reject_unknown(body, REMOTE_FIELDS)
    remote = remote_of(body)
    token = remote.token if "token" in body else None  # absent: keep the stored one
    branch = remote.branch or DEFAULT_BRANCH
    await in_thread(store.set_chat_remote, chat, remote.url, branch, token)
    stored = await in_thread(store.chat_remote, chat)
    return JSONResponse({"remote": stored.to_dict() if stored else None})


async def delete_remote(request: Request) -> Response:
    """``DELETE /api/chats/{id}/remote``."""
    store, chat = await _owned(request)
    if not await in_thread(store.delete_chat_remote, chat):
        raise not_found("remote", chat)
    return Response(status_code=204)


async def push_project(request: Request) -> Response:
    """``POST /api/chats/{id}/push``: push every version; the result is kept either way."""
    store, chat = await _owned(request)
    given = access(request)
    stored = await in_thread(store.chat_remote, chat)
    if stored is None:
        raise ApiError(409, "conflict", f"chat {chat!r} has no remote: set one first")
    try:
        version = await in_thread(given.store.version, chat, "latest")
        remote = Remote(stored.url, stored.branch, stored.token)
        repository = given.store.repository(chat)
        done = await in_thread(push, repository, remote, given.remote_limits)
    except VersionNotFound as exc:
        nothing = f"chat {chat!r} has no versions yet: nothing to push"
        raise ApiError(409, "conflict", nothing) from exc
    except ProjectError as exc:
        failed = {"ok": False, "code": exc.code, "message": str(exc)}
        await in_thread(store.record_push, chat, failed)
        raise remote_failure(exc) from exc
    result = {"ok": True, "outcome": done.outcome, "version": version.number}
    result |= {"commit": done.commit, "at": done.at}
    await in_thread(store.record_push, chat, result)
    after = await in_thread(store.chat_remote, chat)
    return JSONResponse({"push": result, "remote": after.to_dict() if after else None})


async def import_chat(request: Request) -> Response:
    """``POST /api/chats/import {url, branch?, token?, title?}`` -> ``201``."""
    user = await require_user(request)
    found, given = services(request), access(request)
    body = await read_object(request)
    reject_unknown(body, IMPORT_FIELDS)
    remote = remote_of(body)
    title = chat_title(body) or repository_title(remote.url)
    chat = await in_thread(found.store.create_chat, user.id, title)
    try:
        result: ImportResult = await in_thread(
            import_project, given.store, chat.id, remote, given.remote_limits, given.images_dir
        )
    except ProjectError as exc:
        await in_thread(found.store.delete_chat, chat.id)
        await in_thread(given.store.delete, chat.id)
        raise remote_failure(exc) from exc
    sandbox_id, preview = await start_preview(given, chat.id, user.id, result.template)
    if sandbox_id is not None:
        await in_thread(found.store.set_chat_sandbox, chat.id, sandbox_id)
    now = await in_thread(found.store.get_chat, chat.id)
    answer = {"chat": chat_view(now or chat), **result.to_dict()}
    answer |= {"sandbox_id": sandbox_id, "preview": preview}
    return JSONResponse(answer, 201)


async def start_preview(
    given: ProjectAccess, chat: str, owner: str, template: str
) -> tuple[str | None, dict[str, Any]]:
    """The imported version written into a new sandbox of ``template``, its dependencies
    installed (as a restore does); ``(sandbox id, {ok, errors})``. A sandbox that cannot be
    had now is no failure of the import: the chat's first run restores the version."""
    if given.starter is None:
        return None, {"ok": False, "errors": ["this server starts no sandbox for an import"]}
    errors: list[str] = []

    async def on_record(kind: str, record: Any) -> None:
        if kind == "error":
            errors.append(str(record.get("message", "")))

    try:
        sandbox = await given.starter.acquire(chat, owner, template)
    except SandboxError as exc:
        return None, {"ok": False, "errors": [str(exc)]}
    try:
        sync = ProjectSync(
            given.store, given.containers, chat, max_bytes=given.max_bytes, install=given.install
        )
        await sync.restore_if_stale(sandbox.id, on_record)
    finally:
        await given.starter.release(sandbox.id)
    return sandbox.id, {"ok": not errors, "errors": errors}


async def _owned(request: Request) -> tuple[StorePort, str]:
    """The store and the id of the request's chat, if the user owns it (404 otherwise)."""
    user = await require_user(request)
    store = services(request).store
    chat = await owned_chat(store, user.id, request.path_params["chat_id"])
    return store, chat.id


ROUTES = [
    Route("/api/chats/import", import_chat, methods=["POST"]),
    Route("/api/chats/{chat_id}/remote", get_remote, methods=["GET"]),
    Route("/api/chats/{chat_id}/remote", put_remote, methods=["PUT"]),
    Route("/api/chats/{chat_id}/remote", delete_remote, methods=["DELETE"]),
    Route("/api/chats/{chat_id}/push", push_project, methods=["POST"]),
]
