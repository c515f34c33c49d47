"""``kiln run`` end to end: the recordings through real Docker, Redis and the npm registry, and
an ``openai-compatible`` model served by a local Chat Completions server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.cli import main
from tests.providers.wire_servers import Answer, WireServer

RECORDINGS = Path(__file__).resolve().parents[3] / "shared" / "recordings"

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def kiln_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, recording: Path, *extra: str
) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    """Run ``kiln run --json --events``; the exit code, the JSON result and the events."""
    events = tmp_path / "events.jsonl"
    argv = ["run", "make an app", "--recording", str(recording), "--fast", "--json"]
    code = main([*argv, "--events", str(events), *extra])
    result = json.loads(capsys.readouterr().out)
    return code, result, [json.loads(line) for line in events.read_text().splitlines()]


@pytest.mark.npm
def test_todo_recording_builds_and_serves(
    instance: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, result, events = kiln_run(capsys, tmp_path, RECORDINGS / "todo-vite-react.txt")
    assert code == 0
    assert (result["status"], result["stop_reason"], result["turns"]) == (
        "completed",
        "code_written",
        1,
    )
    assert len(result["files"]) == 6
    assert result["packages"] == ["zustand"]
    assert {"argv": ["npm", "run", "build"], "exit_code": 0} in result["commands"]
    assert result["build"] == {"ok": True, "errors": []}
    assert result["errors"] == []
    page = httpx.get(result["dev_url"], timeout=30).text
    assert '<div id="root">' in page
    app = httpx.get(result["dev_url"] + "src/App.jsx", timeout=30).text
    assert "Todos" in app
    assert events[-1]["type"] == "session_complete"


@pytest.mark.npm
def test_search_then_build_takes_two_turns_with_the_result_in_the_second_prompt(
    instance: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, result, events = kiln_run(capsys, tmp_path, RECORDINGS / "search-then-build.jsonl")
    assert code == 0
    assert (result["turns"], result["stop_reason"]) == (2, "code_written")
    assert result["files"] == ["src/App.jsx", "src/index.css"]
    search = next(e for e in events if e["type"] == "tool_result")
    second = [e for e in events if e["type"] == "turn_start"][1]
    assert search["request"] == "Intl.RelativeTimeFormat examples"
    assert search["text"] in second["prompt"]


def test_conversational_answer_needs_no_sandbox(
    instance: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, result, _ = kiln_run(capsys, tmp_path, RECORDINGS / "hello-conversational.txt")
    assert code == 0
    assert (result["turns"], result["stop_reason"], result["sandbox_id"]) == (1, "done", None)


def test_turn_without_output_is_nudged_once(
    instance: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    quiet = tmp_path / "quiet.jsonl"
    quiet.write_text(
        json.dumps({"turn": 1, "text": "<Thinking>hmm</Thinking>"})
        + "\n"
        + json.dumps({"turn": 2, "text": "Hello! What should I build?<edward_done />"})
        + "\n"
    )
    code, _, events = kiln_run(capsys, tmp_path, quiet)
    assert code == 0
    decisions = [e for e in events if e["type"] == "turn_end"]
    assert [d.get("prompt") or d.get("reason") for d in decisions] == ["nudge", "done"]


def test_bad_usage_exits_2(instance: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "x", "--recording", "/nonexistent/recording.txt"]) == 2
    assert "recording" in capsys.readouterr().err


def test_an_openai_compatible_model_runs_from_the_terminal(
    instance: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answer = (RECORDINGS / "hello-conversational.txt").read_text()
    with WireServer("openai") as server:
        server.script(Answer((answer,), input_tokens=321, output_tokens=54))
        monkeypatch.setenv("KILN_OPENAI_COMPATIBLE_BASE_URL", f"{server.url}/v1")
        monkeypatch.setenv("KILN_OPENAI_COMPATIBLE_MAX_OUTPUT_TOKENS", "2048")
        argv = ["run", "hi", "--provider", "openai-compatible", "--model", "llama3.1:8b"]
        code = main([*argv, "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0
    assert (result["turns"], result["stop_reason"]) == (1, "done")
    turn = result["usage"]["turns"][0]
    assert (turn["input_tokens"], turn["output_tokens"]) == (321, 54)
    [seen] = server.requests
    assert (seen.body["model"], seen.body["max_tokens"]) == ("llama3.1:8b", 2048)


def test_openai_compatible_without_a_base_url_exits_2_naming_it(
    instance: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KILN_OPENAI_COMPATIBLE_BASE_URL", raising=False)
    assert main(["run", "x", "--provider", "openai-compatible", "--model", "llama3.1:8b"]) == 2
    assert "KILN_OPENAI_COMPATIBLE_BASE_URL" in capsys.readouterr().err
