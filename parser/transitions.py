"""The state machine's transition table, keyed by (state, role, closing).

Each entry names the parser action a recognised tag triggers in that state. A tag whose
(state, role, closing) has no entry is not listened for in that state: its text is content.
``IMPLICIT_END`` ends the construct that is open (reporting it as unclosed) and hands the same
tag to the state that follows, so a model that forgets a closing tag loses nothing.

Which tag *names* are listened for in a state follows from this table and the dialect
(:func:`listened_names`); the parser precomputes them once per dialect.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from functools import cache

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


IGNORE = "ignore"
IMPLICIT_END = "implicit_end"

OPEN, CLOSE = False, True

# Tags that act on their own, wherever prose or a sandbox's gaps are.
_SELF_CONTAINED = (Role.COMMAND, Role.WEB_SEARCH, Role.URL_SCRAPE, Role.DONE)
_STANDALONE_OPENS = {
    Role.THINKING: "open_thinking",
    Role.INSTALL: "open_install",
    Role.COMMAND: "emit_command",
    Role.WEB_SEARCH: "emit_web_search",
    Role.URL_SCRAPE: "emit_url_scrape",
}
# Structural tags that end a forgotten thinking or install block.
_INTERRUPTERS = (
    Role.SANDBOX,
    Role.INSTALL,
    Role.COMMAND,
    Role.WEB_SEARCH,
    Role.URL_SCRAPE,
    Role.DONE,
    Role.RESPONSE,
    Role.THINKING,
)


def _build() -> dict[tuple[State, Role, bool], str]:
    table: dict[tuple[State, Role, bool], str] = {}
    for state in (State.TEXT, State.SANDBOX):
        for role, action in _STANDALONE_OPENS.items():
            table[state, role, OPEN] = action
        for role in _SELF_CONTAINED:
            table[state, role, CLOSE] = IGNORE  # models sometimes close self-contained tags
    table[State.TEXT, Role.RESPONSE, OPEN] = IGNORE
    table[State.TEXT, Role.RESPONSE, CLOSE] = IGNORE
    table[State.TEXT, Role.SANDBOX, OPEN] = "open_sandbox"
    table[State.TEXT, Role.DONE, OPEN] = "emit_done"

    table[State.SANDBOX, Role.FILE, OPEN] = "open_file"
    table[State.SANDBOX, Role.SHELL, OPEN] = "open_shell"
    table[State.SANDBOX, Role.SANDBOX, OPEN] = "reject_nested"
    table[State.SANDBOX, Role.SANDBOX, CLOSE] = "close_sandbox"
    table[State.SANDBOX, Role.RESPONSE, OPEN] = IGNORE
    table[State.SANDBOX, Role.DONE, OPEN] = IMPLICIT_END
    table[State.SANDBOX, Role.RESPONSE, CLOSE] = IMPLICIT_END

    for state in (State.THINKING, State.INSTALL):
        for role in _INTERRUPTERS:
            table[state, role, OPEN] = IMPLICIT_END
        table[state, Role.RESPONSE, CLOSE] = IMPLICIT_END
        table[state, Role.SANDBOX, CLOSE] = IMPLICIT_END
    del table[State.THINKING, Role.THINKING, OPEN]  # a nested opener is just thinking text
    table[State.THINKING, Role.THINKING, CLOSE] = "close_thinking"
    table[State.INSTALL, Role.INSTALL, CLOSE] = "close_install"

    table[State.FILE, Role.FILE, CLOSE] = "close_file"
    table[State.FILE, Role.SANDBOX, CLOSE] = IMPLICIT_END
    table[State.SHELL, Role.SHELL, CLOSE] = "close_shell"
    table[State.SHELL, Role.SANDBOX, CLOSE] = IMPLICIT_END
    return table


TRANSITIONS: Mapping[tuple[State, Role, bool], str] = _build()

# The role of the construct each body state holds open (closing tags of discriminated specs,
# such as bolt's ``</boltAction>``, play the role of what they close).
STATE_ROLE: Mapping[State, Role] = {
    State.THINKING: Role.THINKING,
    State.SANDBOX: Role.SANDBOX,
    State.FILE: Role.FILE,
    State.INSTALL: Role.INSTALL,
    State.SHELL: Role.SHELL,
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
