"""The sans-IO streaming parser: text chunks in, typed events out.

``StreamParser(dialect).feed(chunk) -> list[Event]`` and ``close() -> list[Event]``; no I/O,
no asyncio, no clock. Between calls it holds only what might still become a tag (at most
``tags.MAX_TAG_LENGTH`` characters) or the start of a file body it has not classified yet (at
most ``file_body.PRELUDE_LIMIT`` and a fence line); content is emitted as soon as it cannot be
markup, so a 100 MB file streams through in constant memory.

Each state has a *step* (:attr:`StreamParser._steps`) that consumes text from an offset and
returns the next offset. Tag states search for the next ``<`` (or ``</`` where only closing tags
matter) with ``str.find``, so every character is examined a constant number of times. What a
recognised tag does, and the state that follows, come from ``transitions.TRANSITIONS``; the
handlers that carry the actions out are ``constructs.HANDLERS``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from parser.constructs import HANDLERS, Attrs, Constructs
from parser.dialects import DIALECTS, Dialect, Role, TagSpec
from parser.errors import ParseError
from parser.events import Error, Event, FileContent, Text, ThinkingContent
from parser.file_body import CDATA_CLOSE, PRELUDE_LIMIT, BodyStart, classify_body_start
from parser.tags import Malformed, Partial, Tag, TagScan, match_tag, parse_attributes
from parser.transitions import (
    CLOSERS,
    FILE_STATES,
    PREVIOUS,
    TRANSITIONS,
    Action,
    Back,
    Listening,
    State,
    Transition,
    listened_names,
    role_of,
)

_CONSTRUCT_NAMES = {
    State.THINKING: "thinking block",
    State.SANDBOX: "sandbox block",
    State.INSTALL: "install block",
    State.SHELL: "shell action",
    State.EDIT: "edit",
}
# Fast paths: content states whose chunk needs no scanning when it holds no markup.
_PLAIN_TEXT, _PLAIN_THINKING, _PLAIN_FILE = 1, 2, 3
_PLAIN: Mapping[State, int] = {
    State.TEXT: _PLAIN_TEXT,
    State.SANDBOX: _PLAIN_TEXT,
    State.THINKING: _PLAIN_THINKING,
    State.FILE: _PLAIN_FILE,  # unless the body is skipped or fenced (see _set_state)
}

Step = Callable[[str, int, list[Event]], int]
Emit = Callable[[str, list[Event]], None]


class StreamParser:
    """Parse a model's tagged answer incrementally.

    Feed the text as it streams; each call returns the events that text completes. ``close()``
    ends every open construct (reporting each as ``unclosed_tag``) and makes the parser ready
    for a new stream.
    """

    def __init__(self, dialect: str | Dialect = "edward") -> None:
        if isinstance(dialect, str):
            if dialect not in DIALECTS:
                raise ParseError(f"unknown dialect {dialect!r}; known: {', '.join(DIALECTS)}")
            dialect = DIALECTS[dialect]
        self.dialect = dialect
        self._steps: Mapping[State, Step] = {
            State.TEXT: self._step_tags,
            State.THINKING: self._step_tags,
            State.SANDBOX: self._step_tags,
            State.FILE_START: self._step_file_start,
            State.FILE: self._step_tags,
            State.CDATA: self._step_cdata,
            State.AFTER_CDATA: self._step_after_cdata,
            State.INSTALL: self._step_tags,
            State.SHELL: self._step_tags,
            State.EDIT: self._step_tags,
        }
        self._reset()

    def _reset(self) -> None:
        self._pending = ""
        self._scan: TagScan | None = None
        self._final = False
        self._return_state = State.TEXT
        self._open = Constructs(self.dialect)
        self._file_path = ""
        file, body = self._open.file, self._open.add_body
        self._emitters: Mapping[State, Emit] = {
            **dict.fromkeys(FILE_STATES, file.emit),
            State.TEXT: _emit_text,
            State.SANDBOX: _emit_text,
            State.THINKING: _emit_thinking,
            State.INSTALL: body,
            State.SHELL: body,
            State.EDIT: self._open.edit.emit,
        }
        self._set_state(State.TEXT)

    # -- public API -----------------------------------------------------------------------

    def feed(self, chunk: str) -> list[Event]:
        """Parse the next chunk of the stream; return the events it completes."""
        try:
            if self._pending:
                data = self._pending + chunk
                self._pending = ""
            else:
                data = chunk
            # Fast paths: text that cannot hold a tag this state listens for is one event.
            plain = self._plain
            if plain == _PLAIN_FILE:
                path = self._file_path
                if "<" not in data:
                    return [FileContent(path, data)] if data else []
                tag_at = data.find("</")
                if tag_at >= 0 or data[-1] == "<":  # JSX has other closing tags: look closer
                    tag_at = self._possible_close_tag(data, tag_at)
                if tag_at < 0:
                    return [FileContent(path, data)]
                if self._held_back(data, tag_at):  # a possible tag ends the chunk: keep it
                    self._pending = data[tag_at:]
                    return [FileContent(path, data[:tag_at])] if tag_at else []
            elif plain and "<" not in data:
                if not data:
                    return []
                return [Text(data) if plain == _PLAIN_TEXT else ThinkingContent(data)]
            events: list[Event] = []
            pos, end = 0, len(data)
            while pos < end:
                pos = self._step(data, pos, events)
            return events
        except TypeError:
            if isinstance(chunk, str):
                raise
            # try costs nothing until it catches: no per-chunk type check on the hot path
            raise TypeError(f"feed() takes text (str), not {type(chunk).__name__}") from None

    def _held_back(self, data: str, at: int) -> bool:
        """Whether ``data[at:]`` is only the start of a closing tag this state listens for."""
        tail = data[at:]
        if tail == "<" or tail == "</":
            return True
        return tail.startswith("</") and tail[2:].lower() in self._listening.prefixes[True]

    def _possible_close_tag(self, data: str, at: int) -> int:
        """Where file text may hold a listened closing tag, else -1 (JSX is full of others).

        ``at`` is where the first ``</`` is (-1 if none)."""
        initials, size = self._initials, len(data)
        while at >= 0 and at + 2 < size and data[at + 2] not in initials:
            at = data.find("</", at + 2)
        if at < 0 and data[-1] == "<":
            return size - 1
        return at

    def close(self) -> list[Event]:
        """End the stream: settle held text, end open constructs, reset for the next stream."""
        self._final = True
        events = self.feed("")
        while self._state is not State.TEXT:
            self._end_construct(events, "before the end of the stream")
        self._reset()
        return events

    # -- states ---------------------------------------------------------------------------

    def _set_state(self, state: State) -> None:
        self._state = state
        self._step = self._steps[state]
        self._emit = self._emitters[state]
        self._listening: Listening = listened_names(self.dialect, state)
        self._needle = self._listening.needle
        self._initials = self._listening.initials
        self._plain = _PLAIN.get(state, 0)
        if state is State.FILE:
            file = self._open.file
            if file.path is None or file.fence:
                self._plain = 0
            else:
                self._file_path = file.path  # the fast path's, constant while the body streams

    def _enter(self, target: State | Back) -> None:
        """Go to ``target``; remember where a construct that goes back was opened."""
        if target is PREVIOUS:
            self._set_state(self._return_state)
            return
        assert isinstance(target, State)
        if target is self._state:
            return
        closer = CLOSERS.get(target)
        if closer is not None and closer.next is PREVIOUS:
            self._return_state = self._state
        self._set_state(target)

    def _step_tags(self, data: str, pos: int, events: list[Event]) -> int:
        needle, listening, start, end = self._needle, self._listening, pos, len(data)
        while True:
            at = data.find(needle, pos)
            if at < 0:
                cut = end - 1 if needle == "</" and data[-1] == "<" and not self._final else end
                cut = max(cut, start)
                if cut > start:
                    self._emit(data[start:cut], events)
                self._pending = data[cut:]
                return end
            if not listening.may_start(data, at):
                pos = at + 1
                continue
            resume, self._scan = (self._scan if at == 0 else None), None
            found = match_tag(data, at, listening.names, listening.prefixes, resume)
            if found is None:
                pos = at + 1
                continue
            if at > start:
                self._emit(data[start:at], events)
            if isinstance(found, Malformed):
                # Reported, and its text stays content: the tags after it are parsed as usual.
                events.append(
                    Error("malformed_tag", f"{found.reason}; its text is kept as content")
                )
                start, pos = at, at + 1
                continue
            if isinstance(found, Partial):
                self._hold_partial(data[at:], found, events)
                return end
            return self._on_tag(found, data, at, events)

    def _hold_partial(self, text: str, found: Partial, events: list[Event]) -> None:
        if not self._final:
            self._pending, self._scan = text, found.scan
        elif text in ("<", "</"):
            self._emit(text, events)
        else:
            # The whole fragment (at most a tag's length) is in the message: nothing is lost.
            events.append(Error("unclosed_tag", f"the stream ended inside the tag {text!r}"))

    def _step_file_start(self, data: str, pos: int, events: list[Event]) -> int:
        kind, at, fence = classify_body_start(data, pos, self._final)
        if kind is BodyStart.NEED_MORE:
            self._pending = data[pos:]
            return len(data)
        if kind is BodyStart.CDATA:
            self._set_state(State.CDATA)
        else:
            self._open.file.fence = fence
            self._set_state(State.FILE)
        return at

    def _step_cdata(self, data: str, pos: int, events: list[Event]) -> int:
        at = data.find(CDATA_CLOSE, pos)
        if at >= 0:
            self._emit(data[pos:at], events)
            self._set_state(State.AFTER_CDATA)
            return at + len(CDATA_CLOSE)
        cut = len(data)
        if not self._final:
            cut -= 2 if data.endswith("]]") else 1 if data.endswith("]") else 0
        cut = max(cut, pos)
        self._emit(data[pos:cut], events)
        self._pending = data[cut:]
        return len(data)

    def _step_after_cdata(self, data: str, pos: int, events: list[Event]) -> int:
        """Whitespace between ``]]>`` and the closing tag is markup; anything else is content."""
        end, at = len(data), pos
        while at < end and data[at] in " \t\r\n" and at - pos < PRELUDE_LIMIT:
            at += 1
        self._set_state(State.FILE)
        undecided = at == end or (data[at] == "<" and at + 1 == end)
        if undecided and not self._final and at - pos < PRELUDE_LIMIT:
            self._hold(State.AFTER_CDATA, data[pos:])
            return end
        if at < end and data.startswith("</", at):
            found = match_tag(data, at, self._listening.names, self._listening.prefixes)
            if isinstance(found, Partial) and not self._final:
                self._hold(State.AFTER_CDATA, data[pos:])
                return end
            if isinstance(found, Tag) and found.name == self._open.file.tag:
                return at
        return pos

    def _hold(self, state: State, text: str) -> None:
        self._set_state(state)
        self._pending = text

    # -- tags -----------------------------------------------------------------------------

    def _on_tag(self, tag: Tag, data: str, at: int, events: list[Event]) -> int:
        spec = self.dialect.tags[tag.name]
        attrs = {} if tag.closing else parse_attributes(tag.attrs_text)
        if tag.closing or spec.role is not None:
            role = role_of(self.dialect, self._state, tag.name, tag.closing)
        else:
            role = spec.role_for(attrs)
            if role is None:
                self._refuse_unknown_kind(spec, attrs, events)
                return tag.end
        transition = TRANSITIONS.get((self._state, role, tag.closing)) if role else None
        if transition is None:
            self._emit(data[at : tag.end], events)
        elif transition.action is Action.END_OPEN:
            self._end_construct(events, f"before {data[at : tag.end][:80]!r}")
            return at  # the state that follows handles this tag
        else:
            before = self._state
            self._apply(transition, spec, attrs, events)
            if tag.self_closing and self._state is not before and self._state is not State.TEXT:
                self._end_construct(events, None)
        return tag.end

    def _apply(
        self, transition: Transition, spec: TagSpec | None, attrs: Attrs, events: list[Event]
    ) -> None:
        HANDLERS[transition.action](self._open, spec, attrs, events)
        self._enter(transition.next)

    def _end_construct(self, events: list[Event], cause: str | None) -> None:
        """End whatever is open; ``cause`` (when given) is reported as ``unclosed_tag``."""
        state = self._state
        if cause is not None:
            file = self._open.file
            what = (
                f"<{file.tag}> for {file.path!r}"
                if state in FILE_STATES
                else _CONSTRUCT_NAMES[state]
            )
            events.append(Error("unclosed_tag", f"{what} was not closed {cause}"))
        self._apply(CLOSERS[state], None, {}, events)

    def _refuse_unknown_kind(self, spec: TagSpec, attrs: Attrs, events: list[Event]) -> None:
        """A discriminated tag of a kind the dialect does not know: report it, skip its body."""
        allowed = ", ".join(sorted(spec.roles_by_value))
        value = attrs.get(spec.discriminator or "")
        message = f"<{spec.name}> {spec.discriminator}={value!r} is not one of: {allowed}"
        if self._state is not State.SANDBOX:
            events.append(Error("invalid_attribute", message))
            return
        events.append(Error("invalid_attribute", f"{message}; its body is skipped"))
        self._open.file.start(spec.name, None)
        self._set_state(State.FILE_START)


def _emit_text(text: str, events: list[Event]) -> None:
    events.append(Text(text))


def _emit_thinking(text: str, events: list[Event]) -> None:
    events.append(ThinkingContent(text))


__all__ = ["Role", "StreamParser"]
