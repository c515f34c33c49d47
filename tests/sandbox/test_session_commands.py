"""The session's command line: installs first, commands in order, the build ahead handed over
only while nothing changed (fake sandbox, real Redis behind the flush scheduler)."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest

from sandbox.execution.exec_stream import ExecResult, OutputSink
from sandbox.execution.install_queue import InstallResult
from sandbox.images.templates import BUILD_COMMAND, get_template
from sandbox.session_commands import CommandLine, SandboxPorts
from sandbox.session_log import Record, SessionReporter
from sandbox.writes.flush import ArchiveTarget, Flusher, FlushScheduler
from sandbox.writes.write_buffer import WriteBuffer

pytestmark = pytest.mark.anyio


class FakePorts:
    """Installs and commands that only say, in order, that they ran."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.install_gate = anyio.Event()

    async def resolve(self, sandbox_id: str) -> ArchiveTarget:
        raise AssertionError("nothing is written in these tests")

    async def install(self, specs: Sequence[str], sink: OutputSink | None) -> InstallResult:
        await self.install_gate.wait()
        self.ran.append(f"install {' '.join(specs)}")
        return InstallResult(tuple(specs), ExecResult(("npm", "install"), 0, "", False, False))

    async def wait_install_idle(self) -> None:
        return None

    async def run(self, argv: Sequence[str], sink: OutputSink | None) -> ExecResult:
        self.ran.append(" ".join(argv))
        if sink is not None:
            await sink("built")
        return ExecResult(tuple(argv), 0, "built", False, False)

    async def read(self, path: str) -> str | None:
        return None

    def ports(self) -> SandboxPorts:
        return SandboxPorts(
            self.resolve, self.install, self.wait_install_idle, self.run, self.read, None
        )


def _line(fake: FakePorts, buffer: WriteBuffer, records: list[tuple[str, Record]]) -> CommandLine:
    async def keep(kind: str, record: Record) -> None:
        records.append((kind, record))

    scheduler = FlushScheduler(Flusher(buffer, fake.resolve), 60.0, 60.0)
    return CommandLine(
        fake.ports(),
        get_template("vite-react"),
        SessionReporter(keep),
        scheduler,
        build_ahead=True,
    )


async def test_a_command_is_refused_before_the_line_is_entered(buffer: WriteBuffer) -> None:
    line = _line(FakePorts(), buffer, [])
    with pytest.raises(RuntimeError, match="enter the session"):
        line.queue(["npm", "test"])


async def test_commands_wait_for_the_install_before_them_and_run_in_order(
    buffer: WriteBuffer,
) -> None:
    fake, records = FakePorts(), []
    async with _line(fake, buffer, records) as line:
        line.queue_install(["zod"])
        line.queue(["npm", "test"])
        line.queue(["npm", "run", "lint"])
        await anyio.wait_all_tasks_blocked()
        assert fake.ran == []  # the install holds both
        fake.install_gate.set()
        await line.wait_asked()
    assert fake.ran == ["install zod", "npm test", "npm run lint"]
    assert [r["argv"] for r in line.log.commands] == [["npm", "test"], ["npm", "run", "lint"]]


@pytest.mark.parametrize(
    ("change_between", "builds"),
    [
        pytest.param(False, 1, id="handed-over"),
        pytest.param(True, 2, id="built-again-after-a-change"),
    ],
)
async def test_the_build_ahead_is_handed_over_only_on_the_same_files(
    buffer: WriteBuffer, change_between: bool, builds: int
) -> None:
    fake, records = FakePorts(), []
    fake.install_gate.set()
    async with _line(fake, buffer, records) as line:
        line.queue_build_ahead()
        await anyio.wait_all_tasks_blocked()
        if change_between:
            line.changed()
        line.queue(list(BUILD_COMMAND))
        await line.wait_asked()
    assert fake.ran == [" ".join(BUILD_COMMAND)] * builds
    assert line.log.commands == [{"argv": list(BUILD_COMMAND), "exit_code": 0}]
    assert ("output", {"line": "built"}) in records  # replayed when handed over
