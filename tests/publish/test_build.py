"""app/publish/build.py: what each template publishes, and the demo app built for real in a
sandbox of its own (Docker, kiln's npm proxy, Vite), which is gone afterwards."""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from app.publish.build import (
    BuildLimits,
    build_version,
    env_file,
    files_of_archive,
    template_of,
)
from app.publish.errors import (
    PublishBuildFailed,
    PublishError,
    PublishTimeout,
    PublishTooLarge,
    PublishUnsupported,
)
from sandbox.lifecycle.manager import SandboxManager
from sandbox.settings import SandboxSettings
from tests.sandbox.docker_support import manager_on, settings_for, swept_instance
from tests.web.recording import demo_files

pytestmark = pytest.mark.anyio

TEMPLATE_DIR = Path(__file__).resolve().parents[2] / "images" / "vite-react" / "workspace"
LIMITS = BuildLimits(max_bytes=2**20, seconds=600.0, project_max_bytes=50 * 2**20)


def package(**dependencies: str) -> dict[str, bytes]:
    return {"package.json": json.dumps({"dependencies": dependencies}).encode()}


@pytest.mark.parametrize(
    ("files", "template"),
    [
        pytest.param(package(react="18", vite="5"), "vite-react", id="vite"),
        pytest.param(package(next="14", react="18"), "nextjs", id="next-before-vite"),
        pytest.param({"index.html": b"<p>"}, "vanilla", id="no-package-json"),
        pytest.param({"package.json": b"{not json"}, "vanilla", id="broken-package-json"),
        pytest.param({"package.json": b"[]"}, "vanilla", id="not-an-object"),
    ],
)
def test_the_template_is_read_from_the_version(files: dict[str, bytes], template: str) -> None:
    assert template_of(files) == template


async def test_a_vanilla_app_is_published_as_it_is_without_the_template_server() -> None:
    files = {"index.html": b"<p>hi</p>", "app.js": b"1", "server.js": b"//", **package()}
    assert await build_version(None, files, LIMITS) == {"index.html": b"<p>hi</p>", "app.js": b"1"}


@pytest.mark.parametrize(
    ("files", "error", "words"),
    [
        pytest.param(package(next="14"), PublishUnsupported, "Next.js", id="nextjs"),
        pytest.param({"main.html": b"x"}, PublishBuildFailed, "index.html", id="no-index"),
        pytest.param({"index.html": b"x" * (2**20 + 1)}, PublishTooLarge, "bytes", id="too-big"),
        pytest.param(package(vite="5"), PublishError, "sandbox", id="vite-without-sandboxes"),
    ],
)
async def test_what_cannot_be_published_is_said_in_words(
    files: dict[str, bytes], error: type[PublishError], words: str
) -> None:
    with pytest.raises(error, match=words):
        await build_version(None, files, LIMITS)


def test_only_regular_files_at_safe_paths_leave_the_build() -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in (("./index.html", b"<p>"), ("./assets/a.js", b"1"), ("../out", b"x")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("./secret")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/shadow"
        tar.addfile(link)
    assert files_of_archive(buffer.getvalue()) == {"index.html": b"<p>", "assets/a.js": b"1"}


def test_a_broken_archive_is_a_publish_error() -> None:
    with pytest.raises(PublishError, match="cannot be read"):
        files_of_archive(b"not a tar" * 100)


def test_the_env_file_holds_one_variable_a_line_and_refuses_what_it_cannot_hold() -> None:
    assert env_file({"VITE_B": "2", "VITE_A": "one two"}) == b"VITE_A=one two\nVITE_B=2\n"
    with pytest.raises(PublishError, match="VITE_X"):
        env_file({"VITE_X": "two\nlines"})


# -- for real ------------------------------------------------------------------------------


def template_files() -> dict[str, bytes]:
    """The vite-react template's own files."""
    return {
        path.relative_to(TEMPLATE_DIR).as_posix(): path.read_bytes()
        for path in TEMPLATE_DIR.rglob("*")
        if path.is_file()
    }


def demo_version() -> dict[str, bytes]:
    """The demo app as a version holds it: the template's files, the answer's, and zustand."""
    files = template_files()
    files.update({path: text.encode() for path, text in demo_files().items()})
    manifest = json.loads(files["package.json"])
    manifest["dependencies"]["zustand"] = "^4.5.0"
    files["package.json"] = json.dumps(manifest, indent=2).encode()
    return files


@pytest.fixture
def settings(redis_url: str) -> Iterator[SandboxSettings]:
    with swept_instance("test-publish", redis_url) as instance:
        yield settings_for(instance, redis_url)


@pytest.fixture
async def manager(settings: SandboxSettings) -> AsyncIterator[SandboxManager]:
    async with manager_on(settings) as opened:
        yield opened


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.npm
async def test_the_demo_is_built_in_a_sandbox_of_its_own(manager: SandboxManager) -> None:
    lines: list[str] = []

    async def output(line: str) -> None:
        lines.append(line)

    files = demo_version()
    # Vite puts public variables into index.html where it says %NAME%: the chat's reach the build
    files["index.html"] = files["index.html"].replace(b"<title>", b"<title>%VITE_APP_NAME% ")
    variables = {"VITE_APP_NAME": "Our todos"}
    built = await build_version(
        manager, files, LIMITS, owner="ann", on_output=output, variables=variables
    )
    assert b'<div id="root">' in built["index.html"]
    assert b"<title>Our todos " in built["index.html"]
    assert ".env.production.local" not in built
    scripts = [path for path in built if path.startswith("assets/") and path.endswith(".js")]
    assert len(scripts) == 1, sorted(built)
    assert b"kiln-demo-todos" in built[scripts[0]]  # the app's own code, bundled
    assert not any(path.startswith(("src/", "node_modules/")) for path in built)
    assert any("built in" in line for line in lines), lines[-20:]
    assert await manager.list() == []  # the build's sandbox is gone


@pytest.mark.docker
@pytest.mark.slow
async def test_a_failing_build_says_why_and_leaves_no_sandbox(manager: SandboxManager) -> None:
    files = {**template_files(), "src/App.jsx": b"export default function App( {\n"}
    with pytest.raises(PublishBuildFailed, match="npm run build exited with 1"):
        await build_version(manager, files, LIMITS)
    assert await manager.list() == []


@pytest.mark.docker
@pytest.mark.slow
async def test_a_build_over_its_time_is_stopped(manager: SandboxManager) -> None:
    quick = BuildLimits(max_bytes=2**20, seconds=0.5, project_max_bytes=2**26)
    with pytest.raises(PublishTimeout, match=r"0\.5 seconds"):
        await build_version(manager, template_files(), quick)
    assert await manager.list() == []
