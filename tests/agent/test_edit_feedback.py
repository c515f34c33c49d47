"""What the model is told about refused edits and reads."""

from __future__ import annotations

import pytest

from app.agent.edit_feedback import EDIT_ATTEMPTS, read_result, refused_edit_result
from sandbox.session_log import FailedEdit

CURRENT = "export default function App() {}\n"


@pytest.mark.parametrize(
    ("attempts", "content", "advice"),
    [
        pytest.param(1, CURRENT, "Send corrected SEARCH/REPLACE blocks", id="first-refusal"),
        pytest.param(EDIT_ATTEMPTS, CURRENT, "write the whole file", id="after-two"),
        pytest.param(1, None, "Write 'src/App.jsx' completely", id="no-such-file"),
    ],
)
def test_a_refused_edit_says_why_what_to_do_and_shows_the_file(
    attempts: int, content: str | None, advice: str
) -> None:
    refused = FailedEdit("src/App.jsx", "edit_no_match", "block 1 matches nowhere", content)
    result = refused_edit_result(refused, attempts)
    assert (result.tool, result.request, result.ok) == ("edit", "src/App.jsx", False)
    assert result.text.startswith("block 1 matches nowhere\n")
    assert advice in result.text
    assert (CURRENT in result.text) is (content is not None)


def test_a_read_gives_the_content_or_says_there_is_no_file() -> None:
    assert read_result("a.js", "x\n").to_dict() == {
        "tool": "read",
        "request": "a.js",
        "ok": True,
        "text": "x\n",
    }
    missing = read_result("b.js", None)
    assert not missing.ok
    assert "no file 'b.js'" in missing.text
