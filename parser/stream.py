"""The sans-IO streaming parser: text chunks in, typed events out.

``StreamParser(dialect).feed(chunk) -> list[Event]`` and ``close() -> list[Event]``; no I/O,
no asyncio, no clock. Between calls it holds only what might still become a tag (at most
``tags.MAX_TAG_LENGTH`` characters) or the start of a file body it has not classified yet (at
most ``file_body.PRELUDE_LIMIT``); content is emitted as soon as it cannot be markup, so a
100 MB file streams through in constant memory.

Each state has a *step* that consumes text from an offset and returns the next offset. Tag
states search for the next ``<`` (or ``</`` where only closing tags matter) with ``str.find``,
so every character is examined a constant number of times; what a recognised tag does comes
from ``transitions.TRANSITIONS``, keyed by (state, role, closing).
"""

from __future__ import annotations

from collections.abc import Callable

from parser.action_tags import SELF_CONTAINED, field_value
from parser.dialects import DIALECTS, Dialect, Role, TagSpec
from parser.errors import ParseError, UnsafePathError
from parser.events import (
    Error,
    Event,
    FileContent,
    FileEnd,
    FileStart,
    InstallContent,
    InstallEnd,
    InstallStart,
    SandboxEnd,
    SandboxStart,
    Text,
    ThinkingContent,
    ThinkingEnd,
    ThinkingStart,
)
from parser.file_body import (
    CDATA_CLOSE,
    PRELUDE_LIMIT,
    BodyStart,
    classify_body_start,
    fence_tail_start,
    settle_fence_tail,
)
from parser.packages import parse_install_block
from parser.paths import normalize_file_path
from parser.shell_lines import shell_events
from parser.tags import Malformed, Partial, Tag, TagScan, match_tag, parse_attributes
from parser.transitions import (
    IGNORE,
    IMPLICIT_END,
    TRANSITIONS,
    Listening,
    State,
    listened_names,
    role_of,
)

_CONSTRUCT_NAMES = {
    State.THINKING: "thinking block",
    State.SANDBOX: "sandbox block",
    State.INSTALL: "install block",
    State.SHELL: "shell action",
}
_FILE_STATES = (State.FILE_START, State.FILE, State.CDATA, State.AFTER_CDATA)
# Fast paths: content states whose chunk needs no scanning when it holds no markup.
_PLAIN_TEXT, _PLAIN_THINKING, _PLAIN_FILE = 1, 2, 3

Step = Callable[[str, int, list[Event]], int]
Spec = TagSpec | None
Attrs = dict[str, str]


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
        self._actions: dict[str, Callable[[Spec, Attrs, list[Event]], None]] = {
            name.removeprefix("_do_"): getattr(self, name)
            for name in dir(self)
            if name.startswith("_do_")
        }
        self._reset()

    def _reset(self) -> None:
        self._pending = ""
        self._scan: TagScan | None = None
        self._final = False
        self._return_state = State.TEXT
        self._path: str | None = None
        self._file_tag = ""
        self._fence = ""
        self._tail = ""
        self._line_start = True
        self._body: list[str] = []
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
                if "<" not in data:
                    return [FileContent(self._path, data)] if data else []  # type: ignore[arg-type]
                tag_at = self._possible_close_tag(data)
                if tag_at < 0:
                    return [FileContent(self._path, data)]  # type: ignore[arg-type]
                if self._held_back(data, tag_at):  # a possible tag ends the chunk: keep it
                    self._pending = data[tag_at:]
                    return [FileContent(self._path, data[:tag_at])] if tag_at else []  # type: ignore[arg-type]
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

    def _possible_close_tag(self, data: str) -> int:
        """Where file text may hold a listened closing tag, else -1 (JSX is full of others)."""
        at, initials, size = data.find("</"), self._initials, len(data)
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
        self._plain = 0
        if state is State.FILE_START:
            self._step: Step = self._step_file_start
        elif state is State.CDATA:
            self._step = self._step_cdata
        elif state is State.AFTER_CDATA:
            self._step = self._step_after_cdata
        else:
            self._step = self._step_tags
            self._listening: Listening = listened_names(self.dialect, state)
            self._needle = self._listening.needle
            self._initials = self._listening.initials
            if state is State.TEXT or state is State.SANDBOX:
                self._plain = _PLAIN_TEXT
            elif state is State.THINKING:
                self._plain = _PLAIN_THINKING
            elif state is State.FILE and self._path is not None and not self._fence:
                self._plain = _PLAIN_FILE
        self._emit = self._emitter(state)

    def _emitter(self, state: State) -> Callable[[str, list[Event]], None]:
        if state in _FILE_STATES:
            return self._emit_file
        if state is State.THINKING:
            return _emit_thinking
        if state is State.INSTALL or state is State.SHELL:
            return self._emit_body
        return _emit_text

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
            self._fence = fence
            self._set_state(State.FILE)
        return at

    def _step_cdata(self, data: str, pos: int, events: list[Event]) -> int:
        at = data.find(CDATA_CLOSE, pos)
        if at >= 0:
            self._emit_file(data[pos:at], events)
            self._set_state(State.AFTER_CDATA)
            return at + len(CDATA_CLOSE)
        cut = len(data)
        if not self._final:
            cut -= 2 if data.endswith("]]") else 1 if data.endswith("]") else 0
        cut = max(cut, pos)
        self._emit_file(data[pos:cut], events)
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
            if isinstance(found, Tag) and found.name == self._file_tag:
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
        action = TRANSITIONS.get((self._state, role, tag.closing)) if role else None
        if action is None:
            self._emit(data[at : tag.end], events)
        elif action == IMPLICIT_END:
            self._end_construct(events, f"before {data[at : tag.end][:80]!r}")
            return at  # the state that follows handles this tag
        elif action in SELF_CONTAINED:
            events.extend(SELF_CONTAINED[action](spec, attrs))
        elif action != IGNORE:
            before = self._state
            self._actions[action](spec, attrs, events)
            if tag.self_closing and self._state is not before and self._state is not State.TEXT:
                self._end_construct(events, None)
        return tag.end

    def _end_construct(self, events: list[Event], cause: str | None) -> None:
        """End whatever is open; ``cause`` (when given) is reported as ``unclosed_tag``."""
        state = self._state
        if cause is not None:
            what = (
                f"<{self._file_tag}> for {self._path!r}"
                if state in _FILE_STATES
                else _CONSTRUCT_NAMES[state]
            )
            events.append(Error("unclosed_tag", f"{what} was not closed {cause}"))
        if state in _FILE_STATES:
            self._do_close_file(None, {}, events)
        elif state is State.THINKING:
            self._do_close_thinking(None, {}, events)
        elif state is State.SANDBOX:
            self._do_close_sandbox(None, {}, events)
        elif state is State.INSTALL:
            self._do_close_install(None, {}, events)
        elif state is State.SHELL:
            self._do_close_shell(None, {}, events)

    # -- actions (named in the transition table) ------------------------------------------

    def _do_open_thinking(self, spec: Spec, attrs: Attrs, events: list[Event]) -> None:
        events.append(ThinkingStart())
        self._return_state = self._state
        self._set_state(State.THINKING)

    def _do_close_thinking(self, spec: Spec, attrs: Attrs, events: list[Event]) -> None:
        events.append(ThinkingEnd())
        self._set_state(self._return_state)

    def _do_open_sandbox(self, spec: Spec, attrs: Attrs, events: list[Event]) -> None:
        assert spec is not None
        project = field_value(spec, attrs, "project") or field_value(spec, attrs, "title")
        events.append(SandboxStart(project, field_value(spec, attrs, "base")))
        self._set_state(State.SANDBOX)

    def _do_close_sandbox(self, spec: Spec, attrs: Attrs, events: list[Event]) -> None:
        events.append(SandboxEnd())
        self._set_state(State.TEXT)

    def _do_reject_nested(self, spec: Spec, attrs: Attrs, events: list[Event]) -> None:
        events.append(
            Error(
                "unexpected_tag",
                "a sandbox block is already open; the nested opening tag is ignored",
            )
        )

    def _refuse_unknown_kind(self, spec: TagSpec, attrs: Attrs, events: list[Event]) -> None:
        """A discriminated tag of a kind the dialect does not know: report it, skip its body."""
        allowed = ", ".join(sorted(spec.roles_by_value))
        value = attrs.get(spec.discriminator or "")
        message = f"<{spec.name}> {spec.discriminator}={value!r} is not one of: {allowed}"
        if self._state is not State.SANDBOX:
            events.append(Error("invalid_attribute", message))
            return
        events.append(Error("invalid_attribute", f"{message}; its body is skipped"))
        self._file_tag, self._fence, self._tail, self._path = spec.name, "", "", None
        self._set_state(State.FILE_START)

    def _do_open_file(self, spec: Spec, attrs: Attrs, events: list[Event]) -> None:
        assert spec is not None
        self._file_tag, self._fence, self._tail, self._line_start = spec.name, "", "", True
        raw = attrs.get(spec.fields["path"])
        try:
            if raw is None:
                raise UnsafePathError(f"<{spec.name}> has no {spec.fields['path']!r} attribute")
            self._path = normalize_file_path(_strip_root(raw, self.dialect.path_roots))
        except UnsafePathError as exc:
            self._path = None
            events.append(Error("invalid_file_path", f"{exc}; the file's content is skipped"))
        else:
            events.append(FileStart(self._path))
        self._set_state(State.FILE_START)

    def _do_close_file(self, spec: Spec, attrs: Attrs, events: list[Event]) -> None:
        path, tail = self._path, settle_fence_tail(self._tail, self._fence) if self._fence else ""
        if path is not None:
            if tail:
                events.append(FileContent(path, tail))
            events.append(FileEnd(path))
        self._path, self._fence, self._tail = None, "", ""
        self._set_state(State.SANDBOX)

    def _do_open_install(self, spec: Spec, attrs: Attrs, events: list[Event]) -> None:
        events.append(InstallStart())
        self._body = []
        self._return_state = self._state
        self._set_state(State.INSTALL)

    def _do_close_install(self, spec: Spec, attrs: Attrs, events: list[Event]) -> None:
        block = parse_install_block("".join(self._body))
        self._body = []
        events.extend(Error(code, message) for code, message in block.rejected)
        events.append(InstallContent(block.dependencies, block.framework))
        events.append(InstallEnd())
        self._set_state(self._return_state)

    def _do_open_shell(self, spec: Spec, attrs: Attrs, events: list[Event]) -> None:
        self._body = []
        self._set_state(State.SHELL)

    def _do_close_shell(self, spec: Spec, attrs: Attrs, events: list[Event]) -> None:
        events.extend(shell_events("".join(self._body)))
        self._body = []
        self._set_state(State.SANDBOX)

    # -- content --------------------------------------------------------------------------

    def _emit_file(self, text: str, events: list[Event]) -> None:
        if self._path is None:
            return
        if self._fence:
            text = self._tail + text
            cut = fence_tail_start(text, self._line_start, self._fence)
            self._tail, text = text[cut:], text[:cut]
            if not text:
                return
            self._line_start = text[-1] == "\n"
        if text:
            events.append(FileContent(self._path, text))

    def _emit_body(self, text: str, events: list[Event]) -> None:
        self._body.append(text)


def _emit_text(text: str, events: list[Event]) -> None:
    events.append(Text(text))


def _emit_thinking(text: str, events: list[Event]) -> None:
    events.append(ThinkingContent(text))


def _strip_root(raw: str, roots: tuple[str, ...]) -> str:
    """Drop the first of a dialect's project-root prefixes that ``raw`` starts with."""
    for root in roots:
        if raw.startswith(root):
            return raw[len(root) :]
    return raw


__all__ = ["Role", "StreamParser"]
