"""StreamParser: every case whole, one character at a time, and with random splits."""

from __future__ import annotations

import itertools
import random
import tracemalloc
from collections.abc import Iterable
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from parser import ParseError, StreamParser, merge_adjacent
from parser.events import Event, FileContent, ThinkingContent
from parser.file_body import PRELUDE_LIMIT
from parser.tags import MAX_TAG_LENGTH
from tests.parser.accounting import number_markers, unaccounted
from tests.parser.cases import BOLT_CASES, CASES, expected
from tests.parser.corpus import EDIT_BLOCK


def parse(text_chunks: Iterable[str], dialect: str = "edward") -> list[Event]:
    """Feed every chunk, close, and merge adjacent content events."""
    parser = StreamParser(dialect)
    events: list[Event] = []
    for chunk in text_chunks:
        events.extend(parser.feed(chunk))
    events.extend(parser.close())
    return merge_adjacent(events)


def comparable(events: list[Event]) -> list[dict[str, Any]]:
    """Event dicts with error messages dropped (cases pin codes, not prose)."""
    out = []
    for event in events:
        data = event.to_dict()
        if data["type"] == "error":
            assert data["message"], f"error without a message: {data}"
            data = {"type": "error", "code": data["code"]}
        out.append(data)
    return out


def split_at(text: str, cuts: Iterable[int]) -> list[str]:
    """``text`` cut at the given offsets."""
    points = sorted({c for c in cuts if 0 < c < len(text)})
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


ALL_CASES = [pytest.param(*case.values, "edward", id=case.id) for case in CASES] + [
    pytest.param(*case.values, "bolt", id=case.id) for case in BOLT_CASES
]


@pytest.mark.parametrize(("text", "rows", "dialect"), ALL_CASES)
def test_whole(text: str, rows: list[Any], dialect: str) -> None:
    assert comparable(parse([text], dialect)) == expected(rows)


@pytest.mark.parametrize(("text", "rows", "dialect"), ALL_CASES)
def test_one_character_at_a_time(text: str, rows: list[Any], dialect: str) -> None:
    assert comparable(parse(list(text), dialect)) == expected(rows)


@pytest.mark.parametrize(("text", "rows", "dialect"), ALL_CASES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cuts=st.lists(st.integers(min_value=1, max_value=6000), max_size=40))
def test_random_splits(text: str, rows: list[Any], dialect: str, cuts: list[int]) -> None:
    assert comparable(parse(split_at(text, cuts), dialect)) == expected(rows)


# Fragments that exercise every state and boundary; random texts built from them must parse
# the same however they are split, and never hold more than a tag's worth between feeds.
FRAGMENTS = [
    "<Thinking>",
    "</Thinking>",
    "<Response>",
    "</Response>",
    '<edward_sandbox project="p">',
    "</edward_sandbox>",
    '<file path="a.js">',
    "<file path='b/c.jsx'>",
    "</file>",
    "</FILE>",
    "<![CDATA[",
    "]]>",
    "]",
    "```",
    "```jsx\n",
    "\n",
    " ",
    "x",
    "<",
    "</",
    ">",
    "'",
    '"',
    "<div>",
    "a < b",
    "<edward_install>",
    "packages: react, -x\n",
    "</edward_install>",
    """<edward_command command="npm" args='["run","build"]'>""",
    "<edward_done />",
    '<edward_web_search query="q">',
    "</edward_web_search>",
    "<edward_fut",
    "&amp;",
    '<edward_edit path="e.js">',
    "</edward_edit>",
    "<<<<<<< SEARCH\n",
    "=======\n",
    ">>>>>>> REPLACE\n",
    '<edward_read path="r.js"/>',
]


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(st.sampled_from(FRAGMENTS), max_size=40),
    cuts=st.lists(st.integers(min_value=1, max_value=600), max_size=30),
)
def test_generated_streams_are_chunking_invariant(pieces: list[str], cuts: list[int]) -> None:
    text = "".join(pieces)
    whole = parse([text])
    assert parse(split_at(text, cuts)) == whole
    assert parse(text) == whole


# For the accounting test: no bare ">" and no quote outside a complete tag or a malformed
# tag's start, so a marker ("{m}") is never part of a well-formed tag (see accounting.py).
ACCOUNTED_FRAGMENTS = [
    fragment
    for fragment in FRAGMENTS
    if fragment not in (">", "'", '"', "```jsx\n", ">>>>>>> REPLACE\n")
] + [
    EDIT_BLOCK,
    "```js\n",
    "~~~\n",
    '<edward_command command="npm"',
    '<edward_command command="npm" ',
    "<edward_command command='npm",
    '<file path="x.js',
    '<edward_sandbox project="p"',
    '<edward_web_search query="q"',
    "</file ",
    "<edward_done ",
    "<Thinking ",
]


@settings(max_examples=400, deadline=None)
@given(
    pieces=st.lists(st.sampled_from([*ACCOUNTED_FRAGMENTS, "{m}", "{m}"]), max_size=40),
    cuts=st.lists(st.integers(min_value=1, max_value=600), max_size=30),
)
@example(  # the attack review's example
    pieces=[
        '<edward_sandbox project="p">',
        '<edward_command command="npm"',
        "{m}",
        " ",
        '<file path="a.js">',
        "{m}",
        "</file>",
    ],
    cuts=[],
)
@example(  # a fence "info string" that is not a language name is content, not markup
    pieces=[
        '<edward_sandbox project="p">',
        '<file path="a.js">',
        "```",
        "{m}",
        "\n",
        "x",
        "\n",
        "```",
        "</file>",
    ],
    cuts=[],
)
def test_every_character_is_accounted_for(pieces: list[str], cuts: list[int]) -> None:
    """Malformed tags included: each marker lands in an event's fields or an error's message."""
    text, markers = number_markers(pieces)
    whole = parse([text])
    assert unaccounted(markers, whole) == []
    assert parse(split_at(text, cuts)) == whole


BOLT_ACCOUNTED_FRAGMENTS = [
    '<boltArtifact id="a" title="T">',
    "</boltArtifact>",
    '<boltAction type="file" filePath="/home/project/src/a.js">',
    "<boltAction type='shell'>",
    "</boltAction>",
    '<boltAction type="file" filePath="x.js',
    '<boltAction type="shell"',
    '<boltArtifact id="a"',
    "<![CDATA[",
    "]]>",
    "```js\n",
    "\n",
    " ",
    "<",
    "</",
    "npm install react && ",
]


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(st.sampled_from([*BOLT_ACCOUNTED_FRAGMENTS, "{m}", "{m}"]), max_size=40),
    cuts=st.lists(st.integers(min_value=1, max_value=600), max_size=30),
)
# Found by CI: text after a tag's attributes, before the '>' of ']]>', read as a valueless
# attribute "{m0}]]" and dropped without a word.
@example(pieces=['<boltArtifact id="a"', "\n", "{m}", "]]>"], cuts=[])
def test_every_character_is_accounted_for_in_bolt(pieces: list[str], cuts: list[int]) -> None:
    """The same accounting for the bolt dialect (shell bodies, discriminated actions)."""
    text, markers = number_markers(pieces)
    whole = parse([text], "bolt")
    assert unaccounted(markers, whole) == []
    assert parse(split_at(text, cuts), "bolt") == whole


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=st.characters(blacklist_characters="<"), max_size=300))
def test_text_without_markup_passes_through_unchanged(text: str) -> None:
    events = comparable(parse([text]))
    assert events == ([{"type": "text", "content": text}] if text else [])


def test_bolt_dialect_is_data_only() -> None:
    """The bolt dialect reuses the same machine: only the tag table differs."""
    edward = StreamParser("edward")
    bolt = StreamParser("bolt")
    assert type(edward) is type(bolt)
    assert set(bolt.dialect.tags) == {"boltartifact", "boltaction"}


def test_unknown_dialect_is_refused() -> None:
    with pytest.raises(ParseError, match="'klingon'"):
        StreamParser("klingon")


def test_parser_is_reusable_after_close() -> None:
    parser = StreamParser()
    parser.feed("<Thinking>half")
    parser.close()
    assert comparable(parser.feed("new text")) == [{"type": "text", "content": "new text"}]


def test_empty_feed_returns_nothing() -> None:
    parser = StreamParser()
    assert parser.feed("") == []
    assert parser.close() == []


@pytest.mark.parametrize(
    "prefix",
    [
        pytest.param("", id="text"),
        pytest.param("<Thinking>", id="thinking"),
        pytest.param('<edward_sandbox><file path="a.js">', id="file"),
        pytest.param('<edward_sandbox><file path="a.js"><![CDATA[', id="cdata"),
        pytest.param('<edward_sandbox><file path="a.js">```js\n', id="fenced-file"),
        pytest.param("<edward_command args='", id="open-quote-in-tag"),
    ],
)
@pytest.mark.parametrize(
    "filler",
    [
        pytest.param("<", id="lt-storm"),
        pytest.param("<edward_command ", id="tag-prefix-storm"),
        pytest.param("]]", id="cdata-close-prefix-storm"),
        pytest.param("\n```\n", id="fence-line-storm"),
        pytest.param("</fil", id="close-prefix-storm"),
        pytest.param(" " * 8, id="blank-line-storm"),
    ],
)
def test_held_text_stays_bounded(prefix: str, filler: str) -> None:
    """Between feeds the parser keeps at most a tag's or a body start's worth of text."""
    parser = StreamParser()
    parser.feed(prefix)
    bound = max(MAX_TAG_LENGTH, PRELUDE_LIMIT) + len(filler)
    for _ in range(3000):
        parser.feed(filler)
        held = len(parser._pending) + len(parser._open.file.tail)
        assert held <= bound
    parser.close()


def _content_length(events: list[Event]) -> int:
    return sum(len(e.content) for e in events if isinstance(e, FileContent | ThinkingContent))


@pytest.mark.slow
def test_hundred_megabyte_file_streams_in_bounded_memory() -> None:
    line = "export const value = <div className='x'>{a < b ? 1 : 2}</div>;\n"
    chunk = line * (65536 // len(line))
    rounds = 100 * 1024 * 1024 // len(chunk) + 1
    parser = StreamParser()
    parser.feed('<edward_sandbox project="big"><file path="big.jsx">\n')
    tracemalloc.start()
    total = 0
    for _ in range(rounds):
        total += _content_length(parser.feed(chunk))
        assert len(parser._pending) <= MAX_TAG_LENGTH
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    tail = parser.feed("</file></edward_sandbox>")
    total += _content_length(tail)
    assert total == rounds * len(chunk)
    assert peak < 4 * len(chunk) + 1_000_000  # a few chunks' worth, not the file


def test_megabyte_thinking_block_arrives_whole() -> None:
    body = "".join(f"step {i}: consider a < b and <b>bold</b>\n" for i in range(25_000))
    rng = random.Random(7)
    text = f"<Thinking>{body}</Thinking>"
    cuts, at = [], 0
    while at < len(text):
        at += rng.randint(1, 4096)
        cuts.append(at)
    events = parse(split_at(text, cuts))
    assert [e.type for e in events] == ["thinking_start", "thinking_content", "thinking_end"]
    assert events[1].to_dict()["content"] == body


@pytest.mark.parametrize("chunk", [b"<file>", 5, None], ids=["bytes", "int", "none"])
def test_feeding_something_else_than_text_names_its_type(chunk: object) -> None:
    parser = StreamParser()
    # Pure Python says "feed() takes text (str), not int"; the compiled parser's argument check
    # (mypyc) raises before the body runs: "str object expected; got int" ("got None").
    name = type(chunk).__name__.removesuffix("Type")
    with pytest.raises(TypeError, match=f"(not|got) {name}"):
        parser.feed(chunk)  # type: ignore[arg-type]
