"""Applying search/replace blocks: exact match, the cascade, and refusals that apply nothing."""

from __future__ import annotations

import pytest

from sandbox.writes.edit_blocks import EDIT_AMBIGUOUS, EDIT_NO_MATCH, apply_edit_blocks

APP = (
    "export default function App() {\n"
    "  const [n, setN] = useState(0);\n"
    "  return (\n"
    "    <div>\n"
    "      <h1>Counter</h1>\n"
    "      <button onClick={() => setN(n + 1)}>{n}</button>\n"
    "    </div>\n"
    "  );\n"
    "}\n"
)


@pytest.mark.parametrize(
    ("content", "search", "replace", "expected"),
    [
        pytest.param(
            APP,
            "      <h1>Counter</h1>\n",
            "      <h1>Clicker</h1>\n",
            APP.replace("Counter", "Clicker"),
            id="exact",
        ),
        pytest.param(
            APP.replace("\n", "\r\n"),
            "      <h1>Counter</h1>\n",
            "      <h1>Clicker</h1>\n",
            APP.replace("Counter", "Clicker").replace("\n", "\r\n"),
            id="line-endings-kept",
        ),
        pytest.param(
            APP.replace("<h1>Counter</h1>", "<h1>Counter</h1>   "),
            "      <h1>Counter</h1>\n",
            "      <h1>Clicker</h1>\n",
            APP.replace("Counter", "Clicker"),
            id="trailing-whitespace",
        ),
        pytest.param(
            APP,
            "<div>\n  <h1>Counter</h1>\n",
            "<div>\n  <h1>Clicker</h1>\n  <p>hi</p>\n",
            APP.replace("      <h1>Counter</h1>\n", "      <h1>Clicker</h1>\n      <p>hi</p>\n"),
            id="indentation-shifted-to-the-file",
        ),
        pytest.param(
            "const s = 'Cafe\u0301';\n",
            "const s = 'Caf\u00e9';\n",
            "const s = 'Tea';\n",
            "const s = 'Tea';\n",
            id="unicode-nfc",
        ),
        pytest.param("a\nb", "b\n", "c\n", "a\nc", id="match-at-end-without-newline"),
        pytest.param("", "", "new\n", "new\n", id="empty-search-fills-an-empty-file"),
        pytest.param("a\nb\nc\n", "b\n", "", "a\nc\n", id="deletion"),
    ],
)
def test_a_block_applies(content: str, search: str, replace: str, expected: str) -> None:
    result = apply_edit_blocks("src/App.jsx", content, [(search, replace)])
    assert result.ok, result.message
    assert result.content == expected


def test_blocks_apply_in_order_each_to_what_the_last_left() -> None:
    blocks = [("<h1>Counter</h1>", "<h1>Clicker</h1>"), ("<h1>Clicker</h1>", "<h2>Clicker</h2>")]
    result = apply_edit_blocks("src/App.jsx", APP, blocks)
    assert result.content == APP.replace("<h1>Counter</h1>", "<h2>Clicker</h2>")


@pytest.mark.parametrize(
    ("content", "blocks", "code", "words"),
    [
        pytest.param(
            "x = 1;\ny = 2;\nx = 1;\n",
            [("x = 1;\n", "x = 3;\n")],
            EDIT_AMBIGUOUS,
            "matches 2 places (exactly)",
            id="exact-twice",
        ),
        pytest.param(
            "  x = 1; \n    x = 1; \n",
            [("x = 1;\n", "x = 3;\n")],
            EDIT_AMBIGUOUS,
            "ignoring indentation",
            id="loose-twice",
        ),
        pytest.param(
            APP, [("<h1>Nope</h1>\n", "x\n")], EDIT_NO_MATCH, "matches nowhere", id="missing"
        ),
        pytest.param(
            APP,
            [("<h1>Counter</h1>", "<h1>Clicker</h1>"), ("<h1>Gone</h1>", "")],
            EDIT_NO_MATCH,
            "block 2 of 'src/App.jsx'",
            id="second-block-fails-first-not-applied",
        ),
        pytest.param(APP, [("", "x")], EDIT_NO_MATCH, "empty SEARCH", id="empty-search"),
    ],
)
def test_a_refused_block_applies_nothing(
    content: str, blocks: list[tuple[str, str]], code: str, words: str
) -> None:
    result = apply_edit_blocks("src/App.jsx", content, blocks)
    assert (result.ok, result.content, result.code) == (False, None, code)
    assert words in result.message
    assert "no block of this edit was applied" in result.message
