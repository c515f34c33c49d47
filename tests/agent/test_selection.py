"""How the user turn names the elements selected in the preview."""

from __future__ import annotations

import pytest

from app.agent.selection import SelectedElement, selection_of, user_turn

HEADING = SelectedElement("src/App.jsx", 4, 7, "h1", "Todos", "App", "      <h1>Todos</h1>")


def test_without_a_selection_the_turn_is_the_message() -> None:
    assert user_turn("make it blue", ()) == "make it blue"


def test_the_turn_names_the_element_file_line_and_its_source() -> None:
    turn = user_turn("make this bigger", (HEADING,))
    assert turn.startswith("make this bigger\n\nThe person selected this element")
    assert '1. <h1> showing "Todos" in component App, at src/App.jsx line 4, column 7.' in turn
    assert "The line reads: <h1>Todos</h1>" in turn


def test_several_elements_are_numbered() -> None:
    other = SelectedElement("src/List.jsx", 9, 5, "ul", "")
    turn = user_turn("align these", (HEADING, other))
    assert "these elements" in turn
    assert "2. <ul>, at src/List.jsx line 9, column 5." in turn


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(None, (), id="no-data"),
        pytest.param({"other": 1}, (), id="no-selection"),
        pytest.param({"selection": [HEADING.to_dict()]}, (HEADING,), id="kept"),
    ],
)
def test_a_message_keeps_its_selection(
    data: dict[str, object] | None, expected: tuple[SelectedElement, ...]
) -> None:
    assert selection_of(data) == expected
