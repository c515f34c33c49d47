"""The real ``google-genai`` SDK against a local ``streamGenerateContent?alt=sse`` server."""

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
from app.providers.google_provider import GoogleProvider
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
from tests.providers.wire_servers import Answer, Failure, WireServer, google_error

pytestmark = pytest.mark.anyio

MODEL = "gemini-2.5-flash"
KEY = "AIza-test-key"
OVERLOADED = google_error(503, "UNAVAILABLE", "The model is overloaded. Please try again later.")
RETRY_IN_33S = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "33s"}
KEY_INVALID = {
    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
    "reason": "API_KEY_INVALID",
    "domain": "googleapis.com",
    "metadata": {"service": "generativelanguage.googleapis.com"},
}

MakeProvider = Callable[..., GoogleProvider]


server = wire_server_fixture("google")


@pytest.fixture
def make(server: WireServer, opened: OpenedProviders) -> MakeProvider:
    """Build providers against ``server`` (closed after the test)."""

    def build(policy: RetryPolicy = NO_RETRY, sleep: SleepRecorder | None = None) -> GoogleProvider:
        return opened.add(
            GoogleProvider(KEY, server.url, retry_policy=policy, sleep=sleep or SleepRecorder())
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
    assert seen.path == f"/v1beta/models/{MODEL}:streamGenerateContent"
    assert "alt=sse" in seen.query
    assert seen.headers["x-goog-api-key"] == KEY
    assert seen.body["systemInstruction"]["parts"] == [{"text": "You are kiln."}]
    assert seen.body["generationConfig"]["maxOutputTokens"] == 512
    assert [c["role"] for c in seen.body["contents"]] == ["user", "model", "user"]


async def test_max_tokens_finish_reason(server: WireServer, make: MakeProvider) -> None:
    server.script(Answer(finish="max_tokens"))
    stream = make().stream(ask(MODEL))
    await drain(stream)
    assert stream.finish_reason is FinishReason.MAX_TOKENS


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(
            google_error(400, "INVALID_ARGUMENT", "API key not valid.", (KEY_INVALID,)),
            id="400-api-key-invalid",
        ),
        pytest.param(
            google_error(401, "UNAUTHENTICATED", "Request had invalid credentials."), id="401"
        ),
        pytest.param(google_error(403, "PERMISSION_DENIED", "Permission denied."), id="403"),
    ],
)
async def test_refused_key_is_auth_error_without_retry(
    server: WireServer, make: MakeProvider, failure: Failure
) -> None:
    server.script(failure, Answer())
    with pytest.raises(AuthError):
        await drain(make(retries(3)).stream(ask(MODEL)))
    assert len(server.requests) == 1


async def test_resource_exhausted_uses_retry_info(server: WireServer, make: MakeProvider) -> None:
    exhausted = google_error(
        429, "RESOURCE_EXHAUSTED", "You exceeded your current quota.", (RETRY_IN_33S,)
    )
    server.script(exhausted)
    with pytest.raises(RateLimited) as caught:
        await drain(make().stream(ask(MODEL)))
    assert caught.value.retry_after == 33

    sleep = SleepRecorder()
    server.script(exhausted, Answer())
    stream = make(retries(2), sleep).stream(ask(MODEL))
    assert "".join(await drain(stream)) == "Hello, world!"
    assert sleep.delays[0] >= 33


async def test_resource_exhausted_with_retry_after_header(
    server: WireServer, make: MakeProvider
) -> None:
    server.script(google_error(429, "RESOURCE_EXHAUSTED", "Quota.", retry_after="4"))
    with pytest.raises(RateLimited) as caught:
        await drain(make().stream(ask(MODEL)))
    assert caught.value.retry_after == 4


async def test_503_is_overloaded_after_bounded_attempts(
    server: WireServer, make: MakeProvider
) -> None:
    server.script(OVERLOADED, OVERLOADED, OVERLOADED)
    with pytest.raises(Overloaded, match="overloaded"):
        await drain(make(retries(2)).stream(ask(MODEL)))
    assert len(server.requests) == 2


async def test_input_token_count_exceeded_is_context_too_long(
    server: WireServer, make: MakeProvider
) -> None:
    message = (
        "The input token count (1200293) exceeds the maximum number of tokens allowed (1048576)."
    )
    server.script(google_error(400, "INVALID_ARGUMENT", message), Answer())
    with pytest.raises(ContextTooLong, match="1200293"):
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
    assert "".join(await drain(make(retries(2)).stream(ask(MODEL)))) == "Hello, world!"
    assert len(server.requests) == 2


async def test_error_chunk_mid_stream(server: WireServer, make: MakeProvider) -> None:
    error = {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}
    server.script(Answer(error_after=1, stream_error=error))
    with pytest.raises(ProviderUnavailable) as caught:
        await drain(make(retries(3)).stream(ask(MODEL)))
    assert isinstance(caught.value.__cause__, Overloaded)


async def test_stream_without_finish_reason_is_unavailable(
    server: WireServer, make: MakeProvider
) -> None:
    server.script(Answer(end_after=2))
    with pytest.raises(ProviderUnavailable, match="finishReason"):
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


async def test_closing_between_deltas_closes_the_connection(
    server: WireServer, make: MakeProvider
) -> None:
    server.script(Answer(hang_after=2))
    stream = make().stream(ask(MODEL))
    assert await anext(stream) == "Hello"
    await stream.aclose()
    assert stream.finish_reason is FinishReason.CANCELLED
    assert await saw_disconnect(server)


async def test_model_of_another_provider_is_refused_before_any_call(
    server: WireServer, make: MakeProvider
) -> None:
    server.script(Answer())
    with pytest.raises(ModelRefused, match="'openai'"):
        make().stream(ask("gpt-4.1"))
    assert server.requests == []


async def test_images_arrive_as_inline_data_byte_for_byte(
    server: WireServer, make: MakeProvider
) -> None:
    seen = await sent_with_images(server, make(), MODEL)
    assert seen.body["contents"][-1]["parts"][-1]["text"] == "Like this mock-up."
