"""``kiln run "PROMPT"``: one generation from the terminal, with live progress.

Progress (thinking, files as they fill, installs, commands, turn decisions) goes to stderr; with
``--json`` one object goes to stdout at the end::

    {status, stop_reason, turns, files, packages, commands: [{argv, exit_code}],
     build: {ok, errors}, sandbox_id, dev_url, usage, errors, unchanged}

The provider comes from ``--provider``/``--model`` and the standard key variables
(``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``, ``GEMINI_API_KEY``); with no key the replay provider
plays the built-in demo. ``--recording FILE`` replays that file instead. Exit codes: 0 the run
completed, 1 it failed or was cancelled, 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import anyio

from app.agent.budgets import Budgets
from app.agent.loop import NO_CHANGES, AgentRun, Emit, RunResult, RunSettings
from app.agent.web_tools import web_tools_from_env
from app.agent.workspace import SandboxWorkspace
from app.cli.commands import COMMANDS
from app.cli.local_sandbox import DATA_DIR_HELP, cli_sandbox_settings
from app.cli.run_progress import ProgressPrinter
from app.cli.sandbox_apply import load_recording, recorded_framework
from app.errors import ConfigError, KilnError, ModelRefused
from app.providers import PROVIDER_NAMES, Provider, model_limits, resolve_provider
from app.providers.replay import ReplayProvider
from app.recordings.stream_formats import StreamFormatError
from sandbox import (
    TEMPLATES,
    EnvReader,
    ImageBuilder,
    ImageBuildSettings,
    SandboxError,
    SandboxManager,
    SandboxSettings,
)

EXIT_OK, EXIT_FAILED, EXIT_BAD_USAGE = 0, 1, 2


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``run`` subcommand."""
    command = subparsers.add_parser(
        "run", help=COMMANDS["run"].help, description=__doc__.splitlines()[0]
    )
    command.add_argument("prompt", help="what to build")
    command.add_argument("--provider", choices=PROVIDER_NAMES, help="the LLM provider")
    command.add_argument("--model", help="the model (or, with replay, a recording's name)")
    command.add_argument("--recording", type=Path, metavar="FILE", help="replay this answer")
    command.add_argument("--template", choices=sorted(TEMPLATES), help="the sandbox template")
    command.add_argument("--json", action="store_true", help="print the result as JSON")
    command.add_argument("--fast", action="store_true", help="replay without pacing")
    command.add_argument(
        "--events", type=Path, metavar="FILE", help="also write every run event to FILE (JSONL)"
    )
    command.add_argument("--data-dir", type=Path, help=DATA_DIR_HELP)
    command.set_defaults(handler=handle_run)


def handle_run(args: argparse.Namespace) -> int:
    """Handle ``kiln run``; returns the exit code."""
    try:
        provider, settings = _choose(args)
        sandbox_settings = cli_sandbox_settings(args.data_dir)
        images = ImageBuildSettings.from_env()
    except (ConfigError, ModelRefused, ValueError, OSError, StreamFormatError) as exc:
        print(f"kiln run: {exc}", file=sys.stderr)
        return EXIT_BAD_USAGE
    try:
        result = anyio.run(_run, args, provider, settings, sandbox_settings, images)
    except (SandboxError, KilnError) as exc:
        print(f"kiln run: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if args.json:
        print(json.dumps(cli_summary(result)))
    else:
        print(f"{result.status} ({result.stop_reason}) after {result.turns} turn(s)")
        if result.unchanged:
            print(NO_CHANGES)
        if result.dev_url:
            print(f"preview: {result.dev_url}")
    return EXIT_OK if result.status == "completed" else EXIT_FAILED


def _choose(args: argparse.Namespace) -> tuple[Provider, RunSettings]:
    """The provider and run settings the arguments and environment ask for."""
    template = args.template
    if args.recording is not None:
        template = template or recorded_framework(load_recording(args.recording))
        provider: Provider = ReplayProvider(recording_file=args.recording, fast=args.fast)
        name, model = "replay", "recording"
    else:
        choice = resolve_provider(args.provider, args.model, os.environ)
        name, model = choice.provider, choice.model
        if name == "replay":
            folder = EnvReader(None, ConfigError).optional_path("KILN_RECORDINGS_DIR")
            provider = ReplayProvider(folder, fast=args.fast)
        else:
            provider = choice.build()
    limits = model_limits(name, model, os.environ)  # openai-compatible: from its settings
    settings = RunSettings(
        model=model,
        template=template or "vite-react",
        provider_name=name,
        context_window=limits.context_window,
        max_output_tokens=limits.max_output_tokens,
        budgets=Budgets.from_env(),
    )
    args.explicit_template = template
    return provider, settings


async def _run(
    args: argparse.Namespace,
    provider: Provider,
    settings: RunSettings,
    sandbox_settings: SandboxSettings,
    images: ImageBuildSettings,
) -> RunResult:
    progress = ProgressPrinter(sys.stderr)
    emit: Emit = progress.show
    if args.events is not None:
        emit = _also_to_file(args.events, progress.show)
    manager = await SandboxManager.open(sandbox_settings)
    try:
        await ImageBuilder(manager.client, images, progress.line).build()  # + npm proxy
        workspace = SandboxWorkspace(
            manager, args.explicit_template, chat=f"cli-{uuid.uuid4().hex[:12]}", owner="cli"
        )
        agent = AgentRun(settings, provider, workspace, web_tools_from_env(), emit=emit)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(progress.keep_alive)  # a line at least every 10 s of an install
            try:
                result = await agent.run(args.prompt)
            finally:
                tasks.cancel_scope.cancel()
        return result
    finally:
        await provider.aclose()
        await manager.aclose()


def _also_to_file(path: Path, show: Emit) -> Emit:
    """An emit that appends each event to ``path`` as a JSON line, then shows it."""
    out = path.open("w", encoding="utf-8")

    async def emit(event: dict[str, Any]) -> None:
        out.write(json.dumps(event) + "\n")
        if event["type"] == "session_complete":
            out.close()
        else:
            out.flush()
        await show(event)

    return emit


def cli_summary(result: RunResult) -> dict[str, Any]:
    """The ``--json`` object: the run's result with ``build`` as ``{ok, errors}``."""
    summary = result.to_dict()
    postgen = summary.pop("postgen") or {}
    build = summary.get("build")
    errors = [
        f"{f['path']}:{f['line'] or 0} [{f['code']}] {f['message']}"
        for f in postgen.get("findings", [])
    ]
    if build is not None and not build["ok"]:
        errors.append(build["output"])
    if build is not None:
        summary["build"] = {"ok": build["ok"] and not errors, "errors": errors}
    summary["fixes"] = postgen.get("fixes", [])
    return summary
