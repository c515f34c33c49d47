"""Post-generation's build step: one build per state of the files."""

from __future__ import annotations

import pytest

from app.postgen.pipeline import REUSED_BUILD, run_build
from parser.events import Command, Event
from sandbox import BUILD_COMMAND, SessionLog

pytestmark = pytest.mark.anyio


class BuildingTarget:
    """Runs the build like a session would: in the background (only waiting for commands
    makes it happen), with a command record and its output."""

    def __init__(self) -> None:
        self.log = SessionLog()
        self.handled: list[Event] = []
        self.output: list[str] = []
        self.queued: list[Command] = []

    async def handle(self, event: Event) -> None:
        self.handled.append(event)
        if isinstance(event, Command):
            self.queued.append(event)

    async def wait_commands(self) -> None:
        for command in self.queued:
            self.log.commands.append({"argv": [command.command, *command.args], "exit_code": 0})
            self.output.append("vite built in 1s")
        self.queued.clear()

    async def finish(self) -> SessionLog:
        return self.log

    def take_output(self) -> str:
        text, self.output = "\n".join(self.output), []
        return text


async def test_the_build_runs_when_no_build_passed_on_these_files() -> None:
    target = BuildingTarget()
    report = await run_build(target, target.take_output)
    assert [e for e in target.handled if isinstance(e, Command)] == [
        Command(BUILD_COMMAND[0], list(BUILD_COMMAND[1:]))
    ]
    assert (report.ok, report.exit_code, report.output) == (True, 0, "vite built in 1s")


async def test_a_build_that_passed_on_the_current_files_is_not_run_again() -> None:
    target = BuildingTarget()
    target.log.workspace_state = 7
    target.log.succeeded_in[BUILD_COMMAND] = 7
    report = await run_build(target, target.take_output)
    assert target.handled == []
    assert (report.ok, report.exit_code, report.output) == (True, 0, REUSED_BUILD)
