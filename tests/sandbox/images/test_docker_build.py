"""Build contexts, input hashes (what decides a rebuild) and one streamed ``docker build``."""

from __future__ import annotations

import contextlib
import io
import secrets
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import docker
import docker.errors
import pytest

from sandbox.errors import ImageBuildFailed
from sandbox.images.docker_build import (
    CA_FILE,
    ContextFile,
    context_files,
    context_tar,
    image_state,
    inputs_digest,
    remove_replaced,
    stream_build,
)


def _context(**changes: bytes) -> list[ContextFile]:
    files = {"Dockerfile": b"FROM scratch\n", "workspace/index.html": b"<p>hi</p>\n"}
    files.update(changes)
    return [ContextFile(path, content) for path, content in files.items()]


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param(lambda: (_context(**{"workspace/index.html": b"<p>ho</p>\n"}), {}), id="file"),
        pytest.param(lambda: (_context(**{"workspace/new.js": b""}), {}), id="added-file"),
        pytest.param(lambda: (_context(), {"BASE": "other:1"}), id="param"),
        pytest.param(
            lambda: ([replace(f, executable=True) for f in _context()], {}), id="exec-bit"
        ),
    ],
)
def test_the_inputs_hash_changes_with_any_input(
    changed: Callable[[], tuple[list[ContextFile], dict[str, str]]],
) -> None:
    files, params = changed()
    assert inputs_digest(files, params) != inputs_digest(_context(), {})


def test_the_inputs_hash_ignores_file_order() -> None:
    assert inputs_digest(reversed(_context()), {}) == inputs_digest(_context(), {})


def test_context_files_leave_out_build_leftovers(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    (tmp_path / "workspace" / "node_modules" / "x").mkdir(parents=True)
    (tmp_path / "workspace" / "node_modules" / "x" / "index.js").write_text("")
    (tmp_path / "workspace" / "app.js").write_text("")
    assert [f.path for f in context_files(tmp_path)] == ["Dockerfile", "workspace/app.js"]


def test_a_context_needs_a_dockerfile(tmp_path: Path) -> None:
    with pytest.raises(ImageBuildFailed, match=str(tmp_path)):
        context_files(tmp_path)


def test_the_context_tar_is_reproducible_and_complete() -> None:
    files = [*_context(), ContextFile(CA_FILE, b"pem")]
    first, second = context_tar(files).getvalue(), context_tar(files).getvalue()
    assert first == second
    with tarfile.open(fileobj=io.BytesIO(first)) as tar:
        assert sorted(tar.getnames()) == sorted(f.path for f in files)


@pytest.fixture
def scratch_tag(docker_client: docker.DockerClient) -> Iterator[Callable[[], str]]:
    """Makes throw-away image tags; each is removed after the test."""
    tags: list[str] = []

    def new_tag() -> str:
        tags.append(f"kiln-test/docker-build:{secrets.token_hex(4)}")
        return tags[-1]

    yield new_tag
    for tag in reversed(tags):  # children first
        with contextlib.suppress(docker.errors.ImageNotFound):
            docker_client.images.remove(tag, force=True)


def _build(client: docker.DockerClient, dockerfile: str, tag: str, lines: list[str]) -> str:
    context = context_tar([ContextFile("Dockerfile", dockerfile.encode())])
    return stream_build(
        client, lines.append, fileobj=context, custom_context=True, tag=tag, labels={"k": "v"}
    )


@pytest.mark.docker
def test_a_build_reports_its_steps_and_returns_the_image(
    docker_client: docker.DockerClient, scratch_tag: Callable[[], str]
) -> None:
    lines: list[str] = []
    tag = scratch_tag()
    image_id = _build(docker_client, "FROM scratch\nLABEL purpose=test\n", tag, lines)
    state = image_state(docker_client, tag)
    assert state is not None
    assert (state.image_id, state.labels["k"]) == (image_id, "v")
    assert any(line.startswith("Step 1/") for line in lines)


@pytest.mark.docker
def test_a_failing_build_raises_with_the_builders_message(
    docker_client: docker.DockerClient, scratch_tag: Callable[[], str]
) -> None:
    tag = scratch_tag()
    with pytest.raises(ImageBuildFailed, match="kiln-test/docker-build"):
        _build(docker_client, "FROM scratch\nRUN /no/such/program\n", tag, [])
    assert image_state(docker_client, tag) is None


@pytest.mark.docker
def test_a_replaced_image_is_kept_while_a_child_image_uses_it(
    docker_client: docker.DockerClient, scratch_tag: Callable[[], str]
) -> None:
    parent_tag, child_tag = scratch_tag(), scratch_tag()
    parent = _build(docker_client, "FROM scratch\nLABEL role=parent\n", parent_tag, [])
    _build(docker_client, f"FROM {parent_tag}\nLABEL role=child\n", child_tag, [])
    docker_client.images.remove(parent_tag)  # as a rebuild moving the tag away would
    assert remove_replaced(docker_client, parent, "sha256:new") is False
    docker_client.images.remove(child_tag)
    assert remove_replaced(docker_client, parent, "sha256:new") is True
    assert image_state(docker_client, parent) is None
