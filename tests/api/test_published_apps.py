"""app/api/published_apps.py: which host is an app's, which file a path names, its type and
caching (served end to end in tests/api/test_publications)."""

from __future__ import annotations

import pytest

from app.api.published_apps import app_label, app_url, cache_control, content_type, file_for
from app.publish.storage import Manifest, ManifestEntry

MANIFEST = Manifest(
    {
        path: ManifestEntry("0" * 64, 1)
        for path in ("index.html", "assets/index-4f2a.js", "docs/index.html", "robots.txt")
    }
)


@pytest.mark.parametrize(
    ("host", "label"),
    [
        pytest.param("abc.apps.kiln.localhost:8000", "abc", id="with-port"),
        pytest.param("ABC.Apps.Kiln.Localhost", "abc", id="any-case"),
        pytest.param("apps.kiln.localhost", None, id="the-domain-itself"),
        pytest.param("a.b.apps.kiln.localhost", None, id="two-labels"),
        pytest.param("abc.apps.evil.example", None, id="another-domain"),
        pytest.param("abc.preview.kiln.localhost", None, id="a-preview"),
        pytest.param("kiln.localhost", None, id="the-ui"),
    ],
)
def test_only_one_label_under_the_apps_domain_is_an_app(host: str, label: str | None) -> None:
    assert app_label(host, "apps.kiln.localhost") == label


@pytest.mark.parametrize(
    ("path", "served"),
    [
        pytest.param("/", "index.html", id="root"),
        pytest.param("/assets/index-4f2a.js", "assets/index-4f2a.js", id="asset"),
        pytest.param("/docs/", "docs/index.html", id="folder-index"),
        pytest.param("/todos/3", "index.html", id="spa-route"),
        pytest.param("/missing.js", None, id="missing-file"),
        pytest.param("/nothere/", None, id="missing-folder-index"),
    ],
)
def test_the_file_a_path_names(path: str, served: str | None) -> None:
    assert file_for(MANIFEST, path) == served


def test_a_build_without_an_index_has_no_fallback() -> None:
    bare = Manifest({"a.js": ManifestEntry("0" * 64, 1)})
    assert file_for(bare, "/route") is None


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        pytest.param("index.html", "text/html; charset=utf-8", id="html"),
        pytest.param("assets/a.JS", "text/javascript; charset=utf-8", id="js-any-case"),
        pytest.param("a.css", "text/css; charset=utf-8", id="css"),
        pytest.param("a.svg", "image/svg+xml", id="svg"),
        pytest.param("a.wasm", "application/wasm", id="wasm"),
        pytest.param("v.1/LICENSE", "application/octet-stream", id="no-extension"),
        pytest.param("a.unknownext", "application/octet-stream", id="unknown"),
    ],
)
def test_content_types(path: str, kind: str) -> None:
    assert content_type(path) == kind


def test_assets_are_cached_for_a_year_and_the_rest_revalidated() -> None:
    assert cache_control("assets/index-4f2a.js") == "public, max-age=31536000, immutable"
    assert cache_control("index.html") == "no-cache"
    assert cache_control("robots.txt") == "no-cache"


def test_the_url_leaves_out_the_default_port() -> None:
    assert app_url("abc", "apps.kiln.localhost", 8000) == "http://abc.apps.kiln.localhost:8000/"
    assert app_url("abc", "apps.example.com", 443, "https") == "https://abc.apps.example.com/"
