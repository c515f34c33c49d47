"""How many warm sandboxes a template's pool aims for: a pure function of recent demand.

:data:`RULES` is the whole policy, first match wins:

1. ``off``: the maximum is 0 - no pool;
2. ``host_full``: what demand asks for does not fit on the host - the pool grows only into free
   slots, and past its minimum it leaves :data:`USER_RESERVE` of them to users, giving back
   growth on a host that filled up meanwhile (host capacity
   always wins: an ``acquire`` at the limit even gives up a warm sandbox of its own process,
   see :mod:`sandbox.lifecycle.manager`; the reserve covers another process's acquire);
3. ``idle``: no acquire of the template in the window - the minimum;
4. ``burst``: more acquires in the window than the maximum - the maximum;
5. ``demand``: otherwise one warm sandbox per recent acquire, at least the minimum.

Demand counts the acquires that needed a new sandbox (a chat reusing its own asks nothing of
the pool): as many of them in the last window as came, that many are likely to come again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

USER_RESERVE = 1  # free slots growth past the minimum never takes


@dataclass(frozen=True, slots=True)
class PoolFacts:
    """What the sizing of one template's pool looks at."""

    recent: int  # acquires of the template in the window
    window: float  # seconds
    minimum: int
    maximum: int
    ready: int  # warm sandboxes of the template held now
    free: int  # sandboxes the host may still add (by its count limit and its memory reserve)

    @property
    def wanted(self) -> int:
        """Recent demand clamped to ``[minimum, maximum]``."""
        return max(self.minimum, min(self.maximum, self.recent))

    @property
    def room(self) -> int:
        """The most the pool may hold on this host: up to the minimum any free slot, past it
        all but :data:`USER_RESERVE` of them."""
        fits = self.ready + self.free
        return max(min(self.minimum, fits), fits - USER_RESERVE)


@dataclass(frozen=True, slots=True)
class PoolTarget:
    """The size a pool aims for, the rule that decided it and why, in words."""

    size: int
    rule: str
    why: str


@dataclass(frozen=True, slots=True)
class Rule:
    """If ``applies(facts)``, the target is ``decide(facts)``."""

    name: str
    applies: Callable[[PoolFacts], bool]
    decide: Callable[[PoolFacts], PoolTarget]


def _acquires(facts: PoolFacts) -> str:
    return f"{facts.recent} acquires in the last {facts.window:g}s"


def _off(facts: PoolFacts) -> PoolTarget:
    return PoolTarget(0, "off", "the pool's maximum is 0 (KILN_WARM_POOL_MAX)")


def _host_full(facts: PoolFacts) -> PoolTarget:
    why = (
        f"{_acquires(facts)} ask for {facts.wanted}, but the host has room for "
        f"{facts.free} more sandboxes (KILN_MAX_SANDBOXES, KILN_HOST_MEMORY_RESERVE), "
        f"{USER_RESERVE} kept for users"
    )
    return PoolTarget(facts.room, "host_full", why)


def _idle(facts: PoolFacts) -> PoolTarget:
    why = f"no acquires in the last {facts.window:g}s: the minimum (KILN_WARM_POOL_MIN)"
    return PoolTarget(facts.minimum, "idle", why)


def _burst(facts: PoolFacts) -> PoolTarget:
    why = f"{_acquires(facts)}: the maximum (KILN_WARM_POOL_MAX)"
    return PoolTarget(facts.maximum, "burst", why)


def _demand(facts: PoolFacts) -> PoolTarget:
    floor = " (the minimum)" if facts.wanted > facts.recent else ""
    return PoolTarget(facts.wanted, "demand", f"{_acquires(facts)}{floor}")


# fmt: off
RULES: tuple[Rule, ...] = (
    Rule("off", lambda f: f.maximum <= 0, _off),
    Rule("host_full", lambda f: f.wanted > f.room, _host_full),
    Rule("idle", lambda f: f.recent == 0, _idle),
    Rule("burst", lambda f: f.recent > f.maximum, _burst),
    Rule("demand", lambda f: True, _demand),
)
# fmt: on


def pool_target(facts: PoolFacts) -> PoolTarget:
    """The target of the first rule of :data:`RULES` that applies to ``facts``."""
    return next(rule for rule in RULES if rule.applies(facts)).decide(facts)


def recent_count(times: list[float], now: float, window: float) -> int:
    """How many of ``times`` (ascending) fall in the ``window`` seconds up to ``now``; drops
    the older ones from ``times`` (they never count again)."""
    cutoff = now - window
    stale = next((i for i, when in enumerate(times) if when > cutoff), len(times))
    del times[:stale]
    return len(times)
