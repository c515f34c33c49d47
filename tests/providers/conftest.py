"""Provider tests: tiktoken reads the shared encodings (it cannot download them here); the
providers a test made are closed after it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.providers.harness import OpenedProviders

# The checkout's sibling ``shared/`` folder (``/work/shared`` here, beside the clone in CI).
TIKTOKEN_CACHE = Path(__file__).resolve().parents[3] / "shared" / "tiktoken-cache"


@pytest.fixture(autouse=True)
def tiktoken_cache(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point tiktoken at the shared encodings for every provider test."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(TIKTOKEN_CACHE))
    return TIKTOKEN_CACHE


@pytest.fixture
async def opened(anyio_backend: str) -> AsyncIterator[OpenedProviders]:
    """Register the providers a test builds (``opened.add(...)``); closed after the test."""
    providers = OpenedProviders()
    yield providers
    await providers.aclose()
