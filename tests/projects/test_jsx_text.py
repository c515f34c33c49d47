"""app/projects/jsx_text.py: the text node of an element at a source location, and its edit."""

from __future__ import annotations

import pytest

from app.projects.jsx_text import (
    TEXT_EDIT_AMBIGUOUS,
    TEXT_EDIT_EXPRESSION,
    TEXT_EDIT_STALE,
    TextEditRefused,
    edited_source,
    escape_jsx_text,
    jsx_text_value,
    locate_text,
)

APP = """import { useState } from "react";

export default function App() {
  const [items, setItems] = useState([]);
  return (
    <main className="app">
      <h1 className="title">My Todos</h1>
      <p>
        Plan your day,
        one task at a time.
      </p>
      <p>Tom &amp; Jerry&apos;s list</p>
      <p>Hello {name}!</p>
      <p>Hi<br />Hi</p>
      <button onClick={() => setItems([...items, "x"])} disabled={items.length > 3}>
        {/* the main action */}
        Add
      </button>
      <ul>{items.map((item) => <li key={item}>Don't {item}</li>)}</ul>
      <img src="logo.svg" alt="My Todos" />
      <footer>My Todos</footer>
    </main>
  );
}
"""


def place(tag: str, nth: int = 0) -> tuple[int, int]:
    """(line from 1, column from 0) of the ``nth`` ``<tag`` in APP."""
    found = [
        (number, line.index(f"<{tag}"))
        for number, line in enumerate(APP.splitlines(), start=1)
        if f"<{tag}" in line
    ]
    return found[nth]


@pytest.mark.parametrize(
    ("tag", "nth", "old", "new", "changed_line"),
    [
        pytest.param(
            "h1",
            0,
            "My Todos",
            "Our Todos",
            '      <h1 className="title">Our Todos</h1>',
            id="plain-text",
        ),
        pytest.param(
            "p",
            0,
            "Plan your day, one task at a time.",
            "Plan your week.",
            "        Plan your week.",
            id="multi-line-text",
        ),
        pytest.param(
            "p",
            1,
            "Tom & Jerry's list",
            "Tom & Jerry's {new} <list>",
            "      <p>Tom & Jerry's &#123;new&#125; &lt;list&gt;</p>",
            id="entities-and-escapes",
        ),
        pytest.param(
            "button",
            0,
            "Add",
            "Add a task",
            "        Add a task",
            id="text-beside-a-comment-and-attributes-with-expressions",
        ),
        pytest.param(
            "footer",
            0,
            "  My   Todos ",
            "Made with kiln",
            "      <footer>Made with kiln</footer>",
            id="whitespace-as-the-browser-shows-it",
        ),
    ],
)
def test_the_text_node_at_the_place_changes_at_its_lines_only(
    tag: str, nth: int, old: str, new: str, changed_line: str
) -> None:
    line, column = place(tag, nth)
    edited = edited_source(APP, line, column, old, new, path="src/App.jsx")
    before, after = APP.splitlines(), edited.splitlines()
    changed = [text for text in after if text not in before]
    assert changed == [changed_line]
    assert len(before) - len(after) == (1 if tag == "p" and nth == 0 else 0)
    node = locate_text(edited, line, column, new, where="src/App.jsx")
    assert jsx_text_value(node.raw) == " ".join(new.split())


@pytest.mark.parametrize(
    ("tag", "nth", "old", "code"),
    [
        pytest.param("p", 2, "Hello Ada!", TEXT_EDIT_EXPRESSION, id="text-with-an-expression"),
        pytest.param("ul", 0, "Don't milk", TEXT_EDIT_EXPRESSION, id="text-from-a-map"),
        pytest.param("p", 3, "Hi", TEXT_EDIT_AMBIGUOUS, id="same-text-twice-in-the-element"),
        pytest.param("h1", 0, "Their Todos", TEXT_EDIT_STALE, id="the-file-changed-since"),
        pytest.param("img", 0, "My Todos", TEXT_EDIT_STALE, id="self-closing-has-no-text"),
    ],
)
def test_what_is_not_one_plain_text_node_is_refused_with_its_code(
    tag: str, nth: int, old: str, code: str
) -> None:
    line, column = place(tag, nth)
    with pytest.raises(TextEditRefused) as refused:
        edited_source(APP, line, column, old, "New", path="src/App.jsx")
    assert refused.value.code == code
    assert "src/App.jsx:" in str(refused.value)


def test_a_column_counted_from_one_finds_the_same_element() -> None:
    line, column = place("h1")
    edited = edited_source(APP, line, column + 1, "My Todos", "Ours", path="src/App.jsx")
    assert '<h1 className="title">Ours</h1>' in edited


@pytest.mark.parametrize(
    ("line", "column"),
    [
        pytest.param(7, 2, id="no-element-there"),
        pytest.param(400, 0, id="past-the-file"),
    ],
)
def test_a_place_without_an_element_is_stale(line: int, column: int) -> None:
    with pytest.raises(TextEditRefused) as refused:
        locate_text(APP, line, column, "My Todos", where="src/App.jsx:7")
    assert refused.value.code == TEXT_EDIT_STALE


def test_identical_lines_elsewhere_widen_the_block_to_the_one_meant() -> None:
    source = "const a = (\n  <li>Milk</li>\n);\nconst b = (\n  <li>Milk</li>\n);\n"
    edited = edited_source(source, 5, 2, "Milk", "Eggs", path="src/List.jsx")
    assert edited == "const a = (\n  <li>Milk</li>\n);\nconst b = (\n  <li>Eggs</li>\n);\n"


def test_an_unclosed_element_is_refused() -> None:
    with pytest.raises(TextEditRefused) as refused:
        locate_text("<h1>Title", 1, 0, "Title", where="src/App.jsx:1")
    assert refused.value.code == TEXT_EDIT_STALE


@pytest.mark.parametrize(
    ("text", "escaped"),
    [
        pytest.param("a {b} <c>", "a &#123;b&#125; &lt;c&gt;", id="braces-and-angles"),
        pytest.param("Tom & Jerry", "Tom & Jerry", id="a-lone-ampersand-stays"),
        pytest.param("&copy; 2026", "&amp;copy; 2026", id="what-reads-as-an-entity"),
    ],
)
def test_escaped_text_renders_as_typed(text: str, escaped: str) -> None:
    assert escape_jsx_text(text) == escaped
    assert jsx_text_value(escaped) == text


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        pytest.param("\n    Hello\n    world\n  ", "Hello world", id="lines-trimmed-and-joined"),
        pytest.param(" Add", " Add", id="a-blank-on-the-same-line-stays"),
        pytest.param("a&nbsp;b&#x41;&unknown;", "a\u00a0bA&unknown;", id="entities"),
    ],
)
def test_jsx_text_reads_as_react_renders_it(raw: str, value: str) -> None:
    assert jsx_text_value(raw) == value


TRICKY = """export function Card({ a, b, items }) {
  return (
    <section title={`sum: ${a + b} {not a brace}`} data-x='it"s'>
      {a < b ? "less" : "more"}
      {items.map((item) => {
        return <em key={item}>it's {item} & more</em>;
      })}
      <>
        <strong>Fragment child</strong>
      </>
      Total
    </section>
  );
}
"""


@pytest.mark.parametrize(
    ("needle", "old", "new", "expected"),
    [
        pytest.param(
            "<section",
            "Total",
            "Sum",
            "      Sum\n",
            id="past-comparisons-template-literals-and-jsx-in-expressions",
        ),
        pytest.param(
            "<strong",
            "Fragment child",
            "Child",
            "        <strong>Child</strong>\n",
            id="inside-a-fragment",
        ),
    ],
)
def test_the_scanner_reads_javascript_inside_jsx(
    needle: str, old: str, new: str, expected: str
) -> None:
    line = next(n for n, text in enumerate(TRICKY.splitlines(), 1) if needle in text)
    column = TRICKY.splitlines()[line - 1].index(needle)
    edited = edited_source(TRICKY, line, column, old, new, path="src/Card.jsx")
    assert expected in edited.splitlines(keepends=True)
    assert sum(a != b for a, b in zip(TRICKY.splitlines(), edited.splitlines(), strict=True)) == 1
