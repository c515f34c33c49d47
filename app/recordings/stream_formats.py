"""Recorded LLM answers: detect the format from content and extract the text deltas per turn.

Formats, tried in this order on the first non-blank line:

- **SSE capture** (the first line that is not an SSE ``:`` comment is an ``event:``, ``data:``,
  ``id:`` or ``retry:`` field): the raw ``text/event-stream`` body of one of these, recognised
  from the first payload that names its provider:

  ========================  ==================================================================
  Anthropic Messages        ``content_block_delta`` events whose ``delta.type`` is
                            ``text_delta``; ``message_stop`` ends a response
  OpenAI Chat Completions   ``choices[0].delta.content``; ``data: [DONE]`` ends a response
  OpenAI Responses          ``response.output_text.delta`` events; ``response.completed`` or
                            ``response.incomplete`` end a response
  Gemini                    ``candidates[0].content.parts[].text``; a ``finishReason`` ends a
  (``?alt=sse``)            response
  ========================  ==================================================================

  Only the answer's text counts. Everything else is skipped on purpose: pings, usage-only
  chunks, tool-call argument deltas, and the providers' own reasoning (Anthropic
  ``thinking_delta``, Gemini parts with ``"thought": true``, Responses ``reasoning*`` events),
  because kiln's tagged answer carries its thinking inside the text (``<Thinking>``) and a
  provider's hidden reasoning is not part of what the model answered. Unknown event types are
  skipped too (providers add them without notice). Each response in a capture is one turn.

  An **error event inside a capture** (Anthropic ``error``, Responses ``error`` or
  ``response.failed``, an ``{"error": ...}`` chunk from OpenAI or Gemini, a Gemini prompt block)
  raises :class:`StreamFormatError` naming the provider's message and the line: a capture that
  ended in an error is not a complete answer, and replaying half of it as if it were would hide
  exactly what the developer is looking for.

- **JSONL** (first line is a JSON object or string): one chunk per line, either
  ``{"turn": n, "text": "..."}`` (``turn`` defaults to the current turn, starting at 1) or a bare
  JSON string (a chunk of the current turn). Turn numbers may repeat (more chunks of that turn)
  but never go down.

- **Plain text**: anything else; one turn, the whole text as one chunk.

Input must be UTF-8 text without NUL bytes; anything else raises :class:`StreamFormatError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from app.errors import KilnError

_SSE_FIELD = re.compile(r"(event|data|id|retry):")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_MAX_SHOWN = 60


class StreamFormatError(KilnError, ValueError):
    """A recording that cannot be read: not UTF-8 text, malformed JSONL or SSE, a provider error."""

    code = "stream_format"


@dataclass
class Turn:
    """One model answer: its number and the text deltas it arrived in.

    ``numbered`` is true when the input itself has turn structure (JSONL objects, or a capture
    holding several responses); plain text and bare JSONL strings are one unnumbered answer.
    """

    number: int
    chunks: list[str] = field(default_factory=list)
    numbered: bool = False

    @property
    def text(self) -> str:
        """The whole text of the turn."""
        return "".join(self.chunks)


def load_turns(raw: bytes | str, source_name: str) -> list[Turn]:
    """Detect the format of a recording and return its turns; raise :class:`StreamFormatError`."""
    text = decode_text(raw, source_name) if isinstance(raw, bytes) else raw
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise StreamFormatError(f"{source_name!r}, line {line}: NUL byte; this is not text")
    if text.startswith("\ufeff"):
        text = text[1:]
    first = _first_nonblank_line(text)
    if first is None:
        raise StreamFormatError(f"{source_name!r}: empty input, nothing to parse")
    if _SSE_FIELD.match(_first_nonblank_line(text, skip_sse_comments=True) or ""):
        return load_sse_capture(text, source_name)
    if first.startswith(("{", '"')) and _is_json(first):
        return load_jsonl(text, source_name)
    return [Turn(number=1, chunks=[text])]


def decode_text(raw: bytes, source_name: str) -> str:
    """``raw`` decoded as UTF-8; binary data and invalid UTF-8 raise, naming the line."""
    nul = raw.find(b"\x00")
    if nul >= 0:
        line = raw.count(b"\n", 0, nul) + 1
        raise StreamFormatError(f"{source_name!r}, line {line}: NUL byte; this is not text")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        bad = raw[exc.start : exc.start + 4]
        raise StreamFormatError(
            f"{source_name!r}, line {line}: invalid UTF-8 at byte {exc.start} ({bad!r})"
        ) from exc


def _first_nonblank_line(text: str, skip_sse_comments: bool = False) -> str | None:
    for line in _LINE_BREAK.split(text):
        if line.strip() and not (skip_sse_comments and line.startswith(":")):
            return line.lstrip()
    return None


def _is_json(line: str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def _shorten(value: str) -> str:
    return value if len(value) <= _MAX_SHOWN else value[:_MAX_SHOWN] + "…"


# --- JSONL -----------------------------------------------------------------------------------


def load_jsonl(text: str, source_name: str) -> list[Turn]:
    """Turns of a JSONL recording: ``{"turn": n, "text": ...}`` objects or bare strings."""
    turns: list[Turn] = []
    current = 1
    for number, line in enumerate(_LINE_BREAK.split(text), start=1):
        if not line.strip():
            continue
        where = f"{source_name!r}, line {number}"
        turn_number, chunk, numbered = _jsonl_record(line, where, current)
        if turns and turn_number == turns[-1].number:
            turns[-1].chunks.append(chunk)
            turns[-1].numbered |= numbered
        else:
            turns.append(Turn(number=turn_number, chunks=[chunk], numbered=numbered))
        current = turn_number
    return turns


def _jsonl_record(line: str, where: str, current: int) -> tuple[int, str, bool]:
    """(turn number, text, whether the line numbered its turn) of one JSONL line."""
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise StreamFormatError(f"{where}: not valid JSON ({exc.msg}): {_shorten(line)!r}") from exc
    if isinstance(value, str):
        return current, value, False
    if not isinstance(value, dict):
        kind = type(value).__name__
        raise StreamFormatError(f"{where}: a JSON {kind}, expected an object or a string")
    chunk = value.get("text")
    if not isinstance(chunk, str):
        raise StreamFormatError(f"{where}: the object has no string 'text': {_shorten(line)!r}")
    turn = value.get("turn", current)
    if isinstance(turn, bool) or not isinstance(turn, int) or turn < 1:
        raise StreamFormatError(f"{where}: 'turn' must be a positive integer, got {turn!r}")
    if turn < current:
        raise StreamFormatError(f"{where}: turn {turn} comes after turn {current}")
    return turn, chunk, "turn" in value


# --- SSE -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SseEvent:
    """One dispatched server-sent event: its name (``message`` by default), data and line."""

    name: str
    data: str
    line: int


def iter_sse_events(text: str, source_name: str) -> Iterator[SseEvent]:
    """The events of a ``text/event-stream`` body, as the SSE spec dispatches them."""
    name, data, start = "", list[str](), 0
    for number, line in enumerate(_LINE_BREAK.split(text), start=1):
        if not line:
            if data:
                yield SseEvent(name or "message", "\n".join(data), start)
            name, data = "", []
            continue
        if line.startswith(":"):
            continue  # a comment (keep-alive)
        key, colon, value = line.partition(":")
        if not colon:
            raise StreamFormatError(
                f"{source_name!r}, line {number}: not an SSE field line: {_shorten(line)!r}"
            )
        value = value.removeprefix(" ")
        if key == "event":
            name = value
        elif key == "data":
            start = start if data else number
            data.append(value)
    if data:
        yield SseEvent(name or "message", "\n".join(data), start)


# What one payload contributes: its answer text ("" for none) and whether it ends a response.
Delta = tuple[str, bool]
Extractor = Callable[[dict[str, Any]], Delta]
_NOTHING: Delta = ("", False)
_END: Delta = ("", True)


def load_sse_capture(text: str, source_name: str) -> list[Turn]:
    """Turns of a provider's SSE capture: the text deltas of each response in it."""
    extractor: Extractor | None = None
    turns: list[Turn] = []
    chunks: list[str] = []
    seen = False  # events arrived since the last response ended
    for event in iter_sse_events(text, source_name):
        where = f"{source_name!r}, line {event.line}"
        payload = _sse_payload(event, where)
        if payload is None:
            delta = _END  # OpenAI's `data: [DONE]`
        else:
            _raise_provider_error(payload, where)
            extractor = extractor or _identify_provider(payload)
            delta = extractor(payload) if extractor else _NOTHING
        if delta[0]:
            chunks.append(delta[0])
        seen = seen or payload is not None
        if delta[1] and seen:
            turns.append(Turn(number=len(turns) + 1, chunks=chunks))
            chunks, seen = [], False
    if extractor is None:
        raise StreamFormatError(
            f"{source_name!r}: an SSE capture, but no event is from a known provider "
            "(Anthropic, OpenAI Chat Completions or Responses, Gemini)"
        )
    if chunks or not turns:
        # a capture cut before its end marker; trailing pings alone make no turn
        turns.append(Turn(number=len(turns) + 1, chunks=chunks))
    for turn in turns:
        turn.numbered = len(turns) > 1
    return turns


def _sse_payload(event: SseEvent, where: str) -> dict[str, Any] | None:
    """The event's JSON object, or None for ``[DONE]``."""
    if event.data.strip() == "[DONE]":
        return None
    try:
        payload = json.loads(event.data)
    except json.JSONDecodeError as exc:
        raise StreamFormatError(
            f"{where}: SSE data is not JSON ({exc.msg}): {_shorten(event.data)!r}"
        ) from exc
    if not isinstance(payload, dict):
        raise StreamFormatError(
            f"{where}: SSE data is a JSON {type(payload).__name__}, not an object"
        )
    return payload


def _raise_provider_error(payload: dict[str, Any], where: str) -> None:
    """Raise if the payload is any provider's in-stream error."""
    message = _provider_error_message(payload)
    if message is not None:
        raise StreamFormatError(f"{where}: the capture holds a provider error: {message}")


def _provider_error_message(payload: dict[str, Any]) -> str | None:
    kind = payload.get("type")
    error = payload.get("error")
    if kind == "response.failed":
        response = payload.get("response")
        error = response.get("error") if isinstance(response, dict) else None
        return _describe_error(error if isinstance(error, dict) else {"message": "response failed"})
    if kind == "error":
        # Anthropic nests {type, message} under "error"; Responses puts code/message at the top.
        if isinstance(error, dict):
            return _describe_error(error)
        return _describe_error({"code": payload.get("code"), "message": payload.get("message")})
    if isinstance(error, dict):
        return _describe_error(error)  # OpenAI Chat Completions and Gemini
    feedback = payload.get("promptFeedback")
    if isinstance(feedback, dict) and feedback.get("blockReason") and not payload.get("candidates"):
        return f"prompt blocked ({feedback['blockReason']})"
    return None


def _describe_error(error: dict[str, Any]) -> str:
    label = error.get("type") or error.get("status") or error.get("code")
    message = str(error.get("message") or "no message")
    return f"{label}: {message!r}" if label else repr(message)


_ANTHROPIC_TYPES = frozenset(
    {
        "message_start", "message_delta", "message_stop", "ping",
        "content_block_start", "content_block_delta", "content_block_stop",
    }
)  # fmt: skip


def _identify_provider(payload: dict[str, Any]) -> Extractor | None:
    """The extractor of the provider that sent ``payload``, if it names one."""
    kind = payload.get("type")
    if isinstance(kind, str) and kind.startswith("response."):
        return _openai_responses_delta
    if kind in _ANTHROPIC_TYPES:
        return _anthropic_delta
    if "choices" in payload or payload.get("object") == "chat.completion.chunk":
        return _openai_chat_delta
    if "candidates" in payload or "usageMetadata" in payload:
        return _gemini_delta
    return None


def _anthropic_delta(payload: dict[str, Any]) -> Delta:
    kind = payload.get("type")
    if kind == "message_stop":
        return _END
    if kind == "content_block_delta":
        delta = _obj(payload.get("delta"))
        return _text(delta.get("text")) if delta.get("type") == "text_delta" else _NOTHING
    if kind == "content_block_start":
        block = _obj(payload.get("content_block"))
        return _text(block.get("text")) if block.get("type") == "text" else _NOTHING
    return _NOTHING


def _openai_chat_delta(payload: dict[str, Any]) -> Delta:
    # With n > 1 the choices interleave; kiln asks for one, so only choice 0 is the answer.
    choices = payload.get("choices")
    for choice in map(_obj, choices if isinstance(choices, list) else ()):
        if choice.get("index", 0) == 0:
            return _text(_obj(choice.get("delta")).get("content"))
    return _NOTHING


def _openai_responses_delta(payload: dict[str, Any]) -> Delta:
    kind = payload.get("type")
    if kind in ("response.completed", "response.incomplete"):
        return _END
    if kind == "response.output_text.delta":
        return _text(payload.get("delta"))
    return _NOTHING


def _gemini_delta(payload: dict[str, Any]) -> Delta:
    candidates = payload.get("candidates")
    candidate = _obj(candidates[0] if isinstance(candidates, list) and candidates else None)
    parts = _obj(candidate.get("content")).get("parts")
    # Parts marked `thought` are Gemini's own reasoning, not the answer (see the module doc).
    text = "".join(
        part["text"]
        for part in map(_obj, parts if isinstance(parts, list) else ())
        if isinstance(part.get("text"), str) and not part.get("thought")
    )
    # The last chunk carries the finish reason, often together with the last text.
    return text, bool(candidate.get("finishReason"))


def _obj(value: object) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one: captures may lack any field."""
    return value if isinstance(value, dict) else {}


def _text(value: object) -> Delta:
    return (value, False) if isinstance(value, str) else _NOTHING
