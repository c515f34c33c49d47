"""Preview credentials sealed to a purpose and a sandbox: opened only for exactly those."""

from __future__ import annotations

import pytest

from app.api.preview_seal import LOGIN, SESSION, PreviewSeal

SECRET = "a-test-secret-of-enough-length"


def test_a_sealed_token_opens_for_its_purpose_and_sandbox() -> None:
    seal = PreviewSeal(SECRET)
    sealed = seal.seal(LOGIN, "abc123", "the-token")
    assert "the-token" not in sealed
    assert seal.open(LOGIN, "abc123", sealed) == "the-token"
    assert PreviewSeal(SECRET).open(LOGIN, "abc123", sealed) == "the-token"  # same secret


@pytest.mark.parametrize(
    ("purpose", "sandbox_id", "secret"),
    [
        pytest.param(SESSION, "abc123", SECRET, id="other-purpose"),
        pytest.param(LOGIN, "abc124", SECRET, id="other-sandbox"),
        pytest.param(LOGIN, "abc123", "another-secret-entirely", id="other-secret"),
    ],
)
def test_a_sealed_token_opens_nowhere_else(purpose: str, sandbox_id: str, secret: str) -> None:
    sealed = PreviewSeal(SECRET).seal(LOGIN, "abc123", "the-token")
    assert PreviewSeal(secret).open(purpose, sandbox_id, sealed) is None


@pytest.mark.parametrize(
    "sealed",
    [
        pytest.param("the-token", id="a-raw-token"),
        pytest.param("", id="empty"),
        pytest.param("gAAAAA\u00e9", id="not-ascii"),
    ],
)
def test_what_was_never_sealed_opens_to_none(sealed: str) -> None:
    assert PreviewSeal(SECRET).open(LOGIN, "abc123", sealed) is None


def test_the_seal_hides_its_key() -> None:
    assert SECRET not in repr(PreviewSeal(SECRET))
