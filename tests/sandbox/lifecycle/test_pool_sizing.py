"""The warm pool's sizing rule: window, clamp, grow, shrink, and the host's capacity first."""

from __future__ import annotations

import pytest

from sandbox.lifecycle.pool_sizing import RULES, PoolFacts, pool_target, recent_count


def facts(
    recent: int, *, ready: int = 0, free: int = 100, bounds: tuple[int, int] = (1, 3)
) -> PoolFacts:
    return PoolFacts(
        recent=recent, window=600.0, minimum=bounds[0], maximum=bounds[1], ready=ready, free=free
    )


@pytest.mark.parametrize(
    ("recent", "size", "rule"),
    [
        (0, 1, "idle"),  # nobody came: shrink to the minimum
        (1, 1, "demand"),
        (2, 2, "demand"),  # a burst grows the pool...
        (3, 3, "demand"),
        (7, 3, "burst"),  # ...up to the maximum
    ],
)
def test_recent_demand_clamped_to_the_bounds(recent: int, size: int, rule: str) -> None:
    target = pool_target(facts(recent, ready=1))
    assert (target.size, target.rule) == (size, rule)


def test_the_minimum_holds_below_it() -> None:
    target = pool_target(facts(1, bounds=(2, 4)))
    assert (target.size, target.rule) == (2, "demand")
    assert "the minimum" in target.why


def test_a_maximum_of_zero_is_no_pool() -> None:
    target = pool_target(facts(5, bounds=(0, 0)))
    assert (target.size, target.rule) == (0, "off")


def test_the_host_s_capacity_wins_over_demand() -> None:
    target = pool_target(facts(3, ready=1, free=2))
    assert (target.size, target.rule) == (2, "host_full")  # one free slot is left to users
    assert "room for 2 more" in target.why
    assert "KILN_MAX_SANDBOXES" in target.why


def test_a_full_host_takes_back_the_growth_past_the_minimum() -> None:
    # Two warm, the host full: one goes, so a user finds a free slot (and it stays so).
    assert pool_target(facts(3, ready=2, free=0)).size == 1
    assert pool_target(facts(3, ready=1, free=1)).size == 1


def test_growth_past_the_minimum_leaves_a_slot_to_users() -> None:
    assert pool_target(facts(3, ready=1, free=1)).size == 1


def test_the_minimum_may_take_the_last_free_slot() -> None:
    # As before demand sizing: an acquire at the limit gives a warm sandbox up for room.
    target = pool_target(facts(0, ready=0, free=1))
    assert (target.size, target.rule) == (1, "idle")
    assert pool_target(facts(0, ready=0, free=0)).size == 0


def test_why_says_the_demand_in_words() -> None:
    assert pool_target(facts(2)).why == "2 acquires in the last 600s"
    assert "no acquires in the last 600s" in pool_target(facts(0)).why
    assert "KILN_WARM_POOL_MAX" in pool_target(facts(9)).why


def test_the_last_rule_always_applies() -> None:
    assert RULES[-1].applies(facts(2))


def test_the_window_counts_recent_acquires_and_forgets_older_ones() -> None:
    times = [10.0, 20.0, 500.0, 650.0]
    assert recent_count(times, now=700.0, window=600.0) == 2  # 10 and 20 are more than 600s ago
    assert times == [500.0, 650.0]
    assert recent_count(times, now=2000.0, window=600.0) == 0
    assert times == []
