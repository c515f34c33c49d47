"""Tests for app.recordings.stream_formats: format detection and text extraction from recordings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.recordings.stream_formats import StreamFormatError, Turn, iter_sse_events, load_turns

CAPTURES = Path(__file__).parent.parent / "data" / "captures"
ANSWER = (CAPTURES / "answer.txt").read_text(encoding="utf-8")
# Text that only appears in the captures' non-answer events (provider reasoning, tool input).
NOT_ANSWER = (
    "PROVIDER-THINKING-ONLY",
    "TOOL-JSON-ONLY",
    "REASONING-SUMMARY-ONLY",
    "GEMINI-THOUGHT",
)


def sse(*events: tuple[str | None, object]) -> str:
    """An SSE body from (event name or None, payload) pairs; a str payload is sent as is."""
    blocks = []
    for name, payload in events:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        blocks.append((f"event: {name}\n" if name else "") + f"data: {data}\n\n")
    return "".join(blocks)


def anthropic_text(text: str) -> dict[str, object]:
    return {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "text_delta", "text": text},
    }


def chat_chunk(text: str) -> dict[str, object]:
    return {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": text}}],
    }


ANTHROPIC_STOP = ("message_stop", {"type": "message_stop"})


# --- realistic captures, one per provider ------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "chunk_count"),
    [
        pytest.param("anthropic-messages.sse", 47, id="anthropic"),
        pytest.param("openai-chat.sse", 47, id="openai-chat"),
        pytest.param("openai-responses.sse", 47, id="openai-responses"),
        pytest.param("gemini-stream.sse", 10, id="gemini"),
    ],
)
def test_capture_yields_the_answer_in_the_providers_deltas(name: str, chunk_count: int) -> None:
    turns = load_turns((CAPTURES / name).read_bytes(), name)

    assert len(turns) == 1
    assert turns[0].text == ANSWER
    assert len(turns[0].chunks) == chunk_count
    assert not turns[0].numbered
    assert not any(marker in chunk for chunk in turns[0].chunks for marker in NOT_ANSWER)


def test_gemini_parts_of_one_chunk_are_one_delta() -> None:
    body = sse((None, {"candidates": [{"content": {"parts": [{"text": "a"}, {"text": "b"}]}}]}))

    assert load_turns(body, "g.sse")[0].chunks == ["ab"]


def test_gemini_thought_parts_are_not_text() -> None:
    parts = [{"text": "hidden", "thought": True}, {"text": "shown"}]
    body = sse((None, {"candidates": [{"content": {"parts": parts}, "finishReason": "STOP"}]}))

    assert load_turns(body, "g.sse")[0].chunks == ["shown"]


def test_openai_chat_ignores_other_choices_and_usage_chunks() -> None:
    other = {"choices": [{"index": 1, "delta": {"content": "second choice"}}]}
    usage = {"choices": [], "usage": {"total_tokens": 5}}
    body = sse((None, chat_chunk("first")), (None, other), (None, usage), (None, "[DONE]"))

    assert load_turns(body, "c.sse")[0].chunks == ["first"]


def test_responses_output_text_done_does_not_repeat_the_text() -> None:
    body = sse(
        ("response.output_text.delta", {"type": "response.output_text.delta", "delta": "hi"}),
        ("response.output_text.done", {"type": "response.output_text.done", "text": "hi"}),
        ("response.completed", {"type": "response.completed", "response": {}}),
    )

    assert load_turns(body, "r.sse")[0].chunks == ["hi"]


# --- several responses in one capture, cut captures ---------------------------------------------


def test_each_response_in_a_capture_is_a_numbered_turn() -> None:
    start = ("message_start", {"type": "message_start", "message": {}})
    body = sse(
        start, (None, anthropic_text("one")), ANTHROPIC_STOP,
        ("ping", {"type": "ping"}),
        start, (None, anthropic_text("two")), ANTHROPIC_STOP,
        ("ping", {"type": "ping"}),
    )  # fmt: skip

    turns = load_turns(body, "two.sse")

    assert [(t.number, t.chunks, t.numbered) for t in turns] == [
        (1, ["one"], True),
        (2, ["two"], True),
    ]


def test_openai_chat_done_separates_responses() -> None:
    body = sse((None, chat_chunk("a")), (None, "[DONE]"), (None, chat_chunk("b")), (None, "[DONE]"))

    assert [t.chunks for t in load_turns(body, "c.sse")] == [["a"], ["b"]]


def test_capture_cut_before_its_end_keeps_its_text() -> None:
    body = sse((None, chat_chunk("<Response>half")))

    turns = load_turns(body, "cut.sse")

    assert [t.chunks for t in turns] == [["<Response>half"]]


def test_capture_with_no_text_is_one_empty_turn() -> None:
    body = sse(("message_start", {"type": "message_start", "message": {}}), ANTHROPIC_STOP)

    assert [t.chunks for t in load_turns(body, "empty.sse")] == [[]]


# --- provider errors inside a capture ---------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        pytest.param(
            (
                "error",
                {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            ),
            "overloaded_error: 'Overloaded'",
            id="anthropic",
        ),
        pytest.param(
            ("error", {"type": "error", "code": "server_error", "message": "boom", "param": None}),
            "server_error: 'boom'",
            id="responses-error",
        ),
        pytest.param(
            (
                "response.failed",
                {
                    "type": "response.failed",
                    "response": {"error": {"code": "rate_limit_exceeded", "message": "slow down"}},
                },
            ),
            "rate_limit_exceeded: 'slow down'",
            id="responses-failed",
        ),
        pytest.param(
            (None, {"error": {"message": "The server had an error", "type": "server_error"}}),
            "server_error: 'The server had an error'",
            id="openai-chat",
        ),
        pytest.param(
            (
                None,
                {"error": {"code": 503, "message": "model overloaded", "status": "UNAVAILABLE"}},
            ),
            "UNAVAILABLE: 'model overloaded'",
            id="gemini",
        ),
        pytest.param(
            (None, {"promptFeedback": {"blockReason": "SAFETY"}}),
            "prompt blocked (SAFETY)",
            id="gemini-blocked",
        ),
    ],
)
def test_provider_error_event_raises_with_its_message_and_line(
    payload: tuple[str | None, object], expected: str
) -> None:
    body = sse((None, chat_chunk("before")), payload)

    with pytest.raises(StreamFormatError) as caught:
        load_turns(body, "err.sse")

    data_line = 4 if payload[0] else 3  # after the two lines of the first event
    assert expected in str(caught.value)
    assert f"'err.sse', line {data_line}:" in str(caught.value)


# --- JSONL ------------------------------------------------------------------------------------


def test_jsonl_objects_group_lines_into_numbered_turns() -> None:
    lines = [
        {"turn": 1, "text": "<Response>a"},
        {"turn": 1, "text": "b</Response>"},
        {"turn": 2, "text": "c"},
    ]
    body = "\n".join(json.dumps(line) for line in lines) + "\n"

    turns = load_turns(body, "t.jsonl")

    assert [(t.number, t.chunks, t.numbered) for t in turns] == [
        (1, ["<Response>a", "b</Response>"], True),
        (2, ["c"], True),
    ]


def test_jsonl_bare_strings_are_chunks_of_one_unnumbered_turn() -> None:
    body = '"<Response>"\n\n"hi"\n"</Response>"\n'

    assert load_turns(body, "s.jsonl") == [Turn(1, ["<Response>", "hi", "</Response>"], False)]


def test_shared_multi_turn_recording_loads() -> None:
    # ../shared beside the checkout, as CI lays it (never this machine's absolute path)
    shared = Path(__file__).resolve().parents[3] / "shared"
    path = shared / "recordings" / "search-then-build.jsonl"

    turns = load_turns(path.read_bytes(), path.name)

    assert [t.number for t in turns] == [1, 2]
    assert "<edward_web_search" in turns[0].text
    assert '<file path="src/App.jsx">' in turns[1].text


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(
            '"ok"\n[1, 2]\n', "line 2: a JSON list, expected an object or a string", id="list"
        ),
        pytest.param('"ok"\n42\n', "line 2: a JSON int", id="number"),
        pytest.param('{"text": "a"}\n{"text": \n', "line 2: not valid JSON", id="broken"),
        pytest.param('{"turn": 1}\n', "line 1: the object has no string 'text'", id="no-text"),
        pytest.param('{"turn": "x", "text": ""}\n', "'turn' must be a positive integer", id="turn"),
        pytest.param(
            '{"turn": 2, "text": "a"}\n{"turn": 1, "text": "b"}\n',
            "line 2: turn 1 comes after turn 2",
            id="decreasing",
        ),
    ],
)
def test_bad_jsonl_line_names_the_line(body: str, expected: str) -> None:
    with pytest.raises(StreamFormatError, match=r"'bad\.jsonl', line") as caught:
        load_turns(body, "bad.jsonl")

    assert expected in str(caught.value)


# --- plain text and undecodable input ----------------------------------------------------------


def test_plain_text_is_one_chunk() -> None:
    text = "<Response>\nHello {not json}\n</Response>\n"

    assert load_turns(text.encode(), "a.txt") == [Turn(1, [text], False)]


def test_plain_text_starting_with_a_brace_that_is_not_json() -> None:
    text = '{"oops" <Response>hi</Response>'

    assert load_turns(text, "a.txt")[0].chunks == [text]


def test_capture_may_start_with_sse_comments() -> None:
    body = ": PROCESSING\n\n: PROCESSING\n\n" + sse((None, chat_chunk("hi")), (None, "[DONE]"))

    assert load_turns(body, "c.sse")[0].chunks == ["hi"]


def test_plain_text_starting_with_a_colon_is_plain() -> None:
    text = ":) hello <Response>hi</Response>"

    assert load_turns(text, "a.txt")[0].chunks == [text]


def test_utf8_bom_is_dropped() -> None:
    assert load_turns(b"\xef\xbb\xbfhello", "bom.txt")[0].chunks == ["hello"]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(b"line one\nline\x00two", "'bin', line 2: NUL byte", id="nul"),
        pytest.param(
            b"ok\nok\n\xff\xfe garbage", "'bin', line 3: invalid UTF-8 at byte 6", id="utf8"
        ),
        pytest.param(b"", "'bin': empty input", id="empty"),
        pytest.param(b"\n  \n", "'bin': empty input", id="blank"),
    ],
)
def test_undecodable_input_raises(raw: bytes, expected: str) -> None:
    with pytest.raises(StreamFormatError) as caught:
        load_turns(raw, "bin")

    assert expected in str(caught.value)


# --- SSE framing ------------------------------------------------------------------------------


def test_sse_framing_handles_crlf_comments_and_multiline_data() -> None:
    body = ': keep-alive\r\nevent: x\r\ndata: {"a":\r\ndata: 1}\r\n\r\ndata:[DONE]\r\n'

    events = list(iter_sse_events(body, "f.sse"))

    assert [(e.name, e.data, e.line) for e in events] == [
        ("x", '{"a":\n1}', 3),
        ("message", "[DONE]", 6),
    ]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param("data: {not json\n\n", "line 1: SSE data is not JSON", id="not-json"),
        pytest.param("data: [1]\n\n", "line 1: SSE data is a JSON list", id="not-object"),
        pytest.param('data: {"a": 1}\ngarbage\n\n', "line 2: not an SSE field line", id="garbage"),
        pytest.param('data: {"a": 1}\n\n', "no event is from a known provider", id="unknown"),
    ],
)
def test_malformed_sse_raises(body: str, expected: str) -> None:
    with pytest.raises(StreamFormatError) as caught:
        load_turns(body, "bad.sse")

    assert expected in str(caught.value)
