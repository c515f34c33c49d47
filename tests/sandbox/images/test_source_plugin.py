"""The vite-react image's source-location plugin (images/vite-react/kiln-source.mjs), on the real
engine: the dev server the supervisor starts tags every intrinsic JSX element it serves with
``data-kiln-source`` (project-relative path, the line and column of its ``<``) and the function
component around it; components are left alone; ``npm run build`` output and the project's
files never contain the attributes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import docker
import httpx
import pytest
from docker.models.containers import Container

from sandbox.images.templates import get_template
from sandbox.settings import LABEL
from tests.sandbox.docker_support import TestInstances
from tests.waiting import wait_until

TEMPLATE = get_template("vite-react")
LIMIT_SECONDS = 60.0
# Line 1 is the import; the <li> opens on line 4, column 5; <TodoList /> is a component.
TODO_LIST = """import { useState } from 'react'
export function TodoList({ items }) {
  return (
    <li className="todo">
      {items.length} left
    </li>
  )
}
const Heading = () => <h2 title="x">Todos</h2>
export default function Page() {
  return <section><Heading /><TodoList items={[]} /></section>
}
"""


def _base(container: Container) -> str:
    container.reload()
    address = next(iter(container.attrs["NetworkSettings"]["Networks"].values()))["IPAddress"]
    return f"http://{address}:{TEMPLATE.dev_port}"


def _get(container: Container, path: str) -> str | None:
    try:
        response = httpx.get(f"{_base(container)}{path}", timeout=5.0)
    except httpx.TransportError:
        return None
    return response.text if response.status_code == 200 else None


@pytest.fixture
def dev_container(
    docker_client: docker.DockerClient, instances: TestInstances
) -> Iterator[Container]:
    container = docker_client.containers.run(
        f"kiln/sandbox-{TEMPLATE.name}:latest",
        list(TEMPLATE.dev_command),
        detach=True,
        init=True,
        labels={LABEL: "source-plugin", "kiln.instance": instances.main},
    )
    try:
        write = f"cat > src/TodoList.jsx <<'KILN'\n{TODO_LIST}KILN"
        assert container.exec_run(["sh", "-c", write], workdir="/workspace").exit_code == 0
        wait_until(
            lambda: _get(container, "/") is not None,
            "the dev server serves its first page",
            limit=LIMIT_SECONDS,
            interval=0.2,
        )
        yield container
    finally:
        container.remove(force=True)


def _tags(module: str) -> list[tuple[str, str, str | None]]:
    """(tag, source, component) of each jsxDEV call with kiln's attributes, in order."""
    found = re.finditer(
        r'jsxDEV\("(\w+)", \{[^{}]*?"data-kiln-source": "([^"]+)"'
        r'(?:, "data-kiln-component": "(\w+)")?',
        module,
    )
    return [(match[1], match[2], match[3]) for match in found]


def test_served_elements_name_their_file_line_column_and_component(
    dev_container: Container,
) -> None:
    module = _get(dev_container, "/src/TodoList.jsx")
    assert module is not None
    assert _tags(module) == [
        ("li", "src/TodoList.jsx:4:5", "TodoList"),
        ("h2", "src/TodoList.jsx:9:23", "Heading"),
        ("section", "src/TodoList.jsx:11:10", "Page"),
    ]
    # Components get no attribute (a prop they do not expect could reach their DOM).
    assert re.search(r"jsxDEV\((Heading|TodoList), \{[^}]*data-kiln", module) is None
    app = _get(dev_container, "/src/App.jsx")
    assert app is not None
    assert ("h1", "src/App.jsx:4:7", "App") in _tags(app)


def test_the_build_and_the_project_files_have_no_source_locations(
    dev_container: Container,
) -> None:
    build = dev_container.exec_run(["npm", "run", "build"], workdir="/workspace")
    assert build.exit_code == 0, build.output.decode(errors="replace")
    found = dev_container.exec_run(
        ["sh", "-c", "grep -rl data-kiln dist src index.html; ls dist/assets | wc -l"],
        workdir="/workspace",
    )
    assert found.output.decode().split() == ["2"]  # no file names, the built js and css
