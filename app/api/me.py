"""``GET /api/me``: who is signed in and what they can run.

``{user: {id, name}, providers: [names with a stored key], available: [providers a message may
name now], default: {provider, model}, demos: [recording names]}``. ``default`` is what a message
without ``provider``/``model`` would use (the user's keys, then the server's, else the replay
demo); ``available`` adds the server's keys and an ``openai-compatible`` server when one is set
up; ``demos`` are the recordings the replay provider can play (``KILN_RECORDINGS_DIR`` and the
built-in demos). ``limits: {message_chars, title_chars}`` are the lengths a message and a chat
title may have, so a client can say so before sending (the server refuses longer with 422).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.api.auth import require_user
from app.api.chats import MAX_CONTENT_LENGTH, MAX_TITLE_LENGTH, recording_folders
from app.api.services import in_thread, services
from app.providers import configured_providers, resolve_provider
from app.providers.replay import recording_names


async def get_me(request: Request) -> Response:
    """The signed-in user, their stored providers, the default choice and the demos."""
    user = await require_user(request)
    found = services(request)
    names = await in_thread(found.store.provider_key_names, user.id)
    keys = await in_thread(found.store.provider_keys, user.id)
    choice = resolve_provider(None, None, found.settings.provider_env, keys)
    demos = await in_thread(recording_names, recording_folders(found.settings))
    return JSONResponse(
        {
            "user": {"id": user.id, "name": user.name},
            "providers": sorted(names),
            "available": configured_providers(found.settings.provider_env, keys),
            "default": {"provider": choice.provider, "model": choice.model},
            "demos": demos,
            "limits": {"message_chars": MAX_CONTENT_LENGTH, "title_chars": MAX_TITLE_LENGTH},
        }
    )


ROUTES = [Route("/api/me", get_me, methods=["GET"])]
