"""Sandbox images: the template folders, the build lock, and the real images (Docker).

The Docker tests reuse the images ``kiln images build`` made (the module fixture builds whatever
is missing or stale, which is a no-op when they are current) and never force a rebuild of the
shared tags: the skip-and-rebuild test builds a throw-away copy of the vanilla template under
its own tag. Containers and volumes carry the session's instance label and are removed here.
"""

from __future__ import annotations

import io
import shutil
import tarfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import replace
from pathlib import Path

import anyio
import docker
import docker.errors
import httpx
import pytest
from docker.models.containers import Container
from docker.models.volumes import Volume

from sandbox.docker_boundary import connect
from sandbox.images.builder import (
    SERVICE_IMAGES,
    ImageBuilder,
    build_lock,
    template_params,
)
from sandbox.images.docker_build import IMAGE_LABEL, INPUTS_LABEL, BuildResult, inputs_digest
from sandbox.images.settings import ImageBuildSettings
from sandbox.images.templates import SANDBOX_UID, TEMPLATES, WORKSPACE, Template
from sandbox.settings import LABEL
from tests.sandbox.conftest import TestInstances
from tests.waiting import until

IMAGES_DIR = Path(__file__).resolve().parents[3] / "images"
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
READY_TIMEOUT = 180.0  # a guard against hanging, not a speed requirement
# What each template's dev server answers on "/" before the app is written.
EXPECTED_HTML = {
    "vite-react": '<div id="root"></div>',
    "vanilla": "Your app is being built",
    "nextjs": "Your app is being built",
}


def test_the_registry_and_the_base_are_build_inputs() -> None:
    plain = ImageBuildSettings(images_dir=IMAGES_DIR)
    mirrored = replace(plain, npm_registry="https://npm.test/")
    params = template_params(mirrored, "sha256:base")
    assert params["npm_config_registry"] == "https://npm.test/"
    assert params["BASE"] == "node:20-bookworm-slim"
    digests = {
        inputs_digest([], template_params(plain, "sha256:base")),
        inputs_digest([], params),
        inputs_digest([], template_params(plain, "sha256:other-base")),
    }
    assert len(digests) == 3


@pytest.mark.anyio
async def test_concurrent_builds_take_turns(tmp_path: Path) -> None:
    lock, lines, order = tmp_path / "build.lock", list[str](), list[str]()
    release = anyio.Event()

    async def first() -> None:
        async with build_lock(lock, lines.append):
            order.append("first in")
            await release.wait()
            order.append("first out")

    async def second() -> None:
        async with build_lock(lock, lines.append):
            order.append("second in")

    async with anyio.create_task_group() as group:
        group.start_soon(first)
        await until(lambda: bool(order), "the first build to hold the lock")
        group.start_soon(second)
        await until(lambda: bool(lines), "the second build to say it waits")
        release.set()
    assert order == ["first in", "first out", "second in"]
    assert lines == ["waiting for another `kiln images build` to finish"]


# --- the template folders match the templates kiln knows ---------------------------------------


@pytest.mark.parametrize("template", [pytest.param(t, id=t.name) for t in TEMPLATES.values()])
def test_template_folder_has_its_entrypoints_config_and_port(template: Template) -> None:
    folder = IMAGES_DIR / template.name
    for name in (*template.entrypoints, *template.config_files):
        assert (folder / "workspace" / name).is_file(), name
    dockerfile = (folder / "Dockerfile").read_text()
    assert "ARG BASE=node:20-bookworm-slim" in dockerfile
    assert f"EXPOSE {template.dev_port}" in dockerfile


# --- real images --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
async def built() -> AsyncIterator[list[BuildResult]]:
    """Build whatever is missing or stale (nothing, usually); the results of that build."""
    client = connect()
    try:
        builder = ImageBuilder(client, ImageBuildSettings.from_env(), lambda line: None)
        yield await builder.build()
    finally:
        client.close()


@pytest.fixture
def instance(instances: TestInstances) -> str:
    """A fresh instance label for this test's containers and volumes."""
    return instances.new("images")


@pytest.fixture
def run_container(
    docker_client: docker.DockerClient, instance: str
) -> Iterator[Callable[..., Container]]:
    """Start hardened containers (uid 1000, no capabilities), optionally on a fresh workspace
    volume (``workspace_volume=True``); containers, then volumes, are removed after the test.
    """
    labels = {LABEL: "images-test", "kiln.instance": instance}
    started: list[Container] = []
    volumes: list[Volume] = []

    def run(image: str, *, workspace_volume: bool = False, **kwargs: object) -> Container:
        options: dict[str, object] = {
            "user": f"{SANDBOX_UID}:{SANDBOX_UID}",
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "init": True,
            "labels": labels,
            "detach": True,
        }
        if workspace_volume:
            volume = docker_client.volumes.create(f"kiln-{instance}-{len(volumes)}", labels=labels)
            volumes.append(volume)
            options["volumes"] = {volume.name: {"bind": WORKSPACE, "mode": "rw"}}
        options.update(kwargs)
        container = docker_client.containers.run(image, **options)
        started.append(container)
        return container

    yield run
    for container in started:
        container.remove(force=True)
    for volume in volumes:
        volume.remove(force=True)


@pytest.mark.docker
@pytest.mark.anyio
async def test_every_template_image_exists_and_is_labelled(
    built: list[BuildResult], docker_client: docker.DockerClient
) -> None:
    for template in TEMPLATES.values():
        attrs = docker_client.images.get(template.image).attrs["Config"]
        assert attrs["Labels"][IMAGE_LABEL] == template.name
        assert attrs["Labels"][INPUTS_LABEL].startswith("sha256:")
        assert attrs["Cmd"] == list(template.dev_command)
        assert attrs["User"] == f"{SANDBOX_UID}:{SANDBOX_UID}"
        assert attrs["WorkingDir"] == WORKSPACE
        assert f"{template.dev_port}/tcp" in attrs["ExposedPorts"]


@pytest.mark.docker
@pytest.mark.anyio
async def test_a_second_build_skips_every_image(
    built: list[BuildResult], docker_client: docker.DockerClient
) -> None:
    images = [*(t.image for t in TEMPLATES.values()), *SERVICE_IMAGES.values()]
    before = [docker_client.images.get(image).id for image in images]
    client = connect()
    try:
        builder = ImageBuilder(client, ImageBuildSettings.from_env(), lambda line: None)
        again = await builder.build()
    finally:
        client.close()
    assert [r.action for r in again[1:]] == ["skipped"] * len(images)
    assert again[0].action in {"skipped", "present"}
    assert [r.image_id for r in again[1:]] == before


@pytest.fixture
def scratch_template(
    tmp_path: Path, instance: str, docker_client: docker.DockerClient
) -> Iterator[tuple[Template, Path]]:
    """A copy of the vanilla template under a tag of its own; its images are removed after."""
    template = Template(
        name=f"test-{instance}",
        dev_port=8080,
        entrypoints=("index.html",),
        config_files=("package.json",),
        dev_command=("npm", "run", "dev"),
    )
    images_dir = tmp_path / "images"
    shutil.copytree(IMAGES_DIR / "vanilla", images_dir / template.name)
    yield template, images_dir
    filters = {"label": f"{IMAGE_LABEL}={template.name}"}
    for image in docker_client.images.list(filters=filters):
        docker_client.images.remove(image.id, force=True)


@pytest.mark.docker
@pytest.mark.anyio
async def test_rebuilds_happen_only_when_inputs_change(
    built: list[BuildResult],
    scratch_template: tuple[Template, Path],
    docker_client: docker.DockerClient,
) -> None:
    template, images_dir = scratch_template
    settings = replace(ImageBuildSettings.from_env(), images_dir=images_dir)
    client = connect()
    try:
        builder = ImageBuilder(client, settings, lambda line: None)
        base_id = built[0].image_id
        first = await builder.build_template(template, base_id, force=False)
        unchanged = await builder.build_template(template, base_id, force=False)
        (images_dir / template.name / "workspace" / "index.html").write_text("<p>changed</p>\n")
        changed = await builder.build_template(template, base_id, force=False)
    finally:
        client.close()
    assert (first.action, unchanged.action, changed.action) == ("built", "skipped", "built")
    assert unchanged.image_id == first.image_id
    assert changed.image_id != first.image_id
    with pytest.raises(docker.errors.ImageNotFound):
        docker_client.images.get(first.image_id)  # the replaced image was cleaned up


def _published_port(container: Container, port: int) -> int:
    container.reload()
    bindings = container.attrs["NetworkSettings"]["Ports"][f"{port}/tcp"]
    return int(bindings[0]["HostPort"])


def _wait_for_page(container: Container, port: int, path: str, needle: str) -> str:
    """GET ``path`` until its body contains ``needle``; fail with the logs after the guard."""
    url = f"http://127.0.0.1:{_published_port(container, port)}{path}"
    deadline = time.monotonic() + READY_TIMEOUT
    body = ""
    while time.monotonic() < deadline:
        try:
            # An arbitrary host name, as kiln's preview proxy will send.
            body = httpx.get(url, headers={"Host": "abc123.preview.kiln.test"}, timeout=60).text
        except httpx.HTTPError:
            body = ""
        if needle in body:
            return body
        container.reload()
        if container.status == "exited":
            break
        time.sleep(0.3)
    logs = container.logs(tail=30).decode(errors="replace")
    pytest.fail(f"{needle!r} never appeared at {path!r}; last body {body[:300]!r}; logs {logs!r}")


@pytest.mark.docker
@pytest.mark.anyio
@pytest.mark.parametrize("name", [pytest.param(name, id=name) for name in TEMPLATES])
async def test_the_dev_server_answers_from_a_fresh_workspace_volume(
    name: str,
    built: list[BuildResult],
    run_container: Callable[..., Container],
) -> None:
    template = TEMPLATES[name]
    container = run_container(
        template.image,
        workspace_volume=True,
        ports={f"{template.dev_port}/tcp": ("127.0.0.1", None)},
    )
    _wait_for_page(container, template.dev_port, "/", EXPECTED_HTML[name])
    # The server runs as uid 1000 from the volume, which Docker filled from the image.
    code, output = container.exec_run(["sh", "-c", "id -u; stat -c %u . package.json"])
    assert (code, output.decode().split()) == (0, [str(SANDBOX_UID)] * 3)
    assert container.exec_run(["sh", "-c", "command -v sudo"]).exit_code != 0


def _put_file(container: Container, path: str, content: str) -> None:
    """Write one file into /workspace the way kiln's flusher does: a tar via put_archive."""
    data = content.encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo(path)
        info.size, info.mtime, info.uid, info.gid = len(data), int(time.time()), 1000, 1000
        tar.addfile(info, io.BytesIO(data))
    container.put_archive(WORKSPACE, buffer.getvalue())


@pytest.mark.docker
@pytest.mark.anyio
async def test_vite_picks_up_a_file_written_with_put_archive(
    built: list[BuildResult],
    run_container: Callable[..., Container],
) -> None:
    template = TEMPLATES["vite-react"]
    container = run_container(
        template.image,
        workspace_volume=True,
        ports={f"{template.dev_port}/tcp": ("127.0.0.1", None)},
    )
    # Served (and cached as transformed) once, so a stale answer would stay stale without a watch.
    _wait_for_page(container, template.dev_port, "/src/App.jsx", "Your app is being built")
    _put_file(container, "src/App.jsx", "export default () => <h1>edited-by-put-archive</h1>\n")
    _wait_for_page(container, template.dev_port, "/src/App.jsx", "edited-by-put-archive")


@pytest.mark.docker
@pytest.mark.anyio
async def test_vite_react_builds_offline(
    built: list[BuildResult], run_container: Callable[..., Container]
) -> None:
    container = run_container(
        TEMPLATES["vite-react"].image,
        command=["sh", "-c", "npm run build && test -s dist/index.html"],
        network_mode="none",
    )
    result = container.wait(timeout=READY_TIMEOUT)
    logs = container.logs().decode(errors="replace")
    assert result["StatusCode"] == 0, logs


@pytest.mark.docker
@pytest.mark.npm
@pytest.mark.anyio
async def test_a_package_installs_when_the_network_is_there(
    built: list[BuildResult], run_container: Callable[..., Container]
) -> None:
    container = run_container(
        TEMPLATES["vite-react"].image,
        command=["sh", "-c", "npm install zustand && test -d node_modules/zustand"],
        volumes={str(HOST_CA): {"bind": "/etc/kiln/ca.pem", "mode": "ro"}},
        environment={"NODE_EXTRA_CA_CERTS": "/etc/kiln/ca.pem"},
    )
    result = container.wait(timeout=READY_TIMEOUT)
    logs = container.logs().decode(errors="replace")
    assert result["StatusCode"] == 0, logs
