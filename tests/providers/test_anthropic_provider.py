"""The real ``anthropic`` SDK against a local server speaking the Messages streaming format."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from app.errors import (
    AuthError,
    ContextTooLong,
    ModelRefused,
    Overloaded,
    ProviderUnavailable,
    RateLimited,
)
from app.providers.anthropic_provider import AnthropicProvider
from app.providers.base import FinishReason, Message, Usage
from app.providers.retry import RetryPolicy
from tests.providers.harness import (
    NO_RETRY,
    OpenedProviders,
    SleepRecorder,
    ask,
    cancel_while_waiting,
    drain,
    drain_into,
    retries,
    saw_disconnect,
    sent_with_images,
    wire_server_fixture,
)
from tests.providers.wire_servers import Answer, WireServer, anthropic_error

pytestmark = pytest.mark.anyio

MODEL = "claude-sonnet-4-6"
KEY = "sk-ant-test-key"
OVERLOADED = anthropic_error(529, "overloaded_error", "Overloaded")
PROMPT_TOO_LONG = anthropic_error(
    400, "invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum"
)

MakeProvider = Callable[..., AnthropicProvider]


server = wire_server_fixture("anthropic")


@pytest.fixture
def make(server: WireServer, opened: OpenedProviders) -> MakeProvider:
    """Build providers against ``server`` (closed after the test)."""

    def build(
        policy: RetryPolicy = NO_RETRY, sleep: SleepRecorder | None = None
    ) -> AnthropicProvider:
        return opened.add(
            AnthropicProvider(KEY, server.url, retry_policy=policy, sleep=sleep or SleepRecorder())
        )

    return build


async def test_streams_text_usage_and_finish_reason(server: WireServer, make: MakeProvider) -> None:
    server.script(Answer(("<Response>", "Hi", "</Response>"), input_tokens=40, output_tokens=6))
    history = (Message("user", "hello"), Message("assistant", "Hi there."))
    stream = make().stream(ask(MODEL, history=history, max_output_tokens=512))

    assert await drain(stream) == ["<Response>", "Hi", "</Response>"]
    assert stream.usage == Usage(input_tokens=40, output_tokens=6)
    assert stream.finish_reason is FinishReason.STOP
    [seen] = server.requests
    assert seen.path == "/v1/messages"
    assert KEY in (seen.headers.get("x-api-key", "") + seen.headers.get("authorization", ""))
    assert seen.body["model"] == MODEL
    assert seen.body["max_tokens"] == 512
    assert seen.body["system"] == "You are kiln."
    assert seen.body["stream"] is True
    assert [m["role"] for m in seen.body["messages"]] == ["user", "assistant", "user"]


async def test_max_tokens_stop_reason(server: WireServer, make: MakeProvider) -> None:
    server.script(Answer(finish="max_tokens"))
    stream = make().stream(ask(MODEL))
    await drain(stream)
    assert stream.finish_reason is FinishReason.MAX_TOKENS


async def test_unauthorized_key_is_auth_error_without_retry(
    server: WireServer, make: MakeProvider
) -> None:
    server.script(anthropic_error(401, "authentication_error", "invalid x-api-key"), Answer())
    with pytest.raises(AuthError, match="invalid x-api-key"):
        await drain(make(retries(3)).stream(ask(MODEL)))
    assert len(server.requests) == 1


async def test_rate_limit_reports_retry_after(server: WireServer, make: MakeProvider) -> None:
    server.script(anthropic_error(429, "rate_limit_error", "Number of requests", retry_after="7"))
    with pytest.raises(RateLimited) as caught:
        await drain(make().stream(ask(MODEL)))
    assert caught.value.retry_after == 7


async def test_rate_limit_is_retried_after_retry_after(
    server: WireServer, make: MakeProvider
) -> None:
    sleep = SleepRecorder()
    server.script(anthropic_error(429, "rate_limit_error", "slow down", retry_after="7"), Answer())
    stream = make(retries(3), sleep).stream(ask(MODEL))
    assert "".join(await drain(stream)) == "Hello, world!"
    assert len(sleep.delays) == 1
    assert sleep.delays[0] >= 7
    assert stream.attempts == 2


async def test_overloaded_529_gives_up_after_bounded_attempts(
    server: WireServer, make: MakeProvider
) -> None:
    server.script(OVERLOADED, OVERLOADED, OVERLOADED)
    with pytest.raises(Overloaded, match="overloaded_error"):
        await drain(make(retries(2)).stream(ask(MODEL)))
    assert len(server.requests) == 2


async def test_prompt_too_long_is_context_too_long(server: WireServer, make: MakeProvider) -> None:
    server.script(PROMPT_TOO_LONG, Answer())
    with pytest.raises(ContextTooLong, match="prompt is too long"):
        await drain(make(retries(3)).stream(ask(MODEL)))
    assert len(server.requests) == 1


async def test_cut_after_first_token_is_unavailable_and_not_restarted(
    server: WireServer, make: MakeProvider
) -> None:
    server.script(Answer(cut_after=2), Answer())
    deltas: list[str] = []
    with pytest.raises(ProviderUnavailable):
        await drain_into(make(retries(3)).stream(ask(MODEL)), deltas)
    assert deltas == ["Hello", ", wor"]
    assert len(server.requests) == 1


async def test_cut_before_first_token_is_retried(server: WireServer, make: MakeProvider) -> None:
    server.script(Answer(cut_after=0), Answer())
    stream = make(retries(2)).stream(ask(MODEL))
    assert "".join(await drain(stream)) == "Hello, world!"
    assert len(server.requests) == 2


async def test_overloaded_error_event_mid_stream(server: WireServer, make: MakeProvider) -> None:
    error = {"type": "overloaded_error", "message": "Overloaded"}
    server.script(Answer(error_after=1, stream_error=error))
    with pytest.raises(ProviderUnavailable) as caught:
        await drain(make(retries(3)).stream(ask(MODEL)))
    assert isinstance(caught.value.__cause__, Overloaded)
    assert len(server.requests) == 1


async def test_stream_without_message_stop_is_unavailable(
    server: WireServer, make: MakeProvider
) -> None:
    server.script(Answer(end_after=2))
    with pytest.raises(ProviderUnavailable, match="message_stop"):
        await drain(make().stream(ask(MODEL)))


async def test_cancel_stops_and_closes_the_connection(
    server: WireServer, make: MakeProvider
) -> None:
    server.script(Answer(hang_after=1))
    cancel = anyio.Event()
    stream = make().stream(ask(MODEL), cancel=cancel)
    assert await cancel_while_waiting(stream, cancel) == ["Hello"]
    assert stream.finish_reason is FinishReason.CANCELLED
    assert await saw_disconnect(server)


async def test_model_of_another_provider_is_refused_before_any_call(
    server: WireServer, make: MakeProvider
) -> None:
    server.script(Answer())
    with pytest.raises(ModelRefused, match="not by 'anthropic'"):
        make().stream(ask("gemini-2.5-flash"))
    assert server.requests == []


async def test_images_arrive_as_base64_image_blocks_byte_for_byte(
    server: WireServer, make: MakeProvider
) -> None:
    history = (Message("user", "hello"), Message("assistant", "Hi there."))
    seen = await sent_with_images(server, make(), MODEL, history)
    blocks = seen.body["messages"][-1]["content"]
    assert [block["type"] for block in blocks] == ["image"] * 4 + ["text"]
    assert blocks[-1]["text"] == "Like this mock-up."
    assert seen.body["messages"][0]["content"] == "hello"  # a message without images: plain text
