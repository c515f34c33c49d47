"""Request bodies: a size limit, JSON objects only, and field checks with clear messages.

``read_object(request)`` reads at most ``MAX_BODY_BYTES`` (413 beyond, checked on the declared
``Content-Length`` and again while reading, since a chunked body declares nothing), and answers
400 for a body that is not a JSON object, including JSON that parses but that nothing downstream
can hold: nesting past the parser's recursion limit, integers past Python's digit limit, and
lone surrogates (``"\ud800"``: SQLite and UTF-8 refuse them). The field helpers answer 422
naming the field and what was wrong with it.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from app.api.errors import ApiError

MAX_BODY_BYTES = 64 * 1024


def body_too_large(limit: int) -> ApiError:
    """The 413 for a body over ``limit`` bytes."""
    return ApiError(413, "body_too_large", f"the request body is over {limit} bytes")


async def read_object(request: Request, limit: int = MAX_BODY_BYTES) -> dict[str, Any]:
    """The request's JSON object (an empty body is ``{}``); 413 or 400 otherwise."""
    declared = request.headers.get("content-length", "")
    # ASCII digits only: '²'.isdigit() is true and int('²') fails.
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise body_too_large(limit)
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > limit:
            raise body_too_large(limit)
    if not raw.strip():
        return {}
    value = parse_json(bytes(raw))
    if not isinstance(value, dict):
        kind = type(value).__name__
        raise ApiError(400, "invalid_json", f"the request body must be a JSON object, not {kind}")
    return value


def invalid_json(message: str) -> ApiError:
    """The 400 for a body that is no usable JSON."""
    return ApiError(400, "invalid_json", f"the request body {message}")


def parse_json(raw: bytes) -> Any:
    """``raw`` parsed as JSON that can be stored and sent on; a 400 ``invalid_json`` if not."""
    try:
        value = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise invalid_json(f"is not valid JSON: {exc}") from exc
    except RecursionError:
        raise invalid_json("is nested deeper than the JSON parser's limit") from None
    except ValueError as exc:  # int(): "Exceeds the limit (4300 digits) for integer string"
        raise invalid_json(f"holds a number with more digits than allowed: {exc}") from None
    try:
        # One pass over the parsed value (at most MAX_BODY_BYTES of it): a lone surrogate,
        # valid JSON escape that it is, cannot be encoded to UTF-8, so it cannot be stored.
        json.dumps(value, ensure_ascii=False).encode()
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start : exc.end]
        raise invalid_json(f"holds a lone surrogate ({bad!r}); send UTF-8 text") from None
    return value


def invalid_field(name: str, problem: str) -> ApiError:
    """The 422 for field ``name``."""
    return ApiError(422, "invalid_request", f"field {name!r} {problem}", field=name)


def optional_text(body: dict[str, Any], name: str, max_length: int) -> str | None:
    """``body[name]`` if present and not null: a string of at most ``max_length`` characters."""
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise invalid_field(name, f"must be a string, not {type(value).__name__}")
    if len(value) > max_length:
        raise invalid_field(name, f"is longer than {max_length} characters ({len(value)})")
    return value


def required_text(body: dict[str, Any], name: str, max_length: int) -> str:
    """``body[name]``: a string with at least one non-space character, at most ``max_length``."""
    value = optional_text(body, name, max_length)
    if value is None:
        raise invalid_field(name, "is required")
    if not value.strip():
        raise invalid_field(name, "must not be empty")
    return value


def reject_unknown(body: dict[str, Any], known: frozenset[str]) -> None:
    """422 for a field the endpoint does not take (a typo should not be silently ignored)."""
    unknown = sorted(set(body) - known)
    if unknown:
        raise invalid_field(unknown[0], f"is not accepted here; known fields: {sorted(known)}")


def required_int(body: dict[str, Any], name: str, minimum: int, maximum: int) -> int:
    """``body[name]``: a whole number from ``minimum`` to ``maximum`` (not a bool, not 1.0)."""
    value = body.get(name)
    if value is None:
        raise invalid_field(name, "is required")
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid_field(name, f"must be a whole number, not {type(value).__name__}")
    if not minimum <= value <= maximum:
        raise invalid_field(name, f"must be from {minimum} to {maximum}, not {value}")
    return value
