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

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.api.auth import require_user
from app.api.bodies import (
    invalid_field,
    optional_text,
    read_object,
    reject_unknown,
    required_text,
)
from app.api.ownership import owned_chat
from app.api.services import ApiServices, ApiSettings, in_thread, services
from app.api.views import chat_view, message_view, run_view
from app.errors import ModelRefused
from app.providers import PROVIDER_NAMES, resolve_provider
from app.providers.models import MAX_OPEN_MODEL_LENGTH
from app.providers.replay import BUILTIN_DEMOS, recording_names
from sandbox import TEMPLATES

MAX_TITLE_LENGTH = 200
MAX_CONTENT_LENGTH = 32_000
MAX_NAME_LENGTH = 100
DEFAULT_TITLE = "New chat"
CHAT_FIELDS = frozenset({"title"})
MESSAGE_FIELDS = frozenset({"content", "provider", "model", "template"})


async def create_chat(request: Request) -> Response:
    """``POST /api/chats {title?}`` -> ``201 {chat}``."""
    user = await require_user(request)
    body = await read_object(request)
    reject_unknown(body, CHAT_FIELDS)
    title = (optional_text(body, "title", MAX_TITLE_LENGTH) or "").strip() or DEFAULT_TITLE
    chat = await in_thread(services(request).store.create_chat, user.id, title)
    return JSONResponse({"chat": chat_view(chat)}, 201)


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
    """``POST /api/chats/{id}/messages {content, provider?, model?, template?}`` -> 202."""
    user = await require_user(request)
    found = services(request)
    chat = await owned_chat(found.store, user.id, request.path_params["chat_id"])
    body = await read_object(request)
    reject_unknown(body, MESSAGE_FIELDS)
    content = required_text(body, "content", MAX_CONTENT_LENGTH)
    provider = optional_text(body, "provider", MAX_NAME_LENGTH)
    model = optional_text(body, "model", MAX_OPEN_MODEL_LENGTH)
    template = optional_text(body, "template", MAX_NAME_LENGTH)
    if provider is not None and provider not in PROVIDER_NAMES:
        raise invalid_field("provider", f"must be one of {list(PROVIDER_NAMES)}, not {provider!r}")
    if template is not None and template not in TEMPLATES:
        raise invalid_field("template", f"must be one of {sorted(TEMPLATES)}, not {template!r}")
    await check_provider_choice(found, user.id, provider, model)
    run_id, message_id = await found.runs.submit(
        user.id, chat.id, content, provider=provider, model=model, template=template
    )
    return JSONResponse({"run_id": run_id, "message_id": message_id}, 202)


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
    Route("/api/chats/{chat_id}/messages", post_message, methods=["POST"]),
]
