"""Structured logs: one JSON object per line, carrying the run and request ids in scope.

``setup_logging()`` installs a :class:`JsonFormatter` on the root logger (and routes uvicorn's
loggers through it). Code that works on behalf of a run or a request wraps that work in
``with log_context(run_id=...)``; every record logged inside, from any module, then carries the
id, which is what makes one run's lines findable among twenty concurrent ones::

    {"time": "2025-01-01T12:00:00.123Z", "level": "info", "logger": "app.runs.worker",
     "message": "run started", "run_id": "9f2c...", "request_id": null}

Fields passed with ``extra={...}`` are added to the object as well (values that JSON cannot
carry are written with ``repr``); a traceback goes into ``exc``. ``token=`` values in messages
(the login links in uvicorn's access log) are redacted.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import re
import sys
import time
from collections.abc import Iterator
from typing import Any, TextIO

# Immutable pairs, so the default can be shared safely.
_CONTEXT: contextvars.ContextVar[tuple[tuple[str, str], ...]] = contextvars.ContextVar(
    "kiln_log_context", default=()
)
# Attributes every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "color_message",  # uvicorn's coloured duplicate of the message
    "taskName",
}
UVICORN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access")
# Login links carry one-time tokens in the query (``/login?token=...``): access logs must not.
_TOKEN_IN_QUERY = re.compile(r"(\btoken=)[^&\s\"']+")


@contextlib.contextmanager
def log_context(**ids: str) -> Iterator[None]:
    """Add ``ids`` (e.g. ``run_id=...``) to every record logged inside the block."""
    token = _CONTEXT.set(tuple({**dict(_CONTEXT.get()), **ids}.items()))
    try:
        yield
    finally:
        _CONTEXT.reset(token)


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON line (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a JSON object on one line."""
        entry: dict[str, Any] = {
            "time": _iso_time(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        entry.update(_CONTEXT.get())
        for key, value in vars(record).items():
            if key not in _STANDARD_ATTRIBUTES and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=repr)


def redact(message: str) -> str:
    """``message`` with the values of ``token=`` query parameters replaced."""
    return _TOKEN_IN_QUERY.sub(r"\1<redacted>", message)


def _iso_time(created: float) -> str:
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created))
    return f"{seconds}.{int(created % 1 * 1000):03d}Z"


def setup_logging(level: str = "info", stream: TextIO | None = None) -> None:
    """JSON lines on ``stream`` (stderr) for the root logger and uvicorn's loggers."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in UVICORN_LOGGERS:
        uvicorn_logger = logging.getLogger(name)
        uvicorn_logger.handlers.clear()
        uvicorn_logger.propagate = True
        # uvicorn's own config may have set a level or disabled the logger earlier in this
        # process (another server started with other options): kiln's level rules them all.
        uvicorn_logger.setLevel(logging.NOTSET)
        uvicorn_logger.disabled = False
