"""What every SDK-backed provider shares: the model check, kiln's retry policy, the stream.

A subclass sets ``name``, builds its SDK client in ``__init__`` (after calling
``super().__init__`` with the key it sends, which its errors never show), and supplies
``_attempt(request, outcome)`` — one request that yields text deltas — or overrides
:meth:`SDKProvider._attempt_for` when the model family picks the API, or
:meth:`SDKProvider._attempt_for_model` when no family table applies (``openai-compatible``).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable

import anyio

from app.providers.base import CancelSignal, ProviderRequest, ProviderStream, Sleep, StreamOutcome
from app.providers.models import ModelFamily, validate_model
from app.providers.retry import RetryPolicy

Attempt = Callable[[ProviderRequest, StreamOutcome], AsyncGenerator[str, None]]


class SDKProvider:
    """Base of the Anthropic, OpenAI, Google and OpenAI-compatible providers."""

    name: str  # set by each subclass

    def __init__(
        self,
        retry_policy: RetryPolicy | None,
        sleep: Sleep = anyio.sleep,
        *,
        api_key: str | None = None,
    ) -> None:
        """``retry_policy`` is the only retry policy: the SDKs' own retries are switched off.
        ``api_key`` (the key the client sends) is taken out of every error of its streams."""
        self._policy = retry_policy or RetryPolicy()
        self._sleep = sleep
        self._api_key = api_key

    def stream(
        self, request: ProviderRequest, cancel: CancelSignal | None = None
    ) -> ProviderStream:
        """Stream the answer to ``request``; a model this provider does not serve is refused
        here, before any call."""
        attempt = self._attempt_for_model(request.model)
        return ProviderStream(
            lambda outcome: attempt(request, outcome),
            provider=self.name,
            policy=self._policy,
            cancel=cancel,
            sleep=self._sleep,
            secrets=(self._api_key,),
        )

    def _attempt_for_model(self, model: str) -> Attempt:
        """The attempt for ``model``; a model of another provider is refused here
        (:class:`~app.errors.ModelRefused`)."""
        return self._attempt_for(validate_model(self.name, model))

    def _attempt_for(self, family: ModelFamily) -> Attempt:
        """The attempt to use for a model of ``family``."""
        return self._attempt

    def _attempt(
        self, request: ProviderRequest, outcome: StreamOutcome
    ) -> AsyncGenerator[str, None]:
        raise NotImplementedError
