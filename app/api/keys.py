"""``PUT /api/me/keys/{provider} {key}``: store a user's provider key (encrypted, never returned);
``DELETE /api/me/keys/{provider}``: forget it (messages then use the server's key, if any, or
the replay demo, as ``GET /api/me``'s ``default`` shows).

A key is checked for its provider's *format* before it is stored (no network call):

- ``anthropic``: ``sk-ant-`` followed by at least 20 of ``[A-Za-z0-9_-]``;
- ``openai``: ``sk-`` followed by at least 20 of ``[A-Za-z0-9_-]`` (project and service-account
  keys ``sk-proj-...``/``sk-svcacct-...`` included), but not an Anthropic key;
- ``google``: any single token of 20 to 200 printable characters without spaces (Gemini keys
  look like ``AIza...``, but gateways issue others);
- ``openai-compatible``: any single token of printable characters without spaces (OpenRouter's
  ``sk-or-...``, a vLLM ``--api-key``, a gateway's token; local servers need no key at all).

Every key is at most ``MAX_KEY_LENGTH`` characters, and surrounding whitespace (a pasted newline)
is dropped. The error message never repeats the key.
"""

from __future__ import annotations

import re

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.api.auth import require_user
from app.api.bodies import invalid_field, read_object, reject_unknown, required_text
from app.api.errors import ApiError, not_found
from app.api.services import in_thread, services

MAX_KEY_LENGTH = 512
KEY_FORMATS: dict[str, tuple[re.Pattern[str], str]] = {
    "anthropic": (re.compile(r"sk-ant-[A-Za-z0-9_-]{20,}"), "an Anthropic key starts 'sk-ant-'"),
    "openai": (
        re.compile(r"sk-(?!ant-)[A-Za-z0-9_-]{20,}"),
        "an OpenAI key starts 'sk-' (and is not an Anthropic 'sk-ant-' key)",
    ),
    "google": (re.compile(r"[\x21-\x7e]{20,200}"), "a Google key is one word, like 'AIza...'"),
    "openai-compatible": (re.compile(r"[\x21-\x7e]+"), "a server's key is one word"),
}


def validate_key(provider: str, key: str) -> str:
    """``key`` without surrounding whitespace if it has ``provider``'s format; else a 422."""
    pattern, hint = KEY_FORMATS[provider]
    key = key.strip()
    if not pattern.fullmatch(key):
        raise invalid_field("key", f"does not look like a {provider} API key: {hint}")
    return key


async def put_key(request: Request) -> Response:
    """Validate, encrypt and store the key; ``204``."""
    user = await require_user(request)
    provider = request.path_params["provider"]
    if provider not in KEY_FORMATS:
        raise not_found("provider", provider)
    body = await read_object(request)
    reject_unknown(body, frozenset({"key"}))
    key = validate_key(provider, required_text(body, "key", MAX_KEY_LENGTH))
    await in_thread(services(request).store.set_provider_key, user.id, provider, key)
    return Response(status_code=204)


async def delete_key(request: Request) -> Response:
    """Forget the user's key for the provider; ``204`` (404 when none was stored)."""
    user = await require_user(request)
    provider = request.path_params["provider"]
    if provider not in KEY_FORMATS:
        raise not_found("provider", provider)
    removed = await in_thread(services(request).store.delete_provider_key, user.id, provider)
    if not removed:
        raise ApiError(404, "key_not_found", f"no {provider} key is stored for you")
    return Response(status_code=204)


ROUTES = [
    Route("/api/me/keys/{provider}", put_key, methods=["PUT"]),
    Route("/api/me/keys/{provider}", delete_key, methods=["DELETE"]),
]
