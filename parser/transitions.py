"""The state machine's transition table: (state, role, closing) -> (action, next state).

Each entry names the :class:`Action` a recognised tag triggers in that state and the state the
parser is in afterwards. A tag whose (state, role, closing) has no entry is not listened for in
that state: its text is content. ``Action.END_OPEN`` ends the construct that is open (reporting it
as unclosed) and hands the same tag to the state that follows, so a model that forgets a closing
tag loses nothing. :data:`CLOSERS` says how each open construct ends, and where to: thinking and
install blocks go back to the state they were opened in (:data:`PREVIOUS`).

Which tag *names* are listened for in a state follows from this table and the dialect
(:func:`listened_names`); the parser precomputes them once per dialect.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from functools import cache
from typing import NamedTuple

from parser.dialects import Dialect, Role


class State(Enum):
    """Where the parser is."""

    TEXT = "text"
    THINKING = "thinking"
    SANDBOX = "sandbox"
    FILE_START = "file_start"  # deciding how the body starts (newline, CDATA, fence)
    FILE = "file"
    CDATA = "cdata"
    AFTER_CDATA = "after_cdata"  # between ``]]>`` and the closing tag
    INSTALL = "install"
    SHELL = "shell"
    EDIT = "edit"


class Action(Enum):
    """What a recognised tag does (``parser.constructs.HANDLERS`` carries each out)."""

    OPEN_THINKING = "open_thinking"
    CLOSE_THINKING = "close_thinking"
    OPEN_SANDBOX = "open_sandbox"
    CLOSE_SANDBOX = "close_sandbox"
    REJECT_NESTED = "reject_nested"
    OPEN_FILE = "open_file"
    CLOSE_FILE = "close_file"
    OPEN_INSTALL = "open_install"
    CLOSE_INSTALL = "close_install"
    OPEN_SHELL = "open_shell"
    CLOSE_SHELL = "close_shell"
    EMIT_COMMAND = "emit_command"
    EMIT_WEB_SEARCH = "emit_web_search"
    EMIT_URL_SCRAPE = "emit_url_scrape"
    EMIT_DONE = "emit_done"
    OPEN_EDIT = "open_edit"
    CLOSE_EDIT = "close_edit"
    EMIT_READ = "emit_read"
    IGNORE = "ignore"  # markup that means nothing here (a wrapper, a stray closer)
    END_OPEN = "end_open"  # end the open construct; the next state handles the same tag


class Back(Enum):
    """A next state that depends on the path taken: the state a construct was opened in."""

    PREVIOUS = "previous"


PREVIOUS = Back.PREVIOUS


class Transition(NamedTuple):
    """What a tag does and where the parser is afterwards."""

    action: Action
    next: State | Back


OPEN, CLOSE = False, True
# The states of a file body (all end the same way).
FILE_STATES = (State.FILE_START, State.FILE, State.CDATA, State.AFTER_CDATA)

# How each open construct ends, explicitly or implicitly.
CLOSERS: Mapping[State, Transition] = {
    State.THINKING: Transition(Action.CLOSE_THINKING, PREVIOUS),
    State.SANDBOX: Transition(Action.CLOSE_SANDBOX, State.TEXT),
    **{state: Transition(Action.CLOSE_FILE, State.SANDBOX) for state in FILE_STATES},
    State.INSTALL: Transition(Action.CLOSE_INSTALL, PREVIOUS),
    State.SHELL: Transition(Action.CLOSE_SHELL, State.SANDBOX),
    State.EDIT: Transition(Action.CLOSE_EDIT, State.SANDBOX),
}

# Tags that act on their own, wherever prose or a sandbox's gaps are.
_SELF_CONTAINED = (Role.COMMAND, Role.WEB_SEARCH, Role.URL_SCRAPE, Role.READ, Role.DONE)
_STANDALONE_OPENS = {
    Role.THINKING: (Action.OPEN_THINKING, State.THINKING),
    Role.INSTALL: (Action.OPEN_INSTALL, State.INSTALL),
    Role.COMMAND: (Action.EMIT_COMMAND, None),
    Role.WEB_SEARCH: (Action.EMIT_WEB_SEARCH, None),
    Role.URL_SCRAPE: (Action.EMIT_URL_SCRAPE, None),
    Role.READ: (Action.EMIT_READ, None),
}
# Structural tags that end a forgotten thinking or install block.
_INTERRUPTERS = (
    Role.SANDBOX,
    Role.INSTALL,
    Role.COMMAND,
    Role.WEB_SEARCH,
    Role.URL_SCRAPE,
    Role.READ,
    Role.DONE,
    Role.RESPONSE,
    Role.THINKING,
)

Table = dict[tuple[State, Role, bool], Transition]


def _build() -> Table:
    table: Table = {}
    for state in (State.TEXT, State.SANDBOX):
        for role, (action, target) in _STANDALONE_OPENS.items():
            table[state, role, OPEN] = Transition(action, target or state)
        for role in _SELF_CONTAINED:  # models sometimes close self-contained tags
            table[state, role, CLOSE] = Transition(Action.IGNORE, state)
        table[state, Role.RESPONSE, OPEN] = Transition(Action.IGNORE, state)
    table[State.TEXT, Role.RESPONSE, CLOSE] = Transition(Action.IGNORE, State.TEXT)
    table[State.TEXT, Role.SANDBOX, OPEN] = Transition(Action.OPEN_SANDBOX, State.SANDBOX)
    table[State.TEXT, Role.DONE, OPEN] = Transition(Action.EMIT_DONE, State.TEXT)

    table[State.SANDBOX, Role.FILE, OPEN] = Transition(Action.OPEN_FILE, State.FILE_START)
    table[State.SANDBOX, Role.SHELL, OPEN] = Transition(Action.OPEN_SHELL, State.SHELL)
    table[State.SANDBOX, Role.EDIT, OPEN] = Transition(Action.OPEN_EDIT, State.EDIT)
    table[State.SANDBOX, Role.SANDBOX, OPEN] = Transition(Action.REJECT_NESTED, State.SANDBOX)
    table[State.SANDBOX, Role.SANDBOX, CLOSE] = CLOSERS[State.SANDBOX]
    _end_open(table, State.SANDBOX, (Role.DONE, OPEN), (Role.RESPONSE, CLOSE))

    for state in (State.THINKING, State.INSTALL):
        _end_open(table, state, *((role, OPEN) for role in _INTERRUPTERS))
        _end_open(table, state, (Role.RESPONSE, CLOSE), (Role.SANDBOX, CLOSE))
    del table[State.THINKING, Role.THINKING, OPEN]  # a nested opener is just thinking text
    table[State.THINKING, Role.THINKING, CLOSE] = CLOSERS[State.THINKING]
    table[State.INSTALL, Role.INSTALL, CLOSE] = CLOSERS[State.INSTALL]

    table[State.FILE, Role.FILE, CLOSE] = CLOSERS[State.FILE]
    _end_open(table, State.FILE, (Role.SANDBOX, CLOSE))
    table[State.SHELL, Role.SHELL, CLOSE] = CLOSERS[State.SHELL]
    _end_open(table, State.SHELL, (Role.SANDBOX, CLOSE))
    table[State.EDIT, Role.EDIT, CLOSE] = CLOSERS[State.EDIT]
    # An edit's body is lines of blocks, never markup: the next file or edit ends a forgotten one.
    _end_open(table, State.EDIT, (Role.SANDBOX, CLOSE), (Role.EDIT, OPEN), (Role.FILE, OPEN))
    return table


def _end_open(table: Table, state: State, *tags: tuple[Role, bool]) -> None:
    """These tags end the construct open in ``state`` (its closer says where to)."""
    for role, closing in tags:
        table[state, role, closing] = Transition(Action.END_OPEN, CLOSERS[state].next)


TRANSITIONS: Mapping[tuple[State, Role, bool], Transition] = _build()

# The role of the construct each body state holds open (closing tags of discriminated specs,
# such as bolt's ``</boltAction>``, play the role of what they close).
STATE_ROLE: Mapping[State, Role] = {
    State.THINKING: Role.THINKING,
    State.SANDBOX: Role.SANDBOX,
    State.FILE: Role.FILE,
    State.INSTALL: Role.INSTALL,
    State.SHELL: Role.SHELL,
    State.EDIT: Role.EDIT,
}


@dataclass(frozen=True)
class Listening:
    """The tag names one state listens for, by ``closing``, with every prefix of each."""

    names: Mapping[bool, frozenset[str]]
    prefixes: Mapping[bool, frozenset[str]]

    initials: frozenset[str]

    def may_start(self, data: str, at: int) -> bool:
        """A cheap pre-check at ``data[at] == "<"``: can a listened tag start here?"""
        name_at = at + 2 if data.startswith("/", at + 1) else at + 1
        return name_at >= len(data) or data[name_at] in self.initials

    @property
    def needle(self) -> str:
        """What to search content for: ``</`` when only closing tags matter, else ``<``."""
        return "<" if self.names[OPEN] else "</"


def role_of(dialect: Dialect, state: State, name: str, closing: bool) -> Role | None:
    """The role a tag name plays in ``state`` before its attributes are known."""
    spec = dialect.tags.get(name)
    if spec is None:
        return None
    if spec.role is not None:
        return spec.role
    own = STATE_ROLE.get(state)
    if closing and own in spec.possible_roles:
        return own
    return next((r for r in spec.possible_roles if (state, r, closing) in TRANSITIONS), None)


@cache
def listened_names(dialect: Dialect, state: State) -> Listening:
    """Precompute which names ``state`` listens for in ``dialect``."""
    names: dict[bool, frozenset[str]] = {}
    prefixes: dict[bool, frozenset[str]] = {}
    for closing in (OPEN, CLOSE):
        found = frozenset(
            name
            for name, spec in dialect.tags.items()
            if any((state, role, closing) in TRANSITIONS for role in spec.possible_roles)
        )
        names[closing] = found
        prefixes[closing] = frozenset(n[:i] for n in found for i in range(1, len(n) + 1))
    initials = frozenset(c for n in names[OPEN] | names[CLOSE] for c in (n[0], n[0].upper()))
    return Listening(names, prefixes, initials)
