"""Which uncaught errors the browser tests blame on the preview's app, not on kiln's page."""

from __future__ import annotations

import pytest

from tests.web.conftest import is_preview_error

HALF_WRITTEN = (
    "The requested module '/src/App.jsx?t=1764000000000' does not provide an export named 'default'"
)


@pytest.mark.parametrize(
    ("message", "stack", "preview"),
    [
        pytest.param(HALF_WRITTEN, "", True, id="hmr-update-of-a-half-written-module"),
        pytest.param(
            "The requested module '/src/store.js' does not provide an export named 'useTodos'",
            "",
            True,
            id="first-load-of-a-half-written-module",
        ),
        pytest.param(
            "x is not defined",
            "ReferenceError: x is not defined\n    at http://abc.preview.localhost:8000/src/App.jsx",
            True,
            id="thrown-by-the-app",
        ),
        pytest.param(
            "x is not defined",
            "ReferenceError: x is not defined\n    at http://127.0.0.1:8000/app.js:10:3",
            False,
            id="thrown-by-kiln",
        ),
        pytest.param(
            "The requested module './chat.js' does not provide an export named 'ChatView'",
            "",
            False,
            id="kiln-module-that-fails-to-link",
        ),
        pytest.param(
            HALF_WRITTEN,
            "SyntaxError\n    at http://127.0.0.1:8000/app.js",
            False,
            id="stack-decides",
        ),
    ],
)
def test_an_error_is_blamed_on_the_preview_only_when_it_is_the_apps(
    message: str, stack: str, preview: bool
) -> None:
    assert is_preview_error(message, stack) is preview
