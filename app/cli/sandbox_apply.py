"""``kiln sandbox apply RECORDING``: drive a fresh sandbox with the events of a recorded answer.

The recording (plain text, JSONL turns or a provider SSE capture, see
:mod:`app.recordings.stream_formats`) is parsed in small chunks and every event goes to a
:class:`~sandbox.session.SandboxSession`, exactly as a run would: files stream through the write
buffer, installs queue, commands wait for both. Progress goes to stderr; ``--json`` prints one
summary object on stdout::

    {sandbox_id, template, files, installs, commands: [{argv, exit_code}], errors, warnings,
     dev_url, preview_url}

``dev_url`` is the dev server as this host reaches it; ``preview_url`` is the address
``kiln serve`` proxies (``KILN_PUBLIC_HOST``, default ``kiln.localhost``; ``KILN_PUBLIC_PORT``,
default 8000). The sandbox is left running for them; ``kiln sandbox rm ID`` removes it.
Exit codes: 0 when every install and command that ran succeeded (refusals are expected
behaviour, not failures), 1 otherwise, 2 for an unreadable recording.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from app.config import ServiceSettings
from app.recordings.stream_formats import StreamFormatError, load_turns
from parser import StreamParser
from parser.events import Event, InstallContent, SandboxStart
from sandbox import (
    DEFAULT_TEMPLATE,
    TEMPLATES,
    EnvReader,
    ImageBuilder,
    ImageBuildSettings,
    Record,
    SandboxError,
    SandboxManager,
    SessionLog,
    get_template,
    manager_session,
    preview_url,
)

CHUNK_SIZE = 64  # the recording is re-fed in pieces like a provider's stream deltas
FAILURES = {
    "install_failed",
    "command_failed",
    "out_of_memory",
    "disk_quota_exceeded",
    "write_failed",
    "sandbox_unavailable",
    # Its subclasses' own codes (sandbox.errors): the outages a busy host meets.
    "sandbox_capacity",
    "docker_unavailable",
    "redis_unavailable",
    "image_missing",
    "disk_full",
}
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def configure_apply(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``kiln sandbox apply``."""
    parser.add_argument("recording", type=Path, help="a recorded answer (text, JSONL or SSE)")
    parser.add_argument(
        "--template",
        choices=sorted(TEMPLATES),
        help="the sandbox template (default: the recording's framework, else vite-react)",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON summary on stdout")


async def run_apply(manager: SandboxManager, args: argparse.Namespace) -> int:
    """Apply the recording to a fresh sandbox; print progress and the summary."""
    try:
        turns = load_recording(args.recording)
    except (OSError, StreamFormatError) as exc:
        print(f"kiln sandbox apply: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    template = args.template or recorded_framework(turns) or DEFAULT_TEMPLATE
    try:
        images = ImageBuildSettings.from_env()
    except ValueError as exc:
        print(f"kiln sandbox apply: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    await ImageBuilder(manager.client, images, _progress_line).build([template])
    summary = await apply_events(manager, template, turns)
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"sandbox {summary['sandbox_id']}: {summary['dev_url']}  {summary['preview_url']}")
    failed = any(error["code"] in FAILURES for error in summary["errors"])
    return EXIT_FAILED if failed else EXIT_OK


def load_recording(path: Path) -> list[list[Event]]:
    """The events of each turn of the recording, parsed in :data:`CHUNK_SIZE` pieces."""
    turns = load_turns(path.read_bytes(), str(path))
    parsed = []
    for turn in turns:
        parser, events = StreamParser(), []
        text = turn.text
        for start in range(0, len(text), CHUNK_SIZE):
            events += parser.feed(text[start : start + CHUNK_SIZE])
        events += parser.close()
        parsed.append(events)
    return parsed


def recorded_framework(turns: list[list[Event]]) -> str | None:
    """The first known template an install block or sandbox tag of the recording names."""
    for events in turns:
        for event in events:
            named = None
            if isinstance(event, InstallContent):
                named = event.framework
            elif isinstance(event, SandboxStart):
                named = event.base
            if named in TEMPLATES:
                return named
    return None


async def apply_events(
    manager: SandboxManager, template: str, turns: list[list[Event]]
) -> dict[str, Any]:
    """Provision a sandbox, drive it with every event, wait for its dev server; the summary."""
    sandbox = await manager.provision(template, owner="cli")
    _progress_line(f"sandbox {sandbox.id} ({template}) provisioned")
    log = await _drive(manager, sandbox.id, template, turns)
    try:
        sandbox = await manager.wait_ready(sandbox.id)
    except SandboxError as exc:
        log.errors.append({"code": "dev_server_not_ready", "message": str(exc)})
    await manager.release(sandbox.id)
    read = EnvReader()
    host = read.text("KILN_PUBLIC_HOST", ServiceSettings.public_host)
    port = read.integer("KILN_PUBLIC_PORT", 8000, low=1, high=65535)
    return {
        "sandbox_id": sandbox.id,
        "template": template,
        "files": log.files,
        "installs": log.installs,
        "commands": log.commands,
        "errors": log.errors,
        "warnings": log.warnings,
        "dev_url": f"{sandbox.dev_url}/",
        "preview_url": preview_url(sandbox.id, host, port),
    }


async def _drive(
    manager: SandboxManager, sandbox_id: str, template: str, turns: list[list[Event]]
) -> SessionLog:
    async with manager_session(
        manager, sandbox_id, get_template(template), on_record=show_record
    ) as session:
        for events in turns:
            for event in events:
                await session.handle(event)
        return await session.finish()


async def show_record(kind: str, record: Record) -> None:
    """One progress line on stderr per session record."""
    if kind == "output":
        line = f"    {record['line']}"
    elif kind == "file":
        line = f"wrote {record['path']}"
    elif kind == "install_start":
        line = f"installing {' '.join(record['packages'])}"
    elif kind == "install":
        line = f"installed {' '.join(record['packages'])} (exit {record['exit_code']})"
    elif kind == "command_start":
        line = f"$ {' '.join(record['argv'])}"
    elif kind == "command":
        line = f"exit {record['exit_code']}: {' '.join(record['argv'])}"
    else:
        line = f"{kind} [{record.get('code')}] {record.get('message')}"
    _progress_line(line)


def _progress_line(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
