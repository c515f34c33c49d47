"""The write path's own fence cleanup: strips only a fence that wraps the whole file."""

from __future__ import annotations

import pytest

from parser import StreamParser
from parser.events import FileContent
from sandbox.writes.fences import strip_wrapping_fence


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("```jsx\nconst a = 1;\n```\n", "const a = 1;\n", id="language"),
        pytest.param("```\nx\n```", "x\n", id="bare-no-trailing-newline"),
        pytest.param("\n\n```js\nx\n\ny\n```\n\n", "x\n\ny\n", id="blank-lines-around"),
        pytest.param("~~~python\nprint(1)\n~~~\n", "print(1)\n", id="tildes"),
        pytest.param("````md\n```js\nx\n```\n````\n", "```js\nx\n```\n", id="longer-outer"),
        pytest.param("  ```ts  \nlet x\n  ```  \n", "let x\n", id="indented-fence"),
        pytest.param("```\n```\n", "", id="empty-body"),
    ],
)
def test_wrapping_fence_is_removed(text: str, expected: str) -> None:
    assert strip_wrapping_fence(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("const a = 1;\n", id="no-fence"),
        pytest.param("```bash\nnpm i\n```\n\nthen\n\n```js\nrun()\n```\n", id="two-blocks"),
        pytest.param("```js\nx\n", id="unclosed"),
        pytest.param("x\n```\n", id="only-closing"),
        pytest.param("```js\nx\n~~~\n", id="mismatched-characters"),
        pytest.param("````js\nx\n```\n", id="closing-too-short"),
        pytest.param("```js x\ny\n```\n", id="opening-with-prose"),
        pytest.param("```\n", id="single-line"),
        pytest.param("", id="empty"),
    ],
)
def test_other_text_is_left_alone(text: str) -> None:
    assert strip_wrapping_fence(text) == text


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("```jsx\nconst a = 1;\n```\n", id="language"),
        pytest.param("~~~python\nprint(1)\n~~~\n", id="tildes"),
        pytest.param("````md\n```js\nx\n```\n````\n", id="longer-outer"),
        pytest.param("\n\n  ```ts\nlet x\n  ```\n", id="blank-lines-and-indent"),
        pytest.param("```js x\ny\n```\n", id="opening-with-prose"),
        pytest.param("const a = 1;\n", id="no-fence"),
    ],
)
def test_the_parser_strips_what_the_write_path_strips(text: str) -> None:
    """One fence rule (parser.fences): the streaming parser and the write path agree.

    They differ only where the parser cannot wait: it decides at the opening line, so it drops
    an opening fence that is never closed, where the write path (seeing the whole file) keeps it.
    """
    parser = StreamParser()
    events = [*parser.feed(f'<edward_sandbox><file path="a.js">{text}</file>'), *parser.close()]
    streamed = "".join(e.content for e in events if isinstance(e, FileContent))
    assert streamed == strip_wrapping_fence(text.removeprefix("\n"))
