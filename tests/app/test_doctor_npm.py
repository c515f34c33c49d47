"""``kiln doctor``'s npm checks from given probe results (the probe itself: tests/sandbox)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli.doctor_npm import ca_bundle_result, npm_reason, npm_result
from sandbox import NpmProbe
from sandbox.settings import SandboxSettings

PROXY = "http://172.18.0.1:4873/"
REFUSED = """npm notice PING http://127.0.0.1:9/
npm error code ECONNREFUSED
npm error syscall connect
npm error FetchError: request to http://127.0.0.1:9/-/ping failed"""


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        pytest.param(REFUSED, "npm error code ECONNREFUSED", id="error-code"),
        pytest.param(
            "npm error self-signed certificate\nx",
            "npm error self-signed certificate",
            id="first-error",
        ),
        pytest.param(
            "npm gave no answer within 45 s", "npm gave no answer within 45 s", id="timeout"
        ),
        pytest.param("", "no output", id="silent"),
    ],
)
def test_the_reason_is_npms_error_code_or_first_error(output: str, reason: str) -> None:
    assert npm_reason(output) == reason


def test_a_failed_probe_fails_with_the_registry_reason_and_a_hint() -> None:
    result = npm_result(NpmProbe(False, PROXY, None, REFUSED, "http://127.0.0.1:9/"))
    assert not result.ok
    assert result.detail == (
        f"http://127.0.0.1:9/ unreachable from a sandbox through {PROXY}: "
        "npm error code ECONNREFUSED"
    )
    assert "KILN_SANDBOX_CA_BUNDLE" in result.hint


def test_an_answer_passes() -> None:
    result = npm_result(NpmProbe(True, PROXY, None, "12.2.0", "https://registry.npmjs.org/"))
    assert (result.ok, result.detail) == (
        True,
        f"https://registry.npmjs.org/ answers a sandbox through kiln's npm proxy ({PROXY})",
    )


def test_a_404_says_the_proxy_had_no_upstream_answer() -> None:
    output = "npm error code E404\nnpm error 404 Not Found - GET http://x/npm"
    result = npm_result(NpmProbe(False, PROXY, None, output, "http://127.0.0.1:9/"))
    assert result.detail.endswith("E404 (the npm proxy got no answer from its upstream)")


@pytest.mark.parametrize(
    ("bundle", "detail"),
    [
        pytest.param(Path("/etc/ca.pem"), "/etc/ca.pem (mounted into sandboxes)", id="bundle"),
        pytest.param(None, "none: sandboxes trust their image's own roots", id="none"),
    ],
)
def test_the_ca_bundle_in_use_is_reported(bundle: Path | None, detail: str) -> None:
    result = ca_bundle_result(SandboxSettings(ca_bundle=bundle))
    assert (result.name, result.ok, result.detail) == ("ca bundle", True, detail)
