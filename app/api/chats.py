"""Chats and messages: ``/api/chats``, ``/api/chats/{id}``, ``/api/chats/{id}/messages``.

Posting a message is admission: the run service checks the limits (429 naming the one hit),
persists the message and a queued run, and queues it; the answer is ``202 {run_id,
message_id}`` at once. ``provider`` and ``model`` are resolved here first, without any network
call, so a model nobody serves or a provider without a key is a 4xx now rather than a failed
run later. With replay, ``model`` is a recording's *name*: only the built-in demos and
``KILN_RECORDINGS_DIR`` are searched (the replay provider refuses anything that looks like a
path); the API passes names, never paths.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.api.auth import require_user
from app.api.bodies import (
    MAX_BODY_BYTES,
    invalid_field,
    optional_text,
    read_object,
    reject_unknown,
    required_text,
)
from app.api.chat_removal import delete_chat
from app.api.errors import not_found
from app.api.ownership import owned_chat
from app.api.selection_field import in_project, read_selection
from app.api.services import ApiServices, ApiSettings, in_thread, services
from app.api.views import chat_view, message_view, run_view
from app.chat_images import MAX_IMAGE_BASE64, MAX_IMAGES, read_images
from app.errors import ModelRefused
from app.projects.sync import ProjectAccess
from app.providers import PROVIDER_NAMES, resolve_provider
from app.providers.models import MAX_OPEN_MODEL_LENGTH
from app.providers.replay import BUILTIN_DEMOS, recording_names
from sandbox import TEMPLATES

MAX_TITLE_LENGTH = 200
MAX_CONTENT_LENGTH = 32_000
MAX_NAME_LENGTH = 100
DEFAULT_TITLE = "New chat"
CHAT_FIELDS = frozenset({"title", "message"})
MESSAGE_FIELDS = frozenset({"content", "provider", "model", "template", "images", "selection"})
# A message's body may carry its images in base64: room for the most allowed, and no more.
MESSAGE_BODY_BYTES = MAX_BODY_BYTES + MAX_IMAGES * (MAX_IMAGE_BASE64 + 100)


async def create_chat(request: Request) -> Response:
    """``POST /api/chats {title?, message?}`` -> ``201 {chat}``.

    With ``message`` (``{content, provider?, model?, template?, selection?}``, as posted to a
    chat) the chat is created together with its first message and that message's run, or not at
    all: a refused message (too long, a limit, no key) leaves no empty chat behind. The answer
    then also holds ``run_id`` and ``message_id``.
    """
    user = await require_user(request)
    found = services(request)
    body = await read_object(request, MESSAGE_BODY_BYTES)
    reject_unknown(body, CHAT_FIELDS)
    title = chat_title(body) or DEFAULT_TITLE
    first = body.get("message")
    if first is None:
        chat = await in_thread(found.store.create_chat, user.id, title)
        return JSONResponse({"chat": chat_view(chat)}, 201)
    if not isinstance(first, dict):
        raise invalid_field("message", f"must be an object, not {type(first).__name__}")
    message = await read_message(request, user.id, first, chat_id=None)
    chat, run_id, message_id = await found.runs.start_chat(user.id, title, **message)
    answer = {"chat": chat_view(chat), "run_id": run_id, "message_id": message_id}
    return JSONResponse(answer, 201)


def chat_title(body: dict[str, Any]) -> str | None:
    """The body's ``title`` without surrounding spaces, or None when absent or blank."""
    return (optional_text(body, "title", MAX_TITLE_LENGTH) or "").strip() or None


async def list_chats(request: Request) -> Response:
    """``GET /api/chats`` -> ``{chats}``, newest first."""
    user = await require_user(request)
    chats = await in_thread(services(request).store.list_chats, user.id)
    ordered = sorted(chats, key=lambda chat: chat.created, reverse=True)
    return JSONResponse({"chats": [chat_view(chat) for chat in ordered]})


async def get_chat(request: Request) -> Response:
    """``GET /api/chats/{id}`` -> ``{chat, messages, runs}``."""
    user = await require_user(request)
    store = services(request).store
    chat = await owned_chat(store, user.id, request.path_params["chat_id"])
    messages = await in_thread(store.list_messages, chat.id)
    runs = await in_thread(store.list_runs, chat.id)
    return JSONResponse(
        {
            "chat": chat_view(chat),
            "messages": [message_view(message) for message in messages],
            "runs": [run_view(run) for run in runs],
        }
    )


async def post_message(request: Request) -> Response:
    """``POST /api/chats/{id}/messages {content, provider?, model?, template?, images?,
    selection?}`` -> 202 (``selection``: see :mod:`app.api.selection_field`)."""
    user = await require_user(request)
    found = services(request)
    chat = await owned_chat(found.store, user.id, request.path_params["chat_id"])
    body = await read_object(request, MESSAGE_BODY_BYTES)
    message = await read_message(request, user.id, body, chat.id)
    run_id, message_id = await found.runs.submit(user.id, chat.id, **message)
    return JSONResponse({"run_id": run_id, "message_id": message_id}, 202)


async def read_message(
    request: Request, user_id: str, body: dict[str, Any], chat_id: str | None
) -> dict[str, Any]:
    """A message's fields, checked (422 naming the field; the provider choice as the worker
    will make it; images by their bytes, app.chat_images; a selection against chat
    ``chat_id``'s project, ``None`` for a new chat): ``{content, provider, model,
    template, images, selection}``."""
    found = services(request)
    reject_unknown(body, MESSAGE_FIELDS)
    items = read_selection(body)
    content = required_text(body, "content", MAX_CONTENT_LENGTH)
    provider = optional_text(body, "provider", MAX_NAME_LENGTH)
    model = optional_text(body, "model", MAX_OPEN_MODEL_LENGTH)
    template = optional_text(body, "template", MAX_NAME_LENGTH)
    if provider is not None and provider not in PROVIDER_NAMES:
        raise invalid_field("provider", f"must be one of {list(PROVIDER_NAMES)}, not {provider!r}")
    if template is not None and template not in TEMPLATES:
        raise invalid_field("template", f"must be one of {sorted(TEMPLATES)}, not {template!r}")
    images = read_images(body.get("images"))
    await check_provider_choice(found, user_id, provider, model)
    projects: ProjectAccess | None = getattr(request.app.state, "projects", None)
    selection = await in_project(projects.store if projects else None, chat_id, items)
    message = {"content": content, "provider": provider, "model": model, "template": template}
    return {**message, "images": images, "selection": selection}


async def get_image(request: Request) -> Response:
    """``GET /api/chats/{id}/images/{image_id}`` -> the image's bytes; 404 unless the chat is
    the caller's and the image belongs to one of its messages."""
    user = await require_user(request)
    store = services(request).store
    chat = await owned_chat(store, user.id, request.path_params["chat_id"])
    image_id = request.path_params["image_id"]
    image = await in_thread(store.chat_image, chat.id, image_id)
    if image is None:
        raise not_found("image", image_id)
    # Private: the bytes are the owner's; nosniff: served as the type its bytes were checked to be.
    headers = {"Cache-Control": "private, max-age=3600", "X-Content-Type-Options": "nosniff"}
    return Response(image.data, media_type=image.media_type, headers=headers)


async def rename_chat(request: Request) -> Response:
    """``PATCH /api/chats/{id} {title}`` -> ``{chat}``."""
    user = await require_user(request)
    store = services(request).store
    chat = await owned_chat(store, user.id, request.path_params["chat_id"])
    body = await read_object(request)
    reject_unknown(body, frozenset({"title"}))
    title = required_text(body, "title", MAX_TITLE_LENGTH).strip()
    renamed = await in_thread(store.rename_chat, chat.id, title)
    if renamed is None:  # deleted meanwhile
        raise not_found("chat", chat.id)
    return JSONResponse({"chat": chat_view(renamed)})


async def check_provider_choice(
    found: ApiServices, user_id: str, provider: str | None, model: str | None
) -> None:
    """Resolve provider and model as the worker will (raises ConfigError / ModelRefused).

    A replay model must name a recording that exists now, not only a well-formed name.
    """
    keys = await in_thread(found.store.provider_keys, user_id)
    choice = resolve_provider(provider, model, found.settings.provider_env, keys)
    if choice.provider == "replay":
        known = await in_thread(recording_names, recording_folders(found.settings))
        if choice.model not in known:
            raise ModelRefused(
                f"no recording named {choice.model!r}; recordings: {', '.join(known) or 'none'}"
            )


def recording_folders(settings: ApiSettings) -> list[Path]:
    """Where replay looks for recordings: the operator's folder first, then the demos."""
    folders = [settings.recordings_dir] if settings.recordings_dir else []
    return [*folders, BUILTIN_DEMOS]


ROUTES = [
    Route("/api/chats", create_chat, methods=["POST"]),
    Route("/api/chats", list_chats, methods=["GET"]),
    Route("/api/chats/{chat_id}", get_chat, methods=["GET"]),
    Route("/api/chats/{chat_id}", rename_chat, methods=["PATCH"]),
    Route("/api/chats/{chat_id}", delete_chat, methods=["DELETE"]),
    Route("/api/chats/{chat_id}/messages", post_message, methods=["POST"]),
    Route("/api/chats/{chat_id}/images/{image_id}", get_image, methods=["GET"]),
]
