"""The session's edit path: blocks collected per file, applied all or none, refusals in words."""

from __future__ import annotations

import pytest

from parser.events import EditBlock, EditEnd, EditStart
from sandbox.session_edits import EditPath
from sandbox.session_log import AppliedEdit, FailedEdit, Record, SessionReporter

pytestmark = pytest.mark.anyio


def _path() -> tuple[EditPath, list[tuple[str, Record]]]:
    records: list[tuple[str, Record]] = []

    async def keep(kind: str, record: Record) -> None:
        records.append((kind, record))

    return EditPath(SessionReporter(keep)), records


def test_an_edit_start_drops_the_blocks_of_an_earlier_unfinished_edit() -> None:
    edits, _ = _path()
    edits.collect(EditStart("a.js"))
    edits.collect(EditBlock("a.js", "old", "stale"))
    edits.collect(EditStart("a.js"))
    edits.collect(EditBlock("a.js", "one", "1"))
    edits.collect(EditBlock("b.js", "two", "2"))  # another file's blocks stay apart
    assert edits.end(EditEnd("a.js")) == [("one", "1")]
    assert edits.end(EditEnd("a.js")) == []
    assert edits.end(EditEnd("b.js")) == [("two", "2")]


@pytest.mark.parametrize(
    ("current", "code"),
    [
        pytest.param(None, "edit_no_match", id="no-such-file"),
        pytest.param("let one = 1;\nlet one = 1;\n", "edit_ambiguous", id="ambiguous"),
        pytest.param("let two = 2;\n", "edit_no_match", id="no-match"),
    ],
)
async def test_a_refused_edit_is_logged_with_its_content_and_reported(
    current: str | None, code: str
) -> None:
    edits, records = _path()
    outcome = await edits.apply("a.js", [("let one = 1;", "let one = 2;")], current)
    assert isinstance(outcome, FailedEdit)
    assert (outcome.code, outcome.content) == (code, current)
    assert edits.reporter.log.failed_edits == [outcome]
    assert [(kind, r["code"], r["path"]) for kind, r in records] == [("error", code, "a.js")]
    assert "'a.js'" in records[0][1]["message"]


async def test_an_applied_edit_is_the_whole_new_file_and_told_once_written() -> None:
    edits, records = _path()
    blocks = [("let one = 1;", "let one = 2;")]
    outcome = await edits.apply("a.js", blocks, "let one = 1;\nlet two = 2;\n")
    assert outcome == AppliedEdit("a.js", "let one = 2;\nlet two = 2;\n")
    assert records == []  # not yet: the session writes it first
    await edits.applied(outcome, blocks)
    assert edits.reporter.log.applied_edits == [("a.js", "let one = 2;\nlet two = 2;\n")]
    assert records == [("edit", {"path": "a.js", "blocks": 1})]
