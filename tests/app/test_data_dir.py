"""The data directory is private: folders 0700, files 0600, also for what an older kiln made."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

from app.config import ServiceSettings
from app.data_dir import create_private_file, make_private, private_folder, write_private_text


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def modes(folder: Path) -> dict[str, int]:
    """``relative path -> mode`` of every folder and regular file under ``folder``."""
    found = {".": mode(folder)}
    for root, folders, files in os.walk(folder):
        for name in (*folders, *files):
            path = Path(root, name)
            if path.is_dir() or path.is_file():
                found[str(path.relative_to(folder))] = mode(path)
    return found


def old_data_dir(root: Path) -> Path:
    """A data dir as kiln made it before: world-readable database, projects and Redis files."""
    data = root / "data"
    for folder in ("projects/c1/objects/pack", "redis/appendonlydir"):
        (data / folder).mkdir(parents=True)
    for file in ("kiln.db", "kiln.db-wal", "kiln.db-shm", "projects/c1/HEAD", "redis/url"):
        (data / file).write_text("x")
    (data / "projects/c1/hooks").mkdir()
    (data / "projects/c1/hooks/update.sample").write_text("#!/bin/sh\n")
    for path in [data, *data.rglob("*")]:
        path.chmod(0o755 if path.is_dir() or path.suffix == ".sample" else 0o644)
    return data


def test_everything_is_made_private_and_an_owners_execute_bit_is_kept(tmp_path: Path) -> None:
    data = old_data_dir(tmp_path)
    assert make_private(data) == []
    found = modes(data)
    assert found["kiln.db"] == found["kiln.db-wal"] == found["redis/url"] == 0o600
    assert found["projects/c1/hooks/update.sample"] == 0o700
    assert {found[f] for f in (".", "projects", "projects/c1/objects/pack", "redis")} == {0o700}
    assert all(value & 0o077 == 0 for value in found.values()), found


def test_links_sockets_and_what_they_point_at_are_left_alone(tmp_path: Path) -> None:
    data, outside = tmp_path / "data", tmp_path / "outside.txt"
    data.mkdir()
    outside.write_text("not kiln's")
    outside.chmod(0o644)
    (data / "link").symlink_to(outside)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(data / "redis.sock"))
    try:
        os.chmod(data / "redis.sock", 0o700)
        assert make_private(data) == []
        assert mode(data / "redis.sock") == 0o700
    finally:
        listener.close()
    assert mode(outside) == 0o644


def test_a_missing_folder_is_nothing_to_do(tmp_path: Path) -> None:
    assert make_private(tmp_path / "absent") == []


def test_any_command_on_an_old_data_dir_closes_the_folder_itself(tmp_path: Path) -> None:
    data = old_data_dir(tmp_path)
    settings = ServiceSettings.from_env({"KILN_DATA_DIR": str(data)})
    assert (mode(settings.data_dir), mode(data / "secret.key")) == (0o700, 0o600)


def test_a_new_data_dir_is_private(tmp_path: Path) -> None:
    data = ServiceSettings.from_env({"KILN_DATA_DIR": str(tmp_path / "new" / "data")}).data_dir
    assert mode(data) == 0o700
    assert mode(data / "secret.key") == 0o600


def test_new_files_and_folders_are_private_whatever_the_umask(tmp_path: Path) -> None:
    before = os.umask(0)
    try:
        create_private_file(tmp_path / "created")
        rewritten = tmp_path / "rewritten"
        rewritten.write_text("old")
        rewritten.chmod(0o666)
        write_private_text(rewritten, "new\n")
        folder = private_folder(tmp_path / "a" / "folder")
    finally:
        os.umask(before)
    assert (mode(tmp_path / "created"), mode(rewritten), mode(folder)) == (0o600, 0o600, 0o700)
    assert rewritten.read_text() == "new\n"
