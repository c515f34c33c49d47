"""The replay provider: recordings by name or file, turns, chunking, pacing, usage, cancel."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from app.errors import ConfigError, ModelRefused
from app.providers.base import FinishReason, Message
from app.providers.replay import BUILTIN_DEMOS, ReplayPacing, ReplayProvider
from app.recordings.stream_formats import load_turns
from app.tokens import count_tokens
from tests.providers.harness import SleepRecorder, ask, cancel_while_waiting, drain

pytestmark = pytest.mark.anyio

CAPTURES = Path(__file__).resolve().parents[1] / "data" / "captures"
DEMO_TEXT = (BUILTIN_DEMOS / "todo-app.txt").read_text()
ASSISTANT = Message("assistant", "(an earlier answer)")


def two_turns(folder: Path) -> Path:
    lines = [
        {"turn": 1, "text": "<Response>First"},
        {"turn": 1, "text": " answer</Response>"},
        {"turn": 2, "text": "<Response>Second answer</Response>"},
    ]
    path = folder / "two-turns.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


async def test_plays_the_builtin_demo_in_token_sized_chunks() -> None:
    stream = ReplayProvider(fast=True).stream(ask("todo-app"))
    deltas = await drain(stream)
    assert "".join(deltas) == DEMO_TEXT
    assert stream.finish_reason is FinishReason.STOP
    assert len(deltas) > len(DEMO_TEXT) // 40  # many small pieces, not one blob
    assert all(count_tokens(delta) <= 4 for delta in deltas)  # 3 tokens, rarely 4 when re-cut
    assert stream.usage.output_tokens == count_tokens(DEMO_TEXT)
    expected_input = count_tokens("You are kiln.") + count_tokens("Build a counter app.") + 3
    assert stream.usage.input_tokens == expected_input


async def test_paces_at_about_100_tokens_per_second() -> None:
    sleep = SleepRecorder()
    stream = ReplayProvider(sleep=sleep).stream(ask("todo-app"))
    await drain(stream)
    assert sum(sleep.delays) == pytest.approx(stream.usage.output_tokens / 100)
    assert max(sleep.delays) <= 0.04


async def test_fast_replay_does_not_wait() -> None:
    sleep = SleepRecorder()
    await drain(ReplayProvider(fast=True, sleep=sleep).stream(ask("todo-app")))
    assert sleep.delays == []


async def test_recorded_chunking_keeps_the_recording_deltas(tmp_path: Path) -> None:
    two_turns(tmp_path)
    pacing = ReplayPacing(chunking="recorded", tokens_per_second=None)
    stream = ReplayProvider(tmp_path, pacing=pacing).stream(ask("two-turns"))
    assert await drain(stream) == ["<Response>First", " answer</Response>"]


@pytest.mark.parametrize(
    ("history", "expected"),
    [
        pytest.param((), "<Response>First answer</Response>", id="turn-1"),
        pytest.param(
            (Message("user", "go"), ASSISTANT), "<Response>Second answer</Response>", id="turn-2"
        ),
        pytest.param((ASSISTANT, Message("user", "go"), ASSISTANT), "", id="past-the-end"),
    ],
)
async def test_turn_n_answers_the_nth_request(
    tmp_path: Path, history: tuple[Message, ...], expected: str
) -> None:
    two_turns(tmp_path)
    stream = ReplayProvider(tmp_path, fast=True).stream(ask("two-turns", history=history))
    assert "".join(await drain(stream)) == expected
    assert stream.finish_reason is FinishReason.STOP


async def test_a_new_message_of_a_chat_replays_from_the_first_turn(tmp_path: Path) -> None:
    """A chat's earlier exchanges are history, not turns of this run (demo follow-ups)."""
    two_turns(tmp_path)
    earlier = (Message("user", "build it"), ASSISTANT, Message("user", "and more"), ASSISTANT)
    request = replace(ask("two-turns", "change it", history=earlier), run_turn=1)
    stream = ReplayProvider(tmp_path, fast=True).stream(request)
    assert "".join(await drain(stream)) == "<Response>First answer</Response>"


async def test_recordings_dir_comes_before_the_demos(tmp_path: Path) -> None:
    (tmp_path / "todo-app.txt").write_text("<Response>operator's own</Response>")
    stream = ReplayProvider(tmp_path, fast=True).stream(ask("todo-app"))
    assert "".join(await drain(stream)) == "<Response>operator's own</Response>"


async def test_sse_capture_by_name(tmp_path: Path) -> None:
    capture = (CAPTURES / "openai-chat.sse").read_bytes()
    (tmp_path / "counter.sse").write_bytes(capture)
    stream = ReplayProvider(tmp_path, fast=True).stream(ask("counter"))
    assert "".join(await drain(stream)) == load_turns(capture, "capture")[0].text


async def test_explicit_file_ignores_the_model_name() -> None:
    path = CAPTURES / "anthropic-messages.sse"
    provider = ReplayProvider(recording_file=path, fast=True)
    text = "".join(await drain(provider.stream(ask("../not/a/name"))))
    assert text == load_turns(path.read_bytes(), path.name)[0].text
    assert "PROVIDER-THINKING-ONLY" not in text


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("../../etc/passwd", id="traversal"),
        pytest.param("/etc/passwd", id="absolute"),
        pytest.param("demos/todo-app", id="slash"),
        pytest.param("Todo-App", id="upper-case"),
        pytest.param(".hidden", id="dot-first"),
        pytest.param("", id="empty"),
        pytest.param("x" * 101, id="too-long"),
    ],
)
def test_malformed_names_are_refused_before_any_read(name: str) -> None:
    with pytest.raises(ModelRefused, match="not a recording name"):
        ReplayProvider(fast=True).stream(ask(name))


async def test_unknown_name_lists_the_recordings() -> None:
    with pytest.raises(ModelRefused, match="todo-app"):
        await drain(ReplayProvider(fast=True).stream(ask("no-such-recording")))


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        pytest.param(b"text\x00with a NUL", "NUL", id="binary"),
        pytest.param(
            b'event: error\ndata: {"type":"error","error":{"message":"boom"}}\n\n',
            "boom",
            id="error-capture",
        ),
    ],
)
async def test_unusable_recording_is_a_config_error(
    tmp_path: Path, content: bytes, problem: str
) -> None:
    (tmp_path / "broken.txt").write_bytes(content)
    with pytest.raises(ConfigError, match=problem):
        await drain(ReplayProvider(tmp_path, fast=True).stream(ask("broken")))


async def test_cancel_stops_a_paced_replay() -> None:
    cancel = anyio.Event()
    stream = ReplayProvider().stream(ask("todo-app"), cancel=cancel)
    deltas = await cancel_while_waiting(stream, cancel)
    assert stream.finish_reason is FinishReason.CANCELLED
    assert DEMO_TEXT.startswith("".join(deltas))
    assert len(deltas) < 20
    assert stream.usage.output_tokens == count_tokens("".join(deltas))
