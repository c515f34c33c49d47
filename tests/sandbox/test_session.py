"""The session: parser events drive writes, installs and commands (fake sandbox, real Redis)."""

from __future__ import annotations

import contextlib
import io
import json
import tarfile
import uuid
from collections.abc import AsyncIterator, Sequence

import anyio
import pytest
import redis.asyncio

from parser import StreamParser
from parser.events import (
    Command,
    EditBlock,
    EditEnd,
    EditStart,
    Error,
    Event,
    FileContent,
    FileEnd,
    FileStart,
    InstallContent,
    SandboxEnd,
)
from sandbox.errors import CommandRefused, DiskQuotaExceeded, InstallRefused, SandboxUnavailable
from sandbox.execution.exec_stream import ExecResult, OutputSink
from sandbox.execution.install_queue import InstallResult
from sandbox.images.templates import Template, get_template
from sandbox.session import SandboxPorts, SandboxSession
from sandbox.session_log import AppliedEdit, FailedEdit, Record
from sandbox.writes.flush import ArchiveTarget
from sandbox.writes.write_buffer import WriteBuffer

pytestmark = pytest.mark.anyio


class FakeSandbox:
    """A container, an install queue and a command runner that record what happens, in order."""

    id = "fake-container"

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {"package.json": b'{"dependencies": {"react": "^18"}}'}
        self.timeline: list[str] = []
        self.exit_codes: dict[str, int] = {}
        self.install_delay = 0.0
        self.command_gate: anyio.Event | None = None  # commands wait for it when set
        self.quota_full = False  # every write is refused as over the sandbox's disk quota
        self.resident = False  # the ports serve a resident builder
        self.builder_fails = False  # ... which is not there (the exec fails)
        self.reads: list[str] = []  # the files read out of the sandbox, in order

    def put_archive(self, path: str, data: bytes) -> bool:
        if self.quota_full:
            raise DiskQuotaExceeded("docker: put_archive failed: 'mkdir /workspace/src: quota'")
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for member in tar.getmembers():
                extracted = tar.extractfile(member) if member.isfile() else None
                if extracted is not None:
                    self.files[member.name] = extracted.read()
                    self.timeline.append(f"write {member.name}")
        return True

    async def resolve(self, sandbox_id: str) -> ArchiveTarget:
        return self

    async def install(self, specs: Sequence[str], sink: OutputSink | None) -> InstallResult:
        if any(" " in spec for spec in specs):
            raise InstallRefused(f"refused package spec {specs[0]!r}")
        await anyio.sleep(self.install_delay)
        self.timeline.append(f"install {' '.join(specs)}")
        return InstallResult(tuple(specs), ExecResult(("npm", "install"), 0, "", False, False))

    async def wait_install_idle(self) -> None:
        return None

    async def run(self, argv: Sequence[str], sink: OutputSink | None) -> ExecResult:
        if argv[0] == "sh":
            raise CommandRefused(f"program {argv[0]!r} is not allowed")
        self.timeline.append(f"run {' '.join(argv)} seeing {sorted(self.files)}")
        if self.command_gate is not None:
            await self.command_gate.wait()
            self.timeline.append(f"ran {' '.join(argv)}")
        if sink is not None:
            await sink("built")
        code = self.exit_codes.get(" ".join(argv), 0)
        output = "built\nfailed" if code else "built"
        return ExecResult(tuple(argv), code, output, False, False, oom_killed=code == 137)

    async def read(self, path: str) -> str | None:
        self.reads.append(path)
        content = self.files.get(path)
        return None if content is None else content.decode()

    async def run_builder(
        self, template: Template, warm: bool, sink: OutputSink | None
    ) -> ExecResult:
        if self.builder_fails:
            raise SandboxUnavailable("sandbox 'fake' is gone")
        self.timeline.append(f"{'warm' if warm else 'build'} {template.name}'s builder")
        if not warm and sink is not None:
            await sink("built warm")
        return ExecResult(tuple(template.builder_argv(warm=warm)), 0, "", False, False)

    def ports(self) -> SandboxPorts:
        builder = self.run_builder if self.resident else None
        return SandboxPorts(
            self.resolve, self.install, self.wait_install_idle, self.run, self.read, builder
        )


@pytest.fixture
def sandbox() -> FakeSandbox:
    return FakeSandbox()


Opened = tuple[SandboxSession, list[tuple[str, Record]]]


@contextlib.asynccontextmanager
async def _opened(
    client: redis.asyncio.Redis,
    sandbox: FakeSandbox,
    *,
    build_ahead: bool,
    template: str = "vite-react",
) -> AsyncIterator[Opened]:
    """A session on the fake sandbox and the records it reports."""
    records: list[tuple[str, Record]] = []

    async def keep(kind: str, record: Record) -> None:
        records.append((kind, record))

    buffer = WriteBuffer(client, f"se-{uuid.uuid4().hex[:10]}", ttl_seconds=600)
    async with SandboxSession(
        buffer,
        get_template(template),
        sandbox.ports(),
        debounce=60.0,
        max_wait=60.0,
        on_record=keep,
        build_ahead=build_ahead,
    ) as running:
        yield running, records


@pytest.fixture
async def session(client: redis.asyncio.Redis, sandbox: FakeSandbox) -> AsyncIterator[Opened]:
    async with _opened(client, sandbox, build_ahead=False) as opened:
        yield opened


async def test_a_command_waits_for_installs_and_flushed_files(
    session: tuple[SandboxSession, list[tuple[str, Record]]], sandbox: FakeSandbox
) -> None:
    running, _ = session
    sandbox.install_delay = 0.2  # the command arrives while the install still runs
    for event in [
        InstallContent(["zustand"], "vite-react"),
        FileStart("src/App.jsx"),
        FileContent("src/App.jsx", "export default 1;\n"),
        FileEnd("src/App.jsx"),
        Command("npm", ["run", "build"]),
    ]:
        await running.handle(event)
    log = await running.finish()
    *before, last = sandbox.timeline
    assert sorted(before) == ["install zustand", "write src/App.jsx"]
    assert last == "run npm run build seeing ['package.json', 'src/App.jsx']"
    assert log.installs == [{"packages": ["zustand"], "exit_code": 0}]
    assert log.commands == [{"argv": ["npm", "run", "build"], "exit_code": 0}]
    assert log.errors == []


async def test_the_stream_goes_on_while_commands_run_one_at_a_time_in_order(
    session: tuple[SandboxSession, list[tuple[str, Record]]], sandbox: FakeSandbox
) -> None:
    running, _ = session
    sandbox.command_gate = anyio.Event()
    for event in [
        FileStart("src/App.jsx"),
        FileContent("src/App.jsx", "export default 1;\n"),
        FileEnd("src/App.jsx"),
        Command("npm", ["run", "build"]),
        Command("npm", ["test"]),
        FileStart("src/B.jsx"),  # handled while the build runs: the stream does not wait
        FileEnd("src/B.jsx"),
    ]:
        await running.handle(event)
    await anyio.wait_all_tasks_blocked()
    assert [t for t in sandbox.timeline if t.startswith("ran")] == []
    assert running.log.commands == []
    sandbox.command_gate.set()
    await running.wait_commands()
    ran = [t for t in sandbox.timeline if t.startswith(("run ", "ran "))]
    assert ran[0].startswith("run npm run build seeing")
    assert "src/App.jsx" in ran[0]
    assert ran[1:] == ["ran npm run build", ran[2], "ran npm test"]
    assert ran[2].startswith("run npm test")
    assert [c["argv"] for c in running.log.commands] == [["npm", "run", "build"], ["npm", "test"]]


async def test_a_cancelled_run_stops_its_commands(
    session: tuple[SandboxSession, list[tuple[str, Record]]], sandbox: FakeSandbox
) -> None:
    running, _ = session
    sandbox.command_gate = anyio.Event()  # never set: the build would run forever
    await running.handle(Command("npm", ["run", "build"]))
    await running.handle(Command("npm", ["test"]))
    await anyio.wait_all_tasks_blocked()
    with anyio.fail_after(5):
        log = await running.abandon()
        await running.wait_commands()
    assert log.commands == []
    assert [t for t in sandbox.timeline if t.startswith("run ")] == [
        "run npm run build seeing ['package.json']"
    ]


@pytest.mark.parametrize(
    ("after", "still_current"),
    [
        pytest.param([], True, id="nothing-since"),
        pytest.param([FileStart("src/B.jsx"), FileEnd("src/B.jsx")], False, id="a-file-since"),
        pytest.param([InstallContent(["zod"], None)], False, id="an-install-since"),
        pytest.param([Command("ls", [])], False, id="another-command-since"),
    ],
)
async def test_the_log_knows_whether_a_build_passed_on_the_current_files(
    session: tuple[SandboxSession, list[tuple[str, Record]]],
    after: list[Event],
    still_current: bool,
) -> None:
    running, _ = session
    build = ["npm", "run", "build"]
    await running.handle(FileStart("src/App.jsx"))
    await running.handle(FileEnd("src/App.jsx"))
    assert not running.log.succeeded_on_current_files(build)
    await running.handle(Command("npm", ["run", "build"]))
    await running.wait_commands()
    assert running.log.succeeded_on_current_files(build)
    for event in after:
        await running.handle(event)
    await running.wait_commands()
    assert running.log.succeeded_on_current_files(build) is still_current


async def test_a_failed_build_is_never_taken_as_passed(
    session: tuple[SandboxSession, list[tuple[str, Record]]], sandbox: FakeSandbox
) -> None:
    running, _ = session
    sandbox.exit_codes["npm run build"] = 1
    await running.handle(Command("npm", ["run", "build"]))
    await running.wait_commands()
    assert not running.log.succeeded_on_current_files(["npm", "run", "build"])


async def test_refusals_and_failures_become_error_records(
    session: tuple[SandboxSession, list[tuple[str, Record]]], sandbox: FakeSandbox
) -> None:
    running, records = session
    sandbox.exit_codes["npm test"] = 1
    for event in [
        Error("unsafe_path", "absolute file path: '/etc/x'"),
        InstallContent(["rm -rf /"], None),
        Command("sh", ["-c", "id"]),
        Command("npm", ["test"]),
    ]:
        await running.handle(event)
    log = await running.finish()
    assert [e["code"] for e in log.errors] == [
        "unsafe_path",
        "install_refused",
        "command_refused",
        "command_failed",
    ]
    assert "'rm -rf /'" in log.errors[1]["message"]
    assert "failed" in log.errors[3]["message"]
    assert log.commands == [{"argv": ["npm", "test"], "exit_code": 1}]
    assert ("output", {"line": "built"}) in records


async def test_a_command_killed_for_memory_is_out_of_memory_not_a_timeout(
    session: tuple[SandboxSession, list[tuple[str, Record]]], sandbox: FakeSandbox
) -> None:
    running, _ = session
    sandbox.exit_codes["npm run build"] = 137
    await running.handle(Command("npm", ["run", "build"]))
    log = await running.finish()
    assert [e["code"] for e in log.errors] == ["out_of_memory"]
    assert "ran out of memory" in log.errors[0]["message"]
    assert "timed out" not in log.errors[0]["message"]


async def test_a_merged_package_json_installs_its_new_dependencies(
    session: tuple[SandboxSession, list[tuple[str, Record]]], sandbox: FakeSandbox
) -> None:
    running, _ = session
    proposed = json.dumps({"dependencies": {"react": "^17", "nanoid": "^5.0.0"}})
    for event in [FileStart("package.json"), FileContent("package.json", proposed)]:
        await running.handle(event)
    await running.handle(FileEnd("package.json"))
    log = await running.finish()
    assert [w["code"] for w in log.warnings] == ["config_merged"]
    assert log.installs == [{"packages": ["nanoid@^5.0.0"], "exit_code": 0}]
    assert json.loads(sandbox.files["package.json"])["dependencies"]["nanoid"] == "^5.0.0"
    assert log.files == ["package.json"]


async def test_a_parsed_stream_writes_its_files_without_fences(
    session: tuple[SandboxSession, list[tuple[str, Record]]], sandbox: FakeSandbox
) -> None:
    running, records = session
    text = (
        '<edward_sandbox project="p"><file path="src/a.js">```js\nexport const a = 1;\n```\n'
        '</file><file path="vite.config.js">export default {}</file></edward_sandbox>'
    )
    parser = StreamParser()
    for start in range(0, len(text), 7):
        for event in parser.feed(text[start : start + 7]):
            await running.handle(event)
    for event in parser.close():
        await running.handle(event)
    log = await running.finish()
    assert sandbox.files["src/a.js"] == b"export const a = 1;\n"
    assert "vite.config.js" not in sandbox.files
    assert log.files == ["src/a.js"]
    assert [w["code"] for w in log.warnings] == ["config_refused"]
    assert ("file", {"path": "src/a.js"}) in records


async def _handle_text(running: SandboxSession, text: str) -> None:
    parser = StreamParser()
    for start in range(0, len(text), 5):
        for event in parser.feed(text[start : start + 5]):
            await running.handle(event)
    for event in parser.close():
        await running.handle(event)


EDIT = (
    '<edward_sandbox project="p"><edward_edit path="src/App.jsx">\n'
    "<<<<<<< SEARCH\n  <h1>Counter</h1>\n=======\n  <h1>Clicker</h1>\n>>>>>>> REPLACE\n"
    "</edward_edit></edward_sandbox>"
)


async def test_an_edit_of_a_sandbox_file_is_flushed_as_the_whole_new_file(
    session: tuple[SandboxSession, list[tuple[str, Record]]], sandbox: FakeSandbox
) -> None:
    running, records = session
    sandbox.files["src/App.jsx"] = b"<main>\n  <h1>Counter</h1>\n</main>\n"
    await _handle_text(running, EDIT)
    log = await running.finish()
    assert sandbox.files["src/App.jsx"] == b"<main>\n  <h1>Clicker</h1>\n</main>\n"
    assert log.applied_edits == [("src/App.jsx", "<main>\n  <h1>Clicker</h1>\n</main>\n")]
    assert log.files == ["src/App.jsx"]
    assert log.errors == []
    assert ("edit", {"path": "src/App.jsx", "blocks": 1}) in records


async def test_an_edit_applies_to_what_the_run_wrote_before(
    session: tuple[SandboxSession, list[tuple[str, Record]]], sandbox: FakeSandbox
) -> None:
    running, _ = session
    sandbox.files["src/App.jsx"] = b"stale: the sandbox has not been flushed yet\n"
    for event in [FileStart("src/App.jsx"), FileContent("src/App.jsx", "  <h1>Counter</h1>\n")]:
        await running.handle(event)
    await running.handle(FileEnd("src/App.jsx"))
    await _handle_text(running, EDIT)
    await running.finish()
    assert sandbox.files["src/App.jsx"] == b"  <h1>Clicker</h1>\n"


@pytest.mark.parametrize(
    ("existing", "code"),
    [
        pytest.param(b"<h1>Counter</h1>\n<h1>Counter</h1>\n", "edit_ambiguous", id="ambiguous"),
        pytest.param(b"<h1>Other</h1>\n", "edit_no_match", id="no-match"),
        pytest.param(None, "edit_no_match", id="no-such-file"),
    ],
)
async def test_a_refused_edit_leaves_the_file_and_says_why(
    session: tuple[SandboxSession, list[tuple[str, Record]]],
    sandbox: FakeSandbox,
    existing: bytes | None,
    code: str,
) -> None:
    running, records = session
    if existing is not None:
        sandbox.files["src/App.jsx"] = existing
    await _handle_text(running, EDIT)
    log = await running.finish()
    assert sandbox.files.get("src/App.jsx") == existing
    assert [(f.path, f.code) for f in log.failed_edits] == [("src/App.jsx", code)]
    assert log.failed_edits[0].content == (existing.decode() if existing else None)
    assert [(e["code"], e["path"]) for e in log.errors] == [(code, "src/App.jsx")]
    assert log.files == []
    assert log.applied_edits == []
    assert not [kind for kind, _ in records if kind == "edit"]


async def test_an_edit_ignores_what_an_earlier_run_left_in_the_buffer(
    session: tuple[SandboxSession, list[tuple[str, Record]]], sandbox: FakeSandbox
) -> None:
    running, _ = session
    await running.buffer.replace("src/App.jsx", b"  <h1>Counter</h1>\n  <p>an older run's</p>\n")
    sandbox.files["src/App.jsx"] = b"  <h1>Counter</h1>\n"  # a restored version
    await _handle_text(running, EDIT)
    await running.finish()
    assert sandbox.files["src/App.jsx"] == b"  <h1>Clicker</h1>\n"


async def test_an_edit_of_a_template_config_file_is_refused_like_a_rewrite(
    session: tuple[SandboxSession, list[tuple[str, Record]]], sandbox: FakeSandbox
) -> None:
    running, _ = session
    sandbox.files["vite.config.js"] = b"export default {}\n"
    edit = EDIT.replace("src/App.jsx", "vite.config.js").replace(
        "  <h1>Counter</h1>\n=======\n  <h1>Clicker</h1>",
        "export default {}\n=======\nexport default 1;",
    )
    await _handle_text(running, edit)
    log = await running.finish()
    assert sandbox.files["vite.config.js"] == b"export default {}\n"
    assert log.applied_edits == []
    assert [w["code"] for w in log.warnings] == ["config_refused"]


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(".kiln/version", id="kilns-marker"),
        pytest.param("node_modules/react/index.js", id="installed-package"),
    ],
)
async def test_kilns_and_npms_folders_are_refused_as_edit_and_write_targets(
    session: tuple[SandboxSession, list[tuple[str, Record]]], sandbox: FakeSandbox, path: str
) -> None:
    running, records = session
    sandbox.files[path] = b"  <h1>Counter</h1>\n"
    whole = f'<edward_sandbox project="p"><file path="{path}">rewritten</file></edward_sandbox>'
    await _handle_text(running, EDIT.replace("src/App.jsx", path) + whole)
    log = await running.finish()
    assert sandbox.files[path] == b"  <h1>Counter</h1>\n"
    assert [e["code"] for e in log.errors] == ["protected_path", "protected_path"]
    assert all(repr(path) in e["message"] for e in log.errors)
    assert (log.files, log.applied_edits) == ([], [])
    assert not [kind for kind, _ in records if kind in ("edit", "file")]


async def test_abandon_stops_installs_but_not_the_task_that_abandons(
    session: tuple[SandboxSession, list[tuple[str, Record]]], sandbox: FakeSandbox
) -> None:
    running, _ = session
    sandbox.install_delay = 3600.0  # an install that would outlive the run
    for event in [
        InstallContent(["zustand"], "vite-react"),
        FileStart("src/App.jsx"),
        FileContent("src/App.jsx", "export default 1;\n"),
        FileEnd("src/App.jsx"),
    ]:
        await running.handle(event)
    with anyio.fail_after(10):
        log = await running.abandon()
        await anyio.sleep(0)  # a checkpoint: the caller goes on (it closes and releases next)
    assert sandbox.timeline == ["write src/App.jsx"]
    assert log.installs == []


async def test_abandon_keeps_ended_files_and_leaves_the_one_being_written_as_it_was(
    session: tuple[SandboxSession, list[tuple[str, Record]]], sandbox: FakeSandbox
) -> None:
    running, records = session
    sandbox.files["src/App.jsx"] = b"the template's App\n"
    for event in [
        FileStart("src/main.jsx"),
        FileContent("src/main.jsx", "import App from './App.jsx';\n"),
        FileEnd("src/main.jsx"),
        FileStart("src/App.jsx"),
        FileContent("src/App.jsx", "export default function App() { return (.items.map(("),
    ]:
        await running.handle(event)
    await running.scheduler.wait_flushed()  # the half file reached the disk: in staging
    log = await running.abandon()
    assert sandbox.files["src/main.jsx"] == b"import App from './App.jsx';\n"
    assert sandbox.files["src/App.jsx"] == b"the template's App\n"
    assert log.rolled_back == ["src/App.jsx"]
    assert ("rollback", {"kept": ["src/main.jsx"], "rolled_back": ["src/App.jsx"]}) in records


# Building ahead: the template's build starts once an answer's files are complete.

ANSWER_FILES: list[Event] = [
    FileStart("src/App.jsx"),
    FileContent("src/App.jsx", "export default 1;\n"),
    FileEnd("src/App.jsx"),
    SandboxEnd(),
]
BUILD = Command("npm", ["run", "build"])


@pytest.fixture
async def building(client: redis.asyncio.Redis, sandbox: FakeSandbox) -> AsyncIterator[Opened]:
    async with _opened(client, sandbox, build_ahead=True) as opened:
        yield opened


def _runs(sandbox: FakeSandbox) -> list[str]:
    return [step for step in sandbox.timeline if step.startswith("run ")]


async def _build_started(sandbox: FakeSandbox) -> None:
    with anyio.fail_after(5):
        while not _runs(sandbox):
            await anyio.sleep(0.01)


async def test_the_build_the_answer_asks_for_is_the_one_started_ahead(
    building: tuple[SandboxSession, list[tuple[str, Record]]], sandbox: FakeSandbox
) -> None:
    running, records = building
    sandbox.command_gate = anyio.Event()
    for event in ANSWER_FILES:
        await running.handle(event)
    await _build_started(sandbox)  # before the answer asks for it
    for event in [Error("x", "text between", "recoverable"), BUILD]:
        await running.handle(event)
    sandbox.command_gate.set()
    log = await running.finish()
    assert _runs(sandbox) == ["run npm run build seeing ['package.json', 'src/App.jsx']"]
    shown = [(kind, record) for kind, record in records if kind.startswith(("command", "output"))]
    assert shown == [
        ("command_start", {"argv": ["npm", "run", "build"]}),
        ("output", {"line": "built"}),
        ("command", {"argv": ["npm", "run", "build"], "exit_code": 0}),
    ]
    assert log.commands == [{"argv": ["npm", "run", "build"], "exit_code": 0}]
    assert log.succeeded_on_current_files(["npm", "run", "build"])


async def test_a_build_ahead_is_silent_and_a_turn_does_not_wait_for_it(
    building: tuple[SandboxSession, list[tuple[str, Record]]], sandbox: FakeSandbox
) -> None:
    running, records = building
    sandbox.command_gate = anyio.Event()
    for event in ANSWER_FILES:
        await running.handle(event)
    await _build_started(sandbox)
    with anyio.fail_after(5):
        await running.wait_commands()  # the build ahead is still held at the gate
    assert not [kind for kind, _ in records if kind.startswith(("command", "output"))]
    sandbox.command_gate.set()
    await running.handle(BUILD)  # post-generation asks: it takes the build ahead's result
    await running.wait_commands()
    assert len(_runs(sandbox)) == 1
    assert running.log.succeeded_on_current_files(["npm", "run", "build"])


async def test_a_file_after_the_answer_cancels_the_build_ahead_and_the_build_runs_again(
    building: tuple[SandboxSession, list[tuple[str, Record]]], sandbox: FakeSandbox
) -> None:
    running, _ = building
    sandbox.command_gate = anyio.Event()
    for event in ANSWER_FILES:
        await running.handle(event)
    await _build_started(sandbox)
    for event in [FileStart("src/B.jsx"), FileEnd("src/B.jsx"), BUILD]:
        await running.handle(event)
    sandbox.command_gate.set()
    await running.finish()
    assert [s for s in sandbox.timeline if s.startswith(("run", "ran"))] == [
        "run npm run build seeing ['package.json', 'src/App.jsx']",
        "run npm run build seeing ['package.json', 'src/App.jsx', 'src/B.jsx']",
        "ran npm run build",
    ]
    assert running.log.commands == [{"argv": ["npm", "run", "build"], "exit_code": 0}]


async def test_a_failed_build_ahead_is_not_handed_over(
    building: tuple[SandboxSession, list[tuple[str, Record]]], sandbox: FakeSandbox
) -> None:
    running, _ = building
    sandbox.exit_codes["npm run build"] = 1
    for event in [*ANSWER_FILES, BUILD]:
        await running.handle(event)
    log = await running.finish()
    assert len(_runs(sandbox)) == 2  # the answer's own build ran and reported its failure
    assert log.commands == [{"argv": ["npm", "run", "build"], "exit_code": 1}]
    assert [e["code"] for e in log.errors] == ["command_failed"]


async def test_another_command_is_not_taken_for_the_build(
    building: tuple[SandboxSession, list[tuple[str, Record]]], sandbox: FakeSandbox
) -> None:
    running, _ = building
    for event in [*ANSWER_FILES, Command("npm", ["test"])]:
        await running.handle(event)
    await running.finish()
    assert [s.split(" seeing")[0] for s in _runs(sandbox)] == ["run npm run build", "run npm test"]


async def test_without_build_ahead_the_end_of_the_files_starts_nothing(
    session: tuple[SandboxSession, list[tuple[str, Record]]], sandbox: FakeSandbox
) -> None:
    running, _ = session
    for event in ANSWER_FILES:
        await running.handle(event)
    await running.finish()
    assert _runs(sandbox) == []


async def test_a_file_the_disk_quota_refuses_is_reported_with_the_quotas_code_and_advice(
    session: tuple[SandboxSession, list[tuple[str, Record]]], sandbox: FakeSandbox
) -> None:
    running, _ = session
    sandbox.quota_full = True
    for event in [FileStart("src/big.js"), FileContent("src/big.js", "x"), FileEnd("src/big.js")]:
        await running.handle(event)
    log = await running.finish()
    assert [e["code"] for e in log.errors] == ["disk_quota_exceeded"]
    assert log.errors[0]["message"].startswith("'src/big.js' could not be written: the sandbox's")
    assert "src/big.js" not in log.files


async def test_the_files_settle_while_the_answers_build_still_runs(
    session: tuple[SandboxSession, list[tuple[str, Record]]], sandbox: FakeSandbox
) -> None:
    running, _ = session
    sandbox.command_gate = anyio.Event()
    for event in [*ANSWER_FILES, BUILD]:
        await running.handle(event)
    await _build_started(sandbox)
    try:
        with anyio.fail_after(5):
            log = await running.settle()  # the build is still held at the gate
        assert sandbox.files["src/App.jsx"] == b"export default 1;\n"
        assert "ran npm run build" not in sandbox.timeline
    finally:
        sandbox.command_gate.set()  # else the session's close waits for the build forever
    await running.finish()
    assert log.source_state == running.log.source_state  # the build changed no source file


@pytest.mark.parametrize(
    ("wait", "kept"),
    [
        pytest.param("quiet", True, id="quiet-mid-stream-leaves-it-open"),
        pytest.param("settle", False, id="settle-at-the-end-drops-it"),
    ],
)
async def test_a_config_file_being_written_survives_a_quiet_but_not_a_settle(
    session: tuple[SandboxSession, list[tuple[str, Record]]],
    sandbox: FakeSandbox,
    wait: str,
    kept: bool,
) -> None:
    """``quiet`` is for the middle of a stream (the preview's warm-up at ``sandbox_end``, more
    files may follow); ``settle`` for its end, where a config file never ended is cut."""
    running, _ = session
    manifest = '{"dependencies": {"react": "^18", "zustand": "^4"}}'
    for event in [*ANSWER_FILES, FileStart("package.json"), FileContent("package.json", manifest)]:
        await running.handle(event)
    with anyio.fail_after(5):
        await getattr(running, wait)()
    await running.handle(FileEnd("package.json"))
    await running.finish()
    assert (b"zustand" in sandbox.files["package.json"]) is kept  # merged once it ended
    assert sandbox.files["src/App.jsx"] == b"export default 1;\n"


async def test_the_files_settle_only_after_another_command_ran(
    session: tuple[SandboxSession, list[tuple[str, Record]]], sandbox: FakeSandbox
) -> None:
    running, _ = session
    sandbox.command_gate = anyio.Event()
    for event in [*ANSWER_FILES, BUILD, Command("npx", ["prettier", "--write", "src"])]:
        await running.handle(event)
    settled: list[str] = []

    async def settle() -> None:
        await running.settle()
        settled.append("settled")

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(settle)
        try:
            await anyio.wait_all_tasks_blocked()
            assert settled == []  # the build, then the command that may rewrite sources, wait
        finally:
            sandbox.command_gate.set()
    assert settled == ["settled"]
    assert sandbox.timeline[-1] == "ran npx prettier --write src"


async def test_the_source_state_counts_what_may_change_sources_but_not_the_build(
    session: tuple[SandboxSession, list[tuple[str, Record]]], sandbox: FakeSandbox
) -> None:
    running, _ = session
    for event in ANSWER_FILES:
        await running.handle(event)
    before = running.log.source_state
    await running.handle(BUILD)
    await running.finish()
    assert running.log.source_state == before
    await running.handle(Command("npm", ["test"]))
    await running.finish()
    assert running.log.source_state > before


async def test_the_build_ahead_runs_the_templates_build_without_npm_and_hands_it_over_as_npms(
    building: tuple[SandboxSession, list[tuple[str, Record]]], sandbox: FakeSandbox
) -> None:
    running, records = building
    sandbox.files["package.json"] = json.dumps(
        {"name": "kiln-app", "version": "0.0.0", "scripts": {"build": "vite build"}}
    ).encode()
    for event in [*ANSWER_FILES, BUILD]:
        await running.handle(event)
    log = await running.finish()
    assert [step.split(" seeing")[0] for step in _runs(sandbox)] == [
        "run node node_modules/vite/bin/vite.js build"
    ]
    shown = [record.get("line") for kind, record in records if kind == "output"]
    assert shown == ["", "> kiln-app@0.0.0 build", "> vite build", "", "built"]
    assert log.commands == [{"argv": ["npm", "run", "build"], "exit_code": 0}]
    assert log.succeeded_on_current_files(["npm", "run", "build"])


TEMPLATE_PACKAGE_JSON = json.dumps(
    {"name": "kiln-app", "version": "0.0.0", "scripts": {"build": "vite build"}}
).encode()


def _builder_steps(sandbox: FakeSandbox) -> list[str]:
    return [step for step in sandbox.timeline if step.endswith("builder")]


async def test_the_build_ahead_asks_the_resident_builder_and_hands_it_over_as_npms(
    client: redis.asyncio.Redis, sandbox: FakeSandbox
) -> None:
    sandbox.resident = True
    sandbox.files["package.json"] = TEMPLATE_PACKAGE_JSON
    async with _opened(client, sandbox, build_ahead=True) as (running, records):
        for event in [*ANSWER_FILES, BUILD]:
            await running.handle(event)
        log = await running.finish()
    assert _runs(sandbox) == []  # no new process builds
    assert _builder_steps(sandbox) == ["warm vite-react's builder", "build vite-react's builder"]
    shown = [record.get("line") for kind, record in records if kind == "output"]
    assert shown == ["", "> kiln-app@0.0.0 build", "> vite build", "", "built warm"]
    assert log.commands == [{"argv": ["npm", "run", "build"], "exit_code": 0}]


async def test_a_changed_build_script_is_built_by_npm_not_by_the_resident_builder(
    client: redis.asyncio.Redis, sandbox: FakeSandbox
) -> None:
    sandbox.resident = True
    sandbox.files["package.json"] = b'{"scripts": {"build": "vite build && node check.js"}}'
    async with _opened(client, sandbox, build_ahead=True) as (running, _):
        for event in [*ANSWER_FILES, BUILD]:
            await running.handle(event)
        await running.finish()
    assert [step.split(" seeing")[0] for step in _runs(sandbox)] == ["run npm run build"]
    assert _builder_steps(sandbox) == ["warm vite-react's builder"]


async def test_the_builder_warms_up_once_code_comes_and_again_after_each_install(
    client: redis.asyncio.Redis, sandbox: FakeSandbox
) -> None:
    sandbox.resident = True
    sandbox.install_delay = 0.2
    async with _opened(client, sandbox, build_ahead=True) as (running, _):
        await running.handle(InstallContent(["zustand"], "vite-react"))
        await running.handle(FileStart("src/a.js"))  # the install still runs: no warm-up yet
        assert _builder_steps(sandbox) == []
        await running.finish()
        with anyio.fail_after(5):
            while not _builder_steps(sandbox):
                await anyio.sleep(0.01)
        for event in [FileEnd("src/a.js"), FileStart("src/b.js"), FileEnd("src/b.js")]:
            await running.handle(event)  # nothing installed since: no second warm-up
    assert sandbox.timeline[0] == "install zustand"
    assert _builder_steps(sandbox) == ["warm vite-react's builder"]


@pytest.mark.parametrize(
    ("template", "build_ahead"),
    [
        pytest.param("vanilla", True, id="a-template-without-a-builder"),
        pytest.param("vite-react", False, id="no-build-ahead"),
    ],
)
async def test_no_warm_up_without_a_builder_or_a_build_ahead(
    client: redis.asyncio.Redis, sandbox: FakeSandbox, template: str, build_ahead: bool
) -> None:
    sandbox.resident = True
    async with _opened(client, sandbox, build_ahead=build_ahead, template=template) as opened:
        for event in ANSWER_FILES:
            await opened[0].handle(event)
    assert _builder_steps(sandbox) == []


async def test_a_resident_builder_that_fails_is_no_error_and_the_build_still_runs(
    client: redis.asyncio.Redis, sandbox: FakeSandbox
) -> None:
    sandbox.resident = True
    sandbox.builder_fails = True
    sandbox.files["package.json"] = TEMPLATE_PACKAGE_JSON
    async with _opened(client, sandbox, build_ahead=True) as (running, records):
        for event in [*ANSWER_FILES, BUILD]:
            await running.handle(event)
        log = await running.finish()
    assert [kind for kind, _ in records if kind == "error"] == []
    assert [step.split(" seeing")[0] for step in _runs(sandbox)] == ["run npm run build"]
    assert log.succeeded_on_current_files(["npm", "run", "build"])


@pytest.mark.parametrize(
    ("existing", "outcome"),
    [
        pytest.param(
            b"  <h1>Counter</h1>\n",
            AppliedEdit("src/App.jsx", "  <h1>Clicker</h1>\n"),
            id="applied",
        ),
        pytest.param(
            b"<h1>Other</h1>\n",
            FailedEdit(
                "src/App.jsx",
                "edit_no_match",
                "",  # compared without its words below
                "<h1>Other</h1>\n",
            ),
            id="refused",
        ),
        pytest.param(b"", None, id="no-blocks"),
    ],
)
async def test_end_edit_hands_back_what_came_of_the_edit(
    session: tuple[SandboxSession, list[tuple[str, Record]]],
    sandbox: FakeSandbox,
    existing: bytes,
    outcome: AppliedEdit | FailedEdit | None,
) -> None:
    running, _ = session
    sandbox.files["src/App.jsx"] = existing
    await running.handle(EditStart("src/App.jsx"))
    if outcome is not None:
        await running.handle(
            EditBlock("src/App.jsx", "  <h1>Counter</h1>\n", "  <h1>Clicker</h1>\n")
        )
    got = await running.end_edit(EditEnd("src/App.jsx"))
    await running.finish()
    if isinstance(got, FailedEdit):
        got = FailedEdit(got.path, got.code, "", got.content)
    assert got == outcome
    assert running.log.workspace_state == 1  # counted as handle() counts an edit_end


class ReplyLostBuffer(WriteBuffer):
    """Redis closes the file, but the reply never comes back (a cancel cuts the wait)."""

    closed: anyio.Event  # set once Redis took the end

    async def close_file(self, path: str, content: bytes | None = None) -> None:
        await super().close_file(path, content)
        self.closed.set()
        await anyio.sleep_forever()


async def test_abandon_keeps_a_file_whose_end_redis_took_though_its_reply_was_cut(
    client: redis.asyncio.Redis, sandbox: FakeSandbox
) -> None:
    records: list[tuple[str, Record]] = []

    async def keep(kind: str, record: Record) -> None:
        records.append((kind, record))

    buffer = ReplyLostBuffer(client, f"se-{uuid.uuid4().hex[:10]}", ttl_seconds=600)
    buffer.closed = anyio.Event()
    ports = sandbox.ports()
    async with SandboxSession(
        buffer, get_template("vite-react"), ports, debounce=60.0, max_wait=60.0, on_record=keep
    ) as running:
        await running.handle(FileStart("src/main.jsx"))
        await running.handle(FileContent("src/main.jsx", "import './index.css';\n"))
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(running.handle, FileEnd("src/main.jsx"))
            await buffer.closed.wait()
            tasks.cancel_scope.cancel()  # the run's cancel, while the end waits for its reply
        log = await running.abandon()
    assert log.rolled_back == []
    assert log.files == ["src/main.jsx"]
    assert sandbox.files["src/main.jsx"] == b"import './index.css';\n"
    assert ("rollback", {"kept": ["src/main.jsx"], "rolled_back": []}) in records


async def test_the_files_a_session_only_wrote_are_known_as_the_sandbox_holds_them(
    building: tuple[SandboxSession, list[tuple[str, Record]]], sandbox: FakeSandbox
) -> None:
    running, _ = building
    sandbox.files["src/main.jsx"] = b"import App from './App';\n"
    edit = [
        EditStart("src/main.jsx"),
        EditBlock("src/main.jsx", "./App", "./App.jsx"),
        EditEnd("src/main.jsx"),
    ]
    for event in [*ANSWER_FILES[:-1], *edit, SandboxEnd(), BUILD]:
        await running.handle(event)
    await running.settle()
    written = await running.written_files()
    assert written == {path: sandbox.files[path] for path in ("src/App.jsx", "src/main.jsx")}
    await running.finish()


@pytest.mark.parametrize(
    "events",
    [
        pytest.param([InstallContent(("zustand",), None)], id="an-install"),
        pytest.param([Command("npx", ["prettier", "--write", "src"])], id="another-command"),
        pytest.param([FileStart("src/open.js"), FileContent("src/open.js", "x")], id="open-file"),
    ],
)
async def test_the_files_are_not_known_when_something_else_may_have_changed_them(
    building: tuple[SandboxSession, list[tuple[str, Record]]], events: list[Event]
) -> None:
    running, _ = building
    for event in [*ANSWER_FILES, *events]:
        await running.handle(event)
    await running.settle()
    assert await running.written_files() is None
    await running.finish()


async def test_the_files_are_not_known_after_a_failed_write(
    session: tuple[SandboxSession, list[tuple[str, Record]]], sandbox: FakeSandbox
) -> None:
    running, _ = session
    for event in ANSWER_FILES:
        await running.handle(event)
    await running.settle()
    assert await running.written_files() == {"src/App.jsx": b"export default 1;\n"}
    sandbox.quota_full = True
    for event in [FileStart("src/big.js"), FileContent("src/big.js", "x"), FileEnd("src/big.js")]:
        await running.handle(event)
    await running.settle()
    assert await running.written_files() is None


async def test_the_files_the_session_starts_from_are_read_without_an_exec_while_only_it_wrote(
    client: redis.asyncio.Redis, sandbox: FakeSandbox
) -> None:
    sandbox.resident = True
    sandbox.files["package.json"] = TEMPLATE_PACKAGE_JSON
    sandbox.files["src/main.jsx"] = b"import App from './App';\n"
    edit = [
        EditStart("src/main.jsx"),
        EditBlock("src/main.jsx", "./App", "./App.jsx"),
        EditEnd("src/main.jsx"),
    ]
    async with _opened(client, sandbox, build_ahead=True) as (running, _):
        running.start_from({path: sandbox.files[path] for path in ("package.json", "src/main.jsx")})
        for event in [*edit, SandboxEnd(), BUILD]:
            await running.handle(event)
        await running.finish()
        assert sandbox.files["src/main.jsx"] == b"import App from './App.jsx';\n"
        assert "build vite-react's builder" in sandbox.timeline  # package.json: the template's
        assert sandbox.reads == []  # neither the edit's base nor the build's manifest: no exec
        await running.handle(InstallContent(("zustand",), None))  # may rewrite any file
        assert await running.read_file("package.json") is not None
        assert sandbox.reads == ["package.json"]
