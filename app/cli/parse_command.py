"""``kiln parse``: run the stream parser on a recorded answer and show what it produced.

Each turn of the recording is parsed by a fresh :class:`parser.StreamParser`, fed in chunks and
then closed. The chunks are the recording's own (an SSE capture's provider deltas, a JSONL
recording's lines, a plain text file as one chunk) unless ``--chunk-size`` or
``--random-chunks`` re-split each turn's text, which must not change the merged events.
"""

from __future__ import annotations

import argparse
import functools
import io
import json
import os
import random
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from app.cli.commands import COMMANDS
from app.recordings.materialize import MaterializeError, MaterializeReport, materialize
from app.recordings.stream_formats import StreamFormatError, Turn, load_turns
from parser import StreamParser
from parser.assemble import FileAssembler
from parser.errors import ParseError
from parser.events import Event

MAX_RANDOM_CHUNK = 32
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``parse`` subcommand."""
    command = subparsers.add_parser(
        "parse",
        help=COMMANDS["parse"].help,
        description="Run the stream parser on a recorded LLM answer (plain text, JSONL, or an "
        "Anthropic, OpenAI or Gemini SSE capture; detected from content) and show what it made.",
    )
    command.add_argument("file", metavar="FILE", help="the recording, or - for stdin")
    command.add_argument(
        "--format",
        choices=("jsonl", "summary"),
        help="jsonl: one event per line (the default); summary: files, packages, commands, "
        "searches, errors. With --materialize and no --format, only the written files are "
        "listed; with both, the write report goes to stderr.",
    )
    command.add_argument(
        "--dialect", choices=("edward", "bolt"), default="edward", help="the tag dialect"
    )
    chunking = command.add_mutually_exclusive_group()
    chunking.add_argument(
        "--chunk-size", type=_positive_int, metavar="N", help="feed each turn in N-character chunks"
    )
    chunking.add_argument(
        "--random-chunks",
        type=int,
        metavar="SEED",
        help=f"feed each turn in random 1..{MAX_RANDOM_CHUNK}-character chunks (reproducible)",
    )
    command.add_argument(
        "--materialize",
        type=Path,
        metavar="DIR",
        help="write the final content of every file the stream creates into DIR",
    )
    command.set_defaults(handler=run_parse)


def _positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value!r}")
    return number


def run_parse(args: argparse.Namespace) -> int:
    """Handle ``kiln parse``; returns the exit code."""
    try:
        raw, source = _read_input(args.file)
        parsed = list(_parse_turns(load_turns(raw, source), args))
    except (OSError, StreamFormatError, ParseError) as exc:
        return _fail(exc)
    assembler = FileAssembler()
    for _, events in parsed:
        assembler.apply_all(events)
    report = None
    if args.materialize is not None:
        try:
            report = materialize(assembler.files, args.materialize)
        except MaterializeError as exc:
            return _fail(exc)
    try:
        _print_output(args, parsed, assembler, report)
    except BrokenPipeError:
        _stop_writing_stdout()
        return EXIT_FAILED
    return EXIT_FAILED if report is not None and report.refused else EXIT_OK


def _print_output(
    args: argparse.Namespace,
    parsed: list[tuple[Turn, list[Event]]],
    assembler: FileAssembler,
    report: MaterializeReport | None,
) -> None:
    if args.format == "summary":
        _print_summary(assembler, len(parsed), sys.stdout)
    elif args.format == "jsonl" or report is None:
        _print_jsonl(parsed, sys.stdout)
    if report is None:
        return
    _print_report(report, args.materialize, sys.stderr if args.format else sys.stdout)
    if args.format is None:
        # the report is the only output, so the stream's own errors must show here
        for error in assembler.errors:
            print(f"kiln parse: stream error {error.code}: {error.message}", file=sys.stderr)


def _stop_writing_stdout() -> None:
    """The reader went away (``kiln parse x | head``); keep Python's exit flush from failing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        pass  # not a real file descriptor (tests capture stdout); nothing to protect


def _fail(exc: Exception) -> int:
    message = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
    if isinstance(exc, OSError) and exc.filename is not None:
        message = f"cannot read {exc.filename!r}: {message}"
    print(f"kiln parse: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _read_input(name: str) -> tuple[bytes, str]:
    if name == "-":
        stream = getattr(sys.stdin, "buffer", None)
        data = stream.read() if stream is not None else sys.stdin.read().encode("utf-8")
        return data, "<stdin>"
    return Path(name).read_bytes(), name


def _parse_turns(turns: list[Turn], args: argparse.Namespace) -> Iterator[tuple[Turn, list[Event]]]:
    """Each turn with the events a fresh parser made of it."""
    next_size = _chunk_sizes(args.chunk_size, args.random_chunks)
    for turn in turns:
        parser = StreamParser(dialect=args.dialect)
        events: list[Event] = []
        for chunk in _chunks(turn, next_size):
            events.extend(parser.feed(chunk))
        events.extend(parser.close())
        yield turn, events


def _chunk_sizes(size: int | None, seed: int | None) -> Callable[[], int] | None:
    """Where re-chunking takes its chunk lengths from; None keeps the recording's chunks."""
    if size is not None:
        return lambda: size
    if seed is not None:
        return functools.partial(random.Random(seed).randint, 1, MAX_RANDOM_CHUNK)
    return None


def _chunks(turn: Turn, next_size: Callable[[], int] | None) -> list[str]:
    if next_size is None:
        return turn.chunks
    text = turn.text
    chunks: list[str] = []
    start = 0
    while start < len(text):
        end = start + next_size()
        chunks.append(text[start:end])
        start = end
    return chunks


def _print_jsonl(parsed: list[tuple[Turn, list[Event]]], out: TextIO) -> None:
    for turn, events in parsed:
        for event in events:
            record: dict[str, Any] = {"turn": turn.number} if turn.numbered else {}
            record.update(event.to_dict())
            out.write(json.dumps(record) + "\n")


def _print_summary(assembler: FileAssembler, turn_count: int, out: TextIO) -> None:
    files = assembler.files
    lines = [f"files ({len(files)}):"]
    lines += [f"  {path}  {len(text.encode('utf-8'))} bytes" for path, text in files.items()]
    lines.append(f"packages ({len(assembler.packages)}): {', '.join(assembler.packages)}".rstrip())
    if assembler.framework:
        lines.append(f"framework: {assembler.framework}")
    lines.append(f"commands ({len(assembler.commands)}):")
    lines += [f"  {' '.join([c.command, *c.args])}" for c in assembler.commands]
    lines.append(f"searches ({len(assembler.searches) + len(assembler.scrapes)}):")
    lines += [f"  search {s.query!r} (max {s.max_results})" for s in assembler.searches]
    lines += [f"  scrape {s.url}" for s in assembler.scrapes]
    lines.append(f"errors ({len(assembler.errors)}):")
    lines += [f"  [{e.severity}] {e.code}: {e.message}" for e in assembler.errors]
    lines.append(
        f"counts: {turn_count} turns, {assembler.event_count} events, {len(files)} files, "
        f"{len(assembler.packages)} packages, {len(assembler.commands)} commands, "
        f"{len(assembler.searches) + len(assembler.scrapes)} searches, "
        f"{len(assembler.errors)} errors, done: {'yes' if assembler.done else 'no'}"
    )
    out.write("\n".join(lines) + "\n")


def _print_report(report: MaterializeReport, root: Path, out: TextIO) -> None:
    for path, size in report.written:
        out.write(f"wrote {root / path} ({size} bytes)\n")
    for path, reason in report.refused:
        print(f"kiln parse: refused {path!r}: {reason}", file=sys.stderr)
