"""OpenAI through the official async SDK (``openai.AsyncOpenAI``): Chat Completions or Responses.

Which API a model uses is data (:attr:`app.providers.models.ModelFamily.api`): the reasoning
families (o-series, gpt-5) go through the Responses API, the others through Chat Completions.

- **Chat Completions** is asked for ``stream_options={"include_usage": true}``: the text is in
  ``choices[0].delta.content``, ``finish_reason`` comes on the last choice chunk, usage on a final
  chunk with no choices, then ``[DONE]``. A stream without a ``finish_reason`` was cut.
- **Responses** (``store=False``: kiln keeps the conversation itself): the text is in
  ``response.output_text.delta`` events; ``response.completed`` or ``response.incomplete`` end it
  with usage; ``response.failed`` and ``error`` events are errors (a too-long input arrives as an
  ``error`` event with code ``context_length_exceeded`` inside a 200 stream).
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator

import anyio
import openai
from openai.types.chat import (
    ChatCompletionChunk,
    ChatCompletionContentPartParam,
    ChatCompletionMessageParam,
)
from openai.types.responses import (
    ResponseCompletedEvent,
    ResponseErrorEvent,
    ResponseFailedEvent,
    ResponseIncompleteEvent,
    ResponseInputContentParam,
    ResponseInputParam,
    ResponseStreamEvent,
    ResponseTextDeltaEvent,
    ResponseUsage,
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
from app.providers.models import ModelFamily
from app.providers.retry import RetryPolicy, retry_after_seconds
from app.providers.sdk_provider import Attempt, SDKProvider

DEFAULT_BASE_URL = "https://api.openai.com/v1"
NAME = "openai"

_CHAT_FINISH: dict[str, FinishReason] = {
    "stop": FinishReason.STOP,
    "length": FinishReason.MAX_TOKENS,
    "content_filter": FinishReason.REFUSED,
}
_INCOMPLETE_REASONS: dict[str, FinishReason] = {
    "max_output_tokens": FinishReason.MAX_TOKENS,
    "content_filter": FinishReason.REFUSED,
}
_CODE_ERRORS: dict[str, type[ProviderError]] = {
    "context_length_exceeded": ContextTooLong,
    "invalid_api_key": AuthError,
    "insufficient_quota": AuthError,  # a billing block: retrying cannot help
    "model_not_found": ModelRefused,
    "rate_limit_exceeded": RateLimited,
    "server_error": ProviderUnavailable,
    "server_is_overloaded": Overloaded,
}
_CONTEXT_TOO_LONG = re.compile(r"maximum context length|context window", re.I)


class OpenAIProvider(SDKProvider):
    """Streams answers from OpenAI (Chat Completions or Responses, per model family)."""

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
        """A provider using ``api_key``; ``base_url`` (with ``/v1``) points at a gateway."""
        super().__init__(retry_policy, sleep, api_key=api_key)
        # max_retries=0: kiln's ProviderStream is the only retry policy.
        self._client = openai.AsyncOpenAI(
            api_key=api_key,
            base_url=base_url or DEFAULT_BASE_URL,
            max_retries=0,
            timeout=timeout_seconds,
        )

    def _attempt_for(self, family: ModelFamily) -> Attempt:
        """Responses for the model families that need it, Chat Completions for the rest."""
        attempt = self._responses_attempt if family.api == "responses" else self._chat_attempt
        return lambda request, outcome: _guarded(attempt(request, outcome))

    async def aclose(self) -> None:
        """Close the SDK's HTTP client."""
        await self._client.close()

    async def _chat_attempt(
        self, request: ProviderRequest, outcome: StreamOutcome
    ) -> AsyncGenerator[str, None]:
        """One Chat Completions request: yield text, fill ``outcome``."""
        stream = await self._client.chat.completions.create(
            model=request.model,
            messages=chat_messages(request),
            max_completion_tokens=request.max_output_tokens,
            stream=True,
            stream_options={"include_usage": True},
        )
        finish: str | None = None
        async with stream:
            async for chunk in stream:
                text, finish = read_chunk(chunk, outcome, finish)
                if text:
                    yield text
        if finish is None:
            raise incomplete_stream(NAME, "finish_reason")
        outcome.finish_reason = chat_finish_reason(finish)

    async def _responses_attempt(
        self, request: ProviderRequest, outcome: StreamOutcome
    ) -> AsyncGenerator[str, None]:
        """One Responses request: yield text, fill ``outcome``."""
        items: ResponseInputParam = [
            {"role": message.role, "content": _response_content(message)}
            for message in request.messages
        ]
        stream = await self._client.responses.create(
            model=request.model,
            instructions=request.system or openai.omit,
            input=items,
            max_output_tokens=request.max_output_tokens,
            store=False,
            stream=True,
        )
        async with stream:
            async for event in stream:
                text = _read_response_event(event, outcome)
                if text:
                    yield text
        if outcome.finish_reason is None:
            raise incomplete_stream(NAME, "response.completed")


async def _guarded(attempt: AsyncGenerator[str, None]) -> AsyncGenerator[str, None]:
    """``attempt`` with the SDK's exceptions wrapped into kiln's tree."""
    async for text in guarded(attempt, NAME):
        yield text


async def guarded(attempt: AsyncGenerator[str, None], provider: str) -> AsyncGenerator[str, None]:
    """``attempt`` with the ``openai`` SDK's exceptions wrapped into kiln's tree, the messages
    naming ``provider`` (``openai``, or a server that speaks its API)."""

    def classify(exc: openai.APIError) -> ProviderError:
        return _api_error(exc, provider)

    try:
        with sdk_errors(provider, openai.APIError, classify, (openai.APIConnectionError,)):
            async for text in attempt:
                yield text
    finally:
        await attempt.aclose()


def chat_messages(request: ProviderRequest) -> list[ChatCompletionMessageParam]:
    """``request`` as Chat Completions messages: the system prompt first, then the turns."""
    messages: list[ChatCompletionMessageParam] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    for message in request.messages:
        if message.role == "user":
            messages.append({"role": "user", "content": _chat_content(message)})
        else:
            messages.append({"role": "assistant", "content": message.content})
    return messages


def _chat_content(message: Message) -> str | list[ChatCompletionContentPartParam]:
    """The text alone, or the text part followed by one ``image_url`` part (a data URL) per
    image."""
    if not message.images:
        return message.content
    parts: list[ChatCompletionContentPartParam] = [{"type": "text", "text": message.content}]
    for image in message.images:
        parts.append({"type": "image_url", "image_url": {"url": image.data_url}})
    return parts


def _response_content(message: Message) -> str | list[ResponseInputContentParam]:
    """The Responses API's form: ``input_text`` and one ``input_image`` (a data URL) per image."""
    if not message.images:
        return message.content
    parts: list[ResponseInputContentParam] = [{"type": "input_text", "text": message.content}]
    for image in message.images:
        parts.append({"type": "input_image", "image_url": image.data_url, "detail": "auto"})
    return parts


def chat_finish_reason(finish: str) -> FinishReason:
    """kiln's reason for a Chat Completions ``finish_reason``."""
    return _CHAT_FINISH.get(finish, FinishReason.OTHER)


def read_chunk(
    chunk: ChatCompletionChunk, outcome: StreamOutcome, finish: str | None
) -> tuple[str, str | None]:
    """The text of a chat chunk and the finish reason so far; record usage when it comes."""
    if chunk.usage is not None:
        outcome.usage = Usage(chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
    if not chunk.choices:
        return "", finish
    choice = chunk.choices[0]
    return choice.delta.content or "", choice.finish_reason or finish


def _read_response_event(event: ResponseStreamEvent, outcome: StreamOutcome) -> str:
    """The text a Responses event carries (often none); record the end, raise on failure."""
    if isinstance(event, ResponseTextDeltaEvent):
        return event.delta
    if isinstance(event, ResponseCompletedEvent):
        outcome.usage = _responses_usage(event.response.usage)
        outcome.finish_reason = FinishReason.STOP
    elif isinstance(event, ResponseIncompleteEvent):
        outcome.usage = _responses_usage(event.response.usage)
        details = event.response.incomplete_details
        reason = details.reason if details else None
        outcome.finish_reason = _INCOMPLETE_REASONS.get(reason or "", FinishReason.OTHER)
    elif isinstance(event, ResponseFailedEvent):
        error = event.response.error
        code, detail = (error.code, error.message) if error else (None, "response.failed")
        raise _classify(code, None, detail, None, None)
    elif isinstance(event, ResponseErrorEvent):
        raise _classify(event.code, None, event.message, None, None)
    return ""


def _responses_usage(usage: ResponseUsage | None) -> Usage:
    return Usage(usage.input_tokens, usage.output_tokens) if usage else Usage()


def _api_error(exc: openai.APIError, provider: str = NAME) -> ProviderError:
    """kiln's error for an OpenAI error response, or an error inside a stream (no status)."""
    body = exc.body if isinstance(exc.body, dict) else {}
    detail = str(body.get("message") or exc.message)
    if isinstance(exc, openai.APIStatusError):
        retry_after = retry_after_seconds(exc.response.headers)
        return _classify(exc.code, exc.type, detail, exc.status_code, retry_after, provider)
    return _classify(exc.code, exc.type, detail, None, None, provider)


def _classify(
    code: str | None,
    kind: str | None,
    detail: str,
    status: int | None,
    retry_after: float | None,
    provider: str = NAME,
) -> ProviderError:
    """Map an OpenAI error (``code`` first, then the message, then the HTTP status)."""
    where = f"HTTP {status}" if status else "in the stream"
    message = f"{provider} {code or kind or 'error'} ({where}): {detail!r}"
    cls = _CODE_ERRORS.get(code or "")
    if cls is RateLimited:
        return RateLimited(message, retry_after)
    if cls is not None:
        return cls(message)
    if _CONTEXT_TOO_LONG.search(detail):
        return ContextTooLong(message)
    if status is not None:
        return error_for_status(provider, status, detail, retry_after)
    if kind == "server_error":
        return ProviderUnavailable(message)
    return ProviderError(message)
