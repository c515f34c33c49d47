"""Tests for ``kiln parse`` (app.cli.parse_command), in-process and through the console script."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from parser import EVENT_TYPES, Event, merge_adjacent
from tests.app.kiln_process import SHARED_RECORDINGS, kiln_script

TESTS = Path(__file__).parent.parent
CAPTURES = TESTS / "data" / "captures"
DEMO = TESTS.parent / "app" / "demos" / "todo-app.txt"
RECORDINGS = SHARED_RECORDINGS
DEMO_FILES = [
    "src/main.jsx",
    "src/store.js",
    "src/components/NewTodoForm.jsx",
    "src/components/TodoList.jsx",
    "src/App.jsx",
    "src/index.css",
]


def run(
    capsys: pytest.CaptureFixture[str], *argv: str | Path, stdin: bytes | None = None
) -> tuple[int, str, str]:
    """Run ``kiln parse`` in-process; returns (exit code, stdout, stderr)."""
    if stdin is not None:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin)))
            code = main(["parse", *map(str, argv)])
    else:
        code = main(["parse", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def records(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


def merged(out: str) -> list[Event]:
    """The printed events, turn keys dropped, with adjacent content merged."""
    events = []
    for record in records(out):
        record.pop("turn", None)
        cls = EVENT_TYPES[record.pop("type")]
        events.append(cls(**record))
    return merge_adjacent(events)


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


# --- formats ----------------------------------------------------------------------------------


def answer_as_jsonl(tmp_path: Path) -> Path:
    text = (CAPTURES / "answer.txt").read_text(encoding="utf-8")
    lines = [json.dumps(text[i : i + 40]) for i in range(0, len(text), 40)]
    return write(tmp_path, "answer.jsonl", "\n".join(lines) + "\n")


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("anthropic-messages.sse", id="anthropic"),
        pytest.param("openai-chat.sse", id="openai-chat"),
        pytest.param("openai-responses.sse", id="openai-responses"),
        pytest.param("gemini-stream.sse", id="gemini"),
        pytest.param("jsonl", id="jsonl-strings"),
    ],
)
def test_every_format_gives_the_events_of_the_plain_answer(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, source: str
) -> None:
    path = answer_as_jsonl(tmp_path) if source == "jsonl" else CAPTURES / source
    _, plain, _ = run(capsys, CAPTURES / "answer.txt")

    code, out, err = run(capsys, path)

    assert (code, err) == (0, "")
    assert merged(out) == merged(plain)
    assert all("turn" not in record for record in records(out))
    assert {"type": "file_start", "path": "src/App.jsx"} in records(out)


def test_provider_deltas_are_fed_as_chunks(capsys: pytest.CaptureFixture[str]) -> None:
    _, plain, _ = run(capsys, CAPTURES / "answer.txt")

    _, captured, _ = run(capsys, CAPTURES / "anthropic-messages.sse")

    assert len(records(captured)) > len(records(plain))


def test_jsonl_turns_are_parsed_separately_and_numbered(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, RECORDINGS / "search-then-build.jsonl")

    events = records(out)
    assert code == 0
    assert {event["turn"] for event in events} == {1, 2}
    assert next(iter(events)) == {"turn": 1, "type": "thinking_start"}
    search = [e for e in events if e["type"] == "web_search"]
    assert search == [
        {
            "turn": 1,
            "type": "web_search",
            "query": "Intl.RelativeTimeFormat examples",
            "max_results": 3,
        }
    ]
    assert {e["turn"] for e in events if e["type"] == "file_start"} == {2}


def test_each_turn_gets_a_fresh_parser(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # turn 1 leaves a file open; turn 2's text must not land in it
    lines = [
        {"turn": 1, "text": '<edward_sandbox><file path="a.js">one'},
        {"turn": 2, "text": "<Response>two</Response>"},
    ]
    path = write(tmp_path, "t.jsonl", "\n".join(map(json.dumps, lines)))

    _, out, _ = run(capsys, path)

    events = records(out)
    assert [e["type"] for e in events if e["turn"] == 1][-2:] == ["error", "sandbox_end"]
    assert [e for e in events if e["turn"] == 2] == [{"turn": 2, "type": "text", "content": "two"}]


def test_bolt_dialect(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "bolt.txt",
        '<boltArtifact id="demo" title="Demo">'
        '<boltAction type="file" filePath="src/App.jsx">export default 1;\n</boltAction>'
        '<boltAction type="shell">npm run build</boltAction></boltArtifact>',
    )

    code, out, _ = run(capsys, path, "--dialect", "bolt", "--format", "summary")

    assert code == 0
    assert "  src/App.jsx  18 bytes" in out
    assert "  npm run build" in out


# --- chunking ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        pytest.param(["--chunk-size", "1"], id="size-1"),
        pytest.param(["--chunk-size", "7"], id="size-7"),
        pytest.param(["--chunk-size", "100000"], id="size-huge"),
        pytest.param(["--random-chunks", "1"], id="random-1"),
        pytest.param(["--random-chunks", "2024"], id="random-2024"),
    ],
)
@pytest.mark.parametrize(
    "recording",
    [
        pytest.param(DEMO, id="demo"),
        pytest.param(RECORDINGS / "adversarial.txt", id="adversarial"),
        pytest.param(RECORDINGS / "search-then-build.jsonl", id="jsonl"),
        pytest.param(CAPTURES / "openai-responses.sse", id="sse"),
    ],
)
def test_chunking_options_give_identical_merged_events(
    capsys: pytest.CaptureFixture[str], recording: Path, options: list[str]
) -> None:
    _, default, _ = run(capsys, recording)

    code, rechunked, _ = run(capsys, recording, *options)

    assert code == 0
    assert merged(rechunked) == merged(default)


def test_random_chunks_are_reproducible_and_really_split(
    capsys: pytest.CaptureFixture[str],
) -> None:
    outputs = [run(capsys, DEMO, "--random-chunks", "7")[1] for _ in range(2)]
    _, whole, _ = run(capsys, DEMO)

    assert outputs[0] == outputs[1]
    assert len(records(outputs[0])) > len(records(whole))


@pytest.mark.parametrize(
    "options",
    [
        pytest.param(["--chunk-size", "0"], id="zero"),
        pytest.param(["--chunk-size", "x"], id="not-a-number"),
        pytest.param(["--chunk-size", "2", "--random-chunks", "1"], id="both"),
        pytest.param(["--format", "xml"], id="format"),
        pytest.param(["--dialect", "klingon"], id="dialect"),
    ],
)
def test_bad_options_are_usage_errors(
    capsys: pytest.CaptureFixture[str], options: list[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        run(capsys, DEMO, *options)

    assert caught.value.code == 2
    assert "usage:" in capsys.readouterr().err


# --- summary ----------------------------------------------------------------------------------


def test_summary_of_the_demo(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, DEMO, "--format", "summary")

    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "files (6):"
    assert [line.split()[0] for line in lines[1:7]] == DEMO_FILES
    app_size = len(_demo_file("src/App.jsx").encode("utf-8"))
    assert f"  src/App.jsx  {app_size} bytes" in lines
    assert "packages (1): zustand" in lines
    assert "framework: vite-react" in lines
    assert lines[lines.index("commands (1):") + 1] == "  npm run build"
    assert "searches (0):" in lines
    assert "errors (0):" in lines
    assert lines[-1].startswith("counts: 1 turns, ")
    assert lines[-1].endswith("6 files, 1 packages, 1 commands, 0 searches, 0 errors, done: yes")


def test_summary_lists_searches_and_errors(capsys: pytest.CaptureFixture[str]) -> None:
    _, searches, _ = run(capsys, RECORDINGS / "search-then-build.jsonl", "--format", "summary")
    _, adversarial, _ = run(capsys, RECORDINGS / "adversarial.txt", "--format", "summary")

    assert "  search 'Intl.RelativeTimeFormat examples' (max 3)" in searches.splitlines()
    assert "counts: 2 turns," in searches
    errors = [line for line in adversarial.splitlines() if line.startswith("  [")]
    assert any("'../../etc/passwd'" in line for line in errors)
    assert any("'/absolute/path.js'" in line for line in errors)


def _demo_file(path: str) -> str:
    text = DEMO.read_text(encoding="utf-8")
    start = text.index(f'<file path="{path}">\n') + len(f'<file path="{path}">\n')
    return text[start : text.index("</file>", start)]


# --- materialize ------------------------------------------------------------------------------


def test_materialize_writes_the_demo(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "app"

    code, out, err = run(capsys, DEMO, "--materialize", target)

    assert (code, err) == (0, "")
    written = sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file())
    assert written == sorted(DEMO_FILES)
    assert "<h1>Todos</h1>" in (target / "src" / "App.jsx").read_text()
    for path in DEMO_FILES:
        assert (target / path).read_text(encoding="utf-8") == _demo_file(path)
    assert (
        out.splitlines()[0]
        == f"wrote {target / 'src/main.jsx'} ({len(_demo_file('src/main.jsx'))} bytes)"
    )
    assert len(out.splitlines()) == len(DEMO_FILES)


def test_materialize_with_a_format_reports_on_stderr(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run(capsys, DEMO, "--materialize", tmp_path, "--format", "jsonl")

    assert code == 0
    assert all(json.loads(line) for line in out.splitlines())
    assert err.count("wrote ") == len(DEMO_FILES)


def test_materialize_takes_the_last_version_of_each_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    turn = (
        '<edward_sandbox><file path="src/a.js">{}</file>'
        '<file path="src/{}.js">x</file></edward_sandbox>'
    )
    lines = [
        {"turn": 1, "text": turn.format("first", "one")},
        {"turn": 2, "text": turn.format("second", "two")},
    ]
    path = write(tmp_path, "turns.jsonl", "\n".join(map(json.dumps, lines)))

    code, _, _ = run(capsys, path, "--materialize", tmp_path / "out")

    assert code == 0
    assert (tmp_path / "out" / "src" / "a.js").read_text() == "second"
    assert sorted(p.name for p in (tmp_path / "out" / "src").iterdir()) == [
        "a.js",
        "one.js",
        "two.js",
    ]


def test_materialize_refuses_parent_and_absolute_paths(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    recording = write(
        tmp_path,
        "evil.txt",
        "<edward_sandbox>"
        '<file path="../escape.js">up</file>'
        '<file path="/tmp/kiln-parse-absolute.js">abs</file>'
        '<file path="src/ok.js">ok</file>'
        "</edward_sandbox>",
    )
    target = tmp_path / "out"

    code, out, err = run(capsys, recording, "--materialize", target)

    assert code == 0
    assert out == f"wrote {target / 'src/ok.js'} (2 bytes)\n"
    assert "'../escape.js'" in err
    assert "'/tmp/kiln-parse-absolute.js'" in err
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["evil.txt", "ok.js", "out", "src"]
    assert not Path("/tmp/kiln-parse-absolute.js").exists()


def test_materialize_refuses_a_symlink_escape(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    target = tmp_path / "out"
    target.mkdir()
    (target / "src").symlink_to(outside)

    code, _, err = run(capsys, DEMO, "--materialize", target)

    assert code == 1
    assert "refused 'src/App.jsx'" in err
    assert list(outside.iterdir()) == []


def test_materialize_into_a_file_is_bad_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = write(tmp_path, "taken", "")

    code, out, err = run(capsys, DEMO, "--materialize", target)

    assert (code, out) == (2, "")
    assert err.startswith("kiln parse: error: cannot create the folder")


# --- stdin ------------------------------------------------------------------------------------


def test_dash_reads_stdin(capsys: pytest.CaptureFixture[str]) -> None:
    _, from_file, _ = run(capsys, CAPTURES / "gemini-stream.sse")

    code, from_stdin, _ = run(capsys, "-", stdin=(CAPTURES / "gemini-stream.sse").read_bytes())

    assert code == 0
    assert from_stdin == from_file


def test_bad_stdin_is_named_stdin(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "-", stdin=b"\x89PNG\r\n\x1a\n\x00\x00")

    assert code == 2
    assert err == "kiln parse: error: '<stdin>', line 3: NUL byte; this is not text\n"


# --- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        pytest.param("bin.txt", b"\x7fELF\x02\x01\x01\x00\x00", "line 1: NUL byte", id="binary"),
        pytest.param(
            "latin1.txt", "<Response>café\n".encode("latin-1"), "line 1: invalid UTF-8", id="utf8"
        ),
        pytest.param("empty.txt", b"", "empty input", id="empty"),
        pytest.param("bad.jsonl", b'"a"\n"b"\n[3]\n', "line 3: a JSON list", id="jsonl-list"),
        pytest.param(
            "bad.jsonl",
            b'{"text": "a"}\n{"text": 1}\n',
            "line 2: the object has no",
            id="jsonl-text",
        ),
        pytest.param("bad.sse", b"data: {oops\n\n", "line 1: SSE data is not JSON", id="sse-json"),
        pytest.param(
            "overloaded.sse",
            b'event: message_start\ndata: {"type":"message_start","message":{}}\n\n'
            b'event: error\ndata: {"type":"error",'
            b'"error":{"type":"overloaded_error","message":"Overloaded"}}\n\n',
            "line 5: the capture holds a provider error: overloaded_error: 'Overloaded'",
            id="sse-error-event",
        ),
        pytest.param(
            "who.sse",
            b'data: {"hello": 1}\n\n',
            "no event is from a known provider",
            id="sse-unknown",
        ),
    ],
)
def test_bad_input_exits_2_naming_file_and_problem(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, content: bytes, expected: str
) -> None:
    path = write(tmp_path, name, content)

    code, out, err = run(capsys, path)

    assert (code, out) == (2, "")
    assert err.startswith(f"kiln parse: error: {str(path)!r}")
    assert expected in err
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        pytest.param(lambda p: p / "missing.txt", "No such file or directory", id="missing"),
        pytest.param(lambda p: p, "Is a directory", id="directory"),
    ],
)
def test_unreadable_file_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, make: Any, expected: str
) -> None:
    path = make(tmp_path)

    code, out, err = run(capsys, path)

    assert (code, out) == (2, "")
    assert err == f"kiln parse: error: cannot read {str(path)!r}: {expected}\n"


# --- the real console script ------------------------------------------------------------------


def kiln() -> str:
    return str(kiln_script())


def test_console_script_summarizes_the_demo_from_stdin() -> None:
    result = subprocess.run(
        [kiln(), "parse", "-", "--format", "summary"],
        input=DEMO.read_bytes(),
        capture_output=True,
        timeout=60,
        check=False,
    )

    assert (result.returncode, result.stderr) == (0, b"")
    assert b"packages (1): zustand" in result.stdout
    assert b"6 files" in result.stdout


def test_console_script_reports_bad_input_with_exit_2(tmp_path: Path) -> None:
    path = write(tmp_path, "garbage.bin", bytes(range(256)))

    result = subprocess.run(
        [kiln(), "parse", str(path)], capture_output=True, timeout=60, check=False
    )

    assert result.returncode == 2
    assert result.stdout == b""
    assert (
        result.stderr.decode()
        == f"kiln parse: error: {str(path)!r}, line 1: NUL byte; this is not text\n"
    )
