"""The render check (issue 23): the sandbox's app opened in a headless browser, with no person.

One short-lived container of ``kiln/render-browser`` (``images/render-browser``: Debian's chromium
and ``runner.mjs``, which drives it over CDP on a pipe) per check. It runs the app's own code, so
it is confined like a sandbox (:func:`render_run_kwargs`): non-root, every capability dropped,
``no-new-privileges``, read-only root with a size-capped tmpfs as its only writable place, pids,
memory and CPU limits. Its network is the sandbox container's own namespace
(``network_mode=container:<id>``): ``localhost`` is the sandbox, so the browser reaches the dev
server and exactly what the sandbox's code reaches (its internal network: nothing but kiln's npm
proxy), never the host, kiln's ports, Redis, another sandbox or the internet. Chromium is also
told to go nowhere but loopback (runner.mjs).

The runner prints one JSON line: raw reports (the shared preview-error field names), whether the
page stayed blank, a PNG screenshot. Reports are normalised by the one normalisation
(:func:`normalize_report`) and merged; the check's own failures (image missing, a deadline
passed, the browser died) end in :class:`RenderReport.skipped` with a stable code and words,
never in an exception: a run never fails because its check could not run.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio.to_thread
import docker
import requests
from docker.models.containers import Container

from sandbox.containers.labels import RENDER_ROLE, ROLE_LABEL, shared_labels
from sandbox.docker_boundary import call
from sandbox.env_settings import EnvReader
from sandbox.errors import ImageMissing, SandboxError, SandboxNotFound
from sandbox.images.builder import RENDER_IMAGE
from sandbox.preview.error_reports import PreviewError, merge, normalize_report

RENDER_ROLE_LABEL = ROLE_LABEL
# What makes a run's app "not ok": console warnings and logs are shown, never findings.
FINDING_KINDS = frozenset(
    {
        "uncaught",
        "unhandled_rejection",
        "console_error",
        "vite_error",
        "module_load",
        "network",
        "blank_page",
    }
)
BLANK_MESSAGE = "the page rendered nothing: its root element stayed empty"
# Stable codes of a check that could not run (app/errors.py's vocabulary words them).
RENDER_SKIP_DISABLED = SKIP_DISABLED = "render_check_disabled"
RENDER_SKIP_IMAGE = SKIP_IMAGE = "render_check_image_missing"
SKIP_TIMEOUT = "render_check_timeout"
RENDER_SKIP_FAILED = SKIP_FAILED = "render_check_failed"
MAX_OUTPUT_BYTES = 8 * 1024 * 1024  # a runner's JSON line with its screenshot
# A browser started ahead waits for its check at this path (its tmpfs), this long at most.
GO_FILE = "/tmp/kiln-render-go"
WAIT_FOR_GO_MS = 30 * 60 * 1000
# The preview's error reporter (helper "reporter", issue 23): when present, the browser installs
# it before the app's code and it reports through the ``__kilnReport`` binding.
REPORTER_SCRIPT = Path(__file__).with_name("reporter.js")


def reporter_script() -> str | None:
    """The preview reporter's source, or ``None`` while there is none (the check's own CDP
    collection works without it)."""
    try:
        return REPORTER_SCRIPT.read_text(encoding="utf-8")
    except OSError:
        return None


@dataclass(frozen=True, slots=True)
class RenderCheckSettings:
    """``KILN_RENDER_CHECK*``: on/off, the check's one deadline, the page's idle, the limits."""

    enabled: bool = True
    timeout_seconds: float = 30.0  # measured 16.6 s median for the demo app at load 26 (bench)
    idle_ms: int = 500
    mem_limit: str = "768m"
    pids_limit: int = 256
    nano_cpus: int = 1_000_000_000
    tmpfs_size: str = "256m"

    @classmethod
    def from_env(cls, reader: EnvReader | None = None) -> RenderCheckSettings:
        """Read the settings (README's settings table) through the one reader."""
        env = reader or EnvReader()
        return cls(
            enabled=env.boolean("KILN_RENDER_CHECK", True),
            timeout_seconds=env.number("KILN_RENDER_CHECK_TIMEOUT", 30.0, low=3.0, high=300.0),
            idle_ms=env.integer("KILN_RENDER_CHECK_IDLE_MS", 500, low=50, high=10_000),
            mem_limit=env.size("KILN_RENDER_CHECK_MEMORY", "768m", low="128m"),
        )


@dataclass(slots=True)
class RenderReport:
    """What the render check found (the ``render`` part of the ``postgen`` run event)."""

    ok: bool
    skipped: str | None = None  # a stable code when the check could not run
    skipped_message: str = ""
    errors: list[PreviewError] = field(default_factory=list)
    blank: bool = False
    seconds: float = 0.0
    screenshot_png: bytes | None = None
    screenshot: str | None = None  # a URL path the owner can GET, once stored

    @classmethod
    def skip(cls, code: str, message: str, seconds: float = 0.0) -> RenderReport:
        """A check that could not run: counts as ok (a run never fails for it)."""
        return cls(ok=True, skipped=code, skipped_message=message, seconds=seconds)

    @property
    def findings(self) -> list[PreviewError]:
        """The errors that make the app not ok."""
        return [error for error in self.errors if error.kind in FINDING_KINDS]

    def to_dict(self) -> dict[str, Any]:
        """The shared contract's form (``postgen.render``)."""
        return {
            "ok": self.ok,
            "skipped": self.skipped,
            "message": self.skipped_message or None,
            "errors": [error.to_dict() for error in self.findings],
            "blank": self.blank,
            "seconds": round(self.seconds, 2),
            "screenshot": self.screenshot,
        }


def runner_config(
    url: str, settings: RenderCheckSettings, reporter: str | None, *, go_file: str | None = None
) -> str:
    """The runner's ``KILN_RENDER_CONFIG``: the page, its deadline and idle, the reporter; with
    ``go_file``, the browser waits on an empty page until that file exists."""
    # The runner's own deadline leaves room for the container's start and its answer.
    deadline_ms = int(max(settings.timeout_seconds - 2.0, 1.0) * 1000)
    config = {"url": url, "deadline_ms": deadline_ms, "idle_ms": settings.idle_ms}
    waiting = {"go_file": go_file, "wait_ms": WAIT_FOR_GO_MS} if go_file else {}
    return json.dumps({**config, **waiting, "reporter": reporter, "screenshot": True})


def render_run_kwargs(
    settings: RenderCheckSettings,
    sandbox_container: str,
    config: str,
    *,
    instance: str,
) -> dict[str, Any]:
    """Keyword arguments for ``client.containers.run``: the hardened browser container in the
    network namespace of ``sandbox_container`` (see the module docstring)."""
    return {
        "image": RENDER_IMAGE,
        "detach": True,
        "network_mode": f"container:{sandbox_container}",
        "user": "1000:1000",
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "init": True,
        "read_only": True,
        "tmpfs": {"/tmp": f"rw,nosuid,nodev,size={settings.tmpfs_size}"},
        "pids_limit": settings.pids_limit,
        "mem_limit": settings.mem_limit,
        "memswap_limit": settings.mem_limit,
        "nano_cpus": settings.nano_cpus,
        "environment": {"KILN_RENDER_CONFIG": config},
        "labels": {**shared_labels(instance), RENDER_ROLE_LABEL: RENDER_ROLE},
    }


async def run_render_check(
    client: docker.DockerClient,
    settings: RenderCheckSettings,
    *,
    sandbox_container: str,
    dev_port: int,
    instance: str,
    reporter: str | None = None,
) -> RenderReport:
    """Open the sandbox's dev server (``localhost:dev_port`` in its namespace) in the render
    browser with ``reporter`` installed (default: :func:`reporter_script`); never raises for the
    check's own failures (see the module docstring)."""
    started = time.monotonic()
    if not settings.enabled:
        return RenderReport.skip(SKIP_DISABLED, "the render check is off (KILN_RENDER_CHECK=0)")
    url = f"http://localhost:{dev_port}/"
    script = reporter if reporter is not None else await anyio.to_thread.run_sync(reporter_script)
    config = runner_config(url, settings, script)
    kwargs = render_run_kwargs(settings, sandbox_container, config, instance=instance)
    return await _check(client, settings, kwargs, url, started)


class RenderBrowser:
    """A render browser started ahead of its check, in ``sandbox_container``'s namespace.

    Chromium's start is most of a check's cost (1.6-2.7 s of 3.7 s measured, bench/
    render_check.py), so a run starts the browser while its answer still streams; the browser
    waits on an empty page, and :meth:`check` tells it to open the app (a file in its tmpfs, the
    one thing a confined container can be told by) and reads the answer. One check per browser.
    """

    def __init__(
        self,
        client: docker.DockerClient,
        settings: RenderCheckSettings,
        container: Container,
        *,
        sandbox_container: str,
        url: str,
    ) -> None:
        self._client, self._settings, self._container = client, settings, container
        self.sandbox_container, self._url = sandbox_container, url

    @classmethod
    async def start(
        cls,
        client: docker.DockerClient,
        settings: RenderCheckSettings,
        *,
        sandbox_container: str,
        dev_port: int,
        instance: str,
    ) -> RenderBrowser:
        """Start the browser; :class:`ImageMissing` or :class:`SandboxError` when it cannot."""
        url = f"http://localhost:{dev_port}/"
        script = await anyio.to_thread.run_sync(reporter_script)
        config = runner_config(url, settings, script, go_file=GO_FILE)
        kwargs = render_run_kwargs(settings, sandbox_container, config, instance=instance)
        container = await call(_start, client, kwargs)
        return cls(client, settings, container, sandbox_container=sandbox_container, url=url)

    async def check(self) -> RenderReport:
        """Open the app now and report what the browser found (never raises, as
        :func:`run_render_check`); the browser is gone afterwards."""
        started = time.monotonic()
        try:
            # A browser that already ended (it failed to start) cannot be told: its answer
            # says why.
            with contextlib.suppress(SandboxError):
                await call(self._container.exec_run, ["touch", GO_FILE], user="1000:1000")
        except BaseException:  # cancelled while telling it: nobody else will remove it
            await self.discard()
            raise
        return await _report(self._settings, self._url, started, self._container)

    async def discard(self) -> None:
        """Remove the browser (unused, or its sandbox was replaced)."""
        await _removed(self._container)


async def probe_render_browser(
    client: docker.DockerClient, settings: RenderCheckSettings, *, instance: str
) -> RenderReport:
    """``kiln doctor``: the render browser started under the check's confinement, with no
    network at all, on an empty page; a skipped report says why it cannot run."""
    config = runner_config("about:blank", settings, None)
    kwargs = render_run_kwargs(settings, "", config, instance=instance)
    kwargs["network_mode"] = "none"
    return await _check(client, settings, kwargs, "about:blank", time.monotonic())


async def _check(
    client: docker.DockerClient,
    settings: RenderCheckSettings,
    kwargs: dict[str, Any],
    url: str,
    started: float,
) -> RenderReport:
    """Run the browser container and read its answer; the check's own failures are skips."""
    try:
        with anyio.CancelScope(shield=True):  # a container started is always removed
            container = await call(_start, client, kwargs)
    except ImageMissing:
        message = f"the render browser image {RENDER_IMAGE!r} is missing: run `kiln images build`"
        return RenderReport.skip(SKIP_IMAGE, message, time.monotonic() - started)
    except SandboxError as exc:
        message = f"the render check could not run: {exc}"
        return RenderReport.skip(SKIP_FAILED, message, time.monotonic() - started)
    return await _report(settings, url, started, container)


async def _report(
    settings: RenderCheckSettings, url: str, started: float, container: Container
) -> RenderReport:
    """Wait for the browser's answer (the container is removed in every case) as a report."""
    try:
        output = await call(_output, container, settings.timeout_seconds)
    except TimeoutError:
        message = f"the render check took longer than {settings.timeout_seconds:g} s"
        return RenderReport.skip(SKIP_TIMEOUT, message, time.monotonic() - started)
    except SandboxError as exc:
        message = f"the render check could not run: {exc}"
        return RenderReport.skip(SKIP_FAILED, message, time.monotonic() - started)
    finally:
        await _removed(container)
    return parse_runner_output(output, origin=url.rstrip("/"), seconds=time.monotonic() - started)


def _start(client: docker.DockerClient, kwargs: dict[str, Any]) -> Container:
    """Create, then start the browser container (blocking; in a thread). Two steps, because
    docker-py's ``containers.run`` loses a container it created when its start fails; one that
    cannot start is removed here. Named ``kiln-render-<hex>``: a left one reads as what it is."""
    try:
        container = client.containers.create(name=f"kiln-render-{secrets.token_hex(6)}", **kwargs)
    except docker.errors.ImageNotFound as exc:
        raise ImageMissing(f"image {RENDER_IMAGE!r} is missing") from exc
    except docker.errors.DockerException as exc:
        raise SandboxError(f"the render browser could not be made: {exc}") from exc
    try:
        container.start()
    except docker.errors.DockerException as exc:
        _remove(container)
        raise SandboxError(f"the render browser did not start: {exc}") from exc
    return container


def _output(container: Container, timeout: float) -> bytes:
    """The browser's stdout once it ended (blocking; in a thread); ``TimeoutError`` past
    ``timeout``."""
    try:
        container.wait(timeout=timeout)
    except requests.exceptions.RequestException as exc:  # the client's read deadline
        raise TimeoutError(f"render check past {timeout:g} s") from exc
    except docker.errors.DockerException as exc:
        raise SandboxError(f"the render browser was lost: {exc}") from exc
    return bytes(container.logs(stdout=True, stderr=False)[:MAX_OUTPUT_BYTES])


async def _removed(container: Container) -> None:
    """Remove the container, even in a cancelled scope (a stop must leave nothing behind);
    an engine that does not answer (a lost swarm node) leaves it to a sweep, never failing
    the run."""
    with anyio.CancelScope(shield=True), contextlib.suppress(SandboxError):
        await call(_remove, container)


def _remove(container: Container) -> None:
    # Already gone, or the engine refuses: a sweep removes what is left (shared labels).
    with contextlib.suppress(docker.errors.DockerException):
        container.remove(force=True)


def parse_runner_output(output: bytes, *, origin: str, seconds: float) -> RenderReport:
    """The report from the runner's JSON line (its last line; anything else is ignored)."""
    lines = output.decode("utf-8", "replace").strip().splitlines()
    try:
        result = json.loads(lines[-1]) if lines else None
    except ValueError:
        result = None
    if not isinstance(result, dict):
        return RenderReport.skip(SKIP_FAILED, "the render browser gave no result", seconds)
    if result.get("error"):
        message = f"the render browser failed: {str(result['error'])[:300]}"
        code = SKIP_TIMEOUT if result.get("timed_out") else SKIP_FAILED
        return RenderReport.skip(code, message, seconds)
    raws = result.get("reports")
    normalized = [
        normalize_report(raw, origin=origin) for raw in (raws if isinstance(raws, list) else [])
    ]
    errors = merge(error for error in normalized if error is not None)
    blank = bool(result.get("blank"))
    if blank:
        errors.append(PreviewError("blank_page", BLANK_MESSAGE, "", None, f"{origin}/"))
    report = RenderReport(ok=True, errors=errors, blank=blank, seconds=seconds)
    report.ok = not report.findings
    report.screenshot_png = _png(result.get("screenshot"))
    return report


def _png(data: object) -> bytes | None:
    if not isinstance(data, str):
        return None
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


async def render_image_present(client: docker.DockerClient) -> bool:
    """Whether the render browser image exists (``kiln doctor``)."""
    try:
        await call(client.images.get, RENDER_IMAGE)
    except SandboxNotFound:
        return False
    return True
