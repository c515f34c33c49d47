"""Any server that speaks OpenAI's Chat Completions stream: Ollama, vLLM, LM Studio, OpenRouter,
gateways; through the official ``openai`` SDK pointed at the server's base URL.

What differs from :mod:`app.providers.openai_provider`:

- any model name the server knows (:func:`~app.providers.models.validate_open_model`), always
  through Chat Completions (the Responses API is OpenAI's own);
- the output cap is sent as ``max_tokens``, which every such server reads (several ignore or
  refuse OpenAI's newer ``max_completion_tokens``);
- the key is optional: without one the SDK gets a placeholder, never ``OPENAI_API_KEY`` (the
  SDK would read it from the environment and send it to this server);
- a server may ignore ``stream_options.include_usage``: the usage is then counted with
  :mod:`app.tokens`, marked ``Usage.estimated``, and the estimate is logged once per server.

Errors go through the same mapping as OpenAI's (:func:`app.providers.openai_provider.guarded`),
named ``openai-compatible``: the servers answer with OpenAI's error body, or at least its status.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncGenerator

import anyio
import openai

from app.providers.base import ProviderRequest, Sleep, StreamOutcome, Usage
from app.providers.http_errors import incomplete_stream
from app.providers.models import OPENAI_COMPATIBLE, validate_open_model
from app.providers.openai_provider import chat_finish_reason, chat_messages, guarded, read_chunk
from app.providers.retry import RetryPolicy
from app.providers.sdk_provider import Attempt, SDKProvider
from app.tokens import TokenCounter

NAME = OPENAI_COMPATIBLE
# Sent as the bearer token when no key is configured: local servers ignore it.
PLACEHOLDER_KEY = "kiln-no-key"

log = logging.getLogger(__name__)


class OpenAICompatibleProvider(SDKProvider):
    """Streams answers from an OpenAI-compatible server's Chat Completions endpoint."""

    name = NAME

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        retry_policy: RetryPolicy | None = None,
        sleep: Sleep = anyio.sleep,
        timeout_seconds: float = 300.0,
    ) -> None:
        """A provider for the server at ``base_url`` (its API root, ``/v1`` included)."""
        super().__init__(retry_policy, sleep, api_key=api_key)
        self._base_url = base_url
        # max_retries=0: kiln's ProviderStream is the only retry policy.
        self._client = openai.AsyncOpenAI(
            api_key=api_key or PLACEHOLDER_KEY,
            base_url=base_url,
            max_retries=0,
            timeout=timeout_seconds,
        )

    def _attempt_for_model(self, model: str) -> Attempt:
        """Any well-formed name (the server decides whether it has the model)."""
        validate_open_model(model)
        return lambda request, outcome: guarded(self._chat_attempt(request, outcome), NAME)

    async def aclose(self) -> None:
        """Close the SDK's HTTP client."""
        await self._client.close()

    async def _chat_attempt(
        self, request: ProviderRequest, outcome: StreamOutcome
    ) -> AsyncGenerator[str, None]:
        """One Chat Completions request: yield text, fill ``outcome`` (estimating usage when
        the server sent none)."""
        stream = await self._client.chat.completions.create(
            model=request.model,
            messages=chat_messages(request),
            max_tokens=request.max_output_tokens,
            stream=True,
            stream_options={"include_usage": True},
        )
        finish: str | None = None
        answer: list[str] = []
        reported = False
        async with stream:
            async for chunk in stream:
                reported = reported or chunk.usage is not None
                text, finish = read_chunk(chunk, outcome, finish)
                if text:
                    answer.append(text)
                    yield text
        if finish is None:
            raise incomplete_stream(NAME, "finish_reason")
        outcome.finish_reason = chat_finish_reason(finish)
        if not reported:
            _say_usage_is_estimated(self._base_url)
            outcome.usage = await anyio.to_thread.run_sync(estimate_usage, request, "".join(answer))


def estimate_usage(request: ProviderRequest, answer: str) -> Usage:
    """The usage of ``request`` and its ``answer`` as kiln counts it (``estimated``): the same
    counter the run's budgets use for this provider (an approximation, see :mod:`app.tokens`)."""
    counter = TokenCounter.for_model(NAME, request.model)
    sent = counter.count_request(request.system, request.messages)
    return Usage(sent, counter.count(answer), estimated=True)


@functools.cache
def _say_usage_is_estimated(base_url: str) -> None:
    log.warning(
        "the openai-compatible server at %s sends no usage (stream_options.include_usage): "
        "kiln estimates its token counts with tiktoken",
        base_url,
    )
