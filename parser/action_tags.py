"""Self-contained action tags: a command, a web search, a page to read, done.

Each is complete in its opening tag, so turning one into events is a pure function of the tag's
spec and attributes. Malformed attributes become ``error`` events; nothing is guessed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from parser.dialects import TagSpec
from parser.events import Command, Done, Error, Event, UrlScrape, WebSearch

DEFAULT_MAX_RESULTS = 5
MAX_SEARCH_RESULTS = 20
_PROGRAM = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")


def field_value(spec: TagSpec, attrs: Mapping[str, str], name: str) -> str | None:
    """The value of the attribute that carries field ``name`` in this dialect, if non-empty."""
    attribute = spec.fields.get(name)
    value = attrs.get(attribute) if attribute else None
    return value or None


def command_events(spec: TagSpec, attrs: Mapping[str, str]) -> list[Event]:
    """A ``command`` event, or an error naming what is wrong with the tag."""
    command = (field_value(spec, attrs, "command") or "").strip()
    if not command:
        return [Error("missing_attribute", f"<{spec.name}> needs a command attribute")]
    if not _PROGRAM.fullmatch(command):
        message = f"command must be a program name with arguments in args: {command!r}"
        return [Error("invalid_command", message)]
    raw = attrs.get(spec.fields["args"])
    args = command_args(raw)
    if args is None:
        message = f"args of {command!r} must be a JSON array of strings, got {raw!r}"
        return [Error("invalid_command_args", message)]
    return [Command(command, args)]


def command_args(raw: str | None) -> list[str] | None:
    """The argv of a command's ``args`` attribute: a JSON array of strings, else ``None``."""
    if raw is None or not raw.strip():
        return []
    try:
        value: Any = json.loads(raw)
    except ValueError:
        return None
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    return None


def web_search_events(spec: TagSpec, attrs: Mapping[str, str]) -> list[Event]:
    """A ``web_search`` event; a bad ``max_results`` is reported and the default used."""
    query = (field_value(spec, attrs, "query") or "").strip()
    if not query:
        return [Error("missing_attribute", f"<{spec.name}> needs a query attribute")]
    raw = field_value(spec, attrs, "max_results")
    if raw is None:
        return [WebSearch(query, DEFAULT_MAX_RESULTS)]
    given = raw.strip()
    # ASCII digits only ('²'.isdigit() is true, int('²') fails), and few (int() refuses 4301).
    number = int(given) if given.isascii() and given.isdigit() and len(given) <= 9 else 0
    if 1 <= number <= MAX_SEARCH_RESULTS:
        return [WebSearch(query, number)]
    message = (
        f"max_results must be a whole number from 1 to {MAX_SEARCH_RESULTS}, got {raw!r};"
        f" using {DEFAULT_MAX_RESULTS}"
    )
    return [Error("invalid_attribute", message), WebSearch(query, DEFAULT_MAX_RESULTS)]


def url_scrape_events(spec: TagSpec, attrs: Mapping[str, str]) -> list[Event]:
    """A ``url_scrape`` event for an http(s) URL, else an error."""
    url = (field_value(spec, attrs, "url") or "").strip()
    if not url.lower().startswith(("http://", "https://")):
        return [Error("invalid_attribute", f"<{spec.name}> needs an http(s) url, got {url!r}")]
    return [UrlScrape(url)]


def done_events(spec: TagSpec, attrs: Mapping[str, str]) -> list[Event]:
    """The model said it is finished."""
    return [Done()]
