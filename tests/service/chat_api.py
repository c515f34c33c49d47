"""A served kiln's chat API as the end-to-end tests drive it: a chat made with its first
message, a follow-up, a run's events followed (SSE, resumed after ``Last-Event-ID``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx

RUN_LIMIT_SECONDS = 150.0
Event = tuple[int, dict[str, Any]]


def follow(
    client: httpx.Client,
    run_id: str,
    after: int | None = None,
    stop: Callable[[dict[str, Any]], bool] | None = None,
    limit: float = RUN_LIMIT_SECONDS,
) -> list[Event]:
    """The run's events through ``client`` after ``after`` (Last-Event-ID), until the run ends
    or ``stop(event)`` holds."""
    headers = {} if after is None else {"Last-Event-ID": str(after)}
    events: list[Event] = []
    seq = 0
    path = f"/api/runs/{run_id}/events"
    with client.stream("GET", path, headers=headers, timeout=limit) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("id: "):
                seq = int(line.removeprefix("id: "))
            elif line.startswith("data: "):
                event = json.loads(line.removeprefix("data: "))
                events.append((seq, event))
                if event["type"] == "run_finished" or (stop is not None and stop(event)):
                    break
    return events


def post(client: httpx.Client, chat_id: str, model: str) -> str:
    """Send a message to the chat; the run's id."""
    answer = client.post(f"/api/chats/{chat_id}/messages", json={"content": model, "model": model})
    assert answer.status_code == 202, answer.text
    run_id: str = answer.json()["run_id"]
    return run_id


def new_chat(client: httpx.Client, model: str) -> tuple[str, str]:
    """A chat made with its first message; its id and the run's."""
    made = client.post("/api/chats", json={"message": {"content": model, "model": model}})
    assert made.status_code == 201, made.text
    return made.json()["chat"]["id"], made.json()["run_id"]


def finished(events: list[Event]) -> dict[str, Any]:
    """The ``run_finished`` event (the last one)."""
    assert events, "no events"
    last = events[-1][1]
    assert last["type"] == "run_finished", events[-3:]
    return last


def preview_headers(
    signer: httpx.Client, client: httpx.Client, sandbox_id: str, port: int
) -> dict[str, str]:
    """The headers of a request for the sandbox's preview through ``client`` (the kiln on
    ``port``), signed in with a preview link ``signer`` asked for (it may be another host's)."""
    link = signer.post(f"/api/sandboxes/{sandbox_id}/preview-login").json()["url"]
    host = f"{sandbox_id}.preview.kiln.localhost:{port}"
    signed = client.get("/__kiln/login" + link.split("/__kiln/login", 1)[1], headers={"Host": host})
    assert signed.status_code in (302, 303), signed.text
    return {"Host": host, "Cookie": signed.headers["set-cookie"].split(";", 1)[0]}
