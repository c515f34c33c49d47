"""Local servers that speak each LLM provider's streaming wire format, for the real SDKs to call.

One :class:`WireServer` per provider (``"anthropic"``, ``"openai"`` — Chat Completions and
Responses on one server — and ``"google"``), served by real uvicorn on a loopback port in a
thread. A test scripts the replies in order (:meth:`WireServer.script`): an :class:`Answer`
(a normal SSE stream, optionally cut, hung or broken by an in-stream error after some deltas) or a
:class:`Failure` (an HTTP error with the provider's JSON error body and headers). Every request is
recorded (:attr:`WireServer.requests`); :attr:`WireServer.disconnected` is set when a client
leaves a hung stream.

The event shapes follow the providers' documented streams and the captures in
``tests/data/captures`` (Anthropic ``message_start`` … ``message_stop`` with usage in
``message_start`` and ``message_delta``; OpenAI ``chat.completion.chunk`` with a final usage
chunk for ``stream_options.include_usage`` and ``[DONE]``; OpenAI Responses ``response.*``
events; Gemini ``streamGenerateContent?alt=sse`` chunks with ``usageMetadata``).
"""

from __future__ import annotations

import base64
import json
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from starlette.types import Receive, Scope, Send

from tests.servers import UvicornThread

Wire = Literal["anthropic", "openai", "google"]
Json = dict[str, Any]
# In a Failure's body: replaced by the API key the request carried, as some gateways echo it.
SENT_KEY = "<the key sent>"


@dataclass(frozen=True)
class Answer:
    """A streamed answer; ``*_after`` counts the text deltas sent before the twist."""

    deltas: tuple[str, ...] = ("Hello", ", wor", "ld!")
    input_tokens: int = 21
    output_tokens: int = 9
    finish: Literal["stop", "max_tokens"] = "stop"
    cut_after: int | None = None  # then drop the connection mid-body (no final chunk)
    hang_after: int | None = None  # then send nothing more until the client disconnects
    error_after: int | None = None  # then send ``stream_error`` as the provider's error event
    end_after: int | None = None  # then end the body cleanly, without the closing events
    stream_error: Json | None = None
    usage: bool = True  # False: Chat Completions without its usage chunk (servers that skip it)


@dataclass(frozen=True)
class Failure:
    """An HTTP error reply: status, JSON body, extra headers."""

    status: int
    body: Json
    headers: tuple[tuple[str, str], ...] = ()


Reply = Answer | Failure


@dataclass
class SeenRequest:
    """One request the server received."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: Json

    def images(self) -> list[tuple[str, bytes]]:
        """``(media type, bytes)`` of every image the request's last message carries, read
        the way the provider reads its own wire format (a base64 source, a data URL, inline
        data), so a test compares the bytes that arrived with the bytes sent."""
        if "contents" in self.body:  # Gemini: inlineData parts
            parts = self.body["contents"][-1]["parts"]
            blobs = [part.get("inlineData") or part.get("inline_data") for part in parts]
            # The SDK writes the REST API's snake_case and URL-safe base64 (protobuf's JSON
            # takes both alphabets and both spellings).
            return [
                (b.get("mimeType") or b["mime_type"], base64.urlsafe_b64decode(b["data"]))
                for b in blobs
                if b
            ]
        last = (self.body.get("messages") or self.body.get("input"))[-1]
        content = last["content"] if isinstance(last["content"], list) else []
        found = []
        for part in content:
            if part["type"] == "image":  # Anthropic: a base64 source
                source = part["source"]
                found.append((source["media_type"], base64.b64decode(source["data"])))
            elif part["type"] == "image_url":  # Chat Completions: a data URL
                found.append(_data_url(part["image_url"]["url"]))
            elif part["type"] == "input_image":  # Responses: a data URL
                found.append(_data_url(part["image_url"]))
        return found


def _data_url(url: str) -> tuple[str, bytes]:
    """``data:<type>;base64,<data>`` as ``(type, bytes)``."""
    head, _, data = url.partition(",")
    assert head.startswith("data:"), head
    assert head.endswith(";base64"), head
    return head.removeprefix("data:").removesuffix(";base64"), base64.b64decode(data)


@dataclass
class _Frames:
    """An answer rendered to SSE frames: before the text, one per delta, after the text."""

    prelude: list[bytes] = field(default_factory=list)
    deltas: list[bytes] = field(default_factory=list)
    closing: list[bytes] = field(default_factory=list)


def anthropic_error(status: int, kind: str, message: str, **headers: str) -> Failure:
    """Anthropic's error body: ``{"type": "error", "error": {"type", "message"}, ...}``."""
    body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_x1"}
    return Failure(status, body, _headers(headers))


def openai_error(
    status: int, message: str, kind: str, code: str | None, param: str | None = None, **headers: str
) -> Failure:
    """OpenAI's error body: ``{"error": {"message", "type", "param", "code"}}``."""
    error = {"message": message, "type": kind, "param": param, "code": code}
    return Failure(status, {"error": error}, _headers(headers))


def google_error(
    status: int, status_name: str, message: str, details: tuple[Json, ...] = (), **headers: str
) -> Failure:
    """Google's error body: ``{"error": {"code", "message", "status", "details"?}}``."""
    error: Json = {"code": status, "message": message, "status": status_name}
    if details:
        error["details"] = list(details)
    return Failure(status, {"error": error}, _headers(headers))


def _headers(headers: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple((name.replace("_", "-"), value) for name, value in headers.items())


def _sse(data: Json | str, event: str | None = None, newline: str = "\n") -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}{newline}" if event else ""
    return f"{head}data: {payload}{newline}{newline}".encode()


def _anthropic_frames(answer: Answer, model: str) -> _Frames:
    usage = {"input_tokens": answer.input_tokens, "cache_creation_input_tokens": 0}
    usage |= {"cache_read_input_tokens": 0, "output_tokens": 1}
    message: Json = {"id": "msg_01Test", "type": "message", "role": "assistant", "model": model}
    message |= {"content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}
    block = {"type": "text", "text": ""}
    start = {"type": "content_block_start", "index": 0, "content_block": block}
    stop_reason = "end_turn" if answer.finish == "stop" else "max_tokens"
    delta: Json = {"type": "message_delta"}
    delta["delta"] = {"stop_reason": stop_reason, "stop_sequence": None}
    delta["usage"] = {"output_tokens": answer.output_tokens}
    return _Frames(
        prelude=[
            _sse({"type": "message_start", "message": message}, "message_start"),
            _sse(start, "content_block_start"),
            _sse({"type": "ping"}, "ping"),
        ],
        deltas=[
            _sse(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": t},
                },
                "content_block_delta",
            )
            for t in answer.deltas
        ],
        closing=[
            _sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
            _sse(delta, "message_delta"),
            _sse({"type": "message_stop"}, "message_stop"),
        ],
    )


def _chat_frames(answer: Answer, model: str) -> _Frames:
    def chunk(delta: Json, finish: str | None = None) -> Json:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {
            "id": "chatcmpl-Test",
            "object": "chat.completion.chunk",
            "created": 1733000000,
            "model": model,
            "system_fingerprint": "fp_test",
            "choices": [choice],
            "usage": None,
        }

    usage_chunk = chunk({}) | {"choices": []}
    usage_chunk["usage"] = {
        "prompt_tokens": answer.input_tokens,
        "completion_tokens": answer.output_tokens,
        "total_tokens": answer.input_tokens + answer.output_tokens,
    }
    finish = "stop" if answer.finish == "stop" else "length"
    return _Frames(
        prelude=[_sse(chunk({"role": "assistant", "content": "", "refusal": None}))],
        deltas=[_sse(chunk({"content": text})) for text in answer.deltas],
        closing=[
            _sse(chunk({}, finish)),
            *([_sse(usage_chunk)] if answer.usage else []),
            _sse("[DONE]"),
        ],
    )


def _response(model: str, status: str, answer: Answer | None, incomplete: Json | None) -> Json:
    """A Responses ``response`` object; ``answer`` gives its usage (``None``: not known yet)."""
    usage: Json | None = None
    if answer is not None:
        usage = {"input_tokens": answer.input_tokens, "output_tokens": answer.output_tokens}
        usage["total_tokens"] = answer.input_tokens + answer.output_tokens
        usage["input_tokens_details"] = {"cached_tokens": 0}
        usage["output_tokens_details"] = {"reasoning_tokens": 0}
    response: Json = {"id": "resp_Test", "object": "response", "created_at": 1741476542}
    response |= {"status": status, "error": None, "incomplete_details": incomplete}
    return response | {"model": model, "output": [], "usage": usage}


def _responses_frames(answer: Answer, model: str) -> _Frames:
    counter = iter(range(10_000))

    def event(kind: str, **fields: Any) -> bytes:
        return _sse({"type": kind, "sequence_number": next(counter), **fields}, kind)

    item: Json = {"id": "msg_Test", "type": "message", "status": "in_progress"}
    item |= {"role": "assistant", "content": []}
    part = {"type": "output_text", "annotations": [], "text": ""}
    where = {"item_id": "msg_Test", "output_index": 0, "content_index": 0}
    started = _response(model, "in_progress", None, None)
    frames = _Frames(
        prelude=[
            event("response.created", response=started),
            event("response.in_progress", response=started),
            event("response.output_item.added", output_index=0, item=item),
            event("response.content_part.added", part=part, **where),
        ],
        deltas=[
            event("response.output_text.delta", delta=text, logprobs=[], **where)
            for text in answer.deltas
        ],
    )
    text = "".join(answer.deltas)
    frames.closing = [event("response.output_text.done", text=text, logprobs=[], **where)]
    if answer.finish == "stop":
        final = event("response.completed", response=_response(model, "completed", answer, None))
    else:
        reason = {"reason": "max_output_tokens"}
        incomplete = _response(model, "incomplete", answer, reason)
        final = event("response.incomplete", response=incomplete)
    frames.closing.append(final)
    return frames


def _google_frames(answer: Answer, model: str) -> _Frames:
    def chunk(text: str, finish: str | None, output_tokens: int) -> bytes:
        candidate: Json = {"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}
        if finish:
            candidate["finishReason"] = finish
        usage = {"promptTokenCount": answer.input_tokens, "candidatesTokenCount": output_tokens}
        usage["totalTokenCount"] = answer.input_tokens + output_tokens
        data = {"candidates": [candidate], "usageMetadata": usage, "modelVersion": model}
        data["responseId"] = "resp-Test"
        return _sse(data, newline="\r\n")

    finish = "STOP" if answer.finish == "stop" else "MAX_TOKENS"
    return _Frames(
        deltas=[chunk(text, None, index + 1) for index, text in enumerate(answer.deltas)],
        closing=[chunk("", finish, answer.output_tokens)],
    )


def _anthropic_error_frame(error: Json) -> bytes:
    return _sse({"type": "error", "error": error}, "error")


def _responses_error_frame(error: Json) -> bytes:
    return _sse({"type": "error", "sequence_number": 99, "error": error}, "error")


def _plain_error_frame(error: Json) -> bytes:
    return _sse({"error": error}, newline="\r\n")


Renderer = Callable[[Answer, str], _Frames]


def _route(wire: Wire, path: str) -> tuple[Renderer, Callable[[Json], bytes]] | None:
    """The renderer and in-stream error framing for ``path``, or ``None`` for an unknown path."""
    if wire == "anthropic" and path == "/v1/messages":
        return _anthropic_frames, _anthropic_error_frame
    if wire == "openai" and path == "/v1/chat/completions":
        return _chat_frames, _plain_error_frame
    if wire == "openai" and path == "/v1/responses":
        return _responses_frames, _responses_error_frame
    google_stream = path.startswith("/v1beta/models/") and path.endswith(":streamGenerateContent")
    if wire == "google" and google_stream:
        return _google_frames, _plain_error_frame
    return None


class WireServer:
    """A provider's API on a loopback port; a context manager. Replies follow :meth:`script`."""

    def __init__(self, wire: Wire) -> None:
        """Prepare (not start) a server speaking ``wire``."""
        self.wire = wire
        self.requests: list[SeenRequest] = []
        self.disconnected = threading.Event()
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            await self._app(scope, receive, send)  # a plain function: uvicorn then speaks ASGI 3

        self._thread = UvicornThread(app)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``: the SDK base URL (OpenAI's needs ``/v1`` appended)."""
        return self._thread.url

    def script(self, *replies: Reply) -> None:
        """Forget earlier requests and replies; answer the next requests with ``replies``."""
        with self._lock:
            self._replies = deque(replies)
            self.requests = []
            self.disconnected.clear()

    def __enter__(self) -> WireServer:
        self._thread.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._thread.__exit__(None, None, None)

    def _next_reply(self) -> Reply:
        with self._lock:
            if self._replies:
                return self._replies.popleft()
        return Failure(500, {"error": {"message": "test script has no reply left"}})

    async def _app(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        body = await _read_body(receive)
        headers = {key.decode().lower(): value.decode() for key, value in scope["headers"]}
        query = scope["query_string"].decode()
        seen = SeenRequest(scope["method"], scope["path"], query, headers, json.loads(body or "{}"))
        self.requests.append(seen)
        route = _route(self.wire, scope["path"])
        reply = self._next_reply()
        if route is None:
            reply = Failure(404, {"error": {"message": f"no route {scope['path']!r}"}})
        if isinstance(reply, Failure):
            await _send_failure(send, reply, _sent_key(headers))
            return
        assert route is not None
        renderer, error_frame = route
        model = str(seen.body.get("model") or scope["path"].split("/")[-1].split(":")[0])
        await self._send_answer(send, receive, reply, renderer(reply, model), error_frame)

    async def _send_answer(
        self,
        send: Send,
        receive: Receive,
        answer: Answer,
        frames: _Frames,
        error_frame: Callable[[Json], bytes],
    ) -> None:
        headers = [(b"content-type", b"text/event-stream; charset=utf-8")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        twists = (answer.cut_after, answer.hang_after, answer.error_after, answer.end_after)
        for frame in frames.prelude:
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        sent = 0  # text deltas sent so far
        while sent < len(frames.deltas) and sent not in twists:
            await send(
                {"type": "http.response.body", "body": frames.deltas[sent], "more_body": True}
            )
            sent += 1
        if sent == answer.cut_after:
            return  # uvicorn drops the connection: the body never got its final chunk
        if sent == answer.hang_after:
            await _wait_for_disconnect(receive)
            self.disconnected.set()
            return
        tail = frames.closing
        if sent == answer.error_after:
            tail = [error_frame(answer.stream_error or {})]
        elif sent == answer.end_after:
            tail = []
        for frame in tail:
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _wait_for_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


def _sent_key(headers: dict[str, str]) -> str:
    """The API key of a request, in whichever header its provider sends it."""
    bearer = headers.get("authorization", "").removeprefix("Bearer ")
    return headers.get("x-api-key") or headers.get("x-goog-api-key") or bearer


async def _send_failure(send: Send, failure: Failure, key: str) -> None:
    body = json.dumps(failure.body).replace(SENT_KEY, key).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(name.encode(), value.encode()) for name, value in failure.headers]
    await send({"type": "http.response.start", "status": failure.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
