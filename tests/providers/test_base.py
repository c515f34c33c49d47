"""ProviderStream's shared policy with fake attempts: retries before the first token only,
cancellation, closing; and the request and usage types."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable

import anyio
import pytest

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
    AttemptFactory,
    FinishReason,
    Message,
    ProviderRequest,
    ProviderStream,
    StreamOutcome,
    Usage,
)
from app.providers.retry import RetryPolicy
from tests.providers.harness import SleepRecorder, drain, drain_into

pytestmark = pytest.mark.anyio

Attempt = Callable[[StreamOutcome], AsyncGenerator[str, None]]
# jitter 0.25 with a random draw of 0.5: back-off delays are exact, retry-after gets +12.5 %.
POLICY = RetryPolicy(max_attempts=4, base_delay=1.0, max_delay=20.0, random_fraction=lambda: 0.5)


def answering(*deltas: str, usage: Usage | None = None) -> Attempt:
    async def attempt(outcome: StreamOutcome) -> AsyncGenerator[str, None]:
        for delta in deltas:
            yield delta
        outcome.usage = usage or Usage(5, 3)
        outcome.finish_reason = FinishReason.STOP

    return attempt


def failing(error: ProviderError, *deltas: str) -> Attempt:
    async def attempt(outcome: StreamOutcome) -> AsyncGenerator[str, None]:
        for delta in deltas:
            yield delta
        raise error

    return attempt


def hanging(closed: list[str], *deltas: str) -> Attempt:
    """Yields ``deltas`` then waits forever; records when it is closed."""

    async def attempt(outcome: StreamOutcome) -> AsyncGenerator[str, None]:
        try:
            for delta in deltas:
                yield delta
            await anyio.sleep_forever()
        finally:
            closed.append("closed")

    return attempt


def scripted(*attempts: Attempt) -> AttemptFactory:
    queue = list(attempts)
    return lambda outcome: queue.pop(0)(outcome)


def stream_of(
    *attempts: Attempt, sleep: SleepRecorder | None = None, cancel: anyio.Event | None = None
) -> ProviderStream:
    return ProviderStream(
        scripted(*attempts),
        provider="fake",
        policy=POLICY,
        cancel=cancel,
        sleep=sleep or SleepRecorder(),
    )


async def test_deltas_then_usage_and_finish_reason() -> None:
    stream = stream_of(answering("a", "", "b", usage=Usage(7, 2)))
    unfinished = stream.finish_reason
    assert await drain(stream) == ["a", "b"]  # empty deltas are not delivered
    assert unfinished is None
    assert stream.usage == Usage(7, 2)
    assert stream.usage.total_tokens == 9
    assert stream.finish_reason is FinishReason.STOP
    assert stream.attempts == 1


async def test_rate_limit_before_first_token_waits_retry_after() -> None:
    sleep = SleepRecorder()
    stream = stream_of(failing(RateLimited("slow", retry_after=3)), answering("ok"), sleep=sleep)
    assert await drain(stream) == ["ok"]
    assert sleep.delays == [3 * 1.125]
    assert stream.attempts == 2


async def test_back_off_doubles_without_retry_after() -> None:
    sleep = SleepRecorder()
    busy = failing(Overloaded("busy"))
    stream = stream_of(busy, busy, busy, answering("ok"), sleep=sleep)
    assert await drain(stream) == ["ok"]
    assert sleep.delays == [1.0, 2.0, 4.0]


async def test_gives_up_after_max_attempts() -> None:
    sleep = SleepRecorder()
    down = failing(ProviderUnavailable("down"))
    with pytest.raises(ProviderUnavailable, match="down"):
        await drain(stream_of(down, down, down, down, answering("never"), sleep=sleep))
    assert len(sleep.delays) == 3


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(AuthError("bad key"), id="auth"),
        pytest.param(ContextTooLong("too long"), id="context"),
        pytest.param(ModelRefused("no such model"), id="model"),
        pytest.param(ProviderError("bad request"), id="other"),
    ],
)
async def test_permanent_errors_are_not_retried(error: ProviderError) -> None:
    sleep = SleepRecorder()
    stream = stream_of(failing(error), answering("never"), sleep=sleep)
    with pytest.raises(type(error)):
        await drain(stream)
    assert sleep.delays == []
    assert stream.attempts == 1


async def test_failure_after_first_token_is_unavailable_and_not_retried() -> None:
    sleep = SleepRecorder()
    busy = Overloaded("busy")
    stream = stream_of(failing(busy, "Hel"), answering("never"), sleep=sleep)
    deltas: list[str] = []
    with pytest.raises(ProviderUnavailable) as caught:
        await drain_into(stream, deltas)
    assert deltas == ["Hel"]
    assert caught.value.__cause__ is busy
    assert sleep.delays == []
    assert stream.attempts == 1
    assert await drain(stream) == []  # the stream stays finished


async def test_unavailable_after_first_token_is_raised_as_is() -> None:
    cut = ProviderUnavailable("cut")
    with pytest.raises(ProviderUnavailable) as caught:
        await drain(stream_of(failing(cut, "Hel")))
    assert caught.value is cut


async def test_cancel_set_before_reading_opens_no_attempt() -> None:
    cancel = anyio.Event()
    cancel.set()
    stream = stream_of(answering("never"), cancel=cancel)
    assert await drain(stream) == []
    assert stream.finish_reason is FinishReason.CANCELLED
    assert stream.attempts == 0


async def test_cancel_while_waiting_stops_and_closes_the_attempt() -> None:
    closed: list[str] = []
    cancel = anyio.Event()
    stream = stream_of(hanging(closed, "Hi"), cancel=cancel)
    deltas: list[str] = []
    async with anyio.create_task_group() as group:
        group.start_soon(drain_into, stream, deltas)
        await anyio.wait_all_tasks_blocked()
        cancel.set()
    assert deltas == ["Hi"]
    assert stream.finish_reason is FinishReason.CANCELLED
    assert closed == ["closed"]


async def test_cancel_during_back_off() -> None:
    async def endless_sleep(seconds: float) -> None:
        await anyio.sleep_forever()

    cancel = anyio.Event()
    stream = ProviderStream(
        scripted(failing(RateLimited("slow", 1.0)), answering("never")),
        provider="fake",
        policy=POLICY,
        cancel=cancel,
        sleep=endless_sleep,
    )
    async with anyio.create_task_group() as group:
        group.start_soon(drain, stream)
        await anyio.wait_all_tasks_blocked()
        cancel.set()
    assert stream.finish_reason is FinishReason.CANCELLED
    assert stream.attempts == 1


async def test_close_between_deltas_drops_buffered_ones_and_closes() -> None:
    closed: list[str] = []
    stream = stream_of(hanging(closed, "a", "b", "c"))
    assert await anext(stream) == "a"
    await stream.aclose()
    assert closed == ["closed"]
    assert stream.finish_reason is FinishReason.CANCELLED
    assert await drain(stream) == []


async def test_context_manager_closes() -> None:
    closed: list[str] = []
    async with stream_of(hanging(closed, "a")) as stream:
        assert await anext(stream) == "a"
    assert closed == ["closed"]
    assert stream.finish_reason is FinishReason.CANCELLED


async def test_caller_cancellation_propagates_and_ends_the_stream() -> None:
    closed: list[str] = []
    stream = stream_of(hanging(closed, "a"))
    assert await anext(stream) == "a"
    with anyio.CancelScope() as scope:
        scope.cancel()
        await anext(stream)
    assert scope.cancelled_caught
    assert stream.finish_reason is FinishReason.CANCELLED
    assert closed == ["closed"]


def test_request_turn_counts_assistant_messages() -> None:
    history = (Message("user", "a"), Message("assistant", "b"), Message("user", "c"))
    assert ProviderRequest("m", history[:1]).turn == 1
    assert ProviderRequest("m", history).turn == 2


@pytest.mark.parametrize(
    ("messages", "max_output_tokens"),
    [
        pytest.param((), 10, id="no-messages"),
        pytest.param((Message("user", "a"),), 0, id="no-output"),
        pytest.param((Message("system", "a"),), 10, id="bad-role"),  # type: ignore[arg-type]
    ],
)
def test_malformed_requests_are_refused(
    messages: tuple[Message, ...], max_output_tokens: int
) -> None:
    with pytest.raises(ValueError, match=r"message|max_output_tokens|role"):
        ProviderRequest("m", messages, max_output_tokens=max_output_tokens)


async def test_other_exceptions_end_the_stream_unretried() -> None:
    async def broken(outcome: StreamOutcome) -> AsyncGenerator[str, None]:
        yield "a"
        raise KeyError("bug")

    stream = stream_of(broken, answering("never"))
    with pytest.raises(KeyError):
        await drain(stream)
    assert stream.attempts == 1
    assert await drain(stream) == []


KEY = "sk-test-" + "0123456789" * 3


@pytest.mark.parametrize(
    "attempts",
    [
        pytest.param([failing(AuthError(f"key {KEY!r} refused"))], id="before-the-answer"),
        pytest.param(
            [failing(RateLimited(f"slow down, {KEY}", retry_after=1))] * 4, id="after-retries"
        ),
        pytest.param([failing(ProviderError(f"bad {KEY}"), "a")], id="after-the-first-token"),
    ],
)
async def test_the_providers_key_never_appears_in_an_error_it_raises(
    attempts: list[Attempt],
) -> None:
    stream = ProviderStream(
        scripted(*attempts), provider="fake", policy=POLICY, sleep=SleepRecorder(), secrets=[KEY]
    )
    with pytest.raises(ProviderError) as raised:
        await drain(stream)
    assert KEY not in str(raised.value)
    assert "[redacted]" in str(raised.value)


async def test_a_redacted_error_keeps_its_type_and_fields_and_short_secrets_stay() -> None:
    limited = RateLimited(f"slow down, {KEY} (key 'none')", retry_after=2.5)
    stream = ProviderStream(
        scripted(failing(limited)),
        provider="fake",
        policy=RetryPolicy(max_attempts=1),
        sleep=SleepRecorder(),
        secrets=[KEY, "none", None],  # "none" is no key: the words around it stay
    )
    with pytest.raises(RateLimited) as raised:
        await drain(stream)
    assert raised.value.retry_after == 2.5
    assert str(raised.value) == "slow down, [redacted] (key 'none')"
