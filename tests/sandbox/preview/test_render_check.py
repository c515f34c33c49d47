"""The render check: its hardened container, its parsing, and (against a real vite-react
sandbox and the real kiln/render-browser image) what it finds and what it cannot reach."""

from __future__ import annotations

import io
import json
import tarfile
import threading

import anyio
import anyio.abc
import docker
import pytest

from sandbox import SandboxManager
from sandbox.containers.labels import INSTANCE_LABEL
from sandbox.docker_boundary import call
from sandbox.env_settings import EnvReader
from sandbox.errors import SandboxConfigError
from sandbox.preview.render_check import (
    RENDER_ROLE,
    RENDER_ROLE_LABEL,
    SKIP_DISABLED,
    SKIP_FAILED,
    SKIP_TIMEOUT,
    RenderBrowser,
    RenderCheckSettings,
    RenderReport,
    parse_runner_output,
    render_run_kwargs,
    run_render_check,
)
from tests.waiting import until

ORIGIN = "http://localhost:5173"
THROWING_APP = """export default function App() {
  const user = undefined;
  return <h1>Hello {user.name}</h1>;
}
"""
FIXED_APP = """export default function App() {
  const user = { name: "Ada" };
  return <h1>Hello {user.name}{["a", "b"].map((x) => <i>{x}</i>)}</h1>;
}
"""  # the list without keys: React warns (through console.error), which is no finding


pytestmark = pytest.mark.anyio


def _line(result: dict[str, object]) -> bytes:
    return (json.dumps(result) + "\n").encode()


def test_the_container_is_confined_like_a_sandbox() -> None:
    kwargs = render_run_kwargs(RenderCheckSettings(), "abc123", "{}", instance="i")
    assert kwargs["network_mode"] == "container:abc123"
    assert kwargs["cap_drop"] == ["ALL"]
    assert kwargs["security_opt"] == ["no-new-privileges"]
    assert kwargs["read_only"] is True
    assert kwargs["user"] == "1000:1000"
    assert kwargs["mem_limit"] == kwargs["memswap_limit"] == "768m"
    assert kwargs["pids_limit"] == 256
    assert set(kwargs["tmpfs"]) == {"/tmp"}
    assert "volumes" not in kwargs
    assert "ports" not in kwargs


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        pytest.param({}, RenderCheckSettings(), id="defaults"),
        pytest.param({"KILN_RENDER_CHECK": "0"}, RenderCheckSettings(enabled=False), id="off"),
        pytest.param(
            {"KILN_RENDER_CHECK_TIMEOUT": "45"}, RenderCheckSettings(timeout_seconds=45), id="t"
        ),
    ],
)
def test_settings_are_read_through_the_reader(
    env: dict[str, str], expected: RenderCheckSettings
) -> None:
    assert RenderCheckSettings.from_env(EnvReader(env)) == expected


def test_a_bad_timeout_is_refused_in_words() -> None:
    with pytest.raises(SandboxConfigError, match="KILN_RENDER_CHECK_TIMEOUT"):
        RenderCheckSettings.from_env(EnvReader({"KILN_RENDER_CHECK_TIMEOUT": "1"}))


def test_reports_are_normalised_merged_and_junk_dropped() -> None:
    raw = {
        "kind": "uncaught",
        "message": "TypeError: x" + "y" * 5000,
        "stack": "",
        "source": {"file": "/src/App.jsx", "line": 3, "column": 7},
        "url": f"{ORIGIN}/",
    }
    output = _line({"reports": [raw, raw, {"kind": "nope"}, "junk"], "blank": False})
    report = parse_runner_output(output, origin=ORIGIN, seconds=1.0)
    assert not report.ok
    [error] = report.errors
    assert error.count == 2
    assert len(error.message) == 2000
    assert error.source is not None
    assert error.source.to_dict() == {"file": "src/App.jsx", "line": 3, "column": 7}


def test_warnings_are_shown_but_are_no_finding() -> None:
    warn = {"kind": "console_warn", "message": "careful", "url": ORIGIN}
    report = parse_runner_output(_line({"reports": [warn]}), origin=ORIGIN, seconds=1.0)
    assert report.ok
    assert report.to_dict()["errors"] == []


def test_a_blank_page_is_a_finding() -> None:
    report = parse_runner_output(_line({"reports": [], "blank": True}), origin=ORIGIN, seconds=1)
    assert not report.ok
    assert [e.kind for e in report.findings] == ["blank_page"]


@pytest.mark.parametrize(
    ("output", "code"),
    [
        pytest.param(b"", SKIP_FAILED, id="nothing"),
        pytest.param(b"not json\n", SKIP_FAILED, id="junk"),
        pytest.param(_line({"error": "deadline passed", "timed_out": True}), SKIP_TIMEOUT, id="t"),
        pytest.param(_line({"error": "chromium exited (1)"}), SKIP_FAILED, id="crash"),
    ],
)
def test_a_check_that_could_not_run_is_skipped_in_words(output: bytes, code: str) -> None:
    report = parse_runner_output(output, origin=ORIGIN, seconds=1.0)
    assert report.ok
    assert report.skipped == code
    assert report.skipped_message


async def test_off_means_no_container() -> None:
    settings = RenderCheckSettings(enabled=False)
    report = await run_render_check(
        None,  # type: ignore[arg-type]  # never touched when off
        settings,
        sandbox_container="x",
        dev_port=5173,
        instance="i",
    )
    assert report.skipped == SKIP_DISABLED
    assert report.ok


def _put(container: docker.models.containers.Container, path: str, text: str) -> None:
    data = text.encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo(path)
        info.size, info.uid, info.gid = len(data), 1000, 1000
        tar.addfile(info, io.BytesIO(data))
    container.put_archive("/workspace", buffer.getvalue())


async def _check_page(
    manager: SandboxManager,
    docker_client: docker.DockerClient,
    chat: str,
    page: str,
    reporter: str | None = None,
) -> RenderReport:
    """The render check of a vanilla sandbox whose ``index.html`` is ``page``."""
    sandbox = await manager.acquire(chat, "owner-1", "vanilla")
    try:
        await manager.wait_ready(sandbox.id)
        container = docker_client.containers.get(sandbox.container_id)
        await call(_put, container, "index.html", page)
        return await run_render_check(
            docker_client,
            RenderCheckSettings(timeout_seconds=60),
            sandbox_container=sandbox.container_id,
            dev_port=sandbox.dev_port,
            instance=manager.settings.instance,
            reporter=reporter,
        )
    finally:
        await manager.destroy(sandbox.id)


@pytest.mark.docker
async def test_a_real_app_that_throws_is_found_then_renders_once_fixed(
    manager: SandboxManager, docker_client: docker.DockerClient
) -> None:
    sandbox = await manager.acquire("chat-render", "owner-1", "vite-react")
    await manager.wait_ready(sandbox.id)
    container = docker_client.containers.get(sandbox.container_id)
    settings = RenderCheckSettings(timeout_seconds=60)
    check = {
        "sandbox_container": sandbox.container_id,
        "dev_port": sandbox.dev_port,
        "instance": manager.settings.instance,
    }
    try:
        await call(_put, container, "src/App.jsx", THROWING_APP)
        broken = await run_render_check(docker_client, settings, **check)
        messages = [e.message for e in broken.findings]
        assert not broken.ok, broken.to_dict()
        wanted = "TypeError: Cannot read properties of undefined (reading 'name')"
        [thrown] = [e for e in broken.findings if e.message == wanted and e.kind == "uncaught"]
        assert thrown.source is not None, messages
        assert thrown.source.file == "src/App.jsx", messages
        assert thrown.source.line == 3, thrown.to_dict()
        assert broken.blank
        await call(_put, container, "src/App.jsx", FIXED_APP)
        fixed = await run_render_check(docker_client, settings, **check)
        assert fixed.ok, fixed.to_dict()
        assert not fixed.blank
        warnings = [e.message for e in fixed.errors if e.kind == "console_warn"]
        assert any('unique "key" prop' in w for w in warnings), fixed.errors
        assert fixed.screenshot_png is not None
        assert fixed.screenshot_png[:4] == b"\x89PNG"
    finally:
        await manager.destroy(sandbox.id)


@pytest.mark.docker
async def test_a_browser_started_ahead_opens_the_app_only_when_told(
    manager: SandboxManager, docker_client: docker.DockerClient
) -> None:
    sandbox = await manager.acquire("chat-render-ahead", "owner-1", "vite-react")
    await manager.wait_ready(sandbox.id)
    container = docker_client.containers.get(sandbox.container_id)
    browser = await RenderBrowser.start(
        docker_client,
        RenderCheckSettings(timeout_seconds=60),
        sandbox_container=sandbox.container_id,
        dev_port=sandbox.dev_port,
        instance=manager.settings.instance,
    )
    instance = f"{INSTANCE_LABEL}={manager.settings.instance}"
    [started] = docker_client.containers.list(
        filters={"label": [f"{RENDER_ROLE_LABEL}={RENDER_ROLE}", instance]}
    )
    try:
        await until(
            lambda: b"waiting for the check" in started.logs(stdout=False, stderr=True),
            "the browser started ahead is waiting",
            limit=60,
            interval=0.2,
        )
        # Written only now: a browser that had opened the app at its start saw the template's.
        await call(_put, container, "src/App.jsx", THROWING_APP)
        report = await browser.check()
        wanted = "TypeError: Cannot read properties of undefined (reading 'name')"
        assert wanted in [e.message for e in report.findings], report.to_dict()
        assert not docker_client.containers.list(all=True, filters={"id": started.id})
    finally:
        await browser.discard()
        await manager.destroy(sandbox.id)


# A raw TCP connection from the render container (argv 1 and 2: address and port).
CONNECT_TO = (
    "const s = require('net').connect(+process.argv[2], process.argv[1]);"
    "s.setTimeout(1500, () => { console.log('error timeout'); process.exit(3) });"
    "s.on('connect', () => { console.log('connected'); process.exit(0) });"
    "s.on('error', e => { console.log('error', e.code); process.exit(3) })"
)
INTERNET = ("1.1.1.1", "443")


def _probe_from_render_container(
    client: docker.DockerClient, sandbox_container: str, instance: str, host: str, port: str
) -> str:
    """Connect to ``host:port`` from a render container confined exactly like the check's."""
    kwargs = render_run_kwargs(RenderCheckSettings(), sandbox_container, "{}", instance=instance)
    kwargs.update(entrypoint=["node", "-e", CONNECT_TO], command=[host, port])
    container = client.containers.run(**kwargs)
    try:
        container.wait(timeout=30)
        return bytes(container.logs()).decode().strip()
    finally:
        container.remove(force=True)


@pytest.mark.docker
async def test_the_render_container_reaches_its_sandbox_and_nothing_else(
    manager: SandboxManager, docker_client: docker.DockerClient, redis_url: str
) -> None:
    first = await manager.acquire("chat-render-net-1", "owner-1", "vanilla")
    other = await manager.acquire("chat-render-net-2", "owner-1", "vanilla")
    attrs = docker_client.networks.get(manager.settings.network).attrs
    gateway = str(attrs["IPAM"]["Config"][0]["Gateway"])
    redis_port = redis_url.rsplit(":", 1)[1].split("/")[0]
    try:
        await manager.wait_ready(first.id)
        await manager.wait_ready(other.id)
        probe = (docker_client, first.container_id, manager.settings.instance)
        own = await call(_probe_from_render_container, *probe, "127.0.0.1", str(first.dev_port))
        assert own == "connected"  # the probe works: the sandbox's own dev server
        async with await anyio.create_tcp_listener(local_host="0.0.0.0") as listener:
            kiln_port = str(listener.extra(anyio.abc.SocketAttribute.local_port))
            async with anyio.create_task_group() as serve:
                serve.start_soon(listener.serve, _close)
                await (await anyio.connect_tcp(gateway, int(kiln_port))).aclose()
                unreachable = {
                    "a port on the host (kiln's)": (gateway, kiln_port),
                    "Redis": (gateway, redis_port),
                    "the docker host bridge": ("172.17.0.1", redis_port),
                    "another sandbox": (other.ip, str(other.dev_port)),
                    "the internet": INTERNET,
                }
                answers = {
                    what: await call(_probe_from_render_container, *probe, host, port)
                    for what, (host, port) in unreachable.items()
                }
                serve.cancel_scope.cancel()
        assert {what: answer.split()[0] for what, answer in answers.items()} == dict.fromkeys(
            unreachable, "error"
        ), answers
    finally:
        await manager.destroy(first.id)
        await manager.destroy(other.id)


async def _close(stream: anyio.abc.SocketStream) -> None:
    await stream.aclose()


HOSTILE_PAGE = """<!doctype html>
<html><body><div id="root">content</div><script>
fetch("http://1.1.1.1/").catch(() => {}).finally(() => {
  for (let i = 0; i < 10000; i++) console.error("<img src=x onerror=alert(1)> spam");
  for (let i = 0; i < 300; i++) console.error("distinct " + i);
  console.error("m".repeat(1000000));
});
</script></body></html>
"""


@pytest.mark.docker
async def test_a_hostile_page_is_capped_merged_and_kept_off_the_network(
    manager: SandboxManager, docker_client: docker.DockerClient
) -> None:
    report = await _check_page(manager, docker_client, "chat-render-hostile", HOSTILE_PAGE)
    assert report.skipped is None, report.to_dict()
    spam = [e for e in report.errors if e.message.endswith(" spam")]
    assert [e.count for e in spam] == [10000]
    assert spam[0].message == "<img src=x onerror=alert(1)> spam"  # data, never markup
    assert len(report.errors) <= 100
    assert max(len(e.message) for e in report.errors) <= 2000
    blocked = [e for e in report.errors if e.kind == "network" and "1.1.1.1" in e.message]
    assert blocked, [e.message for e in report.errors if e.kind == "network"]


MISSING_MODULE_PAGE = """<!doctype html>
<html><body><div id="root"></div>
<script type="module" src="/src/missing.js"></script>
<script type="module">import("/src/also-missing.js");</script>
</body></html>
"""


@pytest.mark.docker
async def test_a_module_that_does_not_load_is_reported_with_its_url(
    manager: SandboxManager, docker_client: docker.DockerClient
) -> None:
    report = await _check_page(manager, docker_client, "chat-render-module", MISSING_MODULE_PAGE)
    loads = [e for e in report.findings if e.kind == "module_load"]
    assert any("/src/missing.js" in e.message and "404" in e.message for e in loads), loads
    assert any("also-missing.js" in e.message for e in report.findings), report.to_dict()
    assert report.blank


def test_a_page_that_never_loaded_is_a_timeout_not_a_blank_page() -> None:
    never = {"error": "the page did not finish loading", "timed_out": True, "blank": False}
    report = parse_runner_output(_line(never), origin=ORIGIN, seconds=28.0)
    assert report.ok
    assert report.skipped == SKIP_TIMEOUT
    assert not report.findings


# A stand-in for the preview reporter (sandbox/preview/reporter.js): it reports through the
# binding the check installs, in the shared shape.
REPORTER = """
window.addEventListener("error", (event) => {
  const error = event.error;
  const message = error.name + ": " + error.message;
  window.__kilnReport(JSON.stringify({kind: "uncaught", message}));
  window.__kilnReport(JSON.stringify({kind: "console_log", message: "the reporter was here"}));
});
"""
THROWING_PAGE = """<!doctype html>
<html><body><div id="root">hi</div><script>
const user = undefined;
console.log(user.name);
</script></body></html>
"""


@pytest.mark.docker
async def test_the_reporter_is_installed_and_an_error_both_see_is_one_finding(
    manager: SandboxManager, docker_client: docker.DockerClient
) -> None:
    report = await _check_page(
        manager, docker_client, "chat-render-reporter", THROWING_PAGE, reporter=REPORTER
    )
    assert "the reporter was here" in [e.message for e in report.errors], report.errors
    thrown = [e for e in report.findings if "reading 'name'" in e.message]
    assert [(e.kind, e.count) for e in thrown] == [("uncaught", 1)], thrown


class _TellingHangs:
    """A browser container whose ``exec_run`` (the check's "go") hangs; records its removal."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.removed = threading.Event()

    def exec_run(self, *args: object, **kwargs: object) -> None:
        self.release.wait(10)

    def remove(self, force: bool = False) -> None:
        self.removed.set()


@pytest.mark.anyio
async def test_a_check_cancelled_while_telling_its_browser_removes_it() -> None:
    container = _TellingHangs()
    browser = RenderBrowser(
        None,  # type: ignore[arg-type]  # never used by check()
        RenderCheckSettings(),
        container,  # type: ignore[arg-type]
        sandbox_container="box",
        url="http://localhost:5173/",
    )
    try:
        with anyio.fail_after(10):
            with anyio.move_on_after(0.1):
                await browser.check()
            assert container.removed.is_set()
    finally:
        container.release.set()


class _CannotStart:
    """A client whose browser container is made but cannot start."""

    def __init__(self) -> None:
        self.made: list[_Made] = []

    @property
    def containers(self) -> _CannotStart:
        return self

    def create(self, **kwargs: object) -> _Made:
        self.made.append(_Made(str(kwargs.get("name"))))
        return self.made[-1]


class _Made:
    def __init__(self, name: str) -> None:
        self.name, self.removed = name, False

    def start(self) -> None:
        raise docker.errors.APIError("500", explanation="cgroup refused the container")

    def remove(self, force: bool = False) -> None:
        self.removed = True


@pytest.mark.anyio
async def test_a_browser_that_cannot_start_is_removed_and_said_in_words() -> None:
    client = _CannotStart()
    report = await run_render_check(
        client,  # type: ignore[arg-type]
        RenderCheckSettings(),
        sandbox_container="box",
        dev_port=5173,
        instance="i",
        reporter="",
    )
    assert report.skipped == SKIP_FAILED
    assert "did not start" in report.skipped_message
    assert "cgroup refused" in report.skipped_message
    [made] = client.made
    assert made.removed
    assert made.name.startswith("kiln-render-")
