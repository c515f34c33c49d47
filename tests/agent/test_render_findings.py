from __future__ import annotations

from typing import Any

import pytest

from app.agent.render_findings import MAX_FILES, publish_render_findings
from sandbox import RenderReport
from sandbox.preview.error_reports import PreviewError, SourceLocation

pytestmark = pytest.mark.anyio


class _Files:
    def __init__(self, files: dict[str, str]) -> None:
        self.files = files
        self.reads: list[str] = []

    async def read_file(self, path: str) -> str | None:
        self.reads.append(path)
        return self.files.get(path)


def _error(message: str, file: str | None, kind: str = "uncaught") -> PreviewError:
    source = SourceLocation(file, 3, 5) if file else None
    return PreviewError(kind, message, "", source, "http://localhost:5173/")


async def test_each_finding_is_an_event_and_the_files_named_are_read_once() -> None:
    events: list[dict[str, Any]] = []

    async def emit(event: dict[str, Any]) -> None:
        events.append(event)

    errors = [
        _error("boom", "src/App.jsx"),
        _error("again", "src/App.jsx"),
        _error("no source", None),
        _error("a warning", "src/List.jsx", kind="console_warn"),  # never a finding
        _error("gone", "src/Gone.jsx"),
    ]
    target = _Files({"src/App.jsx": "app", "src/List.jsx": "list"})
    report = RenderReport(ok=False, errors=errors)
    files = await publish_render_findings(report, emit, target)  # type: ignore[arg-type]
    assert [(e["type"], e["message"]) for e in events] == [
        ("preview_error", "boom"),
        ("preview_error", "again"),
        ("preview_error", "no source"),
        ("preview_error", "gone"),
    ]
    assert files == {"src/App.jsx": "app"}
    assert target.reads == ["src/App.jsx", "src/Gone.jsx"]


async def test_at_most_a_few_files_and_nothing_without_a_report() -> None:
    async def emit(event: dict[str, Any]) -> None:
        pass

    names = [f"src/F{i}.jsx" for i in range(MAX_FILES + 3)]
    target = _Files({name: name for name in names})
    report = RenderReport(ok=False, errors=[_error(name, name) for name in names])
    files = await publish_render_findings(report, emit, target)  # type: ignore[arg-type]
    assert list(files) == names[:MAX_FILES]
    assert await publish_render_findings(None, emit, target) == {}  # type: ignore[arg-type]
