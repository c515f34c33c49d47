"""Post-generation: deterministic fixes applied to the sandbox, validation, then the build.

Fixes are written through the same event path as the model's files (``file_start`` /
``file_content`` / ``file_end``), so they land in the sandbox, not only in memory, and the
write buffer's guarantees hold for them too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.postgen.fixes import Fix, apply_fixes
from app.postgen.template_workspace import read_template_workspace
from app.postgen.validation import Finding, validate_project
from parser.events import Command, EditEnd, Event, FileContent, FileEnd, FileStart, InstallContent
from sandbox import BUILD_COMMAND, AppliedEdit, FailedEdit, RenderReport, SessionLog, Template

REUSED_BUILD = "the build already passed on these files; not run again"


class EventTarget(Protocol):
    """What the loop and the post-generation steps hand sandbox events to (a
    :class:`sandbox.SandboxSession` or a stand-in); declared here, below the agent, which
    uses it too."""

    log: SessionLog

    async def handle(self, event: Event) -> None:
        """Act on one event; failures are reported through records, never raised."""
        ...

    async def end_edit(self, event: EditEnd) -> AppliedEdit | FailedEdit | None:
        """Act on an ``edit_end``: what came of the edit (``None``: nothing to apply)."""
        ...

    async def wait_commands(self) -> None:
        """Wait until every command handed over so far has run (they run in the background,
        in order, while the stream goes on)."""
        ...

    async def finish(self) -> SessionLog:
        """Wait for pending commands, installs and flushes."""
        ...

    async def read_file(self, path: str) -> str | None:
        """``path`` as the run left it so far (``None`` if there is no such file)."""
        ...


@dataclass(frozen=True, slots=True)
class BuildReport:
    """How ``npm run build`` went."""

    ok: bool
    exit_code: int | None
    output: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; the output's tail only."""
        return {"ok": self.ok, "exit_code": self.exit_code, "output": self.output[-4000:]}


@dataclass
class PostGenReport:
    """Fixes applied, findings left, and the build."""

    fixes: list[Fix] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    build: BuildReport | None = None
    # The render check (issue 23), run once the rest is ok; ``None`` when it did not run.
    render: RenderReport | None = None

    @property
    def built(self) -> bool:
        """No findings left and the build passed: the render check may run."""
        return not self.findings and self.build is not None and self.build.ok

    @property
    def ok(self) -> bool:
        """Built, and the render check (when it ran) found nothing."""
        return self.built and (self.render is None or self.render.ok)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "fixes": [{"code": f.code, "path": f.path, "message": f.message} for f in self.fixes],
            "findings": [
                {"code": f.code, "path": f.path, "line": f.line, "message": f.message}
                for f in self.findings
            ],
            "build": self.build.to_dict() if self.build else None,
            "render": self.render.to_dict() if self.render else None,
        }


async def write_files(target: EventTarget, files: Mapping[str, str]) -> None:
    """Write whole files through the event path (each one flushed at its ``file_end``)."""
    for path, content in files.items():
        await target.handle(FileStart(path))
        if content:
            await target.handle(FileContent(path, content))
        await target.handle(FileEnd(path))


async def post_generate(
    target: EventTarget,
    template: Template,
    run_files: Mapping[str, str],
    packages: Iterable[str],
    take_output: Callable[[], str],
) -> PostGenReport:
    """Fix, validate and build the project the run wrote into ``target``'s sandbox."""
    template_files = read_template_workspace(template.name)
    declared = list(packages)
    fixed = apply_fixes(
        {**template_files, **run_files}, template, template_files, declared=declared
    )
    await write_files(target, fixed.changed)
    if fixed.packages_to_install:
        await target.handle(InstallContent(fixed.packages_to_install, None))
    declared += fixed.packages_to_install
    findings = validate_project(fixed.files, template, declared=declared)
    build = await run_build(target, take_output)
    return PostGenReport(list(fixed.fixes), findings, build)


async def run_build(target: EventTarget, take_output: Callable[[], str]) -> BuildReport:
    """Run the template's build and report it (a refused or missing build counts as failed).

    A build that already passed on exactly the files there are now (the model's own
    ``npm run build`` at the end of its answer, with no fix applied since) is not run again.
    """
    if target.log.succeeded_on_current_files(BUILD_COMMAND):
        return BuildReport(True, 0, REUSED_BUILD)
    take_output()  # drop output of earlier commands
    ran_before = len(target.log.commands)
    await target.handle(Command(BUILD_COMMAND[0], BUILD_COMMAND[1:]))
    await target.wait_commands()
    output = take_output()
    if len(target.log.commands) == ran_before:
        errors = target.log.errors[-1:] if target.log.errors else []
        message = errors[0]["message"] if errors else "the build did not run"
        return BuildReport(False, None, message)
    exit_code = target.log.commands[-1]["exit_code"]
    return BuildReport(exit_code == 0, exit_code, output)
