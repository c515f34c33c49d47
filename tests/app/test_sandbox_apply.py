"""``kiln sandbox apply`` on the shared recordings, against real Docker, Redis and npm registry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest

from app.cli import main
from parser import StreamParser, merge_adjacent
from parser.events import FileContent
from sandbox.execution.workspace_files import read_workspace_file
from sandbox.settings import LABEL
from tests.app.conftest import PUBLIC_PORT

RECORDINGS = Path(__file__).resolve().parents[3] / "shared" / "recordings"

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.npm]


def _apply(recording: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(["sandbox", "apply", str(RECORDINGS / recording), "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out.strip().splitlines()[-1])


def _container(client: docker.DockerClient, sandbox_id: str) -> Any:
    (container,) = client.containers.list(filters={"label": f"{LABEL}={sandbox_id}"})
    return container


def _recorded_files(recording: str) -> dict[str, str]:
    parser = StreamParser()
    events = merge_adjacent(parser.feed((RECORDINGS / recording).read_text()) + parser.close())
    return {e.path: e.content for e in events if isinstance(e, FileContent)}


def test_the_todo_recording_builds_and_serves(
    instance: str, docker_client: docker.DockerClient, capsys: pytest.CaptureFixture[str]
) -> None:
    code, summary = _apply("todo-vite-react.txt", capsys)
    sandbox_id = summary["sandbox_id"]
    assert (code, summary["template"], summary["errors"]) == (0, "vite-react", [])
    assert summary["installs"] == [{"packages": ["zustand"], "exit_code": 0}]
    assert summary["commands"] == [{"argv": ["npm", "run", "build"], "exit_code": 0}]
    expected = _recorded_files("todo-vite-react.txt")
    assert len(expected) == 6
    assert summary["files"] == list(expected)
    container = _container(docker_client, sandbox_id)
    for path, content in expected.items():
        assert read_workspace_file(container, path) == content, path
    assert summary["preview_url"] == f"http://{sandbox_id}.preview.kiln.localhost:{PUBLIC_PORT}/"
    page = httpx.get(summary["dev_url"], timeout=30)
    assert page.status_code == 200
    assert "/src/main.jsx" in page.text
    app = httpx.get(summary["dev_url"] + "src/App.jsx", timeout=30)
    assert app.status_code == 200
    assert "Todos" in app.text


def test_the_adversarial_recording_is_refused_where_unsafe(
    instance: str, docker_client: docker.DockerClient, capsys: pytest.CaptureFixture[str]
) -> None:
    code, summary = _apply("adversarial.txt", capsys)
    assert code == 0
    codes = sorted(error["code"] for error in summary["errors"])
    assert codes == ["command_refused"] * 2 + ["invalid_file_path"] * 2 + ["invalid_package"] * 3
    messages = " ".join(error["message"] for error in summary["errors"])
    for refused in ["'rm -rf /'", "'../../etc/passwd'", "'/absolute/path.js'", "'sh'", "npm exec"]:
        assert refused in messages
    assert summary["commands"] == [{"argv": ["npm", "run", "build"], "exit_code": 0}]
    packages = ["react-router-dom@^6.26.0", "@tanstack/react-query", "left-pad"]
    assert summary["installs"] == [{"packages": packages, "exit_code": 0}]
    assert sorted(summary["files"]) == [
        "src/App.jsx",
        "src/fenced.jsx",
        "src/literal-close-tag.js",
        "src/single-quoted.js",
    ]
    container = _container(docker_client, summary["sandbox_id"])
    fenced = read_workspace_file(container, "src/fenced.jsx")
    assert fenced is not None
    assert fenced.startswith("export default")
    assert "```" not in fenced
    literal = read_workspace_file(container, "src/literal-close-tag.js")
    assert literal is not None
    assert '"</file>"' in literal
    assert '"</edward_sandbox>"' in literal
    assert read_workspace_file(container, "etc/passwd") is None
