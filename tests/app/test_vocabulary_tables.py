"""The event and error-code tables: generated files are current, and every file that names an
event type or a code names a declared one (the failure says which file still uses which name)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app import vocabulary_tables
from app.error_codes import BY_CODE
from app.event_types import BY_NAME, event_name_of_record
from app.runs.events import CONTENT_TYPES, MERGED_TYPES, TERMINAL_EVENT
from app.runs.execution import HOLDING_EVENTS
from app.vocabulary_tables import CONTRACT, ROOT, WEB_MODULE, web_module, with_tables

# Where each reader of the run's events names a type: (files, pattern whose group names one).
EVENT_USES: tuple[tuple[str, str], ...] = (
    ("app/web/*.js", r"\btype [!=]== \"([a-z_]+)\""),
    ("app/web/logpanel.js", r"\bcase \"([a-z_]+)\":"),
    ("app/web/chat.js", r"^  ([a-z_]+)\((?:event)?\) \{"),  # in HANDLERS: one method per type
    ("app/cli/run_progress.py", r"def _on_([a-z_]+)\("),
    ("tests/web/fake_service.py", r"\"type\": \"([a-z_]+)\"|\"([a-z_]+_(?:started|finished))\""),
    # The emitters: the loop and the worker write events, the session and versions records.
    ("app/agent/*.py", r"\"type\": \"([a-z_]+)\""),
    ("app/runs/*.py", r"\"type\": \"([a-z_]+)\""),
)
RECORD_USES: tuple[tuple[str, str], ...] = (
    ("sandbox/**/*.py", r"(?:on_record|reporter\.record)\(\"([a-z_]+)\""),
    ("app/projects/*.py", r"on_record\(\"([a-z_]+)\""),
    ("app/agent/*.py", r"on_record\(\"([a-z_]+)\""),
)
# Sets of types the runs machinery acts on, by the file that holds them.
TYPE_SETS: dict[str, frozenset[str]] = {
    "app/runs/events.py": CONTENT_TYPES | MERGED_TYPES | {TERMINAL_EVENT},
    "app/runs/execution.py": HOLDING_EVENTS,
}
QUIET_RECORDS = {"version_unchanged"}  # the loop keeps it as the run's ``unchanged``, unsaid
HANDLERS = re.compile(r"^const HANDLERS = \{$.*?^\};$", re.MULTILINE | re.DOTALL)
# Where the web UI names an error code.
CODE_USES: tuple[tuple[str, str], ...] = (("app/web/*.js", r"\.code === \"([a-z_]+)\""),)


def _names(root: Path, uses: tuple[tuple[str, str], ...]) -> dict[str, set[str]]:
    """``{file: names it uses}`` for the files and patterns of ``uses``."""
    found: dict[str, set[str]] = {}
    for pattern, regex in uses:
        for path in sorted(root.glob(pattern)):
            if path == root / WEB_MODULE.relative_to(ROOT):
                continue  # generated from the declaration
            text = path.read_text(encoding="utf-8")
            if pattern.endswith("chat.js") and (handlers := HANDLERS.search(text)):
                text = handlers.group(0)  # only its table of handlers: a method per type
            for match in re.finditer(regex, text, re.MULTILINE):
                name = next(group for group in match.groups() if group)
                found.setdefault(str(path.relative_to(root)), set()).add(name)
    return found


def problems(root: Path = ROOT) -> list[str]:
    """Every file behind the declaration: a stale generated file, a name no longer declared."""
    found = []
    if (root / "app/web/vocabulary.js").read_text(encoding="utf-8") != web_module():
        found.append("app/web/vocabulary.js is stale: run `python -m app.vocabulary_tables`")
    contract = (root / "docs/service-contract.md").read_text(encoding="utf-8")
    if contract != with_tables(contract):
        found.append(
            "docs/service-contract.md's tables are stale: run `python -m app.vocabulary_tables`"
        )
    for path, names in _names(root, EVENT_USES).items():
        if unknown := sorted(names - BY_NAME.keys()):
            found.append(f"{path} uses event types not declared in app/event_types.py: {unknown}")
    for path, names in TYPE_SETS.items():
        if unknown := sorted(names - BY_NAME.keys()):
            found.append(
                f"{path} acts on event types not declared in app/event_types.py: {unknown}"
            )
    for path, records in _names(root, RECORD_USES).items():
        names = {event_name_of_record(record) for record in records - QUIET_RECORDS}
        if unknown := sorted(names - BY_NAME.keys()):
            found.append(f"{path} reports records of undeclared event types: {unknown}")
    for path, names in _names(root, CODE_USES).items():
        if unknown := sorted(names - BY_CODE.keys()):
            found.append(f"{path} uses error codes not declared in app/error_codes.py: {unknown}")
    return found


def test_every_file_agrees_with_the_declaration() -> None:
    assert problems() == []


def test_each_reader_is_scanned() -> None:
    """The patterns still find names (a reader rewritten out of their reach would pass unseen)."""
    found = _names(ROOT, EVENT_USES)
    for path in ("app/web/chat.js", "app/web/logpanel.js", "app/cli/run_progress.py"):
        assert len(found[path]) >= 5, path
    assert {"install_started", "run_finished", "error"} <= found["tests/web/fake_service.py"]
    assert "command_refused" in _names(ROOT, CODE_USES)["app/web/chat.js"]
    assert {"run_started", "preview_ready"} <= found["app/runs/execution.py"]
    records = _names(ROOT, RECORD_USES)
    in_sandbox = set().union(*(names for path, names in records.items() if "sandbox/" in path))
    assert {"file", "install", "rollback"} <= in_sandbox
    assert {"version", "restore"} <= records["app/projects/sync.py"]


def test_a_removed_event_type_names_every_file_that_still_uses_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    declared = {name: event for name, event in BY_NAME.items() if name != "turn_end"}
    declared.pop("file_start")  # also one the worker holds the preview on
    monkeypatch.setattr("tests.app.test_vocabulary_tables.BY_NAME", declared)
    monkeypatch.setattr(
        vocabulary_tables,
        "EVENT_TYPES",
        tuple(event for event in vocabulary_tables.EVENT_TYPES if event.name != "turn_end"),
    )
    said = "\n".join(problems())
    for path in (
        "app/web/vocabulary.js",
        "docs/service-contract.md",
        "app/web/chat.js",
        "app/cli/run_progress.py",
        "tests/web/fake_service.py",
        "app/agent/loop.py",
        "app/runs/execution.py",
    ):
        assert path in said
    assert "['turn_end']" in said
    assert "app/runs/execution.py acts on event types not declared" in said


def test_a_removed_error_code_names_the_ui_file_that_still_uses_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    declared = {code: error for code, error in BY_CODE.items() if code != "unclosed_tag"}
    monkeypatch.setattr("tests.app.test_vocabulary_tables.BY_CODE", declared)
    said = "\n".join(problems())
    assert (
        "app/web/chat.js uses error codes not declared in app/error_codes.py: ['unclosed_tag']"
        in said
    )


def test_the_contract_without_its_markers_is_refused() -> None:
    with pytest.raises(ValueError, match="vocabulary:events"):
        with_tables("# a doc without the tables\n")


def test_the_generated_tables_show_fields_emitters_and_words() -> None:
    table = vocabulary_tables.event_table()
    assert "| `file_start` | `path`, `turn` | parser | A file is being written |" in table
    assert "| `run_finished` | `status`, `stop_reason`, `error?` | worker |" in table
    assert "| `disk_full` | The server's disk is full |" in vocabulary_tables.error_table()
    assert CONTRACT.name == "service-contract.md"
