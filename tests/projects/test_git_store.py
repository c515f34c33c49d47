"""The local project store on real git: versions, diffs, files, zips, atomicity."""

from __future__ import annotations

import io
import os
import stat
import subprocess
import time
import zipfile
from pathlib import Path

import pytest

from app.projects import git_store
from app.projects.errors import ProjectError, VersionNotFound
from app.projects.git_store import GitProjectStore, blob_id
from app.projects.store import VersionInfo

FIRST = {"package.json": b'{"name": "app"}\n', "src/App.jsx": b"export default 1;\n"}


@pytest.fixture
def store(tmp_path: Path) -> GitProjectStore:
    return GitProjectStore(tmp_path / "projects")


def test_a_chat_without_versions_lists_none(store: GitProjectStore) -> None:
    assert store.versions("c1") == []
    with pytest.raises(VersionNotFound, match="'latest'"):
        store.version("c1", "latest")


def test_each_commit_is_a_numbered_version_with_a_summary(store: GitProjectStore) -> None:
    first = store.commit("c1", FIRST, VersionInfo("run1", 1))
    second_files = {"package.json": FIRST["package.json"], "src/App.jsx": b"export default 2;\n"}
    second_files["src/new.js"] = b"new\n"
    second = store.commit("c1", second_files, VersionInfo("run1", 2, "post-generation fixes"))
    third = store.commit("c1", {"src/new.js": b"new\n"}, VersionInfo("run2", 1))
    assert first is not None
    assert second is not None
    assert third is not None
    assert [v.number for v in store.versions("c1")] == [1, 2, 3]
    assert first.summary == "2 added, 0 changed, 0 removed"
    assert second.summary == "1 added, 1 changed, 0 removed"
    assert third.summary == "0 added, 0 changed, 2 removed"
    assert (second.info.run, second.info.turn, second.info.note) == (
        "run1",
        2,
        "post-generation fixes",
    )
    assert [(c.path, c.status) for c in third.changes] == [
        ("package.json", "D"),
        ("src/App.jsx", "D"),
    ]


def test_an_unchanged_project_is_no_new_version(store: GitProjectStore) -> None:
    store.commit("c1", FIRST, VersionInfo("run1", 1))
    assert store.commit("c1", dict(FIRST), VersionInfo("run1", 2)) is None
    forced = store.commit("c1", FIRST, VersionInfo(note="restored version 1"), always=True)
    assert forced is not None
    assert forced.number == 2
    assert forced.changes == ()


def test_files_come_back_byte_for_byte(store: GitProjectStore) -> None:
    binary = {"logo.png": bytes(range(256)) * 4, "a b/ü.txt": "grüß\n".encode()}
    store.commit("c1", binary, VersionInfo("r", 1))
    assert store.files("c1", 1) == binary
    assert store.files("c1", "latest") == binary


def test_the_diff_shows_exactly_the_versions_changes(store: GitProjectStore) -> None:
    store.commit("c1", FIRST, VersionInfo("r", 1))
    store.commit("c1", {**FIRST, "src/App.jsx": b"export default 2;\n"}, VersionInfo("r", 2))
    (diff,) = store.diff("c1", 2)
    assert (diff.path, diff.status) == ("src/App.jsx", "M")
    assert "-export default 1;\n+export default 2;\n" in diff.diff
    assert [d.path for d in store.diff("c1", 1)] == ["package.json", "src/App.jsx"]


def test_the_archive_unpacks_to_the_versions_files(store: GitProjectStore) -> None:
    store.commit("c1", FIRST, VersionInfo("r", 1))
    with zipfile.ZipFile(io.BytesIO(store.archive("c1", "latest"))) as archive:
        files = {n: archive.read(n) for n in archive.namelist() if not n.endswith("/")}
    assert files == FIRST


@pytest.mark.parametrize(
    "ref",
    [
        pytest.param(0, id="zero"),
        pytest.param(2, id="past-the-end"),
        pytest.param("x", id="word"),
        pytest.param("²", id="superscript-one"),
        pytest.param("\u0661", id="arabic-indic-one"),  # int() reads it as 1
    ],
)
def test_an_unknown_version_is_not_found(store: GitProjectStore, ref: int | str) -> None:
    store.commit("c1", FIRST, VersionInfo("r", 1))
    with pytest.raises(VersionNotFound):
        store.version("c1", ref)


@pytest.mark.parametrize(
    "chat",
    [
        pytest.param("../x", id="climbs"),
        pytest.param("", id="empty"),
        pytest.param("a/b", id="slash"),
    ],
)
def test_a_chat_id_that_is_no_name_is_refused(store: GitProjectStore, chat: str) -> None:
    with pytest.raises(ProjectError, match="not a chat id"):
        store.commit(chat, FIRST, VersionInfo())


def test_an_unsafe_path_is_never_recorded(store: GitProjectStore) -> None:
    with pytest.raises(ProjectError, match="outside the workspace"):
        store.commit("c1", {"../escape.txt": b"x"}, VersionInfo())
    assert store.versions("c1") == []


def test_a_commit_cut_short_leaves_the_previous_version(store: GitProjectStore) -> None:
    store.commit("c1", FIRST, VersionInfo("r", 1))
    repo = store.repository("c1")
    stream = b"commit refs/heads/main\ncommitter k <k@x> 1 +0000\ndata 2\nx\ndeleteall\n"
    cut = subprocess.run(
        ["git", "-C", str(repo), "fast-import", "--quiet", "--done"],
        input=stream,
        capture_output=True,
    )
    assert cut.returncode != 0
    assert [v.number for v in store.versions("c1")] == [1]
    assert store.files("c1", "latest") == FIRST


def test_blob_ids_are_gits() -> None:
    made = subprocess.run(["git", "hash-object", "--stdin"], input=b"hello\n", capture_output=True)
    assert blob_id(b"hello\n") == made.stdout.decode().strip()


def test_a_deleted_project_is_gone_and_others_stay(store: GitProjectStore) -> None:
    store.commit("c1", FIRST, VersionInfo("run1", 1))
    store.commit("c2", FIRST, VersionInfo("run2", 1))
    store.delete("c1")
    assert store.versions("c1") == []
    assert not store.repository("c1").exists()
    assert sorted(p.name for p in store.root.iterdir()) == ["c2"]
    assert [v.number for v in store.versions("c2")] == [1]
    store.delete("c1")  # nothing left to remove: no error


ATTRIBUTES = (
    b"* text eol=crlf\n*.css filter=x\n* ident\nsecret.txt export-ignore\n"
    b"stamp.txt export-subst\n*.md -diff\n"
)
EXACT = {
    ".gitattributes": ATTRIBUTES,
    "src/App.jsx": b"// $Id$\nexport default 1;\n",
    "src/app.css": b"body { margin: 0 }\n",
    "secret.txt": b"kept\n",
    "stamp.txt": b"$Format:%H$\n",
    "README.md": b"one\ntwo\n",
    "windows.txt": b"already\r\ncrlf\r\n",
}
NAMES = {
    'say "hi".txt': b"quote\n",
    '"leading quote': b"leading\n",
    "back\\slash.js": b"backslash\n",
    "tab\there.js": b"tab\n",
    "new\nline.js": b"newline\n",
    "carriage\rreturn": b"cr\n",
    "bell\a and del\x7f": b"controls\n",
    "src/ünï cödé 文字.js": b"utf-8\n",
    "diff --git a/x b/x": b"a header-like name\n",
    "M": b"a status-like name\n",
    "\nA": b"a status-like name after a newline\n",
}


def zip_contents(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_git_attributes_in_the_project_change_nothing(store: GitProjectStore) -> None:
    """A .gitattributes the app wrote (line endings, a filter, ident, export-ignore and
    export-subst, -diff) changes neither what a version gives back nor its diff."""
    store.commit("c1", EXACT, VersionInfo("r", 1))
    assert store.files("c1", 1) == EXACT
    assert zip_contents(store.archive("c1", 1)) == EXACT
    store.commit("c1", {**EXACT, "README.md": b"one\nthree\n"}, VersionInfo("r", 2))
    (diff,) = store.diff("c1", 2)
    assert diff.path == "README.md"
    assert "-two\n+three\n" in diff.diff  # a text diff, not "Binary files differ"


def test_the_hosts_git_settings_and_variables_change_nothing(
    store: GitProjectStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A GIT_DIR, an external diff or settings in the environment of the server reach no
    command of the store."""
    store.commit("c1", EXACT, VersionInfo("r", 1))
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", "false")
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "core.autocrlf")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "true")
    store.commit("c1", {**EXACT, "README.md": b"one\nthree\n"}, VersionInfo("r", 2))
    assert store.files("c1", 1) == EXACT
    assert "+three" in store.diff("c1", 2)[0].diff


def test_any_file_name_round_trips(store: GitProjectStore) -> None:
    """Quotes, backslashes, tabs, newlines, other control characters and names that look
    like git's own output: commit, versions, files, diff and zip keep every name."""
    first = store.commit("c1", {**FIRST, **NAMES}, VersionInfo("r", 1))
    assert first is not None
    assert {change.path for change in first.changes} == {*FIRST, *NAMES}
    assert store.files("c1", 1) == {**FIRST, **NAMES}
    assert zip_contents(store.archive("c1", 1)) == {**FIRST, **NAMES}
    changed = {**FIRST, **{path: content + b"more\n" for path, content in NAMES.items()}}
    del changed["tab\there.js"]
    store.commit("c1", changed, VersionInfo("r", 2))
    (_, second) = store.versions("c1")
    assert {(c.path, c.status) for c in second.changes} == {
        *((path, "M") for path in NAMES if path != "tab\there.js"),
        ("tab\there.js", "D"),
    }
    diffs = store.diff("c1", 2)
    assert [d.path for d in diffs] == [c.path for c in second.changes]
    assert all("+more\n" in d.diff for d in diffs if d.status == "M")
    assert store.files("c1", 2) == changed


def test_a_name_that_is_not_utf8_is_refused_in_words(store: GitProjectStore) -> None:
    name = b"\xff.js".decode("utf-8", "surrogateescape")
    with pytest.raises(ProjectError, match="not UTF-8"):
        store.commit("c1", {name: b"x"}, VersionInfo())
    assert store.versions("c1") == []


def test_the_zip_is_dated_when_the_version_was_made(store: GitProjectStore) -> None:
    version = store.commit("c1", FIRST, VersionInfo("r", 1))
    assert version is not None
    with zipfile.ZipFile(io.BytesIO(store.archive("c1", 1))) as archive:
        stamps = {entry.date_time for entry in archive.infolist()}
    made = int(version.created)
    assert stamps == {time.gmtime(made - made % 2)[:6]}  # a zip counts time in 2 s steps


def test_a_project_is_its_owners_alone(store: GitProjectStore) -> None:
    before = os.umask(0o022)
    try:
        store.commit("c1", FIRST, VersionInfo("r", 1))
        store.commit("c1", {**FIRST, "b.js": b"b\n"}, VersionInfo("r", 2))
    finally:
        os.umask(before)
    paths = [store.root, *store.root.rglob("*")]
    shared = {
        str(p): oct(stat.S_IMODE(p.stat().st_mode)) for p in paths if p.stat().st_mode & 0o077
    }
    assert shared == {}


def test_a_repository_that_shows_another_owner_is_still_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a shared volume a repository made by another host's process may show another owner
    (git's own test switch stands in for that): its commands still run, through a symlinked
    path too."""
    (tmp_path / "shared").mkdir()
    (tmp_path / "mounted").symlink_to(tmp_path / "shared")
    store = GitProjectStore(tmp_path / "mounted" / "projects")
    store.commit("c1", FIRST, VersionInfo("r", 1))
    monkeypatch.setitem(git_store.GIT_ENV, "GIT_TEST_ASSUME_DIFFERENT_OWNER", "1")
    store.commit("c1", {**FIRST, "b.js": b"b\n"}, VersionInfo("r", 2))
    assert [v.number for v in store.versions("c1")] == [1, 2]
    assert store.files("c1", 2) == {**FIRST, "b.js": b"b\n"}
    assert "+b" in store.diff("c1", 2)[0].diff


def test_a_projects_folder_kiln_cannot_use_is_refused_in_words(tmp_path: Path) -> None:
    (tmp_path / "projects").write_text("a file where the shared volume should be")
    store = GitProjectStore(tmp_path / "projects")
    with pytest.raises(ProjectError, match=r"cannot use the projects folder '.*projects'"):
        store.commit("c1", FIRST, VersionInfo("r", 1))


@pytest.mark.parametrize(
    ("age", "recorded"),
    [
        pytest.param(3600.0, True, id="a-dead-writers-lock-is-removed"),
        pytest.param(0.0, False, id="a-live-writers-lock-is-left"),
    ],
)
def test_a_ref_lock_left_by_a_killed_writer(
    store: GitProjectStore, age: float, recorded: bool
) -> None:
    store.commit("c1", FIRST, VersionInfo("r", 1))
    lock = store.repository("c1") / "refs" / "heads" / "main.lock"
    lock.write_text("")
    os.utime(lock, (time.time() - age, time.time() - age))
    second = {**FIRST, "b.js": b"b\n"}
    if recorded:
        assert store.commit("c1", second, VersionInfo("r", 2)) is not None
        assert not lock.exists()
    else:
        with pytest.raises(ProjectError, match=r"main\.lock"):
            store.commit("c1", second, VersionInfo("r", 2))
        assert lock.exists()
    assert len(store.versions("c1")) == (2 if recorded else 1)
    assert not list((store.repository("c1") / "refs").rglob("kiln/staging/*"))  # none left


class Killed(BaseException):
    """A writer's death between fast-import and the swap (nothing of kiln catches it)."""


def _killed_before_the_swap(
    store: GitProjectStore, monkeypatch: pytest.MonkeyPatch, files: dict[str, bytes], at: float
) -> None:
    """Commit ``files`` as a writer whose clock says ``at`` and that dies once fast-import
    wrote its staging ref, before ``update-ref`` moves the branch."""
    real_git = git_store._git

    def dying_git(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
        if args[0] == "update-ref" and b"update refs/heads/main" in (stdin or b""):
            raise Killed
        return real_git(repo, *args, stdin=stdin)

    with monkeypatch.context() as patch:
        patch.setattr(git_store, "_git", dying_git)
        patch.setattr(git_store.time, "time", lambda: at)
        with pytest.raises(Killed):
            store.commit("c1", files, VersionInfo("dead", 1))


def test_staging_refs_of_killed_writers_are_swept_once_old(
    store: GitProjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.commit("c1", FIRST, VersionInfo("r", 1))
    staging = store.repository("c1") / "refs" / "kiln" / "staging"
    _killed_before_the_swap(store, monkeypatch, {**FIRST, "young.js": b"y\n"}, time.time())
    (young_ref,) = staging.iterdir()
    old = time.time() - git_store.STALE_STAGING_SECONDS - 60  # its sweep sees the young one
    _killed_before_the_swap(store, monkeypatch, {**FIRST, "old.js": b"o\n"}, old)
    assert len(list(staging.iterdir())) == 2  # what killed writers leave behind
    assert store.commit("c1", {**FIRST, "b.js": b"b\n"}, VersionInfo("r", 2)) is not None
    assert list(staging.iterdir()) == [young_ref]  # it may be a live writer's: it stays
    assert [v.number for v in store.versions("c1")] == [1, 2]
    assert set(store.files("c1", "latest")) == {*FIRST, "b.js"}


def test_without_staging_refs_the_sweep_runs_no_git(
    store: GitProjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.commit("c1", FIRST, VersionInfo("r", 1))
    monkeypatch.setattr(git_store, "_git", None)  # any git command would fail here
    assert git_store.sweep_staging_refs(store.repository("c1"), time.time()) == []
