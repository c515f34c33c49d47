"""The real ``openai`` SDK against a local server: Chat Completions and Responses streaming."""

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
from app.providers.base import FinishReason, Message, Usage
from app.providers.openai_provider import OpenAIProvider
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
from tests.providers.wire_servers import Answer, WireServer, openai_error

pytestmark = pytest.mark.anyio

KEY = "sk-test-key"
CHAT_MODEL = "gpt-4.1"
RESPONSES_MODEL = "gpt-5"
BOTH_APIS = [
    pytest.param(CHAT_MODEL, id="chat-completions"),
    pytest.param(RESPONSES_MODEL, id="responses"),
]
OVERLOADED = openai_error(503, "The server is overloaded.", "server_error", None)
BAD_KEY = openai_error(
    401, "Incorrect API key provided: sk-test.", "invalid_request_error", "invalid_api_key"
)
TOO_LONG = (
    "This model's maximum context length is 128000 tokens. However, your messages resulted in "
    "130512 tokens. Please reduce the length of the messages."
)

MakeProvider = Callable[..., OpenAIProvider]


server = wire_server_fixture("openai")


@pytest.fixture
def make(server: WireServer, opened: OpenedProviders) -> MakeProvider:
    """Build providers against ``server`` (closed after the test)."""

    def build(policy: RetryPolicy = NO_RETRY, sleep: SleepRecorder | None = None) -> OpenAIProvider:
        return opened.add(
            OpenAIProvider(
                KEY, f"{server.url}/v1", retry_policy=policy, sleep=sleep or SleepRecorder()
            )
        )

    return build


async def test_chat_completions_stream_with_usage(server: WireServer, make: MakeProvider) -> None:
    server.script(Answer(("<Response>", "Hi", "</Response>"), input_tokens=40, output_tokens=6))
    history = (Message("user", "hello"), Message("assistant", "Hi there."))
    stream = make().stream(ask(CHAT_MODEL, history=history, max_output_tokens=512))

    assert await drain(stream) == ["<Response>", "Hi", "</Response>"]
    assert stream.usage == Usage(input_tokens=40, output_tokens=6)
    assert stream.finish_reason is FinishReason.STOP
    [seen] = server.requests
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == f"Bearer {KEY}"
    assert seen.body["stream_options"] == {"include_usage": True}
    assert seen.body["max_completion_tokens"] == 512
    roles = [(m["role"], m["content"]) for m in seen.body["messages"]]
    assert roles == [
        ("system", "You are kiln."),
        ("user", "hello"),
        ("assistant", "Hi there."),
        ("user", "Build a counter app."),
    ]


async def test_responses_stream_with_usage(server: WireServer, make: MakeProvider) -> None:
    server.script(Answer(("<Response>", "Hi", "</Response>"), input_tokens=40, output_tokens=6))
    stream = make().stream(ask(RESPONSES_MODEL, max_output_tokens=512))

    assert await drain(stream) == ["<Response>", "Hi", "</Response>"]
    assert stream.usage == Usage(input_tokens=40, output_tokens=6)
    assert stream.finish_reason is FinishReason.STOP
    [seen] = server.requests
    assert seen.path == "/v1/responses"
    assert seen.body["instructions"] == "You are kiln."
    assert seen.body["max_output_tokens"] == 512
    assert seen.body["store"] is False
    assert seen.body["input"] == [{"role": "user", "content": "Build a counter app."}]


@pytest.mark.parametrize("model", BOTH_APIS)
async def test_output_cap_is_max_tokens(server: WireServer, make: MakeProvider, model: str) -> None:
    server.script(Answer(finish="max_tokens"))
    stream = make().stream(ask(model))
    await drain(stream)
    assert stream.finish_reason is FinishReason.MAX_TOKENS


@pytest.mark.parametrize("model", BOTH_APIS)
async def test_bad_key_is_auth_error_without_retry(
    server: WireServer, make: MakeProvider, model: str
) -> None:
    server.script(BAD_KEY, Answer())
    with pytest.raises(AuthError, match="Incorrect API key"):
        await drain(make(retries(3)).stream(ask(model)))
    assert len(server.requests) == 1


@pytest.mark.parametrize("model", BOTH_APIS)
async def test_rate_limit_honours_retry_after(
    server: WireServer, make: MakeProvider, model: str
) -> None:
    limited = openai_error(
        429, "Rate limit reached for requests", "requests", "rate_limit_exceeded", retry_after="7"
    )
    sleep = SleepRecorder()
    server.script(limited, Answer())
    stream = make(retries(3), sleep).stream(ask(model))
    assert "".join(await drain(stream)) == "Hello, world!"
    assert len(sleep.delays) == 1
    assert sleep.delays[0] >= 7

    server.script(limited)
    with pytest.raises(RateLimited) as caught:
        await drain(make().stream(ask(model)))
    assert caught.value.retry_after == 7


async def test_retry_after_ms_header_is_preferred(server: WireServer, make: MakeProvider) -> None:
    limited = openai_error(
        429, "Rate limit", "requests", "rate_limit_exceeded", retry_after="7", retry_after_ms="1500"
    )
    server.script(limited)
    with pytest.raises(RateLimited) as caught:
        await drain(make().stream(ask(CHAT_MODEL)))
    assert caught.value.retry_after == 1.5


async def test_insufficient_quota_is_not_retried(server: WireServer, make: MakeProvider) -> None:
    quota = openai_error(
        429, "You exceeded your current quota.", "insufficient_quota", "insufficient_quota"
    )
    server.script(quota, Answer())
    with pytest.raises(AuthError, match="quota"):
        await drain(make(retries(3)).stream(ask(CHAT_MODEL)))
    assert len(server.requests) == 1


@pytest.mark.parametrize("model", BOTH_APIS)
async def test_503_is_overloaded_after_bounded_attempts(
    server: WireServer, make: MakeProvider, model: str
) -> None:
    server.script(OVERLOADED, OVERLOADED, OVERLOADED)
    with pytest.raises(Overloaded, match="overloaded"):
        await drain(make(retries(2)).stream(ask(model)))
    assert len(server.requests) == 2


async def test_chat_context_length_exceeded(server: WireServer, make: MakeProvider) -> None:
    error = openai_error(
        400, TOO_LONG, "invalid_request_error", "context_length_exceeded", "messages"
    )
    server.script(error, Answer())
    with pytest.raises(ContextTooLong, match="maximum context length"):
        await drain(make(retries(3)).stream(ask(CHAT_MODEL)))
    assert len(server.requests) == 1


async def test_responses_context_error_event(server: WireServer, make: MakeProvider) -> None:
    error = {
        "type": "invalid_request_error",
        "code": "context_length_exceeded",
        "message": "Your input exceeds the context window of this model.",
        "param": "input",
    }
    server.script(Answer(error_after=0, stream_error=error), Answer())
    with pytest.raises(ContextTooLong, match="context window"):
        await drain(make(retries(3)).stream(ask(RESPONSES_MODEL)))
    assert len(server.requests) == 1


@pytest.mark.parametrize("model", BOTH_APIS)
async def test_cut_after_first_token_is_unavailable_and_not_restarted(
    server: WireServer, make: MakeProvider, model: str
) -> None:
    server.script(Answer(cut_after=2), Answer())
    deltas: list[str] = []
    with pytest.raises(ProviderUnavailable):
        await drain_into(make(retries(3)).stream(ask(model)), deltas)
    assert deltas == ["Hello", ", wor"]
    assert len(server.requests) == 1


@pytest.mark.parametrize("model", BOTH_APIS)
async def test_cut_before_first_token_is_retried(
    server: WireServer, make: MakeProvider, model: str
) -> None:
    server.script(Answer(cut_after=0), Answer())
    assert "".join(await drain(make(retries(2)).stream(ask(model)))) == "Hello, world!"
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("model", "marker"),
    [
        pytest.param(CHAT_MODEL, "finish_reason", id="chat-completions"),
        pytest.param(RESPONSES_MODEL, "response.completed", id="responses"),
    ],
)
async def test_stream_without_its_end_is_unavailable(
    server: WireServer, make: MakeProvider, model: str, marker: str
) -> None:
    server.script(Answer(end_after=2))
    with pytest.raises(ProviderUnavailable, match=marker):
        await drain(make().stream(ask(model)))


@pytest.mark.parametrize("model", BOTH_APIS)
async def test_cancel_stops_and_closes_the_connection(
    server: WireServer, make: MakeProvider, model: str
) -> None:
    server.script(Answer(hang_after=1))
    cancel = anyio.Event()
    stream = make().stream(ask(model), cancel=cancel)
    assert await cancel_while_waiting(stream, cancel) == ["Hello"]
    assert stream.finish_reason is FinishReason.CANCELLED
    assert await saw_disconnect(server)


async def test_model_of_another_provider_is_refused_before_any_call(
    server: WireServer, make: MakeProvider
) -> None:
    server.script(Answer())
    with pytest.raises(ModelRefused, match="'google'"):
        make().stream(ask("gemini-2.5-flash"))
    assert server.requests == []


@pytest.mark.parametrize("model", BOTH_APIS)
async def test_images_arrive_as_data_urls_byte_for_byte(
    server: WireServer, make: MakeProvider, model: str
) -> None:
    seen = await sent_with_images(server, make(), model)
    parts = (seen.body.get("messages") or seen.body["input"])[-1]["content"]
    assert parts[0]["text"] == "Like this mock-up."
