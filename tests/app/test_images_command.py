"""Tests for ``kiln images`` (app.cli.images_command): arguments, output, a real run on Docker."""

from __future__ import annotations

import pytest

from app.cli import main
from app.cli.images_command import format_results, format_statuses
from sandbox.images.builder import SERVICE_IMAGES, ImageStatus
from sandbox.images.docker_build import BuildResult
from sandbox.images.templates import TEMPLATES


def test_an_unknown_template_is_bad_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["images", "build", "--template", "rails"])
    assert exited.value.code == 2
    assert "rails" in capsys.readouterr().err


def test_a_bad_ca_bundle_setting_is_bad_input(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KILN_SANDBOX_CA_BUNDLE", "/nonexistent/ca.pem")
    assert main(["images", "build"]) == 2
    assert "/nonexistent/ca.pem" in capsys.readouterr().err


def test_the_summary_has_a_line_per_image_and_the_total() -> None:
    results = [
        BuildResult("base", "node:20-bookworm-slim", "skipped", "sha256:a", 0.0),
        BuildResult("vanilla", "kiln/sandbox-vanilla:latest", "built", "sha256:b", 12.4),
    ]
    lines = format_results(results, 13.0).splitlines()
    assert lines[0].split() == ["base", "skipped", "0s", "node:20-bookworm-slim"]
    assert lines[1].split() == ["vanilla", "built", "12s", "kiln/sandbox-vanilla:latest"]
    assert lines[2] == "done in 13s"


def test_the_listing_shows_short_ids_and_sizes() -> None:
    rows = [
        ImageStatus(
            "vanilla", "kiln/sandbox-vanilla:latest", "stale", "sha256:" + "f" * 64, 200_000_000
        ),
        ImageStatus("nextjs", "kiln/sandbox-nextjs:latest", "missing", None, None),
    ]
    lines = format_statuses(rows).splitlines()
    assert lines[1].split() == [
        "vanilla",
        "stale",
        "f" * 12,
        "200MB",
        "kiln/sandbox-vanilla:latest",
    ]
    assert lines[2].split() == ["nextjs", "missing", "-", "-", "kiln/sandbox-nextjs:latest"]


@pytest.mark.docker
def test_ls_lists_the_base_every_template_the_npm_proxy_and_the_render_browser(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["images", "ls"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]]
    assert names == ["base", *TEMPLATES, *SERVICE_IMAGES]


@pytest.mark.docker
def test_building_one_template_reports_it(capsys: pytest.CaptureFixture[str]) -> None:
    # Up to date in a prepared checkout (a skip); built first if it is not.
    assert main(["images", "build", "--template", "vanilla"]) == 0
    summary = capsys.readouterr().out.splitlines()[-3:]
    assert [line.split()[0] for line in summary] == ["base", "vanilla", "done"]
