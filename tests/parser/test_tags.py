"""parser.tags: recognising a tag, and refusing one whose attributes are malformed."""

from __future__ import annotations

import pytest

from parser.tags import MAX_TAG_LENGTH, Malformed, Partial, Tag, TagScan, match_tag

NAMES = {False: frozenset({"file", "edward_command"}), True: frozenset({"file"})}
PREFIXES = {
    c: frozenset(n[:i] for n in names for i in range(1, len(n) + 1)) for c, names in NAMES.items()
}


def match_incrementally(text: str) -> Tag | Partial | Malformed | None:
    """Match ``text`` fed one character at a time, resuming each partial scan."""
    scan: TagScan | None = None
    found: Tag | Partial | Malformed | None = None
    for end in range(1, len(text) + 1):
        found = match_tag(text[:end], 0, NAMES, PREFIXES, scan)
        if not isinstance(found, Partial):
            return found
        scan = found.scan
    return found


@pytest.mark.parametrize(
    ("text", "attrs"),
    [
        pytest.param('<file path="a.js">', ' path="a.js"', id="double-quoted"),
        pytest.param("<file path='a.js' >", " path='a.js' ", id="single-quoted-space"),
        pytest.param("<file path=a/b.js>", " path=a/b.js", id="unquoted-with-slash"),
        pytest.param('<file path = "a.js"/>', ' path = "a.js"/', id="spaces-self-closing"),
        pytest.param('<file path=\\"a.js\\">', ' path=\\"a.js\\"', id="backslash-escaped"),
        pytest.param("<edward_command args='[\"a>b\"]'>", " args='[\"a>b\"]'", id="gt-in-quotes"),
        pytest.param("<edward_command q='a < b'>", " q='a < b'", id="lt-in-quotes"),
        pytest.param("<edward_command flag other=1>", " flag other=1", id="boolean-attribute"),
        pytest.param("<file data-x:y.z_1=1 _a>", " data-x:y.z_1=1 _a", id="name-characters"),
        pytest.param("</file >", " ", id="closing"),
    ],
)
def test_well_formed_tags(text: str, attrs: str) -> None:
    for found in (match_tag(text, 0, NAMES, PREFIXES), match_incrementally(text)):
        assert isinstance(found, Tag)
        assert (found.end, found.attrs_text) == (len(text), attrs)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        pytest.param('<edward_command command="npm"TEXT <file>', "text right after", id="text"),
        pytest.param('<edward_command command="npm" <file>', "'<' outside", id="lt"),
        pytest.param("<edward_command command=<file>", "'<' outside", id="lt-as-value"),
        pytest.param('<edward_command command=npm"x">', "quote inside an unquoted", id="quote"),
        pytest.param('<edward_command "npm">', "does not open a value", id="quote-no-name"),
        pytest.param('<edward_command =x">', "'=' without an attribute name", id="equals"),
        pytest.param('<edward_command c="a <file path=">', "a tag inside", id="tag-in-value"),
        pytest.param('<edward_command c="a </file>">', "a tag inside", id="close-in-value"),
        pytest.param('<file path="' + "x" * MAX_TAG_LENGTH, "does not close", id="open-quote"),
        pytest.param('<file path="a"\n{m0}]]>', "not an attribute name", id="text-as-name"),
        pytest.param("<edward_command flag}x>", "not an attribute name", id="brace-in-name"),
        pytest.param("<edward_command 1=x>", "not an attribute name", id="digit-first"),
    ],
)
def test_malformed_tags_name_the_offending_text(text: str, reason: str) -> None:
    for found in (match_tag(text, 0, NAMES, PREFIXES), match_incrementally(text)):
        assert isinstance(found, Malformed)
        assert reason in found.reason
        assert repr(text[:12])[1:-1] in found.reason  # the message names the tag's text


def test_an_overlong_tag_without_an_open_quote_is_content() -> None:
    text = "<file " + "x" * MAX_TAG_LENGTH + ">"
    assert match_tag(text, 0, NAMES, PREFIXES) is None
    assert match_incrementally(text) is None


@pytest.mark.parametrize(
    "text",
    [
        pytest.param('<file path="a', id="in-value"),
        pytest.param('<edward_command c="x <fi', id="maybe-a-tag-in-value"),
        pytest.param("<file path=\\", id="after-backslash"),
        pytest.param("<edward_comm", id="in-name"),
    ],
)
def test_unfinished_tags_are_partial(text: str) -> None:
    assert isinstance(match_tag(text, 0, NAMES, PREFIXES), Partial)
