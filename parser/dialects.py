"""Tag dialects as data.

A dialect maps the tag names a model writes onto *roles* the state machine knows (``FILE``,
``SANDBOX``, ``COMMAND``, ...) and names the attributes that carry each role's fields. The
transition table in ``parser.transitions`` is keyed by state and role, so adding a dialect never
touches the state machine: write a :class:`Dialect` and register it in :data:`DIALECTS`.

Tag and attribute names are matched case-insensitively and on whole names; they are stored here
in lower case.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType


class Role(Enum):
    """What a tag means, whatever a dialect calls it."""

    THINKING = "thinking"
    RESPONSE = "response"  # a wrapper around prose; consumed, never emitted
    SANDBOX = "sandbox"
    FILE = "file"
    INSTALL = "install"
    COMMAND = "command"
    WEB_SEARCH = "web_search"
    URL_SCRAPE = "url_scrape"
    DONE = "done"
    EDIT = "edit"  # search/replace blocks for an existing file
    READ = "read"  # the model asks for a file's current content
    SHELL = "shell"  # a body of shell lines, turned into install/command events (bolt)


@dataclass(frozen=True)
class TagSpec:
    """One tag of a dialect.

    ``role`` is fixed, or ``None`` when the value of the ``discriminator`` attribute picks it
    (bolt's ``<boltAction type="file">`` vs ``type="shell"``). ``fields`` maps the event field a
    role needs (``path``, ``project``, ...) to the attribute that carries it.
    """

    name: str
    role: Role | None
    fields: Mapping[str, str] = field(default_factory=dict)
    discriminator: str | None = None
    roles_by_value: Mapping[str, Role] = field(default_factory=dict)

    def role_for(self, attrs: Mapping[str, str]) -> Role | None:
        """The role this tag plays given its (lower-cased) attributes."""
        if self.role is not None:
            return self.role
        value = attrs.get(self.discriminator or "", "").strip().lower()
        return self.roles_by_value.get(value)

    @property
    def possible_roles(self) -> frozenset[Role]:
        """Every role this tag can play."""
        if self.role is not None:
            return frozenset({self.role})
        return frozenset(self.roles_by_value.values())


@dataclass(frozen=True, eq=False)
class Dialect:
    """A named set of tags."""

    name: str
    tags: Mapping[str, TagSpec]
    # Prefixes that name the project root in file paths (bolt writes "/home/project/src/a.js"
    # or "/src/a.js"); they are dropped before the path is checked, first match only.
    path_roots: tuple[str, ...] = ()

    @classmethod
    def of(cls, name: str, *specs: TagSpec, path_roots: tuple[str, ...] = ()) -> Dialect:
        """Build a dialect from its tag specs (names lower-cased)."""
        tags = MappingProxyType({spec.name.lower(): spec for spec in specs})
        return cls(name, tags, path_roots)


EDWARD = Dialect.of(
    "edward",
    TagSpec("thinking", Role.THINKING),
    TagSpec("response", Role.RESPONSE),
    TagSpec("edward_sandbox", Role.SANDBOX, {"project": "project", "base": "base"}),
    TagSpec("file", Role.FILE, {"path": "path"}),
    TagSpec("edward_edit", Role.EDIT, {"path": "path"}),
    TagSpec("edward_read", Role.READ, {"path": "path"}),
    TagSpec("edward_install", Role.INSTALL),
    TagSpec("edward_command", Role.COMMAND, {"command": "command", "args": "args"}),
    TagSpec("edward_web_search", Role.WEB_SEARCH, {"query": "query", "max_results": "max_results"}),
    TagSpec("edward_url_scrape", Role.URL_SCRAPE, {"url": "url"}),
    TagSpec("edward_done", Role.DONE),
)

BOLT = Dialect.of(
    "bolt",
    TagSpec("boltartifact", Role.SANDBOX, {"project": "id", "title": "title"}),
    TagSpec(
        "boltaction",
        None,
        {"path": "filepath"},
        discriminator="type",
        roles_by_value={"file": Role.FILE, "shell": Role.SHELL, "start": Role.SHELL},
    ),
    path_roots=("/home/project/", "/"),
)

DIALECTS: Mapping[str, Dialect] = MappingProxyType({d.name: d for d in (EDWARD, BOLT)})
