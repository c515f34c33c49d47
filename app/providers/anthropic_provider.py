"""Anthropic Messages API through the official async SDK (``anthropic.AsyncAnthropic``).

Streaming events used (everything else, thinking and tool-use deltas included, is skipped):
``message_start`` (input usage), ``content_block_delta`` with a ``text_delta`` (the answer),
``message_delta`` (stop reason, output usage), ``message_stop`` (the answer is complete; a stream
that ends without it was cut). An ``error`` event inside a 200 stream (e.g. ``overloaded_error``)
arrives from the SDK as an ``APIStatusError`` whose ``type`` names the error; it is mapped like an
HTTP error of that type.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator

import anthropic
import anyio
from anthropic.types import (
    ImageBlockParam,
    MessageParam,
    RawContentBlockDeltaEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
    RawMessageStreamEvent,
    TextBlockParam,
    TextDelta,
)

from app.errors import (
    AuthError,
    ContextTooLong,
    ModelRefused,
    Overloaded,
    ProviderError,
    ProviderUnavailable,
    RateLimited,
)
from app.providers.base import (
    FinishReason,
    Message,
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

DEFAULT_BASE_URL = "https://api.anthropic.com"
NAME = "anthropic"

_STOP_REASONS: dict[str, FinishReason] = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "max_tokens": FinishReason.MAX_TOKENS,
    "model_context_window_exceeded": FinishReason.MAX_TOKENS,
    "refusal": FinishReason.REFUSED,
}
_ERROR_TYPES: dict[str, type[ProviderError]] = {
    "authentication_error": AuthError,
    "permission_error": AuthError,
    "overloaded_error": Overloaded,
    "api_error": ProviderUnavailable,
    "not_found_error": ModelRefused,
    "request_too_large": ContextTooLong,
}
# Anthropic reports a too-long prompt as a plain invalid_request_error; only the text tells.
_CONTEXT_TOO_LONG = re.compile(r"prompt is too long|exceed context limit|context window", re.I)


class AnthropicProvider(SDKProvider):
    """Streams answers from Anthropic's Messages API."""

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
        # max_retries=0: kiln's ProviderStream is the only retry policy.
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url or DEFAULT_BASE_URL,
            max_retries=0,
            timeout=timeout_seconds,
        )

    async def aclose(self) -> None:
        """Close the SDK's HTTP client."""
        await self._client.close()

    async def _attempt(
        self, request: ProviderRequest, outcome: StreamOutcome
    ) -> AsyncGenerator[str, None]:
        """One request: yield its text deltas, fill ``outcome``, raise kiln errors."""
        reader = _EventReader(outcome)
        with sdk_errors(
            NAME, anthropic.APIStatusError, _status_error, (anthropic.APIConnectionError,)
        ):
            stream = await self._client.messages.create(
                model=request.model,
                max_tokens=request.max_output_tokens,
                system=request.system or anthropic.omit,
                messages=_messages(request),
                stream=True,
            )
            async with stream:
                async for event in stream:
                    text = reader.read(event)
                    if text:
                        yield text
        if outcome.finish_reason is None:
            raise incomplete_stream(NAME, "message_stop")


def _messages(request: ProviderRequest) -> list[MessageParam]:
    """The conversation as Messages API parameters."""
    messages: list[MessageParam] = []
    for message in request.messages:
        if message.role == "user":
            messages.append({"role": "user", "content": _user_content(message)})
        else:
            messages.append({"role": "assistant", "content": message.content})
    return messages


def _user_content(message: Message) -> str | list[ImageBlockParam | TextBlockParam]:
    """The text alone, or image blocks (base64 sources) ahead of the text, as Anthropic
    advises for images."""
    if not message.images:
        return message.content
    blocks: list[ImageBlockParam | TextBlockParam] = [
        {
            "type": "image",
            # The media type is one of the four app.chat_images recognised by the bytes.
            "source": {"type": "base64", "media_type": image.media_type, "data": image.base64},
        }
        for image in message.images
    ]
    return [*blocks, {"type": "text", "text": message.content}]


class _EventReader:
    """Turns the SDK's raw stream events into text, usage and a finish reason."""

    def __init__(self, outcome: StreamOutcome) -> None:
        self._outcome = outcome
        self._stop_reason: str | None = None

    def read(self, event: RawMessageStreamEvent) -> str:
        """The text ``event`` carries (often none); record usage and the end as they come."""
        if isinstance(event, RawContentBlockDeltaEvent):
            return event.delta.text if isinstance(event.delta, TextDelta) else ""
        if isinstance(event, RawMessageStartEvent):
            usage = event.message.usage
            input_tokens = (
                usage.input_tokens
                + (usage.cache_creation_input_tokens or 0)
                + (usage.cache_read_input_tokens or 0)
            )
            self._outcome.usage = Usage(input_tokens, usage.output_tokens)
        elif isinstance(event, RawMessageDeltaEvent):
            self._stop_reason = event.delta.stop_reason
            self._outcome.usage = Usage(self._outcome.usage.input_tokens, event.usage.output_tokens)
        elif isinstance(event, RawMessageStopEvent):
            reason = _STOP_REASONS.get(self._stop_reason or "", FinishReason.OTHER)
            self._outcome.finish_reason = reason
        return ""


def _status_error(exc: anthropic.APIStatusError) -> ProviderError:
    """kiln's error for an Anthropic error response (or an ``error`` event inside a stream)."""
    detail = exc.api_message or exc.message
    kind = str(exc.type or "")
    where = "in the stream" if exc.status_code < 400 else f"HTTP {exc.status_code}"
    message = f"anthropic {kind or 'error'} ({where}): {detail!r}"
    if kind == "rate_limit_error" or exc.status_code == 429:
        return RateLimited(message, retry_after_seconds(exc.response.headers))
    if kind == "invalid_request_error" and _CONTEXT_TOO_LONG.search(detail):
        return ContextTooLong(message)
    if kind in _ERROR_TYPES:
        return _ERROR_TYPES[kind](message)
    return error_for_status(NAME, exc.status_code, detail)
