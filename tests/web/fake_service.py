"""A small stand-in for ``kiln serve`` that speaks the contract of docs/service-contract.md.

It serves the real static UI (``app/web``) the way ``app.api.app`` does (``/`` and
``/static/...``), keeps chats and runs in memory, and plays the demo recording through the real
parser as a run's events, with the records the sandbox session would add (installs, commands,
``file_written``). It exists for what the real service cannot be made to do on demand: cut an
SSE connection in the middle of a run (``cut_every``), or fail a run with a chosen error.
Preview hosts (``<id>.preview.localhost``) get a sign-in endpoint and a page with the app's
heading. Everything runs on uvicorn's event loop; the test thread only flips attributes.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.app_env import LIMITS
from parser import StreamParser
from tests.web.fake_preview_errors import PreviewErrorLog, preview_errors

WEB_DIR = Path(__file__).resolve().parents[2] / "app" / "web"
DEMO = Path(__file__).resolve().parents[2] / "app" / "demos" / "todo-app.txt"
COOKIE = "kiln_session"
SESSION = "fake-session"
TEMPLATE_FILES = {"package.json": '{\n  "name": "app"\n}\n', "index.html": "<!doctype html>\n"}
PREVIEW_PAGE = "<!doctype html><title>Todos</title><h1>Todos</h1><p>fake preview</p>"
# The events a step (an install or a command) is reported with, as the sandbox session does.
STEP_EVENTS = {
    "install": ("install_started", "install_finished"),
    "command": ("command_started", "command_finished"),
}


@dataclass
class FakeRun:
    """One run: its events so far (seq = index + 1) and who is waiting for more."""

    id: str
    chat_id: str
    created: float
    status: str = "queued"
    stop_reason: str | None = None
    sandbox_id: str | None = None
    preview_url: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    cancel: asyncio.Event = field(default_factory=asyncio.Event)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    def view(self) -> dict[str, Any]:
        """The run as ``GET /api/runs/{id}`` shows it."""
        return {
            "id": self.id,
            "chat_id": self.chat_id,
            "status": self.status,
            "stop_reason": self.stop_reason,
            "turns": 1,
            "usage": {},
            "sandbox_id": self.sandbox_id,
            "preview_url": self.preview_url,
            "error": None,
            "created": self.created,
            "started": self.created,
            "finished": None,
        }


@dataclass
class FakeService:
    """The in-memory state, and the knobs a test turns."""

    port: int
    chunk_size: int = 40
    pace: float = 0.01  # seconds between chunks
    cut_every: int = 0  # close every SSE connection after this many events (0: never)
    overlap: int = 0  # resend this many events before the one asked for (duplicates to drop)
    failure: tuple[str, str] | None = None  # (code, message): runs fail at once with it
    prelude: list[dict[str, Any]] = field(default_factory=list)  # sent before the recording
    refusal: tuple[int, str, str] | None = None  # (status, code, message): messages refused
    post_delay: float = 0.0  # seconds a message takes to be accepted (a slow server)
    message_limit: int = 32_000  # GET /api/me's limits.message_chars
    replayed: bool = False  # runs replay an answer already applied: installs skipped, no change
    render: dict[str, Any] | None = None  # the postgen event's render check result
    run_preview_errors: list[dict[str, Any]] = field(default_factory=list)  # before postgen
    preview_errors: PreviewErrorLog = field(default_factory=PreviewErrorLog)
    # What the page asked for, in order: "run <id>" (a run read), "login <sandbox>" (a preview
    # sign-in link), "frame <sandbox>" (the preview's frame loading with one).
    asked: list[str] = field(default_factory=list)
    login_token: str = field(default_factory=lambda: secrets.token_hex(8))
    chats: dict[str, dict[str, Any]] = field(default_factory=dict)
    messages: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    runs: dict[str, FakeRun] = field(default_factory=dict)
    files: dict[str, dict[str, str]] = field(default_factory=dict)
    connections: int = 0

    async def emit(self, run: FakeRun, event: dict[str, Any]) -> None:
        """Append one event and wake the streams."""
        async with run.changed:
            run.events.append(event)
            run.changed.notify_all()

    async def play(self, run: FakeRun) -> None:
        """Play the demo recording as this run's events (or fail as ``failure`` says)."""
        run.status = "running"
        await self.emit(run, {"type": "run_started"})
        await self.emit(run, {"type": "turn_start", "turn": 1, "fixup": False, "prompt": "..."})
        if self.failure is not None:
            await self.fail(run, *self.failure)
            return
        for event in self.prelude:
            await self.emit(run, event)
        parser, text = StreamParser(), DEMO.read_text()
        for start in range(0, len(text), self.chunk_size):
            if run.cancel.is_set():
                break
            for event in parser.feed(text[start : start + self.chunk_size]):
                await self.handle(run, {**event.to_dict(), "turn": 1})
            await asyncio.sleep(self.pace)
        for event in parser.close():
            await self.handle(run, {**event.to_dict(), "turn": 1})
        await self.finish(run)

    async def handle(self, run: FakeRun, event: dict[str, Any]) -> None:
        """One parser event, plus what the sandbox session would report after it."""
        kind = event["type"]
        if kind == "sandbox_start" and run.sandbox_id is None:
            run.sandbox_id = "sbx" + secrets.token_hex(4)
            run.preview_url = f"http://{run.sandbox_id}.preview.localhost:{self.port}/"
            self.chats[run.chat_id]["sandbox_id"] = run.sandbox_id
            self.files[run.sandbox_id] = dict(TEMPLATE_FILES)
            await self.emit(run, {"type": "sandbox_ready", "sandbox_id": run.sandbox_id})
        await self.emit(run, event)
        if kind == "file_content" and run.sandbox_id:
            files = self.files[run.sandbox_id]
            files[event["path"]] = files.get(event["path"], "") + event["content"]
        elif kind == "file_start" and run.sandbox_id:
            self.files[run.sandbox_id][event["path"]] = ""
        elif kind == "file_end":
            await self.emit(run, {"type": "file_written", "path": event["path"]})
        elif kind == "install_content":
            await self.step(run, "install", {"packages": event["dependencies"]})
        elif kind == "command":
            await self.step(run, "command", {"argv": [event["command"], *event["args"]]})

    async def step(self, run: FakeRun, kind: str, fields: dict[str, Any]) -> None:
        """An install or a command: started, two output lines, finished with exit 0."""
        started, finished = STEP_EVENTS[kind]
        await self.emit(run, {"type": started, **fields})
        for line in (f"{kind} line one", f"{kind} line two"):
            await self.emit(run, {"type": "output", "line": line})
        skipped = {"already_installed": True} if self.replayed and kind == "install" else {}
        await self.emit(run, {"type": finished, **fields, "exit_code": 0, **skipped})

    async def finish(self, run: FakeRun) -> None:
        """The end of a run: turn decision, checks, summary and the terminal event."""
        cancelled = run.cancel.is_set()
        run.stop_reason = "cancelled" if cancelled else "code_written"
        run.status = "cancelled" if cancelled else "completed"
        end = {"type": "turn_end", "turn": 1, "rule": run.stop_reason, "decision": "stop"}
        await self.emit(run, {**end, "reason": run.stop_reason})
        if not cancelled:
            for error in self.run_preview_errors:
                await self.emit(run, {"type": "preview_error", **error})
            build = {"ok": True, "exit_code": 0, "output": ""}
            checks = {"type": "postgen", "fixes": [], "findings": [], "build": build}
            await self.emit(run, {**checks, "render": self.render} if self.render else checks)
        complete = {"type": "session_complete", "status": run.status, "unchanged": self.replayed}
        await self.emit(run, complete)
        final = {"type": "run_finished", "status": run.status, "stop_reason": run.stop_reason}
        await self.emit(run, final)

    async def fail(self, run: FakeRun, code: str, message: str) -> None:
        """A run that ends with a fatal error; the run's ``error`` carries a stack trace."""
        await self.emit(
            run, {"type": "error", "code": code, "message": message, "severity": "fatal"}
        )
        end = {"type": "turn_end", "turn": 1, "rule": "fatal_error", "decision": "stop"}
        await self.emit(run, {**end, "reason": "error"})
        run.status, run.stop_reason = "failed", "error"
        trace = 'Traceback (most recent call last):\n  File "x.py", line 1\nKeyError: 1'
        final = {"type": "run_finished", "status": "failed", "stop_reason": "error"}
        await self.emit(run, {**final, "error": trace})

    async def follow(self, run: FakeRun, after: int) -> AsyncIterator[bytes]:
        """SSE frames after ``after``; ends after ``run_finished`` or a simulated cut."""
        sent, seq = 0, max(0, after - self.overlap)
        self.connections += 1
        yield b"retry: 500\n\n"
        while True:
            async with run.changed:
                await run.changed.wait_for(partial(_has_more, run, seq))
                batch = run.events[seq:]
            for event in batch:
                seq += 1
                data = json.dumps(event, separators=(",", ":"))
                yield f"id: {seq}\nevent: {event['type']}\ndata: {data}\n\n".encode()
                sent += 1
                if event["type"] == "run_finished" or (self.cut_every and sent >= self.cut_every):
                    return


def _has_more(run: FakeRun, seq: int) -> bool:
    return len(run.events) > seq


async def _index(request: Request) -> Response:
    return FileResponse(WEB_DIR / "index.html")


def _authorized(request: Request) -> bool:
    return request.cookies.get(COOKIE) == SESSION


def _owns(service: FakeService, request: Request, sandbox_id: str) -> bool:
    return sandbox_id in service.files and _authorized(request)


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status)


def build_app(service: FakeService) -> ASGIApp:
    """The fake service as an ASGI app (API, UI and preview hosts)."""
    routes = [
        Route("/login", partial(_login, service)),
        Route("/api/me", partial(_me, service)),
        Route("/api/me/keys/{provider}", _key, methods=["PUT", "DELETE"]),
        Route("/api/chats", partial(_chats, service), methods=["GET", "POST"]),
        Route("/api/chats/{id}", partial(_chat, service), methods=["GET", "PATCH", "DELETE"]),
        Route("/api/chats/{id}/messages", partial(_post, service), methods=["POST"]),
        Route("/api/chats/{id}/versions", partial(_versions, service)),
        Route("/api/chats/{id}/publication", partial(_none_yet, service, {"publication": None})),
        Route("/api/chats/{id}/publish-job", partial(_none_yet, service, {"job": None})),
        Route("/api/chats/{id}/remote", partial(_none_yet, service, {"remote": None})),
        Route(
            "/api/chats/{id}/env", partial(_none_yet, service, {"variables": [], "limits": LIMITS})
        ),
        Route("/api/runs/{id}", partial(_run, service)),
        Route("/api/runs/{id}/events", partial(_events, service)),
        Route("/api/runs/{id}/cancel", partial(_cancel, service), methods=["POST"]),
        Route("/api/sandboxes/{id}/files", partial(_files, service)),
        Route("/api/sandboxes/{id}/files/{path:path}", partial(_file, service)),
        Route(
            "/api/sandboxes/{id}/preview-login",
            partial(_preview_login, service),
            methods=["POST"],
        ),
        Route("/api/sandboxes/{id}/preview", partial(_preview_state, service)),
        Route(
            "/api/sandboxes/{id}/preview-errors",
            partial(preview_errors, service.preview_errors, partial(_owns, service), _error),
        ),
        Route("/", _index),
        Mount("/static", StaticFiles(directory=WEB_DIR)),
    ]
    api = Starlette(routes=routes)
    return _PreviewHosts(api, service)


class _PreviewHosts:
    """Answers ``<id>.preview.localhost`` itself; anything else goes to the API app."""

    def __init__(self, app: ASGIApp, service: FakeService) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        host = dict(scope.get("headers", [])).get(b"host", b"").decode()
        if scope["type"] != "http" or ".preview." not in host:
            await self.app(scope, receive, send)
            return
        response: Response
        if scope["path"] == "/__kiln/login":
            self.service.preview_errors.frame_loads += 1
            self.service.asked.append(f"frame {host.partition('.')[0]}")
            response = RedirectResponse("/", 303)
            response.set_cookie(COOKIE, SESSION, samesite="none", secure=True)
        else:
            response = HTMLResponse(PREVIEW_PAGE)
        await response(scope, receive, send)


async def _login(service: FakeService, request: Request) -> Response:
    if request.query_params.get("token") != service.login_token:
        return _error(401, "invalid_login_token", "this login link is unknown or already used")
    response = RedirectResponse("/", 303)
    response.set_cookie(COOKIE, SESSION, httponly=True, samesite="lax")
    return response


async def _me(service: FakeService, request: Request) -> Response:
    if not _authorized(request):
        return _error(401, "unauthenticated", "sign in")
    default = {"provider": "replay", "model": "todo-app"}
    body = {"user": {"id": "u1", "name": "local"}, "providers": [], "default": default}
    limits = {"message_chars": service.message_limit, "title_chars": 200}
    return JSONResponse({**body, "demos": ["todo-app"], "limits": limits})


async def _key(request: Request) -> Response:
    """Keys are not kept: a stored one is forgotten at once, and none is there to delete."""
    if not _authorized(request):
        return _error(401, "unauthenticated", "sign in")
    if request.method == "DELETE":
        return _error(404, "key_not_found", "no key is stored for you")
    return Response(status_code=204)


async def _chats(service: FakeService, request: Request) -> Response:
    if not _authorized(request):
        return _error(401, "unauthenticated", "sign in")
    if request.method == "GET":
        chats = sorted(service.chats.values(), key=lambda c: c["created"], reverse=True)
        return JSONResponse({"chats": chats})
    body = await request.json()
    first = body.get("message")
    if first is not None:
        refused = await _refused(service)
        if refused is not None:
            return refused
    chat_id = secrets.token_hex(8)
    chat = {"id": chat_id, "title": body.get("title") or "New chat", "created": time.time()}
    service.chats[chat_id] = {**chat, "sandbox_id": None}
    service.messages[chat_id] = []
    if first is None:
        return JSONResponse({"chat": service.chats[chat_id]}, 201)
    run_id, message_id = _start_run(service, chat_id, first["content"])
    answer = {"chat": service.chats[chat_id], "run_id": run_id, "message_id": message_id}
    return JSONResponse(answer, 201)


async def _refused(service: FakeService) -> Response | None:
    """After the server's delay, the refusal a test asked for (or None: accepted)."""
    if service.post_delay:
        await asyncio.sleep(service.post_delay)
    return _error(*service.refusal) if service.refusal else None


def _start_run(service: FakeService, chat_id: str, content: str) -> tuple[str, str]:
    """Store the user's message and play a run for it; ``(run_id, message_id)``."""
    message = {"id": secrets.token_hex(8), "role": "user", "content": content}
    service.messages[chat_id].append({**message, "data": None, "created": time.time()})
    run = FakeRun(secrets.token_hex(8), chat_id, time.time())
    service.runs[run.id] = run
    asyncio.get_running_loop().create_task(service.play(run))
    return run.id, message["id"]


async def _chat(service: FakeService, request: Request) -> Response:
    chat = service.chats.get(request.path_params["id"])
    if chat is None or not _authorized(request):
        return _error(404, "not_found", "no such chat")
    runs = [run.view() for run in service.runs.values() if run.chat_id == chat["id"]]
    if request.method == "PATCH":
        chat["title"] = (await request.json())["title"].strip()
        return JSONResponse({"chat": chat})
    if request.method == "DELETE":
        if any(run["status"] in ("queued", "running") for run in runs):
            message = f"chat {chat['title']!r} has a run in progress; cancel it, then delete"
            return _error(409, "chat_busy", message)
        del service.chats[chat["id"]]
        return Response(status_code=204)
    return JSONResponse({"chat": chat, "messages": service.messages[chat["id"]], "runs": runs})


async def _versions(service: FakeService, request: Request) -> Response:
    """A chat's versions: the stand-in keeps no project, so there are none (as for a new chat)."""
    chat = service.chats.get(request.path_params["id"])
    if chat is None or not _authorized(request):
        return _error(404, "not_found", "no such chat")
    return JSONResponse({"versions": []})


async def _none_yet(service: FakeService, answer: dict[str, Any], request: Request) -> Response:
    """A chat's publication, git remote or app environment: a new chat has none (the real
    service's answer for that case)."""
    chat = service.chats.get(request.path_params["id"])
    if chat is None or not _authorized(request):
        return _error(404, "not_found", "no such chat")
    return JSONResponse(answer)


async def _post(service: FakeService, request: Request) -> Response:
    chat = service.chats.get(request.path_params["id"])
    if chat is None or not _authorized(request):
        return _error(404, "not_found", "no such chat")
    runs = service.runs.values()
    if any(r.chat_id == chat["id"] and r.status in ("queued", "running") for r in runs):
        return _error(429, "admission_refused", "this chat already has a run in progress")
    body = await request.json()
    refused = await _refused(service)
    if refused is not None:
        return refused
    run_id, message_id = _start_run(service, chat["id"], body["content"])
    return JSONResponse({"run_id": run_id, "message_id": message_id}, 202)


def _find_run(service: FakeService, request: Request) -> FakeRun | None:
    run = service.runs.get(request.path_params["id"])
    return run if run is not None and _authorized(request) else None


async def _run(service: FakeService, request: Request) -> Response:
    run = _find_run(service, request)
    if run is None:
        return _error(404, "not_found", "no such run")
    service.asked.append(f"run {run.id}")
    return JSONResponse(run.view())


async def _events(service: FakeService, request: Request) -> Response:
    run = _find_run(service, request)
    if run is None:
        return _error(404, "not_found", "no such run")
    raw = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
    return StreamingResponse(service.follow(run, int(raw)), media_type="text/event-stream")


async def _cancel(service: FakeService, request: Request) -> Response:
    run = _find_run(service, request)
    if run is None:
        return _error(404, "not_found", "no such run")
    if run.status in ("completed", "failed", "cancelled"):
        return _error(409, "run_finished", "the run is already over")
    run.cancel.set()
    return JSONResponse({"run": run.view()}, 202)


async def _files(service: FakeService, request: Request) -> Response:
    files = service.files.get(request.path_params["id"])
    if files is None or not _authorized(request):
        return _error(404, "not_found", "no such sandbox")
    listing = [{"path": path, "size": len(text)} for path, text in sorted(files.items())]
    return JSONResponse({"files": listing})


async def _file(service: FakeService, request: Request) -> Response:
    files = service.files.get(request.path_params["id"]) or {}
    text = files.get(request.path_params["path"])
    if text is None or not _authorized(request):
        return _error(404, "not_found", "no such file")
    return PlainTextResponse(text)


async def _preview_login(service: FakeService, request: Request) -> Response:
    sandbox = request.path_params["id"]
    if sandbox not in service.files or not _authorized(request):
        return _error(404, "not_found", "no such sandbox")
    service.asked.append(f"login {sandbox}")
    url = f"http://{sandbox}.preview.localhost:{service.port}/__kiln/login?token=x"
    return JSONResponse({"url": url})


async def _preview_state(service: FakeService, request: Request) -> Response:
    """The fake preview page is always there: ready."""
    sandbox = request.path_params["id"]
    if sandbox not in service.files or not _authorized(request):
        return _error(404, "not_found", "no such sandbox")
    message = f"the dev server of sandbox {sandbox!r} is up"
    return JSONResponse({"state": "ready", "code": "preview_ready", "message": message})
