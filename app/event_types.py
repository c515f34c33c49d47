"""Every run-event type a client can see, declared once: name, fields, who emits it, its words.

A run's events (``{"type": ..., <fields>}``) come from five places: the parser (what the model's
answer says, streamed), the agent loop (turns, tools, post-generation), the sandbox session and
the project's versions (records the loop passes on under their event name), and the worker
(start, end, preview). The web UI's list of types (app/web/vocabulary.js), the table in
docs/service-contract.md and the CLI's progress are checked against :data:`EVENT_TYPES` by
tests/app/test_vocabulary_tables.py; adding a type is one :class:`EventType` line with its words.

Fields ending in ``?`` are present only sometimes. A parser event's fields are its class's
(``parser.events``), plus the ``turn`` the loop adds: they are not repeated here.
"""

from __future__ import annotations

from dataclasses import dataclass

from parser.events import EVENT_TYPES as PARSER_EVENTS

PARSER, LOOP, SESSION, PROJECTS, WORKER = "parser", "loop", "session", "projects", "worker"
EMITTERS = frozenset({PARSER, LOOP, SESSION, PROJECTS, WORKER})


@dataclass(frozen=True, slots=True)
class EventType:
    """One run-event type: ``name`` (its ``type``), ``fields``, who ``emits`` it, and ``words``
    (what it means for the person watching). ``record`` is the name the sandbox session or the
    project's versions report it under, when that differs (the loop renames it once)."""

    name: str
    emits: tuple[str, ...]
    words: str
    fields: tuple[str, ...] = ()
    record: str = ""

    def __post_init__(self) -> None:
        # A type without words, or from nowhere known, fails at import: every test says so.
        if not self.words.strip():
            raise ValueError(f"run event {self.name!r} has no words for the user")
        if not self.emits or not set(self.emits) <= EMITTERS:
            raise ValueError(f"run event {self.name!r}: unknown emitters {self.emits!r}")

    @property
    def all_fields(self) -> tuple[str, ...]:
        """Its fields, a parser event's taken from its class (plus the loop's ``turn``)."""
        if self.emits == (PARSER,):
            return (*PARSER_EVENTS[self.name].field_names, "turn", *self.fields)
        return self.fields


def _parsed(name: str, words: str, *extra: str) -> EventType:
    return EventType(name, (PARSER,), words, extra)


EVENT_TYPES: tuple[EventType, ...] = (
    EventType("run_started", (WORKER,), "A worker started (or resumed) the run",
              ("run_id", "attempt", "resumed", "from_turn?")),
    EventType("context", (LOOP,), "The files an edit turn shows the model",
              ("budget_tokens", "map_tokens", "included", "left_out")),
    EventType("turn_start", (LOOP,), "A turn (or a fix-up turn) began",
              ("turn", "fixup", "prompt")),
    _parsed("text", "The model's prose"),
    _parsed("thinking_start", "The model started thinking"),
    _parsed("thinking_content", "The model's thinking"),
    _parsed("thinking_end", "The model stopped thinking"),
    _parsed("sandbox_start", "The answer's files begin"),
    _parsed("file_start", "A file is being written"),
    _parsed("file_content", "A piece of a file being written"),
    _parsed("file_end", "A file is written whole"),
    _parsed("sandbox_end", "The answer's files end"),
    _parsed("install_start", "The answer asks for packages"),
    _parsed("install_content", "The packages the answer asks for"),
    _parsed("install_end", "The package list ends"),
    _parsed("command", "The answer asks to run a command"),
    _parsed("edit_start", "An edit of a file begins"),
    _parsed("edit_block", "One search/replace of an edit"),
    _parsed("edit_end", "An edit of a file ends"),
    _parsed("read", "The model asks to see a file"),
    _parsed("web_search", "The model searches the web"),
    _parsed("url_scrape", "The model reads a web page"),
    _parsed("done", "The model says it is done"),
    EventType("sandbox_ready", (LOOP, WORKER), "The app's sandbox is up",
              ("sandbox_id", "preview_url?")),
    EventType("file_written", (SESSION,), "A file reached the sandbox", ("path",), "file"),
    EventType("edit_applied", (SESSION,), "An edit reached the sandbox",
              ("path", "blocks"), "edit"),
    EventType("install_started", (SESSION, PROJECTS), "Packages are being installed",
              ("packages", "restore?"), "install_start"),
    EventType("install_finished", (SESSION, PROJECTS), "Packages are installed (or failed)",
              ("packages", "exit_code", "already_installed?"), "install"),
    EventType("command_started", (SESSION,), "A command started", ("argv",), "command_start"),
    EventType("output", (SESSION, PROJECTS), "A line a command printed", ("line",)),
    EventType("command_finished", (SESSION,), "A command ended",
              ("argv", "exit_code"), "command"),
    EventType("tool_result", (LOOP,), "What a read, search or scrape gave the model",
              ("tool", "request", "ok", "text")),
    EventType("warning", (LOOP, SESSION, PROJECTS),
              "Something the user should know; the run goes on",
              ("code", "message", "paths?")),
    EventType("error", (PARSER, LOOP, SESSION, PROJECTS, WORKER),
              "Something failed, in words and a stable code",
              ("code", "message", "severity?", "turn?")),
    EventType("version", (PROJECTS,), "The turn's files were kept as a new version",
              ("version", "id", "created", "run", "turn", "note", "summary", "files")),
    EventType("restore", (PROJECTS,), "The chat's latest version is being put back",
              ("phase", "version", "files", "installed?")),
    EventType("turn_end", (LOOP,), "A turn ended: stop (why) or continue (how)",
              ("turn", "rule", "decision", "reason?", "prompt?")),
    EventType("postgen", (LOOP,), "Checks, the build and the render check after the answer",
              ("fixes", "findings", "build", "render?")),
    EventType("preview_error", (LOOP,), "The app threw or failed in the render check's browser",
              ("kind", "message", "stack", "source", "url", "count")),
    EventType("rollback", (SESSION,), "A cancelled run's half-written files were put back",
              ("kept", "rolled_back")),
    EventType("session_complete", (LOOP,), "The agent's work is over: its result",
              ("status", "stop_reason", "turns", "files", "packages", "commands", "build",
               "postgen", "sandbox_id", "dev_url", "usage", "errors", "unchanged")),
    EventType("preview_ready", (WORKER,), "The preview shows a complete state",
              ("sandbox_id",)),
    EventType("run_finished", (WORKER,), "The run ended (always the last event)",
              ("status", "stop_reason", "error?")),
)  # fmt: skip

BY_NAME: dict[str, EventType] = {event.name: event for event in EVENT_TYPES}
# A session or versions record's kind -> the event it is published as.
RECORD_EVENTS: dict[str, str] = {e.record: e.name for e in EVENT_TYPES if e.record}


def event_name_of_record(kind: str) -> str:
    """The event type a sandbox session or versions record of ``kind`` is published as."""
    return RECORD_EVENTS.get(kind, kind)
