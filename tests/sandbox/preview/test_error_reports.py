"""Preview errors: normalisation (shape, caps, plain text, project paths), merge, dedup, rates."""

from __future__ import annotations

from typing import Any

import pytest

from sandbox.preview.error_reports import (
    MAX_MESSAGE,
    MAX_STACK,
    MAX_URL,
    PreviewError,
    ReportDeduper,
    SourceLocation,
    TokenBucket,
    merge,
    normalize_report,
    project_file,
)

ORIGIN = "http://abc.preview.localhost:8000"


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def raw(**fields: Any) -> dict[str, Any]:
    return {"kind": "uncaught", "message": "boom", "url": f"{ORIGIN}/", **fields}


@pytest.mark.parametrize(
    "junk",
    [
        pytest.param(None, id="none"),
        pytest.param("uncaught", id="string"),
        pytest.param([raw()], id="list"),
        pytest.param({"message": "no kind"}, id="no-kind"),
        pytest.param(raw(kind="made_up"), id="unknown-kind"),
        pytest.param(raw(kind=["uncaught"]), id="kind-not-text"),
        pytest.param(raw(message="", stack=""), id="empty"),
        pytest.param(raw(message={"a": 1}), id="message-not-text"),
    ],
)
def test_junk_is_refused(junk: object) -> None:
    assert normalize_report(junk, origin=ORIGIN) is None


def test_the_shared_shape() -> None:
    error = normalize_report(
        raw(source={"file": f"{ORIGIN}/src/App.jsx?t=1712", "line": 12, "column": 5}, count=3),
        origin=ORIGIN,
    )
    assert error is not None
    assert error.to_dict() == {
        "kind": "uncaught",
        "message": "boom",
        "stack": "",
        "source": {"file": "src/App.jsx", "line": 12, "column": 5},
        "url": f"{ORIGIN}/",
        "count": 3,
    }


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        pytest.param('Warning: Each child in a list should have a "key".', "console_warn",
                     id="react-warning"),
        pytest.param("TypeError: x is undefined", "console_error", id="a-real-error"),
        pytest.param("Warnings: 3", "console_error", id="not-the-prefix"),
    ],
)  # fmt: skip
def test_react_development_warnings_are_warnings(message: str, kind: str) -> None:
    error = normalize_report(raw(kind="console_error", message=message), origin=ORIGIN)
    assert error is not None
    assert error.kind == kind


def test_sizes_are_capped_and_a_megabyte_costs_no_more() -> None:
    huge = "x" * 1_000_000
    error = normalize_report(raw(message=huge, stack=huge, url=huge), origin=ORIGIN)
    assert error is not None
    assert (len(error.message), len(error.stack), len(error.url)) == (
        MAX_MESSAGE,
        MAX_STACK,
        MAX_URL,
    )


def test_plain_text_only() -> None:
    message = "\x1b[31m<img src=x onerror=alert(1)>\x1b[39m\x00\x07 line\n\tnext\x9b"
    error = normalize_report(raw(message=message), origin=ORIGIN)
    assert error is not None
    # HTML stays as text (shown as text, never markup); colours and controls go.
    assert error.message == "<img src=x onerror=alert(1)> line\n\tnext"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        pytest.param(f"{ORIGIN}/src/App.jsx?t=1712345", "src/App.jsx", id="vite-timestamp"),
        pytest.param(f"{ORIGIN.upper()}/src/a.ts#x", "src/a.ts", id="case-and-fragment"),
        pytest.param("/src/main.jsx?v=1", "src/main.jsx", id="path-only"),
        pytest.param("/workspace/src/App.jsx", "src/App.jsx", id="sandbox-path"),
        pytest.param("http://evil.preview.localhost:8000/src/App.jsx", None, id="other-sandbox"),
        pytest.param("https://cdn.example/lib.js", None, id="other-origin"),
        pytest.param(f"{ORIGIN}/src/../../etc/passwd", None, id="dot-dot"),
        pytest.param(f"{ORIGIN}/", None, id="no-file"),
    ],
)
def test_project_file(url: str, expected: str | None) -> None:
    assert project_file(url, ORIGIN) == expected


def test_a_forged_source_of_another_sandbox_points_nowhere() -> None:
    forged = raw(
        sandbox="other",
        source={"file": "http://other.preview.localhost:8000/src/App.jsx", "line": 1},
    )
    error = normalize_report(forged, origin=ORIGIN)
    assert error is not None
    assert error.source is None


@pytest.mark.parametrize(
    "source",
    [
        pytest.param({"file": "src/App.jsx", "line": 0}, id="line-0"),
        pytest.param({"file": "src/App.jsx", "line": True}, id="line-bool"),
        pytest.param({"file": "src/App.jsx", "line": "3"}, id="line-text"),
        pytest.param({"file": 3, "line": 3}, id="file-not-text"),
        pytest.param("src/App.jsx:3", id="not-a-dict"),
        pytest.param({"file": "/node_modules/.vite/deps/react.js?v=1", "line": 3}, id="dependency"),
    ],
)
def test_bad_sources_are_dropped(source: object) -> None:
    error = normalize_report(raw(source=source), origin=ORIGIN)
    assert error is not None
    assert error.source is None


def test_without_a_source_the_first_project_frame_is_it() -> None:
    stack = (
        "Error: boom\n"
        "    at https://cdn.example/react.js:1:2\n"
        f"    at renderWithHooks ({ORIGIN}/node_modules/.vite/deps/react-dom_client.js?v=9:9:1)\n"
        f"    at report ({ORIGIN}/__kiln/reporter.js:50:3)\n"
        f"    at App ({ORIGIN}/src/App.jsx?t=17:7:13)\n"
        f"    at main ({ORIGIN}/src/main.jsx:3:1)"
    )
    error = normalize_report(raw(stack=stack), origin=ORIGIN)
    assert error is not None
    assert error.source == SourceLocation("src/App.jsx", 7, 13)


def test_merge_sums_identical_reports_in_order() -> None:
    a = PreviewError("uncaught", "a", "", None, "u", 2)
    b = PreviewError("console_error", "a", "", None, "u")
    merged = merge([a, b, a, b.with_count(5)])
    assert [(e.kind, e.count) for e in merged] == [("uncaught", 4), ("console_error", 6)]


def test_the_deduper_counts_repeats_within_its_window() -> None:
    clock = Clock()
    dedup = ReportDeduper(window=10.0, clock=clock)
    error = PreviewError("uncaught", "a", "", None, "u")
    assert dedup.admit(error) == error
    assert dedup.admit(error) is None
    assert dedup.admit(error.with_count(3)) is None
    clock.now += 10.0
    again = dedup.admit(error)
    assert again is not None
    assert again.count == 1 + 4
    assert dedup.admit(PreviewError("uncaught", "b", "", None, "u")) is not None


def test_the_deduper_forgets_the_oldest_past_its_capacity() -> None:
    dedup = ReportDeduper(capacity=2, clock=Clock())
    errors = [PreviewError("uncaught", str(n), "", None, "u") for n in range(3)]
    for error in errors:
        assert dedup.admit(error) is not None
    assert dedup.admit(errors[0]) is not None  # forgotten: goes through again
    assert dedup.admit(errors[2]) is None


def test_the_token_bucket() -> None:
    clock = Clock()
    bucket = TokenBucket(rate=2.0, burst=3, clock=clock)
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]
    clock.now += 0.5
    assert bucket.take()
    assert not bucket.take()
    clock.now += 100
    assert bucket.available() == 3


@pytest.mark.parametrize(
    ("rate", "burst"), [pytest.param(0, 1, id="rate"), pytest.param(1, 0, id="burst")]
)
def test_a_token_bucket_needs_a_rate_and_a_burst(rate: float, burst: float) -> None:
    with pytest.raises(ValueError, match="token bucket"):
        TokenBucket(rate, burst)
