"""Tests for parser.assemble.FileAssembler."""

from __future__ import annotations

from parser.assemble import FileAssembler
from parser.events import (
    Command,
    Done,
    Error,
    Event,
    FileContent,
    FileEnd,
    FileStart,
    InstallContent,
    InstallEnd,
    InstallStart,
    SandboxEnd,
    SandboxStart,
    Text,
    UrlScrape,
    WebSearch,
)


def file_events(path: str, *pieces: str, end: bool = True) -> list[Event]:
    events: list[Event] = [FileStart(path)]
    events += [FileContent(path, piece) for piece in pieces]
    return [*events, FileEnd(path)] if end else events


def test_file_content_pieces_are_joined() -> None:
    assembler = FileAssembler()

    assembler.apply_all(file_events("src/App.jsx", "export ", "default ", "App;\n"))

    assert assembler.files == {"src/App.jsx": "export default App;\n"}
    assert assembler.open_files == []


def test_files_keep_the_order_they_were_started_in() -> None:
    assembler = FileAssembler()

    assembler.apply_all([*file_events("b.js", "b"), *file_events("a.js", "a")])

    assert list(assembler.files) == ["b.js", "a.js"]


def test_a_file_written_again_is_replaced_not_appended() -> None:
    assembler = FileAssembler()

    assembler.apply_all([*file_events("a.js", "old ", "text"), *file_events("a.js", "new")])

    assert assembler.files == {"a.js": "new"}


def test_an_open_file_is_readable_and_keeps_growing() -> None:
    assembler = FileAssembler()
    assembler.apply_all(file_events("a.js", "one ", "two", end=False))

    first = assembler.files
    assembler.apply_all([FileContent("a.js", " three"), FileEnd("a.js")])

    assert first == {"a.js": "one two"}
    assert assembler.files == {"a.js": "one two three"}
    assert assembler.open_files == []


def test_open_files_lists_files_without_an_end() -> None:
    assembler = FileAssembler()

    assembler.apply_all([*file_events("done.js", "x"), *file_events("open.js", "y", end=False)])

    assert assembler.open_files == ["open.js"]


def test_empty_file() -> None:
    assembler = FileAssembler()

    assembler.apply_all(file_events("empty.txt"))

    assert assembler.files == {"empty.txt": ""}


def test_packages_framework_commands_searches_errors_and_done() -> None:
    error = Error("unsafe_path", "absolute file path: '/etc/passwd'")
    events: list[Event] = [
        Text("hello"),
        InstallStart(),
        InstallContent(["zustand", "react-router-dom@^6"], "vite-react"),
        InstallEnd(),
        InstallStart(),
        InstallContent(["zustand", "clsx"], None),
        InstallEnd(),
        SandboxStart("todo", "vite-react"),
        SandboxEnd(),
        Command("npm", ["run", "build"]),
        WebSearch("vite config", 3),
        UrlScrape("https://vitejs.dev"),
        error,
        Done(),
    ]
    assembler = FileAssembler()

    assembler.apply_all(events)

    assert assembler.packages == ["zustand", "react-router-dom@^6", "clsx"]
    assert assembler.framework == "vite-react"
    assert assembler.commands == [Command("npm", ["run", "build"])]
    assert assembler.searches == [WebSearch("vite config", 3)]
    assert assembler.scrapes == [UrlScrape("https://vitejs.dev")]
    assert assembler.errors == [error]
    assert assembler.done
    assert assembler.event_count == len(events)
    assert assembler.files == {}


def test_nothing_applied() -> None:
    assembler = FileAssembler()

    assert (assembler.files, assembler.packages, assembler.done) == ({}, [], False)
