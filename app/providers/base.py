"""The provider interface: a request in, text deltas out, then usage and a finish reason.

Every provider (Anthropic, OpenAI, Google, replay) returns a :class:`ProviderStream`::

    stream = provider.stream(ProviderRequest(model=..., system=..., messages=(...)), cancel=event)
    async for delta in stream:      # str text deltas, never empty
        ...
    stream.usage                    # Usage(input_tokens, output_tokens)
    stream.finish_reason            # FinishReason.STOP | MAX_TOKENS | REFUSED | CANCELLED | OTHER

A provider only has to supply one *attempt*: an async generator that makes one request and yields
its text deltas, writes the usage and finish reason into the :class:`StreamOutcome` it is given,
and raises kiln's :class:`~app.errors.ProviderError` subclasses (SDK exceptions are wrapped at
that boundary). :class:`ProviderStream` adds the policy every provider shares:

- **Retry before the first token only.** A retryable failure (rate limit, overload, network)
  before any text was delivered starts a new attempt after a back-off
  (:class:`~app.providers.retry.RetryPolicy`). Once text has been delivered, a failure raises
  :class:`~app.errors.ProviderUnavailable`: a half-delivered answer is never silently restarted.
- **Cancellation.** When the ``cancel`` event is set, the stream stops within one event-loop step
  even while it waits for the network: the pending read is cancelled, the SDK's response (and so
  the HTTP connection) is closed, iteration ends and ``finish_reason`` is ``CANCELLED``. A stream
  closed early with :meth:`ProviderStream.aclose` also reports ``CANCELLED``.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Literal, Protocol

import anyio

from app.chat_images import ChatImage
from app.errors import ProviderError, ProviderUnavailable
from app.providers.http_errors import without_secrets
from app.providers.retry import RetryPolicy

Role = Literal["user", "assistant"]
Sleep = Callable[[float], Awaitable[None]]
# How long closing an SDK stream may take before we give up on a clean close.
_CLOSE_LIMIT_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class Message:
    """One message of the conversation sent to the model; a user's may carry images, which
    each provider sends in its own form, ahead of the text."""

    role: Role
    content: str
    images: tuple[ChatImage, ...] = ()


@dataclass(frozen=True, slots=True)
class ProviderRequest:
    """What to ask the model: the system prompt, the conversation, the model and an output cap."""

    model: str
    messages: tuple[Message, ...]
    system: str = ""
    max_output_tokens: int = 8192
    # Which answer of the run this is, when the caller knows it: the messages may also carry
    # earlier runs of the chat, whose answers do not count.
    run_turn: int | None = None

    def __post_init__(self) -> None:
        if not self.messages:
            raise ValueError("a provider request needs at least one message")
        if self.max_output_tokens < 1:
            raise ValueError(f"max_output_tokens must be positive, not {self.max_output_tokens!r}")
        for message in self.messages:
            if message.role not in ("user", "assistant"):
                raise ValueError(f"unknown message role {message.role!r}")

    @property
    def turn(self) -> int:
        """Which answer of the run this request asks for: ``run_turn`` when given, else 1 + the
        assistant messages in the request (a request that carries only the current run)."""
        if self.run_turn is not None:
            return self.run_turn
        return 1 + sum(1 for message in self.messages if message.role == "assistant")


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens the provider billed: the whole input, and the output including hidden reasoning."""

    input_tokens: int = 0
    output_tokens: int = 0
    # True when the provider reported nothing and kiln counted the tokens itself (tiktoken).
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


class FinishReason(enum.StrEnum):
    """Why a stream ended, in kiln's words (each provider's own reasons map onto these)."""

    STOP = "stop"  # the model finished its answer
    MAX_TOKENS = "max_tokens"  # the output cap (or the context window) cut the answer
    REFUSED = "refused"  # a safety or content filter stopped the answer
    CANCELLED = "cancelled"  # kiln stopped reading (cancel signal or an early close)
    OTHER = "other"  # anything else the provider reported (tool use, pause, ...)


@dataclass(slots=True)
class StreamOutcome:
    """What one attempt learnt besides text; the attempt generator fills it in as it goes."""

    usage: Usage = field(default_factory=Usage)
    finish_reason: FinishReason | None = None


class CancelSignal(Protocol):
    """What a cancel signal must offer; :class:`anyio.Event` does."""

    def is_set(self) -> bool:
        """Whether cancellation was requested."""
        ...

    async def wait(self) -> None:
        """Return once cancellation is requested."""
        ...


AttemptFactory = Callable[[StreamOutcome], AsyncGenerator[str, None]]


class Provider(Protocol):
    """An LLM provider: streams one answer per request."""

    name: str

    def stream(
        self, request: ProviderRequest, cancel: CancelSignal | None = None
    ) -> ProviderStream:
        """Start streaming the answer to ``request``; raise ``ModelRefused`` before any call."""
        ...

    async def aclose(self) -> None:
        """Release the provider's HTTP client."""
        ...


class _Missing(enum.Enum):
    TOKEN = enum.auto()


_MISSING = _Missing.TOKEN
# What one read gave: a delta, the end of the answer (None) or a cancel (_MISSING).
_Read = str | None | _Missing


class ProviderStream:
    """Text deltas of one answer, with kiln's retry and cancellation policy around the attempts."""

    def __init__(
        self,
        open_attempt: AttemptFactory,
        *,
        provider: str,
        policy: RetryPolicy | None = None,
        cancel: CancelSignal | None = None,
        sleep: Sleep = anyio.sleep,
        secrets: Sequence[str | None] = (),
    ) -> None:
        """Wrap ``open_attempt`` (called once per attempt with a fresh :class:`StreamOutcome`);
        ``secrets`` (the provider's key) never appear in an error it raises."""
        self._open_attempt = open_attempt
        self._secrets = secrets
        self._provider = provider
        self._policy = policy or RetryPolicy()
        self._cancel = cancel
        self._sleep = sleep
        self._attempt: AsyncGenerator[str, None] | None = None
        self._attempt_started = False
        self._outcome = StreamOutcome()
        self._attempts = 0
        self._delivered = False
        self._finished = False

    @property
    def usage(self) -> Usage:
        """Tokens used by the attempt that produced the answer (what is known so far)."""
        return self._outcome.usage

    @property
    def finish_reason(self) -> FinishReason | None:
        """Why the stream ended; ``None`` while it is still going, and after it raised."""
        return self._outcome.finish_reason if self._finished else None

    @property
    def attempts(self) -> int:
        """How many requests were made so far (1 + retries)."""
        return self._attempts

    def __aiter__(self) -> ProviderStream:
        return self

    async def __anext__(self) -> str:
        if self._finished:
            raise StopAsyncIteration
        if self._cancel is not None and self._cancel.is_set():
            await self._stop(FinishReason.CANCELLED)
            raise StopAsyncIteration
        try:
            read = await self._read_or_cancel()
        except anyio.get_cancelled_exc_class():
            # The caller itself is being cancelled: the attempt is dead, and so is the stream.
            await self._stop(FinishReason.CANCELLED)
            raise
        if isinstance(read, str):
            return read
        await self._stop(FinishReason.CANCELLED if read is _MISSING else None)
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """Stop reading and close the connection; an unfinished stream reports ``CANCELLED``."""
        if not self._finished:
            await self._stop(FinishReason.CANCELLED)

    async def __aenter__(self) -> ProviderStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _read_or_cancel(self) -> _Read:
        """The next read, raced against the cancel signal (``_MISSING`` when the signal won)."""
        if self._cancel is None:
            return await self._next_delta()
        cancel = self._cancel
        result: _Read = _MISSING
        error: Exception | None = None
        async with anyio.create_task_group() as group:

            async def watch() -> None:
                """Cancel the read once the signal is set."""
                await cancel.wait()
                group.cancel_scope.cancel()

            group.start_soon(watch)
            try:
                result = await self._next_delta()
            except Exception as exc:  # re-raised below, outside the task group's wrapping
                error = exc
            finally:
                group.cancel_scope.cancel()
        if error is not None:
            raise error
        return result

    async def _next_delta(self) -> str | None:
        """The next non-empty delta, opening and retrying attempts as the policy allows."""
        while True:
            if self._attempt is None:
                self._outcome = StreamOutcome()
                self._attempt = self._open_attempt(self._outcome)
                self._attempt_started = False
                self._attempts += 1
            try:
                self._attempt_started = True
                delta = await anext(self._attempt)
            except StopAsyncIteration:
                return None
            except ProviderError as exc:
                await self._close_attempt()
                await self._back_off_or_raise(without_secrets(exc, self._secrets))
                continue
            except Exception:  # not a provider failure (a bug, a bad recording): no retry
                self._finished = True
                await self._close_attempt()
                raise
            if delta:
                self._delivered = True
                return delta

    async def _back_off_or_raise(self, exc: ProviderError) -> None:
        """Sleep before the next attempt, or raise: after the first token nothing is retried."""
        if self._delivered:
            self._finished = True
            if isinstance(exc, ProviderUnavailable):
                raise exc
            raise ProviderUnavailable(
                f"{self._provider!r} stream failed after the answer had started: {exc}"
            ) from exc
        delay = self._policy.delay_before_retry(exc, self._attempts)
        if delay is None:
            self._finished = True
            raise exc
        await self._sleep(delay)

    async def _stop(self, reason: FinishReason | None) -> None:
        """End the stream: close the attempt and settle the finish reason."""
        self._finished = True
        await self._close_attempt()
        if reason is not None or self._outcome.finish_reason is None:
            self._outcome.finish_reason = reason or FinishReason.OTHER

    async def _close_attempt(self) -> None:
        """Close the current attempt, and with it the SDK's HTTP response, even if cancelled.

        An attempt paused between two deltas is resumed inside an already-cancelled scope rather
        than just ``aclose()``-d: the SDK's pending read is then cancelled, and the cancellation
        unwinds *every* generator the SDK nests (google-genai nests several, and closing only the
        outer one would leave the connection open until garbage collection).
        """
        attempt, self._attempt = self._attempt, None
        if attempt is None:
            return
        with anyio.move_on_after(_CLOSE_LIMIT_SECONDS, shield=True):
            if self._attempt_started:
                with anyio.CancelScope() as scope:
                    scope.cancel()
                    try:
                        while True:  # deltas already buffered may still come; drop them
                            await anext(attempt)
                    except Exception:  # the attempt is being thrown away, errors and all
                        pass
            await attempt.aclose()
