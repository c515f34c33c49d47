"""The error-code declaration: every code kiln raises or reports is declared, with words."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.agent.rewrite_guard import REWRITE_REFUSED
from app.agent.turn_events import MALFORMED_EDIT
from app.api.text_edits import NO_SANDBOX
from app.error_codes import BY_CODE, ERROR_CODES, ErrorCode, fixed_sentence
from app.projects.jsx_text import (
    TEXT_EDIT_AMBIGUOUS,
    TEXT_EDIT_EXPRESSION,
    TEXT_EDIT_STALE,
    TEXT_EDIT_UNSUPPORTED,
)
from app.projects.sync import FILE_NOT_KEPT
from app.runs.stale import DEADLINE_EXCEEDED, QUEUED_TIMEOUT
from parser.edit_body import MALFORMED
from sandbox.session_log import DISK_FULL, OUT_OF_MEMORY
from sandbox.writes.edit_blocks import EDIT_AMBIGUOUS, EDIT_NO_MATCH

ROOT = Path(__file__).resolve().parents[2]
# How a code is written where it is raised or reported: an exception class's ``code``, a parser
# ``Error("...")``, a record's ``"code": "..."``, a ``code="..."`` argument, a failed step's code.
WRITTEN = re.compile(
    r'(?:\bcode(?:: ClassVar\[str\])? = |\bError\(|"code": |\bcode=|failure_code\([^,]+, )'
    r'"([a-z_]+)"'
)
NAMED = (
    MALFORMED_EDIT, REWRITE_REFUSED, FILE_NOT_KEPT, DEADLINE_EXCEEDED, QUEUED_TIMEOUT, MALFORMED,
    DISK_FULL, OUT_OF_MEMORY, EDIT_AMBIGUOUS, EDIT_NO_MATCH, TEXT_EDIT_AMBIGUOUS,
    TEXT_EDIT_EXPRESSION, TEXT_EDIT_STALE, TEXT_EDIT_UNSUPPORTED, NO_SANDBOX,
)  # fmt: skip


def written_codes() -> dict[str, str]:
    """``{code: a file that writes it}`` over app/, sandbox/, parser/ and prompts/."""
    found: dict[str, str] = {}
    for package in ("app", "sandbox", "parser", "prompts"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for match in WRITTEN.finditer(path.read_text(encoding="utf-8")):
                found.setdefault(match.group(1), str(path.relative_to(ROOT)))
    return found


def test_every_code_written_in_the_code_is_declared() -> None:
    written = written_codes()
    assert len(written) > 40  # the pattern still finds them
    undeclared = {code: path for code, path in written.items() if code not in BY_CODE}
    assert undeclared == {}


def test_every_code_named_by_a_constant_is_declared() -> None:
    assert [code for code in NAMED if code not in BY_CODE] == []


def test_each_code_is_declared_once() -> None:
    assert len(BY_CODE) == len(ERROR_CODES)


def test_a_code_without_words_is_refused() -> None:
    with pytest.raises(ValueError, match="'preview_crashed' has no words"):
        ErrorCode("preview_crashed", " ")


@pytest.mark.parametrize(
    ("code", "sentence"),
    [
        pytest.param("docker_unavailable", "(Docker) is not answering", id="outage"),
        pytest.param("internal_error", "server log has the details", id="internal"),
        pytest.param("config_error", None, id="own-message"),
        pytest.param("no_such_code", None, id="unknown"),
    ],
)
def test_outages_have_a_fixed_sentence(code: str, sentence: str | None) -> None:
    said = fixed_sentence(code)
    assert said == sentence if sentence is None else sentence in (said or "")
