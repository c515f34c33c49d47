"""The kiln and Redis images' builds (app.deploy.service_images): contexts, settings, recipes.

The real builds run in ``test_compose.py``, which needs the images anyway.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from app.deploy.pip_index import PipIndex
from app.deploy.service_images import (
    HOST_CA_FILE,
    KILN_DOCKERFILE,
    TIKTOKEN_ENCODINGS,
    TIKTOKEN_FOLDER,
    ServiceImageBuilder,
    ServiceImageSettings,
    ca_files,
    source_files,
    tiktoken_files,
)
from app.tokens import cache_file_for
from sandbox.docker_boundary import connect
from sandbox.errors import ImageBuildFailed
from sandbox.images.settings import ImageBuildSettings

ROOT = Path(__file__).resolve().parents[2]
# The checkout's sibling ``shared/`` folder (``/work/shared`` here, beside the clone in CI).
TIKTOKEN_CACHE = ROOT.parent / "shared" / "tiktoken-cache"


def test_the_context_is_the_source_tree_the_dockerignore_lets_in() -> None:
    paths = {f.path for f in source_files(ROOT)}
    for expected in ("pyproject.toml", "app/cli/__init__.py", "parser/__init__.py"):
        assert expected in paths
    assert KILN_DOCKERFILE in paths
    assert "images/kiln/kiln.sh" in paths
    assert not [p for p in paths if p.startswith(("tests/", ".git/", "bench/"))]
    assert not [p for p in paths if "__pycache__" in p]


def test_a_hand_made_kiln_build_folder_is_left_to_plain_builds(tmp_path: Path) -> None:
    (tmp_path / ".dockerignore").write_text("*\n!app\n!kiln-build\n")
    for name in ("app/main.py", "kiln-build/kiln-build-ca.pem", "other.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(name)
    files = source_files(tmp_path, dockerfile="app/main.py")
    # Docker always sends .dockerignore itself.
    assert [f.path for f in files] == [".dockerignore", "app/main.py"]


def test_a_root_without_dockerignore_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ImageBuildFailed, match=r"no \.dockerignore"):
        source_files(tmp_path)


def test_the_cached_encodings_go_into_the_context() -> None:
    files = tiktoken_files(str(TIKTOKEN_CACHE))
    expected = [cache_file_for(name, str(TIKTOKEN_CACHE)) for name in TIKTOKEN_ENCODINGS]
    assert [f.path for f in files] == [f"{TIKTOKEN_FOLDER}/{p.name}" for p in expected]
    assert [f.content for f in files] == [p.read_bytes() for p in expected]


@pytest.mark.parametrize("cache_dir", [pytest.param("", id="unset"), pytest.param("empty")])
def test_missing_encodings_are_left_to_the_build(cache_dir: str, tmp_path: Path) -> None:
    assert tiktoken_files(str(tmp_path) if cache_dir else "") == []


def test_the_dockerfile_warms_the_encodings_kiln_uses() -> None:
    dockerfile = (ROOT / KILN_DOCKERFILE).read_text()
    for name in TIKTOKEN_ENCODINGS:
        assert f'"{name}"' in dockerfile


def test_the_ca_bundle_is_added_only_when_there_is_one(tmp_path: Path) -> None:
    bundle = tmp_path / "ca.pem"
    bundle.write_bytes(b"pem")
    assert [(f.path, f.content) for f in ca_files(bundle)] == [(HOST_CA_FILE, b"pem")]
    assert ca_files(None) == []


def test_settings_come_from_kiln_variables() -> None:
    env = {
        "KILN_SERVICE_IMAGE": "registry.test/kiln:1",
        "KILN_REDIS_IMAGE": "registry.test/redis:1",
        "KILN_PYTHON_BASE": "python:3.11-slim",
        "KILN_REDIS_BASE": "redis:7",
        "KILN_PIP_INDEX_URL": "https://pypi.test/simple",
        "TIKTOKEN_CACHE_DIR": "/cache",
    }
    settings = ServiceImageSettings.from_env(env)
    assert settings.kiln_image == "registry.test/kiln:1"
    assert settings.redis_image == "registry.test/redis:1"
    assert (settings.python_base, settings.redis_base) == ("python:3.11-slim", "redis:7")
    assert settings.pip.index_url == "https://pypi.test/simple"
    assert settings.tiktoken_cache_dir == "/cache"


@pytest.fixture
def client() -> Iterator[docker.DockerClient]:
    """A Docker client (the recipes themselves do not call Docker)."""
    opened = connect()
    yield opened
    opened.close()


@pytest.mark.docker
@pytest.mark.anyio
async def test_the_kiln_recipe_hashes_the_index_but_not_the_ca_bundle_or_proxies(
    client: docker.DockerClient, tmp_path: Path
) -> None:
    bundle = tmp_path / "ca.pem"
    bundle.write_bytes(b"pem")
    images = ImageBuildSettings(
        images_dir=ROOT / "images", ca_bundle=bundle, proxy_args={"HTTPS_PROXY": "http://p:3128"}
    )
    service = ServiceImageSettings(
        pip=PipIndex(index_url="https://pypi.test/simple"), tiktoken_cache_dir=str(TIKTOKEN_CACHE)
    )
    builder = ServiceImageBuilder(client, images, service, lambda line: None)
    recipe = await builder.kiln_recipe("sha256:base")
    assert recipe.dockerfile == KILN_DOCKERFILE
    assert recipe.buildargs == {
        "BASE": "python:3.11-slim-bookworm",
        "PIP_INDEX_URL": "https://pypi.test/simple",
    }
    assert recipe.hidden_buildargs == {"HTTPS_PROXY": "http://p:3128"}
    assert [f.path for f in recipe.extra_files] == [HOST_CA_FILE]
    assert sum(f.path.startswith(TIKTOKEN_FOLDER) for f in recipe.files) == 2
    other_index = ServiceImageSettings(pip=PipIndex(), tiktoken_cache_dir=str(TIKTOKEN_CACHE))
    plain = ServiceImageBuilder(client, images, other_index, lambda line: None)
    assert (await plain.kiln_recipe("sha256:base")).digest != recipe.digest
