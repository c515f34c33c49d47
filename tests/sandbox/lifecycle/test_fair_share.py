"""Which idle sandboxes a new one replaces (pure rules; the manager's test does it for real)."""

from __future__ import annotations

import pytest

from sandbox.errors import SandboxCapacity
from sandbox.lifecycle.fair_share import RoomFacts, sandboxes_to_give_up
from sandbox.lifecycle.registry import SandboxRecord

NOW = 10_000.0


def record(sandbox_id: str, state: str, owner: str = "ann", idle_for: float = 0.0) -> SandboxRecord:
    return SandboxRecord(
        sandbox_id, "vite-react", "v", "n", state=state, owner=owner, last_used=NOW - idle_for
    )


def facts(
    *, per_user: int = 2, host_full: bool = False, held: frozenset[str] = frozenset()
) -> RoomFacts:
    return RoomFacts("ann", per_user, host_full, NOW - 300, held)


@pytest.mark.parametrize(
    ("records", "given_up"),
    [
        pytest.param([record("a", "in_use")], [], id="under-the-limit"),
        pytest.param(
            [record("a", "idle", idle_for=5), record("b", "idle", idle_for=50)], ["b"], id="lru"
        ),
        pytest.param([record("a", "in_use"), record("b", "idle")], ["b"], id="the-idle-one"),
        pytest.param(
            [record("a", "in_use"), record("w", "warm", owner="")], [], id="warm-is-nobodys"
        ),
        pytest.param(
            [record("a", "in_use"), record("b", "idle", owner="bob")], [], id="others-are-kept"
        ),
    ],
)
def test_past_the_per_user_limit_the_users_least_recently_used_idle_ones_go(
    records: list[SandboxRecord], given_up: list[str]
) -> None:
    assert [r.id for r in sandboxes_to_give_up(records, facts())] == given_up


@pytest.mark.parametrize(
    "held",
    [pytest.param(frozenset(), id="in-use"), pytest.param(frozenset({"b"}), id="held-here")],
)
def test_a_user_whose_sandboxes_are_all_in_use_is_refused_in_words(held: frozenset[str]) -> None:
    records = [record("a", "in_use"), record("b", "in_use" if not held else "idle")]
    with pytest.raises(SandboxCapacity, match=r"KILN_MAX_SANDBOXES_PER_USER") as refused:
        sandboxes_to_give_up(records, facts(held=held))
    assert "'ann' has 2 sandboxes in use, the most one user may have is 2" in str(refused.value)


@pytest.mark.parametrize(
    ("host_full", "idle_for", "given_up"),
    [
        pytest.param(True, 600.0, ["old"], id="full-host-long-idle-goes"),
        pytest.param(True, 60.0, [], id="full-host-recently-used-stays"),
        pytest.param(False, 600.0, [], id="room-left-the-reaper-decides"),
    ],
)
def test_on_a_full_host_the_sandbox_idle_longest_goes_after_the_short_ttl(
    host_full: bool, idle_for: float, given_up: list[str]
) -> None:
    records = [
        record("old", "idle", owner="bob", idle_for=idle_for),
        record("newer", "idle", owner="cy", idle_for=idle_for / 2),
        record("busy", "in_use", owner="dan", idle_for=10_000),
    ]
    chosen = sandboxes_to_give_up(records, facts(host_full=host_full))
    assert [r.id for r in chosen] == given_up
