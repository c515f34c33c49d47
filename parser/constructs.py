"""What each action of the transition table does: the events it emits, the data it records.

Handlers never change the parser's state: the table says where the parser goes next
(``parser.transitions``). What the open constructs hold between tags (the file being written, an
install or shell body) lives in :class:`Constructs`, which the parser owns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from parser.action_tags import (
    command_events,
    done_events,
    field_value,
    url_scrape_events,
    web_search_events,
)
from parser.dialects import Dialect, TagSpec
from parser.edit_body import EditBody
from parser.errors import UnsafePathError
from parser.events import (
    EditStart,
    Error,
    Event,
    FileStart,
    InstallContent,
    InstallEnd,
    InstallStart,
    Read,
    SandboxEnd,
    SandboxStart,
    ThinkingEnd,
    ThinkingStart,
)
from parser.file_body import FileBody
from parser.packages import parse_install_block
from parser.paths import check_writable, normalize_file_path
from parser.shell_lines import shell_events
from parser.transitions import Action

Spec = TagSpec | None
Attrs = Mapping[str, str]


class Constructs:
    """What the open constructs hold: the file being written or edited, an install or shell
    body."""

    __slots__ = ("body", "dialect", "edit", "file")

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self.file = FileBody()
        self.edit = EditBody()
        self.body: list[str] = []

    def add_body(self, text: str, events: list[Event]) -> None:
        """Text inside an install block or a shell action: parsed when it closes."""
        self.body.append(text)

    def take_body(self) -> str:
        """The collected body, forgotten."""
        body, self.body = "".join(self.body), []
        return body


Handler = Callable[[Constructs, Spec, Attrs, list[Event]], None]


def open_thinking(c: Constructs, spec: Spec, attrs: Attrs, events: list[Event]) -> None:
    """``<Thinking>``."""
    events.append(ThinkingStart())


def close_thinking(c: Constructs, spec: Spec, attrs: Attrs, events: list[Event]) -> None:
    """``</Thinking>``, or a thinking block ended by another tag or the stream's end."""
    events.append(ThinkingEnd())


def open_sandbox(c: Constructs, spec: Spec, attrs: Attrs, events: list[Event]) -> None:
    """The sandbox block opens with its project and base."""
    assert spec is not None
    project = field_value(spec, attrs, "project") or field_value(spec, attrs, "title")
    events.append(SandboxStart(project, field_value(spec, attrs, "base")))


def close_sandbox(c: Constructs, spec: Spec, attrs: Attrs, events: list[Event]) -> None:
    """The sandbox block ends."""
    events.append(SandboxEnd())


def reject_nested(c: Constructs, spec: Spec, attrs: Attrs, events: list[Event]) -> None:
    """A sandbox opened inside a sandbox: reported, not obeyed."""
    message = "a sandbox block is already open; the nested opening tag is ignored"
    events.append(Error("unexpected_tag", message))


def tag_path(
    c: Constructs,
    spec: TagSpec,
    attrs: Attrs,
    events: list[Event],
    skip: str,
    *,
    writes: bool = True,
) -> str | None:
    """The tag's normalized path; an unsafe or missing one (or, for a tag that ``writes``, a
    protected one) is reported (``skip`` says what is skipped because of it) and gives
    ``None``."""
    raw = attrs.get(spec.fields["path"])
    try:
        if raw is None:
            raise UnsafePathError(f"<{spec.name}> has no {spec.fields['path']!r} attribute")
        path = normalize_file_path(_strip_root(raw, c.dialect.path_roots))
        if writes:
            check_writable(path)
        return path
    except UnsafePathError as exc:
        events.append(Error(exc.code, f"{exc}; {skip}"))
        return None


def open_file(c: Constructs, spec: Spec, attrs: Attrs, events: list[Event]) -> None:
    """A file opens; an unsafe or missing path is reported and its content skipped."""
    assert spec is not None
    path = tag_path(c, spec, attrs, events, "the file's content is skipped")
    if path is not None:
        events.append(FileStart(path))
    c.file.start(spec.name, path)


def open_edit(c: Constructs, spec: Spec, attrs: Attrs, events: list[Event]) -> None:
    """An edit of an existing file opens; an unsafe or missing path skips its blocks."""
    assert spec is not None
    path = tag_path(c, spec, attrs, events, "the edit's blocks are skipped")
    if path is not None:
        events.append(EditStart(path))
    c.edit.start(path)


def close_edit(c: Constructs, spec: Spec, attrs: Attrs, events: list[Event]) -> None:
    """The edit ends: its last block is read, what is unfinished reported."""
    c.edit.end(events)


def emit_read(c: Constructs, spec: Spec, attrs: Attrs, events: list[Event]) -> None:
    """``<edward_read path="..."/>``: the model asks for a file's current content."""
    assert spec is not None
    path = tag_path(c, spec, attrs, events, "nothing is read", writes=False)
    if path is not None:
        events.append(Read(path))


def close_file(c: Constructs, spec: Spec, attrs: Attrs, events: list[Event]) -> None:
    """The file ends (its wrapping fence's closing line dropped)."""
    c.file.end(events)


def open_install(c: Constructs, spec: Spec, attrs: Attrs, events: list[Event]) -> None:
    """An install block opens; its lines are read when it closes."""
    events.append(InstallStart())
    c.take_body()


def close_install(c: Constructs, spec: Spec, attrs: Attrs, events: list[Event]) -> None:
    """The install block's packages and framework, and what in it was refused."""
    block = parse_install_block(c.take_body())
    events.extend(Error(code, message) for code, message in block.rejected)
    events.append(InstallContent(block.dependencies, block.framework))
    events.append(InstallEnd())


def open_shell(c: Constructs, spec: Spec, attrs: Attrs, events: list[Event]) -> None:
    """A shell action opens; its lines are read when it closes."""
    c.take_body()


def close_shell(c: Constructs, spec: Spec, attrs: Attrs, events: list[Event]) -> None:
    """The install and command events the shell lines ask for."""
    events.extend(shell_events(c.take_body()))


def ignore(c: Constructs, spec: Spec, attrs: Attrs, events: list[Event]) -> None:
    """Markup that means nothing where it stands."""


def _emitting(make: Callable[[TagSpec, Attrs], list[Event]]) -> Handler:
    def handler(c: Constructs, spec: Spec, attrs: Attrs, events: list[Event]) -> None:
        assert spec is not None
        events.extend(make(spec, attrs))

    handler.__doc__ = make.__doc__
    return handler


def _strip_root(raw: str, roots: tuple[str, ...]) -> str:
    """Drop the first of a dialect's project-root prefixes that ``raw`` starts with."""
    for root in roots:
        if raw.startswith(root):
            return raw[len(root) :]
    return raw


# Every action but END_OPEN, which the parser carries out itself: it ends whatever is open
# (with the closer's handler from ``transitions.CLOSERS``) and hands the tag to the next state.
HANDLERS: Mapping[Action, Handler] = {
    Action.OPEN_THINKING: open_thinking,
    Action.CLOSE_THINKING: close_thinking,
    Action.OPEN_SANDBOX: open_sandbox,
    Action.CLOSE_SANDBOX: close_sandbox,
    Action.REJECT_NESTED: reject_nested,
    Action.OPEN_FILE: open_file,
    Action.CLOSE_FILE: close_file,
    Action.OPEN_INSTALL: open_install,
    Action.CLOSE_INSTALL: close_install,
    Action.OPEN_SHELL: open_shell,
    Action.CLOSE_SHELL: close_shell,
    Action.EMIT_COMMAND: _emitting(command_events),
    Action.EMIT_WEB_SEARCH: _emitting(web_search_events),
    Action.EMIT_URL_SCRAPE: _emitting(url_scrape_events),
    Action.EMIT_DONE: _emitting(done_events),
    Action.OPEN_EDIT: open_edit,
    Action.CLOSE_EDIT: close_edit,
    Action.EMIT_READ: emit_read,
    Action.IGNORE: ignore,
}
