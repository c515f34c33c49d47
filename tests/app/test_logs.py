"""JSON log lines with the ids in scope."""

from __future__ import annotations

import io
import json
import logging
import sys

from app.logs import JsonFormatter, log_context, setup_logging


def record(message: str = "hello %s", **extra: object) -> logging.LogRecord:
    entry = logging.LogRecord("app.test", logging.WARNING, __file__, 1, message, ("world",), None)
    for key, value in extra.items():
        setattr(entry, key, value)
    return entry


def test_a_record_is_one_json_line_with_its_fields() -> None:
    line = JsonFormatter().format(record(run_id="r1", count=3, thing=object()))
    parsed = json.loads(line)
    assert "\n" not in line
    assert parsed["message"] == "hello world"
    assert parsed["level"] == "warning"
    assert parsed["logger"] == "app.test"
    assert parsed["run_id"] == "r1"
    assert parsed["count"] == 3
    assert parsed["thing"].startswith("<object object")
    assert parsed["time"].endswith("Z")


def test_ids_in_context_are_added_and_nest() -> None:
    with log_context(request_id="q1"):
        with log_context(run_id="r2"):
            inner = json.loads(JsonFormatter().format(record()))
        outer = json.loads(JsonFormatter().format(record()))
    assert (inner["request_id"], inner["run_id"]) == ("q1", "r2")
    assert "run_id" not in outer
    assert "request_id" not in json.loads(JsonFormatter().format(record()))


def test_a_traceback_goes_into_exc() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        entry = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    parsed = json.loads(JsonFormatter().format(entry))
    assert "ValueError: boom" in parsed["exc"]


def test_setup_routes_root_and_uvicorn_through_json() -> None:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    stream = io.StringIO()
    try:
        setup_logging("info", stream)
        logging.getLogger("uvicorn.error").info("started")
        logging.getLogger("app.x").debug("hidden")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(line["logger"], line["message"]) for line in lines] == [("uvicorn.error", "started")]


def test_login_tokens_are_redacted() -> None:
    message = '127.0.0.1:1 - "GET %s HTTP/1.1" 303'
    entry = logging.LogRecord(
        "x", logging.INFO, __file__, 1, message, ("/login?token=s3_x&n=/",), None
    )
    line = json.loads(JsonFormatter().format(entry))
    assert line["message"] == '127.0.0.1:1 - "GET /login?token=<redacted>&n=/ HTTP/1.1" 303'
