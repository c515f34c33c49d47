"""The app's environment of a chat: ``/api/chats/{id}/env`` and ``/api/chats/{id}/env/{name}``.

- ``GET /api/chats/{id}/env`` -> ``{variables: [{name, secret, public, value?, updated}],
  limits}``: a secret's value is never in it (write-only), a plain variable's is;
- ``PUT /api/chats/{id}/env/{name} {value, secret?}`` -> ``{variable, dev_server}``: stores (or
  replaces) the variable, encrypted, and writes the chat's environment into its running
  sandbox, whose dev server starts over with it (``dev_server``: ``"restarting"``, or
  ``"not_running"`` when no container runs: the next one gets it);
- ``DELETE /api/chats/{id}/env/{name}`` -> ``{dev_server}`` (404 when there was none).

What kiln refuses (:mod:`app.projects.app_env`) is a ``422 app_env_refused`` naming the
``field`` and saying why in words, never repeating a value: a name that is no POSIX
environment name or is reserved, a value over the size limit or with a NUL, a chat over its
count or size, and a secret with Vite's public ``VITE_`` prefix.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.api.auth import require_user
from app.api.bodies import invalid_field, read_object, reject_unknown
from app.api.errors import ApiError, not_found
from app.api.ownership import owned_chat
from app.api.ports import ChatRow
from app.api.services import ApiServices, in_thread, services
from app.projects import app_env
from app.projects.errors import AppEnvRefused
from app.store.app_env import PUBLIC_PREFIXES
from sandbox import SandboxNotFound

PUT_FIELDS = frozenset({"value", "secret"})
LIMITS = {
    "max_name_length": app_env.MAX_NAME_LENGTH,
    "max_value_bytes": app_env.MAX_VALUE_BYTES,
    "max_variables": app_env.MAX_VARIABLES,
    "max_total_bytes": app_env.MAX_TOTAL_BYTES,
    "public_prefixes": list(PUBLIC_PREFIXES),
}


def refused(exc: AppEnvRefused) -> ApiError:
    """The 422 for a variable kiln will not keep."""
    return ApiError(422, exc.code, str(exc), field=exc.field)


async def list_variables(request: Request) -> Response:
    """``GET /api/chats/{id}/env``: names, kinds, public flags; plain variables' values."""
    user = await require_user(request)
    found = services(request)
    chat = await owned_chat(found.store, user.id, request.path_params["id"])
    variables = await in_thread(found.store.app_variables, chat.id)
    return JSONResponse({"variables": [item.listing() for item in variables], "limits": LIMITS})


async def put_variable(request: Request) -> Response:
    """``PUT /api/chats/{id}/env/{name} {value, secret?}``: store it, restart the dev server."""
    user = await require_user(request)
    found = services(request)
    chat = await owned_chat(found.store, user.id, request.path_params["id"])
    body = await read_object(request)
    reject_unknown(body, PUT_FIELDS)
    value, secret = body.get("value"), body.get("secret", False)
    if not isinstance(value, str):
        raise invalid_field("value", "is required: a string (it may be empty)")
    if not isinstance(secret, bool):
        raise invalid_field("secret", f"must be true or false, not {type(secret).__name__}")
    try:
        variable = app_env.check_variable(request.path_params["name"], value, secret=secret)
        stored = await in_thread(app_env.put_variable, found.store, chat.id, variable)
    except AppEnvRefused as exc:
        raise refused(exc) from None
    return JSONResponse(
        {"variable": stored.listing(), "dev_server": await apply_to_sandbox(found, chat)}
    )


async def delete_variable(request: Request) -> Response:
    """``DELETE /api/chats/{id}/env/{name}``: forget it, restart the dev server."""
    user = await require_user(request)
    found = services(request)
    chat = await owned_chat(found.store, user.id, request.path_params["id"])
    name = request.path_params["name"]
    if not await in_thread(found.store.delete_app_variable, chat.id, name):
        raise not_found("variable", name)
    return JSONResponse({"dev_server": await apply_to_sandbox(found, chat)})


async def apply_to_sandbox(found: ApiServices, chat: ChatRow) -> str:
    """Write the chat's environment into its sandbox, if one runs; what the dev server does."""
    if not chat.sandbox_id:
        return "not_running"
    try:
        applied = await found.sandboxes.apply_app_env(chat.sandbox_id)
    except SandboxNotFound:
        return "not_running"
    return "restarting" if applied else "not_running"


ROUTES = [
    Route("/api/chats/{id}/env", list_variables, methods=["GET"]),
    Route("/api/chats/{id}/env/{name}", put_variable, methods=["PUT"]),
    Route("/api/chats/{id}/env/{name}", delete_variable, methods=["DELETE"]),
]
