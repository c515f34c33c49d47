"""The one copy of an edited project's files, and what the model is told of its edits."""

from __future__ import annotations

import pytest

from app.agent.context import ExistingProject
from app.agent.project_edits import ProjectEdits
from prompts.compose import Mode, system_prompt
from sandbox import FailedEdit

pytestmark = pytest.mark.anyio

APP = "".join(f"export const value{n} = {n};\n" for n in range(40))


def _edits() -> ProjectEdits:
    return ProjectEdits({"src/App.jsx": APP, "index.html": "<div id=root></div>\n"}, None)


def test_an_applied_edit_replaces_the_file_in_the_one_copy() -> None:
    edits = _edits()
    edits.applied("src/App.jsx", "export const value = 1;\n")
    edits.applied("src/New.jsx", "new\n")  # not the project's: the run's own file
    assert edits.files == {
        "src/App.jsx": "export const value = 1;\n",
        "index.html": "<div id=root></div>\n",
    }


@pytest.mark.parametrize(
    ("new", "refused", "kept"),
    [
        pytest.param(APP[:200], True, APP, id="lossy-rewrite-keeps-the-old"),
        pytest.param(APP + "export const more = 1;\n", False, None, id="whole-rewrite-is-the-file"),
    ],
)
def test_a_whole_file_rewrite_is_judged_against_the_file_as_the_run_left_it(
    new: str, refused: bool, kept: str | None
) -> None:
    edits = _edits()
    reason = edits.rewrite_refusal("src/App.jsx", new)
    assert (reason is not None) is refused
    assert edits.files["src/App.jsx"] == (kept if kept is not None else new)


def test_a_file_outside_the_project_is_never_a_rewrite() -> None:
    edits = _edits()
    assert edits.rewrite_refusal("src/New.jsx", "") is None
    assert "src/New.jsx" not in edits.files


def test_the_second_refusal_of_a_file_asks_for_the_whole_file() -> None:
    edits = _edits()
    failed = FailedEdit("src/App.jsx", "edit_no_match", "no match", APP)
    first, second = edits.refused(failed), edits.refused(failed)
    other = edits.refused(FailedEdit("index.html", "edit_no_match", "no match", "x"))
    assert "write the whole file" not in first.text
    assert "write the whole file" in second.text
    assert "write the whole file" not in other.text


async def test_an_edit_shows_the_project_and_a_new_project_does_not() -> None:
    project = ExistingProject("vite-react", {"src/App.jsx": APP}, ("src/App.jsx",))
    edits = await ProjectEdits.select(
        project, "rename value3", context_window=100_000, count_tokens=len
    )
    assert edits.files == project.files
    assert edits.files is not project.files  # the run's copy: the project stays as stored
    assert "value3" in edits.system_prompt("vite-react", Mode.EDIT)
    none = ProjectEdits.none()
    assert none.system_prompt("vite-react", Mode.GENERATE) == system_prompt(
        "vite-react", Mode.GENERATE
    )
