"""The ``selection`` field of a posted message: elements picked in the preview's select mode.

``selection: [{file, line, column, tag, text, component?}]`` (at most
:data:`~app.agent.selection.MAX_ELEMENTS`) is checked in two steps: its shape (422
``invalid_request`` naming the field, the item and what is wrong), then against the chat's
project as its latest version holds it (422 ``selection_not_in_project``: no project yet, no
such file, or a line past the file's end). Each accepted element keeps the line of source it
points at, for the user turn (:func:`app.agent.selection.user_turn`).
"""

from __future__ import annotations

from typing import Any

from app.agent.selection import (
    MAX_COMPONENT,
    MAX_ELEMENTS,
    MAX_PATH,
    MAX_SOURCE_LINE,
    MAX_TAG,
    MAX_TEXT,
    SelectedElement,
)
from app.api.bodies import invalid_field
from app.api.errors import ApiError
from app.api.services import in_thread
from app.projects.errors import ProjectError, VersionNotFound
from app.projects.store import LATEST, ProjectStore

FIELD = "selection"
NOT_IN_PROJECT = "selection_not_in_project"
ELEMENT_FIELDS = frozenset({"file", "line", "column", "tag", "text", "component"})
MAX_LINE = 1_000_000


def read_selection(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The body's ``selection`` items, shape-checked (empty when absent or null)."""
    given = body.get(FIELD)
    if given is None:
        return []
    if not isinstance(given, list):
        raise invalid_field(FIELD, f"must be a list, not {type(given).__name__}")
    if len(given) > MAX_ELEMENTS:
        raise invalid_field(FIELD, f"holds {len(given)} elements; at most {MAX_ELEMENTS}")
    return [_checked(item, n) for n, item in enumerate(given)]


def _checked(item: Any, n: int) -> dict[str, Any]:
    """One item, checked: known keys, texts within bounds, positive line and column."""
    if not isinstance(item, dict):
        raise invalid_field(FIELD, f"item {n} must be an object, not {type(item).__name__}")
    unknown = sorted(set(item) - ELEMENT_FIELDS)
    if unknown:
        raise invalid_field(FIELD, f"item {n} has unknown keys {unknown}")
    for key in ("line", "column"):
        value = item.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_LINE:
            problem = f"item {n}: {key!r} must be a whole number from 1, not {value!r}"
            raise invalid_field(FIELD, problem)
    limits = {"file": MAX_PATH, "tag": MAX_TAG, "text": MAX_TEXT, "component": MAX_COMPONENT}
    for key, limit in limits.items():
        value = item.get(key, "" if key in ("text", "component") else None)
        if value is None and key == "component":
            continue
        if not isinstance(value, str) or len(value) > limit:
            problem = f"item {n}: {key!r} must be text of at most {limit} characters"
            raise invalid_field(FIELD, problem)
    if not item["file"] or not item["tag"]:
        raise invalid_field(FIELD, f"item {n}: 'file' and 'tag' must not be empty")
    return item


def not_in_project(message: str) -> ApiError:
    """The 422 for a selection the project does not hold."""
    return ApiError(422, NOT_IN_PROJECT, message, field=FIELD)


async def in_project(
    store: ProjectStore | None, chat_id: str | None, items: list[dict[str, Any]]
) -> tuple[SelectedElement, ...]:
    """``items`` as elements of the project of chat ``chat_id`` (its latest version; ``None``:
    a chat being created), each with its source line; a 422 when the project does not hold one
    of them."""
    if not items:
        return ()
    if chat_id is None:
        raise not_in_project("a new chat has no project yet, so nothing can be selected")
    if store is None:
        raise not_in_project("this server keeps no projects, so nothing can be selected")
    try:
        files = await in_thread(store.files, chat_id, LATEST)
    except VersionNotFound:
        raise not_in_project("this chat has no project yet, so nothing can be selected") from None
    except ProjectError as exc:
        message = "the chat's project cannot be reached now"
        raise ApiError(503, "project_unavailable", message) from exc
    return tuple(_located(files, item) for item in items)


def _located(files: dict[str, bytes], item: dict[str, Any]) -> SelectedElement:
    path, line = item["file"], item["line"]
    data = files.get(path)
    if data is None:
        raise not_in_project(f"the selected element's file {path!r} is not in the project")
    lines = data.decode("utf-8", errors="replace").splitlines()
    if line > len(lines):
        raise not_in_project(f"{path!r} has {len(lines)} lines; the selection names line {line}")
    source = lines[line - 1][:MAX_SOURCE_LINE]
    component = item.get("component") or None
    text = item.get("text", "")
    return SelectedElement(path, line, item["column"], item["tag"], text, component, source)
