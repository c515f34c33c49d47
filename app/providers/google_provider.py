"""Google Gemini through the official async SDK (``google-genai``, ``client.aio``).

The SDK calls ``models/{model}:streamGenerateContent?alt=sse``; each chunk carries text parts
(parts marked ``thought`` are the model's hidden reasoning and are skipped), a cumulative
``usageMetadata`` (output = candidates + thoughts tokens, as billed) and, on the last one, a
``finishReason``; a stream without one was cut. A blocked prompt ends with ``promptFeedback``
and no candidates (``REFUSED``). An ``{"error": ...}`` chunk inside the stream is raised by the
SDK like an HTTP error.

The SDK's own retries, automatic continuation hops and automatic function calling are all off:
kiln's :class:`~app.providers.base.ProviderStream` is the only retry policy.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, Mapping
from typing import Any

import anyio
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

from app.errors import (
    AuthError,
    ContextTooLong,
    ModelRefused,
    Overloaded,
    ProviderError,
    RateLimited,
)
from app.providers.base import (
    FinishReason,
    ProviderRequest,
    Sleep,
    StreamOutcome,
    Usage,
)
from app.providers.http_errors import (
    error_for_status,
    incomplete_stream,
    sdk_errors,
)
from app.providers.retry import RetryPolicy, retry_after_seconds
from app.providers.sdk_provider import SDKProvider

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com/"
API_VERSION = "v1beta"  # pinned: the SDK's default moved between releases and follows an env var
NAME = "google"

_REFUSALS = frozenset(
    {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "MODEL_ARMOR"}
)
_STATUS_ERRORS: dict[str, type[ProviderError]] = {
    "UNAUTHENTICATED": AuthError,
    "PERMISSION_DENIED": AuthError,
    "UNAVAILABLE": Overloaded,
    "NOT_FOUND": ModelRefused,
}
# Gemini reports a too-long prompt as a plain INVALID_ARGUMENT; only the text tells.
_CONTEXT_TOO_LONG = re.compile(r"input token count .* exceeds the maximum|context window", re.I)
_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)s")


class GoogleProvider(SDKProvider):
    """Streams answers from the Gemini API."""

    name = NAME

    def __init__(
        self,
        api_key: str,
        base_url: str | None = None,
        *,
        retry_policy: RetryPolicy | None = None,
        sleep: Sleep = anyio.sleep,
        timeout_seconds: float = 300.0,
    ) -> None:
        """A provider using ``api_key``; ``base_url`` points at a gateway or a test server."""
        super().__init__(retry_policy, sleep, api_key=api_key)
        options = genai_types.HttpOptions(
            base_url=base_url or DEFAULT_BASE_URL,
            api_version=API_VERSION,
            timeout=int(timeout_seconds * 1000),
            retry_options=genai_types.HttpRetryOptions(attempts=1),
        )
        self._client = genai.Client(api_key=api_key, vertexai=False, http_options=options)

    async def aclose(self) -> None:
        """Close the SDK's HTTP clients."""
        await self._client.aio.aclose()

    async def _attempt(
        self, request: ProviderRequest, outcome: StreamOutcome
    ) -> AsyncGenerator[str, None]:
        """One request: yield its text deltas, fill ``outcome``, raise kiln errors."""
        contents, config = _contents(request), _config(request)
        chunks: Any = None  # the SDK's async generator (typed as a bare AsyncIterator)
        # A body that is not JSON (UnknownApiResponseError) is a transport failure too.
        transport = (genai_errors.UnknownApiResponseError,)
        try:
            with sdk_errors(NAME, genai_errors.APIError, _api_error, transport):
                chunks = await self._client.aio.models.generate_content_stream(
                    model=request.model, contents=contents, config=config
                )
                async for chunk in chunks:
                    text = _read_chunk(chunk, outcome)
                    if text:
                        yield text
        finally:
            if chunks is not None:
                # Only the SDK's outer generator: the HTTP response is closed by ProviderStream
                # cancelling the pending read, which unwinds the SDK's nested generators.
                await chunks.aclose()
        if outcome.finish_reason is None:
            raise incomplete_stream(NAME, "finishReason")


def _contents(request: ProviderRequest) -> list[genai_types.Content]:
    """The conversation in Gemini's terms (the assistant is the ``model``); a message's images
    are inline data parts ahead of its text."""
    return [
        genai_types.Content(
            role="user" if message.role == "user" else "model",
            parts=[
                *(
                    genai_types.Part(
                        inline_data=genai_types.Blob(mime_type=image.media_type, data=image.data)
                    )
                    for image in message.images
                ),
                genai_types.Part(text=message.content),
            ],
        )
        for message in request.messages
    ]


def _config(request: ProviderRequest) -> genai_types.GenerateContentConfig:
    """System prompt and output cap; the SDK's function calling and continuation hops off."""
    return genai_types.GenerateContentConfig(
        system_instruction=request.system or None,
        max_output_tokens=request.max_output_tokens,
        automatic_function_calling=genai_types.AutomaticFunctionCallingConfig(disable=True),
        automatic_continuation=False,
    )


def _read_chunk(chunk: genai_types.GenerateContentResponse, outcome: StreamOutcome) -> str:
    """The answer text of one chunk; record usage and the finish reason as they come."""
    usage = chunk.usage_metadata
    if usage is not None:
        output = (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0)
        outcome.usage = Usage(usage.prompt_token_count or 0, output)
    feedback = chunk.prompt_feedback
    if feedback is not None and feedback.block_reason is not None:
        outcome.finish_reason = FinishReason.REFUSED
    if not chunk.candidates:
        return ""
    candidate = chunk.candidates[0]
    if candidate.finish_reason is not None:
        outcome.finish_reason = _finish_reason(str(candidate.finish_reason.value))
    parts = candidate.content.parts if candidate.content else None
    return "".join(part.text for part in parts or () if part.text and not part.thought)


def _finish_reason(reason: str) -> FinishReason:
    if reason == "STOP":
        return FinishReason.STOP
    if reason == "MAX_TOKENS":
        return FinishReason.MAX_TOKENS
    return FinishReason.REFUSED if reason in _REFUSALS else FinishReason.OTHER


def _api_error(exc: genai_errors.APIError) -> ProviderError:
    """kiln's error for a Gemini error response or an error chunk inside the stream."""
    details: Any = exc.details
    error = details.get("error", details) if isinstance(details, Mapping) else {}
    status_name = str(exc.status or "")
    detail = str(exc.message or exc)
    message = f"google {status_name or 'error'} (HTTP {exc.code}): {detail!r}"
    reasons = {item.get("reason") for item in _detail_items(error)}
    if "API_KEY_INVALID" in reasons:
        return AuthError(message)
    if exc.code == 429 or status_name == "RESOURCE_EXHAUSTED":
        return RateLimited(message, _retry_delay(error) or _header_retry_after(exc))
    if _CONTEXT_TOO_LONG.search(detail):
        return ContextTooLong(message)
    if status_name in _STATUS_ERRORS:
        return _STATUS_ERRORS[status_name](message)
    return error_for_status(NAME, exc.code, detail)


def _detail_items(error: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    items = error.get("details")
    return [item for item in items if isinstance(item, Mapping)] if isinstance(items, list) else []


def _retry_delay(error: Mapping[str, Any]) -> float | None:
    """The ``retryDelay`` of a ``google.rpc.RetryInfo`` detail (``"33s"``), if any."""
    for item in _detail_items(error):
        if str(item.get("@type", "")).endswith("google.rpc.RetryInfo"):
            match = _DURATION.fullmatch(str(item.get("retryDelay", "")))
            if match:
                return float(match.group(1))
    return None


def _header_retry_after(exc: genai_errors.APIError) -> float | None:
    headers = getattr(exc.response, "headers", None)
    return retry_after_seconds(headers) if isinstance(headers, Mapping) else None
