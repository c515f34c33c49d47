"""The real ``openai`` SDK as the ``openai-compatible`` provider against a local Chat Completions
server: Ollama/vLLM-style model names, no key, no usage chunk, errors, cut streams, cancel."""

from __future__ import annotations

import logging
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
from app.providers.base import FinishReason, Usage
from app.providers.openai_compatible import (
    PLACEHOLDER_KEY,
    OpenAICompatibleProvider,
    _say_usage_is_estimated,
    estimate_usage,
)
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
from tests.providers.wire_servers import Answer, Failure, WireServer, openai_error

pytestmark = pytest.mark.anyio

MODEL = "llama3.1:8b"
NAMES = [
    pytest.param("llama3.1:8b", id="ollama-tag"),
    pytest.param("qwen2.5-coder:32b", id="ollama-coder"),
    pytest.param("meta-llama/Llama-3.1-8B-Instruct", id="vllm-path"),
    pytest.param("openrouter/anthropic/claude-3.5", id="router-path"),
]
# vLLM answers errors with a top-level body whose ``code`` is the HTTP status (an integer).
VLLM_TOO_LONG = Failure(
    400,
    {
        "object": "error",
        "message": "This model's maximum context length is 4096 tokens. However, you requested "
        "5120 tokens (4096 in the messages, 1024 in the completion).",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    },
)
OLLAMA_NO_MODEL = openai_error(
    404, 'model "llama9" not found, try pulling it first', "api_error", None
)

MakeProvider = Callable[..., OpenAICompatibleProvider]


server = wire_server_fixture("openai")


@pytest.fixture
def make(server: WireServer, opened: OpenedProviders) -> MakeProvider:
    """Build providers against ``server`` (closed after the test)."""

    def build(
        policy: RetryPolicy = NO_RETRY, sleep: SleepRecorder | None = None, key: str | None = None
    ) -> OpenAICompatibleProvider:
        return opened.add(
            OpenAICompatibleProvider(
                f"{server.url}/v1", key, retry_policy=policy, sleep=sleep or SleepRecorder()
            )
        )

    return build


async def test_stream_with_usage_and_no_key(
    server: WireServer, make: MakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The SDK reads OPENAI_API_KEY when given no key: kiln must never send it to this server.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-openai-key")
    server.script(Answer(("<Response>", "Hi", "</Response>"), input_tokens=40, output_tokens=6))
    stream = make().stream(ask(MODEL, max_output_tokens=512))

    assert await drain(stream) == ["<Response>", "Hi", "</Response>"]
    assert stream.usage == Usage(input_tokens=40, output_tokens=6)
    assert not stream.usage.estimated
    assert stream.finish_reason is FinishReason.STOP
    [seen] = server.requests
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == f"Bearer {PLACEHOLDER_KEY}"
    assert seen.body["stream_options"] == {"include_usage": True}
    assert seen.body["max_tokens"] == 512  # what Ollama, vLLM and LM Studio all read
    assert "max_completion_tokens" not in seen.body
    assert [m["role"] for m in seen.body["messages"]] == ["system", "user"]


async def test_a_key_is_sent_as_the_bearer_token(server: WireServer, make: MakeProvider) -> None:
    server.script(Answer())
    await drain(make(key="sk-or-v1-0123456789").stream(ask(MODEL)))
    assert server.requests[0].headers["authorization"] == "Bearer sk-or-v1-0123456789"


@pytest.mark.parametrize("model", NAMES)
async def test_model_names_with_colons_and_slashes_go_in_the_body(
    server: WireServer, make: MakeProvider, model: str
) -> None:
    server.script(Answer())
    assert "".join(await drain(make().stream(ask(model)))) == "Hello, world!"
    [seen] = server.requests
    assert seen.path == "/v1/chat/completions"
    assert seen.body["model"] == model


async def test_without_a_usage_chunk_usage_is_estimated_and_said(
    server: WireServer, make: MakeProvider, caplog: pytest.LogCaptureFixture
) -> None:
    _say_usage_is_estimated.cache_clear()
    server.script(Answer(usage=False), Answer(usage=False))
    request = ask(MODEL)
    with caplog.at_level(logging.WARNING, logger="app.providers.openai_compatible"):
        stream = make().stream(request)
        assert "".join(await drain(stream)) == "Hello, world!"
        again = make().stream(request)
        await drain(again)

    assert stream.finish_reason is FinishReason.STOP
    assert stream.usage == estimate_usage(request, "Hello, world!")
    assert stream.usage.estimated
    assert stream.usage.input_tokens > 10  # system prompt, user message and framing
    assert stream.usage.output_tokens == 4  # "Hello", ",", " world", "!" in cl100k_base
    warnings = [r.getMessage() for r in caplog.records if "no usage" in r.getMessage()]
    assert len(warnings) == 1  # once per server, not once per answer
    assert server.url in warnings[0]


async def test_bad_key_is_auth_error_without_retry(server: WireServer, make: MakeProvider) -> None:
    bad_key = openai_error(401, "Invalid API key.", "invalid_request_error", "invalid_api_key")
    server.script(bad_key, Answer())
    with pytest.raises(AuthError, match=r"openai-compatible.*Invalid API key"):
        await drain(make(retries(3), key="sk-wrong").stream(ask(MODEL)))
    assert len(server.requests) == 1


async def test_401_without_an_openai_body_is_auth_error(
    server: WireServer, make: MakeProvider
) -> None:
    server.script(Failure(401, {"detail": "Unauthorized"}))
    with pytest.raises(AuthError, match="HTTP 401"):
        await drain(make().stream(ask(MODEL)))


async def test_rate_limit_honours_retry_after(server: WireServer, make: MakeProvider) -> None:
    limited = openai_error(429, "Rate limit exceeded", "rate_limit", None, retry_after="7")
    sleep = SleepRecorder()
    server.script(limited, Answer())
    stream = make(retries(3), sleep).stream(ask(MODEL))
    assert "".join(await drain(stream)) == "Hello, world!"
    assert len(sleep.delays) == 1
    assert sleep.delays[0] >= 7

    server.script(limited)
    with pytest.raises(RateLimited) as caught:
        await drain(make().stream(ask(MODEL)))
    assert caught.value.retry_after == 7


async def test_503_is_overloaded_after_bounded_attempts(
    server: WireServer, make: MakeProvider
) -> None:
    busy = openai_error(503, "Server busy, try later.", "server_error", None)
    server.script(busy, busy, busy)
    with pytest.raises(Overloaded, match="busy"):
        await drain(make(retries(2)).stream(ask(MODEL)))
    assert len(server.requests) == 2


async def test_vllm_context_too_long(server: WireServer, make: MakeProvider) -> None:
    server.script(VLLM_TOO_LONG, Answer())
    with pytest.raises(ContextTooLong, match="maximum context length is 4096"):
        await drain(make(retries(3)).stream(ask(MODEL)))
    assert len(server.requests) == 1


async def test_a_model_the_server_lacks_is_refused(server: WireServer, make: MakeProvider) -> None:
    server.script(OLLAMA_NO_MODEL)
    with pytest.raises(ModelRefused, match="try pulling it"):
        await drain(make(retries(3)).stream(ask("llama9")))
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


async def test_stream_without_finish_reason_is_unavailable(
    server: WireServer, make: MakeProvider
) -> None:
    server.script(Answer(end_after=2))
    with pytest.raises(ProviderUnavailable, match=r"openai-compatible.*finish_reason"):
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


@pytest.mark.parametrize(
    "model",
    [pytest.param("llama 3", id="space"), pytest.param("llama\n3", id="newline")],
)
async def test_a_malformed_name_is_refused_before_any_call(
    server: WireServer, make: MakeProvider, model: str
) -> None:
    server.script(Answer())
    with pytest.raises(ModelRefused, match="whitespace"):
        make().stream(ask(model))
    assert server.requests == []


async def test_images_arrive_as_data_urls_byte_for_byte(
    server: WireServer, make: MakeProvider
) -> None:
    seen = await sent_with_images(server, make(), MODEL)
    assert seen.body["messages"][-1]["content"][0] == {"type": "text", "text": "Like this mock-up."}
