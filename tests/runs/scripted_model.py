"""A local model that answers from what it is sent: OpenAI's Chat Completions stream on a
loopback port, for kiln's ``openai-compatible`` provider (the real ``openai`` SDK) to call.

It plays a person's model over two messages. A request whose last user message asks for
:attr:`Change.request` (the follow-up) gets one ``<edward_edit>`` block that changes one line of
:attr:`Change.path` as the request SHOWS that file (a ``<current_file>`` of the system prompt);
when the file is not shown, or is shown without the line, the answer is an HTTP 422 that names
what was missing (the run then fails, in words). Any other request gets :data:`APP_ANSWER`, the
shared todo app recording. Every request and the file content each edit was made from are kept.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.servers import UvicornThread

APP_ANSWER = (Path(__file__).resolve().parents[3] / "shared" / "recordings").joinpath(
    "todo-vite-react.txt"
)
DELTA_CHARS = 48  # the answer streams in pieces of this size, like a model's tokens
Json = dict[str, Any]


@dataclass(frozen=True)
class Change:
    """The follow-up the model knows how to do: replace ``old`` (one whole line) by ``new``."""

    request: str
    path: str
    old: str
    new: str

    def answer(self) -> str:
        """The model's answer to the follow-up: one search/replace block."""
        return (
            "<Response>\nRenamed the heading.\n\n"
            '<edward_sandbox project="todo-app" base="vite-react">\n'
            f'<edward_edit path="{self.path}">\n<<<<<<< SEARCH\n{self.old}=======\n{self.new}'
            ">>>>>>> REPLACE\n</edward_edit>\n</edward_sandbox>\n</Response>\n<edward_done />\n"
        )


@dataclass
class ScriptedModel:
    """The server's script and what it saw (``requests``: each request's JSON body;
    ``shown``: the content of :attr:`Change.path` each follow-up was shown)."""

    change: Change
    url: str = ""  # the API root (``.../v1``) once served
    requests: list[Json] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reply(self, body: Json) -> tuple[str | None, str]:
        """The answer to ``body``, or ``(None, why)`` when the request lacks what it needs."""
        messages = body.get("messages") or []
        with self.lock:
            self.requests.append(body)
        users = [m for m in messages if m.get("role") == "user"]
        if not users or self.change.request not in message_text(users[-1]):
            return APP_ANSWER.read_text(), ""
        sent = "\n".join(message_text(m) for m in messages)
        shown = current_file(sent, self.change.path)
        if shown is None:
            return None, f"the request does not show {self.change.path!r}"
        if self.change.old not in shown + "\n":
            return None, f"{self.change.path!r} is shown without the line {self.change.old!r}"
        with self.lock:
            self.shown.append(shown)
        return self.change.answer(), ""


def message_text(message: Json) -> str:
    """A Chat Completions message's text (a string, or a list of text parts)."""
    content = message.get("content")
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def current_file(text: str, path: str) -> str | None:
    """The content of ``path`` as a ``<current_file>`` block of ``text`` shows it."""
    found = re.search(
        rf'<current_file path="{re.escape(path)}">\n(.*?)\n</current_file>', text, re.DOTALL
    )
    return found.group(1) if found else None


def chunk(model: str, delta: Json, finish: str | None = None, usage: Json | None = None) -> bytes:
    """One ``chat.completion.chunk`` SSE frame."""
    choices = [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}]
    frame = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": 1733000000,
        "model": model,
        "choices": choices,
        "usage": usage,
    }
    return f"data: {json.dumps(frame)}\n\n".encode()


async def stream(model: str, answer: str) -> AsyncIterator[bytes]:
    """The answer as a Chat Completions stream, its usage chunk and ``[DONE]``."""
    yield chunk(model, {"role": "assistant", "content": ""})
    for start in range(0, len(answer), DELTA_CHARS):
        yield chunk(model, {"content": answer[start : start + DELTA_CHARS]})
    yield chunk(model, {}, "stop")
    pieces = len(answer) // DELTA_CHARS + 1
    yield chunk(model, {}, usage={"prompt_tokens": 1000, "completion_tokens": pieces})
    yield b"data: [DONE]\n\n"


def serve(model: ScriptedModel) -> UvicornThread:
    """A (not yet started) server of ``model`` on a loopback port; its API root is
    ``<url>/v1``."""

    async def completions(request: Request) -> Response:
        body = await request.json()
        answer, why = model.reply(body)
        if answer is None:
            error = {"message": why, "type": "invalid_request_error", "code": "file_not_shown"}
            return JSONResponse({"error": error}, status_code=422)
        name = str(body.get("model") or "scripted")
        return StreamingResponse(stream(name, answer), media_type="text/event-stream")

    app = Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])
    return UvicornThread(app)
