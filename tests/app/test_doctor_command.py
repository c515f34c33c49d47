"""``kiln doctor``: every check on this machine, and failing checks with their hints; the
capacity checks (:mod:`app.cli.doctor_capacity`) from given numbers."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from app.cli import main
from app.cli.doctor_capacity import (
    InUse,
    capacity_result,
    check_capacity,
    disk_result,
    memory_result,
    networks_result,
    pids_result,
)
from app.cli.doctor_command import (
    CheckResult,
    check_data_dir,
    check_images_on,
    check_parser,
    check_redis,
    format_result,
)
from app.cli.doctor_swarm import image_source
from app.parser_choice import ParserChoice
from sandbox.backends.host_memory import HostMemory
from sandbox.disk_mounts import DEFAULT_DISK_ROOT, usable_root
from sandbox.settings import SandboxSettings
from tests.app.kiln_process import TIKTOKEN_CACHE
from tests.servers import free_port

pytestmark = [pytest.mark.docker]


def run_doctor(capsys: pytest.CaptureFixture[str], data_dir: Path) -> tuple[int, dict[str, bool]]:
    code = main(["doctor", "--data-dir", str(data_dir), "--json"])
    report = json.loads(capsys.readouterr().out)
    return code, {check["name"]: check["ok"] for check in report["checks"]}


@pytest.mark.npm
def test_everything_passes_on_a_set_up_machine(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    redis_url: str,
    instance: str,
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(TIKTOKEN_CACHE))
    monkeypatch.setenv("REDIS_URL", redis_url)
    code, checks = run_doctor(capsys, tmp_path / "data")
    assert checks == {
        "data dir": True,
        "database": True,
        "redis": True,
        "deployment": True,
        "docker": True,
        "image base": True,
        "image vite-react": True,
        "image vanilla": True,
        "image nextjs": True,
        "image npm-proxy": True,
        "image render-browser": True,
        "capacity": True,
        "memory": True,
        "pids": True,
        "networks": True,
        "disk": True,
        "warm pool": True,
        "firewall": True,
        "ca bundle": True,
        "npm registry": True,
        "npm cache": True,
        "render check": True,
        "tokenizer": True,
        "parser": True,
    }
    assert code == 0


def test_failing_checks_exit_1_with_hints(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    instance: str,
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{free_port()}/0")
    # Refused at once, from inside the probe container: no registry answers there.
    monkeypatch.setenv("KILN_NPM_REGISTRY", "http://127.0.0.1:9/")
    code = main(["doctor", "--data-dir", str(tmp_path / "data")])
    out = capsys.readouterr().out
    assert code == 1
    assert "FAIL  redis " in out
    assert "FAIL  tokenizer " in out
    assert "hint: point TIKTOKEN_CACHE_DIR" in out
    assert "ok    docker " in out
    assert "FAIL  npm registry     http://127.0.0.1:9/ unreachable from a sandbox through " in out
    assert "npm error code E404 (the npm proxy got no answer from its upstream)" in out
    assert "ok    ca bundle" in out


def test_an_unwritable_data_dir_fails(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = check_data_dir(blocker / "data")
    assert not result.ok
    assert "KILN_DATA_DIR" in result.hint


def test_without_redis_url_the_binary_is_enough(tmp_path: Path) -> None:
    result = check_redis(None, tmp_path)
    assert result.ok
    assert "redis-server" in result.detail


def test_the_parser_line_says_which_runs_and_how_to_compile_it(tmp_path: Path) -> None:
    compiled = check_parser(ParserChoice("compiled", "fresh mypyc build k", tmp_path / "k"))
    assert (compiled.ok, compiled.detail) == (True, f"compiled (mypyc), {tmp_path / 'k'}")
    missing = check_parser(ParserChoice("python", "no compiled parser is built"))
    assert missing.ok
    assert missing.detail.endswith("; `make parser-compiled` compiles it")
    forced = check_parser(ParserChoice("python", "KILN_PARSER=python"))
    assert forced.detail == "pure Python: KILN_PARSER=python"


def test_format() -> None:
    assert (
        format_result(CheckResult("docker", True, "engine 27")) == f"ok    {'docker':<16} engine 27"
    )
    failed = format_result(CheckResult("redis", False, "down", "start it"))
    assert failed.splitlines() == [f"FAIL  {'redis':<16} down", f"{'':23}hint: start it"]


SMALL = SandboxSettings(instance="blue", max_sandboxes=4, mem_limit="1g", pids_limit=512)


@pytest.mark.parametrize(
    ("instance", "ok"),
    [pytest.param(3, True, id="room-left"), pytest.param(4, False, id="full")],
)
def test_capacity_reports_the_limit_and_what_is_in_use(instance: int, ok: bool) -> None:
    result = capacity_result(SMALL, InUse(instance=instance, host=9))
    assert result.ok is ok
    assert result.detail.startswith(f"{instance} of 4 sandboxes in use (KILN_MAX_SANDBOXES;")
    assert "9 kiln sandboxes on this host in all" in result.detail


@pytest.mark.parametrize(
    ("headroom_mib", "ok", "room"),
    [
        pytest.param(2 * 244, True, 2, id="room-for-two"),
        pytest.param(243, False, 0, id="not-one"),
    ],
)
def test_memory_says_how_many_new_sandboxes_fit_above_the_reserve(
    headroom_mib: int, ok: bool, room: int
) -> None:
    total = 10 * 2**30
    result = memory_result(SMALL, HostMemory(total, total // 10 + headroom_mib * 2**20))
    assert result.ok is ok
    assert "1.0 GiB (10 %, KILN_HOST_MEMORY_RESERVE) kept free" in result.detail
    assert (
        f"room for {room} more new vite-react sandboxes busy (idle/busy: vite-react 104/244 MiB,"
        in (result.detail)
    )


def test_pids_fail_when_the_configured_sandboxes_would_not_fit_idle() -> None:
    assert pids_result(SMALL, 32768).ok
    tight = pids_result(SMALL, 100)
    assert not tight.ok
    assert "pid_max 100; 4 idle sandboxes use about 128, 2048 if each" in tight.detail


@pytest.mark.parametrize(
    ("bridge_filter", "ok"),
    [
        pytest.param(1, True, id="filtered"),
        pytest.param(0, False, id="off"),
        pytest.param(None, False, id="unknown"),
    ],
)
def test_networks_count_shared_and_old_ones_and_need_bridge_filtering(
    bridge_filter: int | None, ok: bool
) -> None:
    networks = [{"kiln.sandbox": "shared"}, {"kiln.sandbox": "shared"}, {"kiln.sandbox": "ab12"}]
    result = networks_result(networks, bridge_filter)
    assert result.ok is ok
    assert result.detail.startswith("2 shared, 1 per-sandbox")
    assert ok or "bridge-nf-call-iptables" in result.hint


def test_disk_reports_the_quota_and_the_space_left_for_all_sandboxes() -> None:
    if not usable_root(DEFAULT_DISK_ROOT) and not os.environ.get("CI"):  # CI's setup makes it
        pytest.skip("no btrfs quota disk here (scripts/setup.sh makes one)")
    result = disk_result(replace(SMALL, disk_root=DEFAULT_DISK_ROOT))
    assert result.ok
    assert result.detail.startswith("each sandbox may write 2g (KILN_SANDBOX_DISK_QUOTA) on ")


@pytest.mark.parametrize(
    ("root", "setup_made_one", "words"),
    [
        pytest.param(None, False, "no btrfs quota disk: sandboxes write without a", id="none"),
        pytest.param(Path("/srv"), False, "'/srv' is not a btrfs mount", id="not-btrfs"),
        pytest.param(None, True, "not root, so no quotas on '/var/lib/kiln/sandbox-", id="user"),
    ],
)
def test_no_disk_quota_fails_in_words(
    root: Path | None, setup_made_one: bool, words: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        "app.cli.doctor_capacity.usable_root", lambda path: setup_made_one and path != root
    )
    result = disk_result(replace(SMALL, disk_root=root))
    assert not result.ok
    assert result.detail.startswith(words)
    assert "scripts/setup.sh" in result.hint


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        pytest.param({}, None, id="one-engine"),
        pytest.param({"KILN_SANDBOX_BACKEND": "swarm"}, "unix:///var/run/docker.sock", id="swarm"),
        pytest.param(
            {"KILN_SANDBOX_BACKEND": "swarm", "KILN_SWARM_IMAGE_SOURCE": "tcp://10.0.0.9:2375"},
            "tcp://10.0.0.9:2375",
            id="swarm-source-set",
        ),
    ],
)
def test_on_a_swarm_images_are_checked_on_their_source(
    env: dict[str, str], expected: str | None
) -> None:
    assert image_source(env) == expected


@pytest.mark.anyio
async def test_an_image_source_that_does_not_answer_is_one_line_in_words() -> None:
    # tcp: docker-py leaks the socket of a refused unix-socket connection
    url = f"tcp://127.0.0.1:{free_port()}"
    [result] = await check_images_on(url, {})
    assert (result.name, result.ok) == ("images", False)
    assert url in result.detail
    assert "KILN_SWARM_IMAGE_SOURCE" in (result.hint or "")


class _SwarmManager:
    """A swarm manager's client as the doctor's capacity rows use it: services by label."""

    def __init__(self, instances: list[str]) -> None:
        self.services = SimpleNamespace(list=self._list)
        self._instances = instances

    def _list(self, filters: dict[str, list[str] | str]) -> list[object]:
        labels = filters["label"]
        wanted = [label for label in labels if "=" in label] if isinstance(labels, list) else []
        ours = [i for i in self._instances if not wanted or wanted == [f"kiln.instance={i}"]]
        return [object() for _ in ours]


@pytest.mark.anyio
async def test_on_a_swarm_the_capacity_rows_read_the_swarm_not_this_host() -> None:
    env = {"KILN_SANDBOX_BACKEND": "swarm", "KILN_INSTANCE": "mine", "KILN_MAX_SANDBOXES": "9"}
    client: Any = _SwarmManager(["mine", "mine", "other"])
    rows = {row.name: row for row in await check_capacity(client, env)}
    assert rows["capacity"].detail.startswith("2 of 9 sandboxes in use")
    assert "3 kiln sandboxes in the swarm in all" in rows["capacity"].detail
    assert "GiB" not in rows["memory"].detail  # this host's MemAvailable says nothing here
    assert all(row.ok for row in rows.values())
    assert set(rows) == {"capacity", "memory", "pids", "networks", "disk"}
