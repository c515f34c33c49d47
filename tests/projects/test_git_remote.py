"""app/projects/git_remote.py against a real git smart-HTTP server (git http-backend)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.projects import git_remote
from app.projects.errors import (
    ImportRefused,
    RemoteAuthFailed,
    RemoteNotFastForward,
    RemoteNotFound,
    RemoteUnreachable,
    RemoteUrlRefused,
)
from app.projects.git_remote import Remote, RemoteLimits, check_url, clone_files, push
from app.projects.git_store import GitProjectStore
from app.projects.store import VersionInfo
from tests.projects.git_http import GitServer, cloned_versions, git, git_server, sha256s

CHAT = "chat1"
TOKEN = "s3cret-token-value-123"
LIMITS = RemoteLimits(timeout_seconds=60.0, max_files=100, max_bytes=2**20)
VERSIONS = (
    {"index.html": b"<h1>one</h1>", "src/a.js": b"export const a = 1\n"},
    {"index.html": b"<h1>two</h1>", "src/a.js": b"export const a = 1\n", "b.css": b"p{}"},
    {"index.html": b"<h1>three</h1>", "b.css": b"p{}", "\u00e9t\u00e9.txt": b"\x00\xff"},
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[GitServer]:
    root = tmp_path / "served"
    root.mkdir()
    with git_server(root) as running:
        yield running


@pytest.fixture
def store(tmp_path: Path) -> GitProjectStore:
    projects = GitProjectStore(tmp_path / "projects")
    for number, files in enumerate(VERSIONS, 1):
        projects.commit(CHAT, files, VersionInfo(turn=number))
    return projects


def test_a_push_gives_one_commit_per_version_with_the_same_files(
    server: GitServer, store: GitProjectStore, tmp_path: Path
) -> None:
    server.bare("app")
    result = push(store.repository(CHAT), Remote(server.url("app")), LIMITS)
    assert result.outcome == "pushed"
    assert result.commit == store.version(CHAT, "latest").id
    assert cloned_versions(server.url("app"), tmp_path / "clone") == [
        sha256s(files) for files in VERSIONS
    ]


def test_a_second_push_after_a_new_version_is_a_fast_forward(
    server: GitServer, store: GitProjectStore, tmp_path: Path
) -> None:
    remote_repo = server.bare("app")
    remote = Remote(server.url("app"), branch="kiln")
    first = push(store.repository(CHAT), remote, LIMITS)
    assert push(store.repository(CHAT), remote, LIMITS).outcome == "up_to_date"
    store.commit(CHAT, {"index.html": b"<h1>four</h1>"}, VersionInfo(turn=4))
    second = push(store.repository(CHAT), remote, LIMITS)
    assert second.outcome == "pushed"
    assert git(remote_repo, "rev-parse", "refs/heads/kiln").strip() == second.commit
    git(remote_repo, "merge-base", "--is-ancestor", first.commit, second.commit)  # fast-forward
    assert len(cloned_versions(server.url("app"), tmp_path / "clone", "kiln")) == 4


def test_a_diverged_remote_is_refused_in_words_and_left_unchanged(
    server: GitServer, store: GitProjectStore, tmp_path: Path
) -> None:
    remote_repo = server.bare("app")
    push(store.repository(CHAT), Remote(server.url("app")), LIMITS)
    elsewhere = tmp_path / "elsewhere"
    git(tmp_path, "clone", "--quiet", server.url("app"), str(elsewhere))
    (elsewhere / "README.md").write_text("theirs\n")
    git(elsewhere, "add", "README.md")
    git(elsewhere, "commit", "--quiet", "-m", "a change made elsewhere")
    git(elsewhere, "push", "--quiet", "origin", "main")
    theirs = git(remote_repo, "rev-parse", "refs/heads/main")
    store.commit(CHAT, {"index.html": b"<h1>ours</h1>"}, VersionInfo(turn=4))
    with pytest.raises(RemoteNotFastForward, match="never force-pushes"):
        push(store.repository(CHAT), Remote(server.url("app")), LIMITS)
    assert git(remote_repo, "rev-parse", "refs/heads/main") == theirs


@pytest.mark.parametrize(
    "given", [pytest.param("", id="no-token"), pytest.param("wrong", id="wrong-token")]
)
def test_a_refused_token_is_said_and_never_shown(
    tmp_path: Path, store: GitProjectStore, given: str
) -> None:
    root = tmp_path / "served"
    root.mkdir()
    with git_server(root, token=TOKEN) as server:
        server.bare("app")
        with pytest.raises(RemoteAuthFailed) as refused:
            push(store.repository(CHAT), Remote(server.url("app"), token=given), LIMITS)
        assert given == "" or given not in str(refused.value)


def test_the_right_token_goes_as_a_header_never_in_the_url(
    tmp_path: Path, store: GitProjectStore
) -> None:
    root = tmp_path / "served"
    root.mkdir()
    with git_server(root, token=TOKEN) as server:
        server.bare("app")
        remote = Remote(server.url("app"), token=TOKEN)
        assert push(store.repository(CHAT), remote, LIMITS).outcome == "pushed"
        assert TOKEN not in repr(remote)
        assert all(TOKEN not in request["path"] for request in server.requests)
        assert any("authorization" in request for request in server.requests)


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("file:///etc", id="file"),
        pytest.param("ext::sh -c touch% /tmp/pwned", id="ext"),
        pytest.param("/srv/repo.git", id="local-path"),
        pytest.param("../other", id="relative-path"),
        pytest.param("https://user:pw@example.com/r.git", id="credential-in-url"),
        pytest.param("https://tok@example.com/r.git", id="user-in-url"),
        pytest.param("ftp://example.com/r.git", id="ftp"),
        pytest.param("ssh://-oProxyCommand=touch%20/tmp/pwned/x", id="ssh-option-host"),
        pytest.param("--upload-pack=touch /tmp/pwned", id="option"),
        pytest.param("-oProxyCommand=x@host:path", id="scp-option"),
    ],
)
def test_a_url_that_could_read_the_host_or_run_a_command_is_refused(
    url: str, store: GitProjectStore, tmp_path: Path
) -> None:
    with pytest.raises(RemoteUrlRefused):
        push(store.repository(CHAT), Remote(url), LIMITS)
    with pytest.raises(RemoteUrlRefused):
        clone_files(Remote(url), LIMITS)
    assert not Path("/tmp/pwned").exists()


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("https://github.com/a/b.git", id="https"),
        pytest.param("git@github.com:a/b.git", id="scp-like"),
        pytest.param("ssh://git@host:22/a/b", id="ssh"),
    ],
)
def test_network_urls_are_taken(url: str) -> None:
    assert check_url(url) == url


def test_a_missing_repository_is_not_found(server: GitServer, store: GitProjectStore) -> None:
    with pytest.raises(RemoteNotFound):
        push(store.repository(CHAT), Remote(server.url("absent")), LIMITS)


def test_a_closed_port_is_unreachable(store: GitProjectStore) -> None:
    with socket.socket() as probe:  # a port nobody listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(RemoteUnreachable):
        push(store.repository(CHAT), Remote(f"http://127.0.0.1:{port}/r.git"), LIMITS)


def made_repository(server: GitServer, tmp_path: Path, files: dict[str, bytes]) -> str:
    """A served repository whose tip holds ``files`` (and an older commit before it)."""
    server.bare("source")
    work = tmp_path / "work"
    git(tmp_path, "init", "--quiet", "--initial-branch=main", str(work))
    (work / "old.txt").write_text("gone in the tip\n")
    git(work, "add", "-A")
    git(work, "commit", "--quiet", "-m", "old")
    (work / "old.txt").unlink()
    for path, content in files.items():
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_bytes(content)
    git(work, "add", "-A")
    git(work, "commit", "--quiet", "-m", "tip")
    git(work, "push", "--quiet", server.url("source"), "main")
    return server.url("source")


def test_clone_files_gives_the_tips_files_byte_for_byte(server: GitServer, tmp_path: Path) -> None:
    # Raw blobs: no attribute applies on the way out ($Id$ stays, CRLF stays).
    files = {
        "index.html": b"<p>$Id$</p>\r\n",
        "src/x.js": b"\x00\x01",
        ".gitattributes": b"* ident\n",
    }
    url = made_repository(server, tmp_path, files)
    (tmp_path / "work" / "link").symlink_to("index.html")
    git(tmp_path / "work", "add", "link")
    git(tmp_path / "work", "commit", "--quiet", "-m", "a link")
    git(tmp_path / "work", "push", "--quiet", url, "main")
    cloned, skipped = clone_files(Remote(url, branch=""), LIMITS)
    assert cloned == files
    assert skipped == ["link"]


@pytest.mark.parametrize(
    "limits",
    [
        pytest.param(RemoteLimits(max_files=2), id="files"),
        pytest.param(RemoteLimits(max_bytes=20), id="bytes"),
    ],
)
def test_a_repository_over_the_limits_is_refused(
    server: GitServer, tmp_path: Path, limits: RemoteLimits
) -> None:
    url = made_repository(server, tmp_path, {"a": b"1" * 15, "b": b"2" * 15, "c": b"3"})
    # The tree's count or bytes, or (a tiny cap, a slow host) the download's allowance first.
    with pytest.raises(ImportRefused, match=r"over the|download passed"):
        clone_files(Remote(url, branch="main"), limits)


def test_a_missing_branch_is_not_found(server: GitServer, tmp_path: Path) -> None:
    url = made_repository(server, tmp_path, {"a": b"1"})
    with pytest.raises(RemoteNotFound):
        clone_files(Remote(url, branch="nope"), LIMITS)


@pytest.mark.parametrize(
    "url",
    [pytest.param("file:///etc", id="file"), pytest.param("ext::sh -c true", id="ext")],
)
def test_git_itself_refuses_what_the_url_check_would(url: str, tmp_path: Path) -> None:
    """The second wall: a URL that got past the check (a redirect, a submodule) meets git's
    protocol allow-list."""
    with pytest.raises(RemoteUrlRefused, match="does not reach"):
        git_remote._run(["ls-remote", "--", url], tmp_path, Remote(url), LIMITS)


def test_a_remote_that_never_answers_meets_the_time_limit(store: GitProjectStore) -> None:
    with socket.socket() as silent:  # accepts connections (the backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/r.git"
        with pytest.raises(RemoteUnreachable, match="did not finish within 2 s"):
            push(store.repository(CHAT), Remote(url), RemoteLimits(timeout_seconds=2.0))
